//! The open streams of the legacy transport: the registry that bounds them,
//! one stream's queue of events and the revision it negotiated, and the
//! event stream the client reads, which closes its stream when dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use openclaw_proxy_core::escape::Outside;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::{MAX_PENDING, MAX_STREAMS, MAX_STREAMS_PER_SESSION, QUEUE};
use crate::http::mcp::jsonrpc::Refusal;
use crate::http::sse;

/// The open legacy streams of this process, by stream id.
#[derive(Debug, Default)]
pub struct LegacyStreams {
    streams: Mutex<HashMap<Arc<str>, Arc<LegacyStream>>>,
}

/// Resources one stream may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 1024;

/// One open stream.
#[derive(Debug)]
pub(super) struct LegacyStream {
    pub(super) id: Arc<str>,
    pub(super) session_id: Arc<str>,
    /// Encoded SSE events for the client.
    outbound: mpsc::Sender<Bytes>,
    /// Cancelled when the stream ends, whatever ends it.
    pub(super) closed: CancellationToken,
    /// Messages in progress.
    pub(super) pending: Arc<Semaphore>,
    /// The revision the stream's `initialize` negotiated, if any.
    protocol_version: Mutex<Option<String>>,
    /// The resources the client subscribed to (`resources/subscribe`).
    subscribed: Mutex<std::collections::HashSet<String>>,
}

impl LegacyStreams {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<LegacyStream>>> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new stream of `session_id`, within the limits.
    pub(super) fn open(
        &self,
        session_id: Arc<str>,
    ) -> Result<(Arc<LegacyStream>, mpsc::Receiver<Bytes>), Refusal> {
        let mut streams = self.lock();
        if streams.len() >= MAX_STREAMS {
            return Err(Refusal::ServerStreams { limit: MAX_STREAMS });
        }
        let of_session = streams
            .values()
            .filter(|stream| stream.session_id == session_id)
            .count();
        if of_session >= MAX_STREAMS_PER_SESSION {
            return Err(Refusal::SessionStreams {
                session_id,
                limit: MAX_STREAMS_PER_SESSION,
            });
        }
        let (outbound, receiver) = mpsc::channel(QUEUE);
        let id: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
        let stream = Arc::new(LegacyStream {
            id: id.clone(),
            session_id,
            outbound,
            closed: CancellationToken::new(),
            pending: Arc::new(Semaphore::new(MAX_PENDING)),
            protocol_version: Mutex::new(None),
            subscribed: Mutex::default(),
        });
        streams.insert(id, stream.clone());
        Ok((stream, receiver))
    }

    /// The open stream `id` of `session_id`.
    pub(super) fn get(&self, id: &str, session_id: &str) -> Option<Arc<LegacyStream>> {
        self.lock()
            .get(id)
            .filter(|stream| &*stream.session_id == session_id)
            .cloned()
    }

    /// Ends stream `id`: it leaves the registry and everything it runs stops.
    pub(super) fn close(&self, id: &str) {
        if let Some(stream) = self.lock().remove(id) {
            stream.closed.cancel();
        }
    }

    /// How many streams are open.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no stream is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl LegacyStream {
    /// Queues one JSON-RPC message (JSON text) as a `message` event. A client
    /// that has not made room within `write_timeout` has stopped reading:
    /// the stream ends.
    pub(super) async fn deliver(
        &self,
        streams: &LegacyStreams,
        message: &str,
        write_timeout: Duration,
    ) {
        let event = sse::named_event("message", message);
        match self.outbound.send_timeout(event, write_timeout).await {
            Ok(()) => {}
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                tracing::info!(
                    session = Outside::session(&self.session_id).field(),
                    "legacy SSE client does not read its stream within {write_timeout:?}; the stream ends"
                );
                streams.close(&self.id);
            }
            // The stream already ended.
            Err(mpsc::error::SendTimeoutError::Closed(_)) => {}
        }
    }

    pub(super) fn protocol_version(&self) -> Option<String> {
        self.protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Notes a `resources/subscribe` (`true`) or `resources/unsubscribe`.
    pub(super) fn subscribe(&self, uri: String, subscribe: bool) {
        let mut subscribed = self
            .subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if subscribe {
            // Bounded as the tools are: a client cannot grow it forever.
            if subscribed.len() < MAX_SUBSCRIPTIONS {
                subscribed.insert(uri);
            }
        } else {
            subscribed.remove(&uri);
        }
    }

    /// Whether the client subscribed to `uri`.
    pub(super) fn is_subscribed(&self, uri: &str) -> bool {
        self.subscribed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(uri)
    }

    pub(super) fn set_protocol_version(&self, version: String) {
        *self
            .protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(version);
    }
}

/// Ends its stream when the response body is dropped: the client closed
/// the connection, or the server ended the stream.
struct CloseOnDrop {
    streams: Arc<LegacyStreams>,
    id: Arc<str>,
}

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.streams.close(&self.id);
        tracing::debug!("legacy SSE stream closed");
    }
}

/// The stream's events after `endpoint`: queued messages, and a keep-alive
/// comment every [`sse::KEEP_ALIVE`]; it ends when the stream is closed.
pub(super) fn outgoing(
    streams: Arc<LegacyStreams>,
    stream: Arc<LegacyStream>,
    receiver: mpsc::Receiver<Bytes>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static {
    let mut keep_alive = tokio::time::interval_at(
        tokio::time::Instant::now() + sse::KEEP_ALIVE,
        sse::KEEP_ALIVE,
    );
    keep_alive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let guard = CloseOnDrop {
        streams,
        id: stream.id.clone(),
    };
    let state = (stream.closed.clone(), receiver, keep_alive, guard);
    futures_util::stream::unfold(
        state,
        |(closed, mut receiver, mut keep_alive, guard)| async move {
            let event = tokio::select! {
                biased;
                () = closed.cancelled() => None,
                event = receiver.recv() => event,
                _ = keep_alive.tick() => Some(sse::KEEP_ALIVE_COMMENT),
            };
            event.map(|event| (Ok(event), (closed, receiver, keep_alive, guard)))
        },
    )
}
