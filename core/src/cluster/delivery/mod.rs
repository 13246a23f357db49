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
//! The app's requests to a caller on another node (elicitation, sampling,
//! roots, and the confirmation gate's question) ride on the same call: the
//! calling node says in `Ocp-Askable` what its caller can be asked (the
//! holding node refuses the rest at once, as on one node), and the holding
//! node relays each request on the reply subject (kind `ask`), which the
//! calling node feeds into the call's events, so that its edge asks the
//! client in the client's revision. While a request is out the holding
//! node's clock for the call is paused, so the calling node moves its own
//! deadline (a backstop; the holding node times the call) past the
//! client-request timeout. The client's answer may reach any node: one
//! without the bridge sends it to `{prefix}.answer.{session_id}` (queue
//! group `bridge`, subscribed by the holder beside the calls), which
//! replies with what became of it. A 2026-07-28 retry names in its
//! `requestState` the node its call is parked on (the edge parks calls on
//! the node that answered `input_required`); a node that receives it sends
//! it to `{prefix}.resume.{node}`, which every node subscribes for itself,
//! and relays the answer that node made (`../wire/asks.rs`).
//!
//! The confirmation gate runs on the node holding the bridge, so its
//! question travels like the app's and every answer goes to one place, the
//! bridge's node (`hub/confirm.rs`).
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
use bytes::Bytes;

use crate::bridge::{ClientAnswer, Unanswerable};
use crate::delivery::{RemoteCall, RemoteDelivery, Resumed, Unrouted};
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
/// How long a node waits for the holder of a bridge to say what became of
/// a client's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

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
    /// How long a call may wait for its client, from the hub's settings.
    ask_wait: OnceLock<Duration>,
    /// How long a resumed retry may take, from the hub's settings.
    resume_wait: OnceLock<Duration>,
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
            ask_wait: OnceLock::new(),
            resume_wait: OnceLock::new(),
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

    /// Where a client's answer for the app of a session goes.
    fn answer_subject(&self, session_id: &str) -> String {
        format!("{}.answer.{session_id}", self.node.prefix)
    }

    /// Where a retry for a call parked on `node` goes.
    fn resume_subject(&self, node: &str) -> String {
        format!("{}.resume.{node}", self.node.prefix)
    }

    /// Starts the node's tasks: the route of replies to the calls waiting
    /// here, the ticker that says `alive` for the calls running here, and
    /// the listener for cancellations of those.
    pub(crate) fn start(self: &Arc<Self>, hub: WeakHub) {
        self.changes.start(hub.clone());
        if let Some(config) = hub.upgrade().map(|hub| hub.config().clone()) {
            let _ = self.ask_wait.set(config.client_request_timeout);
            let _ = self
                .resume_wait
                .set(config.max_tool_timeout + config.client_request_timeout);
        }
        tokio::spawn(answering::serve_resumes(
            self.node.client.clone(),
            self.resume_subject(&self.node.id),
            hub.clone(),
            self.outbox.clone(),
        ));
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
        let answers = self.answer_subject(id);
        let subscribed = futures_util::future::try_join3(
            client.queue_subscribe(self.call_subject(id), "bridge".into()),
            client.queue_subscribe(self.request_subject(id), "bridge".into()),
            client.queue_subscribe(answers.clone(), "bridge".into()),
        )
        .await;
        let calls = match subscribed {
            Ok((calls, requests, client_answers)) => futures_util::stream::select(
                futures_util::stream::select(calls, requests),
                client_answers,
            ),
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
            answers,
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

    fn answer_client<'a>(
        &'a self,
        session_id: &'a str,
        request_id: &'a str,
        id: &'a str,
        answer: ClientAnswer,
    ) -> BoxFuture<'a, Result<Result<(), Unanswerable>, Unrouted>> {
        Box::pin(self.send_answer(session_id, request_id, id, answer))
    }

    fn node_id(&self) -> Option<&str> {
        Some(&self.node.id)
    }

    fn resume<'a>(
        &'a self,
        node: &'a str,
        retry: Bytes,
    ) -> BoxFuture<'a, Result<Resumed, Unrouted>> {
        Box::pin(self.send_resume(node, retry))
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
