//! Answers a client does not read: a connection that leaves an answer
//! unread for `OPENCLAW_PROXY_RESPONSE_WRITE_TIMEOUT_SECONDS` is closed.
//!
//! Why: an answer is rendered whole before it is sent, so an answer that
//! is not sent is memory held. HTTP/2 lets a client hold every answer
//! forever: it opens many streams with a flow-control window of 0 and keeps
//! answering pings, and the server keeps each answer (a 1 MB `tools/list`
//! times the streams allowed). An HTTP/1.1 client that stops reading does
//! the same with one answer per connection. Neither is idle to hyper, so no
//! keep-alive or header timer closes it.
//!
//! How: every response body of a connection is wrapped (`Watched`).
//! hyper polls a body only when it can send what the body gives (HTTP/2:
//! when the stream has flow-control capacity; HTTP/1.1: when the socket
//! takes more), so a body that handed out data and has not been polled
//! again since is waiting on its client. Data is handed out in slices of at
//! most [`SLICE`], so that at most one slice per stream sits in hyper's
//! buffers beyond what the client allowed, and the rest stays here, where
//! the wait is seen. The connection's [`Watch`] looks at its bodies a few
//! times per timeout and ends the connection when one has waited too long;
//! dropping the connection frees every answer it held. A body that waits
//! on the server instead (a streamed answer whose next event is not there
//! yet) was polled and returned `Pending`: it is not waiting on its client.
//!
//! Bytes, too: the answers a connection holds unsent are counted (what each
//! body has yet to hand hyper), per connection and for the whole server
//! ([`Unsent`]). Within the timeout a window-0 client could still make one
//! connection hold every answer its streams asked for (500 answers of a
//! megabyte: a gigabyte, four connections four). Past
//! `OPENCLAW_PROXY_MAX_UNSENT_BYTES_PER_CONNECTION`, or with the server past
//! `OPENCLAW_PROXY_MAX_UNSENT_BYTES`, a connection is closed as soon as one
//! of its answers has waited on its client for [`OVER_LIMIT_WAIT`] rather
//! than the whole timeout (a client that reads takes an answer's next slice
//! far sooner). h2 buffers at most
//! one slice per stream beyond the client's window
//! (`max_send_buf_size`), so what it holds is bounded by the streams
//! allowed; what was rendered and not yet handed to it is bounded here.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Instant;

/// The most a body hands hyper at once.
pub const SLICE: usize = 64 * 1024;

/// How long an answer may wait on its client while its connection, or the
/// server, holds more unsent than allowed.
pub const OVER_LIMIT_WAIT: Duration = Duration::from_secs(1);

/// A body's clock value when it does not wait on its client.
const NOT_WAITING: u64 = u64::MAX;

/// The bytes of answers the server holds unsent, over all connections,
/// and how many it may before its slowest readers are closed.
#[derive(Debug)]
pub struct Unsent {
    held: AtomicUsize,
    /// Told when the server goes past its limit.
    crossed: Notify,
    /// Past it, a connection with an answer waiting on its client is closed
    /// sooner.
    limit: usize,
    /// The same for one connection.
    per_connection: usize,
}

impl Unsent {
    /// The server's count, with its limits in bytes (0: none).
    pub fn new(limit: usize, per_connection: usize) -> Arc<Self> {
        Arc::new(Self {
            held: AtomicUsize::new(0),
            crossed: Notify::new(),
            limit: if limit == 0 { usize::MAX } else { limit },
            per_connection: if per_connection == 0 {
                usize::MAX
            } else {
                per_connection
            },
        })
    }

    /// Bytes held unsent now, over all connections.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }
}

/// The response bodies of one connection, and when each began to wait.
pub struct Watch {
    epoch: Instant,
    timeout: Duration,
    bodies: Mutex<Vec<Weak<AtomicU64>>>,
    /// Bytes this connection's answers hold unsent.
    held: AtomicUsize,
    /// Told when the connection goes past its limit.
    crossed: Notify,
    unsent: Arc<Unsent>,
}

