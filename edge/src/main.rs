//! `openclaw-proxy`: serves gRPC and the HTTP edge on one port.
//!
//! Run with no configuration for local development (`127.0.0.1:8000`, no
//! tokens); see `--help` for every setting and its environment variable.

use anyhow::Context;
use clap::Parser;
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::cluster::Cluster;
use openclaw_proxy_edge::{ServerConfig, serve, serve_metrics, telemetry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// See edge/Cargo.toml for why. Building without the default `mimalloc`
/// feature leaves the system allocator, which heap profilers (heaptrack)
/// can see into.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long `--probe` waits to connect, and then for the answer.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

fn main() -> anyhow::Result<()> {
    let config = ServerConfig::parse();
    if let Some(url) = &config.probe {
        // A health check, not a server: no runtime, no logs, exit 0 or 1.
        return openclaw_proxy_edge::self_probe::probe(url, PROBE_TIMEOUT)
            .map_err(anyhow::Error::msg);
    }
    // The runtime is built here, not by `#[tokio::main]`, because its size
    // is a setting. 0 keeps tokio's default: one thread per CPU the process
    // may use (or `TOKIO_WORKER_THREADS`).
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if config.worker_threads > 0 {
        runtime.worker_threads(config.worker_threads.into());
    }
    runtime
        .build()
        .context("cannot start the runtime (OPENCLAW_PROXY_WORKER_THREADS)")?
        .block_on(run(config))
}

async fn run(config: ServerConfig) -> anyhow::Result<()> {
    let telemetry = telemetry::init(config.log_format)?;
    if telemetry.exporting() {
        tracing::info!("exporting traces over OTLP");
    }
    config.oauth.settings()?;
    config.oauth_audience_rule()?;
    if let Some(warning) = config.exposure()? {
        tracing::warn!("{warning}");
    }
    if let Some(warning) = config.request_state_warning() {
        tracing::warn!("{warning}");
    }
    // Settings that cannot work stop the server before it listens.
    let policy = config.policy()?;
    if let Some(policy) = &policy {
        let current = policy.current();
        tracing::info!(
            sha256 = current.sha256(),
            rules = current.rule_names().len(),
            "policy file applies"
        );
    }
    let hub = match config.cluster() {
        None => Hub::new(config.core()),
        Some(settings) => {
            let cluster = Cluster::connect(settings, &config.core()).await?;
            tracing::info!(node = cluster.node_id(), "cluster mode on NATS");
            cluster.hub(config.core())
        }
    };
    let stop = CancellationToken::new();
    let signal = shutdown_signal();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            signal.await;
            stop.cancel();
        }
    });
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    let metrics = match config.metrics_listen {
        Some(address) => {
            let listener = TcpListener::bind(address).await.with_context(|| {
                format!("cannot listen on {address} (OPENCLAW_PROXY_METRICS_LISTEN)")
            })?;
            tracing::info!(address = %listener.local_addr()?, "metrics listening (GET /metrics, no token)");
            let served = serve_metrics(listener, hub.clone(), stop.clone().cancelled_owned());
            Some(tokio::spawn(served))
        }
        None => None,
    };
    tracing::info!(address = %listener.local_addr()?, "openclaw-proxy listening (HTTP, WebSocket and gRPC)");
    let mut edge = config.edge();
    edge.policy = policy;
    serve(listener, hub, edge, stop.cancelled_owned()).await?;
    if let Some(metrics) = metrics {
        metrics.abort();
    }
    tracing::info!("stopped");
    telemetry.shutdown();
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
