//! `openclaw-proxy-stdio`: MCP over stdin/stdout for clients that spawn MCP
//! servers as child processes.
//!
//! - Default (relay): forwards MCP between stdio and an openclaw-proxy
//!   server's `/v1/mcp`, bound to one session ([`relay`]).
//! - `gateway`: serves the OpenClaw Gateway's tools ([`gateway`]).
//!
//! stdout carries only MCP messages; logs go to stderr (`RUST_LOG`, default
//! `warn`). Every setting has an environment variable OpenClaw passes to stdio
//! servers unchanged (none of them is on its blocked list). The modes live in
//! the library (`lib.rs`); this file reads the command line and reports how
//! the mode ended: status 0 when stdin closed, 1 when the mode failed (stdout
//! gone included), 2 for bad settings.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use openclaw_proxy_stdio::limits::LimitArgs;
use openclaw_proxy_stdio::{gateway, relay};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    relay: RelayArgs,
}

#[derive(Debug, Subcommand)]
enum Mode {
    /// Serve the OpenClaw Gateway's tools (POST {gateway}/tools/invoke).
    Gateway(gateway::config::GatewayArgs),
}

/// Relay mode (default): one session of an openclaw-proxy server over stdio.
#[derive(Debug, clap::Args)]
struct RelayArgs {
    /// Base URL of the openclaw-proxy HTTP edge.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_SERVER_URL",
        default_value = "http://127.0.0.1:8000"
    )]
    proxy_base_url: String,
    /// The OpenClaw bearer token of the server's /v1/mcp.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OPENCLAW_TOKEN",
        default_value = "",
        hide_env_values = true
    )]
    openclaw_token: String,
    /// The session to relay when `initialize` carries no `mcpSessionId`.
    #[arg(long, env = "OPENCLAW_PROXY_SESSION_ID")]
    session_id: Option<String>,
    #[command(flatten)]
    limits: LimitArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    openclaw_proxy_stdio::http::install_crypto_provider();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("openclaw-proxy-stdio: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(run(cli));
    // A read of stdin may still be pending on a blocking thread (the client
    // keeps stdin open after stdout failed); do not wait for it.
    runtime.shutdown_background();
    code
}

async fn run(cli: Cli) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let outcome = match cli.mode {
        Some(Mode::Gateway(args)) => match args.resolve() {
            Ok(config) => gateway::run(config).await.map_err(anyhow::Error::from),
            Err(error) => {
                eprintln!("openclaw-proxy-stdio gateway: {error}");
                return ExitCode::from(2);
            }
        },
        None => {
            let config = relay::RelayConfig {
                server_url: cli.relay.proxy_base_url.trim_end_matches('/').to_owned(),
                token: cli.relay.openclaw_token.trim().to_owned(),
                session_id: cli.relay.session_id.map(|id| id.trim().to_owned()),
                limits: cli.relay.limits.resolve(),
            };
            relay::run(config).await.map_err(anyhow::Error::from)
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("openclaw-proxy-stdio: {error:#}");
            ExitCode::FAILURE
        }
    }
}
