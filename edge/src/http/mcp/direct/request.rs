//! The direct path of the requests the app answers (`resources/read`,
//! `prompts/get`, `completion/complete`): the params go to the app as the
//! client wrote them and the app's result comes back as the app wrote it,
//! byte for byte, as tool results do.
//!
//! The plain shapes are taken at every revision: up to 2025-11-25, and at
//! 2026-07-28 when `_meta` and the `Mcp-Method`/`Mcp-Name` headers are
//! valid as rmcp judges them (a read's answer then gets the caching hints
//! rmcp would fill in, and a missing resource is `-32602`). Anything unusual
//! goes to rmcp, whose typed answer keeps every content type but not every
//! number's text.
//!
//! At 2026-07-28 a `prompts/get` or `resources/read` whose app asks the
//! client something while it answers goes in rounds, as a tool call does
//! ([`super::rounds`]): an `input_required` result, then the client's retry
//! with its answers. Up to 2025-11-25 the answer becomes an event stream
//! once the app reports progress, writes a log record the client wants
//! (the session's `logging/setLevel`, or at 2026-07-28 the request's own
//! level) or asks the client something, as a tool call's does.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::response::Response;
use openclaw_proxy_core::outcome::McpReply;
use openclaw_proxy_core::progress::{Askable, LogLevel, ProgressReceiver};
use openclaw_proxy_core::{AppRequest, CallContext, Caller, Hub, InvokeError, Origin, Transport};
use rmcp::model::{Implementation, ProgressToken, RequestId};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::Instrument;

use super::super::call::{InFlight, caller_of, trace_parent_of};
use super::parse::{MetaKeys, Revision, standard_headers_match};
use super::rounds::{self, Finished, Named};
use super::{AbortOnDrop, Answering, Listening, MAX_NESTING, answer_with_progress, parse};

/// The JSON-RPC code of a resource that does not exist, up to 2025-11-25.
const RESOURCE_NOT_FOUND: i32 = -32002;
/// The same at 2026-07-28, which names the URI as an invalid param.
const INVALID_PARAMS: i32 = -32602;

/// A request the app answers, as the direct path takes it.
pub struct DirectRequest {
    id: RequestId,
    method: &'static str,
    /// What it names: the URI read, the prompt got, the completion's
    /// reference.
    target: String,
    /// The params as the client wrote them.
    params: Box<RawValue>,
    trace_parent: Option<String>,
    /// The client's identity from `_meta` (2026-07-28).
    client_info: Option<Implementation>,
    revision: Revision,
    /// `_meta.progressToken`.
    progress: Option<ProgressToken>,
    /// The least severe log record the client wants (2026-07-28 `_meta`).
    log_level: Option<LogLevel>,
    /// The requests the client can be sent, from its capabilities
    /// (2026-07-28).
    askable: Askable,
    /// The answers and state of a retried request (2026-07-28).
    input_responses: Option<Box<RawValue>>,
    request_state: Option<String>,
}

impl DirectRequest {
    /// The MCP method.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// What the request names.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The request's W3C `traceparent`: its `_meta` one, else the header's
    /// ([`crate::http::mcp::call::trace_parent`]).
    pub fn trace_parent(&self, headers: &HeaderMap) -> String {
        trace_parent_of(self.trace_parent.as_deref(), headers)
    }
}

#[derive(Deserialize)]
struct Wire {
    jsonrpc: String,
    id: RequestId,
    method: String,
    params: Box<RawValue>,
}

/// The keys of the params the direct path reads; the rest travels unread.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "ref", default)]
    reference: Option<Reference>,
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
    /// The client's answers to an `input_required` result (2026-07-28).
    #[serde(rename = "inputResponses", default)]
    input_responses: Option<Box<RawValue>>,
    /// That result's `requestState`, echoed (2026-07-28).
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
}

#[derive(Deserialize)]
struct Reference {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uri: Option<String>,
}

