//! MCP requests other than `tools/call` (`resources/read`, `prompts/get`,
//! `completion/complete`): the proxy sends each as one generic `McpRequest`
//! with the client's params, and the app answers with one `McpResult`
//! holding the MCP result object or a JSON-RPC error.
//!
//! This file runs one request like a tool call (concurrently, within the
//! same limits, cancelled by the proxy's `CancelTool`) and turns whatever
//! the handler does (returns, fails, panics) into exactly one answer. Below
//! it, `route` checks the params and finds the handler the request names.
//! The error a request can end in, and its wire form, is `mcp_error`,
//! beside this module: the handlers name it too.

mod route;
#[cfg(test)]
mod tests;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use openclaw_proxy_proto::v1::{self as proto, AppMessage, McpRequest, McpResult, app_message};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::call::{self, InFlight, Origin, Scope};
use crate::declarations::Declarations;
use crate::mcp_error::McpError;

/// Runs one MCP request to completion and sends its answer on `outbound`.
pub(crate) async fn run(
    declarations: Arc<Declarations>,
    request: McpRequest,
    outbound: mpsc::Sender<AppMessage>,
    in_flight: InFlight,
    scope: Scope,
    _permit: OwnedSemaphorePermit,
) {
    let revision = request
        .client
        .as_ref()
        .map(|client| client.protocol_version.clone());
    let request_id = request.request_id.clone();
    let method = request.method.clone();
    let origin = Origin {
        session_id: request.session_id,
        request_id: request.request_id,
        method: request.method.into(),
        tool_name: String::new(),
        client: request.client,
        caller: request.caller,
        trace_parent: request.trace_parent,
        task_id: String::new(),
    };
    let Some(context) = call::begin(origin, outbound.clone(), &in_flight, &scope) else {
        return;
    };
    // Dispatched inside the guarded future so that a panic anywhere in a
    // handler is caught.
    let answering =
        async move { route::dispatch(&declarations, &method, &request.params_json, context).await };
    let outcome = match AssertUnwindSafe(answering).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let detail = call::panic_message(panic.as_ref());
            tracing::error!(%detail, "an MCP request handler panicked");
            Err(McpError::internal(format!(
                "The app failed unexpectedly while answering (its handler panicked: {detail})."
            )))
        }
    };
    in_flight.finish(&request_id);
    let answer = answer(request_id, outcome, revision.as_deref());
    // The bridge may be gone; the proxy has then failed the request already.
    let _ = outbound
        .send(AppMessage {
            kind: Some(app_message::Kind::McpResult(answer)),
        })
        .await;
}

/// The `McpResult` for a handler's outcome.
pub(crate) fn answer(
    request_id: String,
    outcome: Result<String, McpError>,
    revision: Option<&str>,
) -> McpResult {
    let outcome = match outcome {
        Ok(json) if json.starts_with('{') => proto::mcp_result::Outcome::ResultJson(json),
        Ok(json) => {
            let start: String = json.chars().take(40).collect();
            proto::mcp_result::Outcome::Error(
                McpError::internal(format!(
                    "The app's result is not a JSON object (it begins {start:?})."
                ))
                .into_proto(revision),
            )
        }
        Err(error) => proto::mcp_result::Outcome::Error(error.into_proto(revision)),
    };
    McpResult {
        request_id,
        outcome: Some(outcome),
    }
}
