//! One queue per node for the messages of calls on their way to NATS, so
//! that a busy node sends many of them in one write.
//!
//! Why: the NATS client writes whatever is queued when its task runs, and
//! tokio runs a task woken by another right after that one (its "LIFO
//! slot"). A call that published straight to the client therefore woke the
//! client's task, which wrote that one message to the socket, and NATS read
//! it alone. With many calls in flight the outbox waits one turn of the
//! scheduler (a `yield_now`), so the calls ready to run queue their messages
//! first, and the client gets them all at once: fewer writes here, fewer
//! reads and wake-ups in `nats-server`, less CPU per call on both. A node
//! with one call in flight does not wait, so a lone call's latency is as
//! before.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_nats::{HeaderMap, Subject};
use bytes::Bytes;
use tokio::sync::mpsc;

use super::delivery::Reply;

/// Messages queued at most; a full queue holds the publishing call up.
const QUEUE: usize = 1024;
/// Messages handed to the client per turn at most.
const BATCH: usize = 256;

/// One message of a call.
pub(crate) struct Outgoing {
    pub(crate) subject: Subject,
    pub(crate) reply: Option<Subject>,
    pub(crate) headers: HeaderMap,
    pub(crate) payload: Bytes,
    /// Where to say so if it cannot be sent: the waiting call that sent it.
    pub(crate) unsent: Option<mpsc::Sender<Reply>>,
}

/// The queue; cloned into every task that publishes for a call.
#[derive(Clone)]
pub(crate) struct Outbox {
    queue: mpsc::Sender<Outgoing>,
    calls: Arc<AtomicUsize>,
}

/// The outbox's task is gone (the runtime is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("this node's queue to NATS is closed")]
pub(crate) struct Closed;

impl Outbox {
    /// Starts the task that hands queued messages to `client`.
    pub(crate) fn start(client: async_nats::Client) -> Self {
        let (queue, mut queued) = mpsc::channel::<Outgoing>(QUEUE);
        let calls = Arc::new(AtomicUsize::new(0));
        let in_flight = calls.clone();
        tokio::spawn(async move {
            let mut batch = Vec::with_capacity(BATCH);
            loop {
                if queued.recv_many(&mut batch, BATCH).await == 0 {
                    return;
                }
                // Other calls in flight here are likely about to publish
                // too: let them run first, then take what they queued.
                if in_flight.load(Ordering::Relaxed) > 1 {
                    tokio::task::yield_now().await;
                    while batch.len() < BATCH {
                        match queued.try_recv() {
                            Ok(message) => batch.push(message),
                            Err(_) => break,
                        }
                    }
                }
                for message in batch.drain(..) {
                    publish(&client, message).await;
                }
            }
        });
        Self { queue, calls }
    }

    /// Queues a message; waits while the queue is full.
    pub(crate) async fn send(&self, message: Outgoing) -> Result<(), Closed> {
        self.queue.send(message).await.map_err(|_| Closed)
    }

    /// Counts a call as in flight on this node until the guard drops.
    pub(crate) fn call_in_flight(&self) -> InFlight<'_> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.calls)
    }
}

/// A call counted by [`Outbox::call_in_flight`].
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
        unsent,
    } = message;
    let published = match reply {
        Some(reply) => {
            client
                .publish_with_reply_and_headers(subject, reply, headers, payload)
                .await
        }
        None => client.publish_with_headers(subject, headers, payload).await,
    };
    if let Err(error) = published {
        match unsent {
            // The call fails at once, saying why.
            Some(caller) => {
                let _ = caller.try_send(Reply::Unsent(unsent_reason(client, &error)));
            }
            None => tracing::debug!(%error, "reply to another node not sent"),
        }
    }
}

fn unsent_reason(client: &async_nats::Client, error: &async_nats::PublishError) -> String {
    if error.kind() == async_nats::client::PublishErrorKind::MaxPayloadExceeded {
        return format!(
            "The call is too large to travel between proxy nodes: NATS takes messages of at most {} bytes (max_payload); raise max_payload in nats-server's configuration to OPENCLAW_PROXY_MAX_BODY_BYTES or more.",
            client.server_info().max_payload
        );
    }
    format!("NATS: {error}")
}