/// The request in `body`, if the direct path can answer it: a request
/// (not a notification) of one of the three methods, params an object
/// naming what it asks for; up to 2025-11-25 no revision in `_meta` (rmcp
/// negotiates those), at 2026-07-28 a `_meta` and headers rmcp would
/// accept; a log level in `_meta`, if any, one MCP names.
pub fn parse_request(
    body: &Bytes,
    revision: Revision,
    headers: &HeaderMap,
) -> Option<DirectRequest> {
    if !parse::nesting_within(body, MAX_NESTING) {
        return None;
    }
    let wire: Wire = serde_json::from_slice(body).ok()?;
    if wire.jsonrpc != "2.0" || !wire.params.get().starts_with('{') {
        return None;
    }
    let params: Params<'_> = serde_json::from_str(wire.params.get()).ok()?;
    let meta: MetaKeys<'_> = match params.meta {
        Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get()).ok()?,
        Some(_) => return None,
        None => MetaKeys::default(),
    };
    let (method, target, named) = match wire.method.as_str() {
        "resources/read" => ("resources/read", params.uri?, true),
        "prompts/get" => ("prompts/get", params.name?, true),
        "completion/complete" => {
            let reference = params.reference?;
            let target = reference.name.or(reference.uri)?;
            ("completion/complete", target, false)
        }
        _ => return None,
    };
    let acceptable = match revision {
        Revision::WithInitialize => meta.protocol_version.is_none(),
        Revision::PerRequest => {
            meta.valid_at_2026()
                && standard_headers_match(headers, method, named.then_some(target.as_str()))
        }
    };
    if !acceptable {
        return None;
    }
    // A level MCP does not name is rmcp's to refuse.
    let log_level = match &meta.log_level {
        None => None,
        Some(level) => Some(LogLevel::parse(level)?),
    };
    let askable = meta.askable();
    let MetaKeys {
        client_info,
        traceparent,
        progress_token,
        ..
    } = meta;
    // Rounds are a 2026-07-28 thing; before, these keys are the app's.
    let (input_responses, request_state) = match revision {
        Revision::PerRequest => (params.input_responses, params.request_state),
        Revision::WithInitialize => (None, None),
    };
    Some(DirectRequest {
        id: wire.id,
        method,
        target,
        trace_parent: traceparent,
        client_info,
        revision,
        progress: progress_token,
        log_level,
        askable,
        input_responses,
        request_state,
        params: wire.params,
    })
}

/// A JSON-RPC answer carrying the app's result as it wrote it.
#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a RawValue,
}

#[derive(Serialize)]
struct ErrorAnswer<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i32,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
}

/// Answers a request the direct path took.
pub async fn answer_request(
    state: &super::super::McpState,
    session_id: &Arc<str>,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    caller: Caller,
    request: DirectRequest,
) -> Response {
    let DirectRequest {
        id,
        method,
        target,
        params,
        trace_parent,
        client_info,
        revision,
        progress,
        log_level,
        askable,
        input_responses,
        request_state,
    } = request;
    // The level the request names (2026-07-28), else the session's.
    let log_level = log_level.or_else(|| state.hub.log_level(session_id));
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let mut context = CallContext {
        meta_json: String::new(),
        client: caller_of(client_info.as_ref(), version),
        caller,
        progress: None,
        trace_parent: trace_parent_of(trace_parent.as_deref(), headers),
        origin: Origin::new(Transport::Mcp, peer),
    };
    let asked = Asked {
        jsonrpc_id: serde_json::to_string(&id).unwrap_or_default(),
        method,
        target,
        params_json: params.get().to_owned(),
    };
    let in_rounds = method != "completion/complete"
        && revision == Revision::PerRequest
        && (askable != Askable::NOTHING_DECLARED || request_state.is_some());
    if in_rounds {
        let round = rounds::Round {
            hub: &state.hub,
            rounds: &state.rounds,
            session_id,
            named: Named {
                method,
                name: asked.target.clone(),
            },
            id,
            token: progress,
            answers: rounds::answers_of(input_responses.as_deref()),
        };
        if let Some(request_state) = request_state {
            return round.resume(&request_state).await;
        }
        let listening = Listening {
            token: None,
            log_level,
            askable,
        };
        let (running, reports) = spawn_request(state, session_id, asked, context, listening);
        return round.start(running, reports).await;
    }
    let askable = match revision {
        // The answer can become a stream carrying the app's requests.
        Revision::WithInitialize => Askable::Any,
        // Only the methods above go in rounds.
        Revision::PerRequest if method == "completion/complete" => Askable::Nothing,
        // A client that declared nothing it can be asked: the app's request
        // is refused naming what the client lacks.
        Revision::PerRequest => askable,
    };
    let answering = Answering {
        id,
        revision,
        named: Named {
            method,
            name: asked.target.clone(),
        },
    };
    let listening = Listening {
        token: progress,
        log_level,
        askable,
    };
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let running = move |sink| async move {
        context.progress = Some(sink);
        Finished::Request(asked.send(&hub, &in_flight, &session, context).await)
    };
    answer_with_progress(session_id, running, listening, answering).await
}

