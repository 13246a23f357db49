//! The direct path of `tools/call`: the one request that carries the load.
//!
//! rmcp's stateless transport builds a service per request, spawns it, and
//! passes the call through a one-shot transport: several task hand-offs that
//! together cost more than the whole bridge round trip. For the common shape
//! of `tools/call` (one JSON-RPC request, no progress token, a protocol
//! revision with an `initialize` handshake, as rmcp defines them; a `_meta`
//! is fine and reaches the app), this module answers directly: it parses the request
//! with rmcp's own model types, runs the one [`call_tool`] every MCP path
//! runs, applies the same legacy-peer adjustments rmcp applies, and
//! serializes rmcp's response type. Everything else (`initialize`,
//! `tools/list`, notifications, progress, 2026-07-28 requests, anything
//! unusual) goes to rmcp unchanged, so the protocol stays rmcp's.
//!
//! Answers of this path carry the header [`SERVED_BY_HEADER`]` : direct`, so
//! the end-to-end tests can tell which path served a request; they compare
//! the two paths' answers byte for byte.

use std::net::SocketAddr;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::Hub;
use rmcp::model::{
    CallToolRequestParams, JsonObject, ProtocolVersion, RequestId, RequestMetaObject,
    ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use serde::Deserialize;

use super::call::{InFlight, ToolCall, call_tool, caller};

/// The response header that names the path which served a `tools/call`.
pub const SERVED_BY_HEADER: HeaderName = HeaderName::from_static("openclaw-proxy-served-by");

/// Whether the headers allow the direct path: JSON body, a client that
/// accepts JSON and SSE, and a protocol revision that rmcp serves with an
/// `initialize` handshake (no per-request metadata to validate). An absent
/// version header means 2025-03-26 to rmcp, which qualifies.
pub fn headers_allow(headers: &HeaderMap) -> bool {
    let version_ok = match headers.get(HEADER_MCP_PROTOCOL_VERSION) {
        None => true,
        Some(value) => value.to_str().is_ok_and(|version| {
            ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
                .iter()
                .any(|known| known.as_str() == version)
        }),
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

/// A `tools/call` the direct path can answer.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirectCall {
    // Checked by deserializing: only "2.0" and "tools/call" are accepted.
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    id: RequestId,
    #[serde(rename = "method")]
    _method: ToolsCall,
    params: DirectParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectParams {
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    /// Passed to the app unchanged; a `progressToken` in it sends the call
    /// to rmcp, which streams progress.
    #[serde(rename = "_meta", default)]
    meta: Option<RequestMetaObject>,
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

impl DirectCall {
    /// The tool called.
    pub fn tool(&self) -> &str {
        &self.params.name
    }

    /// The request's W3C `traceparent` ([`super::call::trace_parent`]).
    pub fn trace_parent(&self, headers: &HeaderMap) -> String {
        super::call::trace_parent(self.params.meta.as_ref(), headers)
    }
}

/// Parses `body` when it is exactly a plain `tools/call` request; anything
/// else (other methods, a progress token, batches, unknown fields) returns
/// `None` and is left to rmcp.
pub fn parse(body: &Bytes) -> Option<DirectCall> {
    let call: DirectCall = serde_json::from_slice(body).ok()?;
    let wants_progress = call
        .params
        .meta
        .as_ref()
        .is_some_and(|meta| meta.get_progress_token().is_some());
    (!wants_progress).then_some(call)
}

/// Answers a parsed call. A client that goes away drops this future, which
/// releases the call on the bridge.
pub async fn answer(
    hub: &Hub,
    in_flight: &InFlight,
    session_id: &str,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    call: DirectCall,
) -> Response {
    let trace_parent = call.trace_parent(headers);
    let mut request = CallToolRequestParams::new(call.params.name);
    request.arguments = call.params.arguments;
    request.meta = call.params.meta;
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let call_ = ToolCall {
        session_id,
        jsonrpc_id: serde_json::to_string(&call.id).unwrap_or_default(),
        client: caller(request.meta.as_ref(), None, version),
        request,
        peer,
        trace_parent,
    };
    let answer = call_tool(hub, in_flight, call_, None, std::future::pending()).await;
    let message = match answer {
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
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                ),
                (SERVED_BY_HEADER, HeaderValue::from_static("direct")),
            ],
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
