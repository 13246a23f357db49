//! The holding node's side of a call between nodes: calls for a bridge held
//! here run on it, their progress, the app's requests for the caller and
//! their outcome go back on the caller's reply subject, one ticker says
//! `alive` for all of them, and a caller's cancellation drops its call.
//! Clients' answers other nodes received for this bridge's calls are passed
//! on here, and so are the retries other nodes received for calls parked
//! here.

use std::sync::{Arc, PoisonError};

use async_nats::{HeaderMap, Message};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{ALIVE_INTERVAL, ANSWER_HEADERS_BYTES, Answering};
use crate::bridge::Unanswerable;
use crate::call::CallContext;
use crate::cluster::outbox::{Outbox, Outgoing};
use crate::cluster::wire::asks;
use crate::cluster::wire::{
    self, Answer, Failure, Forwarded, KIND, KIND_ALIVE, KIND_ANSWER, KIND_FAILURE, KIND_LOG,
    KIND_PROGRESS, LogRecord, Progress,
};
use crate::escape::Outside;
use crate::hub::{AppRequest, WeakHub};
use crate::outcome::{InvokeError, Reply};
use crate::progress::{CallEvent, LogLevel, ProgressSink};
use crate::proto;
use crate::trace;

/// Serves calls for a session whose bridge is here, and its clients'
/// answers (those on `answers`, the answer subject), until unsubscribed.
pub(super) async fn serve(
    hub: WeakHub,
    answering: Arc<Answering>,
    outbox: Outbox,
    session_id: Arc<str>,
    answers: String,
    mut calls: impl futures_util::Stream<Item = Message> + Unpin,
) {
    while let Some(message) = calls.next().await {
        let (hub, session_id) = (hub.clone(), session_id.clone());
        let (answering, outbox) = (answering.clone(), outbox.clone());
        if message.subject.as_str() == answers {
            tokio::spawn(async move { pass_answer(hub, &outbox, &session_id, message).await });
            continue;
        }
        tokio::spawn(async move {
            answer_call(hub, &answering, &outbox, session_id, message).await;
        });
    }
}

/// Passes a client's answer another node received on to the app's bridge
/// here (or the confirmation gate), and says what became of it.
async fn pass_answer(hub: WeakHub, outbox: &Outbox, session_id: &str, message: Message) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let passed = match (wire::readable(message.headers.as_ref()), hub.upgrade()) {
        (Err(error), _) => {
            tracing::debug!(%error, "a client's answer from another node was unreadable");
            Err(Unanswerable::NoCall)
        }
        (Ok(()), None) => Err(Unanswerable::BridgeEnded),
        (Ok(()), Some(hub)) => match asks::read_answer(&message.payload) {
            Ok((request_id, id, answer)) => {
                hub.answer_client_here(session_id, &request_id, &id, answer)
                    .await
            }
            Err(error) => {
                tracing::debug!(%error, "a client's answer from another node was unreadable");
                Err(Unanswerable::NotOutstanding)
            }
        },
    };
    let body = serde_json::to_vec(&asks::Answered::of(passed)).unwrap_or_default();
    let mut headers = HeaderMap::new();
    headers.insert(wire::WIRE, wire::WIRE_VERSION.to_string().as_str());
    if let Err(closed) = outbox
        .send(Outgoing::to(reply, Some(headers), Bytes::from(body)))
        .await
    {
        tracing::debug!(%closed, "what became of a client's answer was not sent back");
    }
}

/// Serves the retries other nodes receive for calls parked on this one
/// (`subject`, this node's own), for as long as the node runs.
pub(super) async fn serve_resumes(
    client: async_nats::Client,
    subject: String,
    hub: WeakHub,
    outbox: Outbox,
) {
    let mut retries = match client.subscribe(subject).await {
        Ok(retries) => retries,
        Err(error) => {
            tracing::warn!(%error, "cannot subscribe to retries from other nodes; a 2026-07-28 retry must reach the node that answered its call");
            return;
        }
    };
    while let Some(message) = retries.next().await {
        let (hub, outbox) = (hub.clone(), outbox.clone());
        tokio::spawn(async move { resume(hub, &outbox, message).await });
    }
}

