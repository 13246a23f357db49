//! `openclaw.proxy.v1.BridgeService/Attach`: the generated tonic service,
//! whose one RPC turns the app's stream into the hub's bridge.
//!
//! It is served by tonic beside `SessionService`, wrapped in the same
//! [`super::Authenticated`] layer, so a credential that cannot be right is
//! refused before a byte of the stream is decoded, and then checked against
//! the session the `hello` names by the one path the other RPCs use. The
//! messages go through the [`CompactCodec`](crate::proto) every generated
//! service uses, which reserves no buffers ahead: what an idle bridge keeps
//! is tonic's stream state and the two small values below.
//!
//! A refusal before `attached` (no `hello` in time, a first message that is
//! not `hello`, a credential that does not open the session) is the RPC's
//! error, which tonic sends as a trailers-only answer.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use futures_util::{Stream, StreamExt};
use tonic::{Code, Request, Response, Status, Streaming};

use super::{GrpcService, origin, status_of, status_of_end};
use crate::bridge::{BridgeStream, Inbound};
use crate::escape::Outside;
use crate::hub::HubError;
use crate::outcome::BridgeEnd;
use crate::proto::{self, app_message, bridge_service_server::BridgeService};

/// Why a gRPC bridge's inbound stream broke, once it has. Every gRPC bridge
/// holds one for as long as it lives, so the `Status` (some 180 bytes) is
/// boxed until there is one.
type Broken = std::sync::Mutex<Option<Box<Status>>>;

#[tonic::async_trait]
impl BridgeService for GrpcService {
    type AttachStream = ProxyMessages;

    async fn attach(
        &self,
        request: Request<Streaming<proto::AppMessage>>,
    ) -> Result<Response<ProxyMessages>, Status> {
        let origin = origin(&request);
        let (metadata, _, mut inbound) = request.into_parts();
        // A stream that never says hello must not hold a task and a stream
        // forever.
        let wait = self.hub.config().hello_timeout;
        let first = tokio::time::timeout(wait, inbound.message())
            .await
            .map_err(|_| {
                Status::deadline_exceeded(format!(
                    "no `hello` within {} seconds of opening the bridge (OPENCLAW_PROXY_HELLO_TIMEOUT_SECONDS)",
                    wait.as_secs_f64()
                ))
            })?;
        let hello = match first {
            Ok(Some(proto::AppMessage {
                kind: Some(app_message::Kind::Hello(hello)),
            })) => hello,
            Ok(Some(_)) => {
                return Err(Status::invalid_argument(
                    "the first message on the bridge must be `hello` naming the session",
                ));
            }
            Ok(None) => {
                return Err(Status::invalid_argument(
                    "the bridge stream ended before its `hello` message",
                ));
            }
            Err(status) => return Err(status),
        };
        if hello.session_id.is_empty() {
            return Err(status_of(HubError::MissingSessionId));
        }
        self.authorize(&metadata, &hello.session_id)
            .await
            .map_err(status_of)?;
        // A broken inbound stream (client reset, an undecodable message)
        // ends the bridge like a close; the app is told why when the proxy
        // can say, instead of a bare "disconnected".
        let broken: Arc<Broken> = Arc::default();
        let limit = self.hub.config().max_message_bytes;
        let inbound = AppMessages {
            messages: inbound,
            broken: broken.clone(),
            limit,
            ended: false,
        };
        let outbound = self
            .hub
            .attach(hello, inbound, origin)
            .await
            .map_err(status_of)?;
        Ok(Response::new(ProxyMessages {
            outbound: Some(outbound),
            broken,
        }))
    }
}

/// The app's messages on a gRPC bridge, as the core reads them, for as
/// long as the bridge lives. Written out rather than composed from stream
/// adapters, which would each keep room for a pending item.
struct AppMessages {
    messages: Streaming<proto::AppMessage>,
    /// Why the stream broke, for the status the bridge's end is told with.
    broken: Arc<Broken>,
    limit: usize,
    ended: bool,
}

impl Stream for AppMessages {
    type Item = Inbound;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Inbound>> {
        if self.ended {
            return Poll::Ready(None);
        }
        let status = match ready!(self.messages.poll_next_unpin(cx)) {
            Some(Ok(message)) => return Poll::Ready(Some(Inbound::from(message))),
            None => {
                self.ended = true;
                return Poll::Ready(None);
            }
            Some(Err(status)) => status,
        };
        self.ended = true;
        tracing::debug!(
            code = ?status.code(),
            error = Outside::within(status.message(), crate::escape::TEXT_LIMIT).field(),
            "a gRPC bridge sent a broken message"
        );
        // tonic's decoder refuses a message over the limit with
        // `OUT_OF_RANGE`, the one status it uses that code for: the bridge
        // ends with that cause, so the calls waiting on it say so rather
        // than "disconnected".
        if status.code() == Code::OutOfRange {
            let limit = self.limit;
            return Poll::Ready(Some(Inbound::Ended(BridgeEnd::TooLarge { limit })));
        }
        *self
            .broken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(status));
        Poll::Ready(None)
    }
}

/// The proxy's messages on an attached bridge: the bridge's queue, then the
/// status it ended with.
pub struct ProxyMessages {
    outbound: Option<BridgeStream>,
    broken: Arc<Broken>,
}

impl Stream for ProxyMessages {
    type Item = Result<proto::ProxyMessage, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(outbound) = self.outbound.as_mut() else {
            return Poll::Ready(None);
        };
        let status = match ready!(outbound.poll_next_unpin(cx)) {
            Some(Ok(message)) => return Poll::Ready(Some(Ok(*message))),
            Some(Err(end)) => {
                let cause = self
                    .broken
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match (end, cause) {
                    (BridgeEnd::Disconnected, Some(status)) => *status,
                    (end, _) => status_of_end(end),
                }
            }
            None => return Poll::Ready(None),
        };
        // Dropping the bridge's stream ends the bridge, if it has not ended.
        self.outbound = None;
        Poll::Ready(Some(Err(status)))
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
    fn what_a_grpc_bridge_keeps_of_its_own_stays_small() {
        // Both kept as long as the bridge lives: the inbound stream boxed
        // in the bridge's driver (tonic's decoder, inline, is most of it),
        // the outbound in tonic's response body.
        let decoder = std::mem::size_of::<Streaming<proto::AppMessage>>();
        let inbound = std::mem::size_of::<AppMessages>();
        assert!(
            inbound <= decoder + 32,
            "the inbound stream is {inbound} bytes, tonic's decoder {decoder}"
        );
        let outbound = std::mem::size_of::<ProxyMessages>();
        assert!(outbound <= 32, "the outbound stream is {outbound} bytes");
    }
}
