//! The open streams of the legacy transport: the registry that bounds them,
//! one stream's queue of events and the revision it negotiated, and the
//! event stream the client reads, which closes its stream when dropped.
//!
//! Two bounds keep what an unread stream holds small. Its queue is bounded
//! in bytes, not only in events (`OPENCLAW_PROXY_LEGACY_SSE_QUEUE_BYTES`):
//! an event may be a 1 MB `tools/list`, and 64 of them times every stream
//! the server allows was gigabytes. Everything queued for the client and
//! not yet taken by it counts, with the answers waiting for room; a stream
//! past the bound is closed at once, its queue dropped, and the requests
//! still pending on it get a JSON-RPC error as the stream's last event. And
//! streams are bounded per client as well as per session and per server
//! (`OPENCLAW_PROXY_LEGACY_SSE_STREAMS_PER_CLIENT`), so one client cannot
//! take every slot: a client is the OAuth subject that opened the stream,
//! else its address (`X-Forwarded-For` from a trusted proxy), since the
//! OpenClaw token and the app token are shared by everyone who has them.
//!
//! Nor can many clients together keep a newcomer out: when every slot of
//! the server (`OPENCLAW_PROXY_LEGACY_SSE_MAX_STREAMS`) is taken, a client
//! that holds fewer streams than the largest holder still gets one, and the
//! largest holder's oldest stream is closed to make room. Every client is so
//! sure of a fair share of the slots (all of them divided by the clients
//! holding any); 32 addresses with 32 streams each no longer shut out the
//! 33rd.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use openclaw_proxy_core::escape::Outside;
use serde_json::value::RawValue;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::{MAX_PENDING, MAX_STREAMS_PER_SESSION, QUEUE};
use crate::config::LegacyLimits;
use crate::http::mcp::jsonrpc::Refusal;
use crate::http::sse;

/// The open legacy streams of this process, by stream id.
#[derive(Debug, Default)]
pub struct LegacyStreams {
    streams: Mutex<HashMap<Arc<str>, Arc<LegacyStream>>>,
    /// The order streams were opened in, for the oldest of a client.
    opened: AtomicU64,
}

/// With every slot taken, the stream to close so that a client holding
/// `holds` streams gets one: the oldest of the client holding the most,
/// when that is more than the newcomer will hold; `None` when the newcomer
/// already holds as many as anyone (its share).
fn fair_share_room(
    streams: &HashMap<Arc<str>, Arc<LegacyStream>>,
    holds: usize,
) -> Option<Arc<str>> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for stream in streams.values() {
        *counts.entry(&stream.client).or_default() += 1;
    }
    let (largest, most) = counts.into_iter().max_by_key(|(_, count)| *count)?;
    if most <= holds + 1 {
        return None;
    }
    streams
        .values()
        .filter(|stream| &*stream.client == largest)
        .min_by_key(|stream| stream.order)
        .map(|stream| stream.id.clone())
}

/// Resources one stream may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 1024;

/// One open stream.
#[derive(Debug)]
pub(super) struct LegacyStream {
    pub(super) id: Arc<str>,
    pub(super) session_id: Arc<str>,
    /// Who opened it, as the per-client limit counts them.
    client: Arc<str>,
    /// When it was opened, among the server's streams.
    order: u64,
    /// Encoded SSE events for the client.
    outbound: mpsc::Sender<Bytes>,
    /// Bytes queued for the client or waiting for room, not yet taken.
    unread: AtomicUsize,
    /// The most `unread` may reach.
    queue_bytes: usize,
    /// Why the stream was closed past its bound, for its pending requests.
    overflowed: Mutex<Option<String>>,
    /// The JSON-RPC ids of the requests in progress, by a number of their
    /// own (bounded as the messages in progress are).
    pending_ids: Mutex<HashMap<u64, Box<RawValue>>>,
    next_pending: AtomicU64,
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

