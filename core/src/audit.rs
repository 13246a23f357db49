//! The audit log: one event on the tracing target `audit` for each session
//! created, deleted or expired, each bridge attached, replaced or ended, and
//! each tool call or request the app answers, and each decision of the
//! confirmation gate (`tool_confirmation`, with `tool`, `decision`,
//! `subject` and `client_id`).
//!
//! A target of its own lets an operator keep these apart from diagnostics
//! (`RUST_LOG=warn,audit=info`, or a log pipeline matching `"target":"audit"`
//! in JSON lines). Every event carries the same fields, so one query covers
//! them: `event`, `session` (the 8-character prefix), `client` (the peer's
//! address, `-` when unknown), `transport`, for tool calls `tool`,
//! `outcome` and `duration_ms`, for requests `method`, `target_name`,
//! `outcome` and `duration_ms`, and for both `subject` and `client_id`
//! (`"-"` unless an OAuth access token opened the call); a bridge end adds
//! `reason`. Never
//! arguments, results, error texts or tokens: what a tool was asked and
//! answered is the app's business, and tokens are credentials.
//!
//! The audit trail is the record an operator trusts most, so no caller may
//! write a field into it. Every value that came from outside (a session id
//! from a URL, a tool name, a method, a URI or a prompt name) is a string
//! field: quoted and escaped in text lines (`tool="x outcome=\"ok\""`, one
//! field however it is spelled), a JSON string in JSON lines, and cut short
//! in both; so are an access token's subject and client id. These functions take such values only as [`Outside`], which
//! offers no other way to be written; the fields of the proxy's own (event,
//! outcome, transport, the peer's address, the duration) are written as
//! they are.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use crate::caller::OAuthIdentity;
use crate::escape::Outside;
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

/// A session or bridge event: `session_created`, `session_deleted`,
/// `session_expired`, `bridge_attached`, `bridge_replaced`.
pub fn event(event: &'static str, session: Outside<'_>, origin: Origin) {
    tracing::info!(
        target: "audit",
        event,
        session = session.field(),
        client = %Client(origin.client),
        transport = origin.transport.as_str(),
    );
}

/// A bridge that ended, and why.
pub fn bridge_ended(session: Outside<'_>, origin: Origin, reason: &str) {
    tracing::info!(
        target: "audit",
        event = "bridge_ended",
        session = session.field(),
        client = %Client(origin.client),
        transport = origin.transport.as_str(),
        reason,
    );
}

/// How a call or a request ended, and where it came from: the fields
/// [`tool_call`] and [`app_request`] share. `client` is the caller's
/// origin; `transport` is how the call reached the app (its bridge's
/// transport, or `nats` for a bridge on another node; the caller's own when
/// it reached none).
#[derive(Clone, Copy, Debug)]
pub struct Ended<'a> {
    /// How it ended.
    pub outcome: CallOutcome,
    /// How long it took.
    pub duration: Duration,
    /// The caller's address, when known.
    pub client: Option<SocketAddr>,
    /// How it reached the app.
    pub transport: Transport,
    /// Who called, when an OAuth access token said so.
    pub caller: Option<&'a OAuthIdentity>,
}

impl Ended<'_> {
    /// The token's subject, or `-`.
    fn subject(&self) -> Outside<'_> {
        Outside::new(self.caller.map_or("-", |caller| caller.subject.as_str()))
    }

    /// The token's client, or `-`.
    fn client_id(&self) -> Outside<'_> {
        let id = self.caller.map_or("", |caller| caller.client_id.as_str());
        Outside::new(if id.is_empty() { "-" } else { id })
    }
}

/// A request the app answers (`resources/read`, `prompts/get`, ...) that
/// ended; `target` is what it names (a URI, a prompt).
pub fn app_request(
    session: Outside<'_>,
    method: Outside<'_>,
    target: Outside<'_>,
    ended: Ended<'_>,
) {
    tracing::info!(
        target: "audit",
        event = "app_request",
        session = session.field(),
        method = method.field(),
        target_name = target.field(),
        outcome = ended.outcome.as_str(),
        duration_ms = ended.duration.as_secs_f64() * 1000.0,
        client = %Client(ended.client),
        transport = ended.transport.as_str(),
        subject = ended.subject().field(),
        client_id = ended.client_id().field(),
    );
}

/// What the confirmation gate decided about a call of a tool that needs
/// the user's yes: `accepted` and `unconfirmed` (let through because the
/// client cannot be asked) reach the app; every other decision ended it.
pub fn tool_confirmation(
    session: Outside<'_>,
    origin: Origin,
    tool: Outside<'_>,
    decision: &'static str,
    caller: Option<&OAuthIdentity>,
) {
    let subject = caller.map_or("-", |caller| caller.subject.as_str());
    let client_id = caller
        .map(|caller| caller.client_id.as_str())
        .filter(|id| !id.is_empty())
        .unwrap_or("-");
    tracing::info!(
        target: "audit",
        event = "tool_confirmation",
        session = session.field(),
        client = %Client(origin.client),
        transport = origin.transport.as_str(),
        tool = tool.field(),
        decision,
        subject = Outside::new(subject).field(),
        client_id = Outside::new(client_id).field(),
    );
}

/// A tool call that ended.
pub fn tool_call(session: Outside<'_>, tool: Outside<'_>, ended: Ended<'_>) {
    tracing::info!(
        target: "audit",
        event = "tool_call",
        session = session.field(),
        tool = tool.field(),
        outcome = ended.outcome.as_str(),
        duration_ms = ended.duration.as_secs_f64() * 1000.0,
        client = %Client(ended.client),
        transport = ended.transport.as_str(),
        subject = ended.subject().field(),
        client_id = ended.client_id().field(),
    );
}
