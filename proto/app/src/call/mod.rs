//! One call while it runs (a tool call, or another MCP request such as
//! `resources/read`): what the handler can do (report progress, write log
//! records for the client, notice cancellation, ask the client: [`ask`]),
//! and the registry of calls in flight that cancellation goes through. A
//! tool call's result is made in `tool_call`, another request's answer in
//! `mcp`.

mod ask;

pub use ask::{AskError, ElicitAction, ElicitResult, Elicitation, Root, SampleResult, Sampling};

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

pub use openclaw_proxy_proto::LogLevel;
use openclaw_proxy_proto::v1::{
    AppMessage, CallerIdentity, CallerInfo, Log, ToolProgress, app_message,
};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::caller::Caller;

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

/// The MCP client behind a call, as far as the proxy knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientInfo {
    /// Its name (`clientInfo.name`); empty when unknown.
    pub name: String,
    /// Its version; empty when unknown.
    pub version: String,
    /// The MCP protocol revision of the request, such as `"2025-11-25"`;
    /// empty when unknown.
    pub protocol_version: String,
}

impl ClientInfo {
    fn from_proto(client: Option<CallerInfo>) -> Option<Self> {
        client
            .filter(|client| {
                !(client.name.is_empty()
                    && client.version.is_empty()
                    && client.protocol_version.is_empty())
            })
            .map(|client| Self {
                name: client.name,
                version: client.version,
                protocol_version: client.protocol_version,
            })
    }
}

/// What a handler gets besides its arguments: who called, a way to report
/// progress and write log records, and the cancellation signal.
#[derive(Clone, Debug)]
pub struct CallContext {
    session_id: String,
    request_id: String,
    method: Cow<'static, str>,
    tool_name: String,
    client: Option<ClientInfo>,
    caller: Caller,
    trace_parent: String,
    task_id: String,
    outbound: mpsc::Sender<AppMessage>,
    cancel: CancellationToken,
    reason: Reason,
    scope: Reason,
    asks: ask::Asks,
}

impl CallContext {
    /// The requests to the client waiting for answers ([`ask`]).
    pub(crate) fn asks(&self) -> &ask::Asks {
        &self.asks
    }

    /// Where messages to the proxy go.
    pub(crate) fn outbound(&self) -> &mpsc::Sender<AppMessage> {
        &self.outbound
    }

    /// The session the call belongs to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The proxy's id of this call (`"{session_id}:{n}"`).
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The MCP method being served: `"tools/call"` for a tool, otherwise
    /// the request's own (`"resources/read"`, `"prompts/get"`,
    /// `"completion/complete"`).
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The name of the tool being called; empty when the call is not a
    /// `tools/call`.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The MCP client behind the call, when the proxy knows anything of it.
    pub fn client(&self) -> Option<&ClientInfo> {
        self.client.as_ref()
    }

    /// Who called, as far as the proxy verified it: the credential that
    /// opened the request, and for an OAuth access token its subject,
    /// issuer, client and scopes. Unlike [`CallContext::client`], which is
    /// what the client says of itself, this is the proxy's word.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// The MCP protocol revision of the request, when known.
    pub fn protocol_version(&self) -> Option<&str> {
        self.client
            .as_ref()
            .map(|client| client.protocol_version.as_str())
            .filter(|version| !version.is_empty())
    }

    /// The call's W3C `traceparent`, when the proxy sent one: use it as the
    /// parent of the handler's spans so they join the caller's trace.
    pub fn trace_parent(&self) -> Option<&str> {
        (!self.trace_parent.is_empty()).then_some(self.trace_parent.as_str())
    }

    /// The MCP task this call runs as, when the client called the tool as
    /// a task (`execution.taskSupport`): the proxy answered the client at
    /// once and keeps the result for it. The call is otherwise the same.
    pub fn task_id(&self) -> Option<&str> {
        (!self.task_id.is_empty()).then_some(self.task_id.as_str())
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

    /// Writes a log record for the MCP client that made this call. It
    /// reaches the client as `notifications/message` (with `level`, `logger`
    /// and `data`) when the client asked for records of that level, and is
    /// dropped otherwise. `data` is any JSON value; a string is plain text;
    /// an empty `logger` is left out. Best effort, like progress: a record
    /// is dropped when the bridge has gone, or when `data` cannot be
    /// serialised (which is logged here).
    pub async fn log(&self, level: LogLevel, logger: impl Into<String>, data: impl Serialize) {
        let data_json = match serde_json::to_string(&data) {
            Ok(json) => json,
            Err(error) => {
                tracing::warn!(%error, "a log record's data is not JSON; dropped");
                return;
            }
        };
        let record = Log {
            request_id: self.request_id.clone(),
            level: level.as_str().to_owned(),
            logger: logger.into(),
            data_json,
        };
        let message = AppMessage {
            kind: Some(app_message::Kind::Log(record)),
        };
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
/// one of them; and their requests to the client waiting for answers.
#[derive(Clone, Default)]
pub(crate) struct InFlight {
    calls: Arc<Mutex<HashMap<String, Entry>>>,
    pub(crate) asks: ask::Asks,
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

    pub(crate) fn finish(&self, request_id: &str) {
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

/// Where a call comes from: what its handler's context tells it.
pub(crate) struct Origin {
    pub(crate) session_id: String,
    pub(crate) request_id: String,
    pub(crate) method: Cow<'static, str>,
    pub(crate) tool_name: String,
    pub(crate) client: Option<CallerInfo>,
    pub(crate) caller: Option<CallerIdentity>,
    pub(crate) trace_parent: String,
    /// The MCP task the call runs as; empty for a plain call.
    pub(crate) task_id: String,
}

/// Registers a call in flight and builds its handler's context; `None` when
/// the bridge ended while the call waited for its turn (the proxy has
/// failed it already, so nothing is answered).
pub(crate) fn begin(
    origin: Origin,
    outbound: mpsc::Sender<AppMessage>,
    in_flight: &InFlight,
    scope: &Scope,
) -> Option<CallContext> {
    let (cancel, reason) = in_flight.register(&origin.request_id, scope);
    if cancel.is_cancelled() {
        in_flight.finish(&origin.request_id);
        return None;
    }
    Some(CallContext {
        session_id: origin.session_id,
        request_id: origin.request_id,
        method: origin.method,
        tool_name: origin.tool_name,
        client: ClientInfo::from_proto(origin.client),
        caller: Caller::from_proto(origin.caller),
        trace_parent: origin.trace_parent,
        task_id: origin.task_id,
        outbound,
        cancel,
        reason,
        scope: scope.reason.clone(),
        asks: in_flight.asks.clone(),
    })
}

/// What a panic said, for the error the caller receives.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|text| (*text).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}
