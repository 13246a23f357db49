//! What the serve loop, every bridge and the [`Serving`](super::Serving)
//! handle share: the current declarations, the bridge attached now (and the
//! update waiting for its answer on it), the call limits and the session
//! callback.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use backon::ExponentialBuilder;
use openclaw_proxy_proto::v1::{
    AppMessage, CreateSessionRequest, SessionMetadata, SessionOwner, app_message,
};
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::SessionCallback;
use crate::call::InFlight;
use crate::declarations::Declarations;
use crate::proxy::{Bridge, Proxy, Session};

/// What the serve loop, every bridge and the `Serving` handle share.
pub(super) struct Shared {
    pub(super) proxy: Proxy,
    pub(super) metadata: SessionMetadata,
    /// The OAuth subject the session is bound to, if any.
    pub(super) owner: Option<SessionOwner>,
    /// The name asked for in the owner's one-URL view (empty: the proxy's
    /// default).
    pub(super) name: String,
    /// The current declarations; replaced whole by an update.
    pub(super) declarations: RwLock<Arc<Declarations>>,
    /// Whether the app changed its declarations since it started: a bridge
    /// attached again to the same session then sends them all.
    pub(super) changed: AtomicBool,
    /// The bridge attached now, if any.
    pub(super) link: Mutex<Link>,
    /// Updates go one at a time, so that an answer is never taken for
    /// another update's.
    pub(super) updating: tokio::sync::Mutex<()>,
    /// Calls accepted: running or waiting to run.
    pub(super) admitted: Arc<Semaphore>,
    /// Calls running.
    pub(super) running: Arc<Semaphore>,
    pub(super) max_concurrent_calls: usize,
    pub(super) in_flight: InFlight,
    pub(super) on_session: Option<Arc<SessionCallback>>,
    pub(super) backoff: ExponentialBuilder,
    pub(super) idle_timeout: Duration,
}

impl Shared {
    pub(super) fn announce(&self, session: &Session) {
        tracing::info!(session = session.short_id().field(), "session ready");
        if let Some(callback) = &self.on_session {
            callback(&session.info);
        }
    }

    pub(super) fn declarations(&self) -> Arc<Declarations> {
        self.declarations
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(super) fn replace_declarations(&self, declarations: Arc<Declarations>) {
        *self
            .declarations
            .write()
            .unwrap_or_else(PoisonError::into_inner) = declarations;
    }

    /// The session's creation with the current declarations.
    pub(super) fn create_request(&self) -> CreateSessionRequest {
        self.declarations()
            .create_request(&self.metadata, self.owner.clone(), &self.name)
    }

    pub(super) fn attached(&self) -> Option<mpsc::Sender<AppMessage>> {
        lock(&self.link).outbound.clone()
    }

    /// Records the bridge attached now (or none); a bridge that ends takes
    /// the wait for an update's answer with it.
    pub(super) fn set_attached(&self, outbound: Option<mpsc::Sender<AppMessage>>) {
        *lock(&self.link) = Link {
            outbound,
            update_answer: None,
        };
    }

    /// The attached bridge's queue and the answer to an update sent on it;
    /// `None` when no bridge is attached.
    pub(super) fn await_update_answer(&self) -> Option<(mpsc::Sender<AppMessage>, UpdateAnswer)> {
        let mut link = lock(&self.link);
        let outbound = link.outbound.clone()?;
        let (answer, answered) = oneshot::channel();
        link.update_answer = Some(answer);
        Some((outbound, answered))
    }

    /// Hands the proxy's answer to the update waiting for it; false when
    /// none waits.
    pub(super) fn answer_update(&self, answer: Result<(), String>) -> bool {
        match lock(&self.link).update_answer.take() {
            Some(waiting) => {
                let _ = waiting.send(answer);
                true
            }
            None => false,
        }
    }
}

/// The bridge attached now, and the update waiting for the proxy's answer
/// on it. One lock for both, so that an update never waits on a bridge
/// that has already ended.
#[derive(Default)]
pub(super) struct Link {
    outbound: Option<mpsc::Sender<AppMessage>>,
    pub(super) update_answer: Option<oneshot::Sender<Result<(), String>>>,
}

/// The proxy's answer to an update: taken, or refused with its reason. An
/// error receiving it means the bridge ended first.
type UpdateAnswer = oneshot::Receiver<Result<(), String>>;

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Queues a message without waiting; a full queue means the connection is
/// stuck, which the idle timeout and the proxy's pings will find.
pub(super) fn send_now(bridge: &Bridge, kind: app_message::Kind) {
    let _ = bridge.outbound.try_send(AppMessage { kind: Some(kind) });
}
