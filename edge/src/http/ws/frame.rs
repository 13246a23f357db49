//! The bridge's JSON frames: the core's messages rendered for the app, and
//! the app's frames parsed into the core's messages (or into the message of
//! the error frame the app gets). No socket here: [`super`] moves frames.

use std::borrow::Cow;

use openclaw_proxy_core::Inbound;
use openclaw_proxy_core::proto::{self, app_message, proxy_message};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tungstenite::Message;

use crate::http::spelling::pick;
use crate::http::tool_body::{DeclarationsBody, ToolBody, tool_definitions};

/// The frame types an app may send, for the messages that list them.
const APP_FRAME_TYPES: &str = "\"invoke_result\", \"mcp_result\", \"progress\", \"log\", \"client_request\", \"update_tools\", \"resource_updated\" or \"pong\"";

/// The JSON frames for one core message.
pub(super) fn render(message: proto::ProxyMessage) -> Vec<Message> {
    let Some(kind) = message.kind else {
        return Vec::new();
    };
    let text = match kind {
        // The legacy protocol has no attach confirmation: the upgrade is it.
        proxy_message::Kind::Attached(_) => return Vec::new(),
        proxy_message::Kind::Invoke(invoke) => return rendered(invoke_frame(&invoke)),
        proxy_message::Kind::McpRequest(request) => return rendered(mcp_request_frame(&request)),
        proxy_message::Kind::ClientResponse(response) => {
            return rendered(client_response_frame(&response));
        }
        proxy_message::Kind::ToolsUpdated(updated) => json!({
            "type": "tools_updated",
            "tools": updated.tools,
            "resources": updated.resources,
            "resource_templates": updated.resource_templates,
            "resourceTemplates": updated.resource_templates,
            "prompts": updated.prompts,
        }),
        proxy_message::Kind::Cancel(cancel) => json!({
            "type": "cancel_tool",
            "request_id": cancel.request_id,
            "requestId": cancel.request_id,
            "reason": cancel.reason,
        }),
        proxy_message::Kind::Ping(ping) => {
            let frame = json!({"type": "ping", "nonce": ping.nonce}).to_string();
            return vec![
                Message::Ping(axum::body::Bytes::from_static(b"openclaw-proxy")),
                Message::Text(frame.into()),
            ];
        }
        proxy_message::Kind::Error(notice) => error_frame(&notice.message, &notice.request_id),
    };
    vec![Message::Text(text.to_string().into())]
}

/// One rendered frame, or none (logged) when the core's message held text
/// that is not the JSON it promised.
fn rendered(frame: Result<String, serde_json::Error>) -> Vec<Message> {
    match frame {
        Ok(text) => vec![Message::Text(text.into())],
        Err(error) => {
            tracing::error!(%error, "a message for the app could not be rendered as JSON");
            Vec::new()
        }
    }
}

/// Who is calling, as the frames name it.
#[derive(Serialize)]
struct Client<'a> {
    name: &'a str,
    version: &'a str,
    #[serde(rename = "protocolVersion")]
    protocol_version: &'a str,
}

impl<'a> Client<'a> {
    /// The caller, or `None` when nothing is known of it.
    fn of(client: Option<&'a proto::CallerInfo>) -> Option<Self> {
        client
            .filter(|client| {
                !(client.name.is_empty()
                    && client.version.is_empty()
                    && client.protocol_version.is_empty())
            })
            .map(|client| Client {
                name: &client.name,
                version: &client.version,
                protocol_version: &client.protocol_version,
            })
    }
}

/// Which credential opened the call, as the frames name it: `kind` always,
/// the rest only for an OAuth access token. Never the token.
#[derive(Serialize)]
struct Caller<'a> {
    kind: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    issuer: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    subject: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    client_id: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    scopes: &'a [String],
}

impl<'a> Caller<'a> {
    fn of(caller: Option<&'a proto::CallerIdentity>) -> Option<Self> {
        caller.map(|caller| Caller {
            kind: if caller.kind.is_empty() {
                "none"
            } else {
                &caller.kind
            },
            issuer: &caller.issuer,
            subject: &caller.subject,
            client_id: &caller.client_id,
            scopes: &caller.scopes,
        })
    }
}