impl Watch {
    /// A watch that ends a connection whose answer waits `timeout`, or
    /// waits at all while the connection or the server holds more unsent
    /// than `unsent` allows.
    pub fn new(timeout: Duration, unsent: Arc<Unsent>) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            timeout,
            bodies: Mutex::default(),
            held: AtomicUsize::new(0),
            crossed: Notify::new(),
            unsent,
        })
    }

    /// Whether this connection, or the server, holds more unsent than
    /// allowed.
    fn over(&self) -> bool {
        self.held.load(Ordering::Relaxed) > self.unsent.per_connection
            || self.unsent.held() > self.unsent.limit
    }

    /// Moves a body's share of the connection's and the server's counts
    /// from `before` to `after` bytes.
    fn count(&self, before: usize, after: usize) {
        if after > before {
            let grown = after - before;
            let held = self.held.fetch_add(grown, Ordering::Relaxed) + grown;
            let all = self.unsent.held.fetch_add(grown, Ordering::Relaxed) + grown;
            if held > self.unsent.per_connection {
                self.crossed.notify_one();
            }
            if all > self.unsent.limit {
                self.unsent.crossed.notify_waiters();
            }
        } else if before > after {
            let shrunk = before - after;
            self.held.fetch_sub(shrunk, Ordering::Relaxed);
            self.unsent.held.fetch_sub(shrunk, Ordering::Relaxed);
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(NOT_WAITING - 1)
    }

    /// `body`, watched.
    pub fn wrap(self: &Arc<Self>, body: Body) -> Body {
        let since = if hyper::body::Body::is_end_stream(&body) {
            NOT_WAITING
        } else {
            // Not polled yet: hyper sends the head first, then polls the
            // body when the client can take data.
            self.now()
        };
        let clock = Arc::new(AtomicU64::new(since));
        let mut bodies = self.bodies.lock().unwrap_or_else(PoisonError::into_inner);
        // Forget the bodies that are gone whenever the list doubles, so a
        // long-lived connection does not grow it forever.
        if bodies.len() >= 16 && bodies.len().is_power_of_two() {
            bodies.retain(|clock| clock.strong_count() > 0);
        }
        bodies.push(Arc::downgrade(&clock));
        drop(bodies);
        let mut watched = Watched {
            inner: body,
            rest: Bytes::new(),
            clock,
            watch: self.clone(),
            counted: 0,
        };
        watched.recount();
        Body::new(watched)
    }

    /// Resolves when a body of the connection has waited on its client for
    /// longer than the timeout; never while every answer is read.
    pub async fn stalled(&self) {
        let interval = (self.timeout / 4).max(Duration::from_millis(100));
        let over_wait = OVER_LIMIT_WAIT.min(interval);
        loop {
            let look = if self.over() { over_wait } else { interval };
            tokio::select! {
                () = tokio::time::sleep(look) => {}
                () = self.crossed.notified() => {}
                () = self.unsent.crossed.notified() => {}
            }
            let limit = if self.over() {
                // Holding too much: an answer that waits on its client
                // briefly is waiting too long.
                u64::try_from(over_wait.as_millis()).unwrap_or(u64::MAX)
            } else {
                u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX)
            };
            let now = self.now();
            let mut bodies = self.bodies.lock().unwrap_or_else(PoisonError::into_inner);
            bodies.retain(|clock| clock.strong_count() > 0);
            let stalled = bodies.iter().filter_map(Weak::upgrade).any(|clock| {
                let since = clock.load(Ordering::Relaxed);
                since != NOT_WAITING && now.saturating_sub(since) > limit
            });
            if stalled {
                return;
            }
        }
    }
}

/// A response body that notes when it waits on its client.
struct Watched {
    inner: Body,
    /// What the inner body gave and hyper has not taken yet.
    rest: Bytes,
    clock: Arc<AtomicU64>,
    watch: Arc<Watch>,
    /// What this body adds to the unsent counts now.
    counted: usize,
}

impl Watched {
    /// Brings this body's share of the unsent counts up to date: what it
    /// holds in `rest`, and what its inner body says it will give.
    fn recount(&mut self) {
        let inner = usize::try_from(hyper::body::Body::size_hint(&self.inner).lower())
            .unwrap_or(usize::MAX);
        let now = self.rest.len().saturating_add(inner);
        self.watch.count(self.counted, now);
        self.counted = now;
    }

    /// The next slice of `rest`, noted as waiting on the client until the
    /// next poll (or as done when nothing follows).
    fn slice(&mut self) -> Bytes {
        let slice = if self.rest.len() > SLICE {
            self.rest.split_to(SLICE)
        } else {
            std::mem::take(&mut self.rest)
        };
        let since = if self.is_done() {
            NOT_WAITING
        } else {
            self.watch.now()
        };
        self.clock.store(since, Ordering::Relaxed);
        slice
    }

