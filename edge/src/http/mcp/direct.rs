//! The direct path of `tools/call`: the one request that carries the load.
//!
//! rmcp's stateless transport costs several task hand-offs per request, more
//! than the whole bridge round trip; for the common shapes of `tools/call`
//! (one JSON-RPC request, at any revision rmcp would accept it) this module
//! parses with rmcp's model types, runs the one [`call_tool`] and writes
//! rmcp's response shape, JSON or an SSE stream once progress comes first.
//! Everything unusual goes to rmcp unchanged, so every refusal stays rmcp's.
//! Answers carry [`SERVED_BY_HEADER`]` : direct`, so the end-to-end tests can
//! compare the two paths byte for byte. Arguments, `_meta` and object results
//! travel as the exact text sent (no number changes on the way).
//!
//! The shapes served and the fidelity rules: `docs/mcp.md` ("JSON fidelity");
//! why: `ARCHITECTURE.md` ("MCP").

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::progress::ProgressReceiver;
use openclaw_proxy_core::proto::ToolProgress;
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, ClientCapabilities, ErrorCode, Implementation, ProgressToken, ProtocolVersion,
    RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::{
    BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX, HEADER_MCP_METHOD, HEADER_MCP_NAME,
    HEADER_MCP_PROTOCOL_VERSION,
};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use tracing::Instrument;

use super::call::{
    InFlight, Progress, ToolCall, call_tool, caller_of, log_thinned, progress_notification,
    trace_parent_of,
};
use crate::http::sse;

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

/// The protocol revisions the direct path serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revision {
    /// Up to 2025-11-25: `initialize` negotiated the revision, which the
    /// header names (absent: 2025-03-26). Answers get rmcp's legacy-peer
    /// adjustments.
    WithInitialize,
    /// 2026-07-28: every request carries its revision, client and
    /// capabilities in `_meta`, and names its method and tool in headers.
    PerRequest,
}

/// The sole value of header `name` as text; `None` when it is absent,
/// repeated or not text (rmcp refuses the last two).
fn single<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// The revision a request may be served at directly, from its headers: a
/// JSON body, a client that accepts JSON and SSE, and one protocol version
/// header naming a revision served here (or none, which means 2025-03-26
/// to rmcp).
pub fn headers_allow(headers: &HeaderMap) -> Option<Revision> {
    let revision = if headers.contains_key(HEADER_MCP_PROTOCOL_VERSION) {
        let version = single(headers, HEADER_MCP_PROTOCOL_VERSION)?;
        if version == ProtocolVersion::V_2026_07_28.as_str() {
            Revision::PerRequest
        } else if ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
            .iter()
            .any(|known| known.as_str() == version)
        {
            Revision::WithInitialize
        } else {
            return None;
        }
    } else {
        Revision::WithInitialize
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
    (content_type_ok && json && sse).then_some(revision)
}

/// A `tools/call` as it arrives.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCall {
    // Checked by deserializing: only "2.0" and "tools/call" are accepted.
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    id: RequestId,
    #[serde(rename = "method")]
    _method: ToolsCall,
    params: WireParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireParams {
    name: String,
    /// Passed to the app as sent; it must be a JSON object.
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
    /// Passed to the app as sent.
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

/// A `tools/call` the direct path can answer.
pub struct DirectCall {
    id: RequestId,
    name: String,
    arguments: Option<Box<RawValue>>,
    /// `_meta` as the client wrote it, for the app.
    meta_text: Option<Box<RawValue>>,
    /// The client's identity from `_meta` (2026-07-28).
    client_info: Option<Implementation>,
    /// `_meta.traceparent`.
    trace_parent: Option<String>,
    progress: Option<ProgressToken>,
    revision: Revision,
}

/// What the edge reads of a request's `_meta`, read without building a tree
/// (the whole `_meta` travels to the app as sent). Each key it decodes reads
/// as rmcp's `RequestMetaObject` reads it, where a value that does not
/// decode counts as absent; here it fails the parse instead, which leaves the
/// request to rmcp. `null` counts as absent in both. The revision and the
/// client's capabilities are kept raw and judged where they are used. Keys
/// it does not read are skipped unjudged, as the arguments are: their text
/// reaches the app as sent (a `1e400` included, at every revision, which
/// rmcp's tree would refuse).
#[derive(Default, Deserialize)]
struct MetaKeys<'a> {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<ProgressToken>,
    /// Present at all (even `null`). Below 2026-07-28 that leaves the
    /// request to rmcp, which negotiates a revision named there; at
    /// 2026-07-28 it must decode ([`MetaKeys::valid_at_2026`]).
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        borrow,
        deserialize_with = "present"
    )]
    protocol_version: Option<&'a RawValue>,
    /// Present at all; judged by [`MetaKeys::valid_at_2026`].
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        borrow,
        deserialize_with = "present"
    )]
    client_capabilities: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    client_info: Option<Implementation>,
    #[serde(default)]
    traceparent: Option<String>,
}

