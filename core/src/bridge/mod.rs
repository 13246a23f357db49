//! One attached bridge: the outbound queue to the app, the calls waiting for
//! the app's answers, the loop that reads the app's messages and keeps the
//! bridge alive with pings, and the reason the bridge ended.
//!
//! A bridge ends exactly once. Ending it fails every call still waiting on it
//! at once, with a message that says why, so no caller ever waits for the
//! tool timeout on a bridge that is already gone. The bridge knows nothing of
//! sessions or of the hub: whoever attached it runs `drive` and learns from
//! its return value how the bridge ended.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::oneshot;

mod asks;
mod closed;
mod driving;
mod inbound;
mod outbound;

pub use asks::{ClientAnswer, ClientWait, Unanswerable};
pub(crate) use driving::{Driven, Driving, Liveness};

use crate::audit::Origin;
use crate::metrics::{DropReason, Metrics};
use crate::minted::MintedMap;
use crate::outcome::{BridgeEnd, InvokeError, McpReply, Reply, ToolOutcome};
use crate::proto::{self, ProxyMessage, proxy_message};

/// How many messages may wait for a slow app before senders wait too.
pub(crate) const OUTBOUND_CAPACITY: usize = 256;

/// Messages travel boxed: a channel reserves its first block of 32 slots up
/// front, and 32 pointers cost far less per idle bridge than 32 messages.
pub(crate) type Queued = Box<ProxyMessage>;

type Answer = Result<ToolOutcome, InvokeError>;
type McpAnswer = Result<McpReply, InvokeError>;

pub use crate::progress::ProgressSink;

/// What the app sent over its bridge, as the core reads it.
#[derive(Debug)]
pub enum Inbound {
    /// A well-formed message.
    Message(proto::AppMessage),
    /// A result or progress report that names a call but cannot be used
    /// (a field of the wrong type, say). The call fails at once with
    /// `problem`, and the app is told.
    Malformed {
        /// The request id the message named.
        request_id: String,
        /// Whether it was a result (`true`) or a progress report.
        result: bool,
        /// What was wrong, as a sentence for the app developer.
        problem: String,
    },
    /// The transport knows why the app's side ended (a message over the
    /// size limit): the bridge ends with this reason rather than as a
    /// plain disconnect, so its callers learn the cause.
    Ended(BridgeEnd),
}

impl From<proto::AppMessage> for Inbound {
    fn from(message: proto::AppMessage) -> Self {
        Self::Message(message)
    }
}

struct Waiting {
    answer: Pending,
    progress: Option<ProgressSink>,
    /// The tool called or the MCP method requested, for messages about
    /// this call.
    tool: Box<str>,
    /// Its requests to its client, once it made one.
    asks: Option<Box<asks::Asks>>,
}

/// Where the app's answer goes: a tool call waits for a `ToolResult`, an
/// MCP request for an `McpResult`.
enum Pending {
    Tool(oneshot::Sender<Answer>),
    Mcp(oneshot::Sender<McpAnswer>),
}

impl Pending {
    /// Hands over a failure; false when the caller stopped waiting.
    fn fail(self, error: InvokeError) -> bool {
        match self {
            Self::Tool(answer) => answer.send(Err(error)).is_ok(),
            Self::Mcp(answer) => answer.send(Err(error)).is_ok(),
        }
    }
}

/// Why an answer could not be handed to the call its request id names.
enum Unmatched {
    /// No call waits for this id.
    NoCall,
    /// The call waits for the other kind of answer (it failed now).
    WrongKind,
}

#[derive(Default)]
struct Calls {
    waiting: MintedMap<String, Waiting>,
    ended: Option<BridgeEnd>,
    /// The last calls cancelled, whose late results are dropped quietly.
    cancelled: std::collections::VecDeque<String>,
}

/// Declaration updates from the app being applied at once; more are
/// refused until one is answered.
pub(crate) const UPDATES_IN_FLIGHT: usize = 16;

