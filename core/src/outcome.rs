//! How things end: a tool call's answer, the ways a call fails without one,
//! and the reasons a bridge ends.
//!
//! These are plain values shared by every other module of the core (and by
//! every transport), so they sit at the bottom of the dependency order: this
//! module imports only the sentences of [`crate::error`].

use std::borrow::Cow;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::UnknownSession;

/// The app's answer to a tool call.
///
/// The content is kept as the exact JSON text the app sent (checked to be
/// JSON, never rebuilt as a tree), so every number reaches the MCP client
/// unchanged: integers beyond 64 bits, `1e400`, every digit of a double.
#[derive(Clone, Debug)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The tool's output as the app wrote it; `null` when it sent none.
    pub content: Box<RawValue>,
    /// The app's error text when `ok` is false.
    pub error: String,
}

impl ToolOutcome {
    /// `content_json` as the app sent it, checked to be one JSON value; empty
    /// text is `null`.
    pub fn from_app(
        ok: bool,
        content_json: String,
        error: String,
    ) -> Result<Self, serde_json::Error> {
        let content = if content_json.trim().is_empty() {
            // `null`.
            Box::<RawValue>::default()
        } else {
            RawValue::from_string(content_json)?
        };
        Ok(Self { ok, content, error })
    }

    /// The content as a JSON tree, for callers that need one. A number no
    /// tree can hold (beyond 64 bits, `1e400`) makes this the content's text
    /// as a JSON string instead; the exact text is always [`Self::content`].
    pub fn content_value(&self) -> Value {
        serde_json::from_str(self.content.get())
            .unwrap_or_else(|_| Value::String(self.content.get().to_owned()))
    }
}

/// The app's answer to an MCP request other than `tools/call`
/// (`resources/read`, `prompts/get`, `completion/complete`, ...).
///
/// A result is kept as the exact JSON text the app sent (checked to be one
/// JSON object), as for tool results.
#[derive(Debug)]
pub enum McpReply {
    /// The method's result object, exactly as the app wrote it.
    Result(Box<RawValue>),
    /// The JSON-RPC error the client receives.
    Error(McpFailure),
}

/// A JSON-RPC error an app answered an MCP request with.
#[derive(Debug)]
pub struct McpFailure {
    /// The JSON-RPC error code (for example -32002, resource not found).
    pub code: i32,
    /// What went wrong, as the app worded it.
    pub message: String,
    /// Extra data, exactly as the app wrote it.
    pub data: Option<Box<RawValue>>,
}

impl McpReply {
    /// A result from the app's `result_json`, which must be one JSON object.
    pub fn result(result_json: String) -> Result<Self, String> {
        if !result_json.trim_start().starts_with('{') {
            return Err("result_json must be a JSON object (the MCP result)".into());
        }
        RawValue::from_string(result_json)
            .map(Self::Result)
            .map_err(|error| format!("result_json is not valid JSON: {error}"))
    }

    /// An error from the app's parts; `data_json` is empty for no data.
    pub fn error(code: i32, message: String, data_json: String) -> Result<Self, String> {
        let data = if data_json.trim().is_empty() {
            None
        } else {
            Some(
                RawValue::from_string(data_json)
                    .map_err(|error| format!("error.data_json is not valid JSON: {error}"))?,
            )
        };
        Ok(Self::Error(McpFailure {
            code,
            message,
            data,
        }))
    }
}

/// What an app answered: a tool's outcome or an MCP request's reply.
#[derive(Debug)]
pub enum Reply {
    /// The answer to an `InvokeTool`.
    Tool(ToolOutcome),
    /// The answer to an `McpRequest`.
    Mcp(McpReply),
}

