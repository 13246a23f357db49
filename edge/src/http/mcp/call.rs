//! One MCP `tools/call`, for every path that serves one.
//!
//! The rmcp handler ([`super::service::SessionTools`]) and the direct path
//! ([`super::direct`]) both come here, so whatever a call does (its context
//! for the app, progress, cancellation, the mapping of its outcome to an MCP
//! answer) is written once and no path can miss it.
//!
//! Cancellation: a call ends without a result, and the app is told to stop
//! (`CancelTool`), when its client goes away or cancels it. In stateless
//! streamable HTTP a client cancels with `notifications/cancelled` in a POST
//! of its own, which rmcp ignores; [`InFlight`] finds the call by session and
//! JSON-RPC id instead. Two concurrent calls of one session with the same
//! JSON-RPC id are cancelled together.
//!
//! Progress: the app's reports wait in the core's per-call queue
//! (`openclaw_proxy_core::progress`), which thins them under a flood; the
//! rmcp path sends them through rmcp's peer of the request, the direct path
//! writes them on its answer. The notification ([`progress_notification`])
//! and the one log line per thinned call ([`log_thinned`]) are written here
//! for both.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use axum::http::{HeaderMap, HeaderName};
use futures_util::future::BoxFuture;
use openclaw_proxy_core::escape::Outside;
use openclaw_proxy_core::progress::{Askable, CallEvent, LogLevel, ProgressReceiver, ProgressSink};
use openclaw_proxy_core::proto::{CallerInfo, ToolProgress};
use openclaw_proxy_core::{CallContext, Caller, Hub, InvokeError, Origin, ToolOutcome, Transport};
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, Implementation, ProgressNotification,
    ProgressNotificationParam, ProgressToken, RequestMetaObject, ServerNotification,
};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleServer};
use tokio_util::sync::CancellationToken;

/// Where a call's progress reports and log records go.
pub enum Progress {
    /// Sent as `notifications/progress` and `notifications/message` through
    /// rmcp's peer of the request, which writes them on the request's
    /// stream (the rmcp path).
    Notify {
        /// The client's `progressToken`; `None` when it wants logs only.
        token: Option<ProgressToken>,
        /// The least severe log record it wants; `None` for none.
        log_level: Option<LogLevel>,
        /// rmcp's peer of the request.
        peer: Peer<RoleServer>,
        /// Which requests of the app the client can be sent (each as a
        /// carrier notification: [`super::carrier`]).
        askable: Askable,
    },
    /// Kept by the core for the caller, which reads them itself and writes
    /// them on its own answer (the direct path): no notification is built
    /// for a call whose app never reports.
    Reports(ProgressSink),
}

/// One `tools/call` as the edge received it.
pub struct ToolCall<'a> {
    /// The session it is routed to.
    pub session_id: &'a str,
    /// The JSON-RPC id, as JSON text (`7`, `"a"`), for cancellation.
    pub jsonrpc_id: String,
    /// The tool called.
    pub name: String,
    /// The arguments, the JSON text of an object, passed to the app as is.
    pub arguments_json: String,
    /// `params._meta` as JSON text, passed to the app as is; empty for none.
    pub meta_json: String,
    /// Which MCP client is calling, as it names itself.
    pub client: CallerInfo,
    /// Which credential opened the request.
    pub caller: Caller,
    /// The caller's address, for the audit log.
    pub peer: Option<SocketAddr>,
    /// The request's W3C `traceparent` ([`trace_parent`]); empty for none.
    pub trace_parent: String,
}

impl<'a> ToolCall<'a> {
    /// The call of rmcp's parsed request (its JSON already rebuilt as trees).
    pub fn from_request(
        session_id: &'a str,
        jsonrpc_id: String,
        request: CallToolRequestParams,
        client: CallerInfo,
    ) -> Self {
        let arguments_json = request
            .arguments
            .as_ref()
            .and_then(|arguments| serde_json::to_string(arguments).ok())
            .unwrap_or_else(|| "{}".to_owned());
        let meta_json = request
            .meta
            .as_ref()
            .filter(|meta| !meta.0.0.is_empty())
            .and_then(|meta| serde_json::to_string(meta).ok())
            .unwrap_or_default();
        Self {
            session_id,
            jsonrpc_id,
            name: request.name.into(),
            arguments_json,
            meta_json,
            client,
            caller: Caller::default(),
            peer: None,
            trace_parent: String::new(),
        }
    }
}

