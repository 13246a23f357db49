//! The session directory: what is known about a session wherever its bridge
//! is (its metadata, its tools, when it was last used), as opposed to what
//! only the process holding its bridge has (the bridge itself and the calls
//! waiting on it, which live in [`crate::hub`]).
//!
//! [`SessionDirectory`] is the seam for a second backend: the single-node
//! server keeps the directory in memory ([`MemoryDirectory`]); cluster mode
//! keeps it in a store every node reads. The hub never assumes which.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use crate::auth::SessionCredentials;
use crate::caller::Owner;
use crate::catalog::Catalog;
use crate::minted::MintedMap;
use crate::progress::LogLevel;
use crate::proto;
use crate::tools::Tool;

/// What a session offers: its tools and what it serves besides them,
/// replaced together by an update.
#[derive(Clone, Debug)]
pub struct Offer {
    /// The validated tools, shared between sessions with the same set.
    pub tools: Arc<[Tool]>,
    /// Its resources, resource templates and prompts.
    pub catalog: Arc<Catalog>,
}

/// A session as the directory knows it.
#[derive(Debug)]
pub struct SessionRecord {
    /// The session id.
    pub id: Arc<str>,
    /// Its name in its owner's one-URL view (`{name}__{tool}`); empty for
    /// a record made without one.
    pub name: Arc<str>,
    /// What the app said about itself at registration.
    pub metadata: proto::SessionMetadata,
    /// The validated tools (shared between sessions that registered the
    /// same set) and catalog; replaced whole by an update.
    offer: RwLock<Offer>,
    /// The digests of the session's own tokens (never the tokens).
    pub credentials: SessionCredentials,
    /// Counts the calls made in this session, for request ids.
    calls_made: AtomicU64,
    /// The log level an MCP client set with `logging/setLevel` (up to
    /// 2025-11-25): 0 for none, else one more than the level's index.
    log_level: std::sync::atomic::AtomicU8,
}

impl SessionRecord {
    /// A record of a new session.
    pub fn new(
        id: Arc<str>,
        metadata: proto::SessionMetadata,
        tools: Arc<[Tool]>,
        credentials: SessionCredentials,
    ) -> Self {
        Self::resumed(id, metadata, tools, credentials, 0)
    }

    /// A record whose request ids continue after `calls_made` calls.
    pub fn resumed(
        id: Arc<str>,
        metadata: proto::SessionMetadata,
        tools: Arc<[Tool]>,
        credentials: SessionCredentials,
        calls_made: u64,
    ) -> Self {
        Self {
            id,
            name: "".into(),
            metadata,
            offer: RwLock::new(Offer {
                tools,
                catalog: crate::catalog::empty(),
            }),
            credentials,
            calls_made: AtomicU64::new(calls_made),
            log_level: std::sync::atomic::AtomicU8::new(0),
        }
    }

    /// The next request id: `"{session_id}:{n}"`, `n` counting from 1.
    pub fn next_request_id(&self) -> String {
        let n = self.calls_made.fetch_add(1, Ordering::Relaxed) + 1;
        // Sized once (`format!` grows its string on the way): the id, `:`,
        // and at most 20 digits.
        let mut id = String::with_capacity(self.id.len() + 21);
        id.push_str(&self.id);
        id.push(':');
        let _ = write!(id, "{n}");
        id
    }

    /// Makes the request ids go on after `calls_made` calls at least (a node
    /// taking over a bridge starts past every id another node handed out).
    pub fn continue_request_ids_after(&self, calls_made: u64) {
        self.calls_made.fetch_max(calls_made, Ordering::Relaxed);
    }

    /// The record with this name.
    #[must_use]
    pub fn with_name(mut self, name: Arc<str>) -> Self {
        self.name = name;
        self
    }

    /// The record with this catalog.
    #[must_use]
    pub fn with_catalog(self, catalog: Arc<Catalog>) -> Self {
        self.offer
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .catalog = catalog;
        self
    }

    fn offer(&self) -> std::sync::RwLockReadGuard<'_, Offer> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.offer.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The log level an MCP client set for the session, if any.
    pub fn log_level(&self) -> Option<LogLevel> {
        let stored = self.log_level.load(Ordering::Relaxed);
        LogLevel::ALL
            .get(usize::from(stored).checked_sub(1)?)
            .copied()
    }

    /// Sets the session's log level (`logging/setLevel`).
    pub fn set_log_level(&self, level: LogLevel) {
        let index = LogLevel::ALL.iter().position(|l| *l == level).unwrap_or(0);
        let stored = u8::try_from(index + 1).unwrap_or(u8::MAX);
        self.log_level.store(stored, Ordering::Relaxed);
    }

    /// The session's tools.
    pub fn tools(&self) -> Arc<[Tool]> {
        self.offer().tools.clone()
    }

    /// The session's resources, resource templates and prompts.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.offer().catalog.clone()
    }

    /// Replaces the session's tools and catalog.
    pub fn replace_offer(&self, offer: Offer) {
        *self.offer.write().unwrap_or_else(PoisonError::into_inner) = offer;
    }

    /// Whether the session offers a tool of this name.
    pub fn has_tool(&self, name: &str) -> bool {
        self.offer().tools.iter().any(|tool| &*tool.name == name)
    }

    /// What the user is asked before a call of this tool, when its
    /// definition asks for confirmation.
    pub fn confirmation(&self, name: &str) -> Option<Arc<str>> {
        let offer = self.offer();
        let tool = offer.tools.iter().find(|tool| &*tool.name == name)?;
        tool.confirm.clone()
    }

    /// The session's tool of this name.
    pub fn tool(&self, name: &str) -> Option<Tool> {
        let offer = self.offer();
        offer.tools.iter().find(|tool| &*tool.name == name).cloned()
    }
}

