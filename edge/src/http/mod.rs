//! The HTTP edge: the documented contract of the original proxy, translated
//! onto the core.
//!
//! - [`rest`]: `POST /v1/chat/sessions`, `GET` and `DELETE /v1/chat/sessions/{id}`.
//! - [`ws`]: `WS /v1/chat/sessions/{id}/bridge`, the JSON rendering of the
//!   gRPC bridge stream.
//! - [`mcp`]: `POST /v1/mcp/{id}` and `POST /v1/mcp` routed by `MCP-Session-Id`,
//!   served by rmcp's stateless streamable HTTP transport.
//! - [`legacy`]: `GET` on the same URLs, the HTTP+SSE transport of MCP
//!   2024-11-05, whose messages the MCP endpoint's handling serves.
//! - [`call`]: one `tools/call`, the same for every path that serves it.
//! - [`direct`]: the direct path of `tools/call` requests (with or without
//!   progress, at 2026-07-28 as at earlier revisions).
//! - [`guard`]: `Host` and `Origin` checks against DNS rebinding, on every
//!   route but the health probes.
//! - [`jsonrpc`]: the MCP endpoint's refusals in JSON-RPC's shape.
//! - [`error`]: the one place where edge errors get their HTTP form.
//! - [`spelling`]: fields the original implementation spelled differently.

pub mod call;
pub mod direct;
pub mod error;
pub mod guard;
pub mod jsonrpc;
pub mod legacy;
pub mod mcp;
pub mod rest;
pub mod spelling;
pub mod ws;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use openclaw_proxy_core::metrics::Surface;
use openclaw_proxy_core::{Credential, Hub, HubError, escape};

use crate::config::EdgeConfig;
use error::ApiError;

/// Shared state of the HTTP handlers: one pointer, because axum clones a
/// handler's state for every request (a profile showed the clones and drops
/// of six separate `Arc`s at 2 % of the server's time).
#[derive(Clone)]
pub struct EdgeState(Arc<EdgeShared>);

impl std::ops::Deref for EdgeState {
    type Target = EdgeShared;

    fn deref(&self) -> &EdgeShared {
        &self.0
    }
}

/// What [`EdgeState`] points to.
pub struct EdgeShared {
    /// The core every route operates on.
    pub hub: Hub,
    /// The edge's settings.
    pub config: Arc<EdgeConfig>,
    /// The MCP service, built once.
    pub mcp: mcp::McpService,
    /// The Host/Origin policy of the MCP endpoint.
    pub guard: Arc<guard::HostGuard>,
    /// MCP calls in flight, for `notifications/cancelled`.
    pub in_flight: Arc<call::InFlight>,
    /// The open streams of the legacy HTTP+SSE transport.
    pub legacy: Arc<legacy::LegacyStreams>,
}

/// The HTTP edge's routes.
pub fn router(hub: Hub, config: EdgeConfig) -> Router {
    let in_flight = Arc::new(call::InFlight::default());
    let state = EdgeState(Arc::new(EdgeShared {
        mcp: mcp::service(hub.clone(), &config, in_flight.clone()),
        in_flight,
        legacy: Arc::default(),
        guard: Arc::new(guard::HostGuard::new(&config)),
        hub,
        config: Arc::new(config),
    }));
    let body_limit = state.config.max_body_bytes;
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route("/v1/chat/sessions", post(rest::create_session))
        .route(
            "/v1/chat/sessions/{session_id}",
            delete(rest::delete_session).get(rest::get_session),
        )
        .route(
            "/v1/chat/sessions/{session_id}/tools",
            axum::routing::put(rest::update_tools),
        )
        .route("/v1/chat/sessions/{session_id}/bridge", get(ws::bridge))
        .route("/v1/mcp", post(mcp::by_header).get(legacy::open_by_header))
        .route("/v1/mcp/", post(mcp::by_header).get(legacy::open_by_header))
        .route(
            "/v1/mcp/{session_id}",
            post(mcp::by_path).get(legacy::open_by_path),
        )
        .route("/v1/mcp/{session_id}/messages", post(legacy::post_message))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// The answer to a path no route serves: gRPC's `UNIMPLEMENTED` for gRPC
/// requests (an unknown service or method), the JSON 404 for everything else.
pub async fn unknown_route(request: Request) -> Response {
    if is_grpc(request.headers()) {
        let path = request.uri().path();
        let status = tonic::Status::unimplemented(format!(
            "no gRPC method {}: this server offers openclaw.proxy.v1, grpc.health.v1 and reflection",
            escape::truncated(path)
        ));
        let (parts, ()) = status.into_http::<()>().into_parts();
        return Response::from_parts(parts, axum::body::Body::empty());
    }
    ApiError::NotFound(escape::truncated(request.uri().path()).into_owned()).into_response()
}

/// The answer to every request on a connection over
/// `OPENCLAW_PROXY_MAX_CONNECTIONS`: `RESOURCE_EXHAUSTED` for gRPC, 429 for
/// the rest, and the connection is not kept alive.
pub fn too_many_connections<B>(request: &Request<B>, limit: usize) -> Response {
    let message = format!(
        "the server holds its limit of {limit} open connections (OPENCLAW_PROXY_MAX_CONNECTIONS); retry later"
    );
    if is_grpc(request.headers()) {
        let (parts, ()) = tonic::Status::resource_exhausted(message)
            .into_http::<()>()
            .into_parts();
        return Response::from_parts(parts, axum::body::Body::empty());
    }
    let mut response = ApiError::TooManyConnections(message).into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: escape::truncated(uri.path()).into_owned(),
    }
}

