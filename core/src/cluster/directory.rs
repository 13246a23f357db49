//! The session directory in a JetStream KV bucket, cached on every node.
//!
//! Each node watches the whole bucket: the watch fills the cache, tells the
//! node when a session it holds a bridge for was claimed elsewhere
//! (takeover), deleted, or aged out, and keeps lookups on the hot path in
//! memory. A session missing from the cache (just created elsewhere) is read
//! from KV directly. Writes are few: creation, claims, deletion, and
//! activity refreshes throttled to one per quarter TTL per node.

use std::sync::{Arc, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use async_nats::jetstream::kv::{self, Operation};
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::Node;
use super::stored::{StoredCatalog, StoredSession};
use crate::directory::{DirectoryError, Offer, SessionDirectory, SessionRecord};
use crate::escape::Outside;
use crate::hub::WeakHub;
use crate::minted::MintedMap;
use crate::outcome::BridgeEnd;
use crate::tools::ToolSetCache;

/// Longest wait for one KV operation.
const KV_TIMEOUT: Duration = Duration::from_secs(3);

/// How long after its last observed write a cached entry is trusted without
/// news from the watch (the bucket expires it after the TTL).
const CACHE_GRACE: Duration = Duration::from_secs(2);

struct Cached {
    record: Arc<SessionRecord>,
    revision: u64,
    holder: Option<String>,
    written: Instant,
    refreshing: bool,
}

/// The cluster's session directory.
pub struct NatsDirectory {
    node: Arc<Node>,
    kv: OnceCell<kv::Store>,
    cache: RwLock<MintedMap<Arc<str>, Cached>>,
    tool_sets: ToolSetCache,
    hub: OnceLock<WeakHub>,
    watching: std::sync::atomic::AtomicBool,
    /// Ticks on every change the cache takes in.
    changes: tokio::sync::watch::Sender<u64>,
}

fn unavailable(what: &str, error: impl std::fmt::Display) -> DirectoryError {
    DirectoryError(format!("NATS: {what}: {error}"))
}

impl NatsDirectory {
    pub(crate) fn new(node: Arc<Node>) -> Self {
        Self {
            node,
            kv: OnceCell::new(),
            cache: RwLock::default(),
            tool_sets: ToolSetCache::default(),
            hub: OnceLock::new(),
            watching: std::sync::atomic::AtomicBool::new(false),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn bucket(&self) -> String {
        format!("{}_sessions", self.node.prefix)
    }

    /// Whether the bucket is open and watched.
    pub(crate) fn ready(&self) -> bool {
        self.kv.initialized() && self.watching.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The bucket, while NATS is reachable.
    pub(crate) fn store(&self) -> Result<&kv::Store, DirectoryError> {
        if !self.node.connected() {
            return Err(DirectoryError(
                "NATS is unreachable from this proxy node".into(),
            ));
        }
        self.kv
            .get()
            .ok_or_else(|| DirectoryError("NATS has not been reached yet".into()))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, MintedMap<Arc<str>, Cached>> {
        self.cache.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, MintedMap<Arc<str>, Cached>> {
        self.cache.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens the bucket (creating it on first use) and watches it, for as
    /// long as the hub lives; reconnects after NATS failures.
    pub(crate) fn start(self: &Arc<Self>, hub: WeakHub) {
        let _ = self.hub.set(hub);
        let directory = Arc::clone(self);
        tokio::spawn(async move { directory.watch_forever().await });
    }

    async fn watch_forever(self: Arc<Self>) {
        let mut last_revision = 0_u64;
        loop {
            if self.hub.get().and_then(WeakHub::upgrade).is_none() {
                return;
            }
            match self.open_and_watch(&mut last_revision).await {
                Ok(()) => tracing::warn!("the session directory's watch ended; watching again"),
                Err(error) => {
                    tracing::warn!(%error, "the session directory is unreachable; retrying")
                }
            }
            self.watching
                .store(false, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn open_and_watch(&self, last_revision: &mut u64) -> Result<(), DirectoryError> {
        let store = match self.kv.get() {
            Some(store) => store.clone(),
            None => {
                let store = self.open_bucket().await?;
                let _ = self.kv.set(store.clone());
                store
            }
        };
        let watch = if *last_revision == 0 {
            store.watch_all().await
        } else {
            store.watch_all_from_revision(*last_revision + 1).await
        };
        let mut watch = watch.map_err(|error| unavailable("watch the session bucket", error))?;
        self.watching
            .store(true, std::sync::atomic::Ordering::Relaxed);
        while let Some(entry) = watch.next().await {
            let entry = entry.map_err(|error| unavailable("session bucket watch", error))?;
            *last_revision = entry.revision;
            self.apply(entry);
        }
        Ok(())
    }

    async fn open_bucket(&self) -> Result<kv::Store, DirectoryError> {
        let jetstream = async_nats::jetstream::new(self.node.client.clone());
        let config = kv::Config {
            bucket: self.bucket(),
            description: "openclaw-proxy sessions: metadata, tools and bridge holder".into(),
            history: 1,
            max_age: self.node.ttl,
            num_replicas: self.node.kv_replicas,
            // A key that ages out leaves a marker the watch reports.
            limit_markers: Some(self.node.ttl.max(Duration::from_secs(1))),
            ..Default::default()
        };
        let created =
            tokio::time::timeout(KV_TIMEOUT, jetstream.create_or_update_key_value(config))
                .await
                .map_err(|_| unavailable("open the session bucket", "timed out"))?;
        created.map_err(|error| unavailable("open the session bucket", error))
    }

    /// Takes one change of the bucket into the cache, and ends bridges here
    /// that it makes obsolete.
    fn apply(&self, entry: kv::Entry) {
        let id: Arc<str> = entry.key.as_str().into();
        match entry.operation {
            Operation::Put => {
                let stored: StoredSession = match serde_json::from_slice(&entry.value) {
                    Ok(stored) => stored,
                    Err(error) => {
                        tracing::warn!(
                            session = Outside::session(&id).field(),
                            error = Outside::within(&error.to_string(), crate::escape::TEXT_LIMIT)
                                .field(),
                            "unreadable session entry ignored"
                        );
                        return;
                    }
                };
                // Only news ends a bridge: an event older than what this node
                // wrote itself (its own claim) must not end the bridge it
                // just claimed.
                if let Some(holder) = self.remember(&id, stored, entry.revision)
                    && holder
                        .as_deref()
                        .is_some_and(|holder| holder != self.node.id)
                {
                    self.end_bridge_here(&id, BridgeEnd::Replaced);
                }
            }
            Operation::Delete | Operation::Purge => {
                self.write().remove(&id);
                self.end_bridge_here(&id, BridgeEnd::SessionDeleted);
            }
        }
        self.changed();
    }

    /// Caches a stored session at `revision`; returns its holder, or `None`
    /// when the cache already knew a newer revision (or the entry is
    /// unreadable). A session already cached keeps its record (and so its
    /// request-id counter).
    fn remember(
        &self,
        id: &Arc<str>,
        stored: StoredSession,
        revision: u64,
    ) -> Option<Option<String>> {
        let mut cache = self.write();
        if let Some(cached) = cache.get_mut(id) {
            if revision < cached.revision {
                return None;
            }
            cached.revision = revision;
            cached.holder = stored.holder.clone();
            cached.written = Instant::now();
            // An update on another node: the new lists, here too.
            let tools = stored.tools_parsed();
            let catalog = stored.catalog.parsed();
            if *cached.record.tools() != *tools || *cached.record.catalog() != *catalog {
                cached.record.replace_offer(Offer {
                    tools: self.tool_sets.intern(tools),
                    catalog,
                });
            }
            return Some(stored.holder);
        }
        let parts = match stored.into_parts() {
            Ok(parts) => parts,
            Err(problem) => {
                tracing::warn!(session = Outside::session(id).field(), %problem, "unreadable session entry ignored");
                return None;
            }
        };
        let holder = parts.holder;
        let record = SessionRecord::new(
            id.clone(),
            parts.metadata,
            self.tool_sets.intern(parts.tools),
            parts.credentials,
        )
        .with_name(parts.name.into())
        .with_catalog(parts.catalog);
        cache.insert(
            id.clone(),
            Cached {
                record: Arc::new(record),
                revision,
                holder: holder.clone(),
                written: Instant::now(),
                refreshing: false,
            },
        );
        Some(holder)
    }

    fn end_bridge_here(&self, id: &str, reason: BridgeEnd) {
        if let Some(hub) = self.hub.get().and_then(WeakHub::upgrade) {
            hub.end_local_bridge(id, reason);
        }
    }

    /// The session's current entry in the bucket, unless it is gone.
    async fn live_entry(&self, id: &str) -> Result<Option<kv::Entry>, DirectoryError> {
        // Session ids are UUIDs; anything else names no session (and some
        // strings are not even valid KV keys).
        if uuid::Uuid::parse_str(id).is_err() {
            return Ok(None);
        }
        let store = self.store()?;
        let entry = tokio::time::timeout(KV_TIMEOUT, store.entry(id.to_owned()))
            .await
            .map_err(|_| unavailable("read a session", "timed out"))?
            .map_err(|error| unavailable("read a session", error))?;
        Ok(entry.filter(|entry| entry.operation == Operation::Put))
    }

    /// Reads the session's entry from the bucket into the cache, without
    /// waiting for the watch to bring it; whether the session exists (one
    /// that does not leaves the cache).
    pub(crate) async fn fetch(&self, id: &str) -> Result<bool, DirectoryError> {
        let Some(entry) = self.live_entry(id).await? else {
            self.write().remove(id);
            return Ok(false);
        };
        let stored: StoredSession = serde_json::from_slice(&entry.value)
            .map_err(|error| DirectoryError(format!("unreadable session entry: {error}")))?;
        self.remember(&id.into(), stored, entry.revision);
        Ok(true)
    }

    /// Claims the session for this node: compare-and-set of its holder.
    /// Returns the revision written, from which request ids continue.
    pub(crate) async fn claim(&self, record: &SessionRecord) -> Result<u64, DirectoryError> {
        let holder = self.node.id.clone();
        let revision = self
            .update_entry(&record.id, "claim a session", |stored| {
                stored.holder = Some(holder.clone());
            })
            .await?
            .ok_or_else(|| DirectoryError("the session no longer exists".into()))?;
        if let Some(cached) = self.write().get_mut(&record.id) {
            cached.revision = cached.revision.max(revision);
            cached.holder = Some(self.node.id.clone());
            cached.written = Instant::now();
        }
        Ok(revision)
    }

    /// Changes a session's stored entry by compare-and-set, reading it again
    /// when someone wrote in between, so a change never undoes another (a
    /// claim keeps a tool update made elsewhere, and the other way round).
    /// `None` when the session no longer exists.
    async fn update_entry(
        &self,
        id: &str,
        what: &str,
        change: impl Fn(&mut StoredSession),
    ) -> Result<Option<u64>, DirectoryError> {
        let store = self.store()?;
        for _ in 0..5 {
            let Some(entry) = self.live_entry(id).await? else {
                return Ok(None);
            };
            let mut stored: StoredSession = serde_json::from_slice(&entry.value)
                .map_err(|error| DirectoryError(format!("unreadable session entry: {error}")))?;
            change(&mut stored);
            let value = encode(&stored)?;
            let updated = tokio::time::timeout(KV_TIMEOUT, store.update(id, value, entry.revision))
                .await
                .map_err(|_| unavailable(what, "timed out"))?;
            match updated {
                Ok(revision) => return Ok(Some(revision)),
                Err(error) if error.kind() == kv::UpdateErrorKind::WrongLastRevision => {}
                Err(error) => return Err(unavailable(what, error)),
            }
        }
        Err(DirectoryError(format!(
            "the session kept changing: could not {what}"
        )))
    }

    /// Refreshes a session's key in the background (its TTL restarts),
    /// unless it was written recently or the write would overwrite a newer
    /// revision (someone else wrote: that refreshed it too).
    fn refresh(self: &Arc<Self>, id: &str) {
        // The common case (written recently) under the shared lock only.
        let due = self.read().get(id).is_some_and(|cached| {
            !cached.refreshing && cached.written.elapsed() >= self.node.ttl / 4
        });
        if !due {
            return;
        }
        let Ok(store) = self.store() else { return };
        let (key, value, revision) = {
            let mut cache = self.write();
            let Some(cached) = cache.get_mut(id) else {
                return;
            };
            if cached.refreshing || cached.written.elapsed() < self.node.ttl / 4 {
                return;
            }
            let Ok(value) = encode(&StoredSession::of(&cached.record, cached.holder.clone()))
            else {
                return;
            };
            cached.refreshing = true;
            (cached.record.id.clone(), value, cached.revision)
        };
        let store = store.clone();
        let directory = Arc::clone(self);
        tokio::spawn(async move {
            let updated =
                tokio::time::timeout(KV_TIMEOUT, store.update(&*key, value, revision)).await;
            let mut cache = directory.write();
            if let Some(cached) = cache.get_mut(&key) {
                cached.refreshing = false;
                if let Ok(Ok(revision)) = updated {
                    cached.revision = cached.revision.max(revision);
                    cached.written = Instant::now();
                }
            }
        });
    }
}

fn encode(stored: &StoredSession) -> Result<Bytes, DirectoryError> {
    serde_json::to_vec(stored)
        .map(Bytes::from)
        .map_err(|error| DirectoryError(format!("cannot encode a session: {error}")))
}

/// The directory as the hub sees it. `touch` needs the `Arc` to spawn its
/// write, so the trait is implemented on a wrapper holding one.
pub(crate) struct Shared(pub(crate) Arc<NatsDirectory>);

impl SessionDirectory for Shared {
    fn create(&self, record: Arc<SessionRecord>) -> BoxFuture<'_, Result<(), DirectoryError>> {
        Box::pin(async move {
            let directory = &self.0;
            let store = directory.store()?;
            let value = encode(&StoredSession::of(&record, None))?;
            let revision = tokio::time::timeout(KV_TIMEOUT, store.create(&*record.id, value))
                .await
                .map_err(|_| unavailable("create a session", "timed out"))?
                .map_err(|error| unavailable("create a session", error))?;
            directory
                .write()
                .entry(record.id.clone())
                .or_insert(Cached {
                    record,
                    revision,
                    holder: None,
                    written: Instant::now(),
                    refreshing: false,
                });
            directory.changed();
            Ok(())
        })
    }

    fn cached(&self, id: &str) -> Option<Arc<SessionRecord>> {
        let limit = self.0.node.ttl + CACHE_GRACE;
        self.0
            .read()
            .get(id)
            .filter(|cached| cached.written.elapsed() <= limit)
            .map(|cached| cached.record.clone())
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<SessionRecord>>, DirectoryError>> {
        Box::pin(async move {
            if let Some(record) = self.cached(id) {
                return Ok(Some(record));
            }
            let directory = &self.0;
            if !directory.fetch(id).await? {
                return Ok(None);
            }
            Ok(directory.read().get(id).map(|cached| cached.record.clone()))
        })
    }

    fn touch(&self, id: &str) {
        self.0.refresh(id);
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, DirectoryError>> {
        Box::pin(async move {
            let directory = &self.0;
            let store = directory.store()?;
            let existed = directory.live_entry(id).await?.is_some();
            if existed {
                tokio::time::timeout(KV_TIMEOUT, store.delete(id))
                    .await
                    .map_err(|_| unavailable("delete a session", "timed out"))?
                    .map_err(|error| unavailable("delete a session", error))?;
            }
            directory.write().remove(id);
            directory.changed();
            Ok(existed)
        })
    }

    fn update_offer<'a>(
        &'a self,
        id: &'a str,
        offer: Offer,
    ) -> BoxFuture<'a, Result<bool, DirectoryError>> {
        Box::pin(async move {
            let directory = &self.0;
            let stored_tools = StoredSession::stored_tools(&offer.tools);
            let stored_catalog = StoredCatalog::of(&offer.catalog);
            let updated = directory
                .update_entry(id, "update a session's tools", |stored| {
                    stored.tools.clone_from(&stored_tools);
                    stored.catalog.clone_from(&stored_catalog);
                })
                .await?;
            if updated.is_none() {
                return Ok(false);
            }
            if let Some(cached) = directory.read().get(id) {
                cached.record.replace_offer(offer);
            }
            directory.changed();
            Ok(true)
        })
    }

    fn expired(&self, _ttl: Duration) -> Vec<Arc<str>> {
        // The bucket expires idle keys itself; the watch reports them.
        Vec::new()
    }

    fn len(&self) -> usize {
        self.0.read().len()
    }

    fn owned_by(&self, owner: &crate::caller::Owner) -> Vec<Arc<SessionRecord>> {
        let limit = self.0.node.ttl + CACHE_GRACE;
        self.0
            .read()
            .values()
            .filter(|cached| cached.written.elapsed() <= limit)
            .filter(|cached| cached.record.credentials.owner.as_ref() == Some(owner))
            .map(|cached| cached.record.clone())
            .collect()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.changes.subscribe()
    }
}
