//! Gateway mode: the OpenClaw Gateway's own tools over stdio MCP, for coding
//! agents (ACP) that spawn MCP servers as child processes.
//!
//! Each `tools/call` becomes `POST {gateway}/tools/invoke` with `{tool, args,
//! sessionKey?}` and the Gateway's bearer token. Which tools: at start,
//! [`discovery`] asks the Gateway what it serves, [`policy`] removes what
//! `/tools/invoke` would refuse, and [`tools::assemble`] gives each tool a
//! schema (ours when we know the tool, a permissive one otherwise); when
//! discovery is off or impossible the built-in list is served and stderr says
//! why. A tool that still answers 404 `not_found` is dropped at its first call
//! and the client gets `notifications/tools/list_changed`, so the list heals
//! itself when the Gateway's rules drift from [`policy`]. Settings are
//! resolved once ([`config`]); answers are mapped to MCP results in
//! [`client`].
//!
//! stdin and stdout go through [`front`] rather than rmcp's stdio transport:
//! every bad line is answered, a duplicate request id is refused, and a
//! failed stdout write ends the process.
//!
//! `sessionKey`: every tool gets an optional `sessionKey` argument that is
//! taken out of `args` and sent as the top-level `sessionKey` (falling back to
//! `--session-key` / `OPENCLAW_MCP_SESSION_KEY`), except tools whose own schema
//! declares `sessionKey` (`sessions_send`, `sessions_history`), which keep it
//! as an argument.

pub mod client;
pub mod config;
pub mod discovery;
pub mod front;
pub mod policy;
pub mod tools;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ContentBlock, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

use client::GatewayClient;
use config::GatewayConfig;
use discovery::{Discovery, GatewayTool, Inventory};
use front::Front;
use tools::{SESSION_KEY, ToolDef};

/// How long discovery may take before the built-in list is served instead.
const DISCOVERY_DEADLINE: Duration = Duration::from_secs(10);

/// The session key discovery asks about when none is configured: the one
/// `/tools/invoke` uses for calls without a `sessionKey`.
const MAIN_SESSION_KEY: &str = "main";

/// The tools served, with their MCP form; replaced whole when one is dropped.
struct Served {
    tools: Vec<ToolDef>,
    listed: Vec<rmcp::model::Tool>,
}

impl Served {
    fn new(tools: Vec<ToolDef>) -> Self {
        let listed = tools
            .iter()
            .map(|tool| {
                rmcp::model::Tool::new(
                    tool.name.clone(),
                    tool.description.clone(),
                    Arc::new(tool.exposed_schema()),
                )
            })
            .collect();
        Self { tools, listed }
    }
}

/// The MCP server of gateway mode.
#[derive(Clone)]
pub struct GatewayTools {
    served: Arc<RwLock<Arc<Served>>>,
    /// True once the tool list is settled (discovery done or skipped).
    ready: watch::Receiver<bool>,
    client: GatewayClient,
    default_session_key: Option<String>,
}

impl GatewayTools {
    /// A server whose tool list is being resolved ([`resolve_tools`]) by the
    /// returned task: `initialize` is answered at once (clients give a
    /// server a few seconds to start), `tools/list` and `tools/call` wait
    /// for the list.
    pub fn start(
        config: GatewayConfig,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), crate::http::ClientError> {
        let (settled, ready) = watch::channel(false);
        let server = Self {
            served: Arc::new(RwLock::new(Arc::new(Served::new(Vec::new())))),
            ready,
            client: GatewayClient::new(config.url.clone(), config.token.clone(), config.limits)?,
            default_session_key: config.default_session_key.clone(),
        };
        let served = server.served.clone();
        let resolving = tokio::spawn(async move {
            let tools = resolve_tools(&config).await;
            tracing::info!(gateway = %config.url, tools = tools.len(), "serving the Gateway's tools over stdio");
            *served
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(Served::new(tools));
            let _ = settled.send(true);
        });
        Ok((server, resolving))
    }

