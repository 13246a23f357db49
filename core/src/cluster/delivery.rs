//! Calls between nodes: NATS request-reply, with progress and liveness
//! streamed back on the reply subject.
//!
//! The calling node publishes the call to `{prefix}.call.{session_id}` with a
//! reply subject of its own (`{prefix}.reply.{node}.{n}`, one subscription per
//! node, routed by `n`). The node holding the bridge subscribes to the call
//! subject in queue group `bridge` while it holds the bridge, runs the call
//! on it, and publishes `progress`, `alive` (every second while the call
//! runs), then the `answer` or the `failure`. NATS answers "no responders"
//! when no node holds the bridge.
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use async_nats::{HeaderMap, Message, StatusCode};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::Node;
use super::directory::NatsDirectory;
use super::outbox::{Outbox, Outgoing, Reply};
use super::wire::{
    self, Answer, Failure, KIND, KIND_ALIVE, KIND_ANSWER, KIND_FAILURE, KIND_PROGRESS, Progress,
    ReadAnswer,
};
use crate::call::CallContext;
use crate::delivery::{RemoteCall, RemoteDelivery};
use crate::directory::SessionRecord;
use crate::escape::short_id as short;
use crate::hub::WeakHub;
use crate::outcome::{InvokeError, ToolOutcome};
use crate::proto;
use crate::trace;
use tracing::Instrument;

/// How often the holding node says it is still working on a call.
const ALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Silence after which the calling node gives the holding node up for dead.
const HOLDER_SILENCE: Duration = Duration::from_secs(3);
/// Room for an answer's headers (`Ocp-Kind: answer`) within NATS's
/// `max_payload`, which counts them.
const ANSWER_HEADERS_BYTES: usize = 64;
/// Messages of one call buffered on the calling node.
const REPLY_BUFFER: usize = 256;

type Waiting = Mutex<HashMap<u64, mpsc::Sender<Reply>>>;

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
}

