//! What a session serves besides tools, for the rmcp handler
//! ([`super::service::SessionTools`]): its lists answered from memory, one
//! page at a time, and the requests the app answers (`resources/read`,
//! `prompts/get`, `completion/complete`) sent over its bridge as the one
//! generic `mcp_request`, their results read back into rmcp's types.
//!
//! A read of a URI the session does not serve is the error the caller's
//! protocol revision names: `-32002` up to 2025-11-25, `-32602` (SEP-2164)
//! from 2026-07-28, carrying the URI in `data.uri` either way, whether the
//! proxy refused it or the app did. The app never needs to know the era.

use std::future::Future;
use std::net::SocketAddr;

use axum::http::request::Parts;
use openclaw_proxy_core::outcome::McpReply;
use openclaw_proxy_core::progress::{Askable, Elicitation, LogLevel};
use openclaw_proxy_core::proto::CallerInfo;
use openclaw_proxy_core::{
    AppRequest, CallContext, Hub, InvokeError, Origin, SessionEvent, Transport,
};
use rmcp::model::{ErrorCode, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::{ErrorData as McpError, RoleServer};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::RequestTrace;
use super::call::{self, InFlight};

/// Entries per page of a list; a longer list hands out a `nextCursor`.
pub const PAGE_SIZE: usize = 100;

/// How long a client may treat a list or a read as fresh (2026-07-28
/// `ttlMs`): lists change only when the app updates them, and clients that
/// hold a stream hear of that at once; the others look again soon.
pub const TTL_MS: u64 = 60_000;

/// The MCP error code of a resource that does not exist, before SEP-2164.
const RESOURCE_NOT_FOUND: i32 = -32002;

/// One page of `items`, from the `cursor` a previous page handed out (the
/// offset of its first entry, as text), and the cursor of the next page.
pub fn page<T>(items: &[T], cursor: Option<&str>) -> Result<(Vec<T>, Option<String>), McpError>
where
    T: Clone,
{
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|start| *start <= items.len())
            .ok_or_else(|| {
                McpError::invalid_params(
                    "the cursor is not one this server handed out: list again without a cursor",
                    None,
                )
            })?,
    };
    let end = items.len().min(start + PAGE_SIZE);
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}

/// The least severe log record the client of a request wants: the level
/// its `_meta` names (2026-07-28), else the one set for the session with
/// `logging/setLevel`; `None` for no logs.
pub fn log_level(hub: &Hub, session_id: &str, meta: &RequestMetaObject) -> Option<LogLevel> {
    meta.log_level()
        .as_ref()
        .and_then(super::logging::level_of)
        .or_else(|| hub.log_level(session_id))
}

/// What the client of a request rmcp serves can be asked (`in_rounds`:
/// whether its method goes in `input_required` rounds at 2026-07-28):
/// anything up to 2025-11-25 (the request goes on the answer's event
/// stream, [`super::carrier`]; a stateless endpoint does not keep the
/// capabilities `initialize` declared, so a client without one answers
/// "method not found", which the app gets, as on the direct path); at
/// 2026-07-28 nothing, as rmcp answers the request in one piece, with the
/// capabilities the request declares, so that the app hears which one is
/// missing, or else why.
pub fn askable(context: &RequestContext<RoleServer>, in_rounds: bool) -> Askable {
    if !Caller::of(context, None).speaks_2026() {
        return Askable::Any;
    }
    if !in_rounds {
        return Askable::Nothing;
    }
    let declared = context.meta.client_capabilities().unwrap_or_default();
    Askable::OnePiece {
        elicitation: declared.elicitation.map_or(Elicitation::NONE, |modes| {
            Elicitation::declared(modes.form.is_some(), modes.url.is_some())
        }),
        sampling: declared.sampling.is_some(),
        roots: declared.roots.is_some(),
    }
}

/// The params rmcp parsed as JSON text, with the request's `_meta` put
/// back (rmcp moves it into the context).
fn with_meta<P: Serialize>(
    params: P,
    meta: Option<&RequestMetaObject>,
) -> Result<String, McpError> {
    let mut params = serde_json::to_value(params)
        .map_err(|error| McpError::internal_error(error.to_string(), None))?;
    if let (Some(meta), Some(object)) = (meta, params.as_object_mut()) {
        object.insert(
            "_meta".into(),
            serde_json::to_value(meta).unwrap_or_default(),
        );
    }
    Ok(params.to_string())
}

