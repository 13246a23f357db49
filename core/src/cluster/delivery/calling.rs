//! The calling node's side of a call between nodes: the call published to
//! the node that holds the bridge, and its progress, liveness, the app's
//! requests for the caller and the answer read from this node's reply
//! subject; and the client answers and retries this node received for a
//! call that waits on another.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_nats::{HeaderMap, Message, StatusCode};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{ANSWER_WAIT, HOLDER_SILENCE, NatsDelivery, REPLY_BUFFER, Waiting};
use crate::bridge::{ClientAnswer, Unanswerable};
use crate::call::CallContext;
use crate::caller::CallerKind;
use crate::cluster::Node;
use crate::cluster::outbox::{Incoming, Outbox, Outgoing};
use crate::cluster::wire::asks;
use crate::cluster::wire::{
    self, Asks, Failure, KIND, KIND_ALIVE, KIND_ANSWER, KIND_FAILURE, KIND_LOG, KIND_MCP_ERROR,
    KIND_MCP_RESULT, KIND_PROGRESS, Progress, ReadAnswer,
};
use crate::delivery::{Asked, RemoteCall, Resumed, Unrouted};
use crate::outcome::{InvokeError, McpReply, Reply, ToolOutcome};
use crate::progress::LogLevel;
use crate::proto;
use crate::trace;