/// A key that is there, whatever its value (`null` included).
fn present<'de, D: Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(value).map(Some)
}

impl MetaKeys<'_> {
    /// Whether a 2026-07-28 request is valid as rmcp judges it
    /// (`RequestMetaObject::missing_required_keys`): `_meta` names that
    /// revision and declares the client's capabilities, both readable.
    fn valid_at_2026(&self) -> bool {
        let revision = self
            .protocol_version
            .and_then(|raw| serde_json::from_str::<ProtocolVersion>(raw.get()).ok());
        revision.is_some_and(|revision| revision == ProtocolVersion::V_2026_07_28)
            && self
                .client_capabilities
                .is_some_and(|raw| serde_json::from_str::<ClientCapabilities>(raw.get()).is_ok())
    }
}

impl DirectCall {
    /// The tool called.
    pub fn tool(&self) -> &str {
        &self.name
    }

    /// The request's W3C `traceparent` ([`super::call::trace_parent`]).
    pub fn trace_parent(&self, headers: &HeaderMap) -> String {
        trace_parent_of(self.trace_parent.as_deref(), headers)
    }
}

/// Whether the SEP-2243 headers of a 2026-07-28 request name exactly its
/// method and tool, as rmcp checks them; a Base64-wrapped name is left to
/// rmcp, which decodes it.
fn standard_headers_match(headers: &HeaderMap, tool: &str) -> bool {
    let name = single(headers, HEADER_MCP_NAME);
    single(headers, HEADER_MCP_METHOD) == Some("tools/call")
        && name == Some(tool)
        && !(tool.starts_with(BASE64_HEADER_PREFIX) && tool.ends_with(BASE64_HEADER_SUFFIX))
}

/// Parses `body` when it is exactly a `tools/call` request this path
/// serves at `revision` with these `headers`; anything else (other methods,
/// batches, unknown fields, a request rmcp would refuse or negotiate on its
/// own) returns `None` and is left to rmcp.
pub fn parse(body: &Bytes, revision: Revision, headers: &HeaderMap) -> Option<DirectCall> {
    // Deeper JSON goes to rmcp, which refuses it (serde_json's limit), so
    // the limit is the same on every path although this one builds no tree.
    if !nesting_within(body, MAX_NESTING) {
        return None;
    }
    let call: WireCall = serde_json::from_slice(body).ok()?;
    let params = call.params;
    // rmcp refuses arguments that are not an object, in its own words.
    let object = |raw: &RawValue| raw.get().starts_with('{');
    if !params.arguments.as_deref().is_none_or(object) {
        return None;
    }
    // An object only: serde would also read a struct from an array.
    let meta_text = params.meta.as_deref();
    if meta_text.is_some_and(|raw| !object(raw)) {
        return None;
    }
    let keys: MetaKeys<'_> = match meta_text {
        Some(raw) => serde_json::from_str(raw.get()).ok()?,
        None => MetaKeys::default(),
    };
    let acceptable = match revision {
        // A revision named in `_meta` makes rmcp negotiate the request on
        // its own, with checks of its own.
        Revision::WithInitialize => keys.protocol_version.is_none(),
        // Valid as rmcp judges validity, headers included.
        Revision::PerRequest => {
            keys.valid_at_2026() && standard_headers_match(headers, &params.name)
        }
    };
    if !acceptable {
        return None;
    }
    let MetaKeys {
        progress_token: progress,
        client_info,
        traceparent: trace_parent,
        ..
    } = keys;
    Some(DirectCall {
        id: call.id,
        name: params.name,
        arguments: params.arguments,
        meta_text: params.meta,
        client_info,
        trace_parent,
        progress,
        revision,
    })
}

