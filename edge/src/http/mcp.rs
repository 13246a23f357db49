//! The MCP endpoint: `POST /v1/mcp/{session_id}`, and `POST /v1/mcp` (or
//! `/v1/mcp/`) routed by the `MCP-Session-Id` header.
//!
//! rmcp's streamable HTTP transport does all protocol work, in stateless mode:
//! the server never mints a session id of its own (`MCP-Session-Id` is ours,
//! for routing), `GET` is refused with 405, answers are plain JSON unless the
//! handler streams, and every protocol revision rmcp knows is negotiated
//! (2024-11-05 through 2026-07-28, with `server/discover`).
//!
//! Before a request reaches rmcp, and before its body is read, this module
//! checks, in order: `Host` and `Origin` ([`super::guard`]), that the bearer
//! token could open a session at all (401 with `WWW-Authenticate: Bearer`),
//! that a session id was given (400), and that the session exists (404) and
//! accepts the token: its own `mcp_token`, or the OpenClaw token unless
//! session tokens are required (401), as the hub decides. The session id then rides in the request's
//! extensions to [`SessionTools`], the one transport-agnostic handler.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;

use openclaw_proxy_core::metrics::{McpMethod, Surface};
use openclaw_proxy_core::{ClientAddr, Credential, Hub, HubError, trace};
use openclaw_proxy_proto::mcp as mcp_rules;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use tracing::Instrument;

use super::call::{self, InFlight, Progress, ToolCall};
use super::error::ApiError;
use super::{EdgeState, SessionIdPath, check_session_token, direct, jsonrpc};
use crate::config::EdgeConfig;

/// The header that routes `/v1/mcp` to a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The interval of the comments that keep an idle SSE answer open, on
/// rmcp's path and the direct path alike.
pub const SSE_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// rmcp's HTTP service around [`SessionTools`], built once.
pub type McpService = Arc<StreamableHttpService<SessionTools, NeverSessionManager>>;

/// Builds the MCP service over `hub`.
pub fn service(hub: Hub, config: &EdgeConfig, in_flight: Arc<InFlight>) -> McpService {
    let handler = SessionTools { hub, in_flight };
    let http_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
        // Checked earlier, before authentication: see `super::guard`.
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_max_request_body_bytes(config.max_body_bytes);
    Arc::new(StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(NeverSessionManager::default()),
        http_config,
    ))
}

/// The session a request was routed to.
#[derive(Clone, Debug)]
struct SessionRoute(Arc<str>);

/// `POST /v1/mcp/{session_id}`.
pub async fn by_path(
    State(state): State<EdgeState>,
    SessionIdPath(session_id): SessionIdPath,
    request: Request,
) -> Response {
    route(state, Some(session_id), request).await
}

/// `POST /v1/mcp` and `POST /v1/mcp/`, routed by `MCP-Session-Id`.
pub async fn by_header(State(state): State<EdgeState>, request: Request) -> Response {
    let session_id = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_owned());
    route(state, session_id, request).await
}

/// Serves one MCP request, counted by method and status.
async fn route(state: EdgeState, session_id: Option<String>, request: Request) -> Response {
    let mut method = McpMethod::Unread;
    let response = serve(&state, session_id, request, &mut method).await;
    state
        .hub
        .metrics()
        .mcp_request(method, response.status().as_u16());
    response
}

