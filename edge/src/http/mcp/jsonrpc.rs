//! The MCP endpoint's refusals, in JSON-RPC's shape.
//!
//! rmcp answers a body that is not JSON with `415 text/plain`, and a
//! `tools/call` whose params do not fit with "method not found". An MCP
//! client expects a JSON-RPC error it can show: `-32700` for a body that is
//! not JSON, `-32602` for params that do not fit the method. [`refusal`] looks
//! at the envelope before rmcp does, and [`normalize`] gives rmcp's own
//! plain-text refusals (wrong `Accept`, wrong `Content-Type`, ...) the same
//! JSON-RPC shape, keeping their HTTP status, and cuts the messages of its
//! JSON refusals, which quote a client's headers and `_meta` in full, to the
//! same bound as every other refusal.
//!
//! Every refusal the endpoint writes itself, the legacy transport's
//! included, is a [`Refusal`]: its sentence, status and code are written
//! once, and one function renders it.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::escape;
use rmcp::model::{CallToolRequestParams, ErrorCode};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// The parts of a JSON-RPC message that decide how to refuse it.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// A refusal of the MCP endpoint, with the id of the request it answers
/// where one could be read (`null` otherwise).
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("Parse error: the request body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("Invalid params: JSON nested deeper than {limit} levels, the limit: {error}")]
    TooDeep {
        id: Value,
        limit: usize,
        error: serde_json::Error,
    },
    #[error(
        "Invalid params: tools/call needs params {{\"name\": string, \"arguments\"?: object}}: {error}"
    )]
    ToolsCallParams { id: Value, error: serde_json::Error },
    #[error("Invalid Request: the body is not a JSON-RPC request or notification: {0}")]
    NotJsonRpc(String),
    /// rmcp's own plain-text refusal, in its words and with its status.
    #[error("{text}")]
    Transport { status: StatusCode, text: String },
    #[error(
        "session {} holds its limit of {limit} open legacy SSE streams; close one, or use the streamable HTTP transport (POST)",
        escape::quoted(.session_id)
    )]
    SessionStreams { session_id: Arc<str>, limit: usize },
    #[error(
        "the server holds its limit of {limit} open legacy SSE streams; retry later, or use the streamable HTTP transport (POST)"
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
            Self::TooDeep { id, .. } | Self::ToolsCallParams { id, .. } => id.clone(),
            Self::NotJson(_)
            | Self::NotJsonRpc(_)
            | Self::Transport { .. }
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
            Self::TooDeep { .. } | Self::ToolsCallParams { .. } => {
                (StatusCode::OK, ErrorCode::INVALID_PARAMS)
            }
            Self::NotJsonRpc(_) => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST),
            // rmcp's status stands; a failure of the server's own is internal.
            Self::Transport { status, .. } if status.is_server_error() => {
                (*status, ErrorCode::INTERNAL_ERROR)
            }
            Self::Transport { status, .. } => (*status, ErrorCode::INVALID_REQUEST),
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
            "error": {"code": code.0, "message": escape::truncated_to(&message, MESSAGE_LIMIT)},
        });
        let mut response = (status, Body::from(Bytes::from(body.to_string()))).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// The refusal of a body rmcp would misreport: not JSON (`-32700`), or a
/// `tools/call` whose params are not `{name, arguments?}` (`-32602`);
/// `None` when rmcp may have it.
pub fn refusal(body: &[u8]) -> Option<Response> {
    refused(body).map(IntoResponse::into_response)
}

