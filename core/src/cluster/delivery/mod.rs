//! Calls between nodes: NATS request-reply, with progress and liveness
//! streamed back on the reply subject.
//!
//! The calling node publishes a tool call to `{prefix}.call.{session_id}`,
//! and any other MCP request the app answers (`resources/read`,
//! `prompts/get`, ...) to `{prefix}.request.{session_id}`, with a reply
//! subject of its own (`{prefix}.reply.{node}.{n}`, one subscription per
//! node, routed by `n`). The node holding the bridge subscribes to both
//! subjects in queue group `bridge` while it holds the bridge, runs the call
//! on it, and publishes `progress`, `alive` (every second while the call
//! runs), then the answer (`answer` for a tool, `mcp_result` or `mcp_error`
//! for a request) or the `failure`. NATS answers "no responders" when no
//! node holds the bridge; a request has its own subject so that a node of
//! the version before requests crossed nodes never receives one.
//!
//! Per call, the hot path costs as little as it can: one timer on the
//! calling node (the holder's silence and the call's deadline share it), and
//! none on the holding node, where one ticker per node says `alive` for
//! every call it runs.
//!
//! A caller that stops waiting (its MCP client cancelled or went away)
//! publishes `{prefix}.cancel.{node}.{n}`, named after its reply subject.
//! Every node listens on `{prefix}.cancel.>` (cancellations are rare, so one
//! subscription per node costs less than one per call); the node running
//! that call drops it, which tells the app to stop, as on one node.
//!
//! The same node also carries a session's changes to the other nodes that
//! watch it (`../changes.rs`), through the same outbox.
//!
//! The two sides of a call are a file each: `calling.rs` (the node that
//! received the call) and `answering.rs` (the node that holds the bridge).
//! This file holds [`NatsDelivery`], what both sides share, and the seam's
//! implementation.

mod answering;
mod calling;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Node;
use super::changes::Changes;
use super::directory::NatsDirectory;
use super::outbox::{Incoming, Outbox};
use crate::delivery::{RemoteCall, RemoteDelivery};
use crate::directory::SessionRecord;
use crate::escape::Outside;
use crate::hub::{SessionEvent, WeakHub};
use crate::outcome::{InvokeError, Reply};

/// How often the holding node says it is still working on a call.
const ALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Silence after which the calling node gives the holding node up for dead.
const HOLDER_SILENCE: Duration = Duration::from_secs(3);
/// Room for an answer's headers (`Ocp-Kind: answer`) within NATS's
/// `max_payload`, which counts them.
const ANSWER_HEADERS_BYTES: usize = 64;
/// Messages of one call buffered on the calling node.
const REPLY_BUFFER: usize = 256;

/// The calls this node waits on, by the number of their reply subject.
type Waiting = Mutex<HashMap<u64, mpsc::Sender<Incoming>>>;

/// Calls from other nodes running here, by their reply subject.
type Answering = Mutex<HashMap<String, CancellationToken>>;

/// Delivery to bridges held by other nodes, and service of calls for bridges
/// held here.
pub struct NatsDelivery {
    node: Arc<Node>,
    directory: Arc<NatsDirectory>,
    reply_base: String,
    next_reply: AtomicU64,
    waiting: Arc<Waiting>,
    answering: Arc<Answering>,
    serving: Mutex<HashMap<Arc<str>, JoinHandle<()>>>,
    hub: OnceLock<WeakHub>,
    outbox: Outbox,
    changes: Changes,
}

impl NatsDelivery {
    pub(crate) fn new(node: Arc<Node>, directory: Arc<NatsDirectory>) -> Self {
        let reply_base = format!("{}.reply.{}", node.prefix, node.id);
        let outbox = Outbox::start(node.client.clone());
        let changes = Changes::new(node.clone(), directory.clone(), outbox.clone());
        Self {
            node,
            directory,
            reply_base,
            next_reply: AtomicU64::new(0),
            waiting: Arc::default(),
            answering: Arc::default(),
            serving: Mutex::default(),
            hub: OnceLock::new(),
            outbox,
            changes,
        }
    }