/// The owned parts of a request for the app, so that one in rounds can move
/// to a task of its own.
struct Asked {
    jsonrpc_id: String,
    method: &'static str,
    target: String,
    params_json: String,
}

impl Asked {
    /// Sends the request to the app; its answer, or the client's
    /// cancellation.
    async fn send(
        &self,
        hub: &Hub,
        in_flight: &InFlight,
        session_id: &str,
        context: CallContext,
    ) -> Result<McpReply, InvokeError> {
        let registered = in_flight.register(session_id, &self.jsonrpc_id);
        let request = AppRequest {
            method: self.method,
            target: &self.target,
            params_json: self.params_json.clone(),
        };
        tokio::select! {
            outcome = hub.request(session_id, request, context) => outcome,
            () = registered.cancelled() => Err(InvokeError::Remote("the request was cancelled by the client".into())),
        }
    }
}

/// A request in rounds on a task of its own, and its events (the app's
/// requests to the client, its progress).
fn spawn_request(
    state: &super::super::McpState,
    session_id: &Arc<str>,
    asked: Asked,
    mut context: CallContext,
    listening: Listening,
) -> (AbortOnDrop<Finished>, ProgressReceiver) {
    let Listening {
        log_level, askable, ..
    } = listening;
    let (sink, reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    context.progress = Some(sink);
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let running = tokio::spawn(
        async move { Finished::Request(asked.send(&hub, &in_flight, &session, context).await) }
            .in_current_span(),
    );
    (AbortOnDrop(running), reports)
}

/// What the answer to a request says besides its outcome.
pub(super) struct Answered<'a> {
    pub(super) id: &'a RequestId,
    pub(super) method: &'static str,
    pub(super) target: &'a str,
    pub(super) revision: Revision,
}

impl Answered<'_> {
    /// The JSON-RPC answer to the request's outcome, as rmcp would give it
    /// at the request's revision, with the app's result as it wrote it.
    pub(super) fn body(&self, outcome: Result<McpReply, InvokeError>) -> Vec<u8> {
        let Self {
            id,
            method,
            target,
            revision,
        } = *self;
        let not_found = match revision {
            Revision::WithInitialize => RESOURCE_NOT_FOUND,
            Revision::PerRequest => INVALID_PARAMS,
        };
        let result = |result: Box<RawValue>| match revision {
            // rmcp leaves `resultType` out for clients before 2026-07-28.
            Revision::WithInitialize => without_result_type(result),
            // And completes it at 2026-07-28.
            Revision::PerRequest => completed_at_2026(result, method == "resources/read"),
        };
        answer_body(
            id,
            target,
            not_found,
            outcome.map(|reply| match reply {
                McpReply::Result(raw) => McpReply::Result(result(raw)),
                other => other,
            }),
        )
    }
}

