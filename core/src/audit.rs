//! The audit log: one event on the tracing target `audit` for each session
//! created, deleted or expired, each bridge attached, replaced or ended, and
//! each tool call.
//!
//! A target of its own lets an operator keep these apart from diagnostics
//! (`RUST_LOG=warn,audit=info`, or a log pipeline matching `"target":"audit"`
//! in JSON lines). Every event carries the same fields, so one query covers
//! them: `event`, `session` (the 8-character prefix), `client` (the peer's
//! address, `-` when unknown), `transport`, and for tool calls `tool`,
//! `outcome` and `duration_ms`, and `subject` and `client_id` (`-` unless
//! an OAuth access token opened the call); a bridge end adds `reason`. Never
//! arguments, results, error texts or tokens: what a tool was asked and
//! answered is the app's business, and tokens are credentials.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::caller::OAuthIdentity;
use crate::escape;
use crate::metrics::{CallOutcome, Transport};

/// Where a request came from, for audit events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// How it arrived.
    pub transport: Transport,
    /// The peer's address, when known.
    pub client: Option<SocketAddr>,
}

impl Origin {
    /// An origin on `transport` from `client`.
    pub fn new(transport: Transport, client: Option<SocketAddr>) -> Self {
        Self { transport, client }
    }
}

/// The peer address of a connection, put in each request's extensions by
/// the server, so every transport (gRPC included) can name its client.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub SocketAddr);

/// A client address, or `-`.
struct Client(Option<SocketAddr>);

impl fmt::Display for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(address) => address.fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// The OAuth subject of a call, escaped, or `-`.
struct Subject<'a>(Option<&'a OAuthIdentity>);

impl fmt::Display for Subject<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(identity) => escape::truncated(&identity.subject).fmt(f),
            None => f.write_str("-"),
        }
    }
}

/// The OAuth client of a call, escaped, or `-`.
struct ClientId<'a>(Option<&'a OAuthIdentity>);

impl fmt::Display for ClientId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.map(|identity| identity.client_id.as_str()) {
            Some(id) if !id.is_empty() => escape::truncated(id).fmt(f),
            _ => f.write_str("-"),
        }
    }
}

/// The short, escaped form of a session id (ids of unknown sessions come
/// from outside), for audit events and span attributes.
pub fn short_session(id: &str) -> std::borrow::Cow<'_, str> {
    escape::truncated_to(escape::short_id(id), 8)
}

/// A session or bridge event: `session_created`, `session_deleted`,
/// `session_expired`, `bridge_attached`, `bridge_replaced`.
pub fn event(event: &'static str, session_id: &str, origin: Origin) {
    tracing::info!(
        target: "audit",
        event,
        session = %short_session(session_id),
        client = %Client(origin.client),
        transport = origin.transport.as_str(),
    );
}

/// A bridge that ended, and why.
pub fn bridge_ended(session_id: &str, origin: Origin, reason: &str) {
    tracing::info!(
        target: "audit",
        event = "bridge_ended",
        session = %short_session(session_id),
        client = %Client(origin.client),
        transport = origin.transport.as_str(),
        reason,
    );
}

/// A request the app answers (`resources/read`, `prompts/get`, ...) that
/// ended; `target` is what it names (a URI, a prompt). The fields are those
/// of [`tool_call`].
#[allow(clippy::too_many_arguments)]
pub fn app_request(
    session_id: &str,
    method: &str,
    target: &str,
    outcome: CallOutcome,
    duration: Duration,
    client: Option<SocketAddr>,
    transport: Transport,
    caller: Option<&OAuthIdentity>,
) {
    tracing::info!(
        target: "audit",
        event = "app_request",
        session = %short_session(session_id),
        method = %escape::truncated(method),
        target_name = %escape::truncated(target),
        outcome = outcome.as_str(),
        duration_ms = duration.as_secs_f64() * 1000.0,
        client = %Client(client),
        transport = transport.as_str(),
        subject = %Subject(caller),
        client_id = %ClientId(caller),
    );
}

/// A tool call that ended. `client` is the caller's origin; `transport` is
/// how the call reached the app (its bridge's transport, or `nats` for a
/// bridge on another node; the caller's own when it reached none).
pub fn tool_call(
    session_id: &str,
    tool: &str,
    outcome: CallOutcome,
    duration: Duration,
    client: Option<SocketAddr>,
    transport: Transport,
    caller: Option<&OAuthIdentity>,
) {
    tracing::info!(
        target: "audit",
        event = "tool_call",
        session = %short_session(session_id),
        tool = %escape::truncated(tool),
        outcome = outcome.as_str(),
        duration_ms = duration.as_secs_f64() * 1000.0,
        client = %Client(client),
        transport = transport.as_str(),
        subject = %Subject(caller),
        client_id = %ClientId(caller),
    );
}