/// Why the directory could not answer.
#[derive(Clone, Debug, thiserror::Error)]
#[error("the session directory is unavailable: {0}")]
pub struct DirectoryError(pub String);

/// Where sessions are recorded. Every method may be called concurrently.
pub trait SessionDirectory: Send + Sync + 'static {
    /// Records a new session.
    fn create(&self, record: Arc<SessionRecord>) -> BoxFuture<'_, Result<(), DirectoryError>>;

    /// The session with this id, answered from memory without waiting; `None`
    /// means "not known here", and [`SessionDirectory::get`] decides.
    fn cached(&self, id: &str) -> Option<Arc<SessionRecord>>;

    /// The session with this id, or `None` when no such session exists.
    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<SessionRecord>>, DirectoryError>>;

    /// Notes activity in a session, pushing its expiry back. Cheap to call on
    /// every call: implementations throttle writes to slow storage.
    fn touch(&self, id: &str);

    /// Removes a session; whether it existed.
    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, DirectoryError>>;

    /// Replaces a session's tools and catalog everywhere; whether the
    /// session exists.
    fn update_offer<'a>(
        &'a self,
        id: &'a str,
        offer: Offer,
    ) -> BoxFuture<'a, Result<bool, DirectoryError>>;

    /// Sessions without activity for `ttl`, for the hub to remove unless
    /// this node is still using them. A store that expires entries by itself
    /// returns none.
    fn expired(&self, ttl: Duration) -> Vec<Arc<str>>;

    /// How many sessions this node knows of.
    fn len(&self) -> usize;

    /// The sessions this node knows of that `owner` owns (issuer and
    /// subject), for the owner's one-URL view.
    fn owned_by(&self, owner: &Owner) -> Vec<Arc<SessionRecord>>;

    /// Ticks each time the sessions known here change (created, updated,
    /// removed, wherever that happened): what a one-URL view's listeners
    /// wait on before they look again.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Whether this node knows of no session.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

struct Entry {
    record: Arc<SessionRecord>,
    last_activity: Mutex<Instant>,
}

/// The directory of a single node: a map in memory.
pub struct MemoryDirectory {
    sessions: RwLock<MintedMap<Arc<str>, Entry>>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for MemoryDirectory {
    fn default() -> Self {
        Self {
            sessions: RwLock::default(),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl MemoryDirectory {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, MintedMap<Arc<str>, Entry>> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.sessions.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, MintedMap<Arc<str>, Entry>> {
        self.sessions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl SessionDirectory for MemoryDirectory {
    fn create(&self, record: Arc<SessionRecord>) -> BoxFuture<'_, Result<(), DirectoryError>> {
        let entry = Entry {
            record: record.clone(),
            last_activity: Mutex::new(Instant::now()),
        };
        self.write().insert(record.id.clone(), entry);
        self.changed();
        Box::pin(std::future::ready(Ok(())))
    }

    fn cached(&self, id: &str) -> Option<Arc<SessionRecord>> {
        self.read().get(id).map(|entry| entry.record.clone())
    }

    fn get<'a>(
        &'a self,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<SessionRecord>>, DirectoryError>> {
        Box::pin(std::future::ready(Ok(self.cached(id))))
    }

    fn touch(&self, id: &str) {
        if let Some(entry) = self.read().get(id) {
            *entry
                .last_activity
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, DirectoryError>> {
        let removed = self.write().remove(id);
        if removed.is_some() {
            self.changed();
        }
        // The record is dropped outside the lock.
        Box::pin(std::future::ready(Ok(removed.is_some())))
    }

    fn update_offer<'a>(
        &'a self,
        id: &'a str,
        offer: Offer,
    ) -> BoxFuture<'a, Result<bool, DirectoryError>> {
        let record = self.cached(id);
        let found = record.is_some();
        if let Some(record) = record {
            record.replace_offer(offer);
            self.touch(id);
            self.changed();
        }
        Box::pin(std::future::ready(Ok(found)))
    }

    fn expired(&self, ttl: Duration) -> Vec<Arc<str>> {
        let now = Instant::now();
        // Reserved before the lock is taken: nothing allocates while every
        // request waits for it. Sessions created meanwhile that do not fit
        // are found by the next sweep.
        let mut expired = Vec::with_capacity(self.len() + 16);
        let sessions = self.read();
        for (id, entry) in sessions.iter() {
            if expired.len() == expired.capacity() {
                break;
            }
            let last = *entry
                .last_activity
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if now.saturating_duration_since(last) >= ttl {
                expired.push(id.clone());
            }
        }
        expired
    }

    fn len(&self) -> usize {
        self.read().len()
    }

    fn owned_by(&self, owner: &Owner) -> Vec<Arc<SessionRecord>> {
        self.read()
            .values()
            .filter(|entry| entry.record.credentials.owner.as_ref() == Some(owner))
            .map(|entry| entry.record.clone())
            .collect()
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_record_stays_small() {
        // One per session, on every node that knows it: every byte is a
        // byte of every idle session (its tools are shared, not counted).
        // 280 before the name in the owner's one-URL view (16 bytes).
        let size = std::mem::size_of::<SessionRecord>();
        assert!(size <= 296, "a session record is {size} bytes");
    }
}
