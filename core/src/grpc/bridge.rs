//! `openclaw.proxy.v1.BridgeService/Attach`, served on the HTTP/2 stream
//! directly rather than through tonic.
//!
//! A gRPC bridge is one stream that lives as long as its session and is idle
//! most of the time; a node holds one per session, tens of thousands of
//! them. Through tonic each kept a `Streaming` decoder, an encoding body
//! with room for a `Status` and its own buffers, and three boxed layers of
//! body around them (some 800 bytes per idle session, most of what a gRPC
//! bridge cost beyond a WebSocket one), and each message went through
//! tonic's generic codec path. Here the request body is read by a
//! [`MessageReader`] and the bridge's queue is polled by the response body
//! itself ([`ProxyFrames`]): each message is decoded from the bytes it came
//! in and encoded into one allocation.
//!
//! What the app sees is the same RPC: the statuses, the trailers-only
//! refusals before `attached`, the `hello` deadline, the size limit. What
//! this serves is only `Attach`; any other method of the service is
//! `UNIMPLEMENTED`, as tonic would answer it. The request is authenticated
//! as [`super::Authenticated`] does for tonic's services (a credential that
//! cannot be right is refused before a byte of the body is read), then
//! against the session its `hello` names.

use std::convert::Infallible;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http_body::{Body, Frame};
use tonic::Status;
use tonic::codegen::{Service, http};

use super::framing::{self, FrameError, MessageReader};
use super::{credential_in, status_of, status_of_auth};
use crate::audit::{ClientAddr, Origin};
use crate::bridge::{BridgeStream, Inbound};
use crate::escape::Outside;
use crate::hub::{Hub, HubError};
use crate::metrics::{Surface, Transport};
use crate::outcome::BridgeEnd;
use crate::proto::{self, app_message};

/// The path of the one method served here.
pub const ATTACH_PATH: &str = "/openclaw.proxy.v1.BridgeService/Attach";

/// The route (an axum path) every method of the bridge service arrives on.
pub const BRIDGE_SERVICE_ROUTE: &str = "/openclaw.proxy.v1.BridgeService/{*method}";

/// Why a gRPC bridge's inbound stream broke, once it has. Every gRPC bridge
/// holds one for as long as it lives, so the `Status` (some 180 bytes) is
/// boxed until there is one.
type Broken = std::sync::Mutex<Option<Box<Status>>>;

/// The bridge service, as a tower service over HTTP requests.
#[derive(Clone)]
pub struct BridgeAttach {
    hub: Hub,
}

impl BridgeAttach {
    pub fn new(hub: Hub) -> Self {
        Self { hub }
    }
}

impl<B> Service<http::Request<B>> for BridgeAttach
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<ProxyFrames>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let hub = self.hub.clone();
        Box::pin(async move {
            Ok(attach(&hub, request)
                .await
                .unwrap_or_else(|status| status.into_http()))
        })
    }
}

/// Opens a bridge: the app's `hello`, its credential for that session, the
/// hub's bridge; the response carries the proxy's messages from `attached`
/// on. A refusal before that is a trailers-only answer with its status.
async fn attach<B>(
    hub: &Hub,
    request: http::Request<B>,
) -> Result<http::Response<ProxyFrames>, Status>
where
    B: Body<Data = Bytes> + Unpin + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = request.into_parts();
    if parts.uri.path() != ATTACH_PATH {
        return Err(Status::unimplemented(format!(
            "{} is not a method of openclaw.proxy.v1.BridgeService, whose one method is Attach",
            Outside::within(parts.uri.path(), crate::escape::TEXT_LIMIT)
        )));
    }
    let refused = || hub.metrics().auth_failure(Surface::Grpc);
    hub.precheck(credential_in(&parts.headers))
        .inspect_err(|_| refused())
        .map_err(status_of_auth)?;
    if let Some(encoding) = parts.headers.get("grpc-encoding")
        && encoding.as_bytes() != b"identity"
    {
        return Err(Status::unimplemented(format!(
            "the bridge takes uncompressed messages only, not grpc-encoding `{}`",
            Outside::within(
                &String::from_utf8_lossy(encoding.as_bytes()),
                crate::escape::TEXT_LIMIT
            )
        )));
    }
    let origin = Origin::new(
        Transport::Grpc,
        parts.extensions.get::<ClientAddr>().map(|addr| addr.0),
    );
    let limit = hub.config().max_message_bytes;
    let mut reader = MessageReader::new(body, limit);
    // A stream that never says hello must not hold a task and a stream
    // forever.
    let wait = hub.config().hello_timeout;
    let first = tokio::time::timeout(
        wait,
        poll_fn(|cx| reader.poll_message::<proto::AppMessage>(cx)),
    )
    .await
    .map_err(|_| {
        Status::deadline_exceeded(format!(
            "no `hello` within {} seconds of opening the bridge (OPENCLAW_PROXY_HELLO_TIMEOUT_SECONDS)",
            wait.as_secs_f64()
        ))
    })?;
    let hello = match first {
        Some(Ok(proto::AppMessage {
            kind: Some(app_message::Kind::Hello(hello)),
        })) => hello,
        Some(Ok(_)) => {
            return Err(Status::invalid_argument(
                "the first message on the bridge must be `hello` naming the session",
            ));
        }
        Some(Err(error)) => return Err(error.status()),
        None => {
            return Err(Status::invalid_argument(
                "the bridge stream ended before its `hello` message",
            ));
        }
    };
    if hello.session_id.is_empty() {
        return Err(status_of(HubError::MissingSessionId));
    }
    hub.authorize(&hello.session_id, credential_in(&parts.headers))
        .await
        .inspect_err(|error| {
            if let HubError::Unauthenticated(_) = error {
                refused();
            }
        })
        .map_err(status_of)?;
    // A broken inbound stream (client reset, an undecodable message) ends
    // the bridge like a close; the app is told why when the proxy can say,
    // instead of a bare "disconnected".
    let broken: Arc<Broken> = Arc::default();
    let inbound = AppMessages {
        reader,
        broken: broken.clone(),
        ended: false,
    };
    let outbound = hub
        .attach(hello, inbound, origin)
        .await
        .map_err(status_of)?;
    let mut response = http::Response::new(ProxyFrames {
        outbound: Some(outbound),
        broken,
        limit,
    });
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    Ok(response)
}

