//! `openclaw-proxy-stdio`: MCP over stdin/stdout for clients that spawn MCP
//! servers as child processes. The binary (`main.rs`) reads the command line
//! and runs one of the two modes:
//!
//! - [`relay`] (default): forwards MCP between stdio and an openclaw-proxy
//!   server's `/v1/mcp`, bound to one session.
//! - [`gateway`]: serves the OpenClaw Gateway's tools.
//!
//! Both read stdin through [`wire::LineReader`] and [`line::parse`] (bounded
//! lines, every bad line answered with a JSON-RPC error), write stdout
//! through [`wire::output`] (a failed write stops the process), and speak
//! HTTP through [`http::client`] (timeouts, bounded answers, no proxy for
//! loopback), with the [`limits`] they share. `line` is public for the fuzz
//! targets in `stdio/fuzz` as much as for the binary.

pub mod gateway;
pub mod http;
pub mod limits;
pub mod line;
pub mod relay;
pub mod wire;