/// `mcp_request`, serialized straight from the request, `params` exactly
/// as the client sent them.
fn mcp_request_frame(request: &proto::McpRequest) -> Result<String, serde_json::Error> {
    #[derive(Serialize)]
    struct Frame<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(rename = "mcpSessionId")]
        session_id: &'a str,
        request_id: &'a str,
        #[serde(rename = "requestId")]
        request_id_camel: &'a str,
        method: &'a str,
        params: &'a RawValue,
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<Client<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        caller: Option<Caller<'a>>,
        #[serde(skip_serializing_if = "str::is_empty")]
        traceparent: &'a str,
    }
    let params: &RawValue = if request.params_json.is_empty() {
        serde_json::from_str("{}")?
    } else {
        serde_json::from_str(&request.params_json)?
    };
    serde_json::to_string(&Frame {
        kind: "mcp_request",
        session_id: &request.session_id,
        request_id: &request.request_id,
        request_id_camel: &request.request_id,
        method: &request.method,
        params,
        client: Client::of(request.client.as_ref()),
        caller: Caller::of(request.caller.as_ref()),
        traceparent: &request.trace_parent,
    })
}

/// `client_response`: the client's answer to one `client_request`, its
/// result exactly as the client sent it.
fn client_response_frame(response: &proto::ClientResponse) -> Result<String, serde_json::Error> {
    #[derive(Serialize)]
    struct Frame<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        request_id: &'a str,
        #[serde(rename = "requestId")]
        request_id_camel: &'a str,
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<Value>,
    }
    let (result, error) = match &response.outcome {
        Some(proto::client_response::Outcome::ResultJson(json)) => {
            (Some(serde_json::from_str::<&RawValue>(json)?), None)
        }
        Some(proto::client_response::Outcome::Error(error)) => {
            let mut object = json!({"code": error.code, "message": error.message});
            if !error.data_json.is_empty() {
                object["data"] = serde_json::from_str(&error.data_json)?;
            }
            (None, Some(object))
        }
        None => (None, Some(json!({"code": -32603, "message": "no answer"}))),
    };
    serde_json::to_string(&Frame {
        kind: "client_response",
        request_id: &response.request_id,
        request_id_camel: &response.request_id,
        id: &response.id,
        result,
        error,
    })
}

/// `invoke_tool`, serialized straight from the invocation (the call's hot
/// path: no intermediate JSON tree). `_meta` and `client` are left out when
/// there is nothing to say.
fn invoke_frame(invoke: &proto::InvokeTool) -> Result<String, serde_json::Error> {
    #[derive(Serialize)]
    struct Frame<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(rename = "mcpSessionId")]
        session_id: &'a str,
        request_id: &'a str,
        #[serde(rename = "requestId")]
        request_id_camel: &'a str,
        tool_name: &'a str,
        #[serde(rename = "toolName")]
        tool_name_camel: &'a str,
        arguments: &'a RawValue,
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<Client<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        caller: Option<Caller<'a>>,
        #[serde(skip_serializing_if = "str::is_empty")]
        traceparent: &'a str,
        /// The MCP task the call runs as, when it runs as one.
        #[serde(skip_serializing_if = "str::is_empty")]
        task_id: &'a str,
    }
    // The core always sends a JSON object as arguments, and JSON as `_meta`.
    let arguments: &RawValue = serde_json::from_str(&invoke.arguments_json)?;
    let meta: Option<&RawValue> = if invoke.meta_json.is_empty() {
        None
    } else {
        Some(serde_json::from_str(&invoke.meta_json)?)
    };
    let client = Client::of(invoke.client.as_ref());
    serde_json::to_string(&Frame {
        kind: "invoke_tool",
        session_id: &invoke.session_id,
        request_id: &invoke.request_id,
        request_id_camel: &invoke.request_id,
        tool_name: &invoke.tool_name,
        tool_name_camel: &invoke.tool_name,
        arguments,
        meta,
        client,
        caller: Caller::of(invoke.caller.as_ref()),
        traceparent: &invoke.trace_parent,
        task_id: &invoke.task_id,
    })
}

pub(super) fn error_frame(message: &str, request_id: &str) -> Value {
    let mut frame = json!({"type": "error", "message": message});
    if !request_id.is_empty() {
        frame["request_id"] = json!(request_id);
        frame["requestId"] = json!(request_id);
    }
    frame
}

/// An app frame, before its type is known. Every field is kept raw and
/// typed one by one, so that a frame with one bad field still names the call
/// it answers (and that call fails at once instead of waiting for its
/// timeout). Both spellings of the request id are read.
#[derive(Deserialize)]
struct AppFrame<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_id: Option<&'a RawValue>,
    #[serde(rename = "requestId", borrow, default)]
    request_id_camel: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ok: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    progress: Option<&'a RawValue>,
    #[serde(borrow, default)]
    total: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    level: Option<&'a RawValue>,
    #[serde(borrow, default)]
    logger: Option<&'a RawValue>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// Types one raw field; the error says what the field must be.
