//! The MCP endpoint's refusals, in JSON-RPC's shape.
//!
//! rmcp answers a body that is not JSON with `415 text/plain`, and a
//! `tools/call` whose params do not fit with "method not found". An MCP
//! client expects a JSON-RPC error it can show: `-32700` for a body that is
//! not JSON, `-32602` for params that do not fit the method. [`refusal`] looks
//! at the envelope before rmcp does, and [`normalize`] gives rmcp's own
//! plain-text refusals (wrong `Accept`, wrong `Content-Type`, ...) the same
//! JSON-RPC shape, keeping their HTTP status.

use std::borrow::Cow;

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

/// The refusal of a body rmcp would misreport: not JSON (`-32700`), or a
/// `tools/call` whose params are not `{name, arguments?}` (`-32602`);
/// `None` when rmcp may have it.
pub fn refusal(body: &[u8]) -> Option<Response> {
    let value: &RawValue = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(error) => {
            return Some(error_response(
                StatusCode::BAD_REQUEST,
                Value::Null,
                ErrorCode::PARSE_ERROR,
                format!("Parse error: the request body is not JSON: {error}"),
            ));
        }
    };
    // Read without building a tree, so a deep body still yields its id.
    let envelope = serde_json::from_str::<Envelope<'_>>(value.get()).ok();
    // rmcp reads the body as a tree, which serde_json refuses beyond 128
    // levels of nesting; rmcp would call that a wrong media type (415).
    if let Err(error) = serde_json::from_str::<Value>(value.get())
        && error.to_string().starts_with("recursion limit exceeded")
    {
        return Some(error_response(
            StatusCode::OK,
            envelope
                .and_then(|envelope| envelope.id)
                .unwrap_or(Value::Null),
            ErrorCode::INVALID_PARAMS,
            format!(
                "Invalid params: JSON nested deeper than {} levels, the limit: {error}",
                super::direct::MAX_NESTING
            ),
        ));
    }
    // Batches and other shapes are rmcp's to judge.
    let envelope = envelope?;
    if envelope.method.as_deref() == Some("tools/call") {
        let params = envelope.params.map_or("null", RawValue::get);
        if let Err(error) = serde_json::from_str::<CallToolRequestParams>(params) {
            return Some(error_response(
                StatusCode::OK,
                envelope.id.unwrap_or(Value::Null),
                ErrorCode::INVALID_PARAMS,
                format!(
                    "Invalid params: tools/call needs params {{\"name\": string, \"arguments\"?: object}}: {error}"
                ),
            ));
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

/// Largest refusal body read back from rmcp to be reshaped.
const PLAIN_ERROR_LIMIT: usize = 4096;

/// rmcp's refusal with a non-JSON body, reshaped as a JSON-RPC error with the
/// same status; every other response passes unchanged.
pub async fn normalize(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, PLAIN_ERROR_LIMIT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    // rmcp answers a body that is JSON but no JSON-RPC message (a number, a
    // batch, no "method", a wrong "jsonrpc") as a wrong media type; the
    // media type was right, the request was not.
    const NOT_JSON_RPC: &str = "fail to deserialize request body";
    let (status, text) = match text.strip_prefix(NOT_JSON_RPC) {
        Some(reason) if status == StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            StatusCode::BAD_REQUEST,
            format!(
                "Invalid Request: the body is not a JSON-RPC request or notification: {}",
                reason.trim()
            ),
        ),
        _ => (status, text),
    };
    let code = if status.is_server_error() {
        ErrorCode::INTERNAL_ERROR
    } else {
        ErrorCode::INVALID_REQUEST
    };
    let mut reshaped = error_response(status, Value::Null, code, text);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            reshaped.headers_mut().insert(name, value.clone());
        }
    }
    reshaped
}

/// A JSON-RPC error answer.
pub fn error_response(status: StatusCode, id: Value, code: ErrorCode, message: String) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code.0, "message": escape::truncated_to(&message, 1024)},
    });
    let mut response = (status, Body::from(Bytes::from(body.to_string()))).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
