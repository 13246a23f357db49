//! The server: gRPC and HTTP on one listener, and its graceful shutdown.
//!
//! gRPC (HTTP/2 cleartext) and the HTTP edge (HTTP/1.1 or HTTP/2) share one
//! port: tonic's routes are merged into the axum router and hyper detects the
//! protocol per connection.
//!
//! Connections are served by hyper-util's server builder rather than
//! `axum::serve`, because that is where the knobs a server exposed to the
//! internet needs live (header-read timeout, keep-alive, HTTP/2 limits), and
//! because the accept loop is the one place that knows both ends of a
//! connection: every request carries a [`ConnectionInfo`] in its extensions,
//! so answer URLs can name the address the client really reached.
//!
//! With [`crate::tls`] configured, each accepted connection first completes a
//! TLS handshake (in its own task, under the header-read limit) and is then
//! served the same way; ALPN picks HTTP/2 or HTTP/1.1. The `Host`/`Origin`
//! guard wraps the whole router, gRPC included, so it runs before any route.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use openclaw_proxy_core::grpc::GrpcService;
use openclaw_proxy_core::{ClientAddr, Hub};
use tokio::net::TcpListener;
use tower_service::Service;

use crate::config::EdgeConfig;
use crate::http;
use crate::tls::Tls;

/// How long shutdown waits for connections to finish after the bridges ended.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// A client that has not sent a whole request header by then is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not build gRPC reflection: {0}")]
    Reflection(#[from] openclaw_proxy_core::grpc::ReflectionError),
    #[error("the listener failed: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// Both ends of the connection a request arrived on.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionInfo {
    /// The server's address as the client reached it.
    pub local: SocketAddr,
    /// The client's address.
    pub remote: SocketAddr,
    /// Whether the connection is TLS (answer URLs then say `https`/`wss`).
    pub tls: bool,
}

/// The whole service as one router: the HTTP edge and the gRPC services,
/// with one fallback that answers each protocol in its own terms.
pub async fn app(hub: Hub, edge: EdgeConfig) -> Result<Router, ServeError> {
    let grpc = GrpcService::new(hub.clone()).routes().await?;
    let guard = Arc::new(http::guard::HostGuard::new(&edge));
    Ok(http::router(hub, edge)
        .merge(grpc.prepare().into_axum_router())
        .fallback(http::unknown_route)
        // Outermost: Host and Origin are checked before any route runs.
        .layer(axum::middleware::from_fn_with_state(
            guard,
            http::guard::enforce,
        )))
}

/// Serves `hub` on `listener` until `shutdown` resolves; then ends every
/// bridge (their calls in flight fail at once) and drains connections.
pub async fn serve(
    listener: TcpListener,
    hub: Hub,
    edge: EdgeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let tls = edge.tls.clone().map(Tls::load).transpose()?.map(Arc::new);
    let reloader = tls
        .clone()
        .map(|tls| tokio::spawn(tls.reload_when_changed()));
    let streams = edge
        .http2_max_concurrent_streams
        .unwrap_or(crate::config::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS);
    let delay = edge.shutdown_delay;
    let router = app(hub.clone(), edge).await?;
    let sweeper = tokio::spawn(hub.clone().run_sweeper());
    let builder = connection_builder(streams);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    // After the signal, with a delay configured: serving on, not ready.
    let mut draining_until: Option<tokio::time::Instant> = None;
    loop {
        let (stream, remote) = tokio::select! {
            () = &mut shutdown, if draining_until.is_none() => {
                if delay.is_zero() {
                    break;
                }
                tracing::info!("shutting down in {delay:?}: not ready meanwhile, still serving");
                hub.begin_drain();
                draining_until = Some(tokio::time::Instant::now() + delay);
                continue;
            }
            () = sleep_until_some(draining_until) => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Per-connection failures (the peer reset before accept,
                    // too many open files) must not stop the server.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Small JSON frames and responses: send each at once rather than
        // waiting for Nagle's algorithm to coalesce them.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let info = ConnectionInfo {
            local: stream.local_addr().unwrap_or(remote),
            remote,
            tls: tls.is_some(),
        };
        let router = router.clone();
        let service =
            hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(info);
                request.extensions_mut().insert(ClientAddr(info.remote));
                let mut router = router.clone();
                async move {
                    let response: Result<_, Infallible> = router.call(request.map(Body::new)).await;
                    response
                }
            });
        let Some(tls) = &tls else {
            let connection = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .into_owned();
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "connection ended with an error");
                }
            });
            continue;
        };
        let (acceptor, builder, watcher) =
            (tls.acceptor.clone(), builder.clone(), graceful.watcher());
        // The handshake runs in the connection's task, not in the accept
        // loop, and has the same limit as reading a request header.
        tokio::spawn(async move {
            let stream =
                match tokio::time::timeout(HEADER_READ_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => stream,
                    Ok(Err(error)) => {
                        tracing::debug!(%error, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake not finished in time");
                        return;
                    }
                };
            let connection = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .into_owned();
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    drop(listener);
    tracing::info!("shutting down: ending bridges and draining connections");
    hub.shutdown();
    if tokio::time::timeout(DRAIN_LIMIT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open {DRAIN_LIMIT:?} after shutdown; closing them");
    }
    sweeper.abort();
    Ok(())
}

/// Serves `GET /metrics` without a token on its own listener
/// (`OPENCLAW_PROXY_METRICS_LISTEN`) until `shutdown` resolves: for a
/// Prometheus that scrapes by address on an internal network, apart from
/// the port the world reaches. Every other path is a 404.
pub async fn serve_metrics(
    listener: TcpListener,
    hub: Hub,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let router = Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let hub = hub.clone();
                async move { http::metrics_response(&hub) }
            }),
        )
        .fallback(http::unknown_route);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// hyper's per-connection settings.
fn connection_builder(max_concurrent_streams: u32) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(max_concurrent_streams);
    builder
}
