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
//! [`CallContext::cancelled`] completes: today that happens when the bridge
//! that delivered the call is lost (the proxy has then already failed the
//! call) or at shutdown.
//!
//! Layout: `tool` declares tools, `call` runs one call (progress,
//! cancellation, panics), `proxy` holds the channel and the three RPCs,
//! `app` is the builder and the serve loop, `error` the failures that
//! retrying cannot fix.

mod app;
mod call;
mod error;
mod proxy;
mod tool;

pub use app::{App, AppBuilder, Serving};
pub use call::{CallContext, CancelReason};
pub use error::AppError;
pub use proxy::SessionInfo;
pub use tool::{Tool, ToolError};

/// Re-exported so that apps derive schemas with the same version.
pub use schemars;
