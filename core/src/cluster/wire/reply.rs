//! What comes back on a call's reply subject, from the node that holds the
//! session's bridge to the node that received the call: progress reports,
//! log records, the app's answer (a tool's outcome, or an MCP result or
//! error as the app wrote it) or why there is none. Each kind is written
//! by the holding node and read by the calling node, either of which may
//! run the previous version.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::outcome::{BridgeEnd, InvokeError, McpFailure, McpReply, ToolOutcome};

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