/// Why a tool call produced no answer from the app.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("{}", UnknownSession(.0))]
    UnknownSession(String),
    #[error("unknown tool {}: this session offers {available}", crate::escape::quoted(.tool))]
    UnknownTool { tool: String, available: String },
    /// A tool whose declared requirements this caller does not meet
    /// ([`crate::admit`]).
    #[error("tool {} is not available to this caller: {missing}", crate::escape::quoted(.tool))]
    NotForCaller {
        tool: String,
        /// Boxed: every call's future holds room for an error.
        missing: Box<openclaw_proxy_proto::tools::Missing>,
    },
    /// A read of a URI the session does not serve.
    #[error("Resource not found: {}", crate::escape::quoted(.uri))]
    UnknownResource { uri: String },
    /// A prompt the session does not offer.
    #[error("unknown prompt {}: this session offers {available}", crate::escape::quoted(.name))]
    UnknownPrompt { name: String, available: String },
    #[error("Bridge is not connected.")]
    NotConnected,
    #[error("The tool did not answer within {} seconds.", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("{}", .0.reason_for_caller())]
    BridgeEnded(BridgeEnd),
    #[error("The app's {what} for {tool} was malformed: {problem}")]
    MalformedAnswer {
        /// The tool that was called.
        tool: String,
        /// `"result"` or `"progress report"`.
        what: &'static str,
        /// What was wrong with it.
        problem: String,
    },
    #[error("The session directory is unreachable, so the call could not be routed: {0}")]
    Unavailable(String),
    #[error(
        "The session already has {limit} calls in flight, its limit (OPENCLAW_PROXY_MAX_CALLS_PER_SESSION); retry when one has finished."
    )]
    TooManyCalls { limit: u32 },
    #[error(
        "The call to {tool} is {bytes} bytes with its arguments, more than the bridge's limit of {limit} bytes (OPENCLAW_PROXY_MAX_BODY_BYTES); it was not sent."
    )]
    TooLarge {
        tool: String,
        bytes: usize,
        limit: usize,
    },
    /// A call or answer larger than NATS carries between nodes.
    #[error(
        "The {what} is {bytes} bytes, more than NATS carries between proxy nodes ({limit} bytes, its max_payload): raise max_payload in nats-server's configuration to OPENCLAW_PROXY_MAX_BODY_BYTES or more."
    )]
    TooLargeForNats {
        /// `call` or `answer`.
        what: &'static str,
        bytes: usize,
        limit: usize,
    },
    /// A failure reported by the node that holds the bridge, as it worded it.
    #[error("{0}")]
    Remote(String),
}

/// Why a bridge ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BridgeEnd {
    /// A newer bridge attached to the same session.
    Replaced,
    /// The session was deleted, or it expired.
    SessionDeleted,
    /// The app closed the bridge or the connection broke.
    Disconnected,
    /// The app stopped answering pings.
    Unresponsive,
    /// The app stopped reading the proxy's messages for longer than the
    /// bridge write timeout.
    Stalled,
    /// The proxy is shutting down.
    ShuttingDown,
    /// The app sent a message over the size limit (`limit` bytes,
    /// `OPENCLAW_PROXY_MAX_BODY_BYTES`), which ends its bridge.
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
}

impl BridgeEnd {
    /// The reason as told to the app whose bridge ends.
    pub fn reason_for_app(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::Replaced => "replaced by a newer bridge for the same session",
            Self::SessionDeleted => "the session was deleted",
            Self::Disconnected => "the bridge disconnected",
            Self::Unresponsive => "no message from the app for several ping intervals",
            Self::Stalled => {
                "the app left the proxy's messages unread for longer than OPENCLAW_PROXY_BRIDGE_WRITE_TIMEOUT_SECONDS"
            }
            Self::ShuttingDown => "the proxy is shutting down",
            Self::TooLarge { limit } => {
                return Cow::Owned(format!(
                    "a message was larger than OPENCLAW_PROXY_MAX_BODY_BYTES ({limit} bytes)"
                ));
            }
        })
    }

    /// The sentence a caller whose call was cut off by this end receives.
    pub fn reason_for_caller(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::Replaced => {
                "The app's bridge was replaced by a newer connection before the tool answered."
            }
            Self::SessionDeleted => "The session was deleted before the tool answered.",
            Self::Disconnected => "The app's bridge disconnected before the tool answered.",
            Self::Unresponsive => {
                "The app's bridge stopped answering pings and was dropped before the tool answered."
            }
            Self::Stalled => {
                "The app stopped reading its bridge, which was dropped before the tool answered."
            }
            Self::ShuttingDown => "The proxy is shutting down; the tool call was abandoned.",
            Self::TooLarge { limit } => {
                return Cow::Owned(format!(
                    "The app sent a message larger than the proxy's limit of {limit} bytes (OPENCLAW_PROXY_MAX_BODY_BYTES), perhaps this tool's result; its bridge was dropped before the tool answered."
                ));
            }
        })
    }
}
