//! The HTTP routes of the edge.

use axum::Router;
use axum::routing::get;
use openclaw_proxy_core::Hub;

use crate::config::EdgeConfig;

/// Shared state of the HTTP handlers.
#[derive(Clone)]
pub struct EdgeState {
    /// The core every route operates on.
    pub hub: Hub,
    /// The edge's settings.
    pub config: std::sync::Arc<EdgeConfig>,
}

/// The HTTP edge's routes.
pub fn router(hub: Hub, config: EdgeConfig) -> Router {
    let state = EdgeState {
        hub,
        config: std::sync::Arc::new(config),
    };
    Router::new()
        .route("/health", get(health))
        .with_state(state)
}

async fn health() -> &'static str {
    "ok"
}