/// Runs a `tools/call` over the session's bridge and maps its outcome to the
/// MCP answer. The call is abandoned (and cancelled in the app) when
/// `cancelled` resolves (the client went away) or a `notifications/cancelled`
/// names it.
pub async fn call_tool(
    hub: &Hub,
    in_flight: &InFlight,
    call: ToolCall<'_>,
    progress: Option<Progress>,
    cancelled: impl Future<Output = ()>,
) -> Result<RawToolResult, McpError> {
    let ToolCall {
        session_id,
        jsonrpc_id,
        name,
        arguments_json,
        meta_json,
        client,
        caller,
        peer,
        trace_parent,
    } = call;
    let registered = in_flight.register(session_id, &jsonrpc_id);
    // The direct path hands the core its own report queue; the rmcp path
    // forwards the reports to rmcp's peer as they come.
    let (reports, notify) = match progress {
        None => (None, None),
        Some(Progress::Reports(sink)) => (Some(sink), None),
        Some(Progress::Notify {
            token,
            log_level,
            peer,
            askable,
        }) => (None, Some((token, log_level, peer, askable))),
    };
    let context = CallContext {
        meta_json,
        client,
        caller,
        progress: reports,
        trace_parent,
        origin: Origin::new(Transport::Mcp, peer),
    };
    // Boxed: the core's future is kilobytes, and this one is moved (into
    // the answer's future, into a box, into a task) before it first runs;
    // boxed once it is created, it is copied once. The rmcp path's
    // progress forwarding is larger still.
    let invoke: BoxFuture<'_, _> = match &notify {
        None => Box::pin(hub.invoke_json(session_id, &name, arguments_json, context)),
        Some((token, log_level, peer, askable)) => Box::pin(invoke_reporting_progress(
            hub,
            Listener {
                token: token.as_ref(),
                log_level: *log_level,
                peer,
            },
            *askable,
            session_id,
            &name,
            arguments_json,
            context,
        )),
    };
    let outcome = tokio::select! {
        outcome = invoke => outcome,
        () = cancelled => {
            tracing::debug!(tool = Outside::new(&name).field(), "call abandoned: the client went away");
            return Err(McpError::internal_error("the request was cancelled", None));
        }
        () = registered.token.cancelled() => {
            tracing::debug!(tool = Outside::new(&name).field(), "call cancelled by the client");
            return Err(McpError::internal_error("the request was cancelled by the client", None));
        }
    };
    answer(outcome)
}

/// The W3C `traceparent` of an MCP request: `params._meta.traceparent`
/// (where MCP puts trace context), else the HTTP `traceparent` header; empty
/// when neither is there. Checked where it is used ([`trace`]).
///
/// [`trace`]: openclaw_proxy_core::trace
pub fn trace_parent(meta: Option<&RequestMetaObject>, headers: &HeaderMap) -> String {
    let from_meta = meta
        .and_then(|meta| meta.get("traceparent"))
        .and_then(serde_json::Value::as_str);
    trace_parent_of(from_meta, headers)
}

/// [`trace_parent`] given the `_meta.traceparent` string, if any.
pub fn trace_parent_of(from_meta: Option<&str>, headers: &HeaderMap) -> String {
    from_meta
        .or_else(|| {
            headers
                .get(const { HeaderName::from_static("traceparent") })
                .and_then(|value| value.to_str().ok())
        })
        .unwrap_or_default()
        .to_owned()
}

/// What the request says about its client: `clientInfo` from its `_meta`
/// (2026-07-28) or from the connection's `initialize`, and its protocol
/// revision.
pub fn caller(
    meta: Option<&RequestMetaObject>,
    initialized: Option<&Implementation>,
    protocol_version: Option<&str>,
) -> CallerInfo {
    let from_meta = meta.and_then(RequestMetaObject::client_info);
    caller_of(from_meta.as_ref().or(initialized), protocol_version)
}

