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
use std::task::{Context, Poll};

use futures_util::future::{Either, Ready, ready};
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::metadata::MetadataMap;
use tonic::server::NamedService;
use tonic::{Code, Request, Response, Status};

use crate::audit::{ClientAddr, Origin};
use crate::auth::{AuthError, Credential};
use crate::error::ErrorKind;
use crate::hub::{Deletion, Hub, HubError};
use crate::metrics::{Surface, Transport};
use crate::outcome::BridgeEnd;
use crate::proto::{
    self,
    bridge_service_server::BridgeServiceServer,
    session_service_server::{SessionService, SessionServiceServer},
};

pub use tonic_reflection::server::Error as ReflectionError;

mod attach;

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

    /// The gRPC services tonic serves, as one set of routes: sessions and
    /// bridges (both behind [`Authenticated`]), health (every service
    /// reported serving) and reflection (v1 and v1alpha).
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
        let bridges = BridgeServiceServer::new(self.clone())
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

/// The app-side credential in a request's headers, before tonic has made
/// them metadata.
fn credential_in(headers: &http::HeaderMap) -> Credential<'_> {
    Credential::app(
        headers
            .get(http::header::AUTHORIZATION)
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
        let credential = credential_in(request.headers());
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
        let client = origin.client.map(|peer| {
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