    /// The tools served, once settled.
    async fn served(&self) -> Arc<Served> {
        // An error means the resolving task is gone; serve what there is.
        let _ = self.ready.clone().wait_for(|ready| *ready).await;
        self.served
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Removes `name`; whether it was still there.
    fn drop_tool(&self, name: &str) -> bool {
        let mut served = self
            .served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !served.tools.iter().any(|tool| tool.name == name) {
            return false;
        }
        let rest = served
            .tools
            .iter()
            .filter(|tool| tool.name != name)
            .cloned()
            .collect();
        *served = Arc::new(Served::new(rest));
        true
    }
}

impl ServerHandler for GatewayTools {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
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
        Ok(ListToolsResult::with_all_items(
            self.served().await.listed.clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let served = self.served().await;
        let Some(tool) = served.tools.iter().find(|tool| tool.name == request.name) else {
            let available: Vec<&str> = served.tools.iter().map(|tool| tool.name.as_str()).collect();
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
        let mut invoked = self.client.invoke(&tool.name, args, session_key).await;
        if invoked.not_found && self.drop_tool(&tool.name) {
            tracing::warn!(
                tool = Outside::new(&tool.name).field(),
                "the Gateway does not serve this tool over HTTP (404): removed from the list"
            );
            invoked.result.content.push(ContentBlock::text(format!(
                "{:?} has been removed from this server's tool list.",
                tool.name
            )));
            if let Err(error) = context.peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "cannot send notifications/tools/list_changed");
            }
        }
        Ok(invoked.result.into())
    }
}

/// The tools to serve: discovered when possible, else the built-ins; the
/// reasons and notes go to stderr, where an MCP client shows a server's log.
pub async fn resolve_tools(config: &GatewayConfig) -> Vec<ToolDef> {
    let discovered = if config.discovery {
        let session_key = config
            .default_session_key
            .as_deref()
            .unwrap_or(MAIN_SESSION_KEY);
        match discovery::discover(&config.url, &config.token, session_key, DISCOVERY_DEADLINE).await
        {
            Ok(found) => Some(servable(found)),
            Err(error) => {
                eprintln!(
                    "openclaw-proxy-stdio gateway: tool discovery is not possible, serving the built-in tool list: {error}"
                );
                None
            }
        }
    } else {
        None
    };
    let (tools, notes) = tools::assemble(
        &config.builtins,
        discovered.as_deref(),
        config.selection.as_deref(),
        &config.custom,
    );
    for note in notes {
        eprintln!("openclaw-proxy-stdio gateway: {note}");
    }
    tools
}

/// The discovered tools `/tools/invoke` would not refuse; the notes and what
/// was left out go to stderr.
fn servable(found: Discovery) -> Vec<GatewayTool> {
    for note in &found.notes {
        eprintln!("openclaw-proxy-stdio gateway: {note}");
    }
    let settings = found.http_settings.unwrap_or_default();
    let mut refused = Vec::new();
    let tools: Vec<GatewayTool> = found
        .tools
        .into_iter()
        .filter(|tool| match policy::refusal(&tool.name, &settings) {
            Some(reason) => {
                refused.push(format!("{} ({reason})", tool.name));
                false
            }
            None => true,
        })
        .collect();
    let from = match &found.inventory {
        Inventory::Effective(key) => format!("tools.effective for session {key:?}"),
        Inventory::Catalog => "tools.catalog".to_owned(),
    };
    let refused = refused.join(", ");
    tracing::info!(
        from,
        served = tools.len(),
        refused = Outside::within(&refused, TEXT_LIMIT).field(),
        "discovered the Gateway's tools"
    );
    tools
}

/// Why gateway mode stopped before stdin closed.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Client(#[from] crate::http::ClientError),
    #[error(transparent)]
    Stdout(#[from] crate::wire::WriteFailed),
    #[error("MCP session failed: {0}")]
    Mcp(String),
}

/// Serves the Gateway's tools on stdin/stdout until the client disconnects.
pub async fn run(config: GatewayConfig) -> Result<(), GatewayError> {
    run_with(config, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Serves on any reader and writer (stdin/stdout in production). Returns when
/// `input` ends, or at once with [`GatewayError::Stdout`] when `output` fails.
pub async fn run_with<R, W>(config: GatewayConfig, input: R, output: W) -> Result<(), GatewayError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max_line_bytes = config.limits.max_line_bytes;
    let (server, resolving) = GatewayTools::start(config)?;
    let (out, mut writer) = crate::wire::output(output);
    let (front, reader) = Front::start(input, max_line_bytes, out);
    let serving = async {
        let service = server
            .serve(front)
            .await
            .map_err(|error| GatewayError::Mcp(error.to_string()))?;
        service
            .waiting()
            .await
            .map_err(|error| GatewayError::Mcp(error.to_string()))?;
        Ok::<(), GatewayError>(())
    };
    let outcome = tokio::select! {
        served = serving => served,
        written = writer.wait() => written.map_err(GatewayError::from),
    };
    reader.stop();
    if let Err(GatewayError::Stdout(_)) = outcome {
        // Nobody reads any more: stop at once.
        resolving.abort();
        return outcome;
    }
    // A client that leaves during discovery still gets its outcome on
    // stderr (bounded by the discovery deadline).
    let _ = resolving.await;
    outcome?;
    writer.wait().await?;
    Ok(())
}
