//! One MCP `tools/call`, for every path that serves one.
//!
//! The rmcp handler ([`super::mcp::SessionTools`]) and the direct path
//! ([`super::direct`]) both come here, so whatever a call does (progress,
//! cancellation, the mapping of its outcome to an MCP answer) is written
//! once and no path can miss it.

use std::future::Future;

use openclaw_proxy_core::proto::ToolProgress;
use openclaw_proxy_core::{Hub, InvokeError, ToolOutcome};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ProgressNotificationParam, ProgressToken,
};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleServer};

/// Progress reports buffered per call before older ones are dropped.
const PROGRESS_BUFFER: usize = 64;

/// Where a call's progress goes: the client's token and its channel.
pub struct ProgressTo {
    /// The client's `progressToken`.
    pub token: ProgressToken,
    /// The peer that carries `notifications/progress` to the client.
    pub peer: Peer<RoleServer>,
}

/// Runs a `tools/call` over the session's bridge and maps its outcome to the
/// MCP answer. The call is abandoned (and released on the bridge at once)
/// when `cancelled` resolves: the client went away or cancelled.
pub async fn call_tool(
    hub: &Hub,
    session_id: &str,
    request: CallToolRequestParams,
    progress: Option<ProgressTo>,
    cancelled: impl Future<Output = ()>,
) -> Result<CallToolResult, McpError> {
    let arguments = request.arguments.unwrap_or_default();
    let invoke = async {
        match progress {
            None => hub.invoke(session_id, &request.name, &arguments).await,
            Some(to) => {
                invoke_reporting_progress(hub, to, session_id, &request.name, &arguments).await
            }
        }
    };
    let outcome = tokio::select! {
        outcome = invoke => outcome,
        () = cancelled => {
            tracing::debug!(tool = %request.name, "call cancelled by the client");
            return Err(McpError::internal_error("the request was cancelled", None));
        }
    };
    answer(outcome)
}

/// Invokes a tool and turns the app's progress reports into
/// `notifications/progress`, all sent before the result.
async fn invoke_reporting_progress(
    hub: &Hub,
    to: ProgressTo,
    session_id: &str,
    tool: &str,
    arguments: &serde_json::Map<String, serde_json::Value>,
) -> Result<ToolOutcome, InvokeError> {
    let (sink, mut reports) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
    let invoke = hub.invoke_with_progress(session_id, tool, arguments, Some(sink));
    tokio::pin!(invoke);
    let notify = |report: ToolProgress| {
        let mut param = ProgressNotificationParam::new(to.token.clone(), report.progress);
        param.total = report.total;
        param.message = (!report.message.is_empty()).then_some(report.message);
        let peer = to.peer.clone();
        async move {
            if let Err(error) = peer.notify_progress(param).await {
                tracing::debug!(%error, "progress notification not delivered");
            }
        }
    };
    let outcome = loop {
        tokio::select! {
            biased;
            Some(report) = reports.recv() => notify(report).await,
            outcome = &mut invoke => break outcome,
        }
    };
    // Reports queued just before the answer still go first.
    while let Ok(report) = reports.try_recv() {
        notify(report).await;
    }
    outcome
}

/// The MCP answer to a call's outcome: an unknown tool is invalid params;
/// every other proxy-side failure is an error result with its sentence.
fn answer(outcome: Result<ToolOutcome, InvokeError>) -> Result<CallToolResult, McpError> {
    match outcome {
        Ok(outcome) => Ok(openclaw_proxy_proto::mcp::tool_result(
            outcome.ok,
            outcome.content,
            outcome.error,
        )),
        Err(error @ InvokeError::UnknownTool { .. }) => {
            Err(McpError::invalid_params(error.to_string(), None))
        }
        Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(
            error.to_string(),
        )])),
    }
}
