//! Connections with nothing open, and reflection streams with nothing said,
//! are closed after `OPENCLAW_PROXY_CONNECTION_IDLE_TIMEOUT_SECONDS`.
//!
//! Why: every connection holds one of `OPENCLAW_PROXY_MAX_CONNECTIONS`
//! slots, and no credential is needed to open one. An HTTP/1.1 connection
//! waiting for its next request is closed by hyper's header-read timer, but
//! HTTP/2 has no such timer: a client that sends the preface and SETTINGS,
//! answers pings and opens no stream is alive to hyper's keep-alive, and
//! twenty of them took every slot of a server limited to twenty. A server
//! reflection stream that never sends a message (exempt from the body-read
//! timeout, since reflection is a conversation) held a slot the same way.
//!
//! How: each connection has an [`Activity`] that counts its requests from
//! the moment hyper hands one to the service until its answer's body is
//! dropped (a gRPC bridge's `Attach` is one request for its whole life, a
//! streamed MCP answer one for as long as it streams). [`Activity::idle`]
//! resolves once the count has been zero for the timeout, and the
//! connection is then dropped: with nothing open, nothing is lost. A
//! reflection request body is an [`IdleBody`]: a stream that goes the same
//! time without a message ends as though the client had finished, so the
//! reflection answer ends and the connection becomes idle in its turn.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Instant;

/// The open requests of one connection, and since when it has had none.
pub struct Activity {
    timeout: Duration,
    state: Mutex<State>,
}

struct State {
    open: usize,
    idle_since: Instant,
}

impl Activity {
    /// A connection's activity, idle from now; `timeout` zero for never
    /// idle.
    pub fn new(timeout: Duration) -> Arc<Self> {
        Arc::new(Self {
            timeout,
            state: Mutex::new(State {
                open: 0,
                idle_since: Instant::now(),
            }),
        })
    }

    /// The idle timeout; zero for none.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Notes a request open until the returned guard is dropped.
    pub fn open(self: &Arc<Self>) -> Open {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open += 1;
        Open {
            activity: self.clone(),
        }
    }

    /// Resolves once the connection has had no open request for the
    /// timeout; never when the timeout is zero.
    pub async fn idle(&self) {
        if self.timeout.is_zero() {
            return std::future::pending().await;
        }
        loop {
            let wake = {
                let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                let deadline = state.idle_since + self.timeout;
                if state.open == 0 && Instant::now() >= deadline {
                    return;
                }
                // Open requests: look again a timeout later; idle: at the
                // deadline (a request may still come before it).
                if state.open == 0 {
                    deadline
                } else {
                    Instant::now() + self.timeout
                }
            };
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// One open request of a connection; the connection may be idle again once
/// every one is dropped.
pub struct Open {
    activity: Arc<Activity>,
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut state = self
            .activity
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.open = state.open.saturating_sub(1);
        if state.open == 0 {
            state.idle_since = Instant::now();
        }
    }
}

/// A response body that keeps its request open while it lives.
pub struct Kept<B> {
    inner: B,
    _open: Open,
}

impl<B> Kept<B> {
    /// `inner`, keeping `open` until it is dropped.
    pub fn new(inner: B, open: Open) -> Self {
        Self { inner, _open: open }
    }
}

impl<B: http_body::Body + Unpin> http_body::Body for Kept<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that ends when no frame has come for `timeout`.
pub struct IdleBody<B> {
    inner: B,
    timeout: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
    ended: bool,
}

impl<B> IdleBody<B> {
    /// `inner`, ended after `timeout` without a frame (never when zero).
    pub fn new(inner: B, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            sleep: Box::pin(tokio::time::sleep(timeout)),
            ended: false,
        }
    }
}

impl<B> http_body::Body for IdleBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let deadline = Instant::now() + this.timeout;
                this.sleep.as_mut().reset(deadline);
                Poll::Ready(frame)
            }
            Poll::Pending => {
                if this.timeout.is_zero() || this.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                tracing::debug!(
                    "a reflection stream sent nothing for {:?} (OPENCLAW_PROXY_CONNECTION_IDLE_TIMEOUT_SECONDS); ended",
                    this.timeout
                );
                this.ended = true;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_with_nothing_open_for_the_timeout() {
        let activity = Activity::new(Duration::from_secs(5));
        let open = activity.open();
        assert!(
            tokio::time::timeout(Duration::from_secs(60), activity.idle())
                .await
                .is_err(),
            "an open request keeps the connection"
        );
        drop(open);
        tokio::time::timeout(Duration::from_secs(6), activity.idle())
            .await
            .expect("idle once nothing is open");
        let never = Activity::new(Duration::ZERO);
        assert!(
            tokio::time::timeout(Duration::from_secs(600), never.idle())
                .await
                .is_err()
        );
    }
}
