//! One attached bridge: the outbound queue to the app, the calls waiting for
//! the app's answers, and the reason the bridge ended.
//!
//! A bridge ends exactly once. Ending it fails every call still waiting on it
//! at once, with a message that says why, so no caller ever waits for the
//! tool timeout on a bridge that is already gone.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures_util::Stream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::hub::{InvokeError, ToolOutcome};
use crate::proto::{self, ProxyMessage};

/// How many messages may wait for a slow app before senders wait too.
pub(crate) const OUTBOUND_CAPACITY: usize = 256;

/// Messages travel boxed: a channel reserves its first block of 32 slots up
/// front, and 32 pointers cost far less per idle bridge than 32 messages.
pub(crate) type Queued = Box<ProxyMessage>;

/// Why a bridge ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BridgeEnd {
    /// A newer bridge attached to the same session.
    Replaced,
    /// The session was deleted.
    SessionDeleted,
    /// The app closed the bridge or the connection broke.
    Disconnected,
    /// The app stopped answering pings.
    Unresponsive,
    /// The proxy is shutting down.
    ShuttingDown,
}

impl BridgeEnd {
    /// The reason as told to the app whose bridge ends.
    pub fn reason_for_app(self) -> &'static str {
        match self {
            Self::Replaced => "replaced by a newer bridge for the same session",
            Self::SessionDeleted => "the session was deleted",
            Self::Disconnected => "the bridge disconnected",
            Self::Unresponsive => "no message from the app for several ping intervals",
            Self::ShuttingDown => "the proxy is shutting down",
        }
    }

    /// The sentence a caller whose call was cut off by this end receives.
    pub fn reason_for_caller(self) -> &'static str {
        match self {
            Self::Replaced => {
                "The app's bridge was replaced by a newer connection before the tool answered."
            }
            Self::SessionDeleted => "The session was deleted before the tool answered.",
            Self::Disconnected => "The app's bridge disconnected before the tool answered.",
            Self::Unresponsive => {
                "The app's bridge stopped answering pings and was dropped before the tool answered."
            }
            Self::ShuttingDown => "The proxy is shutting down; the tool call was abandoned.",
        }
    }
}

type Answer = Result<ToolOutcome, InvokeError>;

/// Where a call's progress reports go, if its caller wants them.
pub type ProgressSink = mpsc::Sender<proto::ToolProgress>;

struct Waiting {
    answer: oneshot::Sender<Answer>,
    progress: Option<ProgressSink>,
    /// The tool called, for messages about this call.
    tool: Box<str>,
}

#[derive(Default)]
struct Calls {
    waiting: HashMap<String, Waiting>,
    ended: Option<BridgeEnd>,
}

/// The proxy's side of one attached bridge.
pub(crate) struct Bridge {
    outbound: mpsc::Sender<Queued>,
    closed: CancellationToken,
    calls: Mutex<Calls>,
}

impl Bridge {
    pub(crate) fn new() -> (Arc<Self>, mpsc::Receiver<Queued>) {
        let (outbound, receiver) = mpsc::channel(OUTBOUND_CAPACITY);
        let bridge = Arc::new(Self {
            outbound,
            closed: CancellationToken::new(),
            calls: Mutex::default(),
        });
        (bridge, receiver)
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
        self.closed.cancel();
        for (_, caller) in waiting {
            let _ = caller.answer.send(Err(InvokeError::BridgeEnded(reason)));
        }
        true
    }

    pub(crate) fn end_reason(&self) -> Option<BridgeEnd> {
        self.calls().ended
    }

    pub(crate) fn closed(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.closed.cancelled()
    }

    /// Records a call that waits for the app's answer.
    pub(crate) fn register(
        &self,
        request_id: &str,
        tool: &str,
        progress: Option<ProgressSink>,
    ) -> Result<oneshot::Receiver<Answer>, BridgeEnd> {
        let mut calls = self.calls();
        if let Some(reason) = calls.ended {
            return Err(reason);
        }
        let (answer, receiver) = oneshot::channel();
        calls.waiting.insert(
            request_id.to_owned(),
            Waiting {
                answer,
                progress,
                tool: tool.into(),
            },
        );
        Ok(receiver)
    }