fn typed<'a, T: Deserialize<'a>>(
    raw: Option<&'a RawValue>,
    name: &str,
    expected: &str,
) -> Result<Option<T>, String> {
    raw.map(|raw| {
        serde_json::from_str(raw.get())
            .map_err(|_| format!("\"{name}\" must be {expected}, not {}", truncate(raw.get())))
    })
    .transpose()
}

/// A raw JSON value, cut short for an error message; the whitespace raw
/// JSON may hold between tokens (CR, LF, tab) is escaped.
pub(super) fn truncate(raw: &str) -> Cow<'_, str> {
    openclaw_proxy_core::escape::truncated_to(raw, 64)
}

pub(super) fn pong() -> Inbound {
    Inbound::Message(proto::AppMessage {
        kind: Some(app_message::Kind::Pong(proto::Pong { nonce: 0 })),
    })
}

pub(super) enum Parsed {
    /// A message for the core.
    ToCore(Inbound),
    /// A JSON `ping`, which the edge answers itself.
    Ping,
}

/// One text frame from an app, parsed as the bridge parses it: the core
/// message it becomes (`None` for a JSON `ping`, which the edge answers
/// itself), or the message of the error frame the app gets. For the
/// property tests and fuzz targets.
#[doc(hidden)]
pub fn parse_app_frame(text: &str) -> Result<Option<Inbound>, String> {
    match parse_frame(text)? {
        Parsed::ToCore(inbound) => Ok(Some(inbound)),
        Parsed::Ping => Ok(None),
    }
}

pub(super) fn parse_frame(text: &str) -> Result<Parsed, String> {
    // serde would read a JSON array positionally into the struct's fields.
    if !text.trim_start().starts_with('{') {
        return Err(format!(
            "frame is not a JSON object of the bridge protocol: it starts with {:?}",
            truncate(text.trim_start())
        ));
    }
    let frame: AppFrame<'_> = match serde_json::from_str(text) {
        Ok(frame) => frame,
        Err(error) => {
            let problem = format!("frame is not a JSON object of the bridge protocol: {error}");
            // A result that names a call fails that call at once.
            return match super::salvage::naming_call(text, &problem) {
                Some(malformed) => Ok(Parsed::ToCore(malformed)),
                None => Err(problem),
            };
        }
    };
    let kind: Cow<'_, str> = typed(frame.kind, "type", "a string")?
        .ok_or_else(|| format!("frame has no \"type\": expected {APP_FRAME_TYPES}"))?;
    match kind.as_ref() {
        "invoke_result" => naming_call(&frame, "invoke_result", true, |frame, id| {
            result_of(frame, id).map(app_message::Kind::Result)
        }),
        "progress" => naming_call(&frame, "progress", false, |frame, id| {
            progress_of(frame, id).map(app_message::Kind::Progress)
        }),
        "mcp_result" => naming_call(&frame, "mcp_result", true, |frame, id| {
            mcp_result_of(frame, id).map(app_message::Kind::McpResult)
        }),
        "update_tools" => update_tools_of(&frame, text),
        "log" => log_of(&frame),
        "client_request" => client_request_of(&frame),
        "resource_updated" => {
            let uri: Cow<'_, str> = typed(frame.uri, "uri", "a string")?
                .ok_or_else(|| "resource_updated has no \"uri\"".to_owned())?;
            Ok(to_core(app_message::Kind::ResourceUpdated(
                proto::ResourceUpdated {
                    uri: uri.into_owned(),
                },
            )))
        }
        "pong" => Ok(Parsed::ToCore(pong())),
        "ping" => Ok(Parsed::Ping),
        other => Err(format!(
            "unknown frame type {:?}: expected {APP_FRAME_TYPES}",
            truncate(other)
        )),
    }
}

/// The request id a frame names, in either spelling.
fn request_id_of(frame: &AppFrame<'_>) -> Result<Option<String>, String> {
    let snake: Option<Cow<'_, str>> = typed(frame.request_id, "request_id", "a string")?;
    let camel: Option<Cow<'_, str>> = typed(frame.request_id_camel, "requestId", "a string")?;
    Ok(pick("request_id", snake, "requestId", camel)?.map(Cow::into_owned))
}