async fn serve(
    state: &EdgeState,
    session_id: Option<String>,
    request: Request,
    method: &mut McpMethod,
) -> Response {
    let admitted = admit(
        state,
        session_id.as_deref(),
        request.headers(),
        request.uri(),
    )
    .await;
    if let Err(error) = admitted {
        return error.into_response();
    }
    let session_id: Arc<str> = session_id.unwrap_or_default().into();
    let peer = request.extensions().get::<ClientAddr>().map(|addr| addr.0);
    let (parts, body) = request.into_parts();
    let bytes = match super::rest::read_body(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    handle_message(state, session_id, parts, bytes, peer, method).await
}

/// Serves one admitted JSON-RPC message of `session_id` (its request head
/// and body): the direct path, `notifications/cancelled`, or rmcp. The one
/// place MCP messages are handled, for the streamable endpoint and the
/// legacy SSE transport ([`super::legacy`]) alike.
pub(super) async fn handle_message(
    state: &EdgeState,
    session_id: Arc<str>,
    parts: Parts,
    bytes: Bytes,
    peer: Option<std::net::SocketAddr>,
    method: &mut McpMethod,
) -> Response {
    // The direct path first: it carries most traffic, and a body it does
    // not take costs it little.
    if let Some(revision) = direct::headers_allow(&parts.headers)
        && let Some(call) = direct::parse(&bytes, revision, &parts.headers)
    {
        *method = McpMethod::ToolsCall;
        let span = request_span("tools/call", &session_id, call.tool());
        trace::set_remote_parent(&span, &call.trace_parent(&parts.headers));
        return direct::answer(
            &state.hub,
            &state.in_flight,
            &session_id,
            &parts.headers,
            peer,
            call,
        )
        .instrument(span)
        .await;
    }
    if let Some(jsonrpc_id) = jsonrpc::cancelled_request(&bytes) {
        *method = McpMethod::Notification;
        // rmcp ignores this in stateless mode: the call is found here.
        let found = state.in_flight.cancel(&session_id, &jsonrpc_id);
        tracing::debug!(found, "notifications/cancelled");
        return axum::http::StatusCode::ACCEPTED.into_response();
    }
    let sniffed = Sniffed::of(&bytes);
    *method = sniffed
        .as_ref()
        .and_then(|sniffed| sniffed.method.as_deref())
        .map_or(McpMethod::Other, McpMethod::of);
    if let Some(refusal) = jsonrpc::refusal(&bytes) {
        return refusal;
    }
    let trace_parent = sniffed
        .as_ref()
        .and_then(|sniffed| sniffed.params.as_ref())
        .and_then(|params| params.meta.as_ref())
        .and_then(|meta| meta.traceparent.as_deref())
        .map(str::to_owned)
        .unwrap_or_else(|| call::trace_parent(None, &parts.headers));
    let span = request_span(
        method.as_str(),
        &session_id,
        sniffed
            .as_ref()
            .and_then(|sniffed| sniffed.params.as_ref())
            .and_then(|params| params.name.as_deref())
            .unwrap_or_default(),
    );
    trace::set_remote_parent(&span, &trace_parent);
    drop(sniffed);
    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(SessionRoute(session_id));
    request.extensions_mut().insert(RequestTrace {
        span: span.clone(),
        trace_parent,
        peer,
    });
    let handled = state.mcp.handle(request).instrument(span).await;
    jsonrpc::normalize(handled.map(Body::new)).await
}

/// The MCP request's span (when traces are exported): the root of the
/// proxy's part of a call, child of the client's span when it sent a
/// `traceparent`.
fn request_span(method: &str, session_id: &str, tool: &str) -> tracing::Span {
    trace::span(|| {
        tracing::info_span!(
            "mcp_request",
            otel.kind = "server",
            mcp.method.name = method,
            session = %openclaw_proxy_core::audit::short_session(session_id),
            tool = %openclaw_proxy_core::escape::truncated(tool),
        )
    })
}

/// What the rmcp path needs of a request's tracing: its span (rmcp runs
/// the handler in a task of its own), the `traceparent` for the app, and
/// the client's address.
#[derive(Clone)]
struct RequestTrace {
    span: tracing::Span,
    trace_parent: String,
    peer: Option<std::net::SocketAddr>,
}

/// The few fields of a JSON-RPC request the edge looks at before rmcp:
/// the method (metrics), the tool and the `traceparent` (tracing).
#[derive(Deserialize)]
struct Sniffed<'a> {
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<SniffedParams<'a>>,
}