/// [`refusal`], before it is rendered.
fn refused(body: &[u8]) -> Option<Refusal> {
    let value: &RawValue = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(error) => return Some(Refusal::NotJson(error)),
    };
    // Read without building a tree, so a deep body still yields its id.
    let envelope = serde_json::from_str::<Envelope<'_>>(value.get()).ok();
    // rmcp reads the body as a tree, which serde_json refuses beyond 128
    // levels of nesting; rmcp would call that a wrong media type (415).
    if let Err(error) = serde_json::from_str::<Value>(value.get())
        && error.to_string().starts_with("recursion limit exceeded")
    {
        return Some(Refusal::TooDeep {
            id: envelope
                .and_then(|envelope| envelope.id)
                .unwrap_or(Value::Null),
            limit: super::direct::MAX_NESTING,
            error,
        });
    }
    // Batches and other shapes are rmcp's to judge.
    let envelope = envelope?;
    if envelope.method.as_deref() == Some("tools/call") {
        let params = envelope.params.map_or("null", RawValue::get);
        // An object only: serde would also read the params from an array
        // (`[{}, "t"]` is `{_meta: {}, name: "t"}` to it), which rmcp would
        // then serve as a call.
        let fits = if params.starts_with('{') {
            serde_json::from_str::<CallToolRequestParams>(params).map(drop)
        } else {
            serde_json::from_str::<serde_json::Map<String, Value>>(params).map(drop)
        };
        if let Err(error) = fits {
            return Some(Refusal::ToolsCallParams {
                id: envelope.id.unwrap_or(Value::Null),
                error,
            });
        }
    }
    None
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

/// Largest refusal read back from rmcp to be reshaped or bounded: more than
/// any request head hyper accepts, which is what such a refusal quotes.
const REFUSAL_READ_LIMIT: usize = 1024 * 1024;

/// Longest error message the endpoint sends, in characters.
const MESSAGE_LIMIT: usize = 1024;

/// A JSON refusal of rmcp's this short is sent as it is.
const SHORT_JSON_ERROR: usize = 2048;

/// rmcp's JSON refusal with its message cut to [`MESSAGE_LIMIT`] and a
/// long `data` left out. rmcp quotes what it refuses in full (a 20 KB
/// `Mcp-Method` or `Mcp-Name` header, a `_meta` protocol version that
/// disagrees with the header), so a client's input would come back whole.
async fn bounded(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, REFUSAL_READ_LIMIT).await {
        Ok(bytes) if bytes.len() <= SHORT_JSON_ERROR => {
            return Response::from_parts(parts, Body::from(bytes));
        }
        Ok(bytes) => bytes,
        Err(_) => Bytes::new(),
    };
    let Ok(mut answer) = serde_json::from_slice::<Value>(&bytes) else {
        let text = parts
            .status
            .canonical_reason()
            .unwrap_or("error")
            .to_owned();
        let status = parts.status;
        return Refusal::Transport { status, text }.into_response();
    };
    if let Some(error) = answer.get_mut("error").and_then(Value::as_object_mut) {
        if let Some(Value::String(message)) = error.get_mut("message") {
            *message = escape::truncated_to(message, MESSAGE_LIMIT).into_owned();
        }
        let long_data = error
            .get("data")
            .is_some_and(|data| data.to_string().len() > SHORT_JSON_ERROR);
        if long_data {
            error.remove("data");
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(answer.to_string()))
}

/// rmcp's refusal with a non-JSON body, reshaped as a JSON-RPC error with the
/// same status, and its JSON refusals bounded; every other response passes
/// unchanged.
pub async fn normalize(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    if is_json {
        return bounded(response).await;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, REFUSAL_READ_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    // rmcp answers a body that is JSON but no JSON-RPC message (a number, a
    // batch, no "method", a wrong "jsonrpc") as a wrong media type; the
    // media type was right, the request was not.
    const NOT_JSON_RPC: &str = "fail to deserialize request body";
    let refusal = match text.strip_prefix(NOT_JSON_RPC) {
        Some(reason) if status == StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            Refusal::NotJsonRpc(reason.trim().to_owned())
        }
        _ => Refusal::Transport { status, text },
    };
    let mut reshaped = refusal.into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            reshaped.headers_mut().insert(name, value.clone());
        }
    }
    reshaped
}
