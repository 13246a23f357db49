//! Reading one attached bridge: every message the proxy sends has its
//! answer here (a call started, a cancellation passed on, a ping answered,
//! an update's answer handed over), until the bridge ends; and the ways a
//! bridge can end, which decide what the serve loop does next.

use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use openclaw_proxy_proto::v1::{Pong, app_message, proxy_message};
use tokio_util::sync::CancellationToken;
use tonic::{Code, Status};

use super::shared::{Shared, send_now};
use crate::call::{CancelReason, Scope};
use crate::declarations::Lists;
use crate::error::{AppError, is_permanent};
use crate::proxy::{Bridge, Session};

/// How a bridge ended.
pub(super) enum End {
    /// `shutdown()` was called.
    Stopped,
    /// The connection failed or the proxy ended the bridge: attach again.
    Lost(Status),
    /// The proxy no longer knows the session: create a new one.
    SessionGone,
    /// Retrying cannot help.
    Fatal(AppError),
}

pub(super) fn classify(status: Status, session: &Session, step: &'static str) -> End {
    match status.code() {
        Code::NotFound => End::SessionGone,
        Code::Aborted => End::Fatal(AppError::Replaced {
            session_id: session.id().to_owned(),
        }),
        _ if is_permanent(&status) => End::Fatal(AppError::rpc(step, status)),
        _ => End::Lost(status),
    }
}

/// Serves one attached bridge until it ends: sends it the app's declarations
/// first when `resync`, and cancels the calls it delivered once it ended.
pub(super) async fn serve_attached(
    shared: &Shared,
    session: &Session,
    attached: Bridge,
    resync: bool,
    stop: &CancellationToken,
) -> End {
    tracing::info!(session = session.short_id().field(), "bridge attached");
    if resync {
        let update = shared.declarations().update_message(Lists::ALL);
        send_now(&attached, app_message::Kind::UpdateTools(update));
    }
    shared.set_attached(Some(attached.outbound.clone()));
    let scope = Scope::default();
    let end = serve_bridge(shared, session, attached, &scope, stop).await;
    shared.set_attached(None);
    scope.end(match &end {
        End::Stopped => CancelReason::Shutdown,
        _ => CancelReason::BridgeLost,
    });
    end
}

/// Reads one attached bridge until it ends.
async fn serve_bridge(
    shared: &Shared,
    session: &Session,
    mut bridge: Bridge,
    scope: &Scope,
    stop: &CancellationToken,
) -> End {
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return End::Stopped,
            next = tokio::time::timeout(shared.idle_timeout, bridge.inbound.message()) => next,
        };
        let message = match next {
            Err(_) => {
                return End::Lost(Status::deadline_exceeded(format!(
                    "the proxy sent nothing for {:?}; the connection is presumed dead",
                    shared.idle_timeout
                )));
            }
            Ok(Ok(Some(message))) => message,
            Ok(Ok(None)) => return End::Lost(Status::unavailable("the proxy ended the bridge")),
            Ok(Err(status)) => return classify(status, session, "serving the bridge"),
        };
        // Every kind the proxy can send has its arm: a new kind in the
        // contract fails to compile here until it is handled.
        match message.kind {
            Some(proxy_message::Kind::Cancel(cancel)) => {
                shared
                    .in_flight
                    .cancel(&cancel.request_id, CancelReason::Proxy(cancel.reason));
            }
            Some(proxy_message::Kind::Invoke(invoke)) => {
                shared.start_call(invoke, &bridge, scope);
            }
            Some(proxy_message::Kind::Ping(ping)) => {
                send_now(&bridge, app_message::Kind::Pong(Pong { nonce: ping.nonce }));
            }
            Some(proxy_message::Kind::Error(notice)) => {
                // The contract answers an update with ToolsUpdated or with a
                // notice naming the problem, which concerns no call.
                let refusal = notice.request_id.is_empty()
                    && shared.answer_update(Err(notice.message.clone()));
                if !refusal {
                    // The request id is left out: it holds the full session id.
                    tracing::warn!(
                        message = Outside::within(&notice.message, TEXT_LIMIT).field(),
                        "the proxy could not use a message from the app"
                    );
                }
            }
            Some(proxy_message::Kind::ToolsUpdated(updated)) => {
                shared.answer_update(Ok(()));
                tracing::debug!(
                    tools = updated.tools,
                    resources = updated.resources,
                    resource_templates = updated.resource_templates,
                    prompts = updated.prompts,
                    "the proxy took the new declarations"
                );
            }
            Some(proxy_message::Kind::McpRequest(request)) => {
                shared.start_mcp_request(request, &bridge, scope);
            }
            Some(proxy_message::Kind::ClientResponse(response)) => {
                shared.in_flight.asks.answer(response);
            }
            Some(proxy_message::Kind::Attached(_)) | None => {}
        }
    }
}