/// Resumes one retry another node received, and sends back the answer (or,
/// at once, that there is none, so that the other node does not wait).
async fn resume(hub: WeakHub, outbox: &Outbox, message: Message) {
    let Some(reply) = message.reply.clone() else {
        return;
    };
    let mut headers = HeaderMap::new();
    headers.insert(wire::WIRE, wire::WIRE_VERSION.to_string().as_str());
    let resumed = match (wire::readable(message.headers.as_ref()), hub.upgrade()) {
        (Ok(()), Some(hub)) => hub.resume_here(message.payload).await,
        (Err(error), _) => {
            tracing::debug!(%error, "a retry from another node was unreadable");
            None
        }
        (Ok(()), None) => None,
    };
    let limit = outbox.max_payload().saturating_sub(ANSWER_HEADERS_BYTES);
    let body = match resumed {
        Some(resumed) if resumed.body.len() <= limit => {
            headers.insert(KIND, asks::KIND_RESUMED);
            headers.insert(asks::STATUS, resumed.status.to_string().as_str());
            if resumed.event_stream {
                headers.insert(asks::EVENT_STREAM, "1");
            }
            resumed.body
        }
        Some(resumed) => {
            tracing::warn!(
                bytes = resumed.body.len(),
                limit,
                "the answer to a retry from another node was too large for NATS; that node's client hears that it could not be resumed"
            );
            headers.insert(KIND, KIND_FAILURE);
            Bytes::new()
        }
        // Nothing here parks calls, or the retry was unreadable.
        None => {
            headers.insert(KIND, KIND_FAILURE);
            Bytes::new()
        }
    };
    if let Err(closed) = outbox.send(Outgoing::to(reply, Some(headers), body)).await {
        tracing::debug!(%closed, "the answer to a retry from another node was not sent");
    }
}

/// Says `alive` every [`ALIVE_INTERVAL`] for every call this node runs for
/// another, all at once: one waiting on a full send queue holds no other up.
pub(super) async fn say_alive(client: async_nats::Client, answering: Arc<Answering>) {
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
}

/// Drops the calls running here whose callers stopped waiting.
pub(super) async fn listen_for_cancels(
    client: async_nats::Client,
    prefix: String,
    answering: Arc<Answering>,
) {
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

/// Where the replies of one call go: the caller's reply subject, through
/// the node's outbox.
struct Replies<'a> {
    outbox: &'a Outbox,
    reply: async_nats::Subject,
}

