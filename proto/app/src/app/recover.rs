//! Recovery between two bridges: the backoff pause before attaching again,
//! and, when the proxy no longer knows the session (it restarted, or the
//! session expired), a new session with the app's current declarations,
//! retried while the failure may pass.

use std::time::Duration;

use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use tokio_util::sync::CancellationToken;

use super::shared::Shared;
use crate::error::{AppError, is_permanent};
use crate::proxy::Session;

/// The session that replaces one the proxy no longer knows, after a pause
/// first when the forgotten one was `fresh` (created a moment ago);
/// `None` when stopped meanwhile.
pub(super) async fn replace_session(
    shared: &Shared,
    gone: &Session,
    fresh: bool,
    delays: &mut impl Iterator<Item = Duration>,
    stop: &CancellationToken,
) -> Result<Option<Session>, AppError> {
    tracing::warn!(
        session = gone.short_id().field(),
        "the proxy no longer knows the session; creating a new one"
    );
    if fresh && !pause(delays, stop).await {
        return Ok(None);
    }
    recreate(shared, delays, stop).await
}

/// A new session for the app, retried with backoff while the failure may
/// pass; `None` when stopped meanwhile.
async fn recreate(
    shared: &Shared,
    delays: &mut impl Iterator<Item = Duration>,
    stop: &CancellationToken,
) -> Result<Option<Session>, AppError> {
    loop {
        let creating = tokio::select! {
            () = stop.cancelled() => return Ok(None),
            creating = shared.proxy.create_session(shared.create_request()) => creating,
        };
        match creating {
            Ok(created) => return Ok(Some(created)),
            Err(status) if is_permanent(&status) => {
                return Err(AppError::rpc("re-creating the session", status));
            }
            Err(status) => {
                tracing::warn!(
                    code = ?status.code(),
                    message = Outside::within(status.message(), TEXT_LIMIT).field(),
                    "could not re-create the session; retrying"
                );
                if !pause(delays, stop).await {
                    return Ok(None);
                }
            }
        }
    }
}

/// Waits the next backoff delay; false when stopped meanwhile.
pub(super) async fn pause(
    delays: &mut impl Iterator<Item = Duration>,
    stop: &CancellationToken,
) -> bool {
    let delay = delays.next().unwrap_or(Duration::from_secs(30));
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}