/// A change to its session the app announced on the bridge, handed to the
/// bridge's owner as [`drive`] reads it (the bridge knows no sessions).
#[derive(Debug)]
pub(crate) enum SessionChange {
    /// New tools and, where set, new resources, templates and prompts.
    Declarations(Box<proto::UpdateTools>),
    /// One of the session's resources changed.
    ResourceUpdated(String),
}

/// One declaration update being applied; see [`Bridge::begin_update`].
pub(crate) struct UpdateSlot(Arc<Bridge>);

impl UpdateSlot {
    pub(crate) fn bridge(&self) -> &Arc<Bridge> {
        &self.0
    }
}

impl Drop for UpdateSlot {
    fn drop(&mut self) {
        self.0.updates.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How many cancelled request ids a bridge remembers.
const CANCELLED_REMEMBERED: usize = 64;

/// The proxy's side of one attached bridge.
pub(crate) struct Bridge {
    /// The session it serves, for log lines.
    session_id: Arc<str>,
    /// Where the app connected from, for metrics and audit events.
    origin: Origin,
    metrics: Arc<Metrics>,
    outbound: outbound::Outbound,
    /// Declaration updates being applied ([`UPDATES_IN_FLIGHT`] at most).
    updates: AtomicUsize,
    closed: closed::Closed,
    calls: Mutex<Calls>,
    /// Warnings the app can cause (malformed messages, unexpected results)
    /// are rate-limited per bridge.
    warnings: crate::log_budget::LogBudget,
    /// How many requests to its client one call may have outstanding.
    max_asks_per_call: usize,
}

impl Bridge {
    /// A bridge; its transport reads the outbound queue through
    /// [`BridgeStream`].
    pub(crate) fn new(
        session_id: Arc<str>,
        origin: Origin,
        metrics: Arc<Metrics>,
        max_asks_per_call: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            session_id,
            origin,
            metrics,
            outbound: outbound::Outbound::new(OUTBOUND_CAPACITY),
            updates: AtomicUsize::new(0),
            closed: closed::Closed::default(),
            calls: Mutex::default(),
            warnings: crate::log_budget::LogBudget::default(),
            max_asks_per_call,
        })
    }

