//! What nodes say to each other: the messages of one call between the node that received it and the node that
//! holds the session's bridge, and the changes of a session ([`Change`]).
//! Session records in the KV bucket are in `stored.rs`.
//!
//! JSON, versioned, so a rolling upgrade can read what an older node wrote.
//!
//! A call is a tool call ([`TOOL`] names the tool; its answer is of kind
//! [`KIND_ANSWER`]) or another MCP request the app answers ([`METHOD`] names
//! the method; its answer is of kind [`KIND_MCP_RESULT`] or
//! [`KIND_MCP_ERROR`]). A tool call's messages are those of nodes that
//! forwarded only tool calls, so either side may run the previous version.
//!
//! The app's requests to a caller on another node, and the answers and
//! retries that come back for them, are in `asks.rs`.

pub mod asks;

use std::time::Duration;

use async_nats::{HeaderMap, HeaderValue};
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::hub::SessionEvent;
use crate::outcome::{BridgeEnd, InvokeError, McpFailure, McpReply, ToolOutcome};
use crate::proto;

/// Header carrying the wire version of a message between nodes: the
/// version of the headers and bodies of this file. Absent from nodes of
/// versions before it existed, which wrote version 1.
pub const WIRE: &str = "Ocp-Wire";
/// The wire version this node writes on every message but a gated call.
/// Raise it when a message changes in a way an older node would misread; a
/// change an older node can ignore (a new optional header) keeps it.
pub const WIRE_VERSION: u32 = 2;
/// The wire version of a call of a tool that needs the user's
/// confirmation: its holding node asks (`hub/confirm.rs`), where a node of
/// a release before would run it unasked, since its caller's node used to
/// ask. Such a node refuses the version instead; a holding node that reads
/// an older version knows the calling node asked already.
pub const GATED_CALL_VERSION: u32 = 3;
/// The newest wire version this node reads.
pub const READS_UP_TO: u32 = GATED_CALL_VERSION;

/// The wire version of a message: 1 without the header (a node before it
/// existed), 0 for one that is not a number ([`readable`] refuses it).
pub fn version(headers: Option<&HeaderMap>) -> u32 {
    match headers.and_then(|headers| headers.get(WIRE)) {
        None => 1,
        Some(version) => version.as_str().trim().parse().unwrap_or(0),
    }
}

/// Fails a message whose wire version this node cannot read (a newer one,
/// or no number), naming both versions; reads one without the header as
/// version 1. A node refuses such a call rather than misread it.
pub fn readable(headers: Option<&HeaderMap>) -> Result<(), InvokeError> {
    let Some(version) = headers.and_then(|headers| headers.get(WIRE)) else {
        return Ok(());
    };
    match version.as_str().trim().parse::<u32>() {
        Ok(version) if version <= READS_UP_TO => Ok(()),
        _ => Err(InvokeError::Remote(format!(
            "Another proxy node sent a message of this call in wire version {}, and this node reads versions up to {READS_UP_TO}: the cluster is part way through an upgrade; finish it, node by node (docs/cluster.md, \"Rolling upgrades\").",
            crate::escape::quoted(version.as_str())
        ))),
    }
}

/// Header naming the kind of a message on a call's reply subject.
pub const KIND: &str = "Ocp-Kind";
/// Header carrying the tool of a forwarded call.
pub const TOOL: &str = "Ocp-Tool";
/// Header carrying the MCP method of a forwarded request (instead of
/// [`TOOL`]).
pub const METHOD: &str = "Ocp-Method";
/// Header carrying what a forwarded request names (a URI, a prompt), as a
/// JSON string; absent when it names nothing.
pub const TARGET: &str = "Ocp-Target";
/// Header carrying how long the caller waits, in milliseconds.
pub const TIMEOUT_MS: &str = "Ocp-Timeout-Ms";
/// Header carrying the MCP request's `params._meta` (JSON text).
pub const META: &str = "Ocp-Meta";
/// Header carrying the caller's [`Client`] (JSON text).
pub const CLIENT: &str = "Ocp-Client";
/// Header carrying the verified [`Caller`] (JSON text); absent when no
/// credential was needed, and from nodes of versions before it existed.
pub const CALLER: &str = "Ocp-Caller";
/// Header carrying the W3C `traceparent` of the calling node's span, so the
/// holding node's spans (and the app's) join the caller's trace.
pub const TRACE_PARENT: &str = "traceparent";
/// Header carrying the least severe log record the caller wants (an MCP
/// level name); absent for none.
pub const LOG_LEVEL: &str = "Ocp-Log-Level";

