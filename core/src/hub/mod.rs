//! The hub: sessions, the bridges attached to them, the idle sweep and tool
//! invocation. Every transport operates on one shared [`Hub`].
//!
//! What is known about a session lives in a [`SessionDirectory`] (memory on
//! a single node, a shared store in a cluster); what only this process has
//! (an attached bridge and the calls waiting on it) lives here, in the local
//! map. A call for a session whose bridge is elsewhere goes to the
//! [`RemoteDelivery`].
//!
//! Rules (`ARCHITECTURE.md#behaviour-the-original-left-open`):
//! - A session expires after `session_ttl` without activity (creation, bridge
//!   attach, tool call, bridge traffic). A session with a bridge attached or a
//!   call in flight never expires. The sweep runs every `sweep_interval`.
//! - A new bridge replaces the old one, which ends with [`BridgeEnd::Replaced`];
//!   its calls in flight fail at once.
//! - Losing a bridge, deleting its session and shutting down fail the calls in
//!   flight at once; nothing waits for the tool timeout.
//! - A bridge never stays attached to a session that no longer exists, even
//!   when it attaches at the moment the session expires, is deleted, or the
//!   proxy shuts down.
//! - Request ids are `"{session_id}:{n}"`, `n` counting from 1 per session.
//!
//! This file holds the [`Hub`] handle, its shared state and the map of
//! bridges attached to this process. Each job has a file of its own, and
//! what two of them share lives here: `sessions` (create, read, replace
//! tools, delete), `access` (which credential opens what), `attach` (a
//! bridge attaches, is replaced, detaches), `invoke` (a call to the local
//! bridge or the remote delivery) and `lifecycle` (the idle sweep, drain,
//! shutdown, readiness).

mod access;
mod answers;
mod attach;
mod changes;
mod confirm;
mod invoke;
mod lifecycle;
mod request;
mod round_trip;
mod sessions;
#[cfg(test)]
mod testing;
mod view;

pub use crate::change::SessionEvent;
pub use answers::{AnswerError, client_request_id, parse_client_request_id};
pub use changes::Watch;
pub use request::AppRequest;
pub use sessions::Deletion;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use tokio_util::sync::CancellationToken;