#[derive(Deserialize)]
struct SniffedParams<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<SniffedMeta<'a>>,
}

#[derive(Deserialize)]
struct SniffedMeta<'a> {
    #[serde(default, borrow)]
    traceparent: Option<Cow<'a, str>>,
}

impl<'a> Sniffed<'a> {
    /// `None` for a body that is not one JSON-RPC object (a batch, not JSON).
    fn of(body: &'a [u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }
}

/// Checks `Host`/`Origin`, the token and the session of an MCP request,
/// from its head alone.
pub(super) async fn admit(
    state: &EdgeState,
    session_id: Option<&str>,
    headers: &axum::http::HeaderMap,
    uri: &axum::http::Uri,
) -> Result<(), ApiError> {
    state.guard.check(headers, uri)?;
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    // Refused from the headers alone when no session could accept the token.
    if let Err(error) = state.hub.precheck(Credential::mcp(header)) {
        state.hub.metrics().auth_failure(Surface::Mcp);
        return Err(error.into());
    }
    let session_id = session_id
        .filter(|id| !id.is_empty())
        .ok_or(ApiError::MissingSessionId)?;
    let unknown = || ApiError::UnknownSession(session_id.to_owned());
    match check_session_token(state, session_id, Surface::Mcp, headers).await {
        Err(ApiError::Hub(HubError::UnknownSession(_))) => return Err(unknown()),
        checked => checked?,
    }
    // A global token is accepted without a lookup: the session may not exist.
    if !state.hub.session_exists(session_id).await? {
        return Err(unknown());
    }
    Ok(())
}

/// The MCP server of one session: its tools, each call forwarded over the
/// session's bridge.
#[derive(Clone)]
pub struct SessionTools {
    hub: Hub,
    in_flight: Arc<InFlight>,
}

fn session_of(context: &RequestContext<RoleServer>) -> Result<Arc<str>, McpError> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<SessionRoute>())
        .map(|route| route.0.clone())
        .ok_or_else(|| McpError::internal_error("the request carries no session route", None))
}

impl ServerHandler for SessionTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "openclaw-proxy",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Tools registered by an app session; each call runs inside the app.")
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let session = session_of(&context)?;
        let tools = self
            .hub
            .tools(&session)
            .await
            .map_err(|error| McpError::invalid_request(error.to_string(), None))?;
        Ok(ListToolsResult::with_all_items(
            tools.iter().map(mcp_rules::list_entry).collect(),
        ))
    }

    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = session_of(&context)?;
        // rmcp moves the request's `_meta` into the context before it calls
        // the handler: put it back, for the app and the client's name.
        if request.meta.is_none() {
            request.meta = Some(context.meta.clone());
        }
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| Progress::Notify {
                token,
                peer: context.peer.clone(),
            });
        let version = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.headers.get(HEADER_MCP_PROTOCOL_VERSION))
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let peer = context.peer.peer_info();
        let client = call::caller(
            request.meta.as_ref(),
            peer.as_ref().map(|info| &info.client_info),
            version.as_deref(),
        );
        let traced = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.extensions.get::<RequestTrace>())
            .cloned();
        let (span, trace_parent, peer) = match traced {
            Some(traced) => (traced.span, traced.trace_parent, traced.peer),
            None => (tracing::Span::none(), String::new(), None),
        };
        let jsonrpc_id = serde_json::to_string(&context.id).unwrap_or_default();
        let mut call = ToolCall::from_request(&session, jsonrpc_id, request, client);
        call.peer = peer;
        call.trace_parent = trace_parent;
        // rmcp cancels `context.ct` when the client disconnects.
        call::call_tool(
            &self.hub,
            &self.in_flight,
            call,
            progress,
            context.ct.cancelled(),
        )
        .instrument(span)
        .await
        .map(|result| result.into_result().into())
    }
}
