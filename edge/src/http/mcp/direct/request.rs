//! The direct path of the requests the app answers (`resources/read`,
//! `prompts/get`, `completion/complete`): the params go to the app as the
//! client wrote them and the app's result comes back as the app wrote it,
//! byte for byte, as tool results do.
//!
//! Only the plain shapes up to 2025-11-25 are taken here: a request of
//! 2026-07-28 (checked against its headers and `_meta` by rmcp), one whose
//! client wants log records (they need a stream), and anything unusual go
//! to rmcp, whose typed answer keeps every content type but not every
//! number's text.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use openclaw_proxy_core::outcome::McpReply;
use openclaw_proxy_core::{AppRequest, CallContext, Caller, Hub, InvokeError, Origin, Transport};
use rmcp::model::RequestId;
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::super::call::{InFlight, caller_of, trace_parent_of};
use super::{MAX_NESTING, json_response, parse};

/// The JSON-RPC code of a resource that does not exist, up to 2025-11-25.
const RESOURCE_NOT_FOUND: i32 = -32002;

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
struct Params {
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "ref", default)]
    reference: Option<Reference>,
    #[serde(rename = "_meta", default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct Reference {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uri: Option<String>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
    protocol_version: Option<serde::de::IgnoredAny>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default)]
    log_level: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    traceparent: Option<String>,
}

/// The request in `body`, if the direct path can answer it: a request
/// (not a notification) of one of the three methods, params an object
/// naming what it asks for, no revision or log level in its `_meta`, at a
/// revision before 2026-07-28.
pub fn parse_request(body: &Bytes, revision: parse::Revision) -> Option<DirectRequest> {
    if revision != parse::Revision::WithInitialize || !parse::nesting_within(body, MAX_NESTING) {
        return None;
    }
    let wire: Wire = serde_json::from_slice(body).ok()?;
    if wire.jsonrpc != "2.0" || !wire.params.get().starts_with('{') {
        return None;
    }
    let params: Params = serde_json::from_str(wire.params.get()).ok()?;
    let meta = params.meta.unwrap_or(Meta {
        protocol_version: None,
        log_level: None,
        traceparent: None,
    });
    if meta.protocol_version.is_some() || meta.log_level.is_some() {
        return None;
    }
    let (method, target) = match wire.method.as_str() {
        "resources/read" => ("resources/read", params.uri?),
        "prompts/get" => ("prompts/get", params.name?),
        "completion/complete" => {
            let reference = params.reference?;
            ("completion/complete", reference.name.or(reference.uri)?)
        }
        _ => return None,
    };
    Some(DirectRequest {
        id: wire.id,
        method,
        target,
        params: wire.params,
        trace_parent: meta.traceparent,
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

/// Answers a request the direct path took. (A session whose client asked
/// for log records with `logging/setLevel` is left to rmcp's path, which
/// carries them: the caller checks.)
pub async fn answer_request(
    hub: &Hub,
    in_flight: &Arc<InFlight>,
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
    } = request;
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let context = CallContext {
        meta_json: String::new(),
        client: caller_of(None, version),
        caller,
        progress: None,
        trace_parent: trace_parent_of(trace_parent.as_deref(), headers),
        origin: Origin::new(Transport::Mcp, peer),
    };
    let jsonrpc_id = serde_json::to_string(&id).unwrap_or_default();
    let registered = in_flight.register(session_id, &jsonrpc_id);
    let asked = AppRequest {
        method,
        target: &target,
        params_json: params.get().to_owned(),
    };
    let outcome = tokio::select! {
        outcome = hub.request(session_id, asked, context) => outcome,
        () = registered.cancelled() => Err(InvokeError::Remote("the request was cancelled by the client".into())),
    };
    json_response(StatusCode::OK, answer_body(&id, &target, outcome))
}

/// The JSON-RPC answer to a request's outcome.
fn answer_body(id: &RequestId, target: &str, outcome: Result<McpReply, InvokeError>) -> Vec<u8> {
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
        Ok(McpReply::Result(result)) => {
            // rmcp leaves `resultType` out for clients before 2026-07-28.
            let result = without_result_type(result);
            serde_json::to_vec(&Answer {
                jsonrpc: "2.0",
                id,
                result: &result,
            })
            .unwrap_or_default()
        }
        Ok(McpReply::Error(failure)) if failure.code == RESOURCE_NOT_FOUND => {
            let data = failure.data.or_else(uri_data);
            error(failure.code, &failure.message, data.as_deref())
        }
        Ok(McpReply::Error(failure)) => {
            error(failure.code, &failure.message, failure.data.as_deref())
        }
        Err(failure @ InvokeError::UnknownResource { .. }) => {
            let data = uri_data();
            error(RESOURCE_NOT_FOUND, &failure.to_string(), data.as_deref())
        }
        Err(failure @ InvokeError::UnknownPrompt { .. }) => {
            error(-32602, &failure.to_string(), None)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_requests_before_2026_are_taken() {
        let body = |text: &str| Bytes::from(text.to_owned());
        let read = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:1","x":1e400}}"#,
        );
        let taken = parse_request(&read, parse::Revision::WithInitialize).expect("taken");
        assert_eq!((taken.method(), taken.target()), ("resources/read", "a:1"));
        assert_eq!(taken.params.get(), r#"{"uri":"a:1","x":1e400}"#);
        assert!(parse_request(&read, parse::Revision::PerRequest).is_none());
        for refused in [
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"a:1"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/logLevel":"info"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":[1]}"#,
        ] {
            assert!(
                parse_request(&body(refused), parse::Revision::WithInitialize).is_none(),
                "{refused}"
            );
        }
        let complete = body(
            r#"{"jsonrpc":"2.0","id":"c","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"x"}}}"#,
        );
        let taken = parse_request(&complete, parse::Revision::WithInitialize).expect("taken");
        assert_eq!(taken.target(), "p");
    }

    #[test]
    fn results_keep_their_text_and_errors_carry_the_uri() {
        let id = RequestId::Number(7);
        let result = RawValue::from_string(
            r#"{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}"#.into(),
        )
        .expect("json");
        let answer = answer_body(&id, "a:1", Ok(McpReply::Result(result)));
        assert_eq!(
            String::from_utf8_lossy(&answer),
            r#"{"jsonrpc":"2.0","id":7,"result":{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}}"#
        );
        let missing = answer_body(
            &id,
            "a:2",
            Err(InvokeError::UnknownResource { uri: "a:2".into() }),
        );
        let missing: serde_json::Value = serde_json::from_slice(&missing).expect("json");
        assert_eq!(missing["error"]["code"], -32002);
        assert_eq!(missing["error"]["data"]["uri"], "a:2");
    }
}