/// The app's messages on a gRPC bridge, as the core reads them, for as
/// long as the bridge lives.
struct AppMessages<B> {
    reader: MessageReader<B>,
    /// Why the stream broke, for the status the bridge's end is told with.
    broken: Arc<Broken>,
    ended: bool,
}

impl<B> Stream for AppMessages<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Inbound;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Inbound>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let read = ready!(self.reader.poll_message::<proto::AppMessage>(cx));
        let error = match read {
            Some(Ok(message)) => return Poll::Ready(Some(Inbound::from(message))),
            None => {
                self.ended = true;
                return Poll::Ready(None);
            }
            Some(Err(error)) => error,
        };
        self.ended = true;
        tracing::debug!(
            error = Outside::within(&error.to_string(), crate::escape::TEXT_LIMIT).field(),
            "a gRPC bridge sent a broken message"
        );
        // A message over the limit ends the bridge with that cause, so the
        // calls waiting on it say so rather than "disconnected".
        if let FrameError::TooLarge { limit, .. } = error {
            return Poll::Ready(Some(Inbound::Ended(BridgeEnd::TooLarge { limit })));
        }
        *self
            .broken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(error.status()));
        Poll::Ready(None)
    }
}

/// The response body of an attached bridge: the bridge's queue, each message
/// framed as it is taken, and the trailers with the status it ended with.
/// Empty (and ended) for a refusal.
#[derive(Default)]
pub struct ProxyFrames {
    outbound: Option<BridgeStream>,
    broken: Arc<Broken>,
    limit: usize,
}

impl Body for ProxyFrames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(outbound) = self.outbound.as_mut() else {
            return Poll::Ready(None);
        };
        let status = match ready!(outbound.poll_next_unpin(cx)) {
            Some(Ok(message)) => match framing::encode(&*message, self.limit) {
                Ok(frame) => return Poll::Ready(Some(Ok(Frame::data(frame)))),
                Err(status) => status,
            },
            Some(Err(end)) => {
                let cause = self
                    .broken
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match (end, cause) {
                    (BridgeEnd::Disconnected, Some(status)) => *status,
                    (end, _) => super::status_of_end(end),
                }
            }
            None => Status::new(tonic::Code::Ok, ""),
        };
        // Dropping the bridge's stream ends the bridge, if it has not ended.
        self.outbound = None;
        Poll::Ready(Some(Ok(Frame::trailers(framing::trailers(&status)))))
    }

    fn is_end_stream(&self) -> bool {
        self.outbound.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grpc_bridges_broken_cell_stays_small() {
        // Allocated once per gRPC bridge, in an `Arc`, and kept as long as
        // it lives; a `Status` inline would make it some 200 bytes.
        let size = std::mem::size_of::<Broken>();
        assert!(size <= 16, "the cell is {size} bytes");
    }

    #[test]
    fn what_a_grpc_bridge_keeps_stays_small() {
        // Both kept as long as the bridge lives: the inbound stream boxed
        // in the bridge's driver, the response body in the HTTP/2 stream
        // (here over tonic's boxed body, the size of the boxed body the
        // server's router hands it: a pointer and a vtable).
        let inbound = std::mem::size_of::<AppMessages<tonic::body::Body>>();
        assert!(inbound <= 96, "the inbound stream is {inbound} bytes");
        let outbound = std::mem::size_of::<ProxyFrames>();
        assert!(outbound <= 48, "the response body is {outbound} bytes");
    }
}