/// [`caller`] given the client's identity, if known.
pub fn caller_of(info: Option<&Implementation>, protocol_version: Option<&str>) -> CallerInfo {
    CallerInfo {
        name: info.map(|info| info.name.clone()).unwrap_or_default(),
        version: info.map(|info| info.version.clone()).unwrap_or_default(),
        protocol_version: protocol_version.unwrap_or_default().to_owned(),
    }
}

/// The calls in flight, by session and JSON-RPC id.
#[derive(Debug, Default)]
pub struct InFlight {
    calls: Mutex<HashMap<String, (CancellationToken, usize)>>,
}

/// A call's entry in [`InFlight`], removed when dropped.
pub struct Registered<'a> {
    in_flight: &'a InFlight,
    key: String,
    token: CancellationToken,
}

impl InFlight {
    fn key(session_id: &str, jsonrpc_id: &str) -> String {
        // Sized once (`format!` grows its string on the way).
        let mut key = String::with_capacity(session_id.len() + 1 + jsonrpc_id.len());
        key.push_str(session_id);
        key.push('\u{0}');
        key.push_str(jsonrpc_id);
        key
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (CancellationToken, usize)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a request in flight, until the entry is dropped.
    pub fn register(&self, session_id: &str, jsonrpc_id: &str) -> Registered<'_> {
        let key = Self::key(session_id, jsonrpc_id);
        let token = {
            let mut calls = self.lock();
            let entry = calls.entry(key.clone()).or_default();
            entry.1 += 1;
            entry.0.clone()
        };
        Registered {
            in_flight: self,
            key,
            token,
        }
    }

    /// Cancels the calls of `session_id` with this JSON-RPC id; whether any was
    /// in flight.
    pub fn cancel(&self, session_id: &str, jsonrpc_id: &str) -> bool {
        match self.lock().get(&Self::key(session_id, jsonrpc_id)) {
            Some((token, _)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }
}

impl Registered<'_> {
    /// Resolves when a `notifications/cancelled` names the request.
    pub fn cancelled(&self) -> tokio_util::sync::WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut calls = self.in_flight.lock();
        // One lookup (the key is hashed with SipHash: it holds the client's id).
        if let Entry::Occupied(mut entry) = calls.entry(std::mem::take(&mut self.key)) {
            entry.get_mut().1 -= 1;
            if entry.get().1 == 0 {
                entry.remove();
            }
        }
    }
}

/// Who hears of a call on the rmcp path, and of what.
pub struct Listener<'a> {
    /// The client's `progressToken`, if it asked for progress.
    pub token: Option<&'a ProgressToken>,
    /// The least severe log record it wants, if any.
    pub log_level: Option<LogLevel>,
    /// rmcp's peer of the request.
    pub peer: &'a Peer<RoleServer>,
}

/// Invokes a tool and turns the app's progress reports into
/// `notifications/progress`, its log records into `notifications/message`
/// and its requests to the client (those `askable` allows) into carriers,
/// all sent before the result.
async fn invoke_reporting_progress(
    hub: &Hub,
    listener: Listener<'_>,
    askable: Askable,
    session_id: &str,
    tool: &str,
    arguments_json: String,
    mut context: CallContext,
) -> Result<ToolOutcome, InvokeError> {
    let (sink, reports) = openclaw_proxy_core::progress::call_channel(listener.log_level, askable);
    context.progress = Some(sink);
    let invoke = hub.invoke_json(session_id, tool, arguments_json, context);
    let (outcome, thinned) =
        with_notifications(invoke, reports, &listener, hub.config().tool_timeout).await;
    log_thinned(session_id, tool, thinned);
    outcome
}