/// The MCP answer to a request's outcome: the app's result read as `T`
/// (complete, at 2026-07-28), its error, or the proxy's.
fn answer<T: DeserializeOwned>(
    outcome: Result<McpReply, InvokeError>,
    caller: &Caller,
    method: &str,
    target: &str,
) -> Result<T, McpError> {
    match outcome {
        Ok(McpReply::Result(raw)) => {
            let not_mcp = |error: serde_json::Error| {
                McpError::internal_error(
                    format!("the app's {method} result is not a valid MCP result: {error}"),
                    None,
                )
            };
            let mut result: Value = serde_json::from_str(raw.get()).map_err(not_mcp)?;
            // 2026-07-28 results say they are complete; an app need not.
            if caller.speaks_2026()
                && let Some(object) = result.as_object_mut()
            {
                object
                    .entry("resultType")
                    .or_insert_with(|| Value::from("complete"));
            }
            serde_json::from_value(result).map_err(not_mcp)
        }
        Ok(McpReply::Error(failure)) => {
            if failure.code == RESOURCE_NOT_FOUND && method == "resources/read" {
                return Err(caller.resource_not_found(failure.message, target));
            }
            let data = failure
                .data
                .as_ref()
                .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
            Err(McpError::new(
                ErrorCode(failure.code),
                failure.message,
                data,
            ))
        }
        Err(error @ InvokeError::UnknownResource { .. }) => {
            Err(caller.resource_not_found(error.to_string(), target))
        }
        Err(error @ InvokeError::UnknownPrompt { .. }) => {
            Err(McpError::invalid_params(error.to_string(), None))
        }
        Err(error) => Err(McpError::internal_error(error.to_string(), None)),
    }
}

/// The MCP notification of a change in a session.
pub fn change_notification(change: &SessionEvent) -> Option<rmcp::model::ServerNotification> {
    serde_json::from_value(change_message(change)).ok()
}

/// The JSON-RPC notification (`method`, `params`) of a change in a session,
/// for every transport that carries changes.
pub fn change_message(change: &SessionEvent) -> Value {
    match change {
        SessionEvent::ResourceUpdated(uri) => {
            json!({"method": "notifications/resources/updated", "params": {"uri": &**uri}})
        }
        SessionEvent::ToolsChanged => json!({"method": "notifications/tools/list_changed"}),
        SessionEvent::ResourcesChanged => {
            json!({"method": "notifications/resources/list_changed"})
        }
        SessionEvent::PromptsChanged => json!({"method": "notifications/prompts/list_changed"}),
    }
}

/// Catalog entries (MCP objects) as rmcp's types.
pub fn entries<T: DeserializeOwned>(objects: impl Iterator<Item = Value>) -> Vec<T> {
    objects
        .filter_map(|object| match serde_json::from_value(object) {
            Ok(entry) => Some(entry),
            Err(error) => {
                // Validated at declaration; a mismatch is a bug here.
                tracing::error!(%error, "a declared entry could not be listed");
                None
            }
        })
        .collect()
}

/// What the edge knows of the request an rmcp handler serves.
pub struct Caller {
    /// Who is calling.
    pub client: CallerInfo,
    /// The request's protocol revision, from its header; empty if absent.
    pub protocol_version: String,
    /// The request's span (when traces are exported).
    pub span: tracing::Span,
    /// Its W3C `traceparent`; empty for none.
    pub trace_parent: String,
    /// The caller's address.
    pub peer: Option<SocketAddr>,
    /// Which credential opened the request.
    pub verified: openclaw_proxy_core::Caller,
}

impl Caller {
    /// The caller of the request `context` belongs to; `meta` is the
    /// request's `_meta`.
    pub fn of(context: &RequestContext<RoleServer>, meta: Option<&RequestMetaObject>) -> Self {
        let parts = context.extensions.get::<Parts>();
        let protocol_version = parts
            .and_then(|parts| parts.headers.get(HEADER_MCP_PROTOCOL_VERSION))
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let peer_info = context.peer.peer_info();
        let client = call::caller(
            meta,
            peer_info.as_ref().map(|info| &info.client_info),
            Some(protocol_version.as_str()).filter(|version| !version.is_empty()),
        );
        let traced = parts
            .and_then(|parts| parts.extensions.get::<RequestTrace>())
            .cloned();
        let traced = traced.unwrap_or_else(RequestTrace::none);
        Self {
            client,
            protocol_version,
            span: traced.span,
            trace_parent: traced.trace_parent,
            peer: traced.peer,
            verified: traced.caller,
        }
    }