impl NatsDelivery {
    /// Delivers a call; a node that answers "not connected" held the bridge
    /// a moment ago (it just moved), so the call is offered again, briefly.
    pub(super) async fn call(&self, call: RemoteCall<'_>) -> Result<Reply, InvokeError> {
        let RemoteCall {
            session_id,
            asked,
            context,
            timeout,
        } = call;
        // The body becomes the message's payload without a copy, and each
        // attempt shares it.
        let (asks, subject, body, gated) = match asked {
            Asked::Tool {
                tool,
                arguments_json,
                gated,
            } => (
                Asks::Tool(tool),
                self.call_subject(session_id),
                Bytes::from(arguments_json),
                gated,
            ),
            Asked::Request {
                method,
                target,
                params_json,
            } => (
                Asks::Request { method, target },
                self.request_subject(session_id),
                Bytes::from(params_json),
                false,
            ),
        };
        let mut context = Some(context);
        for delay_ms in [2, 10, 30] {
            let attempt = Attempt {
                session_id,
                subject: &subject,
                asks,
                gated,
                body: body.clone(),
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

    /// One attempt: the call published, then its replies read until the
    /// answer, the deadline, or the holder's silence.
    async fn call_once(&self, call: Attempt<'_>) -> Result<Result<Reply, InvokeError>, Moved> {
        if !self.node.connected() {
            return Ok(Err(unreachable()));
        }
        let headers = match call_headers(&call) {
            Ok(headers) => headers,
            Err(error) => return Ok(Err(error)),
        };
        let n = self.next_reply.fetch_add(1, Ordering::Relaxed);
        let (sender, replies) = mpsc::channel(REPLY_BUFFER);
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(n, sender.clone());
        let _registered = Registered {
            waiting: &self.waiting,
            n,
        };
        let _in_flight = self.outbox.call_in_flight();
        let deadline = Instant::now() + call.timeout;
        let request = Outgoing {
            subject: call.subject.into(),
            reply: Some(format!("{}.{n}", self.reply_base).into()),
            headers: Some(headers),
            payload: call.body,
            caller: Some(sender),
            unsent_warnings: None,
        };
        // The queue is full only while NATS does not take what it is given.
        match tokio::time::timeout_at(deadline, self.outbox.send(request)).await {
            Ok(Ok(())) => {}
            Ok(Err(closed)) => return Ok(Err(InvokeError::Unavailable(closed.to_string()))),
            Err(_) => return Ok(Err(InvokeError::Timeout(call.timeout))),
        }
        // Until the holding node has answered, going away cancels the call
        // there too.
        let abandon = Abandon {
            node: &self.node,
            outbox: &self.outbox,
            call: Some(n),
        };
        let waiting = Waited {
            node: &self.node,
            session_id: call.session_id,
            context: call.context,
            timeout: call.timeout,
            deadline,
            ask_wait: self.ask_wait.get().copied().unwrap_or_default(),
        };
        waiting.replies(replies, abandon).await
    }
}

/// One attempt at a call: what it asks, and its own share of the body.
struct Attempt<'a> {
    session_id: &'a str,
    subject: &'a str,
    asks: Asks<'a>,
    /// A tool that needs the user's confirmation (the holding node asks).
    gated: bool,
    body: Bytes,
    context: CallContext,
    timeout: Duration,
}

/// The headers of a forwarded call: the tool or the method, the caller's
/// wait, the request's `_meta`, the caller, and the `traceparent`.
fn call_headers(call: &Attempt<'_>) -> Result<HeaderMap, InvokeError> {
    let mut headers = HeaderMap::new();
    // A node of a release before the holder asked refuses a gated call,
    // rather than run it unconfirmed.
    let version = if call.gated {
        wire::GATED_CALL_VERSION
    } else {
        wire::WIRE_VERSION
    };
    headers.insert(wire::WIRE, version.to_string().as_str());
    call.asks.write(&mut headers)?;
    if matches!(call.asks, Asks::Tool(_)) {
        headers.insert(asks::GATE, asks::GATE_HOLDER);
    }
    headers.insert(
        wire::TIMEOUT_MS,
        call.timeout.as_millis().to_string().as_str(),
    );
    if !call.context.meta_json.is_empty() {
        headers.insert(wire::META, call.context.meta_json.as_str());
    }
    if !call.context.task_id.is_empty() {
        headers.insert(wire::TASK_ID, call.context.task_id.as_str());
    }
    if let Ok(client) = serde_json::to_string(&wire::Client::of(&call.context.client)) {
        headers.insert(wire::CLIENT, client.as_str());
    }
    if call.context.caller.kind != CallerKind::None
        && let Ok(caller) = serde_json::to_string(&wire::Caller::of(&call.context.caller))
    {
        headers.insert(wire::CALLER, caller.as_str());
    }
    // The holding node's spans become children of this one.
    let trace_parent = trace::hand_on(&tracing::Span::current(), &call.context.trace_parent);
    if !trace_parent.is_empty() {
        headers.insert(wire::TRACE_PARENT, trace_parent.as_str());
    }
    if let Some(level) = call
        .context
        .progress
        .as_ref()
        .and_then(|sink| sink.log_level())
    {
        headers.insert(wire::LOG_LEVEL, level.as_str());
    }
    let askable = call
        .context
        .progress
        .as_ref()
        .map(crate::progress::ProgressSink::askable)
        .unwrap_or_default();
    if let Some(askable) = asks::askable_header(askable) {
        headers.insert(asks::ASKABLE, askable.as_str());
    }
    if let Some(modes) = asks::elicitation_modes_header(askable) {
        headers.insert(asks::ELICITATION_MODES, modes.as_str());
    }
    Ok(headers)
}

/// A published call waiting for its replies.
struct Waited<'a> {
    node: &'a Node,
    session_id: &'a str,
    context: CallContext,
    timeout: Duration,
    /// The call's deadline here, moved on while it waits for its client.
    deadline: Instant,
    /// How long one request may wait for the client.
    ask_wait: Duration,
}

impl Waited<'_> {
    /// Reads the call's replies until its answer, its deadline, or the
    /// holder's silence (one timer for both).
    async fn replies(
        mut self,
        mut replies: mpsc::Receiver<Incoming>,
        mut abandon: Abandon<'_>,
    ) -> Result<Result<Reply, InvokeError>, Moved> {
        let silence_ends = |deadline: Instant| (Instant::now() + HOLDER_SILENCE).min(deadline);
        let timer = tokio::time::sleep_until(silence_ends(self.deadline));
        tokio::pin!(timer);
        loop {
            let message = tokio::select! {
                message = replies.recv() => message,
                () = &mut timer => return Ok(Err(self.silence(timer.deadline()))),
            };
            let message = match message {
                Some(Incoming::Nats(message)) => message,
                Some(Incoming::Unsent(reason)) => {
                    abandon.call = None;
                    return Ok(Err(reason));
                }
                None => return Ok(Err(unreachable())),
            };
            if message.status == Some(StatusCode::NO_RESPONDERS) {
                // No node holds the bridge, or one is just taking it over:
                // offered again briefly before it counts as not connected.
                abandon.call = None;
                return Err(Moved(self.context));
            }
            // A reply this node cannot read fails the call (the holder is
            // told to stop) rather than being misread.
            if let Err(error) = wire::readable(message.headers.as_ref()) {
                return Ok(Err(error));
            }
            let kind = message
                .headers
                .as_ref()
                .and_then(|headers| headers.get(KIND))
                .map(|value| value.as_str().to_owned())
                .unwrap_or_default();
            match kind.as_str() {
                KIND_ALIVE => timer.as_mut().reset(silence_ends(self.deadline)),
                KIND_PROGRESS => {
                    timer.as_mut().reset(silence_ends(self.deadline));
                    self.progress(&message.payload);
                }
                KIND_LOG => {
                    timer.as_mut().reset(silence_ends(self.deadline));
                    self.log(&message.payload);
                }
                asks::KIND_ASK => {
                    // The holding node's clock for the call pauses while
                    // the client thinks; this one, a backstop, is moved
                    // past the longest that may take.
                    self.deadline = self
                        .deadline
                        .max(Instant::now() + self.ask_wait + self.timeout);
                    timer.as_mut().reset(silence_ends(self.deadline));
                    self.ask(&message.payload);
                }
                KIND_ANSWER => {
                    abandon.call = None;
                    return Ok(answer(&message.payload).map(Reply::Tool));
                }
                KIND_MCP_RESULT | KIND_MCP_ERROR => {
                    abandon.call = None;
                    return Ok(mcp_answer(&kind, message.payload).map(Reply::Mcp));
                }
                KIND_FAILURE => {
                    abandon.call = None;
                    return match failure(&message.payload, self.session_id) {
                        Some(error) => Ok(Err(error)),
                        None => Err(Moved(self.context)),
                    };
                }
                other => {
                    tracing::debug!(kind = other, "unknown reply from another node ignored");
                }
            }
        }
    }