/// Runs `work` (a call whose events go to `reports`' sink) and sends its
/// events to the listener as they come, every one before the work's output
/// is handed back, within `limit` after it: a client that stopped reading
/// gets nothing more. Also returns how many events were thinned.
pub async fn with_notifications<F: Future>(
    work: F,
    mut reports: ProgressReceiver,
    listener: &Listener<'_>,
    limit: std::time::Duration,
) -> (F::Output, u64) {
    tokio::pin!(work);
    let notify = |event: CallEvent| {
        let notification = event_notification(listener.token, event);
        let peer = listener.peer.clone();
        async move {
            let Some(notification) = notification else {
                return;
            };
            if let Err(error) = peer.send_notification(notification).await {
                tracing::debug!(%error, "notification not delivered");
            }
        }
    };
    // A client that does not read its stream holds a notification up; the
    // call is polled all the while, so its timeout still holds.
    let mut sending = std::pin::pin!(futures_util::future::OptionFuture::from(None));
    let mut busy = false;
    let output = loop {
        tokio::select! {
            biased;
            Some(()) = &mut sending, if busy => {
                sending.set(None.into());
                busy = false;
            }
            Some(event) = reports.recv_event(), if !busy => {
                sending.set(Some(notify(event)).into());
                busy = true;
            }
            output = &mut work => break output,
        }
    };
    let rest = async {
        sending.await;
        while let Some(event) = reports.try_recv_event() {
            notify(event).await;
        }
    };
    if tokio::time::timeout(limit, rest).await.is_err() {
        tracing::debug!("the MCP client does not read its notifications; the rest is dropped");
    }
    (output, reports.thinned())
}

/// The notification of one event of a call: `notifications/progress` for
/// a report (none when the client gave no `token`), `notifications/message`
/// for a log record, and for a request of the app the carrier that takes
/// it through rmcp ([`super::carrier`]; the direct path writes the request
/// itself).
pub fn event_notification(
    token: Option<&ProgressToken>,
    event: CallEvent,
) -> Option<ServerNotification> {
    match event {
        CallEvent::Progress(report) => Some(progress_notification(token?, report)),
        CallEvent::Log(record) => Some(super::logging::notification(record)),
        CallEvent::Ask(ask) => Some(super::carrier::notification(&ask)),
    }
}

/// The `notifications/progress` of one report, for the client's `token`.
pub fn progress_notification(token: &ProgressToken, report: ToolProgress) -> ServerNotification {
    let mut param = ProgressNotificationParam::new(token.clone(), report.progress);
    param.total = report.total;
    param.message = (!report.message.is_empty()).then_some(report.message);
    ServerNotification::ProgressNotification(ProgressNotification::new(param))
}

/// Logs a call whose reports were thinned, once per call and not per
/// report: a flood is one event.
pub fn log_thinned(session_id: &str, tool: &str, thinned: u64) {
    if thinned > 0 {
        tracing::info!(
            session = Outside::session(session_id).field(),
            tool = Outside::new(tool).field(),
            thinned,
            "progress thinned: the client read slower than the app reported; the latest report and the result were delivered"
        );
    }
}

/// The MCP answer to a call's outcome: an unknown tool is invalid params;
/// every other proxy-side failure is an error result with its sentence.
fn answer(outcome: Result<ToolOutcome, InvokeError>) -> Result<RawToolResult, McpError> {
    match outcome {
        Ok(outcome) => Ok(openclaw_proxy_proto::mcp::tool_result_raw(
            outcome.ok,
            outcome.content,
            outcome.error,
        )),
        Err(error @ InvokeError::UnknownTool { .. }) => {
            Err(McpError::invalid_params(error.to_string(), None))
        }
        Err(error) => Ok(RawToolResult {
            result: CallToolResult::error(vec![ContentBlock::text(error.to_string())]),
            structured: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    use openclaw_proxy_core::{CoreConfig, Hub};

    use super::*;

    #[tokio::test]
    async fn a_direct_calls_future_stays_small() {
        // Every MCP call's future holds this one, and is moved before it
        // first runs: its size is copied per call. It was 6.8 KB while the
        // rmcp path's progress forwarding was laid out inside it, 3.1 KB
        // while it held the hub's future inline (now boxed once made).
        let hub = Hub::new(CoreConfig::default());
        let in_flight = InFlight::default();
        let call = ToolCall {
            session_id: "s",
            jsonrpc_id: "1".into(),
            name: "t".into(),
            arguments_json: "{}".into(),
            meta_json: String::new(),
            client: CallerInfo::default(),
            caller: Caller::default(),
            peer: None,
            trace_parent: String::new(),
        };
        let (sink, _reports) = openclaw_proxy_core::progress::channel();
        let progress = Some(Progress::Reports(sink));
        let future = call_tool(&hub, &in_flight, call, progress, std::future::pending());
        let size = std::mem::size_of_val(&future);
        assert!(size <= 900, "call_tool's future is {size} bytes");
    }
}
