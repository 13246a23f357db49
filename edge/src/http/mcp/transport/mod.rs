//! The one transport layer of the MCP server: how a POSTed message is read
//! ([`request`]: the headers, the envelope, what the server reads of
//! `_meta`) and how a request is answered ([`answer`]: JSON, or an event
//! stream carrying what the client hears before the answer). The methods
//! sit above it; nothing here knows one method from another beyond the
//! headers that name them at 2026-07-28.

pub mod answer;
pub mod request;
