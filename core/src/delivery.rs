//! Delivering a call to a bridge this process does not hold.
//!
//! A call is a tool call or any other MCP request the app answers
//! ([`Asked`]); both travel the same way. The hub delivers a call itself
//! when the session's bridge is attached here. Otherwise it asks its
//! [`RemoteDelivery`]: the single-node server has no other place a bridge
//! could be ([`NoRemote`] answers "not connected" at once); cluster mode
//! sends the call to the node that holds the bridge and relays its progress
//! and answer. The hub tells the delivery when bridges
//! come and go here, so that calls from elsewhere can find them.
//!
//! The same seam carries a session's changes (`hub/changes.rs`) between
//! processes: the hub hands it each change that happens here, and tells it
//! when a session gains its first watcher here and loses its last, so that
//! changes made elsewhere reach those watchers too. One node has nowhere to
//! send them and nothing to hear.
//!
//! And it carries what the app's requests to a caller (elicitation,
//! sampling, roots) need besides the call itself: a client's answer that
//! reaches a process without the app's bridge goes to the one that holds
//! it ([`RemoteDelivery::answer_client`]), and a 2026-07-28 retry whose
//! call is parked in another process is resumed there
//! ([`RemoteDelivery::resume`], served by the edge's
//! [`Resumer`](crate::hub::Resumer)).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;

use crate::bridge::{ClientAnswer, Unanswerable};
use crate::call::CallContext;
use crate::change::SessionEvent;
use crate::directory::SessionRecord;
use crate::outcome::{InvokeError, McpReply, Reply, ToolOutcome};

/// A call for a session whose bridge is not attached to this process.
#[derive(Debug)]
pub struct RemoteCall<'a> {
    /// The session.
    pub session_id: &'a str,
    /// What the app is asked: a tool call or another MCP request.
    pub asked: Asked<'a>,
    /// The request's context, progress sink included.
    pub context: CallContext,
    /// How long the caller waits for the answer.
    pub timeout: Duration,
}

/// What a remote call asks of the app; the answer is the matching
/// [`Reply`].
#[derive(Debug)]
pub enum Asked<'a> {
    /// A `tools/call`, answered by [`Reply::Tool`].
    Tool {
        /// The tool, known to exist in the session.
        tool: &'a str,
        /// The arguments, a JSON object.
        arguments_json: String,
        /// Whether the tool needs the user's confirmation, which the
        /// process holding the bridge asks for.
        gated: bool,
    },
    /// Any other MCP request the app answers (`resources/read`,
    /// `prompts/get`, ...), answered by [`Reply::Mcp`].
    Request {
        /// The MCP method.
        method: &'a str,
        /// What it names (a URI, a prompt); empty when it names nothing.
        target: &'a str,
        /// The request's params, a JSON object, passed on exactly.
        params_json: String,
    },
}

/// An answer of the kind a call expects, taken out of a [`Reply`].
pub trait FromReply: Sized {
    /// The answer, or an error when the node holding the bridge answered
    /// with the other kind (it never should).
    fn from_reply(reply: Reply) -> Result<Self, InvokeError>;
}

impl FromReply for ToolOutcome {
    fn from_reply(reply: Reply) -> Result<Self, InvokeError> {
        match reply {
            Reply::Tool(outcome) => Ok(outcome),
            Reply::Mcp(_) => Err(mismatched("a tool call", "an MCP reply")),
        }
    }
}

impl FromReply for McpReply {
    fn from_reply(reply: Reply) -> Result<Self, InvokeError> {
        match reply {
            Reply::Mcp(reply) => Ok(reply),
            Reply::Tool(_) => Err(mismatched("an MCP request", "a tool result")),
        }
    }
}

fn mismatched(asked: &str, answered: &str) -> InvokeError {
    InvokeError::Remote(format!(
        "The proxy node holding the app's bridge answered {asked} with {answered}."
    ))
}

