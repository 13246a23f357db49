//! The app's life: build it, `serve()` it, `shutdown()` it; in between, the
//! serve loop keeps one bridge attached whatever the network does, and the
//! app may change its declarations or announce a changed resource.
//!
//! The loop's states are few on purpose. Attached: read the proxy's messages,
//! answer pings, start calls. Bridge lost: cancel the calls it delivered (the
//! proxy has already failed them), wait a backoff delay, attach again with the
//! same session id (the proxy hands the session over: takeover). Session gone
//! (`NOT_FOUND`: the proxy restarted or the session expired): create a new one
//! and tell the app through the callback. Refused (bad token, taken over by
//! another instance): stop and report why, since retrying cannot help.
//!
//! Declarations changed while serving go to the proxy on the bridge, and
//! again on every later attach to the same session, so that a change made
//! while the bridge was down, or lost with it, still arrives; a re-created
//! session registers the current set from the start.
//!
//! Below this file, one job each: `builder` collects and checks the
//! settings; `serve_loop` keeps a bridge attached and decides what follows
//! its end; `inbound` reads one attached bridge; `admission` starts calls
//! within the limits; `recover` waits between bridges and re-creates a
//! session the proxy forgot; `shared` is the state they all hold; and
//! `serving` is the handle the app keeps.

mod admission;
mod builder;
mod inbound;
mod recover;
mod serve_loop;
mod serving;
mod shared;

pub use builder::AppBuilder;
pub use serving::Serving;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use backon::ExponentialBuilder;
use openclaw_proxy_proto::v1::{SessionMetadata, SessionOwner};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::call::InFlight;
use crate::declarations::Declarations;
use crate::error::AppError;
use crate::proxy::{Proxy, SessionInfo};
use serve_loop::serve_loop;
use shared::{Link, Shared};

type SessionCallback = dyn Fn(&SessionInfo) + Send + Sync;

/// An app ready to serve its tools (and resources and prompts) through a
/// proxy.
pub struct App {
    proxy: Proxy,
    metadata: SessionMetadata,
    owner: Option<SessionOwner>,
    name: String,
    declarations: Declarations,
    max_concurrent_calls: usize,
    max_queued_calls: usize,
    on_session: Option<Arc<SessionCallback>>,
    backoff: ExponentialBuilder,
    idle_timeout: Duration,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("tools", &self.declarations.tools())
            .finish_non_exhaustive()
    }
}

impl App {
    /// Starts describing an app that serves through the proxy at `proxy_url`
    /// (`http://host:port` or `https://host:port`, the proxy's one port).
    pub fn builder(proxy_url: impl Into<String>) -> AppBuilder {
        AppBuilder::new(proxy_url.into())
    }

    /// Creates the session, attaches its bridge, and keeps serving in the
    /// background until [`Serving::shutdown`] (or until the handle is
    /// dropped). Returns once the tools are reachable; an error here means
    /// the first attempt failed (wrong URL or token, proxy down, a
    /// declaration the proxy refused). After that, every failure is retried.
    pub async fn serve(self) -> Result<Serving, AppError> {
        let shared = Arc::new(Shared {
            declarations: RwLock::new(Arc::new(self.declarations)),
            metadata: self.metadata,
            owner: self.owner,
            name: self.name,
            changed: AtomicBool::new(false),
            link: Mutex::new(Link::default()),
            updating: tokio::sync::Mutex::new(()),
            admitted: Arc::new(Semaphore::new(
                self.max_concurrent_calls + self.max_queued_calls,
            )),
            running: Arc::new(Semaphore::new(self.max_concurrent_calls)),
            max_concurrent_calls: self.max_concurrent_calls,
            in_flight: InFlight::default(),
            on_session: self.on_session,
            backoff: self.backoff,
            idle_timeout: self.idle_timeout,
            proxy: self.proxy,
        });
        let session = shared
            .proxy
            .create_session(shared.create_request())
            .await
            .map_err(|status| AppError::rpc("creating the session", status))?;
        let bridge = match shared.proxy.attach(&session).await {
            Ok(bridge) => bridge,
            Err(status) => {
                // Leave no session behind that nobody serves; the proxy
                // would list its tools until the idle lifetime ran out.
                let _ = shared.proxy.delete_session(&session).await;
                return Err(AppError::rpc("attaching the bridge", status));
            }
        };
        shared.announce(&session);
        // Attached from now on, before the loop's task first runs.
        shared.set_attached(Some(bridge.outbound.clone()));
        let (current, watcher) = watch::channel(session.clone());
        let stop = CancellationToken::new();
        let task = tokio::spawn(serve_loop(
            shared.clone(),
            session,
            bridge,
            current,
            stop.clone(),
        ));
        Ok(Serving {
            shared,
            session: watcher,
            stop,
            task: Some(task),
        })
    }
}
