//! The HTTP edge: the documented contract of the original proxy, translated
//! onto the core.
//!
//! - [`rest`]: `POST /v1/chat/sessions`, `DELETE /v1/chat/sessions/{id}`.
//! - [`ws`]: `WS /v1/chat/sessions/{id}/bridge`, the JSON rendering of the
//!   gRPC bridge stream.
//! - [`mcp`]: `POST /v1/mcp/{id}` and `POST /v1/mcp` routed by `MCP-Session-Id`,
//!   served by rmcp's stateless streamable HTTP transport.
//! - [`fast_call`]: the direct path of plain `tools/call` requests.
//! - [`guard`]: `Host` and `Origin` checks against DNS rebinding.
//! - [`error`]: the one place where edge errors get their HTTP form.

pub mod error;
pub mod fast_call;
pub mod guard;
pub mod mcp;
pub mod rest;
pub mod ws;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::HeaderMap;
use axum::routing::{delete, get, post};
use openclaw_proxy_core::Hub;

use crate::config::EdgeConfig;
use error::ApiError;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct EdgeState {
    /// The core every route operates on.
    pub hub: Hub,
    /// The edge's settings.
    pub config: Arc<EdgeConfig>,
    /// The MCP service, built once.
    pub mcp: mcp::McpService,
    /// The Host/Origin policy of the MCP endpoint.
    pub guard: Arc<guard::HostGuard>,
}

/// The HTTP edge's routes.
pub fn router(hub: Hub, config: EdgeConfig) -> Router {
    let state = EdgeState {
        mcp: mcp::service(hub.clone(), &config),
        guard: Arc::new(guard::HostGuard::new(&config)),
        hub,
        config: Arc::new(config),
    };
    let body_limit = state.config.max_body_bytes;
    Router::new()
        .route("/health", get(health))
        .route("/v1/chat/sessions", post(rest::create_session))
        .route(
            "/v1/chat/sessions/{session_id}",
            delete(rest::delete_session),
        )
        .route("/v1/chat/sessions/{session_id}/bridge", get(ws::bridge))
        .route("/v1/mcp", post(mcp::by_header))
        .route("/v1/mcp/", post(mcp::by_header))
        .route("/v1/mcp/{session_id}", post(mcp::by_path))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

async fn health() -> &'static str {
    "ok"
}

/// Checks the app token of a REST or WebSocket request.
pub(crate) fn check_app_token(state: &EdgeState, headers: &HeaderMap) -> Result<(), ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    if state.hub.config().app_token.accepts_header(header) {
        Ok(())
    } else {
        Err(ApiError::InvalidAppToken)
    }
}
