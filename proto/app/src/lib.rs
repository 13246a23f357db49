//! The app side of openclaw-proxy: make a native app's tools reachable by an
//! AI agent, in a few lines, with the hard parts of the bridge done once.
//!
//! An app declares its [`Tool`]s, each an async handler with typed arguments
//! and result, and calls [`App::serve`]. The crate creates the session over
//! gRPC, attaches the bridge (`BridgeService.Attach`), answers pings, runs
//! calls concurrently up to a bound, carries progress reports, and keeps the
//! bridge up: after a network loss it reconnects with exponential backoff and
//! jitter and takes its session back; when the proxy no longer knows the
//! session (it restarted, or the session expired) it creates a new one and
//! tells the app through [`AppBuilder::on_session`]. A handler that fails or
//! panics becomes an `isError` result; the app keeps serving.
//! [`Serving::shutdown`] deletes the session.
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
//! `cargo run -p openclaw-proxy-app --example echo_app -- --proxy-url URL`
//! runs the same app against a live proxy. A handler that can take long
//! should report progress with [`CallContext::progress`] and stop when
//! [`CallContext::cancelled`] completes: that happens when the proxy cancels
//! the call (its client gave up or its time ran out), when the bridge that
//! delivered the call is lost (the proxy has then already failed the call),
//! or at shutdown. [`CallContext::log`] writes a log record the MCP client
//! sees beside the call, when it asked for that level.
//!
//! ## Beyond tools: resources, prompts, completions
//!
//! An app is more than a bag of functions: a notes app has documents an
//! agent should read, a support app has ready-made prompts. Declare them
//! beside the tools ([`AppBuilder::resource`], [`AppBuilder::resource_template`],
//! [`AppBuilder::prompt`], [`AppBuilder::completion`]), each with a typed
//! async handler. The proxy lists them to MCP clients from the declaration,
//! without asking the app; `resources/read`, `prompts/get` and
//! `completion/complete` travel over the bridge as one generic request that
//! this crate routes to the right handler, so an app never parses a params
//! object nor writes a JSON-RPC error by hand. They run like tool calls:
//! concurrently, within the same limits, cancellable.
//!
//! ```
//! use openclaw_proxy_app::{
//!     App, CallContext, GetPromptResult, McpError, Prompt, PromptMessage, ReadRequest,
//!     Resource, ResourceContents, ResourceTemplate,
//! };
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct SummariseArgs {
//!     /// The note to summarise.
//!     note: String,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), openclaw_proxy_app::AppError> {
//! let builder = App::builder("http://127.0.0.1:8000")
//!     .resource(
//!         Resource::new("notes:///index", "index", |read: ReadRequest, _call: CallContext| async move {
//!             Ok::<_, McpError>(ResourceContents::text(read.uri(), "welcome, plans").mime_type("text/plain"))
//!         })
//!         .description("The list of notes."),
//!     )
//!     .resource_template(ResourceTemplate::new(
//!         "notes:///{name}",
//!         "note",
//!         |read: ReadRequest, _call: CallContext| async move {
//!             match read.variable("name") {
//!                 Some("welcome") => Ok(ResourceContents::text(read.uri(), "Hello!")),
//!                 _ => Err(McpError::resource_not_found(read.uri())),
//!             }
//!         },
//!     ))
//!     .prompt(Prompt::new(
//!         "summarise_note",
//!         "Summarise one note.",
//!         |args: SummariseArgs, _call: CallContext| async move {
//!             Ok::<_, McpError>(GetPromptResult::new([PromptMessage::user(format!(
//!                 "Summarise the note {} in three lines.",
//!                 args.note
//!             ))]))
//!         },
//!     ));
//! let app = builder.build()?; // checks every declaration; serve() as above
//! # drop(app);
//! # Ok(())
//! # }
//! ```
//!
//! Handlers return typed results ([`ResourceContents`], [`GetPromptResult`]
//! with every MCP content type in [`Content`], [`Completion`]) or, for
//! anything those do not cover, the raw result object as a
//! `serde_json::Value`. A URI that no resource or template serves is
//! answered with the resource-not-found error the specification names,
//! carrying the URI; an unknown prompt or a missing argument with "invalid
//! params"; any other method with "method not found". While serving, the
//! app may replace its declarations ([`Serving::update`]) and announce that
//! a resource changed ([`Serving::resource_updated`]).
//!
//! Layout: `tool`, `resource` (with `uri_template`), `prompt` and
//! `completion` declare what an app offers, `content` the typed pieces of
//! results, `declarations` checks and indexes them as one set; `call` runs
//! one call (progress, logs, cancellation, panics) and `mcp` one MCP
//! request; `proxy` holds the channel and the three RPCs, `app` is the
//! builder and the serve loop, `error` the failures that retrying cannot fix.

mod app;
mod call;
mod completion;
mod content;
mod declarations;
mod error;
mod mcp;
mod prompt;
mod proxy;
mod resource;
mod tool;
mod uri_template;

pub use app::{App, AppBuilder, Serving};
pub use call::{CallContext, CancelReason, ClientInfo, LogLevel};
pub use completion::{
    Completion, CompletionOutput, CompletionRef, CompletionRequest, MAX_COMPLETION_VALUES,
};
pub use content::{Annotations, Content, Icon, ResourceContents, ResourceLink, Role};
pub use declarations::Update;
pub use error::AppError;
pub use mcp::McpError;
pub use prompt::{GetPromptResult, Prompt, PromptArgument, PromptMessage, PromptOutput};
pub use proxy::SessionInfo;
pub use resource::{
    CacheScope, ReadOutput, ReadRequest, ReadResourceResult, Resource, ResourceTemplate,
};
pub use tool::{Tool, ToolError};

/// Re-exported so that apps derive schemas with the same version.
pub use schemars;
