//! One MCP `tools/call` over the session's bridge: its context for the
//! app, its progress, its cancellation and the mapping of its outcome to an
//! MCP answer, written once.
//!
//! Cancellation: a call ends without a result, and the app is told to stop
//! (`CancelTool`), when its client goes away or cancels it. In stateless
//! streamable HTTP a client cancels with `notifications/cancelled` in a POST
//! of its own; [`InFlight`] finds the call by session and JSON-RPC id. Two
//! concurrent calls of one session with the same JSON-RPC id are cancelled
//! together.
//!
//! Progress: the app's reports wait in the core's per-call queue
//! (`openclaw_proxy_core::progress`), which thins them under a flood; the
//! transport writes them on the call's answer.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use axum::http::{HeaderMap, HeaderName};
use futures_util::future::BoxFuture;
use openclaw_proxy_core::escape::Outside;
use openclaw_proxy_core::progress::ProgressSink;
use openclaw_proxy_core::proto::CallerInfo;
use openclaw_proxy_core::{CallContext, Caller, Hub, InvokeError, Origin, ToolOutcome, Transport};
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, Implementation};
use tokio_util::sync::CancellationToken;

/// Where a call's progress reports and log records go: kept by the core
/// for the caller, which reads them itself and writes them on its own
/// answer, so no notification is built for a call whose app never reports.
pub enum Progress {
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
    /// The confirmation the operator's policy asks of the call, if any
    /// (`crate::policy`).
    pub confirm: Option<std::sync::Arc<str>>,
    /// The MCP task the call runs as; empty for a plain call.
    pub task_id: String,
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
        confirm,
        task_id,
    } = call;
    let registered = in_flight.register(session_id, &jsonrpc_id);
    let reports = progress.map(|Progress::Reports(sink)| sink);
    let context = CallContext {
        meta_json,
        client,
        caller,
        progress: reports,
        trace_parent,
        origin: Origin::new(Transport::Mcp, peer),
        confirm,
        task_id,
    };
    // Boxed: the core's future is kilobytes, and this one is moved (into
    // the answer's future, into a box, into a task) before it first runs;
    // boxed once it is created, it is copied once.
    let invoke: BoxFuture<'_, _> =
        Box::pin(hub.invoke_json(session_id, &name, arguments_json, context));
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
/// (where MCP puts trace context) when given, else the HTTP `traceparent`
/// header; empty when neither is there. Checked where it is used
/// (`openclaw_proxy_core::trace`).
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

/// What is known of the client: its identity (2026-07-28 `_meta`), if
/// known, and its protocol revision.
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

/// The MCP answer to a call's outcome: an unknown tool is invalid params;
/// every other proxy-side failure is an error result with its sentence.
fn answer(outcome: Result<ToolOutcome, InvokeError>) -> Result<RawToolResult, McpError> {
    match outcome {
        Ok(outcome) => Ok(openclaw_proxy_proto::mcp::tool_result_raw(
            outcome.ok,
            outcome.content,
            outcome.error,
        )),
        Err(error @ (InvokeError::UnknownTool { .. } | InvokeError::NotForCaller { .. })) => {
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
            confirm: None,
            task_id: String::new(),
        };
        let (sink, _reports) = openclaw_proxy_core::progress::channel();
        let progress = Some(Progress::Reports(sink));
        let future = call_tool(&hub, &in_flight, call, progress, std::future::pending());
        let size = std::mem::size_of_val(&future);
        assert!(size <= 900, "call_tool's future is {size} bytes");
    }
}