/// The JSON-RPC answer to a request's outcome; a missing resource is
/// `not_found`, carrying its URI.
fn answer_body(
    id: &RequestId,
    target: &str,
    not_found: i32,
    outcome: Result<McpReply, InvokeError>,
) -> Vec<u8> {
    let error = |code: i32, message: &str, data: Option<&RawValue>| {
        serde_json::to_vec(&ErrorAnswer {
            jsonrpc: "2.0",
            id,
            error: ErrorBody {
                code,
                message,
                data,
            },
        })
        .unwrap_or_default()
    };
    let uri_data = || RawValue::from_string(serde_json::json!({ "uri": target }).to_string()).ok();
    match outcome {
        Ok(McpReply::Result(result)) => serde_json::to_vec(&Answer {
            jsonrpc: "2.0",
            id,
            result: &result,
        })
        .unwrap_or_default(),
        Ok(McpReply::Error(failure)) if failure.code == RESOURCE_NOT_FOUND => {
            let data = failure.data.or_else(uri_data);
            error(not_found, &failure.message, data.as_deref())
        }
        Ok(McpReply::Error(failure)) => {
            error(failure.code, &failure.message, failure.data.as_deref())
        }
        Err(failure @ InvokeError::UnknownResource { .. }) => {
            let data = uri_data();
            error(not_found, &failure.to_string(), data.as_deref())
        }
        Err(failure @ InvokeError::UnknownPrompt { .. }) => {
            error(INVALID_PARAMS, &failure.to_string(), None)
        }
        Err(failure) => error(-32603, &failure.to_string(), None),
    }
}

/// The result without a `resultType` key, which clients before 2026-07-28
/// do not know; unchanged (and not re-read) when it has none.
fn without_result_type(result: Box<RawValue>) -> Box<RawValue> {
    if !result.get().contains("\"resultType\"") {
        return result;
    }
    let Ok(mut object) =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(result.get())
    else {
        return result;
    };
    object.remove("resultType");
    serde_json::value::to_raw_value(&object).unwrap_or(result)
}

/// The keys of a result that rmcp completes at 2026-07-28, as far as the
/// direct path reads them. A key counts when present at all (`null` included), so that none
/// is written twice.
#[derive(Deserialize)]
struct CacheHints<'a> {
    #[serde(rename = "ttlMs", default, borrow, deserialize_with = "present")]
    ttl_ms: Option<&'a RawValue>,
    #[serde(rename = "cacheScope", default, borrow, deserialize_with = "present")]
    cache_scope: Option<&'a RawValue>,
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
}

fn present<'de, D: serde::Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(value).map(Some)
}