    /// Counts a declaration update as being applied until the slot is
    /// dropped; `None` (and the app told to wait) when too many are.
    pub(crate) fn begin_update(self: &Arc<Self>) -> Option<UpdateSlot> {
        let taken = self
            .updates
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < UPDATES_IN_FLIGHT).then_some(n + 1)
            });
        if taken.is_err() {
            self.notify(notice(
                "too many updates at once: wait for ToolsUpdated before sending the next".into(),
                String::new(),
            ));
            return None;
        }
        Some(UpdateSlot(self.clone()))
    }

    fn calls(&self) -> MutexGuard<'_, Calls> {
        // The lock guards plain data and is never held across a panic-prone
        // call, so a poisoned lock still holds consistent data.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the bridge and fails every waiting call. Only the first end counts;
    /// returns whether this call was it.
    pub(crate) fn end(&self, reason: BridgeEnd) -> bool {
        let waiting = {
            let mut calls = self.calls();
            if calls.ended.is_some() {
                return false;
            }
            calls.ended = Some(reason);
            std::mem::take(&mut calls.waiting)
        };
        self.closed.close();
        self.outbound.clear();
        self.outbound.wake_reader();
        for (_, caller) in waiting {
            caller.answer.fail(InvokeError::BridgeEnded(reason));
        }
        true
    }

    /// Where the app connected from.
    pub(crate) fn origin(&self) -> Origin {
        self.origin
    }

    pub(crate) fn end_reason(&self) -> Option<BridgeEnd> {
        self.calls().ended
    }

    /// Records a call that waits for the app's answer.
    pub(crate) fn register(
        &self,
        request_id: &str,
        tool: &str,
        progress: Option<ProgressSink>,
    ) -> Result<oneshot::Receiver<Answer>, BridgeEnd> {
        let (answer, receiver) = oneshot::channel();
        self.wait(request_id, tool, Pending::Tool(answer), progress)?;
        Ok(receiver)
    }

    /// Records an MCP request that waits for the app's `McpResult`.
    pub(crate) fn register_mcp(
        &self,
        request_id: &str,
        method: &str,
        progress: Option<ProgressSink>,
    ) -> Result<oneshot::Receiver<McpAnswer>, BridgeEnd> {
        let (answer, receiver) = oneshot::channel();
        self.wait(request_id, method, Pending::Mcp(answer), progress)?;
        Ok(receiver)
    }

    fn wait(
        &self,
        request_id: &str,
        what: &str,
        answer: Pending,
        progress: Option<ProgressSink>,
    ) -> Result<(), BridgeEnd> {
        let mut calls = self.calls();
        if let Some(reason) = calls.ended {
            return Err(reason);
        }
        calls.waiting.insert(
            request_id.to_owned(),
            Waiting {
                answer,
                progress,
                tool: what.into(),
                asks: None,
            },
        );
        Ok(())
    }

    /// Passes a progress report to the waiting call; false when no call waits
    /// for this id. Reports for callers that did not ask for progress, or that
    /// are not keeping up, are dropped.
    pub(crate) fn progress(&self, report: proto::ToolProgress) -> bool {
        let calls = self.calls();
        let Some(waiting) = calls.waiting.get(&report.request_id) else {
            return false;
        };
        if let Some(sink) = &waiting.progress
            && !sink.push(report)
        {
            self.metrics.dropped(DropReason::ProgressOverflow);
        }
        true
    }

    /// Drops a waiting call (it timed out or its caller went away).
    pub(crate) fn forget(&self, request_id: &str) {
        self.calls().waiting.remove(request_id);
    }

    /// Forgets a call its caller gave up on and tells the app to stop
    /// working on it; a result that still comes is dropped quietly.
    /// Its requests to the client still waiting end with it: the app gets
    /// an error response for each, saying why, before the cancel.
    pub(crate) fn cancel(&self, request_id: &str, reason: &str) {
        let cancelled = {
            let mut calls = self.calls();
            if calls.ended.is_some() {
                return;
            }
            let cancelled = calls.waiting.remove(request_id);
            if calls.cancelled.len() == CANCELLED_REMEMBERED {
                calls.cancelled.pop_front();
            }
            calls.cancelled.push_back(request_id.to_owned());
            cancelled
        };
        if let Some(asks) = cancelled
            .as_ref()
            .and_then(|waiting| waiting.asks.as_deref())
        {
            for message in asks.ended_with_call(request_id, reason) {
                self.notify(message);
            }
        }
        drop(cancelled);
        self.notify(proxy(proxy_message::Kind::Cancel(proto::CancelTool {
            request_id: request_id.to_owned(),
            reason: reason.to_owned(),
        })));
    }

    /// Whether the call was cancelled recently.
    fn was_cancelled(&self, request_id: &str) -> bool {
        self.calls().cancelled.iter().any(|id| id == request_id)
    }

    /// Hands the app's answer to the waiting call. A call that waits for
    /// the other kind of answer (a tool result for an MCP request, say)
    /// fails at once, as a malformed answer.
    fn complete(&self, request_id: &str, reply: Reply) -> Result<(), Unmatched> {
        let caller = self.calls().waiting.remove(request_id);
        let Some(caller) = caller else {
            return Err(Unmatched::NoCall);
        };
        match (caller.answer, reply) {
            (Pending::Tool(answer), Reply::Tool(outcome)) => {
                let _ = answer.send(Ok(outcome));
                Ok(())
            }
            (Pending::Mcp(answer), Reply::Mcp(reply)) => {
                let _ = answer.send(Ok(reply));
                Ok(())
            }
            (pending, reply) => {
                let (sent, expected) = match reply {
                    Reply::Tool(_) => ("invoke_result", "mcp_result"),
                    Reply::Mcp(_) => ("mcp_result", "invoke_result"),
                };
                pending.fail(InvokeError::MalformedAnswer {
                    tool: caller.tool.into(),
                    what: "result",
                    problem: format!(
                        "the app answered with {sent}; this request expects {expected}"
                    ),
                });
                Err(Unmatched::WrongKind)
            }
        }
    }

    /// Fails the waiting call with the error `fail` makes from its tool name;
    /// false when no call waits for this id.
    pub(crate) fn fail(&self, request_id: &str, fail: impl FnOnce(&str) -> InvokeError) -> bool {
        let caller = self.calls().waiting.remove(request_id);
        match caller {
            Some(caller) => {
                let error = fail(&caller.tool);
                caller.answer.fail(error)
            }
            None => false,
        }
    }

    /// Queues a message for the app, waiting while the queue is full.
    pub(crate) async fn send(&self, message: Box<ProxyMessage>) -> Result<(), BridgeEnd> {
        if self.closed.is_closed() {
            return Err(self.end_reason().unwrap_or(BridgeEnd::Disconnected));
        }
        self.outbound
            .push(message, &self.closed)
            .await
            .map_err(|()| self.end_reason().unwrap_or(BridgeEnd::Disconnected))
    }

    /// Queues a message for the app unless the queue is full (notices and
    /// pings are not worth blocking for).
    pub(crate) fn notify(&self, message: ProxyMessage) {
        if self.closed.is_closed() {
            return;
        }
        if self.outbound.try_push(Box::new(message)).is_err() {
            self.metrics.dropped(DropReason::QueueFull);
            tracing::debug!("bridge queue full; notice dropped");
        }
    }
}