impl NatsDelivery {
    pub(crate) fn new(node: Arc<Node>, directory: Arc<NatsDirectory>) -> Self {
        let reply_base = format!("{}.reply.{}", node.prefix, node.id);
        let outbox = Outbox::start(node.client.clone());
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
        }
    }

    fn call_subject(&self, session_id: &str) -> String {
        format!("{}.call.{session_id}", self.node.prefix)
    }

    /// Subscribes this node's reply subjects and routes what arrives to the
    /// waiting calls.
    pub(crate) fn start(self: &Arc<Self>, hub: WeakHub) {
        let _ = self.hub.set(hub);
        let client = self.node.client.clone();
        let subject = format!("{}.*", self.reply_base);
        let waiting = self.waiting.clone();
        tokio::spawn(async move {
            let mut replies = match client.subscribe(subject).await {
                Ok(replies) => replies,
                Err(error) => {
                    tracing::error!(%error, "cannot subscribe to this node's reply subject; calls to other nodes will fail");
                    return;
                }
            };
            while let Some(message) = replies.next().await {
                route_reply(&waiting, message);
            }
        });
        // One ticker says `alive` for every call this node runs for another,
        // all at once: one waiting on a full send queue holds no other up.
        let client = self.node.client.clone();
        let answering = self.answering.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(ALIVE_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let replies: Vec<String> = answering
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .keys()
                    .cloned()
                    .collect();
                let alive = replies.into_iter().map(|reply| {
                    let mut headers = HeaderMap::new();
                    headers.insert(KIND, KIND_ALIVE);
                    let client = client.clone();
                    async move {
                        if let Err(error) = client
                            .publish_with_headers(reply, headers, Bytes::new())
                            .await
                        {
                            tracing::debug!(%error, "alive for another node not sent");
                        }
                    }
                });
                futures_util::future::join_all(alive).await;
            }
        });
        let client = self.node.client.clone();
        let prefix = self.node.prefix.clone();
        let answering = self.answering.clone();
        tokio::spawn(async move {
            let mut cancels = match client.subscribe(format!("{prefix}.cancel.>")).await {
                Ok(cancels) => cancels,
                Err(error) => {
                    tracing::warn!(%error, "cannot subscribe to cancellations; calls from other nodes run until answered or timed out");
                    return;
                }
            };
            let cancel_prefix = format!("{prefix}.cancel.");
            while let Some(message) = cancels.next().await {
                let Some(call) = message.subject.strip_prefix(cancel_prefix.as_str()) else {
                    continue;
                };
                let reply = format!("{prefix}.reply.{call}");
                let token = answering
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&reply)
                    .cloned();
                if let Some(token) = token {
                    token.cancel();
                }
            }
        });
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::Sender<Reply>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn serving(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, JoinHandle<()>>> {
        self.serving.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Delivers a call; a node that answers "not connected" held the bridge
    /// a moment ago (it just moved), so the call is offered again, briefly.
    async fn call(&self, call: RemoteCall<'_>) -> Result<ToolOutcome, InvokeError> {
        let RemoteCall {
            session_id,
            tool,
            arguments_json,
            context,
            timeout,
        } = call;
        let mut context = Some(context);
        for delay_ms in [2, 10, 30] {
            let attempt = RemoteCall {
                session_id,
                tool,
                arguments_json: arguments_json.clone(),
                context: context.take().unwrap_or_default(),
                timeout,
            };
            match self.call_once(attempt).await {
                Err(Moved(back)) => {
                    context = Some(back);
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                }
                Ok(outcome) => return outcome,
            }
        }
        Err(InvokeError::NotConnected)
    }

    async fn call_once(
        &self,
        call: RemoteCall<'_>,
    ) -> Result<Result<ToolOutcome, InvokeError>, Moved> {
        if !self.node.connected() {
            return Ok(Err(unreachable()));
        }
        let n = self.next_reply.fetch_add(1, Ordering::Relaxed);
        let (sender, mut replies) = mpsc::channel(REPLY_BUFFER);
        self.waiting().insert(n, sender.clone());
        let _registered = Registered {
            waiting: &self.waiting,
            n,
        };
        let _in_flight = self.outbox.call_in_flight();
        let mut headers = HeaderMap::new();
        headers.insert(wire::TOOL, call.tool);
        headers.insert(
            wire::TIMEOUT_MS,
            call.timeout.as_millis().to_string().as_str(),
        );
        if !call.context.meta_json.is_empty() {
            headers.insert(wire::META, call.context.meta_json.as_str());
        }
        if let Ok(client) = serde_json::to_string(&wire::Client::of(&call.context.client)) {
            headers.insert(wire::CLIENT, client.as_str());
        }
        // The holding node's spans become children of this one.
        let trace_parent = trace::hand_on(&tracing::Span::current(), &call.context.trace_parent);
        if !trace_parent.is_empty() {
            headers.insert(wire::TRACE_PARENT, trace_parent.as_str());
        }
        let deadline = tokio::time::Instant::now() + call.timeout;
        let request = Outgoing {
            subject: self.call_subject(call.session_id).into(),
            reply: Some(format!("{}.{n}", self.reply_base).into()),
            headers: Some(headers),
            payload: Bytes::from(call.arguments_json),
            caller: Some(sender),
        };
        // The queue is full only while NATS does not take what it is given.
        match tokio::time::timeout_at(deadline, self.outbox.send(request)).await {
            Ok(Ok(())) => {}
            Ok(Err(closed)) => return Ok(Err(InvokeError::Unavailable(closed.to_string()))),
            Err(_) => return Ok(Err(InvokeError::Timeout(call.timeout))),
        }
        // Until the holding node has answered, going away cancels the call
        // there too.
        let mut abandon = Abandon {
            node: &self.node,
            outbox: &self.outbox,
            call: Some(n),
        };
        // One timer: the holder's silence, or the deadline if sooner.
        let silence_ends = || (tokio::time::Instant::now() + HOLDER_SILENCE).min(deadline);
        let timer = tokio::time::sleep_until(silence_ends());
        tokio::pin!(timer);
        loop {
            let message = tokio::select! {
                message = replies.recv() => message,
                () = &mut timer => {
                    if timer.deadline() >= deadline {
                        return Ok(Err(InvokeError::Timeout(call.timeout)));
                    }
                    return Ok(Err(if self.node.connected() {
                        InvokeError::Remote(
                            "The proxy node holding the app's bridge stopped answering; the call was abandoned.".into(),
                        )
                    } else {
                        unreachable()
                    }));
                }
            };
            let message = match message {
                Some(Reply::Nats(message)) => message,
                Some(Reply::Unsent(reason)) => {
                    abandon.call = None;
                    return Ok(Err(reason));
                }
                None => return Ok(Err(unreachable())),
            };
            if message.status == Some(StatusCode::NO_RESPONDERS) {
                // No node holds the bridge, or one is just taking it over:
                // offered again briefly before it counts as not connected.
                abandon.call = None;
                return Err(Moved(call.context));
            }
            let kind = message
                .headers
                .as_ref()
                .and_then(|headers| headers.get(KIND))
                .map(|value| value.as_str().to_owned())
                .unwrap_or_default();
            match kind.as_str() {
                KIND_ALIVE => timer.as_mut().reset(silence_ends()),
                KIND_PROGRESS => {
                    timer.as_mut().reset(silence_ends());
                    if let (Some(sink), Ok(report)) = (
                        &call.context.progress,
                        serde_json::from_slice::<Progress>(&message.payload),
                    ) {
                        sink.push(proto::ToolProgress {
                            request_id: String::new(),
                            progress: report.progress,
                            total: report.total,
                            message: report.message,
                        });
                    }
                }
                KIND_ANSWER => {
                    abandon.call = None;
                    return Ok(serde_json::from_slice::<ReadAnswer>(&message.payload)
                        .and_then(ReadAnswer::into_outcome)
                        .map_err(|error| {
                            InvokeError::Remote(format!(
                                "The proxy node holding the app's bridge sent an unreadable answer: {error}"
                            ))
                        }));
                }
                KIND_FAILURE => {
                    abandon.call = None;
                    return match serde_json::from_slice::<Failure>(&message.payload) {
                        Ok(Failure::NotConnected) => Err(Moved(call.context)),
                        Ok(failure) => Ok(Err(failure.into_error(call.session_id))),
                        Err(error) => Ok(Err(InvokeError::Remote(format!(
                            "The proxy node holding the app's bridge failed the call unreadably: {error}"
                        )))),
                    };
                }
                other => {
                    tracing::debug!(kind = other, "unknown reply from another node ignored");
                }
            }
        }
    }

    /// Serves calls for a session whose bridge is here, until unsubscribed.
    async fn serve(
        hub: WeakHub,
        answering: Arc<Answering>,
        outbox: Outbox,
        session_id: Arc<str>,
        mut calls: async_nats::Subscriber,
    ) {
        while let Some(message) = calls.next().await {
            let (hub, session_id) = (hub.clone(), session_id.clone());
            let (answering, outbox) = (answering.clone(), outbox.clone());
            tokio::spawn(async move {
                answer_call(hub, &answering, &outbox, session_id, message).await;
            });
        }
    }
}

/// The node that answered no longer holds the bridge; the call's context
/// (its progress sink) comes back for the next attempt.
struct Moved(CallContext);

/// Tells the holding node to drop a call its caller stopped waiting for.
struct Abandon<'a> {
    node: &'a Node,
    outbox: &'a Outbox,
    /// The call's number; `None` once the holding node answered (nothing
    /// left to cancel).
    call: Option<u64>,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        // Outside a runtime (it is shutting down) nothing can be sent.
        let (Some(n), Ok(_)) = (self.call.take(), tokio::runtime::Handle::try_current()) else {
            return;
        };
        let subject = format!("{}.cancel.{}.{n}", self.node.prefix, self.node.id);
        // Through the outbox, so that it leaves after the request.
        self.outbox
            .send_soon(Outgoing::to(subject.into(), None, Bytes::new()));
    }
}