/// What a call ended with.
type Outcome = Result<RawToolResult, McpError>;

/// The JSON-RPC message answering a call, as rmcp writes it at `revision`
/// (with `structuredContent` as the app's exact text).
fn answer_message(id: &RequestId, revision: Revision, outcome: Outcome) -> Vec<u8> {
    let body = match outcome {
        Err(error) => serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(id.clone()))),
        Ok(RawToolResult { result, structured }) => {
            let mut result = ServerResult::CallToolResult(result);
            match revision {
                // The legacy-peer adjustments rmcp makes.
                Revision::WithInitialize => {
                    result.strip_result_type_for_legacy_peer();
                    result.strip_non_object_output_for_legacy_peer();
                }
                Revision::PerRequest => result.fill_missing_cache_hints(),
            }
            match &result {
                ServerResult::CallToolResult(result) => {
                    serde_json::to_vec(&exact_response(id, result, structured.as_deref()))
                }
                _ => serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone())),
            }
        }
    };
    body.unwrap_or_else(|error| {
        let error = McpError::internal_error(format!("cannot serialize the result: {error}"), None);
        serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(id.clone())))
            .unwrap_or_default()
    })
}

/// The HTTP status rmcp gives an answer of a 2026-07-28 request whose
/// `_meta` is well formed (this path serves no other); 200 before.
fn status_of(revision: Revision, outcome: &Outcome) -> StatusCode {
    match (revision, outcome) {
        (Revision::PerRequest, Err(error)) => match error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    }
}

/// The `notifications/progress` message of one report, as rmcp writes it.
fn notification_message(token: &ProgressToken, report: ToolProgress) -> Vec<u8> {
    let message = ServerJsonRpcMessage::notification(progress_notification(token, report));
    serde_json::to_vec(&message).unwrap_or_default()
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (SERVED_BY_HEADER, HeaderValue::from_static("direct")),
        ],
        Body::from(body),
    )
        .into_response()
}

/// An event stream of the direct path.
fn sse_response(body: Body) -> Response {
    let mut response = sse::response(body);
    response
        .headers_mut()
        .insert(SERVED_BY_HEADER, HeaderValue::from_static("direct"));
    response
}

/// A task that is aborted when this handle is dropped: a streaming call
/// whose client went away.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The owned parts of a [`ToolCall`], so a streaming call can move to a
/// task of its own.
struct Prepared {
    jsonrpc_id: String,
    name: String,
    arguments_json: String,
    meta_json: String,
    client: openclaw_proxy_core::proto::CallerInfo,
    peer: Option<SocketAddr>,
    trace_parent: String,
}

impl Prepared {
    fn call(self, session_id: &str) -> ToolCall<'_> {
        ToolCall {
            session_id,
            jsonrpc_id: self.jsonrpc_id,
            client: self.client,
            name: self.name,
            arguments_json: self.arguments_json,
            meta_json: self.meta_json,
            peer: self.peer,
            trace_parent: self.trace_parent,
        }
    }
}

