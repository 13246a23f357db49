//! The values the metrics are counted by: how a call ended, which
//! transport, surface, method or reason, each a small enum written as a
//! static label value (never a string from outside), and the label sets
//! built from them.

use std::fmt::Write as _;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

use crate::outcome::{InvokeError, ToolOutcome};
use crate::progress::Logged;

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallOutcome {
    /// The app answered `ok: true`.
    Ok,
    /// The app answered `ok: false`, or its answer was malformed.
    ToolError,
    /// No bridge was attached for the session.
    NoBridge,
    /// The tool did not answer within its time limit.
    Timeout,
    /// The bridge ended (or the node holding it went silent) before the answer.
    BridgeLost,
    /// The caller stopped waiting (the MCP client cancelled or went away).
    Cancelled,
    /// Refused before reaching an app: unknown session or tool, the session
    /// directory unreachable.
    Rejected,
}

impl CallOutcome {
    /// Every outcome, in label order.
    pub const ALL: [Self; 7] = [
        Self::Ok,
        Self::ToolError,
        Self::NoBridge,
        Self::Timeout,
        Self::BridgeLost,
        Self::Cancelled,
        Self::Rejected,
    ];

    /// The one mapping from how a call ended to its outcome label.
    pub fn of<A: Answered>(result: &Result<A, InvokeError>) -> Self {
        match result {
            Ok(answer) if answer.succeeded() => Self::Ok,
            Ok(_) | Err(InvokeError::MalformedAnswer { .. }) => Self::ToolError,
            Err(InvokeError::NotConnected) => Self::NoBridge,
            Err(InvokeError::Timeout(_)) => Self::Timeout,
            Err(InvokeError::BridgeEnded(_) | InvokeError::Remote(_)) => Self::BridgeLost,
            Err(
                InvokeError::UnknownSession(_)
                | InvokeError::UnknownTool { .. }
                | InvokeError::NotForCaller { .. }
                | InvokeError::UnknownResource { .. }
                | InvokeError::UnknownPrompt { .. }
                | InvokeError::Unavailable(_)
                | InvokeError::TooManyCalls { .. }
                | InvokeError::TooLarge { .. }
                | InvokeError::TooLargeForNats { .. },
            ) => Self::Rejected,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::NoBridge => "no_bridge",
            Self::Timeout => "timeout",
            Self::BridgeLost => "bridge_lost",
            Self::Cancelled => "cancelled",
            Self::Rejected => "rejected",
        }
    }
}
label_value!(CallOutcome);

/// An app's answer, as far as the outcome label cares.
pub trait Answered {
    /// Whether the app reported success (a tool result that is not an
    /// error, an MCP result that is not a JSON-RPC error).
    fn succeeded(&self) -> bool;
}

impl Answered for ToolOutcome {
    fn succeeded(&self) -> bool {
        self.ok
    }
}

impl Answered for crate::outcome::McpReply {
    fn succeeded(&self) -> bool {
        matches!(self, Self::Result(_))
    }
}

/// How a connection reached the proxy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Transport {
    /// The gRPC services (sessions, the `Attach` bridge).
    Grpc,
    /// The JSON bridge over WebSocket.
    Websocket,
    /// Session REST.
    Rest,
    /// The MCP endpoint.
    Mcp,
    /// Another node of the cluster, over NATS.
    Nats,
    /// The hub's API, called in-process.
    #[default]
    InProcess,
}

impl Transport {
    /// The label value (and the `transport` field of audit events).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Grpc => "grpc",
            Self::Websocket => "websocket",
            Self::Rest => "rest",
            Self::Mcp => "mcp",
            Self::Nats => "nats",
            Self::InProcess => "in_process",
        }
    }
}
label_value!(Transport);

/// Why a message on a bridge was dropped rather than delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// A notice or ping for an app whose queue was full.
    QueueFull,
    /// A frame or message from the app that could not be read.
    Malformed,
    /// A result or progress report naming no waiting call.
    UnknownRequest,
    /// A result for a call already cancelled or timed out.
    Late,
    /// A progress report for a caller not keeping up.
    ProgressOverflow,
}

