//! Running one tool call: whatever happens to it (the handler returns,
//! fails or panics, the tool is unknown, the arguments are not JSON) ends
//! in exactly one `ToolResult`, and none of it stops the app. MCP requests
//! other than `tools/call` are run alike in `mcp`; both begin a call the
//! same way (`call`).

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use openclaw_proxy_proto::escape::Outside;
use openclaw_proxy_proto::v1::{AppMessage, InvokeTool, ToolResult, app_message};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::call::{InFlight, Origin, Scope, begin, panic_message};
use crate::declarations::Declarations;

/// Runs one call to completion and sends its result on `outbound`. Every
/// way a handler can end (value, error, panic, unknown tool, bad arguments)
/// yields one `ToolResult`; none of them stops the app.
pub(crate) async fn run(
    declarations: Arc<Declarations>,
    invoke: InvokeTool,
    outbound: mpsc::Sender<AppMessage>,
    in_flight: InFlight,
    scope: Scope,
    _permit: OwnedSemaphorePermit,
) {
    let origin = Origin {
        session_id: invoke.session_id,
        request_id: invoke.request_id.clone(),
        method: Cow::Borrowed("tools/call"),
        tool_name: invoke.tool_name.clone(),
        client: invoke.client,
        caller: invoke.caller,
        trace_parent: invoke.trace_parent,
        task_id: invoke.task_id,
    };
    let Some(context) = begin(origin, outbound.clone(), &in_flight, &scope) else {
        return;
    };
    let handler = declarations
        .tool(&invoke.tool_name)
        .map(|tool| tool.handler.clone());
    let outcome = match handler {
        None => Err(format!(
            "This app has no tool named `{}`.",
            invoke.tool_name
        )),
        Some(handler) => match arguments(&invoke.arguments_json) {
            Err(error) => Err(error),
            Ok(arguments) => {
                // The handler is called inside the guarded future so that a
                // panic before its first await is caught too.
                let handling = async move { handler(arguments, context).await };
                match AssertUnwindSafe(handling).catch_unwind().await {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(error)) => Err(error.message().to_owned()),
                    Err(panic) => {
                        let detail = panic_message(panic.as_ref());
                        tracing::error!(
                            tool = Outside::new(&invoke.tool_name).field(),
                            %detail,
                            "tool handler panicked"
                        );
                        Err(format!(
                            "The tool `{}` failed unexpectedly inside the app (its handler panicked: {detail}).",
                            invoke.tool_name
                        ))
                    }
                }
            }
        },
    };
    in_flight.finish(&invoke.request_id);
    let result = tool_result(invoke.request_id, outcome);
    // The bridge may be gone; the proxy has then failed the call already.
    let _ = outbound
        .send(AppMessage {
            kind: Some(app_message::Kind::Result(result)),
        })
        .await;
}

/// The result message of a call that ended with `outcome`.
fn tool_result(request_id: String, outcome: Result<Value, String>) -> ToolResult {
    match outcome {
        Ok(Value::Null) => ToolResult {
            request_id,
            ok: true,
            content_json: String::new(),
            error: String::new(),
        },
        Ok(value) => ToolResult {
            request_id,
            ok: true,
            content_json: value.to_string(),
            error: String::new(),
        },
        Err(error) => ToolResult {
            request_id,
            ok: false,
            content_json: String::new(),
            error,
        },
    }
}

fn arguments(json: &str) -> Result<Value, String> {
    if json.trim().is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    serde_json::from_str(json)
        .map_err(|error| format!("The proxy sent arguments that are not JSON: {error}"))
}