/// A frame that answers a call (`kind`, a `result` or a progress report):
/// the message `build` reads from it, or, when one of its fields is wrong,
/// the call it names fails at once as malformed.
fn naming_call<'a>(
    frame: &AppFrame<'a>,
    kind: &str,
    result: bool,
    build: impl FnOnce(&AppFrame<'a>, String) -> Result<app_message::Kind, String>,
) -> Result<Parsed, String> {
    let request_id = request_id_of(frame)?
        .ok_or_else(|| format!("{kind} has no \"request_id\" (or \"requestId\")"))?;
    Ok(Parsed::ToCore(match build(frame, request_id.clone()) {
        Ok(kind) => Inbound::Message(proto::AppMessage { kind: Some(kind) }),
        Err(problem) => Inbound::Malformed {
            request_id,
            result,
            problem,
        },
    }))
}

/// An `update_tools` frame: its tools and any declarations beside them.
fn update_tools_of(frame: &AppFrame<'_>, text: &str) -> Result<Parsed, String> {
    let tools = frame
        .tools
        .ok_or_else(|| "update_tools has no \"tools\" array".to_owned())?;
    // serde quotes a wrongly typed string in full: cut it.
    let cut = |error: serde_json::Error| {
        openclaw_proxy_core::escape::truncated_to(&error.to_string(), 256).into_owned()
    };
    let tools: Vec<ToolBody> = serde_json::from_str(tools.get())
        .map_err(|error| format!("update_tools \"tools\" is not a tool array: {}", cut(error)))?;
    let tools = tool_definitions(tools).map_err(|error| error.to_string())?;
    let declarations: DeclarationsBody = serde_json::from_str(text)
        .map_err(|error| format!("update_tools declarations are malformed: {}", cut(error)))?;
    let update = declarations
        .into_declarations()
        .map_err(|error| error.to_string())?
        .into_update(tools);
    Ok(to_core(app_message::Kind::UpdateTools(update)))
}

/// A `log` frame: a record of the call it names.
fn log_of(frame: &AppFrame<'_>) -> Result<Parsed, String> {
    let request_id = request_id_of(frame)?
        .ok_or_else(|| "log has no \"request_id\" (or \"requestId\")".to_owned())?;
    let level: Option<Cow<'_, str>> = typed(frame.level, "level", "a string")?;
    let logger: Option<Cow<'_, str>> = typed(frame.logger, "logger", "a string")?;
    Ok(to_core(app_message::Kind::Log(proto::Log {
        request_id,
        level: level
            .ok_or_else(|| "log has no \"level\"".to_owned())?
            .into_owned(),
        logger: logger.map(Cow::into_owned).unwrap_or_default(),
        data_json: frame
            .data
            .map(|raw| raw.get().to_owned())
            .unwrap_or_default(),
    })))
}

/// A `client_request` frame: a request of the app to the client of the
/// call it names.
fn client_request_of(frame: &AppFrame<'_>) -> Result<Parsed, String> {
    let request_id = request_id_of(frame)?
        .ok_or_else(|| "client_request has no \"request_id\" (or \"requestId\")".to_owned())?;
    let id: Cow<'_, str> = typed(frame.id, "id", "a string")?.ok_or_else(|| {
        "client_request has no \"id\": give each request an id of its own".to_owned()
    })?;
    let method: Cow<'_, str> = typed(frame.method, "method", "a string")?
        .ok_or_else(|| "client_request has no \"method\"".to_owned())?;
    let params_json = match frame.params {
        None => "{}".to_owned(),
        Some(params) if params.get().starts_with('{') => params.get().to_owned(),
        Some(params) => {
            return Err(format!(
                "\"params\" must be a JSON object, not {}",
                truncate(params.get())
            ));
        }
    };
    Ok(to_core(app_message::Kind::ClientRequest(
        proto::ClientRequest {
            request_id,
            id: id.into_owned(),
            method: method.into_owned(),
            params_json,
        },
    )))
}

/// A well-formed message for the core.
fn to_core(kind: app_message::Kind) -> Parsed {
    Parsed::ToCore(Inbound::Message(proto::AppMessage { kind: Some(kind) }))
}