/// Header naming the node a session's change comes from (its id, as in
/// KV), so that this node skips its own: it told its watchers already.
pub const NODE: &str = "Ocp-Node";

/// [`proto::CallerInfo`] between nodes.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Client {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub protocol_version: String,
}

impl Client {
    /// The wire form of a caller.
    pub fn of(info: &proto::CallerInfo) -> Self {
        Self {
            name: info.name.clone(),
            version: info.version.clone(),
            protocol_version: info.protocol_version.clone(),
        }
    }

    /// The caller it describes.
    pub fn into_proto(self) -> proto::CallerInfo {
        proto::CallerInfo {
            name: self.name,
            version: self.version,
            protocol_version: self.protocol_version,
        }
    }
}

/// [`crate::Caller`] between nodes: the fields of its gRPC form.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Caller {
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub issuer: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl Caller {
    /// The wire form of a caller.
    pub fn of(caller: &crate::Caller) -> Self {
        let proto::CallerIdentity {
            kind,
            issuer,
            subject,
            client_id,
            scopes,
        } = caller.to_proto();
        Self {
            kind,
            issuer,
            subject,
            client_id,
            scopes,
        }
    }

    /// The caller it describes.
    pub fn into_caller(self) -> crate::Caller {
        crate::Caller::from_proto(proto::CallerIdentity {
            kind: self.kind,
            issuer: self.issuer,
            subject: self.subject,
            client_id: self.client_id,
            scopes: self.scopes,
        })
    }
}

/// Reply kind: a progress report (body [`Progress`]).
pub const KIND_PROGRESS: &str = "progress";
/// Reply kind: a log record of the app (body [`LogRecord`]).
pub const KIND_LOG: &str = "log";
/// Reply kind: the holder is still working on the call (no body).
pub const KIND_ALIVE: &str = "alive";
/// Reply kind: the app's answer (body [`Answer`]).
pub const KIND_ANSWER: &str = "answer";
/// Reply kind: no answer from the app (body [`Failure`]).
pub const KIND_FAILURE: &str = "failure";
/// Reply kind: the app's result to an MCP request (body: the result's JSON
/// text exactly as the app sent it).
pub const KIND_MCP_RESULT: &str = "mcp_result";
/// Reply kind: the app's JSON-RPC error to an MCP request (body
/// [`McpError`]).
pub const KIND_MCP_ERROR: &str = "mcp_error";

/// What a forwarded call asks for, besides its body (the tool's arguments
/// or the request's params), as the calling node names it in headers.
#[derive(Clone, Copy, Debug)]
pub enum Asks<'a> {
    /// A tool call.
    Tool(&'a str),
    /// Another MCP request.
    Request { method: &'a str, target: &'a str },
}

impl Asks<'_> {
    /// Names it in `headers`; fails for a method a header cannot carry
    /// (one with a line break, which no MCP method has).
    pub fn write(self, headers: &mut HeaderMap) -> Result<(), InvokeError> {
        match self {
            Self::Tool(tool) => headers.insert(TOOL, tool),
            Self::Request { method, target } => {
                let value = method.parse::<HeaderValue>().map_err(|_| {
                    InvokeError::Remote(format!(
                        "The MCP method {} cannot be sent to another proxy node.",
                        crate::escape::quoted(method)
                    ))
                })?;
                headers.insert(METHOD, value);
                if !target.is_empty() {
                    // JSON escapes line breaks, which a header cannot hold.
                    let json = serde_json::to_string(target).unwrap_or_default();
                    headers.insert(TARGET, json.as_str());
                }
            }
        }
        Ok(())
    }
}

/// What a forwarded call asks for, as the holding node reads its headers.
#[derive(Debug, PartialEq, Eq)]
pub enum Forwarded {
    /// A tool call (also every call of a node that forwarded only those).
    Tool(String),
    /// Another MCP request.
    Request { method: String, target: String },
}

impl Forwarded {
    /// What `headers` ask for: a request when they name a method, a tool
    /// call otherwise.
    pub fn read(headers: Option<&HeaderMap>) -> Self {
        let header = |name: &str| {
            headers
                .and_then(|headers| headers.get(name))
                .map(HeaderValue::as_str)
        };
        match header(METHOD) {
            Some(method) => Self::Request {
                method: method.to_owned(),
                target: header(TARGET)
                    .and_then(|json| serde_json::from_str(json).ok())
                    .unwrap_or_default(),
            },
            None => Self::Tool(header(TOOL).unwrap_or_default().to_owned()),
        }
    }
}

