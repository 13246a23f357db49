//! The tonic service: `openclaw.proxy.v1.SessionService` and `BridgeService`
//! over the [`Hub`], plus `grpc.health.v1` and server reflection.
//!
//! This module only translates: it reads the credential from the metadata and
//! asks the hub whether it may do what it asks ([`Hub::authorize`]), maps
//! [`HubError`] and [`BridgeEnd`] to standard status codes, and turns the
//! `Attach` stream into the hub's bridge.
//!
//! Authentication happens twice, so that nothing is decoded for a stranger:
//! [`Authenticated`] wraps both services and looks at the `authorization`
//! metadata before tonic decodes any message (CreateSession is decided there
//! in full; for the per-session RPCs only a global token that opens sessions
//! or a token shaped like a session token gets through). The handler then
//! decides with the session id from the decoded message.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures_util::future::{Either, Ready, ready};
use futures_util::{Stream, StreamExt};
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::{Code, Request, Response, Status, Streaming};

use crate::audit::{ClientAddr, Origin};
use crate::auth::{AuthError, Credential};
use crate::bridge::Inbound;
use crate::error::ErrorKind;
use crate::escape::Outside;
use crate::hub::{Deletion, Hub, HubError};
use crate::metrics::{Surface, Transport};
use crate::outcome::BridgeEnd;
use crate::proto::{
    self, app_message,
    bridge_service_server::{BridgeService, BridgeServiceServer},
    session_service_server::{SessionService, SessionServiceServer},
};

pub use tonic_reflection::server::Error as ReflectionError;

/// The one RPC that takes the app token alone.
const CREATE_SESSION_PATH: &str = "/openclaw.proxy.v1.SessionService/CreateSession";

/// The gRPC face of a [`Hub`].
#[derive(Clone)]
pub struct GrpcService {
    hub: Hub,
}

impl GrpcService {
    /// Serves `hub` over gRPC.
    pub fn new(hub: Hub) -> Self {
        Self { hub }
    }

    /// All gRPC services of the proxy as one set of routes: sessions, bridge,
    /// health (every service reported serving) and reflection (v1 and v1alpha).
    pub async fn routes(self) -> Result<tonic::service::Routes, ReflectionError> {
        let (health_reporter, health) = tonic_health::server::health_reporter();
        health_reporter
            .set_serving::<SessionServiceServer<GrpcService>>()
            .await;
        health_reporter
            .set_serving::<BridgeServiceServer<GrpcService>>()
            .await;
        let reflection_v1 = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(openclaw_proxy_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()?;
        let reflection_v1alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(openclaw_proxy_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()?;
        let hub = self.hub.clone();
        // One size limit for every surface (OPENCLAW_PROXY_MAX_BODY_BYTES).
        let limit = hub.config().max_message_bytes;
        let sessions = SessionServiceServer::new(self.clone())
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit);
        let bridges = BridgeServiceServer::new(self)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit);
        Ok(
            tonic::service::Routes::new(Authenticated::new(sessions, hub.clone()))
                .add_service(Authenticated::new(bridges, hub))
                .add_service(health)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha),
        )
    }

    /// Checks the app token for CreateSession.
    fn authorize_create(&self, metadata: &MetadataMap) -> Result<(), Status> {
        self.hub
            .authorize_create(credential(metadata))
            .inspect_err(|_| self.hub.metrics().auth_failure(Surface::Grpc))
            .map_err(status_of_auth)
    }

    /// Checks that the request may touch `session_id`.
    async fn authorize(&self, metadata: &MetadataMap, session_id: &str) -> Result<(), HubError> {
        let checked = self.hub.authorize(session_id, credential(metadata)).await;
        self.counted(checked).map(drop)
    }

    /// `result`, its refused credential counted among the auth failures.
    fn counted<T>(&self, result: Result<T, HubError>) -> Result<T, HubError> {
        if let Err(HubError::Unauthenticated(_)) = &result {
            self.hub.metrics().auth_failure(Surface::Grpc);
        }
        result
    }
}

