//! Delivering a call to a bridge this process does not hold.
//!
//! The hub delivers a call itself when the session's bridge is attached
//! here. Otherwise it asks its [`RemoteDelivery`]: the single-node server has
//! no other place a bridge could be ([`NoRemote`] answers "not connected" at
//! once); cluster mode sends the call to the node that holds the bridge and
//! relays its progress and answer. The hub tells the delivery when bridges
//! come and go here, so that calls from elsewhere can find them.

use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::call::CallContext;
use crate::directory::SessionRecord;
use crate::outcome::{InvokeError, ToolOutcome};

/// A call for a session whose bridge is not attached to this process.
#[derive(Debug)]
pub struct RemoteCall<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The tool, known to exist in the session.
    pub tool: &'a str,
    /// The arguments, a JSON object.
    pub arguments_json: String,
    /// The request's context, progress sink included.
    pub context: CallContext,
    /// How long the caller waits for the answer.
    pub timeout: Duration,
}

/// Reaches bridges held elsewhere.
pub trait RemoteDelivery: Send + Sync + 'static {
    /// Delivers `call` to wherever the session's bridge is, and waits for the
    /// answer within `call.timeout`.
    fn invoke<'a>(
        &'a self,
        call: RemoteCall<'a>,
    ) -> BoxFuture<'a, Result<ToolOutcome, InvokeError>>;

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
}

/// A single node: no bridge exists anywhere but here.
#[derive(Debug, Default)]
pub struct NoRemote;

impl RemoteDelivery for NoRemote {
    fn invoke<'a>(
        &'a self,
        _call: RemoteCall<'a>,
    ) -> BoxFuture<'a, Result<ToolOutcome, InvokeError>> {
        Box::pin(std::future::ready(Err(InvokeError::NotConnected)))
    }

    fn bridge_attached<'a>(&'a self, _session: &'a SessionRecord) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn bridge_detached(&self, _session_id: &str) {}
}
