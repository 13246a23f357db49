//! The MCP endpoint's refusals, in JSON-RPC's shape.
//!
//! Every refusal of the legacy transport's routes is a [`Refusal`] (the
//! MCP messages' own are the transport's `Rejected`): its sentence, status and code are written
//! once, and one function renders it.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::escape;
use rmcp::model::ErrorCode;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// A refusal of the MCP endpoint, with the id of the request it answers
/// where one could be read (`null` otherwise).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("Parse error: the request body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error(
        "session {} holds its limit of {limit} open legacy SSE streams; close one, or use the streamable HTTP transport (POST)",
        escape::quoted(.session_id)
    )]
    SessionStreams { session_id: Arc<str>, limit: usize },
    #[error(
        "the server holds its limit of {limit} open legacy SSE streams (OPENCLAW_PROXY_LEGACY_SSE_MAX_STREAMS) and this client already holds its share of them; retry later, or use the streamable HTTP transport (POST)"
    )]
    ServerStreams { limit: usize },
    #[error(
        "this client ({client}) holds its limit of {limit} open legacy SSE streams (OPENCLAW_PROXY_LEGACY_SSE_STREAMS_PER_CLIENT); close one, or use the streamable HTTP transport (POST)"
    )]
    ClientStreams { client: String, limit: usize },
    #[error(
        "legacy SSE stream {} of session {} is not open: it was closed or never opened; open one with GET on the session's MCP URL (Accept: text/event-stream) and post to the endpoint it names",
        escape::quoted(.stream_id),
        escape::quoted(.session_id)
    )]
    StreamNotOpen {
        stream_id: String,
        session_id: String,
    },
    #[error("Invalid Request: post JSON-RPC messages with `Content-Type: application/json`")]
    NotJsonContentType,
    #[error(
        "this legacy SSE stream has {limit} messages in progress, its limit; wait for their answers on the stream"
    )]
    StreamBusy { limit: usize },
}

impl Refusal {
    /// The id of the request refused.
    fn id(&self) -> Value {
        match self {
            Self::NotJson(_)
            | Self::SessionStreams { .. }
            | Self::ServerStreams { .. }
            | Self::ClientStreams { .. }
            | Self::StreamNotOpen { .. }
            | Self::NotJsonContentType
            | Self::StreamBusy { .. } => Value::Null,
        }
    }

    /// The HTTP status and the JSON-RPC error code.
    fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            Self::NotJson(_) => (StatusCode::BAD_REQUEST, ErrorCode::PARSE_ERROR),
            Self::SessionStreams { .. }
            | Self::ServerStreams { .. }
            | Self::ClientStreams { .. }
            | Self::StreamBusy { .. } => {
                (StatusCode::TOO_MANY_REQUESTS, ErrorCode::INVALID_REQUEST)
            }
            Self::StreamNotOpen { .. } => (StatusCode::NOT_FOUND, ErrorCode::INVALID_REQUEST),
            Self::NotJsonContentType => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::INVALID_REQUEST,
            ),
        }
    }
}

impl IntoResponse for Refusal {
    /// The one rendering of a refusal: a JSON-RPC error answer, its message
    /// bounded.
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = self.to_string();
        let body = json!({
            "jsonrpc": "2.0",
            "id": self.id(),
            "error": {"code": code.0, "message": escape::truncated_to(&message, super::transport::MESSAGE_LIMIT)},
        });
        let mut response = (status, Body::from(Bytes::from(body.to_string()))).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// The JSON-RPC id (as JSON text) a `notifications/cancelled` names, when
/// `body` is one.
pub fn cancelled_request(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Cancelled<'a> {
        #[serde(borrow)]
        method: Cow<'a, str>,
        params: CancelledParams<'a>,
    }
    #[derive(Deserialize)]
    struct CancelledParams<'a> {
        #[serde(rename = "requestId", borrow)]
        request_id: &'a RawValue,
    }
    let cancelled: Cancelled<'_> = serde_json::from_slice(body).ok()?;
    if cancelled.method != "notifications/cancelled" {
        return None;
    }
    // Normalized through Value, so `7` and ` 7` name the same call.
    let id: Value = serde_json::from_str(cancelled.params.request_id.get()).ok()?;
    serde_json::to_string(&id).ok()
}