    /// Whether the request speaks 2026-07-28 or later.
    pub fn speaks_2026(&self) -> bool {
        self.protocol_version.as_str() >= "2026-07-28"
    }

    /// The error of a read of `uri`, which does not exist.
    fn resource_not_found(&self, message: String, uri: &str) -> McpError {
        let code = if self.speaks_2026() {
            ErrorCode::INVALID_PARAMS
        } else {
            ErrorCode(RESOURCE_NOT_FOUND)
        };
        McpError::new(code, message, Some(json!({ "uri": uri })))
    }
}

/// One request for the app, as an rmcp handler received it.
pub struct Ask<'a, P> {
    /// The session it is routed to.
    pub session_id: &'a str,
    /// The MCP method.
    pub method: &'a str,
    /// What it names (a URI, a prompt), for checks and the audit log.
    pub target: &'a str,
    /// The params rmcp parsed; `_meta` goes back in from the context.
    pub params: P,
}

/// Sends a request to the session's app over its bridge and reads the
/// result as `T`. Abandoned (and cancelled in the app) when `cancelled`
/// resolves or a `notifications/cancelled` names it.
pub async fn ask<P: Serialize, T: DeserializeOwned>(
    hub: &Hub,
    in_flight: &InFlight,
    ask: Ask<'_, P>,
    context: &RequestContext<RoleServer>,
    cancelled: impl Future<Output = ()>,
) -> Result<T, McpError> {
    let Ask {
        session_id,
        method,
        target,
        params,
    } = ask;
    let meta = (!context.meta.0.is_empty()).then_some(&context.meta);
    let caller = Caller::of(context, meta);
    let params = with_meta(params, meta)?;
    let jsonrpc_id = serde_json::to_string(&context.id).unwrap_or_default();
    let registered = in_flight.register(session_id, &jsonrpc_id);
    let request = AppRequest {
        method,
        target,
        params_json: params,
    };
    // Log records of the request reach the client when it asked for them,
    // and so do the app's requests, where its revision lets them
    // (`completion/complete` goes in no rounds at 2026-07-28).
    let log_level = log_level(hub, session_id, &context.meta);
    let askable = askable(context, method != "completion/complete");
    let (sink, reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    let call_context = CallContext {
        meta_json: String::new(),
        client: caller.client.clone(),
        caller: caller.verified.clone(),
        progress: Some(sink),
        trace_parent: caller.trace_parent.clone(),
        origin: Origin::new(Transport::Mcp, caller.peer),
    };
    let requested = tracing::Instrument::instrument(
        hub.request(session_id, request, call_context),
        caller.span.clone(),
    );
    let listener = call::Listener {
        token: None,
        log_level,
        peer: &context.peer,
    };
    let limit = hub.config().tool_timeout;
    let requested = async {
        call::with_notifications(requested, reports, &listener, limit)
            .await
            .0
    };
    let outcome = tokio::select! {
        outcome = requested => outcome,
        () = cancelled => return Err(McpError::internal_error("the request was cancelled", None)),
        () = registered.cancelled() => {
            return Err(McpError::internal_error("the request was cancelled by the client", None));
        }
    };
    answer(outcome, &caller, method, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_hand_out_cursors_until_the_end() {
        let items: Vec<usize> = (0..250).collect();
        let (first, next) = page(&items, None).expect("first");
        assert_eq!(first.len(), PAGE_SIZE);
        let (second, next) = page(&items, next.as_deref()).expect("second");
        assert_eq!(second[0], PAGE_SIZE);
        let (third, next) = page(&items, next.as_deref()).expect("third");
        assert_eq!(third.len(), 50);
        assert_eq!(next, None);
        assert!(page(&items, Some("x")).is_err());
        assert!(page(&items, Some("251")).is_err());
        assert_eq!(page::<usize>(&[], None).expect("empty"), (vec![], None));
    }
}