/// Removes a call's reply route when the call ends, however it ends.
struct Registered<'a> {
    waiting: &'a Waiting,
    n: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.n);
    }
}

/// A call from another node in [`Answering`] while it runs here.
struct AnsweringEntry<'a> {
    answering: &'a Answering,
    reply: String,
}

impl<'a> AnsweringEntry<'a> {
    fn new(answering: &'a Answering, reply: String, token: CancellationToken) -> Self {
        answering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(reply.clone(), token);
        Self { answering, reply }
    }
}

impl Drop for AnsweringEntry<'_> {
    fn drop(&mut self) {
        self.answering
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.reply);
    }
}

fn unreachable() -> InvokeError {
    InvokeError::Unavailable("NATS is unreachable from this proxy node".into())
}

fn route_reply(waiting: &Waiting, message: Message) {
    let Some(n) = message
        .subject
        .rsplit('.')
        .next()
        .and_then(|n| n.parse::<u64>().ok())
    else {
        return;
    };
    let sender = waiting
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&n)
        .cloned();
    let Some(sender) = sender else { return };
    if let Err(mpsc::error::TrySendError::Full(message)) =
        sender.try_send(Reply::Nats(Box::new(message)))
    {
        // Progress may be thinned; the answer must arrive.
        tokio::spawn(async move {
            let _ = sender.send(message).await;
        });
    }
}