    /// The error of a call whose timer ran out at `ended`: its deadline, or
    /// the holder's silence.
    fn silence(&self, ended: Instant) -> InvokeError {
        if ended >= self.deadline {
            InvokeError::Timeout(self.timeout)
        } else if self.node.connected() {
            InvokeError::Remote(
                "The proxy node holding the app's bridge stopped answering; the call was abandoned."
                    .into(),
            )
        } else {
            unreachable()
        }
    }

    /// Passes a request of the app on to the caller, which the holding node
    /// sent only because the caller can be asked it.
    fn ask(&self, payload: &[u8]) {
        let Some(sink) = &self.context.progress else {
            return;
        };
        match asks::read_ask(payload) {
            Ok(ask) => sink.push_ask(ask),
            Err(error) => {
                tracing::warn!(
                    session = crate::escape::Outside::session(self.session_id).field(),
                    %error,
                    "an unreadable request for the client from another node was dropped; the app's request waits until it expires"
                );
            }
        }
    }

    /// Passes a log record on to the caller, if it wants its level.
    fn log(&self, payload: &[u8]) {
        let (Some(sink), Ok(record)) = (
            &self.context.progress,
            serde_json::from_slice::<wire::LogRecord>(payload),
        ) else {
            return;
        };
        if let Some(level) = LogLevel::parse(&record.level) {
            sink.push_log(
                level,
                proto::Log {
                    request_id: String::new(),
                    level: record.level,
                    logger: record.logger,
                    data_json: record.data_json,
                },
            );
        }
    }

    /// Passes a progress report on to the caller, if it wants them.
    fn progress(&self, payload: &[u8]) {
        if let (Some(sink), Ok(report)) = (
            &self.context.progress,
            serde_json::from_slice::<Progress>(payload),
        ) {
            sink.push(proto::ToolProgress {
                request_id: String::new(),
                progress: report.progress,
                total: report.total,
                message: report.message,
            });
        }
    }
}

impl NatsDelivery {
    /// Sends a client's answer to the node holding the session's bridge;
    /// what became of it there.
    pub(super) async fn send_answer(
        &self,
        session_id: &str,
        request_id: &str,
        id: &str,
        answer: ClientAnswer,
    ) -> Result<Result<(), Unanswerable>, Unrouted> {
        let payload = asks::answer_message(request_id, id, &answer);
        let reply = self
            .request(self.answer_subject(session_id), payload, ANSWER_WAIT)
            .await?;
        serde_json::from_slice::<asks::Answered>(&reply.payload)
            .map(asks::Answered::into_result)
            .map_err(|error| {
                Unrouted::Unavailable(format!(
                    "the proxy node holding the app's bridge said something unreadable about the answer: {error}"
                ))
            })
    }

