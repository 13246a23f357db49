//! The health probes and the metrics scrape: `/health` (liveness), `/ready`
//! (readiness) and `/metrics`.

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::metrics::Surface;

use super::error::ApiError;
use super::request::check_app_token;
use super::state::EdgeState;

/// `GET /health`: the process is alive.
pub async fn health() -> &'static str {
    "ok"
}

/// Readiness, beside `/health` (liveness): 200 `ready` while the node can
/// serve; 503 with the reason while it shuts down or, in cluster mode, while
/// NATS is unreachable. Load balancers route by it; nothing restarts on it.
pub async fn ready(State(state): State<EdgeState>) -> Response {
    match state.hub.readiness() {
        Ok(()) => "ready".into_response(),
        Err(reason) => ApiError::NotReady(reason).into_response(),
    }
}

/// `GET /metrics` on the main port: the app token, like creating sessions
/// (open when no app token is configured); without a token on the listener
/// of `OPENCLAW_PROXY_METRICS_LISTEN` ([`crate::server::serve_metrics`]).
pub async fn metrics(State(state): State<EdgeState>, headers: HeaderMap) -> Response {
    if let Err(error) = check_app_token(&state, &headers, Surface::Metrics) {
        return error.into_response();
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
