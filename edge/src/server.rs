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
//! guard checks every request, gRPC included, before the router sees it.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use openclaw_proxy_core::grpc::GrpcService;
use openclaw_proxy_core::{ClientAddr, Hub};
use tokio::net::{TcpListener, TcpStream};
use tower_service::Service;

use crate::config::{ConnectionLimits, EdgeConfig, HeadLimits};
use crate::first_bytes::{Rewind, read_until_known};
use crate::http;
use crate::http::guard::HostGuard;
use crate::http::request::ConnectionInfo;
use crate::idle::{Activity, IdleBody, Kept};
use crate::stall::{Unsent, Watch};
use crate::tls::Tls;

/// How long shutdown waits for connections to finish after the bridges ended.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// Connections over the limit that are still answered (with 429 /
/// `RESOURCE_EXHAUSTED`) rather than dropped unanswered.
const REFUSED_CONNECTIONS_ANSWERED: usize = 1024;

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

/// The whole service as one router: the HTTP edge and the gRPC services,
/// with one fallback that answers each protocol in its own terms. The
/// `Host`/`Origin` guard is not part of it: [`serve`] checks every request
/// before the router sees it.
async fn app(hub: Hub, edge: EdgeConfig) -> Result<Router, ServeError> {
    let grpc = GrpcService::new(hub.clone()).routes().await?;
    Ok(http::router(hub, edge)
        .merge(grpc.prepare().into_axum_router())
        .fallback(http::unknown_route))
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
    let policy_reloader = edge
        .policy
        .clone()
        .map(|policy| tokio::spawn(policy.reload_when_changed(hub.clone())));
    let streams = edge
        .http2_max_concurrent_streams
        .unwrap_or(crate::config::DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS);
    let delay = edge.shutdown_delay;
    let limits = edge.connections.clone();
    let head = edge.head;
    let guard = Arc::new(HostGuard::new(&edge));
    let router = app(hub.clone(), edge).await?;
    let sweeper = tokio::spawn(hub.clone().run_sweeper());
    let connections = Connections {
        builder: connection_builder(streams, &limits, &head),
        graceful: GracefulShutdown::new(),
        tls,
        header_read_timeout: limits.header_read_timeout,
        response_write_timeout: limits.response_write_timeout,
        idle_timeout: limits.idle_timeout,
    };
    let admission = Admission::new(limits.max_connections);
    let unsent = Unsent::new(
        limits.max_unsent_bytes,
        limits.max_unsent_bytes_per_connection,
    );
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
            accepted = accept(&listener) => accepted,
        };
        let Some(permit) = admission.admit() else {
            // Over the limit even for a refusal: no answer at all.
            tracing::debug!(%remote, "connection dropped: too many connections, even refused ones");
            continue;
        };
        let watch = Watch::new(limits.response_write_timeout, unsent.clone());
        let activity = Activity::new(limits.idle_timeout);
        let service = match permit {
            Permit::Serve(permit) => ConnectionService::Serve {
                router: router.clone(),
                guard: guard.clone(),
                watch: watch.clone(),
                activity: activity.clone(),
                info: ConnectionInfo {
                    local: stream.local_addr().unwrap_or(remote),
                    remote,
                    tls: connections.tls.is_some(),
                    trusted_proxy: limits
                        .trusted_proxies
                        .iter()
                        .any(|range| range.contains(remote.ip())),
                },
                body_timeout: limits.body_read_timeout,
                head,
                _permit: Arc::new(permit),
            },
            Permit::Refuse(permit) => ConnectionService::Refuse {
                limit: limits.max_connections,
                _permit: Arc::new(permit),
            },
        };
        connections.spawn(stream, remote, service, Served { watch, activity });
    }
    if let Some(reloader) = policy_reloader {
        reloader.abort();
    }
    if let Some(reloader) = reloader {
        reloader.abort();
    }
    drop(listener);
    tracing::info!("shutting down: ending bridges and draining connections");
    hub.shutdown();
    if tokio::time::timeout(DRAIN_LIMIT, connections.graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open {DRAIN_LIMIT:?} after shutdown; closing them");
    }
    sweeper.abort();
    Ok(())
}

/// What every accepted connection is served with.
struct Connections {
    builder: auto::Builder<TokioExecutor>,
    graceful: GracefulShutdown,
    tls: Option<Arc<Tls>>,
    header_read_timeout: Duration,
    response_write_timeout: Duration,
    idle_timeout: Duration,
}

/// What ends a served connection early: an answer its client leaves unread
/// ([`crate::stall`]), or nothing open for the idle timeout
/// ([`crate::idle`]).
struct Served {
    watch: Arc<Watch>,
    activity: Arc<Activity>,
}