use crate::auth::{AuthError, RandomnessUnavailable};
use crate::bridge::Bridge;
use crate::config::CoreConfig;
use crate::delivery::{NoRemote, RemoteDelivery, Resumed, Unrouted};
use crate::directory::{DirectoryError, MemoryDirectory, SessionDirectory, SessionRecord};
use crate::error::{ErrorKind, UnknownSession};
use crate::limits::{CreateLimiter, LimitError};
use crate::metrics::Metrics;
use crate::minted::MintedMap;
use crate::outcome::BridgeEnd;
use crate::tools::{ToolError, ToolSetCache};

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("{}", UnknownSession(.0))]
    UnknownSession(String),
    #[error("session_id is empty: name the session returned by CreateSession")]
    MissingSessionId,
    #[error("{0}")]
    InvalidOwner(String),
    #[error(transparent)]
    InvalidName(#[from] openclaw_proxy_proto::session_name::NameError),
    #[error(transparent)]
    InvalidTool(#[from] ToolError),
    #[error(transparent)]
    InvalidDeclaration(#[from] crate::catalog::CatalogError),
    #[error("the proxy is shutting down and accepts no new sessions or bridges")]
    ShuttingDown,
    #[error(transparent)]
    Unavailable(#[from] DirectoryError),
    #[error(transparent)]
    Unauthenticated(#[from] AuthError),
    #[error(transparent)]
    NoRandomness(#[from] RandomnessUnavailable),
    #[error(transparent)]
    Limit(#[from] LimitError),
}

impl HubError {
    /// The kind of refusal, for each surface's one table.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::UnknownSession(_) => ErrorKind::NotFound,
            Self::MissingSessionId
            | Self::InvalidOwner(_)
            | Self::InvalidName(_)
            | Self::InvalidTool(_)
            | Self::InvalidDeclaration(_) => ErrorKind::Invalid,
            Self::ShuttingDown | Self::Unavailable(_) | Self::NoRandomness(_) => {
                ErrorKind::Unavailable
            }
            Self::Unauthenticated(error) => error.kind(),
            Self::Limit(error) => error.kind(),
        }
    }
}

/// Where a hub keeps its sessions and finds bridges it does not hold.
pub struct Backend {
    /// The session directory.
    pub directory: Arc<dyn SessionDirectory>,
    /// Delivery to bridges held by other processes.
    pub remote: Arc<dyn RemoteDelivery>,
}

impl Backend {
    /// One node, everything in memory.
    pub fn single_node() -> Self {
        Self {
            directory: Arc::new(MemoryDirectory::default()),
            remote: Arc::new(NoRemote),
        }
    }
}

/// The proxy's core: every transport operates on one shared `Hub`.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    config: CoreConfig,
    directory: Arc<dyn SessionDirectory>,
    remote: Arc<dyn RemoteDelivery>,
    /// Sessions with a bridge attached here, or calls still draining from one.
    local: RwLock<MintedMap<Arc<str>, Arc<Local>>>,
    tool_sets: ToolSetCache,
    shutdown: CancellationToken,
    /// Set when the server starts to shut down but still serves for a
    /// moment (`OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS`): not ready.
    draining: std::sync::atomic::AtomicBool,
    metrics: Arc<Metrics>,
    /// Session creations per client address; `None` without a limit.
    creations: Option<CreateLimiter>,
    /// The change feeds of sessions someone watches.
    changes: Mutex<changes::Feeds>,
    /// Calls waiting for their user's confirmation.
    gates: confirm::Gates,
    /// The edge's runner of retries another node received for calls parked
    /// here.
    resumer: std::sync::OnceLock<Arc<dyn Resumer>>,
}

/// This process's share of a session.
#[derive(Default)]
struct Local {
    state: Mutex<LocalState>,
}

#[derive(Default)]
struct LocalState {
    bridge: Option<Arc<Bridge>>,
    calls_in_flight: u32,
}

impl Local {
    fn state(&self) -> MutexGuard<'_, LocalState> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Hub {
    /// A single-node hub with no sessions.
    pub fn new(config: CoreConfig) -> Self {
        Self::with_backend(config, Backend::single_node())
    }

    /// A hub over the given directory and remote delivery.
    pub fn with_backend(config: CoreConfig, backend: Backend) -> Self {
        let metrics = Arc::new(Metrics::new(backend.remote.connected().is_some()));
        Self {
            inner: Arc::new(Inner {
                directory: backend.directory,
                remote: backend.remote,
                local: RwLock::default(),
                tool_sets: ToolSetCache::default(),
                shutdown: CancellationToken::new(),
                draining: std::sync::atomic::AtomicBool::new(false),
                metrics,
                creations: config
                    .limits
                    .session_create_rate
                    .and_then(CreateLimiter::new),
                changes: Mutex::default(),
                gates: confirm::Gates::default(),
                resumer: std::sync::OnceLock::new(),
                config,
            }),
        }
    }

    /// The metrics of this hub and the transports in front of it.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The metrics in the Prometheus (OpenMetrics) text format.
    pub fn render_metrics(&self) -> String {
        self.inner
            .metrics
            .render(self.session_count(), self.inner.remote.connected())
    }

    /// The settings the hub runs with.
    pub fn config(&self) -> &CoreConfig {
        &self.inner.config
    }

    /// This process's name in the cluster, sealed in the `requestState` of
    /// the 2026-07-28 calls parked here; `None` on a single node.
    pub fn node_id(&self) -> Option<&str> {
        self.inner.remote.node_id()
    }

    /// Who runs the retries other nodes receive for calls parked here (the
    /// edge, once per process; a second is ignored).
    pub fn serve_resumes(&self, resumer: Arc<dyn Resumer>) {
        let _ = self.inner.resumer.set(resumer);
    }

    /// Runs a retry another node received for a call parked here; `None`
    /// when nothing here parks calls.
    pub async fn resume_here(&self, retry: bytes::Bytes) -> Option<Resumed> {
        let resumer = self.inner.resumer.get()?.clone();
        Some(resumer.resume(self.clone(), retry).await)
    }

    /// Resumes a retry on `node`, where its call is parked.
    pub async fn resume_elsewhere(
        &self,
        node: &str,
        retry: bytes::Bytes,
    ) -> Result<Resumed, Unrouted> {
        self.inner.remote.resume(node, retry).await
    }

    /// A handle that does not keep the hub alive, for the backend's tasks.
    pub fn downgrade(&self) -> WeakHub {
        WeakHub(Arc::downgrade(&self.inner))
    }

    /// Ends the bridge attached here to `session_id`, if any, failing its
    /// calls. For a session deleted or taken over elsewhere; a session that
    /// is gone also ends its change feed.
    pub fn end_local_bridge(&self, session_id: &str, reason: BridgeEnd) {
        // Ended, not removed: the task driving the bridge detaches it.
        if let Some((_, bridge)) = self.inner.local_bridge(session_id) {
            bridge.end(reason);
        }
        if matches!(reason, BridgeEnd::SessionDeleted | BridgeEnd::ShuttingDown) {
            self.end_feed(session_id);
        }
    }

    /// The live session `session_id`, from the directory's cache when it
    /// has it.
    pub(crate) async fn record(&self, session_id: &str) -> Result<Arc<SessionRecord>, HubError> {
        if let Some(record) = self.inner.directory.cached(session_id) {
            return Ok(record);
        }
        self.inner
            .directory
            .get(session_id)
            .await?
            .ok_or_else(|| HubError::UnknownSession(session_id.to_owned()))
    }
}

impl Inner {
    fn local_map(&self) -> std::sync::RwLockReadGuard<'_, MintedMap<Arc<str>, Arc<Local>>> {
        self.local.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn local_map_mut(&self) -> std::sync::RwLockWriteGuard<'_, MintedMap<Arc<str>, Arc<Local>>> {
        self.local.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn local(&self, id: &str) -> Option<Arc<Local>> {
        self.local_map().get(id).cloned()
    }

    /// Makes `bridge` the session's bridge here; returns the one it replaces.
    /// Done under the map's lock, so that `forget_if_unused` cannot remove
    /// the entry between its lookup and the installation.
    fn install(&self, id: &Arc<str>, bridge: &Arc<Bridge>) -> Option<Arc<Bridge>> {
        let mut map = self.local_map_mut();
        let local = map.entry(id.clone()).or_default();
        let mut state = local.state();
        state.bridge.replace(bridge.clone())
    }

    /// The session's bridge here, if one is attached.
    fn local_bridge(&self, id: &str) -> Option<(Arc<Local>, Arc<Bridge>)> {
        let local = self.local(id)?;
        let bridge = local.state().bridge.clone()?;
        Some((local, bridge))
    }

    fn local_ids(&self) -> Vec<Arc<str>> {
        let map = self.local_map();
        let mut ids = Vec::with_capacity(map.len());
        ids.extend(map.keys().cloned());
        ids
    }

    /// Drops the session's local state when it has no bridge and no call.
    fn forget_if_unused(&self, id: &str) {
        let mut map = self.local_map_mut();
        let unused = map.get(id).is_some_and(|local| {
            let state = local.state();
            state.bridge.is_none() && state.calls_in_flight == 0
        });
        if unused {
            map.remove(id);
        }
    }
}

/// The edge's side of a resumed retry: runs a retry that another process
/// received for a call parked here, and makes its answer.
pub trait Resumer: Send + Sync + 'static {
    /// Resumes `retry` (the message [`RemoteDelivery::resume`] carried).
    fn resume(
        &self,
        hub: Hub,
        retry: bytes::Bytes,
    ) -> futures_util::future::BoxFuture<'static, Resumed>;
}

/// A [`Hub`] that may be gone (see [`Hub::downgrade`]).
#[derive(Clone)]
pub struct WeakHub(std::sync::Weak<Inner>);

impl WeakHub {
    /// The hub, if it still exists.
    pub fn upgrade(&self) -> Option<Hub> {
        self.0.upgrade().map(|inner| Hub { inner })
    }
}