/// Reaches bridges held elsewhere.
pub trait RemoteDelivery: Send + Sync + 'static {
    /// Delivers `call` to wherever the session's bridge is, and waits for the
    /// answer within `call.timeout`: a [`Reply::Tool`] for [`Asked::Tool`],
    /// a [`Reply::Mcp`] for [`Asked::Request`].
    fn deliver<'a>(&'a self, call: RemoteCall<'a>) -> BoxFuture<'a, Result<Reply, InvokeError>>;

    /// A bridge for the session was attached here: make calls from elsewhere
    /// find it. Done before the app is told it is attached.
    fn bridge_attached<'a>(&'a self, session: &'a SessionRecord) -> BoxFuture<'a, ()>;

    /// The bridge for `session_id` here ended.
    fn bridge_detached(&self, session_id: &str);

    /// Whether bridges elsewhere can be reached; the error says why not.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// Whether this node is connected to the cluster; `None` on a single
    /// node (no cluster to be connected to).
    fn connected(&self) -> Option<bool> {
        None
    }

    /// A change of the session happened here (the watchers here are told by
    /// the hub): tell the watchers elsewhere. Never waits, since it is
    /// called from the task that reads the app's bridge; a change that
    /// cannot be sent is dropped (and logged).
    fn publish_change(&self, _session_id: &str, _change: &SessionEvent) {}

    /// The session has its first watcher here: pass on the changes made
    /// elsewhere from now on (to `Hub::hear_change`). The future
    /// ends once they will be heard, or it is known they cannot be.
    fn watch_changes(&self, _session_id: &Arc<str>) -> BoxFuture<'static, ()> {
        Box::pin(std::future::ready(()))
    }

    /// The session's last watcher here is gone (or the session is): stop
    /// passing its changes on.
    fn unwatch_changes(&self, _session_id: &str) {}

    /// Passes a client's answer to request `id` of the call `request_id`
    /// on to the process holding the session's bridge; what became of it
    /// there.
    fn answer_client<'a>(
        &'a self,
        _session_id: &'a str,
        _request_id: &'a str,
        _id: &'a str,
        _answer: ClientAnswer,
    ) -> BoxFuture<'a, Result<Result<(), Unanswerable>, Unrouted>> {
        Box::pin(std::future::ready(Err(Unrouted::NoHolder)))
    }

    /// This process's name among those a parked 2026-07-28 call may wait
    /// in (sealed in its `requestState`); `None` on a single node.
    fn node_id(&self) -> Option<&str> {
        None
    }

    /// Resumes a retry (as the edge's [`Resumer`](crate::hub::Resumer)
    /// reads it) on the process `node`, where its call is parked; that
    /// process's answer.
    fn resume<'a>(
        &'a self,
        _node: &'a str,
        _retry: Bytes,
    ) -> BoxFuture<'a, Result<Resumed, Unrouted>> {
        Box::pin(std::future::ready(Err(Unrouted::NoHolder)))
    }
}

/// Why a message for another process did not reach one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unrouted {
    /// No process holds what it is for (the app's bridge, the parked
    /// call).
    #[error("no proxy node holds the app's bridge of this session")]
    NoHolder,
    /// The other processes cannot be reached, or did not answer; the
    /// sentence says which.
    #[error("{0}")]
    Unavailable(String),
}

/// The HTTP answer to a retry resumed in another process, as that process
/// made it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    /// The HTTP status.
    pub status: u16,
    /// Whether the body is an event stream (else one JSON message).
    pub event_stream: bool,
    /// The body, complete.
    pub body: Bytes,
}

/// A single node: no bridge exists anywhere but here.
#[derive(Debug, Default)]
pub struct NoRemote;

impl RemoteDelivery for NoRemote {
    fn deliver<'a>(&'a self, _call: RemoteCall<'a>) -> BoxFuture<'a, Result<Reply, InvokeError>> {
        Box::pin(std::future::ready(Err(InvokeError::NotConnected)))
    }

    fn bridge_attached<'a>(&'a self, _session: &'a SessionRecord) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn bridge_detached(&self, _session_id: &str) {}
}
