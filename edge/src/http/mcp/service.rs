//! The MCP server of one session, in rmcp's terms: [`SessionTools`], the one
//! transport-agnostic handler (tools, and through [`super::served`] the
//! session's resources, templates, prompts and completions), and rmcp's
//! stateless streamable HTTP service around it.

use std::sync::Arc;

use axum::http::request::Parts;
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::escape::{self, Outside};
use openclaw_proxy_proto::mcp as mcp_rules;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult,
    CustomRequest, CustomResult, ErrorCode, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tracing::Instrument;

use super::call::{self, InFlight, Progress, ToolCall};
use super::served::{self, Ask, Caller, TTL_MS};
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

impl SessionTools {
    /// The catalog of the request's session.
    async fn catalog(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<openclaw_proxy_core::catalog::Catalog>, McpError> {
        let session = session_of(context)?;
        self.hub
            .catalog(&session)
            .await
            .map_err(|error| McpError::invalid_request(error.to_string(), None))
    }

    /// A request the app answers, abandoned when the client goes away.
    async fn ask<P: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        ask: Ask<'_, P>,
        context: &RequestContext<RoleServer>,
    ) -> Result<T, McpError> {
        let span = Caller::of(context, None).span;
        served::ask(
            &self.hub,
            &self.in_flight,
            ask,
            context,
            context.ct.cancelled(),
        )
        .instrument(span)
        .await
    }
}

/// A list with the 2026-07-28 caching hints (`ttlMs`, `cacheScope:
/// "private"`: a session's lists are its own) when the request speaks that
/// revision; older revisions get the list as they know it.
fn cacheable<T>(
    mut result: T,
    context: &RequestContext<RoleServer>,
    set: impl FnOnce(&mut T, Option<u64>, Option<CacheScope>),
) -> T {
    if Caller::of(context, None).speaks_2026() {
        set(&mut result, Some(TTL_MS), Some(CacheScope::Private));
    }
    result
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
    /// rmcp's own `initialize`, plus the one line a client's start is worth
    /// at INFO: its name and version (outside values, quoted), never its
    /// capabilities.
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let negotiated = self.negotiate_initialize(&request);
        // Said only of a client that did start: a refused revision is the
        // client's error answer, not a start.
        if negotiated.is_ok() {
            let session = session_of(&context).unwrap_or_else(|_| Arc::from("-"));
            tracing::info!(
                session = Outside::session(&session).field(),
                client_name = Outside::new(&request.client_info.name).field(),
                client_version = Outside::new(&request.client_info.version).field(),
                "MCP client initialized"
            );
        }
        negotiated
    }

    // Logging is deprecated from MCP 2026-07-28 (see `super::logging`).
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_completions()
            .enable_logging()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(
                "openclaw-proxy",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions("Tools registered by an app session; each call runs inside the app.")
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let catalog = self.catalog(&context).await?;
        let cursor = request
            .as_ref()
            .and_then(|request| request.cursor.as_deref());
        let (resources, next) = served::page(&catalog.resources, cursor)?;
        let mut result = ListResourcesResult::with_all_items(served::entries(
            resources.iter().map(|resource| resource.to_mcp()),
        ));
        result.next_cursor = next;
        Ok(cacheable(result, &context, |result, ttl, scope| {
            result.ttl_ms = ttl;
            result.cache_scope = scope;
        }))
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let catalog = self.catalog(&context).await?;
        let cursor = request
            .as_ref()
            .and_then(|request| request.cursor.as_deref());
        let (templates, next) = served::page(&catalog.resource_templates, cursor)?;
        let mut result = ListResourceTemplatesResult::with_all_items(served::entries(
            templates.iter().map(|template| template.to_mcp()),
        ));
        result.next_cursor = next;
        Ok(cacheable(result, &context, |result, ttl, scope| {
            result.ttl_ms = ttl;
            result.cache_scope = scope;
        }))
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let catalog = self.catalog(&context).await?;
        let cursor = request
            .as_ref()
            .and_then(|request| request.cursor.as_deref());
        let (prompts, next) = served::page(&catalog.prompts, cursor)?;
        let mut result = ListPromptsResult::with_all_items(served::entries(
            prompts.iter().map(|prompt| prompt.to_mcp()),
        ));
        result.next_cursor = next;
        Ok(cacheable(result, &context, |result, ttl, scope| {
            result.ttl_ms = ttl;
            result.cache_scope = scope;
        }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let session = session_of(&context)?;
        let uri = request.uri.clone();
        let ask = Ask {
            session_id: &session,
            method: "resources/read",
            target: &uri,
            params: request,
        };
        let result: ReadResourceResult = self.ask(ask, &context).await?;
        Ok(result.into())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let session = session_of(&context)?;
        let name = request.name.clone();
        let ask = Ask {
            session_id: &session,
            method: "prompts/get",
            target: &name,
            params: request,
        };
        let result: GetPromptResult = self.ask(ask, &context).await?;
        Ok(result.into())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let session = session_of(&context)?;
        let target = match &request.r#ref {
            Reference::Prompt(prompt) => prompt.name.clone(),
            Reference::Resource(resource) => resource.uri.clone(),
            // A kind of reference newer than this build: the app decides.
            _ => String::new(),
        };
        let ask = Ask {
            session_id: &session,
            method: "completion/complete",
            target: &target,
            params: request,
        };
        self.ask(ask, &context).await
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        // Every change a session has is one a client may hear of; rmcp
        // keeps the categories to those requested and advertised.
        Some(requested.clone())
    }

    /// `subscriptions/listen` (2026-07-28): the session's changes, for as
    /// long as the client holds the request open.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let session = session_of(context.request_context())?;
        let mut changes = self
            .hub
            .watch(&session)
            .await
            .map_err(|error| McpError::invalid_request(error.to_string(), None))?;
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(change) => {
                        if let Some(notification) = served::change_notification(&change) {
                            // Categories the client did not ask for are refused
                            // by the sink; nothing to do about those.
                            let _ = context.sink().send(notification).await;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    // Logging is deprecated from MCP 2026-07-28 (see `super::logging`).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let session = session_of(&context)?;
        let level = super::logging::level_of(&request.level)
            .ok_or_else(|| McpError::invalid_params("unknown log level", None))?;
        self.hub
            .set_log_level(&session, level)
            .await
            .map_err(|error| McpError::invalid_request(error.to_string(), None))
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // The session must exist; updates reach the streams that can carry
        // them (docs/mcp.md, "Resources and prompts").
        self.catalog(&context).await.map(drop)
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.catalog(&context).await.map(drop)
    }

    /// A method the proxy does not serve. rmcp's own answer is the method
    /// itself, in full, and rmcp logs the answer at WARN: a 100 KB method
    /// came back whole and filled the log. Here the method is quoted cut
    /// short.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(McpError::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!(
                "Method not found: this server does not serve {}",
                escape::quoted(&request.method)
            ),
            None,
        ))
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
        let token = context.meta.get_progress_token();
        let log_level = served::log_level(&self.hub, &session, &context.meta);
        // Every call listens: the app may ask its client something.
        let progress = Some(Progress::Notify {
            token,
            log_level,
            peer: context.peer.clone(),
            askable: served::askable(&context, true),
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
        let traced = traced.unwrap_or_else(RequestTrace::none);
        let jsonrpc_id = serde_json::to_string(&context.id).unwrap_or_default();
        let mut call = ToolCall::from_request(&session, jsonrpc_id, request, client);
        call.peer = traced.peer;
        call.trace_parent = traced.trace_parent;
        call.caller = traced.caller;
        let span = traced.span;
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
