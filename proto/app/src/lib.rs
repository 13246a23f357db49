//! The app side of openclaw-proxy: make a native app's tools reachable by an
//! AI agent. An app declares its [`Tool`]s (async handlers with typed
//! arguments and results) and calls [`App::serve`]; the crate creates the
//! session, keeps its bridge attached through network loss and proxy
//! restarts (a new session is reported through [`AppBuilder::on_session`]),
//! runs calls concurrently with progress and cancellation, and
//! [`Serving::shutdown`] deletes the session. Beside tools it may serve
//! resources, resource templates, prompts and completions
//! ([`AppBuilder::resource`], [`AppBuilder::resource_template`],
//! [`AppBuilder::prompt`], [`AppBuilder::completion`]), and its handlers may
//! log to the caller ([`CallContext::log`]). In full, with the example app
//! to run against a live proxy: `docs/writing-an-app.md`.
//!
//! ```
//! use openclaw_proxy_app::{App, CallContext, Tool, ToolError};
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct EchoArgs {
//!     /// The text to echo.
//!     text: String,
//! }
//!
//! #[derive(Serialize)]
//! struct Echoed {
//!     echoed_text: String,
//! }
//!
//! async fn echo(args: EchoArgs, _call: CallContext) -> Result<Echoed, ToolError> {
//!     Ok(Echoed { echoed_text: args.text })
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // A real proxy on a free port, so that this example runs as a test.
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! # let proxy_url = format!("http://{}", listener.local_addr()?);
//! # let hub = openclaw_proxy_core::Hub::new(openclaw_proxy_core::CoreConfig {
//! #     app_token: openclaw_proxy_core::BearerToken::new("app-secret"),
//! #     ..Default::default()
//! # });
//! # let edge = openclaw_proxy_edge::EdgeConfig::default();
//! # tokio::spawn(openclaw_proxy_edge::serve(listener, hub, edge, std::future::pending()));
//! let serving = App::builder(proxy_url) // "http://127.0.0.1:8000", or https://
//!     .app_token("app-secret")
//!     .tool(Tool::new("echo_text", "Echo the text back.", echo))
//!     .on_session(|session| println!("MCP URL: {}", session.mcp_url))
//!     .build()?
//!     .serve()
//!     .await?;
//! // The tool is reachable at the MCP URL until shutdown; an app would wait
//! // here, for instance with `tokio::signal::ctrl_c().await?`.
//! serving.shutdown().await?; // deletes the session
//! # Ok(())
//! # }
//! ```
//!

mod app;
mod call;
mod caller;
mod completion;
mod content;
mod declarations;
mod error;
mod mcp;
mod mcp_error;
mod prompt;
mod proxy;
mod resource;
mod tool;
mod tool_call;
mod uri_template;

pub use app::{App, AppBuilder, Serving};
pub use call::{
    AskError, CallContext, CancelReason, ClientInfo, ElicitAction, ElicitResult, Elicitation,
    LogLevel, Root, SampleResult, Sampling,
};
pub use caller::{Caller, CallerKind};
pub use completion::{
    Completion, CompletionOutput, CompletionRef, CompletionRequest, MAX_COMPLETION_VALUES,
};
pub use content::{Annotations, Content, Icon, ResourceContents, ResourceLink, Role};
pub use declarations::Update;
pub use error::AppError;
pub use mcp_error::McpError;
pub use openclaw_proxy_proto::tools::{ClientCapability, TaskSupport};
pub use prompt::{GetPromptResult, Prompt, PromptArgument, PromptMessage, PromptOutput};
pub use proxy::SessionInfo;
pub use resource::{
    CacheScope, ReadOutput, ReadRequest, ReadResourceResult, Resource, ResourceTemplate,
};
pub use tool::{Tool, ToolError};

/// Re-exported so that apps derive schemas with the same version.
pub use schemars;