/// Runs one call from another node on the bridge here and streams its
/// progress and outcome back (the node's ticker says it is alive).
async fn answer_call(
    hub: WeakHub,
    answering: &Answering,
    outbox: &Outbox,
    session_id: Arc<str>,
    message: Message,
) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    // The caller may cancel until the answer is sent.
    let cancelled = CancellationToken::new();
    let _answering = AnsweringEntry::new(answering, reply.to_string(), cancelled.clone());
    let _in_flight = outbox.call_in_flight();
    let publish = |kind: &'static str, body: Bytes| {
        let mut headers = HeaderMap::new();
        headers.insert(KIND, kind);
        let reply = Outgoing::to(reply.clone(), Some(headers), body);
        async move {
            if let Err(closed) = outbox.send(reply).await {
                tracing::debug!(%closed, "reply to another node not sent");
            }
        }
    };
    let failure = |error: &InvokeError| {
        Bytes::from(serde_json::to_vec(&Failure::of(error)).unwrap_or_default())
    };
    let Some(hub) = hub.upgrade() else {
        publish(KIND_FAILURE, failure(&InvokeError::NotConnected)).await;
        return;
    };
    let tool = message
        .headers
        .as_ref()
        .and_then(|headers| headers.get(wire::TOOL))
        .map(|value| value.as_str().to_owned())
        .unwrap_or_default();
    let arguments = match String::from_utf8(message.payload.to_vec()) {
        Ok(arguments) => arguments,
        Err(_) => {
            let error = InvokeError::Remote("the forwarded arguments were not UTF-8".into());
            publish(KIND_FAILURE, failure(&error)).await;
            return;
        }
    };
    let (sink, mut reports) = crate::progress::channel();
    let header = |name: &str| {
        message
            .headers
            .as_ref()
            .and_then(|headers| headers.get(name))
            .map(|value| value.as_str().to_owned())
    };
    let trace_parent = header(wire::TRACE_PARENT).unwrap_or_default();
    let span = trace::span(|| {
        tracing::info_span!(
            "forwarded_call",
            otel.kind = "server",
            session = short(&session_id),
            tool = %crate::escape::truncated(&tool),
        )
    });
    trace::set_remote_parent(&span, &trace_parent);
    let context = CallContext {
        meta_json: header(wire::META).unwrap_or_default(),
        client: header(wire::CLIENT)
            .and_then(|json| serde_json::from_str::<wire::Client>(&json).ok())
            .map(wire::Client::into_proto)
            .unwrap_or_default(),
        progress: Some(sink),
        trace_parent,
        origin: crate::audit::Origin::new(crate::metrics::Transport::Nats, None),
    };
    let invoke = hub
        .invoke_here(&session_id, &tool, arguments, context)
        .instrument(span);
    tokio::pin!(invoke);
    let progress = |report: proto::ToolProgress| {
        let body = serde_json::to_vec(&Progress {
            progress: report.progress,
            total: report.total,
            message: report.message,
        })
        .unwrap_or_default();
        publish(KIND_PROGRESS, Bytes::from(body))
    };
    let outcome = loop {
        tokio::select! {
            biased;
            // Dropping the call tells the app to stop working on it.
            () = cancelled.cancelled() => return,
            Some(report) = reports.recv() => progress(report).await,
            outcome = &mut invoke => break outcome,
        }
    };
    while let Some(report) = reports.try_recv() {
        progress(report).await;
    }
    match outcome {
        Ok(outcome) => {
            let body = serde_json::to_vec(&Answer {
                ok: outcome.ok,
                content: &outcome.content,
                error: &outcome.error,
            })
            .unwrap_or_default();
            // NATS would refuse it, and the caller would hear nothing.
            let limit = outbox.max_payload().saturating_sub(ANSWER_HEADERS_BYTES);
            if body.len() > limit {
                let error = InvokeError::TooLargeForNats {
                    what: "answer",
                    bytes: body.len(),
                    limit,
                };
                tracing::warn!(session = short(&session_id), %error, "an answer for another node was too large for NATS");
                publish(KIND_FAILURE, failure(&error)).await;
                return;
            }
            publish(KIND_ANSWER, Bytes::from(body)).await;
        }
        Err(error) => publish(KIND_FAILURE, failure(&error)).await,
    }
}

impl RemoteDelivery for NatsDelivery {
    fn invoke<'a>(
        &'a self,
        call: RemoteCall<'a>,
    ) -> BoxFuture<'a, Result<ToolOutcome, InvokeError>> {
        Box::pin(self.call(call))
    }

    fn bridge_attached<'a>(&'a self, session: &'a SessionRecord) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let id = session.id.clone();
            match self
                .node
                .client
                .queue_subscribe(self.call_subject(&id), "bridge".into())
                .await
            {
                Ok(calls) => {
                    let hub = self.hub.get().cloned();
                    if let Some(hub) = hub {
                        let task = tokio::spawn(Self::serve(
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
                Err(error) => {
                    tracing::warn!(session = short(&id), %error, "calls from other nodes cannot reach this bridge");
                }
            }
            match self.directory.claim(session).await {
                // Request ids go on past every id handed out before this claim.
                Ok(revision) => session.continue_request_ids_after(revision << 32),
                Err(error) => {
                    tracing::warn!(session = short(&id), %error, "cannot record this node as the bridge holder");
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
