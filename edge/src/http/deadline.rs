//! A deadline on reading a request body, and what a connection is told when
//! a body was not read to its end.
//!
//! hyper times the request header (`HEADER_READ_TIMEOUT_SECONDS`) but not
//! the body: a client with a valid token (or any client of an open server)
//! could send a body at a byte a second, declare a `Content-Length` and send
//! nothing, stream chunks forever, or leave an HTTP/2 stream without
//! `END_STREAM`, and hold a connection and a handler for as long as it
//! liked. Every request body is therefore wrapped in a [`DeadlineBody`]: once
//! its header is in, the whole body must arrive within
//! `BODY_READ_TIMEOUT_SECONDS`, or reading it fails with [`BodyTimeout`].
//! The streams that are a bridge's life (gRPC `Attach`, reflection) are
//! exempt: they are meant to stay open.
//!
//! [`finish`] then looks at the answer: a request whose body ran out of time
//! is answered `408` (JSON) or `DEADLINE_EXCEEDED` (gRPC) whatever the
//! handler made of the failed read, and an HTTP/1 answer sent before its
//! request's body was read to the end (a refusal from the headers alone)
//! says `Connection: close`, since hyper closes such a connection after the
//! answer rather than read an unknown amount: the client then knows to open
//! a new one instead of finding its next request on a dead socket.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, Version, header};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};

use super::error::{ApiError, BodyTimeout};

/// What the connection learns of one request's body while a handler reads it.
#[derive(Debug, Default)]
pub struct BodyWatch {
    ended: AtomicBool,
    timed_out: AtomicBool,
}

/// A request body that fails with [`BodyTimeout`] when it is not complete
/// by its deadline. The timer is only started when the body has to be waited
/// for, so a body that is already in costs no timer.
pub struct DeadlineBody<B> {
    inner: B,
    deadline: tokio::time::Instant,
    limit: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    watch: Arc<BodyWatch>,
}

impl<B> http_body::Body for DeadlineBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.watch.timed_out.load(Ordering::Relaxed) {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(None) => {
                this.watch.ended.store(true, Ordering::Relaxed);
                Poll::Ready(None)
            }
            Poll::Ready(Some(frame)) => {
                if this.inner.is_end_stream() {
                    this.watch.ended.store(true, Ordering::Relaxed);
                }
                Poll::Ready(Some(frame.map_err(Into::into)))
            }
            Poll::Pending => {
                let deadline = this.deadline;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.watch.timed_out.store(true, Ordering::Relaxed);
                let limit = this.limit;
                Poll::Ready(Some(Err(Box::new(BodyTimeout { limit }))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream() || self.watch.timed_out.load(Ordering::Relaxed)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Request paths whose body is a long-lived stream: a bridge, reflection.
fn is_open_stream(path: &str) -> bool {
    path == "/openclaw.proxy.v1.BridgeService/Attach" || is_reflection(path)
}

/// Server reflection's stream (any version): exempt from the deadline, but
/// ended when silent for the connection idle timeout ([`crate::idle`]).
pub fn is_reflection(path: &str) -> bool {
    path.ends_with("/ServerReflectionInfo")
}

/// `request` with its body under a deadline of `limit` from now, and the
/// watch [`finish`] reads; no watch for a request without a body or one of
/// the open streams.
pub fn watch<B>(request: Request<B>, limit: Duration) -> (Request, Option<Arc<BodyWatch>>)
where
    B: http_body::Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    if request.body().is_end_stream() || is_open_stream(request.uri().path()) {
        return (request.map(Body::new), None);
    }
    let watch = Arc::new(BodyWatch::default());
    let shared = watch.clone();
    let request = request.map(|inner| {
        Body::new(DeadlineBody {
            inner,
            deadline: tokio::time::Instant::now() + limit,
            limit,
            sleep: None,
            watch: shared,
        })
    });
    (request, Some(watch))
}

/// The answer to a request whose body was watched: `408` or
/// `DEADLINE_EXCEEDED` when the body ran out of time, and on HTTP/1
/// `Connection: close` when the body was not read to its end.
pub fn finish(
    mut response: Response,
    watch: &BodyWatch,
    version: Version,
    grpc: bool,
    limit: Duration,
) -> Response {
    if watch.timed_out.load(Ordering::Relaxed) {
        response = if grpc {
            let status = tonic::Status::deadline_exceeded(BodyTimeout { limit }.to_string());
            super::grpc_answer(status)
        } else {
            ApiError::BodyTimeout { limit }.into_response()
        };
    }
    let http1 = matches!(version, Version::HTTP_10 | Version::HTTP_11);
    if http1 && !watch.ended.load(Ordering::Relaxed) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Whether `error` (a failed body read) is, at its root, a [`BodyTimeout`].
pub fn is_timeout(error: &(dyn std::error::Error + 'static)) -> Option<Duration> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(timeout) = error.downcast_ref::<BodyTimeout>() {
            return Some(timeout.limit);
        }
        current = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_body_that_stalls_fails_with_the_timeout_and_is_marked() {
        let first = Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(b"x")));
        let stalls = futures_util::stream::iter([first]).chain(futures_util::stream::pending());
        let body = http_body_util::StreamBody::new(stalls);
        let request = Request::post("/v1/chat/sessions")
            .body(body)
            .expect("request");
        let (request, watch) = watch(request, Duration::from_millis(50));
        let watch = watch.expect("a body to watch");
        let error = axum::body::to_bytes(request.into_body(), 1024)
            .await
            .expect_err("the body never ends");
        assert_eq!(is_timeout(&error), Some(Duration::from_millis(50)));
        let answer = finish(
            Response::new(Body::empty()),
            &watch,
            Version::HTTP_11,
            false,
            Duration::from_millis(50),
        );
        assert_eq!(answer.status(), 408);
        assert_eq!(answer.headers()[header::CONNECTION], "close");
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_keeps_the_connection() {
        let request = Request::post("/x")
            .body(http_body_util::Full::new(Bytes::from_static(b"{}")))
            .expect("request");
        let (request, watch) = watch(request, Duration::from_secs(5));
        let watch = watch.expect("a body to watch");
        let bytes = request
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        assert_eq!(&bytes[..], b"{}");
        let answer = finish(
            Response::new(Body::empty()),
            &watch,
            Version::HTTP_11,
            false,
            Duration::from_secs(5),
        );
        assert_eq!(answer.status(), 200);
        assert!(answer.headers().get(header::CONNECTION).is_none());
    }

    #[test]
    fn bridge_streams_and_bodiless_requests_are_not_watched() {
        let attach = Request::post("/openclaw.proxy.v1.BridgeService/Attach")
            .body(http_body_util::Full::new(Bytes::from_static(b"x")))
            .expect("request");
        assert!(watch(attach, Duration::from_secs(1)).1.is_none());
        let get = Request::get("/health")
            .body(http_body_util::Empty::<Bytes>::new())
            .expect("request");
        assert!(watch(get, Duration::from_secs(1)).1.is_none());
    }
}
