//! The server: gRPC and HTTP on one listener, and its graceful shutdown.
//!
//! gRPC (HTTP/2 cleartext) and the HTTP edge (HTTP/1.1 or HTTP/2) share one
//! port: tonic's routes are merged into the axum router and hyper detects the
//! protocol per connection.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::serve::ListenerExt;
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::grpc::GrpcService;
use tokio::net::TcpListener;

use crate::config::EdgeConfig;
use crate::http;

/// How long shutdown waits for connections to finish after the bridges ended.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not build gRPC reflection: {0}")]
    Reflection(#[from] openclaw_proxy_core::grpc::ReflectionError),
    #[error("the listener failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The whole service as one router: the HTTP edge and the gRPC services.
pub async fn app(hub: Hub, edge: EdgeConfig) -> Result<Router, ServeError> {
    let grpc = GrpcService::new(hub.clone()).routes().await?;
    Ok(http::router(hub, edge).merge(grpc.prepare().into_axum_router()))
}

/// Serves `hub` on `listener` until `shutdown` resolves; then ends every
/// bridge (their calls in flight fail at once) and drains connections.
pub async fn serve(
    listener: TcpListener,
    hub: Hub,
    edge: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let router = app(hub.clone(), edge).await?;
    let sweeper = tokio::spawn(hub.clone().run_sweeper());
    let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
    let stop_hub = hub.clone();
    // Small JSON frames and responses: send each at once rather than waiting
    // for Nagle's algorithm to coalesce them.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    let server = axum::serve(listener, router).with_graceful_shutdown(async move {
        shutdown.await;
        tracing::info!("shutting down: ending bridges and draining connections");
        stop_hub.shutdown();
        let _ = drained_tx.send(());
    });
    let server = async move { server.await };
    tokio::pin!(server);
    let result = tokio::select! {
        result = &mut server => result,
        () = async {
            let _ = drained_rx.await;
            tokio::time::sleep(DRAIN_LIMIT).await;
        } => {
            tracing::warn!("connections still open {DRAIN_LIMIT:?} after shutdown; closing them");
            Ok(())
        }
    };
    hub.shutdown();
    sweeper.abort();
    result.map_err(ServeError::from)
}