/// Where a gRPC request came from, for the audit log.
fn origin<T>(request: &Request<T>) -> Origin {
    let client = request.extensions().get::<ClientAddr>().map(|addr| addr.0);
    Origin::new(Transport::Grpc, client)
}

/// The app-side credential in a request's metadata.
fn credential(metadata: &MetadataMap) -> Credential<'_> {
    Credential::app(
        metadata
            .get("authorization")
            .and_then(|value| value.to_str().ok()),
    )
}

/// Wraps a generated service: refuses a request whose `authorization`
/// metadata cannot be right before its message is decoded.
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    hub: Hub,
}

impl<S> Authenticated<S> {
    fn new(inner: S, hub: Hub) -> Self {
        Self { inner, hub }
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

impl<S> Service<http::Request<Body>> for Authenticated<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Either<Ready<Result<http::Response<Body>, Infallible>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let header = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        let credential = Credential::app(header);
        let checked = if request.uri().path() == CREATE_SESSION_PATH {
            self.hub.authorize_create(credential)
        } else {
            self.hub.precheck(credential)
        };
        match checked {
            Ok(()) => Either::Right(self.inner.call(request)),
            Err(error) => {
                self.hub.metrics().auth_failure(Surface::Grpc);
                Either::Left(ready(Ok(status_of_auth(error).into_http())))
            }
        }
    }
}

/// The original proxy required a device id and an app version and nothing
/// else. Proto3 cannot tell an absent string from an empty one, so over gRPC
/// "required" means "not empty"; every other field may stay empty.
fn check_required_metadata(request: &proto::CreateSessionRequest) -> Result<(), Status> {
    let metadata = request.metadata.as_ref();
    let missing = |field: &str| {
        Status::invalid_argument(format!(
            "metadata.{field} is empty: a session needs the device id and the app version"
        ))
    };
    if metadata.is_none_or(|metadata| metadata.device_id.is_empty()) {
        return Err(missing("device_id"));
    }
    if metadata.is_none_or(|metadata| metadata.app_version.is_empty()) {
        return Err(missing("app_version"));
    }
    Ok(())
}

/// The gRPC code of each kind of refusal: the one table.
fn code_of(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::Invalid => Code::InvalidArgument,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::Exhausted { .. } => Code::ResourceExhausted,
        ErrorKind::Unavailable => Code::Unavailable,
    }
}

/// The status an error from the hub is reported with.
pub fn status_of(error: HubError) -> Status {
    Status::new(code_of(error.kind()), error.to_string())
}

/// The status a refused credential is reported with.
pub fn status_of_auth(error: AuthError) -> Status {
    Status::new(code_of(error.kind()), error.to_string())
}

/// tonic's refusals of how a request was framed, which it reports as
/// `INTERNAL` (a fault of the server) although the client sent them, as
/// `INVALID_ARGUMENT` with a sentence; every other status unchanged.
///
/// A message with its compressed flag set and no `grpc-encoding` stays
/// `INTERNAL`: the gRPC compression spec requires that status for it.
pub fn refine_request_status(status: Status) -> Status {
    if status.code() != Code::Internal {
        return status;
    }
    let message = status.message();
    if message.starts_with("Unexpected EOF decoding stream") {
        Status::invalid_argument(
            "the request ended inside a gRPC message: its length prefix promised more bytes than were sent",
        )
    } else if message.starts_with("Missing request message") {
        Status::invalid_argument(
            "a unary call takes exactly one request message, and the request carried none",
        )
    } else if message.starts_with("failed to decode Protobuf message") {
        Status::invalid_argument(format!(
            "the message is not valid protobuf: {}",
            crate::escape::truncated_to(message, crate::escape::TEXT_LIMIT)
        ))
    } else if message.contains("invalid compression flag") {
        Status::invalid_argument(
            "the first byte of a gRPC message (its compressed flag) must be 0 or 1",
        )
    } else {
        status
    }
}