impl DropReason {
    /// Every reason, in label order.
    pub const ALL: [Self; 5] = [
        Self::QueueFull,
        Self::Malformed,
        Self::UnknownRequest,
        Self::Late,
        Self::ProgressOverflow,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::QueueFull => "queue_full",
            Self::Malformed => "malformed",
            Self::UnknownRequest => "unknown_request",
            Self::Late => "late",
            Self::ProgressOverflow => "progress_overflow",
        }
    }
}
label_value!(DropReason);
label_value!(Logged);

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct LoggedLabels {
    pub(super) outcome: Logged,
}

/// Where a credential was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Surface {
    /// Session REST.
    Rest,
    /// The WebSocket bridge handshake.
    Websocket,
    /// The gRPC services.
    Grpc,
    /// The MCP endpoint.
    Mcp,
    /// `GET /metrics` on the main port.
    Metrics,
}

impl Surface {
    /// Every surface, in label order.
    pub const ALL: [Self; 5] = [
        Self::Rest,
        Self::Websocket,
        Self::Grpc,
        Self::Mcp,
        Self::Metrics,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rest => "rest",
            Self::Websocket => "websocket",
            Self::Grpc => "grpc",
            Self::Mcp => "mcp",
            Self::Metrics => "metrics",
        }
    }
}
label_value!(Surface);

/// The MCP method of a request, as a label (a closed set: a client cannot
/// make up new series).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum McpMethod {
    /// `initialize`.
    Initialize,
    /// `tools/list`.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `ping`.
    Ping,
    /// `resources/list`.
    ResourcesList,
    /// `resources/templates/list`.
    ResourceTemplatesList,
    /// `resources/read`.
    ResourcesRead,
    /// `resources/subscribe` and `resources/unsubscribe`.
    ResourcesSubscribe,
    /// `prompts/list`.
    PromptsList,
    /// `prompts/get`.
    PromptsGet,
    /// `completion/complete`.
    CompletionComplete,
    /// `logging/setLevel`.
    LoggingSetLevel,
    /// Any notification (`notifications/...`).
    Notification,
    /// A client's JSON-RPC response to a request the app sent it.
    Response,
    /// Another method, a batch, or a body that is not JSON-RPC.
    Other,
    /// Refused before the body was read (authentication, unknown session).
    Unread,
}

impl McpMethod {
    /// The label of a JSON-RPC method name.
    pub fn of(method: &str) -> Self {
        match method {
            "initialize" => Self::Initialize,
            "tools/list" => Self::ToolsList,
            "tools/call" => Self::ToolsCall,
            "ping" => Self::Ping,
            "resources/list" => Self::ResourcesList,
            "resources/templates/list" => Self::ResourceTemplatesList,
            "resources/read" => Self::ResourcesRead,
            "resources/subscribe" | "resources/unsubscribe" => Self::ResourcesSubscribe,
            "prompts/list" => Self::PromptsList,
            "prompts/get" => Self::PromptsGet,
            "completion/complete" => Self::CompletionComplete,
            "logging/setLevel" => Self::LoggingSetLevel,
            _ if method.starts_with("notifications/") => Self::Notification,
            _ => Self::Other,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Initialize => "initialize",
            Self::ToolsList => "tools/list",
            Self::ToolsCall => "tools/call",
            Self::Ping => "ping",
            Self::ResourcesList => "resources/list",
            Self::ResourceTemplatesList => "resources/templates/list",
            Self::ResourcesRead => "resources/read",
            Self::ResourcesSubscribe => "resources/subscribe",
            Self::PromptsList => "prompts/list",
            Self::PromptsGet => "prompts/get",
            Self::CompletionComplete => "completion/complete",
            Self::LoggingSetLevel => "logging/setLevel",
            Self::Notification => "notification",
            Self::Response => "response",
            Self::Other => "other",
            Self::Unread => "unread",
        }
    }
}
label_value!(McpMethod);

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct OutcomeLabels {
    pub(super) outcome: CallOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct TransportLabels {
    pub(super) transport: Transport,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ReasonLabels {
    pub(super) reason: DropReason,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct SurfaceLabels {
    pub(super) surface: Surface,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct RequestLabels {
    pub(super) method: McpMethod,
    pub(super) outcome: CallOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct McpLabels {
    pub(super) method: McpMethod,
    pub(super) status: u16,
}