async fn health() -> &'static str {
    "ok"
}

/// Readiness, beside `/health` (liveness): 200 `ready` while the node can
/// serve; 503 with the reason while it shuts down or, in cluster mode, while
/// NATS is unreachable. Load balancers route by it; nothing restarts on it.
async fn ready(State(state): State<EdgeState>) -> Response {
    match state.hub.readiness() {
        Ok(()) => "ready".into_response(),
        Err(reason) => ApiError::NotReady(reason).into_response(),
    }
}

/// `GET /metrics` on the main port: the app token, like creating sessions
/// (open when no app token is configured); without a token on the listener
/// of `OPENCLAW_PROXY_METRICS_LISTEN` ([`crate::server::serve_metrics`]).
async fn metrics(State(state): State<EdgeState>, headers: HeaderMap) -> Response {
    if let Err(error) = state
        .hub
        .authorize_create(Credential::app(authorization(&headers)))
    {
        state.hub.metrics().auth_failure(Surface::Metrics);
        return ApiError::Unauthorized(error).into_response();
    }
    metrics_response(&state.hub)
}

/// The hub's metrics as a scrape answer.
pub fn metrics_response(hub: &Hub) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            openclaw_proxy_core::metrics::CONTENT_TYPE,
        )],
        hub.render_metrics(),
    )
        .into_response()
}

/// The `{session_id}` of a route's path. A path that cannot be decoded
/// (invalid UTF-8 in a percent escape) is refused in the JSON error shape
/// rather than with axum's plain-text rejection.
#[derive(Debug)]
pub struct SessionIdPath(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SessionIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<String>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(session_id)) => Ok(Self(session_id)),
            Err(rejection) => Err(ApiError::InvalidPath(rejection.body_text())),
        }
    }
}

/// The `Authorization` header value, when it is text.
fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
}

/// Checks that a request may create sessions (the app token), from its
/// headers alone.
pub(crate) fn check_app_token(state: &EdgeState, headers: &HeaderMap) -> Result<(), ApiError> {
    state
        .hub
        .authorize_create(Credential::app(authorization(headers)))
        .map_err(|error| {
            state.hub.metrics().auth_failure(Surface::Rest);
            ApiError::Unauthorized(error)
        })
}

/// Asks the hub whether a request on `surface` may touch `session_id`, from
/// its headers alone (the MCP side for the MCP endpoint, the app side
/// elsewhere). A credential that could have opened the session learns that
/// it does not exist ([`HubError::UnknownSession`]).
pub(crate) async fn check_session_token(
    state: &EdgeState,
    session_id: &str,
    surface: Surface,
    headers: &HeaderMap,
) -> Result<(), ApiError> {
    let header = authorization(headers);
    let credential = match surface {
        Surface::Mcp => Credential::mcp(header),
        _ => Credential::app(header),
    };
    match state.hub.authorize(session_id, credential).await {
        Ok(()) => Ok(()),
        Err(HubError::Unauthenticated(error)) => {
            state.hub.metrics().auth_failure(surface);
            Err(ApiError::Unauthorized(error))
        }
        Err(error) => Err(ApiError::Hub(error)),
    }
}
