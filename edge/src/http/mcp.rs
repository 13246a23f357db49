//! The MCP endpoint: `POST /v1/mcp/{session_id}`, and `POST /v1/mcp` (or
//! `/v1/mcp/`) routed by the `MCP-Session-Id` header.
//!
//! rmcp's streamable HTTP transport does all protocol work, in stateless mode:
//! the server never mints a session id of its own (`MCP-Session-Id` is ours,
//! for routing), `GET` is refused with 405, answers are plain JSON unless the
//! handler streams, and every protocol revision rmcp knows is negotiated
//! (2024-11-05 through 2026-07-28, with `server/discover`).
//!
//! Before a request reaches rmcp, this module checks, in order: `Host` and
//! `Origin` ([`super::guard`]), the OpenClaw bearer token (401 with
//! `WWW-Authenticate: Bearer`), that a session id was given (400), and that
//! the session exists (404). The session id then rides in the request's
//! extensions to [`SessionTools`], the one transport-agnostic handler.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::{Hub, InvokeError, ToolOutcome};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use super::{EdgeState, SessionIdPath, fast_call, jsonrpc};
use crate::config::EdgeConfig;

/// The header that routes `/v1/mcp` to a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// rmcp's HTTP service around [`SessionTools`], built once.
pub type McpService = Arc<StreamableHttpService<SessionTools, NeverSessionManager>>;

/// Builds the MCP service over `hub`.
pub fn service(hub: Hub, config: &EdgeConfig) -> McpService {
    let handler = SessionTools { hub };
    let http_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(Some(Duration::from_secs(15)))
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

async fn route(state: EdgeState, session_id: Option<String>, request: Request) -> Response {
    let admitted = admit(
        &state,
        session_id.as_deref(),
        request.headers(),
        request.uri(),
    )
    .await;
    if let Err(error) = admitted {
        return error.into_response();
    }
    let session_id: Arc<str> = session_id.unwrap_or_default().into();
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let too_large = std::error::Error::source(&error)
                .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
            let error = if too_large {
                ApiError::BodyTooLarge {
                    limit: state.config.max_body_bytes,
                }
            } else {
                ApiError::UnreadableBody(error.to_string())
            };
            return error.into_response();
        }
    };
    if fast_call::headers_allow(&parts.headers)
        && let Some(call) = fast_call::parse(&bytes)
    {
        return fast_call::answer(&state.hub, &session_id, call).await;
    }
    if let Some(refusal) = jsonrpc::refusal(&bytes) {
        return refusal;
    }
    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(SessionRoute(session_id));
    jsonrpc::normalize(state.mcp.handle(request).await.map(Body::new)).await
}

async fn admit(
    state: &EdgeState,
    session_id: Option<&str>,
    headers: &axum::http::HeaderMap,
    uri: &axum::http::Uri,
) -> Result<(), ApiError> {
    state.guard.check(headers, uri)?;
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    if !state.config.openclaw_token.accepts_header(header) {
        return Err(ApiError::InvalidOpenClawToken);
    }
    let session_id = session_id
        .filter(|id| !id.is_empty())
        .ok_or(ApiError::MissingSessionId)?;
    if !state.hub.session_exists(session_id).await? {
        return Err(ApiError::UnknownSession(session_id.to_owned()));
    }
    Ok(())
}

/// The MCP server of one session: its tools, each call forwarded over the
/// session's bridge.
#[derive(Clone)]
pub struct SessionTools {
    hub: Hub,
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
            tools
                .iter()
                .map(|tool| {
                    let description =
                        (!tool.description.is_empty()).then(|| tool.description.to_string().into());
                    rmcp::model::Tool::new_with_raw(
                        tool.name.to_string(),
                        description,
                        tool.input_schema.clone(),
                    )
                })
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = session_of(&context)?;
        let arguments = request.arguments.unwrap_or_default();
        let invoke = async {
            match context.meta.get_progress_token() {
                None => self.hub.invoke(&session, &request.name, &arguments).await,
                Some(token) => {
                    self.invoke_reporting_progress(
                        &context,
                        token,
                        &session,
                        &request.name,
                        &arguments,
                    )
                    .await
                }
            }
        };
        // rmcp cancels `context.ct` when the client disconnects or cancels;
        // dropping the call then releases it on the bridge at once.
        let outcome = tokio::select! {
            outcome = invoke => outcome,
            () = context.ct.cancelled() => {
                tracing::debug!(tool = %request.name, "call cancelled by the client");
                return Err(McpError::internal_error("the request was cancelled", None));
            }
        };
        call_result(outcome).map(Into::into)
    }
}

/// The MCP answer to a call's outcome, for both the rmcp path and the
/// direct path ([`super::fast_call`]): an unknown tool is invalid params;
/// every other proxy-side failure is an error result with its sentence.
pub fn call_result(outcome: Result<ToolOutcome, InvokeError>) -> Result<CallToolResult, McpError> {
    match outcome {
        Ok(outcome) => Ok(tool_result(outcome)),
        Err(error @ InvokeError::UnknownTool { .. }) => {
            Err(McpError::invalid_params(error.to_string(), None))
        }
        Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(
            error.to_string(),
        )])),
    }
}

impl SessionTools {
    /// Invokes a tool and turns the app's progress reports into
    /// `notifications/progress`, all sent before the result.
    async fn invoke_reporting_progress(
        &self,
        context: &RequestContext<RoleServer>,
        token: ProgressToken,
        session: &str,
        tool: &str,
        arguments: &serde_json::Map<String, Value>,
    ) -> Result<ToolOutcome, InvokeError> {
        let (sink, mut reports) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
        let invoke = self
            .hub
            .invoke_with_progress(session, tool, arguments, Some(sink));
        tokio::pin!(invoke);
        let notify = |report: openclaw_proxy_core::proto::ToolProgress| {
            let mut param = ProgressNotificationParam::new(token.clone(), report.progress);
            param.total = report.total;
            param.message = (!report.message.is_empty()).then_some(report.message);
            let peer = context.peer.clone();
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
}

/// Progress reports buffered per call before older ones are dropped.
const PROGRESS_BUFFER: usize = 64;

/// Maps the app's answer to an MCP result:
/// an object becomes `structuredContent` plus one text block with its JSON;
/// a string becomes one text block; an array of MCP content blocks passes
/// through; `null` is no content; anything else is one text block with its
/// JSON. `ok: false` is an error result carrying the app's error text.
pub fn tool_result(outcome: ToolOutcome) -> CallToolResult {
    if !outcome.ok {
        let text = if outcome.error.is_empty() {
            "The tool failed without saying why.".to_owned()
        } else {
            outcome.error
        };
        return CallToolResult::error(vec![ContentBlock::text(text)]);
    }
    match outcome.content {
        Value::Object(object) => {
            let structured = Value::Object(object);
            let mut result =
                CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
            result.structured_content = Some(structured);
            result
        }
        Value::String(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Value::Null => CallToolResult::success(Vec::new()),
        array @ Value::Array(_) => match Vec::<ContentBlock>::deserialize(&array) {
            Ok(blocks) => CallToolResult::success(blocks),
            Err(_) => CallToolResult::success(vec![ContentBlock::text(array.to_string())]),
        },
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}