impl Connections {
    /// Serves one accepted connection in a task of its own, after its TLS
    /// handshake when TLS is configured: the handshake runs there, not in
    /// the accept loop, and has the same limit as reading a request header.
    fn spawn(
        &self,
        stream: TcpStream,
        remote: SocketAddr,
        service: ConnectionService,
        ends: Served,
    ) {
        // Small JSON frames and responses: send each at once rather than
        // waiting for Nagle's algorithm to coalesce them.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        let (builder, watcher) = (self.builder.clone(), self.graceful.watcher());
        let limit = self.header_read_timeout;
        let timeouts = (self.response_write_timeout, self.idle_timeout);
        let Some(tls) = &self.tls else {
            tokio::spawn(async move {
                // A client that sends nothing, or part of the HTTP/2
                // preface, never reaches hyper's header-read timer (protocol
                // detection waits first): see `first_bytes`.
                let mut stream = stream;
                let first = match tokio::time::timeout(limit, read_until_known(&mut stream)).await {
                    Ok(Ok(first)) if !first.is_empty() => first,
                    Ok(_) => return,
                    Err(_) => {
                        tracing::debug!(%remote, "connection did not say its protocol in time; closed");
                        return;
                    }
                };
                let stream = Rewind::new(first, stream);
                let connection = builder
                    .serve_connection_with_upgrades(TokioIo::new(stream), service.hyper())
                    .into_owned();
                served(watcher.watch(connection), &ends, remote, timeouts).await;
            });
            return;
        };
        let acceptor = tls.acceptor.clone();
        tokio::spawn(async move {
            // One deadline for the handshake and the first bytes: ALPN is
            // offered, but hyper still reads the bytes to tell the protocol.
            let opened = tokio::time::timeout(limit, async {
                let mut stream = acceptor.accept(stream).await?;
                let first = read_until_known(&mut stream).await?;
                Ok::<_, std::io::Error>((first, stream))
            });
            let stream = match opened.await {
                Ok(Ok((first, stream))) if !first.is_empty() => Rewind::new(first, stream),
                Ok(Ok(_)) => return,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!("TLS handshake or first bytes not in time");
                    return;
                }
            };
            let connection = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service.hyper())
                .into_owned();
            served(watcher.watch(connection), &ends, remote, timeouts).await;
        });
    }
}

/// Serves a connection until it ends, until one of its answers has
/// waited on the client longer than the write limit ([`crate::stall`]), or
/// until it has had nothing open for the idle limit ([`crate::idle`]): the
/// connection is then dropped, and every answer it held with it.
async fn served<E: std::fmt::Display>(
    connection: impl Future<Output = Result<(), E>>,
    ends: &Served,
    remote: SocketAddr,
    (write_limit, idle_limit): (Duration, Duration),
) {
    tokio::select! {
        ended = connection => {
            if let Err(error) = ended {
                tracing::debug!(%error, "connection ended with an error");
            }
        }
        () = ends.watch.stalled() => tracing::info!(
            %remote,
            "connection closed: the client left an answer unread for {write_limit:?} (OPENCLAW_PROXY_RESPONSE_WRITE_TIMEOUT_SECONDS)"
        ),
        () = ends.activity.idle() => tracing::debug!(
            %remote,
            "connection closed: nothing open on it for {idle_limit:?} (OPENCLAW_PROXY_CONNECTION_IDLE_TIMEOUT_SECONDS)"
        ),
    }
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
                async move { http::probe::metrics_response(&hub) }
            }),
        )
        .fallback(http::unknown_route);
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

/// The next connection. Per-connection failures (the peer reset before
/// accept, too many open files) must not stop the server.
async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// What HTTP/2 buffers per stream beyond what the client's window allows:
/// one slice of a watched body ([`crate::stall::SLICE`]) fits; more would
/// only hold memory for a client that does not read.
const HTTP2_MAX_SEND_BUF: usize = crate::stall::SLICE;

/// hyper's per-connection settings.
///
/// hyper starts the HTTP/1 header-read timer whenever it waits for a request
/// head, so the same limit closes idle keep-alive connections. HTTP/2
/// connections (gRPC bridges stay idle for long) are checked with pings
/// instead: a peer that does not answer one in time is gone. A peer that
/// answers pings but reads no answers is closed by the connection's
/// [`Watch`], and the streams it may open at once are bounded
/// (`OPENCLAW_PROXY_HTTP2_MAX_CONCURRENT_STREAMS`; hyper refuses one more
/// with `REFUSED_STREAM`).
///
/// hyper and h2 are given room for request heads above the server's own
/// limits ([`http::head`]), so that a head over those limits reaches the
/// check that answers it naming the setting; only one over about twice
/// them, or one hyper cannot parse at all, is refused by hyper (its
/// bodiless `400`/`414`/`431`, then the connection is closed, as linkerd and
/// nginx answer such a head) or h2 (an empty `431`).
fn connection_builder(
    max_concurrent_streams: u32,
    limits: &ConnectionLimits,
    head: &HeadLimits,
) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(http::head::http1_buffer(head));
    if let Some(fields) = http::head::http1_max_headers(head) {
        builder.http1().max_headers(fields);
    }
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(http::head::http2_header_list(head))
        .max_concurrent_streams(max_concurrent_streams)
        .max_send_buf_size(HTTP2_MAX_SEND_BUF)
        .keep_alive_interval(limits.http2_keepalive)
        .keep_alive_timeout(limits.http2_keepalive);
    builder
}