/// The answer an `mcp_result` frame carries: `result` (a JSON object, passed
/// on as written) or `error` (`{"code", "message", "data"}`), exactly one.
fn mcp_result_of(frame: &AppFrame<'_>, request_id: String) -> Result<proto::McpResult, String> {
    #[derive(Deserialize)]
    struct ErrorObject<'a> {
        code: i32,
        #[serde(borrow)]
        message: Cow<'a, str>,
        #[serde(borrow, default)]
        data: Option<&'a RawValue>,
    }
    let outcome = match (frame.result, frame.error) {
        (Some(result), None) => {
            if !result.get().starts_with('{') {
                return Err(format!(
                    "\"result\" must be a JSON object (the MCP result), not {}",
                    truncate(result.get())
                ));
            }
            proto::mcp_result::Outcome::ResultJson(result.get().to_owned())
        }
        (None, Some(error)) => {
            let error: ErrorObject<'_> = serde_json::from_str(error.get()).map_err(|_| {
                format!(
                    "\"error\" must be a JSON-RPC error object {{\"code\": integer, \"message\": string, \"data\"?}}, not {}",
                    truncate(error.get())
                )
            })?;
            proto::mcp_result::Outcome::Error(proto::McpError {
                code: error.code,
                message: error.message.into_owned(),
                data_json: error
                    .data
                    .map(|raw| raw.get().to_owned())
                    .unwrap_or_default(),
            })
        }
        (Some(_), Some(_)) => {
            return Err("mcp_result carries both \"result\" and \"error\": send one".into());
        }
        (None, None) => return Err("mcp_result carries neither \"result\" nor \"error\"".into()),
    };
    Ok(proto::McpResult {
        request_id,
        outcome: Some(outcome),
    })
}

/// The result an `invoke_result` frame carries. When `ok` is missing it is
/// taken as "no `error` given"; a non-string `error` is passed on as its JSON.
fn result_of(frame: &AppFrame<'_>, request_id: String) -> Result<proto::ToolResult, String> {
    let error = match frame.error {
        None => None,
        Some(raw) => match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
            Ok(text) => Some(text.into_owned()),
            Err(_) => Some(raw.get().to_owned()),
        },
    };
    let ok = typed(frame.ok, "ok", "a boolean")?.unwrap_or(error.is_none());
    Ok(proto::ToolResult {
        request_id,
        ok,
        content_json: frame
            .content
            .map(|raw| raw.get().to_owned())
            .unwrap_or_default(),
        error: error.unwrap_or_default(),
    })
}

/// The report a `progress` frame carries.
fn progress_of(frame: &AppFrame<'_>, request_id: String) -> Result<proto::ToolProgress, String> {
    let progress = typed(frame.progress, "progress", "a number")?
        .ok_or_else(|| "progress has no numeric \"progress\"".to_owned())?;
    let message: Option<Cow<'_, str>> = typed(frame.message, "message", "a string")?;
    Ok(proto::ToolProgress {
        request_id,
        progress,
        total: typed(frame.total, "total", "a number")?,
        message: message.map(Cow::into_owned).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The core message a frame becomes.
    fn parsed(text: &str) -> proto::AppMessage {
        match parse_frame(text) {
            Ok(Parsed::ToCore(Inbound::Message(message))) => message,
            Ok(_) => panic!("not a message for the core: {text}"),
            Err(error) => panic!("refused: {error}"),
        }
    }

    #[test]
    fn a_client_request_is_read_in_either_spelling() {
        let expected = app_message::Kind::ClientRequest(proto::ClientRequest {
            request_id: "s:7".into(),
            id: "ask-1".into(),
            method: "elicitation/create".into(),
            params_json: r#"{"mode":"url","url":"https://example.com/a"}"#.into(),
        });
        for spelling in ["request_id", "requestId"] {
            let text = format!(
                r#"{{"type":"client_request","{spelling}":"s:7","id":"ask-1","method":"elicitation/create","params":{{"mode":"url","url":"https://example.com/a"}}}}"#
            );
            assert_eq!(parsed(&text).kind, Some(expected.clone()), "{spelling}");
        }
        // Both spellings naming different calls: refused, naming both.
        let both = r#"{"type":"client_request","request_id":"s:7","requestId":"s:8","id":"a","method":"roots/list"}"#;
        let Err(error) = parse_frame(both) else {
            panic!("two request ids accepted");
        };
        assert!(
            error.contains("request_id") && error.contains("requestId"),
            "{error}"
        );
    }

    #[test]
    fn a_client_response_carries_both_spellings() {
        let response = proto::ClientResponse {
            request_id: "s:7".into(),
            id: "ask-1".into(),
            outcome: Some(proto::client_response::Outcome::ResultJson(
                r#"{"action":"accept","n":0.1000000000000000055511151231257827}"#.into(),
            )),
        };
        let text = client_response_frame(&response).expect("rendered");
        let frame: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(frame["type"], "client_response", "{text}");
        assert_eq!(frame["request_id"], "s:7", "{text}");
        assert_eq!(frame["requestId"], "s:7", "{text}");
        assert_eq!(frame["id"], "ask-1", "{text}");
        // The client's result as it sent it.
        assert!(
            text.contains(
                r#""result":{"action":"accept","n":0.1000000000000000055511151231257827}"#
            ),
            "{text}"
        );
    }
}
