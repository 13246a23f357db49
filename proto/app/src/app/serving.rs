//! [`Serving`]: the handle of an app that serves. What the app may do while
//! serving (change its declarations, announce a changed resource), wait
//! for the loop to stop by itself, or shut down and delete the session.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use openclaw_proxy_proto::v1::{AppMessage, ResourceUpdated, app_message};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use super::shared::{Shared, lock};
use crate::declarations::Update;
use crate::error::AppError;
use crate::proxy::{Session, SessionInfo};

/// How long [`Serving::update`] waits for the proxy's answer.
const UPDATE_TIMEOUT: Duration = Duration::from_secs(10);

/// A serving app. Dropping it stops serving without deleting the session
/// (the proxy forgets it after its idle lifetime); [`Serving::shutdown`]
/// deletes it.
pub struct Serving {
    pub(super) shared: Arc<Shared>,
    pub(super) session: watch::Receiver<Session>,
    pub(super) stop: CancellationToken,
    pub(super) task: Option<JoinHandle<Result<(), AppError>>>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("session", &self.session.borrow().info)
            .finish_non_exhaustive()
    }
}

impl Serving {
    /// The current session's id, MCP URL and MCP token.
    pub fn session(&self) -> SessionInfo {
        self.session.borrow().info.clone()
    }

    /// Changes the app's declarations while it serves: each list the update
    /// gives replaces the app's list of that kind (tools, resources,
    /// resource templates, prompts). New requests use the new handlers at
    /// once; MCP clients see the new lists at their next `*/list`.
    ///
    /// Waits for the proxy's answer when a bridge is attached. When none is
    /// (the app is reconnecting), or it is lost before the answer, the
    /// change is sent when the bridge is back, and a re-created session
    /// registers it; this returns `Ok` then. Fails, changing nothing, when
    /// a declaration is wrong ([`AppError::InvalidTool`] and its siblings)
    /// or the proxy refuses the change ([`AppError::UpdateRefused`]).
    pub async fn update(&self, update: Update) -> Result<(), AppError> {
        let shared = &self.shared;
        let _one_at_a_time = shared.updating.lock().await;
        let previous = shared.declarations();
        let (next, lists) = previous.updated(update)?;
        let next = Arc::new(next);
        shared.replace_declarations(next.clone());
        shared.changed.store(true, Ordering::SeqCst);
        let Some((outbound, answered)) = shared.await_update_answer() else {
            // The next bridge sends the change.
            return Ok(());
        };
        let message = AppMessage {
            kind: Some(app_message::Kind::UpdateTools(next.update_message(lists))),
        };
        if outbound.send(message).await.is_err() {
            // The bridge ended meanwhile; the next one sends the change.
            return Ok(());
        }
        match tokio::time::timeout(UPDATE_TIMEOUT, answered).await {
            Ok(Ok(Ok(()))) | Ok(Err(_)) => Ok(()),
            Ok(Ok(Err(refusal))) => {
                // The session keeps what it had, and so does the app.
                let mut current = shared
                    .declarations
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                if Arc::ptr_eq(&current, &next) {
                    *current = previous;
                }
                Err(AppError::UpdateRefused(refusal))
            }
            Err(_) => {
                lock(&shared.link).update_answer.take();
                Err(AppError::rpc(
                    "updating the declarations",
                    Status::deadline_exceeded(format!(
                        "the proxy did not answer the update within {UPDATE_TIMEOUT:?}"
                    )),
                ))
            }
        }
    }

    /// Tells the proxy that the resource at `uri` changed: MCP clients that
    /// subscribed to it receive `notifications/resources/updated`. Fails
    /// with [`AppError::NotAttached`] while the app is reconnecting.
    pub async fn resource_updated(&self, uri: impl Into<String>) -> Result<(), AppError> {
        let outbound = self.shared.attached().ok_or(AppError::NotAttached)?;
        let message = AppMessage {
            kind: Some(app_message::Kind::ResourceUpdated(ResourceUpdated {
                uri: uri.into(),
            })),
        };
        outbound
            .send(message)
            .await
            .map_err(|_| AppError::NotAttached)
    }

    /// Waits until the app stops serving by itself, which it does only when
    /// retrying cannot help (the token was refused, another instance took
    /// the session over); returns why. Pending forever otherwise, so select
    /// it against a shutdown signal.
    pub async fn closed(&mut self) -> Result<(), AppError> {
        // The handle stays in place while waiting, so that `shutdown` still
        // finds the loop when this future is dropped by a `select!`.
        let Some(task) = &mut self.task else {
            return Ok(());
        };
        let ended = task.await;
        self.task = None;
        joined(ended)
    }

    /// Stops serving: cancels the calls still running (their handlers see
    /// [`CancelReason::Shutdown`](crate::CancelReason::Shutdown)), closes
    /// the bridge and deletes the session, so that the agent sees no stale
    /// tools.
    pub async fn shutdown(mut self) -> Result<(), AppError> {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // A loop that already failed has reported it through `closed`,
            // or it is reported now; either way the session goes.
            let ended = joined(task.await);
            if let Err(error) = &ended {
                tracing::debug!(%error, "the serve loop had stopped");
            }
        }
        let session = self.session.borrow().clone();
        self.shared
            .proxy
            .delete_session(&session)
            .await
            .map_err(|status| AppError::rpc("deleting the session", status))?;
        tracing::info!(session = session.short_id().field(), "session deleted");
        Ok(())
    }
}

fn joined(result: Result<Result<(), AppError>, tokio::task::JoinError>) -> Result<(), AppError> {
    result.unwrap_or_else(|error| Err(AppError::Stopped(error.to_string())))
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