/// The connection limit: a permit per open connection, and a few more for
/// connections that are only told they are over it.
struct Admission {
    serving: Option<Arc<tokio::sync::Semaphore>>,
    refusing: Arc<tokio::sync::Semaphore>,
}

enum Permit {
    Serve(Option<tokio::sync::OwnedSemaphorePermit>),
    Refuse(tokio::sync::OwnedSemaphorePermit),
}

impl Admission {
    fn new(max_connections: usize) -> Self {
        Self {
            serving: (max_connections > 0)
                .then(|| Arc::new(tokio::sync::Semaphore::new(max_connections))),
            refusing: Arc::new(tokio::sync::Semaphore::new(REFUSED_CONNECTIONS_ANSWERED)),
        }
    }

    /// A permit to serve the connection, or to refuse it with an answer;
    /// `None` when even refusals are at their limit.
    fn admit(&self) -> Option<Permit> {
        let Some(serving) = &self.serving else {
            return Some(Permit::Serve(None));
        };
        if let Ok(permit) = serving.clone().try_acquire_owned() {
            return Some(Permit::Serve(Some(permit)));
        }
        self.refusing
            .clone()
            .try_acquire_owned()
            .ok()
            .map(Permit::Refuse)
    }
}

/// What serves one connection: the whole service, or, over the connection
/// limit, an answer that says so to every request. The permit is released
/// when hyper drops the service, with the connection.
#[derive(Clone)]
enum ConnectionService {
    Serve {
        router: Router,
        guard: Arc<HostGuard>,
        watch: Arc<Watch>,
        /// The connection's open requests ([`crate::idle`]).
        activity: Arc<Activity>,
        info: ConnectionInfo,
        /// The deadline of each request body ([`http::deadline`]).
        body_timeout: Duration,
        /// How large a request head may be ([`http::head`]).
        head: HeadLimits,
        _permit: Arc<Option<tokio::sync::OwnedSemaphorePermit>>,
    },
    Refuse {
        limit: usize,
        _permit: Arc<tokio::sync::OwnedSemaphorePermit>,
    },
}

impl ConnectionService {
    fn hyper(
        self,
    ) -> impl hyper::service::Service<
        Request<hyper::body::Incoming>,
        Response = axum::response::Response,
        Error = Infallible,
        Future = impl Future<Output = Result<axum::response::Response, Infallible>> + Send,
    > + Clone {
        hyper::service::service_fn(move |mut request: Request<hyper::body::Incoming>| {
            let this = self.clone();
            // Boxed: hyper keeps an HTTP/2 stream's service future and its
            // response body in one place for as long as the stream lives,
            // sized for the larger. A gRPC bridge is a stream that lives as
            // long as its session, so the future's room (some 750 bytes)
            // would be paid by every idle session.
            Box::pin(async move {
                match this {
                    ConnectionService::Serve {
                        mut router,
                        guard,
                        info,
                        body_timeout,
                        head,
                        watch: stall,
                        activity,
                        ..
                    } => {
                        let open = activity.open();
                        request.extensions_mut().insert(info);
                        request.extensions_mut().insert(ClientAddr(info.remote));
                        let (version, grpc) = (request.version(), http::is_grpc(request.headers()));
                        let refused = http::head::check(&head, request.uri(), request.headers());
                        // Reflection: a conversation, exempt from the body
                        // deadline, but not silent for ever.
                        let request = if http::deadline::is_reflection(request.uri().path()) {
                            request.map(|body| {
                                axum::body::Body::new(IdleBody::new(body, activity.timeout()))
                            })
                        } else {
                            request.map(axum::body::Body::new)
                        };
                        let (request, watch) = http::deadline::watch(request, body_timeout);
                        // Before the Host guard and any route: a head over
                        // the limits is answered as the limit it broke.
                        // Then Host and Origin, before any route runs.
                        let response = match refused {
                            Ok(()) => match guard.refusal(&request, grpc) {
                                None => router.call(request).await?,
                                Some(refusal) => refusal,
                            },
                            Err(refusal) => {
                                tracing::debug!(%refusal, "request head refused");
                                refusal.answer(grpc)
                            }
                        };
                        let response = match watch {
                            Some(watch) => http::deadline::finish(
                                response,
                                &watch,
                                version,
                                grpc,
                                body_timeout,
                            ),
                            None => response,
                        };
                        Ok(response
                            .map(|body| stall.wrap(axum::body::Body::new(Kept::new(body, open)))))
                    }
                    ConnectionService::Refuse { limit, .. } => {
                        Ok(http::too_many_connections(&request, limit))
                    }
                }
            })
        })
    }
}