/// Answers a parsed call. A client that goes away drops this future (or
/// the answer's stream), which releases the call on the bridge.
pub async fn answer(
    hub: &Hub,
    in_flight: &Arc<InFlight>,
    session_id: &Arc<str>,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    call: DirectCall,
) -> Response {
    let DirectCall {
        id,
        name,
        arguments,
        meta_text,
        client_info,
        trace_parent,
        progress,
        revision,
    } = call;
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let prepared = Prepared {
        jsonrpc_id: serde_json::to_string(&id).unwrap_or_default(),
        // The client's name from a 2026-07-28 `_meta`.
        client: caller_of(client_info.as_ref(), version),
        trace_parent: trace_parent_of(trace_parent.as_deref(), headers),
        name,
        arguments_json: arguments.map_or_else(|| "{}".to_owned(), |raw| raw.get().to_owned()),
        meta_json: meta_text
            .map(|raw| raw.get().to_owned())
            .filter(|text| !is_empty_object(text))
            .unwrap_or_default(),
        peer,
    };
    let Some(token) = progress else {
        let call = prepared.call(session_id);
        let outcome = call_tool(hub, in_flight, call, None, std::future::pending()).await;
        return json_response(
            status_of(revision, &outcome),
            answer_message(&id, revision, outcome),
        );
    };
    // The core keeps the app's reports for this call; they are read here
    // and written on the answer, so a call whose app never reports costs
    // no notification at all.
    let (sink, mut reports) = openclaw_proxy_core::progress::channel();
    let tool = prepared.name.clone();
    let (hub, in_flight, session) = (hub.clone(), in_flight.clone(), session_id.clone());
    let mut running = Box::pin(async move {
        let call = prepared.call(&session);
        let progress = Some(Progress::Reports(sink));
        call_tool(&hub, &in_flight, call, progress, std::future::pending()).await
    });
    // As rmcp answers: JSON when the result comes first, SSE once a
    // notification does.
    let first = tokio::select! {
        biased;
        outcome = &mut running => {
            let mut body = Vec::new();
            while let Some(report) = reports.try_recv() {
                sse::push_json_event(&mut body, &notification_message(&token, report));
            }
            log_thinned(session_id, &tool, reports.thinned());
            if body.is_empty() {
                return json_response(
                    status_of(revision, &outcome),
                    answer_message(&id, revision, outcome),
                );
            }
            sse::push_json_event(&mut body, &answer_message(&id, revision, outcome));
            return sse_response(Body::from(body));
        }
        Some(report) = reports.recv() => report,
    };
    // Run on, whether or not the client reads, until the client goes away;
    // the core thins the reports a slow client leaves waiting.
    let running = AbortOnDrop(tokio::spawn(running.in_current_span()));
    let rest = Streaming {
        reports,
        running,
        token,
        tool,
        session_id: session_id.clone(),
        id,
        revision,
        outcome: None,
    };
    let first = rest.progress_event(first);
    let first = futures_util::stream::once(std::future::ready(Ok::<_, Infallible>(first)));
    let rest = futures_util::stream::unfold(Some(rest), |rest| async move {
        let mut rest = rest?;
        match rest.next().await {
            Next::Event(event) => Some((Ok(event), Some(rest))),
            Next::Last(event) => Some((Ok(event), None)),
        }
    });
    sse_response(Body::from_stream(futures_util::StreamExt::chain(
        first, rest,
    )))
}

/// A streaming call after its first notification.
struct Streaming {
    reports: ProgressReceiver,
    running: AbortOnDrop<Outcome>,
    token: ProgressToken,
    tool: String,
    session_id: Arc<str>,
    id: RequestId,
    revision: Revision,
    /// The call's outcome, once its task has ended.
    outcome: Option<Outcome>,
}

enum Next {
    Event(Bytes),
    Last(Bytes),
}

impl Streaming {
    /// The SSE event of one report.
    fn progress_event(&self, report: ToolProgress) -> Bytes {
        sse::json_event(&notification_message(&self.token, report))
    }

    /// The next event: a notification, a keep-alive comment after
    /// [`sse::KEEP_ALIVE`] without one, or the answer, last (after every
    /// report that came before it, whoever still holds the report queue).
    async fn next(&mut self) -> Next {
        let keep_alive = || Next::Event(sse::KEEP_ALIVE_COMMENT);
        if self.outcome.is_none() {
            tokio::select! {
                biased;
                report = self.reports.recv() => {
                    if let Some(report) = report {
                        return Next::Event(self.progress_event(report));
                    }
                    // No report can come any more: the answer is next.
                }
                joined = &mut self.running.0 => self.outcome = Some(ended(joined)),
                () = tokio::time::sleep(sse::KEEP_ALIVE) => return keep_alive(),
            }
        }
        if let Some(report) = self.reports.try_recv() {
            return Next::Event(self.progress_event(report));
        }
        let outcome = match self.outcome.take() {
            Some(outcome) => outcome,
            None => tokio::select! {
                joined = &mut self.running.0 => ended(joined),
                () = tokio::time::sleep(sse::KEEP_ALIVE) => return keep_alive(),
            },
        };
        log_thinned(&self.session_id, &self.tool, self.reports.thinned());
        Next::Last(sse::json_event(&answer_message(
            &self.id,
            self.revision,
            outcome,
        )))
    }
}

/// The outcome of a call's task.
fn ended(joined: Result<Outcome, tokio::task::JoinError>) -> Outcome {
    joined.unwrap_or_else(|error| {
        Err(McpError::internal_error(
            format!("the call ended: {error}"),
            None,
        ))
    })
}
