//! `openclaw-proxy`: serves gRPC and the HTTP edge on one port.
//!
//! Run with no configuration for local development (`127.0.0.1:8000`, no
//! tokens); see `--help` for every setting and its environment variable.

use anyhow::Context;
use clap::Parser;
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::cluster::Cluster;
use openclaw_proxy_edge::{ServerConfig, serve};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// See edge/Cargo.toml for why.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = ServerConfig::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some(warning) = config.exposure()? {
        tracing::warn!("{warning}");
    }
    // Settings that cannot work stop the server before it listens.
    let hub = match config.cluster() {
        None => Hub::new(config.core()),
        Some(settings) => {
            let cluster = Cluster::connect(settings, &config.core()).await?;
            tracing::info!(node = cluster.node_id(), "cluster mode on NATS");
            cluster.hub(config.core())
        }
    };
    let shutdown = shutdown_signal();
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    tracing::info!(address = %listener.local_addr()?, "openclaw-proxy listening (HTTP, WebSocket and gRPC)");
    serve(listener, hub, config.edge(), shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM. The SIGTERM handler is installed when this
/// is called, not when first polled: a SIGTERM right after the server says it
/// listens is then a graceful stop, not the default kill.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
    async move {
        let ctrl_c = async {
            if let Err(error) = tokio::signal::ctrl_c().await {
                tracing::error!(%error, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
        };
        #[cfg(unix)]
        let terminate = async {
            match terminate {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(error) => {
                    tracing::error!(%error, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            () = ctrl_c => {},
            () = terminate => {},
        }
    }
}