    /// Passes a progress report to the waiting call; false when no call waits
    /// for this id. Reports for callers that did not ask for progress, or that
    /// are not keeping up, are dropped.
    pub(crate) fn progress(&self, report: proto::ToolProgress) -> bool {
        let calls = self.calls();
        let Some(waiting) = calls.waiting.get(&report.request_id) else {
            return false;
        };
        if let Some(sink) = &waiting.progress {
            let _ = sink.try_send(report);
        }
        true
    }

    /// Drops a waiting call (it timed out or its caller went away).
    pub(crate) fn forget(&self, request_id: &str) {
        self.calls().waiting.remove(request_id);
    }

    /// Hands the app's answer to the waiting call; false when none waits.
    pub(crate) fn complete(&self, request_id: &str, answer: Answer) -> bool {
        let caller = self.calls().waiting.remove(request_id);
        match caller {
            Some(caller) => caller.answer.send(answer).is_ok(),
            None => false,
        }
    }

    /// Fails the waiting call with the error `fail` makes from its tool name;
    /// false when no call waits for this id.
    pub(crate) fn fail(&self, request_id: &str, fail: impl FnOnce(&str) -> InvokeError) -> bool {
        let caller = self.calls().waiting.remove(request_id);
        match caller {
            Some(caller) => {
                let error = fail(&caller.tool);
                caller.answer.send(Err(error)).is_ok()
            }
            None => false,
        }
    }

    /// Queues a message for the app, waiting while the queue is full.
    pub(crate) async fn send(&self, message: ProxyMessage) -> Result<(), BridgeEnd> {
        tokio::select! {
            biased;
            () = self.closed.cancelled() => Err(self.end_reason().unwrap_or(BridgeEnd::Disconnected)),
            sent = self.outbound.send(Box::new(message)) => {
                sent.map_err(|_| self.end_reason().unwrap_or(BridgeEnd::Disconnected))
            }
        }
    }

    /// Queues a message for the app unless the queue is full (notices and
    /// pings are not worth blocking for).
    pub(crate) fn notify(&self, message: ProxyMessage) {
        if self.outbound.try_send(Box::new(message)).is_err() {
            tracing::debug!("bridge queue full or closed; notice dropped");
        }
    }
}

/// What an attached transport forwards to the app: the proxy's messages,
/// then, once, the reason the bridge ended.
///
/// Dropping the stream before the bridge ended (the app's connection went
/// away) counts as a disconnect: the session loses its bridge and the calls
/// waiting on it fail at once.
pub struct BridgeStream {
    pub(crate) receiver: mpsc::Receiver<Queued>,
    pub(crate) bridge: Arc<Bridge>,
    pub(crate) closed: Pin<Box<WaitForCancellationFutureOwned>>,
    pub(crate) on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
    pub(crate) finished: bool,
}

impl BridgeStream {
    pub(crate) fn new(
        receiver: mpsc::Receiver<Queued>,
        bridge: Arc<Bridge>,
        on_drop: Box<dyn FnOnce() + Send + Sync>,
    ) -> Self {
        let closed = Box::pin(bridge.closed.clone().cancelled_owned());
        Self {
            receiver,
            bridge,
            closed,
            on_drop: Some(on_drop),
            finished: false,
        }
    }
}

impl Stream for BridgeStream {
    type Item = Result<ProxyMessage, BridgeEnd>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.finished {
            return Poll::Ready(None);
        }
        if self.closed.as_mut().poll(cx).is_ready() {
            self.finished = true;
            let reason = self.bridge.end_reason().unwrap_or(BridgeEnd::Disconnected);
            return Poll::Ready(Some(Err(reason)));
        }
        match self.receiver.poll_recv(cx) {
            Poll::Ready(Some(message)) => Poll::Ready(Some(Ok(*message))),
            Poll::Ready(None) => {
                self.finished = true;
                Poll::Ready(Some(Err(BridgeEnd::Disconnected)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for BridgeStream {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            on_drop();
        }
    }
}
