//! One queue per node for what calls send to NATS (the calling node's
//! requests and cancellations, the holding node's progress, answers and
//! failures) and for the sessions' changes, so that a busy node sends many
//! messages in one write.
//!
//! Why: the NATS client writes whatever is queued when its task runs, and
//! tokio runs a task woken by another right after that one (its "LIFO
//! slot"). A call that published straight to the client therefore woke the
//! client's task, which wrote that one message to the socket, and NATS read
//! it alone. When other calls are in flight, the outbox first yields once
//! (`yield_now`: the tasks ready to run on its thread go first), so the
//! calls about to publish queue their messages, and the client gets them
//! all at once: fewer writes here, fewer reads and wake-ups in
//! `nats-server`, less CPU per call on both. A node with one call in flight
//! does not yield; its message takes only the hop through this task. "In
//! flight" counts calls that are only waiting too (a long tool call), so
//! with one of those running a message may wait one scheduler turn.
//!
//! One queue keeps one order: a cancellation leaves after the request it
//! cancels, and a request whose caller stopped waiting before it left is
//! not sent at all.
//!
//! The alive ticker publishes on its own: one message per call a second.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_nats::{HeaderMap, Message, Subject};
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::log_budget::LogBudget;
use crate::outcome::InvokeError;

/// Messages queued at most; a full queue holds the publishing call up.
const QUEUE: usize = 1024;
/// Messages handed to the client per turn at most: tokio's budget of
/// channel sends per task poll, so one turn is one write.
const BATCH: usize = 128;

/// What reaches a waiting call on the calling node.
pub(crate) enum Incoming {
    /// A message on the call's reply subject. Boxed: a channel allocates its
    /// first block of 32 slots up front, and per call that block is 32
    /// pointers rather than 32 whole messages.
    Nats(Box<Message>),
    /// The call could not be sent to NATS, and why.
    Unsent(InvokeError),
}

/// One message of a call.
pub(crate) struct Outgoing {
    pub(crate) subject: Subject,
    pub(crate) reply: Option<Subject>,
    pub(crate) headers: Option<HeaderMap>,
    pub(crate) payload: Bytes,
    /// A request's waiting call: told when the request cannot be sent, and
    /// the request is dropped when the call has stopped waiting.
    pub(crate) caller: Option<mpsc::Sender<Incoming>>,
    /// For a message nobody waits on whose loss is worth a warning (a
    /// session's change): the budget of the warning when it cannot be sent.
    pub(crate) unsent_warnings: Option<Arc<LogBudget>>,
}

impl Outgoing {
    /// A message with no reply subject and no caller.
    pub(crate) fn to(subject: Subject, headers: Option<HeaderMap>, payload: Bytes) -> Self {
        Self {
            subject,
            reply: None,
            headers,
            payload,
            caller: None,
            unsent_warnings: None,
        }
    }
}

/// The queue; cloned into every task that publishes for a call.
#[derive(Clone)]
pub(crate) struct Outbox {
    queue: mpsc::Sender<Outgoing>,
    calls: Arc<AtomicUsize>,
    client: async_nats::Client,
}

/// The outbox's task is gone (the runtime is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("this node's queue to NATS is closed")]
pub(crate) struct Closed;

/// Why a message was not queued at once.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotQueued {
    #[error("this node's queue to NATS is full")]
    Full,
    #[error(transparent)]
    Closed(#[from] Closed),
}

impl Outbox {
    /// Starts the task that hands queued messages to `client`.
    pub(crate) fn start(client: async_nats::Client) -> Self {
        let (queue, mut queued) = mpsc::channel::<Outgoing>(QUEUE);
        let calls = Arc::new(AtomicUsize::new(0));
        let (in_flight, publisher) = (calls.clone(), client.clone());
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            loop {
                if queued.recv_many(&mut batch, BATCH).await == 0 {
                    return;
                }
                if in_flight.load(Ordering::Relaxed) > 1 && batch.len() < BATCH {
                    tokio::task::yield_now().await;
                    while batch.len() < BATCH
                        && let Ok(message) = queued.try_recv()
                    {
                        batch.push(message);
                    }
                }
                for message in batch.drain(..) {
                    publish(&publisher, message).await;
                }
            }
        });
        Self {
            queue,
            calls,
            client,
        }
    }

    /// Queues a message; waits while the queue is full.
    pub(crate) async fn send(&self, message: Outgoing) -> Result<(), Closed> {
        self.queue.send(message).await.map_err(|_| Closed)
    }

    /// Queues a message at once, or not at all: for code that must never
    /// wait and can do without the message (a session's change).
    pub(crate) fn try_send(&self, message: Outgoing) -> Result<(), NotQueued> {
        self.queue.try_send(message).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => NotQueued::Full,
            mpsc::error::TrySendError::Closed(_) => NotQueued::Closed(Closed),
        })
    }

    /// Queues a message from code that cannot wait (a `Drop`): at once, or
    /// from a task when the queue is full.
    pub(crate) fn send_soon(&self, message: Outgoing) {
        if let Err(mpsc::error::TrySendError::Full(message)) = self.queue.try_send(message) {
            let queue = self.queue.clone();
            tokio::spawn(async move {
                let _ = queue.send(message).await;
            });
        }
    }

    /// The largest message NATS takes, in bytes (headers included).
    pub(crate) fn max_payload(&self) -> usize {
        self.client.max_payload()
    }

    /// Counts a call as in flight on this node until the guard drops.
    pub(crate) fn call_in_flight(&self) -> InFlight<'_> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.calls)
    }
}

/// A call counted by [`Outbox::call_in_flight`].
#[must_use = "the call counts as in flight only while the guard lives"]
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn publish(client: &async_nats::Client, message: Outgoing) {
    let Outgoing {
        subject,
        reply,
        headers,
        payload,
        caller,
        unsent_warnings,
    } = message;
    if caller.as_ref().is_some_and(mpsc::Sender::is_closed) {
        // Nobody waits for its answer any more.
        return;
    }
    let bytes = payload.len();
    let published = match (reply, headers) {
        (Some(reply), Some(headers)) => {
            client
                .publish_with_reply_and_headers(subject, reply, headers, payload)
                .await
        }
        (Some(reply), None) => client.publish_with_reply(subject, reply, payload).await,
        (None, Some(headers)) => client.publish_with_headers(subject, headers, payload).await,
        (None, None) => client.publish(subject, payload).await,
    };
    let Err(error) = published else { return };
    match (caller, unsent_warnings) {
        // The call fails at once, saying why.
        (Some(caller), _) => {
            let reason = if error.kind() == async_nats::client::PublishErrorKind::MaxPayloadExceeded
            {
                InvokeError::TooLargeForNats {
                    what: "call",
                    bytes,
                    limit: client.max_payload(),
                }
            } else {
                InvokeError::Unavailable(format!("NATS: {error}"))
            };
            let _ = caller.try_send(Incoming::Unsent(reason));
        }
        (None, Some(warnings)) => {
            if let Some(left_out) = warnings.allow() {
                tracing::warn!(%error, bytes, left_out, "a session's change was not sent to the other nodes");
            }
        }
        (None, None) => tracing::debug!(%error, "message to another node not sent"),
    }
}
