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
//!
//! JSON fidelity: the arguments and `_meta` travel to the app as the exact
//! text the client sent, and an object result comes back as the exact text
//! the app sent (text block and `structuredContent`), so no number changes
//! on the way: not integers beyond 64 bits, not `1e400`, not the last digit
//! of a double. rmcp's path rebuilds JSON as trees; there, numbers a tree
//! cannot hold keep their text in the text block only.

use std::net::SocketAddr;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::Hub;
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::model::{
    CallToolResult, ProtocolVersion, RequestId, RequestMetaObject, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::call::{InFlight, ToolCall, call_tool, caller};

/// How deep JSON may nest: serde_json's limit, which rmcp's path applies.
pub const MAX_NESTING: usize = 128;

/// Whether no array or object in `json` lies deeper than `limit`.
fn nesting_within(json: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0_usize, false, false);
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return false;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// `{}` with any whitespace: an empty `_meta`, which the app is not sent.
fn is_empty_object(text: &str) -> bool {
    text.strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|inside| inside.trim().is_empty())
}

/// A JSON-RPC response carrying a tool result, in rmcp's field order, with
/// `structuredContent` written as the app's exact text.
fn exact_response<'a>(
    id: &'a RequestId,
    result: &'a CallToolResult,
    structured: Option<&'a RawValue>,
) -> impl serde::Serialize + 'a {
    #[derive(serde::Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: Body<'a>,
    }
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        result_type: Option<&'a rmcp::model::ResultType>,
        content: &'a [rmcp::model::ContentBlock],
        #[serde(skip_serializing_if = "Option::is_none")]
        structured_content: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<&'a rmcp::model::MetaObject>,
    }
    Response {
        jsonrpc: "2.0",
        id,
        result: Body {
            result_type: result.result_type.as_ref(),
            content: &result.content,
            structured_content: structured,
            is_error: result.is_error,
            meta: result.meta.as_ref(),
        },
    }
}

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
    /// Passed to the app as sent; it must be a JSON object.
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
    /// Passed to the app as sent; a `progressToken` in it sends the call to
    /// rmcp, which streams progress.
    #[serde(rename = "_meta", default)]
    meta: Option<Box<RawValue>>,
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
        let meta: Option<RequestMetaObject> = self
            .params
            .meta
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        super::call::trace_parent(meta.as_ref(), headers)
    }
}

/// Parses `body` when it is exactly a plain `tools/call` request; anything
/// else (other methods, a progress token, batches, unknown fields) returns
/// `None` and is left to rmcp.
pub fn parse(body: &Bytes) -> Option<DirectCall> {
    // Deeper JSON goes to rmcp, which refuses it (serde_json's limit), so
    // the limit is the same on every path although this one builds no tree.
    if !nesting_within(body, MAX_NESTING) {
        return None;
    }
    let call: DirectCall = serde_json::from_slice(body).ok()?;
    // rmcp refuses arguments that are not an object, in its own words.
    let object = |raw: &RawValue| raw.get().starts_with('{');
    if !call.params.arguments.as_deref().is_none_or(object) {
        return None;
    }
    let wants_progress = match call.params.meta.as_deref() {
        None => false,
        Some(raw) => {
            let meta: RequestMetaObject = serde_json::from_str(raw.get()).ok()?;
            meta.get_progress_token().is_some()
        }
    };
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
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let params = call.params;
    let meta_json = params.meta.map(|raw| raw.get().to_owned());
    // Parsed once more only for its clientInfo (2026-07-28 clients).
    let meta: Option<RequestMetaObject> = meta_json
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok());
    let call_ = ToolCall {
        session_id,
        jsonrpc_id: serde_json::to_string(&call.id).unwrap_or_default(),
        client: caller(meta.as_ref(), None, version),
        name: params.name,
        arguments_json: params
            .arguments
            .map_or_else(|| "{}".to_owned(), |raw| raw.get().to_owned()),
        meta_json: meta_json
            .filter(|text| !is_empty_object(text))
            .unwrap_or_default(),
        peer,
        trace_parent: super::call::trace_parent(meta.as_ref(), headers),
    };
    let answer = call_tool(hub, in_flight, call_, None, std::future::pending()).await;
    let body = match answer {
        Err(error) => serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(call.id))),
        Ok(RawToolResult { result, structured }) => {
            let mut result = ServerResult::CallToolResult(result);
            // The legacy-peer adjustments rmcp makes: this path serves only
            // revisions with `initialize`.
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            match &result {
                ServerResult::CallToolResult(result) => {
                    serde_json::to_vec(&exact_response(&call.id, result, structured.as_deref()))
                }
                _ => serde_json::to_vec(&ServerJsonRpcMessage::response(result, call.id)),
            }
        }
    };
    match body {
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