/// An app log record relayed to the calling node: level, logger and data
/// (JSON text, as the app wrote it).
#[derive(Debug, Serialize, Deserialize)]
pub struct LogRecord {
    pub level: String,
    #[serde(default)]
    pub logger: String,
    #[serde(default)]
    pub data_json: String,
}

/// A progress report relayed to the calling node.
#[derive(Debug, Serialize, Deserialize)]
pub struct Progress {
    pub progress: f64,
    #[serde(default)]
    pub total: Option<f64>,
    #[serde(default)]
    pub message: String,
}

/// The app's answer relayed to the calling node.
#[derive(Debug, Serialize)]
pub struct Answer<'a> {
    pub ok: bool,
    pub content: &'a RawValue,
    pub error: &'a str,
}

/// [`Answer`] as the calling node reads it.
#[derive(Debug, Deserialize)]
pub struct ReadAnswer {
    pub ok: bool,
    #[serde(default)]
    pub content: Option<Box<RawValue>>,
    #[serde(default)]
    pub error: String,
}

impl ReadAnswer {
    /// The outcome it carries.
    pub fn into_outcome(self) -> Result<ToolOutcome, serde_json::Error> {
        Ok(ToolOutcome {
            ok: self.ok,
            content: self.content.unwrap_or_default(),
            error: self.error,
        })
    }
}

/// An app's JSON-RPC error relayed to the calling node.
#[derive(Debug, Serialize)]
pub struct McpError<'a> {
    pub code: i32,
    pub message: &'a str,
    /// Exactly as the app wrote it; left out when it sent none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<&'a RawValue>,
}

/// [`McpError`] as the calling node reads it.
#[derive(Debug, Deserialize)]
pub struct ReadMcpError {
    pub code: i32,
    #[serde(default)]
    pub message: String,
    /// `Some` whenever the field is there, `null` included.
    #[serde(default, deserialize_with = "present")]
    pub data: Option<Box<RawValue>>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(Some)
}

/// The kind and body of the message that carries an MCP reply back: a
/// result as its own text (moved, not copied), an error as [`McpError`].
pub fn mcp_reply_message(reply: McpReply) -> (&'static str, Bytes) {
    match reply {
        McpReply::Result(result) => {
            let text: Box<str> = result.into();
            (KIND_MCP_RESULT, Bytes::from(text.into_boxed_bytes()))
        }
        McpReply::Error(failure) => {
            let body = serde_json::to_vec(&McpError {
                code: failure.code,
                message: &failure.message,
                data: failure.data.as_deref(),
            })
            .unwrap_or_default();
            (KIND_MCP_ERROR, Bytes::from(body))
        }
    }
}

/// The MCP reply a message of kind [`KIND_MCP_RESULT`] or
/// [`KIND_MCP_ERROR`] carries; the error says what is wrong with it.
pub fn read_mcp_reply(kind: &str, payload: Bytes) -> Result<McpReply, String> {
    if kind == KIND_MCP_ERROR {
        let error: ReadMcpError =
            serde_json::from_slice(&payload).map_err(|error| error.to_string())?;
        return Ok(McpReply::Error(McpFailure {
            code: error.code,
            message: error.message,
            data: error.data,
        }));
    }
    let text = String::from_utf8(Vec::from(payload)).map_err(|error| error.to_string())?;
    McpReply::result(text)
}

/// The version of [`Change`] this build writes and reads.
pub const CHANGE_VERSION: u32 = 1;

/// A session's change, from the node where it happened to the nodes that
/// watch the session (`{prefix}.changes.{session_id}`).
#[derive(Debug, Serialize)]
pub struct Change<'a> {
    /// Format version ([`CHANGE_VERSION`]); a reader ignores a change of a
    /// version it does not know.
    pub v: u32,
    /// What changed: `resource_updated`, `tools_changed`,
    /// `resources_changed` or `prompts_changed`; a reader ignores a name it
    /// does not know (one a later version added).
    pub change: &'a str,
    /// The resource that changed, for `resource_updated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<&'a str>,
}

/// [`Change`] as the receiving node reads it.
#[derive(Debug, Deserialize)]
pub struct ReadChange {
    pub v: u32,
    pub change: String,
    #[serde(default)]
    pub uri: Option<String>,
}