/// A trailers-only gRPC answer (the status in its headers, as tonic sends
/// a refused unary call) with [`refine_request_status`] applied.
pub fn refine_trailers_only<B>(mut response: http::Response<B>) -> http::Response<B> {
    let internal = response
        .headers()
        .get("grpc-status")
        .is_some_and(|code| code.as_bytes() == b"13");
    if !internal {
        return response;
    }
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    let refined = refine_request_status(status);
    if refined.code() == Code::Internal {
        return response;
    }
    let (parts, ()) = refined.into_http::<()>().into_parts();
    let headers = response.headers_mut();
    for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        headers.remove(name);
    }
    for (name, value) in parts.headers {
        if let Some(name) = name
            && name.as_str().starts_with("grpc-")
        {
            headers.insert(name, value);
        }
    }
    response
}

/// Whether `status` is tonic's refusal of a message over the decoding limit.
fn is_too_large(status: &Status) -> bool {
    status.code() == Code::OutOfRange && status.message().contains("too large")
}

/// The status an ended bridge stream closes with.
pub fn status_of_end(end: BridgeEnd) -> Status {
    let message = format!("bridge ended: {}", end.reason_for_app());
    match end {
        BridgeEnd::Replaced => Status::aborted(message),
        BridgeEnd::SessionDeleted => Status::not_found(message),
        BridgeEnd::Unresponsive | BridgeEnd::Stalled => Status::deadline_exceeded(message),
        BridgeEnd::ShuttingDown => Status::unavailable(message),
        BridgeEnd::Disconnected => Status::cancelled(message),
        BridgeEnd::TooLarge { .. } => Status::resource_exhausted(message),
    }
}

#[tonic::async_trait]
impl SessionService for GrpcService {
    async fn create_session(
        &self,
        request: Request<proto::CreateSessionRequest>,
    ) -> Result<Response<proto::CreateSessionResponse>, Status> {
        self.authorize_create(request.metadata())?;
        let origin = origin(&request);
        let client = request.remote_addr().map(|peer| {
            let forwarded_for = request
                .metadata()
                .get("x-forwarded-for")
                .and_then(|value| value.to_str().ok());
            crate::limits::client_address(
                peer.ip(),
                forwarded_for,
                &self.hub.config().limits.trusted_proxies,
            )
        });
        let request = request.into_inner();
        check_required_metadata(&request)?;
        self.hub
            .create_session(request, origin, client)
            .await
            .map(Response::new)
            .map_err(status_of)
    }

    async fn update_tools(
        &self,
        request: Request<proto::UpdateToolsRequest>,
    ) -> Result<Response<proto::UpdateToolsResponse>, Status> {
        let (metadata, _, request) = request.into_parts();
        self.authorize(&metadata, &request.session_id)
            .await
            .map_err(status_of)?;
        self.hub
            .update_tools(
                &request.session_id,
                proto::UpdateTools {
                    tools: request.tools,
                    resources: request.resources,
                    resource_templates: request.resource_templates,
                    prompts: request.prompts,
                },
            )
            .await
            .map(Response::new)
            .map_err(status_of)
    }

    async fn delete_session(
        &self,
        request: Request<proto::DeleteSessionRequest>,
    ) -> Result<Response<proto::DeleteSessionResponse>, Status> {
        let origin = origin(&request);
        let (metadata, _, request) = request.into_parts();
        let deleted = self
            .hub
            .delete(&request.session_id, credential(&metadata), origin)
            .await;
        let deletion = self.counted(deleted).map_err(status_of)?;
        Ok(Response::new(proto::DeleteSessionResponse {
            existed: deletion == Deletion::Deleted,
        }))
    }

    async fn get_session(
        &self,
        request: Request<proto::GetSessionRequest>,
    ) -> Result<Response<proto::GetSessionResponse>, Status> {
        let (metadata, _, request) = request.into_parts();
        self.authorize(&metadata, &request.session_id)
            .await
            .map_err(status_of)?;
        self.hub
            .get_session(request)
            .await
            .map(Response::new)
            .map_err(status_of)
    }
}

