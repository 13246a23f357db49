//! The HTTP edge: the documented contract of the original proxy, translated
//! onto the core.
//!
//! Layers (a file imports the layer below it, never a sibling handler; and
//! nothing here imports `crate::server`, which imports this):
//!
//! - Handlers: [`rest`] (`/v1/chat/sessions…`), [`ws`] (the WebSocket
//!   bridge and its frame codec), [`mcp`] (the MCP endpoint: admission, the
//!   rmcp service, the direct path of `tools/call`, JSON-RPC refusals, the
//!   legacy HTTP+SSE transport) and [`probe`] (`/health`, `/ready`,
//!   `/metrics`).
//! - Below them: [`state`] (what every handler shares), [`request`] (session
//!   id path, token checks, body reading, the client's address), [`sse`]
//!   (server-sent events, written and read), [`tool_body`] (tool definitions
//!   as the REST and WebSocket surfaces spell them), [`guard`] (`Host` and
//!   `Origin` against DNS rebinding), [`head`] (how large a request head may
//!   be, before the guard and any route), [`public_url`] (the base URL of the
//!   URLs the proxy hands out), [`spelling`] (fields the original
//!   spelled two ways) and [`error`] (the one HTTP rendering of a refusal).
//!
//! The routes are in the `docs/` page of each protocol.

pub mod deadline;
pub mod error;
pub mod guard;
pub mod head;
pub mod mcp;
pub mod probe;
pub mod public_url;
pub mod request;
pub mod rest;
pub mod spelling;
pub mod sse;
pub mod state;
pub mod tool_body;
pub mod ws;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use openclaw_proxy_core::{Hub, escape};

use crate::config::EdgeConfig;
use error::ApiError;
use mcp::McpState;
use state::EdgeState;

/// The HTTP edge's routes.
pub fn router(hub: Hub, config: EdgeConfig) -> Router {
    let edge = EdgeState::new(hub, config);
    let body_limit = edge.config.max_body_bytes;
    let mcp = Router::new()
        .route(
            "/v1/mcp",
            post(mcp::by_header).get(mcp::legacy::open_by_header),
        )
        .route(
            "/v1/mcp/",
            post(mcp::by_header).get(mcp::legacy::open_by_header),
        )
        .route(
            "/v1/mcp/{session_id}",
            post(mcp::by_path).get(mcp::legacy::open_by_path),
        )
        .route(
            "/v1/mcp/{session_id}/messages",
            post(mcp::legacy::post_message),
        )
        .route(mcp::oauth::METADATA_PATH, get(mcp::oauth::metadata))
        .route(
            &format!("{}/{{*resource}}", mcp::oauth::METADATA_PATH),
            get(mcp::oauth::metadata),
        )
        .with_state(McpState::new(edge.clone()));
    Router::new()
        .route("/health", get(probe::health))
        .route("/ready", get(probe::ready))
        .route("/metrics", get(probe::metrics))
        .route("/v1/chat/sessions", post(rest::create_session))
        .route(
            "/v1/chat/sessions/{session_id}",
            delete(rest::delete_session).get(rest::get_session),
        )
        .route(
            "/v1/chat/sessions/{session_id}/tools",
            put(rest::update_tools),
        )
        .route("/v1/chat/sessions/{session_id}/bridge", get(ws::bridge))
        .with_state(edge)
        .merge(mcp)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
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
        return grpc_answer(status);
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
        return grpc_answer(tonic::Status::resource_exhausted(message));
    }
    let mut response = ApiError::TooManyConnections(message).into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// Whether a request says it is gRPC.
/// A refusal to a gRPC request: `status` in the trailers-only form, no
/// body.
pub fn grpc_answer(status: tonic::Status) -> Response {
    let (parts, ()) = status.into_http::<()>().into_parts();
    Response::from_parts(parts, axum::body::Body::empty())
}

pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::method_not_allowed(&method, &uri)
}