/// The body of the message that tells other nodes of a change.
pub fn change_message(change: &SessionEvent) -> Bytes {
    let (name, uri) = match change {
        SessionEvent::ResourceUpdated(uri) => ("resource_updated", Some(&**uri)),
        SessionEvent::ToolsChanged => ("tools_changed", None),
        SessionEvent::ResourcesChanged => ("resources_changed", None),
        SessionEvent::PromptsChanged => ("prompts_changed", None),
    };
    let body = serde_json::to_vec(&Change {
        v: CHANGE_VERSION,
        change: name,
        uri,
    })
    .unwrap_or_default();
    Bytes::from(body)
}

/// The change a message of another node carries; `Ok(None)` for one this
/// version does not know (of a later version), the error says what is
/// wrong with the message.
pub fn read_change(payload: &[u8]) -> Result<Option<SessionEvent>, String> {
    let read: ReadChange = serde_json::from_slice(payload).map_err(|error| error.to_string())?;
    if read.v != CHANGE_VERSION {
        return Ok(None);
    }
    Ok(match (read.change.as_str(), read.uri) {
        ("resource_updated", Some(uri)) => Some(SessionEvent::ResourceUpdated(uri.into())),
        ("resource_updated", None) => return Err("resource_updated names no uri".into()),
        ("tools_changed", _) => Some(SessionEvent::ToolsChanged),
        ("resources_changed", _) => Some(SessionEvent::ResourcesChanged),
        ("prompts_changed", _) => Some(SessionEvent::PromptsChanged),
        _ => None,
    })
}

/// Why the holding node has no answer, relayed so the caller sees the same
/// sentence it would have seen on the holding node.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "failure", rename_all = "snake_case")]
pub enum Failure {
    UnknownSession,
    NotConnected,
    Timeout {
        seconds: f64,
    },
    BridgeEnded {
        end: String,
    },
    Malformed {
        tool: String,
        what: String,
        problem: String,
    },
    Other {
        message: String,
    },
}

impl Failure {
    /// The failure of an invocation on the holding node.
    pub fn of(error: &InvokeError) -> Self {
        match error {
            InvokeError::UnknownSession(_) => Self::UnknownSession,
            InvokeError::NotConnected => Self::NotConnected,
            InvokeError::Timeout(limit) => Self::Timeout {
                seconds: limit.as_secs_f64(),
            },
            InvokeError::BridgeEnded(end) => Self::BridgeEnded {
                end: end_name(*end),
            },
            InvokeError::MalformedAnswer {
                tool,
                what,
                problem,
            } => Self::Malformed {
                tool: tool.clone(),
                what: (*what).into(),
                problem: problem.clone(),
            },
            other => Self::Other {
                message: other.to_string(),
            },
        }
    }

    /// The error the calling node reports for it.
    pub fn into_error(self, session_id: &str) -> InvokeError {
        match self {
            Self::UnknownSession => InvokeError::UnknownSession(session_id.to_owned()),
            Self::NotConnected => InvokeError::NotConnected,
            Self::Timeout { seconds } => {
                InvokeError::Timeout(Duration::try_from_secs_f64(seconds).unwrap_or_default())
            }
            Self::BridgeEnded { end } => InvokeError::BridgeEnded(end_of(&end)),
            Self::Malformed {
                tool,
                what,
                problem,
            } => InvokeError::MalformedAnswer {
                tool,
                what: if what == "result" {
                    "result"
                } else {
                    "progress report"
                },
                problem,
            },
            Self::Other { message } => InvokeError::Remote(message),
        }
    }
}

/// An end's name on the wire; a node of the version before `too_large`
/// reads it as `disconnected`.
fn end_name(end: BridgeEnd) -> String {
    match end {
        BridgeEnd::Replaced => "replaced",
        BridgeEnd::SessionDeleted => "session_deleted",
        BridgeEnd::Disconnected => "disconnected",
        BridgeEnd::Unresponsive => "unresponsive",
        BridgeEnd::Stalled => "stalled",
        BridgeEnd::ShuttingDown => "shutting_down",
        BridgeEnd::TooLarge { limit } => return format!("too_large:{limit}"),
    }
    .to_owned()
}

