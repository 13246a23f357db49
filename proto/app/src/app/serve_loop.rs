//! The serve loop: keeps one bridge of the session attached until stopped
//! or refused, and decides after each bridge how it ended: attach again
//! after a backoff delay, create a new session, or stop.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use backon::BackoffBuilder;
use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::inbound::{End, classify, serve_attached};
use super::recover::{pause, replace_session};
use super::shared::Shared;
use crate::error::AppError;
use crate::proxy::{Bridge, Session};

/// Keeps the session's bridge attached until stopped or refused.
pub(super) async fn serve_loop(
    shared: Arc<Shared>,
    mut session: Session,
    first: Bridge,
    current: watch::Sender<Session>,
    stop: CancellationToken,
) -> Result<(), AppError> {
    let mut bridge = Some(first);
    let mut delays = shared.backoff.build();
    // A session created a moment ago that the proxy already does not know
    // points at trouble on its side: back off before creating another.
    let mut fresh = true;
    // A re-created session is reported once its bridge is attached, so the
    // app hands out MCP URLs whose tools answer.
    let mut unreported = false;
    // A bridge attached again to a session that may hold declarations older
    // than the app's sends the app's.
    let mut resync = false;
    loop {
        let end = match bridge.take() {
            Some(attached) => {
                delays = shared.backoff.build();
                fresh = false;
                if std::mem::take(&mut unreported) {
                    shared.announce(&session);
                }
                let resync = std::mem::take(&mut resync);
                serve_attached(&shared, &session, attached, resync, &stop).await
            }
            None => {
                let attaching = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    attaching = shared.proxy.attach(&session) => attaching,
                };
                match attaching {
                    Ok(attached) => {
                        resync = !fresh && shared.changed.load(Ordering::SeqCst);
                        bridge = Some(attached);
                        continue;
                    }
                    Err(status) => classify(status, &session, "attaching the bridge"),
                }
            }
        };
        match end {
            End::Stopped => return Ok(()),
            End::Fatal(error) => {
                tracing::error!(session = session.short_id().field(), %error, "the app stopped serving");
                return Err(error);
            }
            End::Lost(status) => {
                tracing::warn!(
                    session = session.short_id().field(),
                    code = ?status.code(),
                    message = Outside::within(status.message(), TEXT_LIMIT).field(),
                    "bridge lost; reconnecting"
                );
                if !pause(&mut delays, &stop).await {
                    return Ok(());
                }
            }
            End::SessionGone => {
                let replacing = replace_session(&shared, &session, fresh, &mut delays, &stop);
                let Some(created) = replacing.await? else {
                    return Ok(());
                };
                session = created;
                fresh = true;
                unreported = true;
                current.send_replace(session.clone());
            }
        }
    }
}
