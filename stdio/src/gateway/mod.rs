//! Gateway mode: the OpenClaw Gateway's own tools over stdio MCP, for coding
//! agents (ACP) that spawn MCP servers as child processes.
//!
//! Each `tools/call` becomes `POST {gateway}/tools/invoke` with `{tool, args,
//! sessionKey?}` and the Gateway's bearer token. Tools are data
//! ([`tools`]); settings are resolved once ([`config`]); the Gateway's answers
//! are mapped to MCP results in [`client`].
//!
//! `sessionKey`: every tool gets an optional `sessionKey` argument that is
//! taken out of `args` and sent as the top-level `sessionKey` (falling back to
//! `--session-key` / `OPENCLAW_MCP_SESSION_KEY`), except tools whose own schema
//! declares `sessionKey` (`sessions_send`), which keep it as an argument.

pub mod client;
pub mod config;
pub mod tools;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use client::GatewayClient;
use config::GatewayConfig;
use tools::{SESSION_KEY, ToolDef};

/// The MCP server of gateway mode.
#[derive(Clone)]
pub struct GatewayTools {
    tools: Arc<[ToolDef]>,
    listed: Arc<[rmcp::model::Tool]>,
    client: GatewayClient,
    default_session_key: Option<String>,
}

impl GatewayTools {
    /// A server for the resolved settings.
    pub fn new(config: GatewayConfig) -> Self {
        let listed = config
            .tools
            .iter()
            .map(|tool| {
                rmcp::model::Tool::new(
                    tool.name.clone(),
                    tool.description.clone(),
                    Arc::new(tool.exposed_schema()),
                )
            })
            .collect();
        Self {
            tools: config.tools.into(),
            listed,
            client: GatewayClient::new(config.url, config.token),
            default_session_key: config.default_session_key,
        }
    }
}

impl ServerHandler for GatewayTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "openclaw-proxy-stdio-gateway",
                env!("CARGO_PKG_VERSION"),
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.listed.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = self.tools.iter().find(|tool| tool.name == request.name) else {
            let available: Vec<&str> = self.tools.iter().map(|tool| tool.name.as_str()).collect();
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}: this server offers {}",
                    request.name,
                    available.join(", ")
                ),
                None,
            ));
        };
        let mut args = request.arguments.unwrap_or_default();
        let given = if tool.declares_session_key() {
            None
        } else {
            match args.remove(SESSION_KEY) {
                Some(Value::String(key)) if !key.is_empty() => Some(key),
                _ => None,
            }
        };
        let session_key = given.or_else(|| self.default_session_key.clone());
        Ok(self
            .client
            .invoke(&tool.name, args, session_key)
            .await
            .into())
    }
}

/// Serves the Gateway's tools on stdin/stdout until the client disconnects.
pub async fn run(config: GatewayConfig) -> anyhow::Result<()> {
    tracing::info!(gateway = %config.url, tools = config.tools.len(), "serving the Gateway's tools over stdio");
    let service = GatewayTools::new(config)
        .serve(rmcp::transport::stdio())
        .await?;
    service.waiting().await?;
    Ok(())
}