fn end_of(name: &str) -> BridgeEnd {
    match name {
        "replaced" => BridgeEnd::Replaced,
        "session_deleted" => BridgeEnd::SessionDeleted,
        "unresponsive" => BridgeEnd::Unresponsive,
        "stalled" => BridgeEnd::Stalled,
        "shutting_down" => BridgeEnd::ShuttingDown,
        other => match other
            .strip_prefix("too_large:")
            .and_then(|limit| limit.parse().ok())
        {
            Some(limit) => BridgeEnd::TooLarge { limit },
            None => BridgeEnd::Disconnected,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bridge_end_crosses_nodes_with_its_cause() {
        for end in [
            BridgeEnd::Replaced,
            BridgeEnd::SessionDeleted,
            BridgeEnd::Disconnected,
            BridgeEnd::Unresponsive,
            BridgeEnd::Stalled,
            BridgeEnd::ShuttingDown,
            BridgeEnd::TooLarge { limit: 4_194_304 },
        ] {
            assert_eq!(end_of(&end_name(end)), end);
        }
        // A name this version does not know reads as a disconnect.
        assert_eq!(end_of("too_large:lots"), BridgeEnd::Disconnected);
        assert_eq!(end_of("from_the_future"), BridgeEnd::Disconnected);
    }

    fn headers_of(asks: Asks<'_>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        asks.write(&mut headers).expect("headers");
        headers
    }

    #[test]
    fn a_request_crosses_with_its_method_and_target() {
        let read =
            |method, target| Forwarded::read(Some(&headers_of(Asks::Request { method, target })));
        assert_eq!(
            read("resources/read", "notes://a b\r\n\"c\"/ü"),
            Forwarded::Request {
                method: "resources/read".into(),
                target: "notes://a b\r\n\"c\"/ü".into(),
            }
        );
        // A target with line breaks still makes valid header text.
        let headers = headers_of(Asks::Request {
            method: "prompts/get",
            target: "two\nlines",
        });
        let raw = headers.get(TARGET).expect("target").as_str();
        assert!(!raw.contains('\n'), "{raw}");
        assert_eq!(
            read("completion/complete", ""),
            Forwarded::Request {
                method: "completion/complete".into(),
                target: String::new(),
            }
        );
        assert!(
            headers_of(Asks::Request {
                method: "completion/complete",
                target: ""
            })
            .get(TARGET)
            .is_none()
        );
        // A method no header can carry fails the call instead of the node.
        let mut headers = HeaderMap::new();
        let error = Asks::Request {
            method: "bad\r\nOcp-Tool: x",
            target: "",
        }
        .write(&mut headers)
        .expect_err("refused");
        assert!(error.to_string().contains("cannot be sent"), "{error}");
    }

    #[test]
    fn a_wire_version_this_node_cannot_read_is_refused_naming_both() {
        let with = |version: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(WIRE, version);
            headers
        };
        assert!(readable(None).is_ok(), "a node before the header");
        assert!(readable(Some(&HeaderMap::new())).is_ok());
        assert!(readable(Some(&with("1"))).is_ok());
        assert!(readable(Some(&with(&WIRE_VERSION.to_string()))).is_ok());
        assert!(readable(Some(&with(&GATED_CALL_VERSION.to_string()))).is_ok());
        for unreadable in ["4", "99", "x", "-1"] {
            let error = readable(Some(&with(unreadable)))
                .expect_err(unreadable)
                .to_string();
            assert!(
                error.contains(&format!("\"{unreadable}\""))
                    && error.contains(&format!("up to {READS_UP_TO}")),
                "{error}"
            );
        }
    }

    #[test]
    fn a_tool_call_reads_as_before_requests_crossed_nodes() {
        let headers = headers_of(Asks::Tool("echo_text"));
        assert!(headers.get(METHOD).is_none());
        assert_eq!(
            Forwarded::read(Some(&headers)),
            Forwarded::Tool("echo_text".into())
        );
        // What a node of the previous version sends: the tool header only.
        let mut old = HeaderMap::new();
        old.insert(TOOL, "echo_text");
        old.insert(TIMEOUT_MS, "60000");
        assert_eq!(
            Forwarded::read(Some(&old)),
            Forwarded::Tool("echo_text".into())
        );
        assert_eq!(Forwarded::read(None), Forwarded::Tool(String::new()));
    }

    #[test]
    fn a_tool_answer_is_the_previous_versions_json() {
        let content = RawValue::from_string(r#"{"n":12345678901234567890}"#.into()).expect("raw");
        let body = serde_json::to_string(&Answer {
            ok: true,
            content: &content,
            error: "",
        })
        .expect("encode");
        assert_eq!(
            body,
            r#"{"ok":true,"content":{"n":12345678901234567890},"error":""}"#
        );
        let back = serde_json::from_str::<ReadAnswer>(&body)
            .expect("decode")
            .into_outcome()
            .expect("outcome");
        assert_eq!(back.content.get(), content.get());
    }

    #[test]
    fn an_mcp_result_crosses_as_its_exact_text() {
        let text = r#"{"contents":[{"uri":"n://1","text":"x"}],"big":12345678901234567890,"huge":1e400,"exact":0.10000000000000000555,"u":"\u00e9"}"#;
        let reply = McpReply::result(text.to_owned()).expect("result");
        let (kind, body) = mcp_reply_message(reply);
        assert_eq!(kind, KIND_MCP_RESULT);
        assert_eq!(&body[..], text.as_bytes());
        match read_mcp_reply(kind, body).expect("read") {
            McpReply::Result(raw) => assert_eq!(raw.get(), text),
            other => panic!("expected a result, got {other:?}"),
        }
        // Not an object, or not JSON: unreadable, never passed on.
        assert!(read_mcp_reply(KIND_MCP_RESULT, Bytes::from_static(b"[1]")).is_err());
        assert!(read_mcp_reply(KIND_MCP_RESULT, Bytes::from_static(b"{\"a\":")).is_err());
        assert!(read_mcp_reply(KIND_MCP_RESULT, Bytes::from_static(b"\xff")).is_err());
    }

    #[test]
    fn an_mcp_error_crosses_with_its_data_exactly() {
        let cases = [
            (
                r#"{"uri":"notes://missing","n":1e400,"id":12345678901234567890}"#,
                Some(r#"{"uri":"notes://missing","n":1e400,"id":12345678901234567890}"#),
            ),
            ("null", Some("null")),
            ("", None),
        ];
        for (data_json, data) in cases {
            let reply = McpReply::error(-32002, "Resource not found".into(), data_json.into())
                .expect("error");
            let (kind, body) = mcp_reply_message(reply);
            assert_eq!(kind, KIND_MCP_ERROR);
            match read_mcp_reply(kind, body).expect("read") {
                McpReply::Error(failure) => {
                    assert_eq!(failure.code, -32002);
                    assert_eq!(failure.message, "Resource not found");
                    assert_eq!(failure.data.as_deref().map(RawValue::get), data);
                }
                other => panic!("expected an error, got {other:?}"),
            }
        }
        assert!(
            read_mcp_reply(KIND_MCP_ERROR, Bytes::from_static(b"{\"message\":\"x\"}")).is_err()
        );
    }

    #[test]
    fn a_change_crosses_as_versioned_json_and_unknown_ones_are_ignored() {
        let changes = [
            SessionEvent::ResourceUpdated("notes://a \"b\"\n/ü".into()),
            SessionEvent::ToolsChanged,
            SessionEvent::ResourcesChanged,
            SessionEvent::PromptsChanged,
        ];
        for change in changes {
            let body = change_message(&change);
            assert_eq!(read_change(&body), Ok(Some(change)));
        }
        assert_eq!(
            &change_message(&SessionEvent::ResourceUpdated("n://1".into()))[..],
            br#"{"v":1,"change":"resource_updated","uri":"n://1"}"#
        );
        assert_eq!(
            &change_message(&SessionEvent::PromptsChanged)[..],
            br#"{"v":1,"change":"prompts_changed"}"#
        );
        // What a later version may add is passed over, not refused.
        assert_eq!(
            read_change(br#"{"v":1,"change":"roots_changed","extra":true}"#),
            Ok(None)
        );
        assert_eq!(
            read_change(br#"{"v":2,"change":"tools_changed"}"#),
            Ok(None)
        );
        // A malformed message is an error, never a change.
        assert!(read_change(br#"{"v":1,"change":"resource_updated"}"#).is_err());
        assert!(read_change(b"{\"v\":").is_err());
        assert!(read_change(b"\xff").is_err());
    }

    #[test]
    fn failures_keep_their_sentence_across_nodes() {
        let errors = [
            InvokeError::NotConnected,
            InvokeError::Timeout(Duration::from_secs(120)),
            InvokeError::BridgeEnded(BridgeEnd::Replaced),
            InvokeError::BridgeEnded(BridgeEnd::SessionDeleted),
            InvokeError::MalformedAnswer {
                tool: "echo".into(),
                what: "result",
                problem: "\"ok\" must be a boolean".into(),
            },
        ];
        for error in errors {
            let wire = serde_json::to_string(&Failure::of(&error)).expect("encode");
            let back: Failure = serde_json::from_str(&wire).expect("decode");
            assert_eq!(back.into_error("s").to_string(), error.to_string());
        }
    }
}