/// What an attached transport forwards to the app: the proxy's messages,
/// then, once, the reason the bridge ended.
///
/// Dropping the stream before the bridge ended (the app's connection went
/// away) counts as a disconnect: the bridge ends, the calls waiting on it
/// fail at once, and `drive` returns so its owner detaches it.
pub struct BridgeStream {
    bridge: Arc<Bridge>,
    finished: bool,
}

impl BridgeStream {
    pub(crate) fn new(bridge: Arc<Bridge>) -> Self {
        Self {
            bridge,
            finished: false,
        }
    }
}

impl Stream for BridgeStream {
    /// Boxed as they were queued: whoever holds an item across an await
    /// (a transport's writer waiting on its socket) holds a pointer.
    type Item = Result<Queued, BridgeEnd>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.finished {
            return Poll::Ready(None);
        }
        // Registered first: ending the bridge and queueing both wake it.
        self.bridge.outbound.register_reader(cx);
        if self.bridge.closed.is_closed() {
            self.finished = true;
            let reason = self.bridge.end_reason().unwrap_or(BridgeEnd::Disconnected);
            return Poll::Ready(Some(Err(reason)));
        }
        match self.bridge.outbound.pop() {
            Some(message) => Poll::Ready(Some(Ok(message))),
            None => Poll::Pending,
        }
    }
}

impl BridgeStream {
    /// Ends the bridge for `reason`, which the transport found out (the app
    /// stopped reading): its calls fail at once with that reason.
    pub fn end(&self, reason: BridgeEnd) {
        self.bridge.end(reason);
    }
}

impl Drop for BridgeStream {
    fn drop(&mut self) {
        self.bridge.end(BridgeEnd::Disconnected);
    }
}

/// A proxy message of the given kind.
pub(crate) fn proxy(kind: proxy_message::Kind) -> ProxyMessage {
    ProxyMessage { kind: Some(kind) }
}

pub(crate) fn notice(message: String, request_id: String) -> ProxyMessage {
    proxy(proxy_message::Kind::Error(proto::ErrorNotice {
        message,
        request_id,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_bridge_holds_stays_small() {
        // One per attached bridge, for as long as it lives: every byte is a
        // byte of every idle session. Its queue and its calls allocate only
        // while something waits in them.
        let size = std::mem::size_of::<Bridge>();
        assert!(size <= 408, "a bridge is {size} bytes");
        // Queued messages are pointers (the queue's room is paid per slot).
        assert_eq!(std::mem::size_of::<Queued>(), 8);
    }
}
