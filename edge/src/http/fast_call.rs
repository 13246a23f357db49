//! The fast path of `tools/call`: the one request that carries the load.
//!
//! rmcp's stateless transport builds a service per request, spawns it, and
//! passes the call through a one-shot transport: several task hand-offs that
//! together cost more than the whole bridge round trip. For the common shape
//! of `tools/call` (one JSON-RPC request, no progress token, no per-request
//! protocol metadata, a protocol revision before 2026-07-28), this module
//! answers directly: it parses the request with rmcp's own model types, runs
//! the same [`SessionTools`](super::mcp::SessionTools) logic, applies the
//! same legacy-peer adjustments rmcp applies, and serializes rmcp's response
//! type. Everything else (`initialize`, `tools/list`, notifications, progress,
//! 2026-07-28 requests, anything unusual) goes to rmcp unchanged, so the
//! protocol stays rmcp's.
//!
//! The end-to-end tests compare the two paths' answers byte for byte.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::Hub;
use rmcp::model::{JsonObject, RequestId, ServerJsonRpcMessage, ServerResult};
use serde::Deserialize;

use super::mcp::call_result;

/// Protocol revisions the fast path answers for (all before 2026-07-28);
/// an absent header means 2025-03-26 to rmcp as well.
const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Whether the headers allow the fast path: JSON body, a client that accepts
/// JSON and SSE, and a legacy protocol revision.
pub fn headers_allow(headers: &HeaderMap) -> bool {
    let version_ok = match headers.get("mcp-protocol-version") {
        None => true,
        Some(value) => value
            .to_str()
            .is_ok_and(|version| LEGACY_VERSIONS.contains(&version)),
    };
    let content_type_ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
        });
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| {
            item.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        });
    let (mut json, mut sse) = (false, false);
    for item in accept {
        json |= item == "application/json";
        sse |= item == "text/event-stream";
    }
    version_ok && content_type_ok && json && sse
}

/// A `tools/call` the fast path can answer.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastCall {
    // Checked by deserializing: only "2.0" and "tools/call" are accepted.
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    id: RequestId,
    #[serde(rename = "method")]
    _method: ToolsCall,
    params: FastParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
}

#[derive(Deserialize)]
enum JsonRpcVersion {
    #[serde(rename = "2.0")]
    V2,
}

#[derive(Deserialize)]
enum ToolsCall {
    #[serde(rename = "tools/call")]
    ToolsCall,
}

/// Parses `body` when it is exactly a plain `tools/call` request; anything
/// else (other methods, `_meta`, batches, unknown fields) returns `None` and
/// is left to rmcp.
pub fn parse(body: &Bytes) -> Option<FastCall> {
    serde_json::from_slice(body).ok()
}

/// Answers a parsed call.
pub async fn answer(hub: &Hub, session_id: &str, call: FastCall) -> Response {
    let arguments = call.params.arguments.unwrap_or_default();
    let outcome = hub.invoke(session_id, &call.params.name, &arguments).await;
    let message = match call_result(outcome) {
        Err(error) => ServerJsonRpcMessage::error(error, Some(call.id)),
        Ok(result) => {
            let mut result = ServerResult::CallToolResult(result);
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            ServerJsonRpcMessage::response(result, call.id)
        }
    };
    match serde_json::to_vec(&message) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            Body::from(body),
        )
            .into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialize the result: {error}"),
        )
            .into_response(),
    }
}