impl Replies<'_> {
    async fn publish(&self, kind: &'static str, body: Bytes) {
        let mut headers = HeaderMap::new();
        headers.insert(wire::WIRE, wire::WIRE_VERSION.to_string().as_str());
        headers.insert(KIND, kind);
        let reply = Outgoing::to(self.reply.clone(), Some(headers), body);
        if let Err(closed) = self.outbox.send(reply).await {
            tracing::debug!(%closed, "reply to another node not sent");
        }
    }

    async fn failure(&self, error: &InvokeError) {
        let body = serde_json::to_vec(&Failure::of(error)).unwrap_or_default();
        self.publish(KIND_FAILURE, Bytes::from(body)).await;
    }

    /// A progress report or a log record, relayed to the calling node.
    async fn event(&self, event: CallEvent) {
        match event {
            CallEvent::Progress(report) => self.progress(report).await,
            CallEvent::Log(record) => {
                let body = serde_json::to_vec(&LogRecord {
                    level: record.level,
                    logger: record.logger,
                    data_json: record.data_json,
                })
                .unwrap_or_default();
                self.publish(KIND_LOG, Bytes::from(body)).await;
            }
            // Sent only because the caller said it can be asked this.
            CallEvent::Ask(ask) => self.publish(asks::KIND_ASK, asks::ask_message(&ask)).await,
        }
    }

    async fn progress(&self, report: proto::ToolProgress) {
        let body = serde_json::to_vec(&Progress {
            progress: report.progress,
            total: report.total,
            message: report.message,
        })
        .unwrap_or_default();
        self.publish(KIND_PROGRESS, Bytes::from(body)).await;
    }

    /// The answer, unless NATS would refuse it (the caller would hear
    /// nothing): then a failure that says why.
    async fn answer(&self, session_id: &str, reply: Reply) {
        let (kind, body) = match reply {
            Reply::Tool(outcome) => {
                let body = serde_json::to_vec(&Answer {
                    ok: outcome.ok,
                    content: &outcome.content,
                    error: &outcome.error,
                })
                .unwrap_or_default();
                (KIND_ANSWER, Bytes::from(body))
            }
            Reply::Mcp(reply) => wire::mcp_reply_message(reply),
        };
        let limit = self
            .outbox
            .max_payload()
            .saturating_sub(ANSWER_HEADERS_BYTES);
        if body.len() > limit {
            let error = InvokeError::TooLargeForNats {
                what: "answer",
                bytes: body.len(),
                limit,
            };
            tracing::warn!(session = Outside::session(session_id).field(), %error, "an answer for another node was too large for NATS");
            self.failure(&error).await;
            return;
        }
        self.publish(kind, body).await;
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
    let replies = Replies { outbox, reply };
    // A call this node cannot read is refused, naming both versions.
    if let Err(error) = wire::readable(message.headers.as_ref()) {
        replies.failure(&error).await;
        return;
    }
    let Some(hub) = hub.upgrade() else {
        replies.failure(&InvokeError::NotConnected).await;
        return;
    };
    let header = |name: &str| {
        message
            .headers
            .as_ref()
            .and_then(|headers| headers.get(name))
            .map(|value| value.as_str().to_owned())
    };
    let forwarded = Forwarded::read(message.headers.as_ref());
    // A calling node of a release before asked for the user's confirmation
    // itself; from this one on, the holding node asks.
    let gate = asks::holder_gates(message.headers.as_ref());
    let gated = asks::caller_gated(message.headers.as_ref());
    let Ok(body) = String::from_utf8(message.payload.to_vec()) else {
        let error = InvokeError::Remote("the forwarded arguments were not UTF-8".into());
        replies.failure(&error).await;
        return;
    };
    // Log records go back when the caller asked for them, at its level.
    let log_level = header(wire::LOG_LEVEL).and_then(|name| LogLevel::parse(&name));
    // The app may ask the caller what the calling node said it can be asked.
    let askable = asks::read_askable(message.headers.as_ref());
    let (sink, mut reports) = crate::progress::call_channel(log_level, askable);
    let context = context_of(&header, sink);
    let span = forwarded_span(&session_id, &forwarded);
    trace::set_remote_parent(&span, &context.trace_parent);
    let invoke = async {
        match &forwarded {
            Forwarded::Tool(tool) => hub
                .invoke_here(&session_id, tool, body, context, (gate, gated))
                .await
                .map(Reply::Tool),
            Forwarded::Request { method, target } => {
                let request = AppRequest {
                    method,
                    target,
                    params_json: body,
                };
                hub.request_here(&session_id, request, context)
                    .await
                    .map(Reply::Mcp)
            }
        }
    }
    .instrument(span);
    tokio::pin!(invoke);
    let outcome = loop {
        tokio::select! {
            biased;
            // Dropping the call tells the app to stop working on it.
            () = cancelled.cancelled() => return,
            Some(event) = reports.recv_event() => replies.event(event).await,
            outcome = &mut invoke => break outcome,
        }
    };
    while let Some(event) = reports.try_recv_event() {
        replies.event(event).await;
    }
    match outcome {
        Ok(reply) => replies.answer(&session_id, reply).await,
        Err(error) => replies.failure(&error).await,
    }
}

/// The span of a call from another node (when traces are exported).
fn forwarded_span(session_id: &str, forwarded: &Forwarded) -> tracing::Span {
    trace::span(|| match forwarded {
        Forwarded::Tool(tool) => tracing::info_span!(
            "forwarded_call",
            otel.kind = "server",
            session = Outside::session(session_id).field(),
            tool = Outside::new(tool).field(),
        ),
        Forwarded::Request { method, .. } => tracing::info_span!(
            "forwarded_call",
            otel.kind = "server",
            session = Outside::session(session_id).field(),
            method = Outside::new(method).field(),
        ),
    })
}

/// The context of a forwarded call, from its headers; its progress goes to
/// `sink`.
fn context_of(header: &impl Fn(&str) -> Option<String>, sink: ProgressSink) -> CallContext {
    CallContext {
        meta_json: header(wire::META).unwrap_or_default(),
        client: header(wire::CLIENT)
            .and_then(|json| serde_json::from_str::<wire::Client>(&json).ok())
            .map(wire::Client::into_proto)
            .unwrap_or_default(),
        caller: header(wire::CALLER)
            .and_then(|json| serde_json::from_str::<wire::Caller>(&json).ok())
            .map(wire::Caller::into_caller)
            .unwrap_or_default(),
        progress: Some(sink),
        trace_parent: header(wire::TRACE_PARENT).unwrap_or_default(),
        origin: crate::audit::Origin::new(crate::metrics::Transport::Nats, None),
        // Whether the holder asks travels as the call's `gated`.
        confirm: None,
        task_id: header(wire::TASK_ID).unwrap_or_default(),
    }
}
