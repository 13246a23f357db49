//! The MCP server of one session, in rmcp's terms: [`SessionTools`], the one
//! transport-agnostic handler, and rmcp's stateless streamable HTTP service
//! around it.

use std::sync::Arc;

use axum::http::request::Parts;
use openclaw_proxy_core::Hub;
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
use tracing::Instrument;

use super::call::{self, InFlight, Progress, ToolCall};
use super::{RequestTrace, SessionRoute};
use crate::config::EdgeConfig;
use crate::http::sse;

/// rmcp's HTTP service around [`SessionTools`], built once.
pub type McpService = Arc<StreamableHttpService<SessionTools, NeverSessionManager>>;

/// Builds the MCP service over `hub`.
pub fn service(hub: Hub, config: &EdgeConfig, in_flight: Arc<InFlight>) -> McpService {
    let handler = SessionTools { hub, in_flight };
    let http_config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(Some(sse::KEEP_ALIVE))
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
