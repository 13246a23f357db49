//! One tool call while it runs: what the handler can do (report progress,
//! notice cancellation), the registry of calls in flight that cancellation
//! goes through, and the wrapper that turns whatever the handler does
//! (returns, fails, panics) into exactly one `ToolResult`.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::FutureExt;
use openclaw_proxy_proto::v1::{AppMessage, InvokeTool, ToolProgress, ToolResult, app_message};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;

use crate::tool::Tool;

/// Why a call was cancelled.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// The bridge that delivered the call was lost; the proxy has already
    /// answered the agent with an error, so the result would go nowhere.
    BridgeLost,
    /// The app is shutting down.
    Shutdown,
    /// The proxy cancelled the call (the agent gave up or its time ran out),
    /// with the proxy's reason.
    Proxy(String),
}

/// What a handler gets besides its arguments: who called, a way to report
/// progress, and the cancellation signal.
#[derive(Clone, Debug)]
pub struct CallContext {
    session_id: String,
    request_id: String,
    tool_name: String,
    trace_parent: String,
    outbound: mpsc::Sender<AppMessage>,
    cancel: CancellationToken,
    reason: Reason,
    scope: Reason,
}

impl CallContext {
    /// The session the call belongs to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The proxy's id of this call (`"{session_id}:{n}"`).
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The name of the tool being called.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The call's W3C `traceparent`, when the proxy sent one: use it as the
    /// parent of the handler's spans so they join the caller's trace.
    pub fn trace_parent(&self) -> Option<&str> {
        (!self.trace_parent.is_empty()).then_some(self.trace_parent.as_str())
    }

    /// Reports progress. When the MCP client asked for progress it receives a
    /// `notifications/progress` for each report, in order and before the
    /// result. `progress` should grow with every report; `total` is the
    /// expected end, when known. Best effort: a report is dropped when the
    /// bridge has gone.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        let report = ToolProgress {
            request_id: self.request_id.clone(),
            progress,
            total,
            message: message.into(),
        };
        let message = AppMessage {
            kind: Some(app_message::Kind::Progress(report)),
        };
        // Nothing to do when it fails: the bridge is gone and this call has
        // been cancelled, which the handler sees through `cancelled`.
        let _ = self.outbound.send(message).await;
    }

    /// Completes when the call is cancelled; use it in `tokio::select!` to
    /// stop work whose result nobody will read.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Why the call was cancelled, once it has been.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        if !self.cancel.is_cancelled() {
            return None;
        }
        self.reason.get().or_else(|| self.scope.get())
    }

    /// The cancellation token itself, for APIs that take one.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

/// Why something was cancelled, set once before its token fires.
#[derive(Clone, Debug, Default)]
struct Reason(Arc<Mutex<Option<CancelReason>>>);

impl Reason {
    fn get(&self) -> Option<CancelReason> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, reason: CancelReason) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(reason);
    }
}

/// The calls delivered by one bridge, cancelled together when it ends. Each
/// call's token is a child of the scope's, so a call that starts after the
/// bridge ended is born cancelled: no call escapes the signal.
#[derive(Clone, Default)]
pub(crate) struct Scope {
    token: CancellationToken,
    reason: Reason,
}

impl Scope {
    pub(crate) fn end(&self, reason: CancelReason) {
        self.reason.set(reason);
        self.token.cancel();
    }
}

struct Entry {
    cancel: CancellationToken,
    reason: Reason,
}

/// The calls running right now, by request id, so that the proxy can cancel
/// one of them.
#[derive(Clone, Default)]
pub(crate) struct InFlight {
    calls: Arc<Mutex<HashMap<String, Entry>>>,
}

impl InFlight {
    fn register(&self, request_id: &str, scope: &Scope) -> (CancellationToken, Reason) {
        let cancel = scope.token.child_token();
        let reason = Reason::default();
        let entry = Entry {
            cancel: cancel.clone(),
            reason: reason.clone(),
        };
        self.lock().insert(request_id.to_owned(), entry);
        (cancel, reason)
    }

    fn finish(&self, request_id: &str) {
        self.lock().remove(request_id);
    }

    /// Cancels one call; false when no such call is running.
    pub(crate) fn cancel(&self, request_id: &str, reason: CancelReason) -> bool {
        match self.lock().remove(request_id) {
            Some(entry) => {
                entry.reason.set(reason);
                entry.cancel.cancel();
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Runs one call to completion and sends its result on `outbound`. Every
/// way a handler can end (value, error, panic, unknown tool, bad arguments)
/// yields one `ToolResult`; none of them stops the app.
pub(crate) async fn run(
    tool: Option<Tool>,
    invoke: InvokeTool,
    outbound: mpsc::Sender<AppMessage>,
    in_flight: InFlight,
    scope: Scope,
    _permit: OwnedSemaphorePermit,
) {
    let (cancel, reason) = in_flight.register(&invoke.request_id, &scope);
    if cancel.is_cancelled() {
        // The bridge ended while the call waited for its turn; the proxy has
        // failed it already.
        in_flight.finish(&invoke.request_id);
        return;
    }
    let context = CallContext {
        session_id: invoke.session_id,
        request_id: invoke.request_id.clone(),
        tool_name: invoke.tool_name.clone(),
        trace_parent: invoke.trace_parent,
        outbound: outbound.clone(),
        cancel,
        reason,
        scope: scope.reason,
    };
    let outcome = match tool {
        None => Err(format!(
            "This app has no tool named `{}`.",
            invoke.tool_name
        )),
        Some(tool) => match arguments(&invoke.arguments_json) {
            Err(error) => Err(error),
            Ok(arguments) => {
                // The handler is called inside the guarded future so that a
                // panic before its first await is caught too.
                let handling = async move { (tool.handler)(arguments, context).await };
                match AssertUnwindSafe(handling).catch_unwind().await {
                    Ok(Ok(value)) => Ok(value),
                    Ok(Err(error)) => Err(error.message().to_owned()),
                    Err(panic) => {
                        let detail = panic
                            .downcast_ref::<&str>()
                            .map(|text| (*text).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "no message".to_owned());
                        tracing::error!(tool = %invoke.tool_name, %detail, "tool handler panicked");
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
