//! The tonic service: `openclaw.proxy.v1.SessionService` and `BridgeService`
//! over the [`Hub`], plus `grpc.health.v1` and server reflection.
//!
//! This module only translates: it checks the app token, maps [`HubError`] and
//! [`BridgeEnd`] to standard status codes, and turns the `Attach` stream into
//! the hub's bridge.

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::bridge::Inbound;
use crate::hub::{Hub, HubError};
use crate::outcome::BridgeEnd;
use crate::proto::{
    self, app_message,
    bridge_service_server::{BridgeService, BridgeServiceServer},
    session_service_server::{SessionService, SessionServiceServer},
};

pub use tonic_reflection::server::Error as ReflectionError;

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
        Ok(
            tonic::service::Routes::new(SessionServiceServer::new(self.clone()))
                .add_service(BridgeServiceServer::new(self))
                .add_service(health)
                .add_service(reflection_v1)
                .add_service(reflection_v1alpha),
        )
    }

    fn authorize<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let header = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok());
        if self.hub.config().app_token.accepts_header(header) {
            Ok(())
        } else if header.is_none() {
            Err(Status::unauthenticated(
                "missing app token: send metadata `authorization: Bearer <OPENCLAW_PROXY_APP_TOKEN>`",
            ))
        } else {
            Err(Status::unauthenticated("invalid app token"))
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

/// The status an error from the hub is reported with.
pub fn status_of(error: HubError) -> Status {
    let message = error.to_string();
    match error {
        HubError::UnknownSession(_) => Status::not_found(message),
        HubError::MissingSessionId | HubError::InvalidTool(_) => Status::invalid_argument(message),
        HubError::ShuttingDown | HubError::Unavailable(_) => Status::unavailable(message),
    }
}

/// The status an ended bridge stream closes with.
pub fn status_of_end(end: BridgeEnd) -> Status {
    let message = format!("bridge ended: {}", end.reason_for_app());
    match end {
        BridgeEnd::Replaced => Status::aborted(message),
        BridgeEnd::SessionDeleted => Status::not_found(message),
        BridgeEnd::Unresponsive => Status::deadline_exceeded(message),
        BridgeEnd::ShuttingDown => Status::unavailable(message),
        BridgeEnd::Disconnected => Status::cancelled(message),
    }
}

#[tonic::async_trait]
impl SessionService for GrpcService {
    async fn create_session(
        &self,
        request: Request<proto::CreateSessionRequest>,
    ) -> Result<Response<proto::CreateSessionResponse>, Status> {
        self.authorize(&request)?;
        let request = request.into_inner();
        check_required_metadata(&request)?;
        self.hub
            .create_session(request)
            .await
            .map(Response::new)
            .map_err(status_of)
    }

    async fn delete_session(
        &self,
        request: Request<proto::DeleteSessionRequest>,
    ) -> Result<Response<proto::DeleteSessionResponse>, Status> {
        self.authorize(&request)?;
        self.hub
            .delete_session(request.into_inner())
            .await
            .map(Response::new)
            .map_err(status_of)
    }

    async fn get_session(
        &self,
        request: Request<proto::GetSessionRequest>,
    ) -> Result<Response<proto::GetSessionResponse>, Status> {
        self.authorize(&request)?;
        self.hub
            .get_session(request.into_inner())
            .await
            .map(Response::new)
            .map_err(status_of)
    }
}

type ProxyStream = Pin<Box<dyn Stream<Item = Result<proto::ProxyMessage, Status>> + Send>>;

#[tonic::async_trait]
impl BridgeService for GrpcService {
    type AttachStream = ProxyStream;

    async fn attach(
        &self,
        request: Request<Streaming<proto::AppMessage>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        self.authorize(&request)?;
        let mut inbound = request.into_inner();
        let hello = match inbound.message().await? {
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
        // A broken inbound stream (client reset, decode error) ends the bridge
        // like a clean close: the hub sees the end of its inbound messages.
        let inbound = inbound.take_while(|item| std::future::ready(item.is_ok()));
        let inbound = inbound.filter_map(|item| std::future::ready(item.ok().map(Inbound::from)));
        let outbound = self.hub.attach(hello, inbound).await.map_err(status_of)?;
        let outbound = outbound.map(|item| item.map_err(status_of_end));
        Ok(Response::new(Box::pin(outbound)))
    }
}
