//! The smallest complete app: one tool, `echo_text`, one resource,
//! `echo://readme`, and one prompt, `echo_prompt`, served until Ctrl-C.
//!
//! ```sh
//! cargo run -p openclaw-proxy-app --example echo_app -- --proxy-url http://127.0.0.1:8000 [--app-token T]
//! ```
//!
//! Prints the session id on its first line, and each new session id on a
//! line of its own whenever the session is re-created (the proxy restarted);
//! logs go to stderr. Point an MCP client at `{proxy}/v1/mcp/{session id}`.

use clap::Parser;
use openclaw_proxy_app::{
    App, CallContext, GetPromptResult, McpError, Prompt, PromptMessage, ReadRequest, Resource,
    ResourceContents, Tool, ToolError,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Serve an `echo_text` tool through an openclaw-proxy.
#[derive(Parser)]
struct Args {
    /// The proxy's URL (its one port), http:// or https://.
    #[arg(long, env = "OPENCLAW_PROXY_SERVER_URL")]
    proxy_url: String,
    /// The proxy's app token, if it has one.
    #[arg(long, env = "OPENCLAW_PROXY_APP_TOKEN", default_value = "")]
    app_token: String,
}

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo.
    text: String,
}

#[derive(Serialize)]
struct Echoed {
    echoed_text: String,
}

async fn echo_text(args: EchoArgs, _call: CallContext) -> Result<Echoed, ToolError> {
    Ok(Echoed {
        echoed_text: args.text,
    })
}

/// What the resource holds.
const README: &str = "This app echoes text back: call echo_text with {\"text\": ...}.";

async fn readme(read: ReadRequest, _call: CallContext) -> Result<ResourceContents, McpError> {
    Ok(ResourceContents::text(read.uri(), README).mime_type("text/plain"))
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// The text the agent should have echoed.
    text: String,
}

async fn echo_prompt(args: PromptArgs, _call: CallContext) -> Result<GetPromptResult, McpError> {
    Ok(GetPromptResult::new([PromptMessage::user(format!(
        "Use the echo_text tool to echo this text: {}",
        args.text
    ))]))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let mut serving = App::builder(args.proxy_url)
        .app_token(args.app_token)
        .device_id("echo-app")
        .app_version(env!("CARGO_PKG_VERSION"))
        .tool(Tool::new("echo_text", "Echo the text back.", echo_text))
        .resource(
            Resource::new("echo://readme", "readme", readme)
                .description("What this app does.")
                .mime_type("text/plain"),
        )
        .prompt(Prompt::new(
            "echo_prompt",
            "Ask the agent to echo a text.",
            echo_prompt,
        ))
        .on_session(|session| println!("{}", session.session_id))
        .build()?
        .serve()
        .await?;
    tokio::select! {
        ended = serving.closed() => ended?,
        interrupted = tokio::signal::ctrl_c() => {
            interrupted?;
            serving.shutdown().await?;
        }
    }
    Ok(())
}