    fn call_subject(&self, session_id: &str) -> String {
        format!("{}.call.{session_id}", self.node.prefix)
    }

    /// Where MCP requests other than tool calls go: a subject of their own,
    /// so that a node running a version that forwards only tool calls never
    /// receives one (NATS answers "no responders" instead).
    fn request_subject(&self, session_id: &str) -> String {
        format!("{}.request.{session_id}", self.node.prefix)
    }

    /// Starts the node's tasks: the route of replies to the calls waiting
    /// here, the ticker that says `alive` for the calls running here, and
    /// the listener for cancellations of those.
    pub(crate) fn start(self: &Arc<Self>, hub: WeakHub) {
        self.changes.start(hub.clone());
        let _ = self.hub.set(hub);
        let client = self.node.client.clone();
        tokio::spawn(calling::route_replies(
            client.clone(),
            format!("{}.*", self.reply_base),
            self.waiting.clone(),
        ));
        tokio::spawn(answering::say_alive(client.clone(), self.answering.clone()));
        tokio::spawn(answering::listen_for_cancels(
            client,
            self.node.prefix.clone(),
            self.answering.clone(),
        ));
    }

    fn serving(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, JoinHandle<()>>> {
        self.serving.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Subscribes to the calls and requests for a session whose bridge
    /// attached here and serves them until the bridge detaches.
    async fn serve_calls_for(&self, id: &Arc<str>) {
        let client = &self.node.client;
        let subscribed = futures_util::future::try_join(
            client.queue_subscribe(self.call_subject(id), "bridge".into()),
            client.queue_subscribe(self.request_subject(id), "bridge".into()),
        )
        .await;
        let calls = match subscribed {
            Ok((calls, requests)) => futures_util::stream::select(calls, requests),
            Err(error) => {
                tracing::warn!(session = Outside::session(id).field(), %error, "calls from other nodes cannot reach this bridge");
                return;
            }
        };
        let Some(hub) = self.hub.get().cloned() else {
            return;
        };
        let task = tokio::spawn(answering::serve(
            hub,
            self.answering.clone(),
            self.outbox.clone(),
            id.clone(),
            calls,
        ));
        if let Some(old) = self.serving().insert(id.clone(), task) {
            old.abort();
        }
    }
}

impl RemoteDelivery for NatsDelivery {
    fn deliver<'a>(&'a self, call: RemoteCall<'a>) -> BoxFuture<'a, Result<Reply, InvokeError>> {
        Box::pin(self.call(call))
    }

    fn bridge_attached<'a>(&'a self, session: &'a SessionRecord) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.serve_calls_for(&session.id).await;
            match self.directory.claim(session).await {
                // Request ids go on past every id handed out before this claim.
                Ok(revision) => session.continue_request_ids_after(revision << 32),
                Err(error) => {
                    tracing::warn!(session = Outside::session(&session.id).field(), %error, "cannot record this node as the bridge holder");
                }
            }
        })
    }

    fn bridge_detached(&self, session_id: &str) {
        if let Some(task) = self.serving().remove(session_id) {
            task.abort();
        }
    }

    fn connected(&self) -> Option<bool> {
        Some(self.node.connected())
    }

    fn publish_change(&self, session_id: &str, change: &SessionEvent) {
        self.changes.publish(session_id, change);
    }

    fn watch_changes(&self, session_id: &Arc<str>) -> BoxFuture<'static, ()> {
        self.changes.watch(session_id)
    }

    fn unwatch_changes(&self, session_id: &str) {
        self.changes.unwatch(session_id);
    }

    fn ready(&self) -> Result<(), String> {
        if !self.node.connected() {
            return Err("NATS is unreachable".into());
        }
        if !self.directory.ready() {
            return Err("the session directory in NATS is not open yet".into());
        }
        Ok(())
    }
}