    fn is_done(&self) -> bool {
        self.rest.is_empty() && hyper::body::Body::is_end_stream(&self.inner)
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.watch.count(self.counted, 0);
    }
}

impl hyper::body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        this.clock.store(NOT_WAITING, Ordering::Relaxed);
        let polled = if this.rest.is_empty() {
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.rest = data;
                        Poll::Ready(Some(Ok(Frame::data(this.slice()))))
                    }
                    // Trailers: the end.
                    Err(frame) => Poll::Ready(Some(Ok(frame))),
                },
                other => other,
            }
        } else {
            Poll::Ready(Some(Ok(Frame::data(this.slice()))))
        };
        this.recount();
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.is_done()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.inner.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    #[tokio::test]
    async fn bodies_are_handed_out_in_slices_and_watched_until_polled_again() {
        let watch = Watch::new(Duration::from_secs(1), Unsent::new(0, 0));
        let data = Bytes::from(vec![7_u8; SLICE * 2 + 10]);
        let mut body = watch.wrap(Body::from(data.clone()));
        let mut lengths = Vec::new();
        let mut whole = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.expect("data").into_data().expect("data");
            lengths.push(chunk.len());
            whole.extend_from_slice(&chunk);
        }
        assert_eq!(lengths, [SLICE, SLICE, 10]);
        assert_eq!(whole, data);
        let clocks = watch.bodies.lock().expect("bodies").clone();
        let clock = clocks[0].upgrade().expect("the body is alive");
        assert_eq!(clock.load(Ordering::Relaxed), NOT_WAITING, "done");
        drop(body);
        let empty = watch.wrap(Body::empty());
        assert!(hyper::body::Body::is_end_stream(&empty));
    }

    #[tokio::test(start_paused = true)]
    async fn unsent_bytes_are_counted_and_past_the_limit_a_wait_is_cut_short() {
        let unsent = Unsent::new(0, SLICE * 2);
        let watch = Watch::new(Duration::from_secs(3600), unsent.clone());
        let mut small = watch.wrap(Body::from(vec![1_u8; SLICE + 5]));
        assert_eq!(unsent.held(), SLICE + 5);
        let _ = small.frame().await.expect("a frame").expect("data");
        assert_eq!(unsent.held(), 5, "what is left to send");
        drop(small);
        assert_eq!(unsent.held(), 0, "a dropped body holds nothing");
        // Within the limit a waiting answer is let be for the whole timeout;
        // past it, for one look only.
        let mut large = watch.wrap(Body::from(vec![1_u8; SLICE * 4]));
        let _ = large.frame().await.expect("a frame").expect("data");
        assert_eq!(unsent.held(), SLICE * 3);
        tokio::time::timeout(OVER_LIMIT_WAIT * 3, watch.stalled())
            .await
            .expect("closed long before the timeout");
        drop(large);
        assert_eq!(unsent.held(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_never_polled_again_stalls_its_connection() {
        let watch = Watch::new(Duration::from_secs(2), Unsent::new(0, 0));
        let mut body = watch.wrap(Body::from(vec![1_u8; SLICE + 1]));
        let first = body.frame().await.expect("a frame").expect("data");
        assert_eq!(first.into_data().expect("data").len(), SLICE);
        // Not polled again: the client takes nothing more.
        tokio::time::timeout(Duration::from_secs(10), watch.stalled())
            .await
            .expect("the connection is found stalled");
        // A body that waits on the server is not stalled.
        let watch = Watch::new(Duration::from_secs(2), Unsent::new(0, 0));
        let (_sender, receiver) =
            tokio::sync::mpsc::channel::<Result<Frame<Bytes>, axum::Error>>(1);
        let stream =
            http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(receiver));
        let mut waiting = watch.wrap(Body::new(stream));
        let pending = tokio::time::timeout(Duration::from_secs(1), waiting.frame()).await;
        assert!(pending.is_err(), "nothing to send yet");
        assert!(
            tokio::time::timeout(Duration::from_secs(10), watch.stalled())
                .await
                .is_err(),
            "waiting on the server is not waiting on the client"
        );
    }
}