    /// Sends a retry to `node`, where its call is parked; the answer it made.
    pub(super) async fn send_resume(&self, node: &str, retry: Bytes) -> Result<Resumed, Unrouted> {
        let wait = self.resume_wait.get().copied().unwrap_or(ANSWER_WAIT);
        let reply = self.request(self.resume_subject(node), retry, wait).await?;
        let header = |name: &str| {
            reply
                .headers
                .as_ref()
                .and_then(|headers| headers.get(name))
                .map(|value| value.as_str().to_owned())
        };
        if header(KIND).as_deref() != Some(asks::KIND_RESUMED) {
            return Err(Unrouted::Unavailable(
                "the proxy node holding the call did not resume it".into(),
            ));
        }
        let status = header(asks::STATUS)
            .and_then(|status| status.parse::<u16>().ok())
            .ok_or_else(|| {
                Unrouted::Unavailable(
                    "the proxy node holding the call answered without a status".into(),
                )
            })?;
        Ok(Resumed {
            status,
            event_stream: header(asks::EVENT_STREAM).is_some(),
            body: reply.payload,
        })
    }

    /// One request to another node and its reply, within `wait`.
    async fn request(
        &self,
        subject: String,
        payload: Bytes,
        wait: Duration,
    ) -> Result<Message, Unrouted> {
        if !self.node.connected() {
            return Err(Unrouted::Unavailable(
                "NATS is unreachable from this proxy node".into(),
            ));
        }
        let mut headers = HeaderMap::new();
        headers.insert(wire::WIRE, wire::WIRE_VERSION.to_string().as_str());
        let request = async_nats::Request::new()
            .headers(headers)
            .payload(payload)
            .timeout(Some(wait));
        let reply = self
            .node
            .client
            .send_request(subject, request)
            .await
            .map_err(|error| match error.kind() {
                async_nats::RequestErrorKind::NoResponders => Unrouted::NoHolder,
                async_nats::RequestErrorKind::TimedOut => Unrouted::Unavailable(format!(
                    "the proxy node it went to did not answer within {} seconds",
                    wait.as_secs()
                )),
                async_nats::RequestErrorKind::MaxPayloadExceeded => Unrouted::Unavailable(format!(
                    "it is larger than NATS's max_payload ({error}); raise max_payload in nats-server's configuration"
                )),
                _ => Unrouted::Unavailable(format!("NATS did not carry it: {error}")),
            })?;
        wire::readable(reply.headers.as_ref())
            .map_err(|error| Unrouted::Unavailable(error.to_string()))?;
        Ok(reply)
    }
}

/// The call's failure, as the holding node reported it; `None` for "not
/// connected": the bridge just moved.
fn failure(payload: &[u8], session_id: &str) -> Option<InvokeError> {
    match serde_json::from_slice::<Failure>(payload) {
        Ok(Failure::NotConnected) => None,
        Ok(failure) => Some(failure.into_error(session_id)),
        Err(error) => Some(InvokeError::Remote(format!(
            "The proxy node holding the app's bridge failed the call unreadably: {error}"
        ))),
    }
}

/// The holding node's answer.
fn answer(payload: &[u8]) -> Result<ToolOutcome, InvokeError> {
    serde_json::from_slice::<ReadAnswer>(payload)
        .and_then(ReadAnswer::into_outcome)
        .map_err(|error| {
            InvokeError::Remote(format!(
                "The proxy node holding the app's bridge sent an unreadable answer: {error}"
            ))
        })
}

/// The holding node's answer to an MCP request.
fn mcp_answer(kind: &str, payload: Bytes) -> Result<McpReply, InvokeError> {
    wire::read_mcp_reply(kind, payload).map_err(|error| {
        InvokeError::Remote(format!(
            "The proxy node holding the app's bridge sent an unreadable answer: {error}"
        ))
    })
}

/// The node that answered no longer holds the bridge; the call's context
/// (its progress sink) comes back for the next attempt.
pub(super) struct Moved(CallContext);

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

fn unreachable() -> InvokeError {
    InvokeError::Unavailable("NATS is unreachable from this proxy node".into())
}

/// Subscribes this node's reply subjects and routes what arrives to the
/// waiting calls.
pub(super) async fn route_replies(
    client: async_nats::Client,
    subject: String,
    waiting: Arc<Waiting>,
) {
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
        sender.try_send(Incoming::Nats(Box::new(message)))
    {
        // Progress may be thinned; the answer must arrive.
        tokio::spawn(async move {
            let _ = sender.send(message).await;
        });
    }
}