type ProxyStream = Pin<Box<dyn Stream<Item = Result<proto::ProxyMessage, Status>> + Send>>;

/// Why a gRPC bridge's inbound stream broke, once it has. Every gRPC bridge
/// holds one for as long as it lives, so the `Status` (some 180 bytes) is
/// boxed until there is one.
type Broken = std::sync::Mutex<Option<Box<Status>>>;

/// The app's messages on a gRPC bridge, as the core reads them. Written out
/// rather than composed from stream adapters: the core keeps it for as long
/// as the bridge lives, and adapters would keep room for a pending item and
/// a `Status` each, some 600 bytes per idle session.
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
        match std::task::ready!(self.messages.poll_next_unpin(cx)) {
            Some(Ok(message)) => Poll::Ready(Some(Inbound::from(message))),
            None => {
                self.ended = true;
                Poll::Ready(None)
            }
            Some(Err(status)) => {
                self.ended = true;
                tracing::debug!(
                    error = Outside::within(status.message(), crate::escape::TEXT_LIMIT).field(),
                    "a gRPC bridge sent a broken message"
                );
                // A message over the limit ends the bridge with that cause,
                // so the calls waiting on it say so rather than
                // "disconnected".
                let too_large = is_too_large(&status);
                *self
                    .broken
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Box::new(status));
                Poll::Ready(
                    too_large.then_some(Inbound::Ended(BridgeEnd::TooLarge { limit: self.limit })),
                )
            }
        }
    }
}

#[tonic::async_trait]
impl BridgeService for GrpcService {
    type AttachStream = ProxyStream;

    async fn attach(
        &self,
        request: Request<Streaming<proto::AppMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        let origin = origin(&request);
        let (metadata, _, mut inbound) = request.into_parts();
        // A stream that never says hello must not hold a task and a stream
        // forever.
        let limit = self.hub.config().hello_timeout;
        let first = tokio::time::timeout(limit, inbound.message())
            .await
            .map_err(|_| {
                Status::deadline_exceeded(format!(
                    "no `hello` within {} seconds of opening the bridge (OPENCLAW_PROXY_HELLO_TIMEOUT_SECONDS)",
                    limit.as_secs_f64()
                ))
            })?;
        let hello = match first? {
            Some(proto::AppMessage {
                kind: Some(app_message::Kind::Hello(hello)),
            }) => hello,
            Some(_) => {
                return Err(Status::invalid_argument(
                    "the first message on the bridge must be `hello` naming the session",
                ));
            }
            None => {
                return Err(Status::invalid_argument(
                    "the bridge stream ended before its `hello` message",
                ));
            }
        };
        if hello.session_id.is_empty() {
            return Err(status_of(HubError::MissingSessionId));
        }
        self.authorize(&metadata, &hello.session_id)
            .await
            .map_err(status_of)?;
        // A broken inbound stream (client reset, an undecodable or oversized
        // message) ends the bridge like a close; the app is told why when
        // the proxy can say (an invalid message), instead of a bare
        // "disconnected".
        let broken: Arc<Broken> = Arc::default();
        let inbound = AppMessages {
            messages: inbound,
            broken: broken.clone(),
            limit: self.hub.config().max_message_bytes,
            ended: false,
        };
        let outbound = self
            .hub
            .attach(hello, inbound, origin)
            .await
            .map_err(status_of)?;
        let outbound = outbound.map(move |item| {
            item.map(|message| *message).map_err(|end| {
                let cause = broken
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match (end, cause) {
                    (BridgeEnd::Disconnected, Some(status)) => refine_request_status(*status),
                    (end, _) => status_of_end(end),
                }
            })
        });
        Ok(Response::new(Box::pin(outbound)))
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
    fn a_grpc_bridges_inbound_stream_stays_small() {
        // Boxed once per gRPC bridge and kept as long as it lives.
        let size = std::mem::size_of::<AppMessages>();
        assert!(size <= 256, "the inbound stream is {size} bytes");
    }
}