    /// Registers a new stream of `session_id` opened by `client`, within
    /// the limits.
    pub(super) fn open(
        &self,
        session_id: Arc<str>,
        client: Arc<str>,
        limits: LegacyLimits,
    ) -> Result<(Arc<LegacyStream>, mpsc::Receiver<Bytes>), Refusal> {
        let mut streams = self.lock();
        let (mut of_session, mut of_client) = (0, 0);
        for stream in streams.values() {
            of_session += usize::from(stream.session_id == session_id);
            of_client += usize::from(stream.client == client);
        }
        if of_session >= MAX_STREAMS_PER_SESSION {
            return Err(Refusal::SessionStreams {
                session_id,
                limit: MAX_STREAMS_PER_SESSION,
            });
        }
        if of_client >= limits.streams_per_client {
            return Err(Refusal::ClientStreams {
                client: client.to_string(),
                limit: limits.streams_per_client,
            });
        }
        if streams.len() >= limits.max_streams {
            let Some(evicted) = fair_share_room(&streams, of_client) else {
                return Err(Refusal::ServerStreams {
                    limit: limits.max_streams,
                });
            };
            if let Some(stream) = streams.remove(&evicted) {
                tracing::debug!(
                    client = Outside::new(&stream.client).field(),
                    "legacy SSE stream closed to make room for a client with fewer (OPENCLAW_PROXY_LEGACY_SSE_MAX_STREAMS)"
                );
                stream.closed.cancel();
            }
        }
        let (outbound, receiver) = mpsc::channel(QUEUE);
        let id: Arc<str> = uuid::Uuid::new_v4().simple().to_string().into();
        let stream = Arc::new(LegacyStream {
            id: id.clone(),
            session_id,
            client,
            order: self.opened.fetch_add(1, Ordering::Relaxed),
            outbound,
            unread: AtomicUsize::new(0),
            queue_bytes: limits.queue_bytes,
            overflowed: Mutex::new(None),
            pending_ids: Mutex::default(),
            next_pending: AtomicU64::new(0),
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
    /// the stream ends. So does one that left more than its bound unread
    /// (one message alone always fits, however large).
    pub(super) async fn deliver(
        &self,
        streams: &LegacyStreams,
        message: &str,
        write_timeout: Duration,
    ) {
        let event = sse::named_event("message", message);
        let size = event.len();
        let unread = self.unread.fetch_add(size, Ordering::Relaxed);
        if unread > 0 && unread + size > self.queue_bytes {
            self.unread.fetch_sub(size, Ordering::Relaxed);
            self.overflow(streams, unread + size);
            return;
        }
        match self.outbound.send_timeout(event, write_timeout).await {
            Ok(()) => {}
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                self.unread.fetch_sub(size, Ordering::Relaxed);
                tracing::info!(
                    session = Outside::session(&self.session_id).field(),
                    "legacy SSE client does not read its stream within {write_timeout:?}; the stream ends"
                );
                streams.close(&self.id);
            }
            // The stream already ended.
            Err(mpsc::error::SendTimeoutError::Closed(_)) => {
                self.unread.fetch_sub(size, Ordering::Relaxed);
            }
        }
    }

    /// Ends a stream whose client left `unread` bytes unread, past the bound.
    fn overflow(&self, streams: &LegacyStreams, unread: usize) {
        let reason = format!(
            "the legacy SSE stream was closed: its client left {unread} bytes unread, more than the {} bytes a stream may hold (OPENCLAW_PROXY_LEGACY_SSE_QUEUE_BYTES); read the stream as it comes, or open a new one",
            self.queue_bytes
        );
        tracing::info!(
            session = Outside::session(&self.session_id).field(),
            "{reason}"
        );
        self.overflowed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
        streams.close(&self.id);
    }

    /// Notes a request in progress whose JSON-RPC id is `id`; the number to
    /// forget it by once it is answered.
    pub(super) fn pending_request(&self, id: Box<RawValue>) -> u64 {
        let number = self.next_pending.fetch_add(1, Ordering::Relaxed);
        self.pending_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(number, id);
        number
    }

    /// Forgets a request in progress: it was answered, or needs no answer.
    pub(super) fn answered(&self, number: u64) {
        self.pending_ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&number);
    }

    /// The last event of a stream closed past its bound: an error answer
    /// to each request still pending on it. `None` for any other end.
    fn farewell(&self) -> Option<Bytes> {
        let reason = self
            .overflowed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let ids = std::mem::take(
            &mut *self
                .pending_ids
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut events = Vec::new();
        for id in ids.into_values() {
            let answer = serde_json::json!({
                "jsonrpc": "2.0", "id": id,
                "error": {"code": -32000, "message": reason},
            });
            events.extend_from_slice(&sse::named_event("message", &answer.to_string()));
        }
        (!events.is_empty()).then(|| Bytes::from(events))
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
/// comment every [`sse::KEEP_ALIVE`]; it ends when the stream is closed
/// (with the error answers of [`LegacyStream::farewell`] when it was closed
/// past its bound, and the events still queued dropped).
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
    let state = Some((stream, receiver, keep_alive, guard));
    futures_util::stream::unfold(state, |state| async move {
        let (stream, mut receiver, mut keep_alive, guard) = state?;
        let event = tokio::select! {
            biased;
            () = stream.closed.cancelled() => {
                receiver.close();
                while receiver.try_recv().is_ok() {}
                let last = stream.farewell()?;
                return Some((Ok(last), None));
            }
            event = receiver.recv() => {
                let event = event?;
                stream.unread.fetch_sub(event.len(), Ordering::Relaxed);
                event
            }
            _ = keep_alive.tick() => sse::KEEP_ALIVE_COMMENT,
        };
        Some((Ok(event), Some((stream, receiver, keep_alive, guard))))
    })
}