/// A result as rmcp completes it at 2026-07-28: `resultType: "complete"`
/// when the app named no type, and for a complete read (`cacheable`) the
/// caching hints the app gave none of (`ttlMs: 0`, `cacheScope:
/// "private"`); written after the app's own text, which is kept as it is.
fn completed_at_2026(result: Box<RawValue>, cacheable: bool) -> Box<RawValue> {
    let Ok(hints) = serde_json::from_str::<CacheHints<'_>>(result.get()) else {
        return result;
    };
    let mut missing = Vec::new();
    if hints.result_type.is_none() {
        missing.push(r#""resultType":"complete""#);
    }
    let complete = hints
        .result_type
        .as_deref()
        .is_none_or(|kind| kind == "complete");
    if cacheable && complete && hints.ttl_ms.is_none() {
        missing.push(r#""ttlMs":0"#);
    }
    if cacheable && complete && hints.cache_scope.is_none() {
        missing.push(r#""cacheScope":"private""#);
    }
    let text = result.get().trim_end();
    let Some(inside) = text.strip_suffix('}') else {
        return result;
    };
    if missing.is_empty() {
        return result;
    }
    let separator = if super::is_empty_object(text) {
        ""
    } else {
        ","
    };
    let extended = format!("{inside}{separator}{}}}", missing.join(","));
    RawValue::from_string(extended).unwrap_or(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(text: &str) -> Bytes {
        Bytes::from(text.to_owned())
    }

    #[test]
    fn plain_requests_are_taken_and_others_left_to_rmcp() {
        let none = HeaderMap::new();
        let read = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:1","x":1e400}}"#,
        );
        let taken = parse_request(&read, Revision::WithInitialize, &none).expect("taken");
        assert_eq!((taken.method(), taken.target()), ("resources/read", "a:1"));
        assert_eq!(taken.params.get(), r#"{"uri":"a:1","x":1e400}"#);
        // 2026-07-28 needs its `_meta` and headers.
        assert!(parse_request(&read, Revision::PerRequest, &none).is_none());
        for refused in [
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"a:1"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/logLevel":"loud"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":[1]}"#,
        ] {
            assert!(
                parse_request(&body(refused), Revision::WithInitialize, &none).is_none(),
                "{refused}"
            );
        }
        // A log level MCP names is served here, on a stream when records come.
        let logged = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/logLevel":"info"}}}"#,
        );
        let taken = parse_request(&logged, Revision::WithInitialize, &none).expect("taken");
        assert_eq!(taken.log_level, LogLevel::parse("info"));
        let complete = body(
            r#"{"jsonrpc":"2.0","id":"c","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"x"}}}"#,
        );
        let taken = parse_request(&complete, Revision::WithInitialize, &none).expect("taken");
        assert_eq!(taken.target(), "p");
    }

    #[test]
    fn at_2026_the_meta_and_the_headers_must_be_valid() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;
        let read = body(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"a:1","_meta":{meta}}}}}"#
        ));
        let headers = |method: &str, name: Option<&str>| {
            let mut headers = HeaderMap::new();
            headers.insert("mcp-method", method.parse().expect("header"));
            if let Some(name) = name {
                headers.insert("mcp-name", name.parse().expect("header"));
            }
            headers
        };
        let taken = parse_request(
            &read,
            Revision::PerRequest,
            &headers("resources/read", Some("a:1")),
        )
        .expect("taken");
        assert_eq!(
            taken.client_info.map(|info| info.name).as_deref(),
            Some("c")
        );
        for wrong in [
            headers("resources/read", None),
            headers("resources/read", Some("a:2")),
            headers("prompts/get", Some("a:1")),
        ] {
            assert!(parse_request(&read, Revision::PerRequest, &wrong).is_none());
        }
        let no_capabilities = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        assert!(
            parse_request(
                &no_capabilities,
                Revision::PerRequest,
                &headers("resources/read", Some("a:1"))
            )
            .is_none()
        );
    }

    #[test]
    fn results_keep_their_text_and_errors_carry_the_uri() {
        let id = RequestId::Number(7);
        let result = RawValue::from_string(
            r#"{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}"#.into(),
        )
        .expect("json");
        let answer = answer_body(&id, "a:1", RESOURCE_NOT_FOUND, Ok(McpReply::Result(result)));
        assert_eq!(
            String::from_utf8_lossy(&answer),
            r#"{"jsonrpc":"2.0","id":7,"result":{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}}"#
        );
        for not_found in [RESOURCE_NOT_FOUND, INVALID_PARAMS] {
            let missing = answer_body(
                &id,
                "a:2",
                not_found,
                Err(InvokeError::UnknownResource { uri: "a:2".into() }),
            );
            let missing: serde_json::Value = serde_json::from_slice(&missing).expect("json");
            assert_eq!(missing["error"]["code"], not_found);
            assert_eq!(missing["error"]["data"]["uri"], "a:2");
        }
    }

    #[test]
    fn a_2026_result_gets_what_rmcp_adds_and_keeps_its_own() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).expect("json");
        let read = |text: &str| completed_at_2026(raw(text), true).get().to_owned();
        assert_eq!(
            read(r#"{"contents":[],"x":1e400}"#),
            r#"{"contents":[],"x":1e400,"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
        );
        assert_eq!(
            read("{ }"),
            r#"{ "resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
        );
        assert_eq!(
            read(r#"{"contents":[],"ttlMs":5,"resultType":"complete"}"#),
            r#"{"contents":[],"ttlMs":5,"resultType":"complete","cacheScope":"private"}"#
        );
        let own = r#"{"contents":[],"ttlMs":5,"cacheScope":"public","resultType":"complete"}"#;
        assert_eq!(read(own), own);
        let incomplete = r#"{"resultType":"input_required"}"#;
        assert_eq!(read(incomplete), incomplete);
        let prompt = completed_at_2026(raw(r#"{"messages":[]}"#), false);
        assert_eq!(prompt.get(), r#"{"messages":[],"resultType":"complete"}"#);
    }
}
