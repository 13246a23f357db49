//! `subscriptions/listen` on a view (2026-07-28): one request held open as
//! an event stream of the list changes its filter names. The stream waits
//! on the directory's tick (a session created, updated or removed, on this
//! node or, in cluster mode, any), takes the user's view again and tells
//! the client which of its lists differ: a session of theirs appearing,
//! ending or changing its lists is heard at once, and other users'
//! sessions never wake it for more than a comparison.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::{Hub, OAuthIdentity, SessionEvent};
use rmcp::model::{RequestId, SubscriptionFilter};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

use super::members::{Members, Signature};
use crate::http::mcp::transport::answer::{
    SubscriptionMeta, change_message, notification, sse_response,
};
use crate::http::mcp::transport::request::Request;
use crate::http::sse;

#[derive(Deserialize)]
struct Listen {
    notifications: SubscriptionFilter,
}

/// The list changes of the filter that a view's stream carries.
fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::default();
    let on = |wanted: Option<bool>| (wanted == Some(true)).then_some(true);
    accepted.tools_list_changed = on(requested.tools_list_changed);
    accepted.prompts_list_changed = on(requested.prompts_list_changed);
    accepted.resources_list_changed = on(requested.resources_list_changed);
    accepted
}

/// The changes between two signatures that `accepted` asks for.
fn changes(before: Signature, now: Signature, accepted: &SubscriptionFilter) -> Vec<SessionEvent> {
    let on = |flag: Option<bool>| flag == Some(true);
    let mut changes = Vec::new();
    if before.tools != now.tools && on(accepted.tools_list_changed) {
        changes.push(SessionEvent::ToolsChanged);
    }
    if before.prompts != now.prompts && on(accepted.prompts_list_changed) {
        changes.push(SessionEvent::PromptsChanged);
    }
    if before.resources != now.resources && on(accepted.resources_list_changed) {
        changes.push(SessionEvent::ResourcesChanged);
    }
    changes
}

struct Listening {
    hub: Hub,
    identity: Arc<OAuthIdentity>,
    ticks: tokio::sync::watch::Receiver<u64>,
    seen: Signature,
    accepted: SubscriptionFilter,
    id: RequestId,
    pending: VecDeque<SessionEvent>,
    first: Option<axum::body::Bytes>,
}

/// The view's listen stream, for a request of 2026-07-28.
pub(super) fn listen(hub: &Hub, identity: Arc<OAuthIdentity>, request: &Request) -> Response {
    let listen: Listen = match request.params_as() {
        Ok(listen) => listen,
        Err(rejected) => return rejected.into_response(),
    };
    let accepted = accepted(&listen.notifications);
    // Subscribed before the view is first taken: no change falls between.
    let mut ticks = hub.session_changes();
    ticks.mark_unchanged();
    let seen = Members::of(hub, &identity).signature();
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "_meta")]
        meta: SubscriptionMeta<'a>,
        notifications: &'a SubscriptionFilter,
    }
    let acknowledgement = notification(
        "notifications/subscriptions/acknowledged",
        Params {
            meta: SubscriptionMeta { id: &request.id },
            notifications: &accepted,
        },
    );
    let state = Listening {
        hub: hub.clone(),
        identity,
        ticks,
        seen,
        accepted,
        id: request.id.clone(),
        pending: VecDeque::new(),
        first: Some(sse::json_event(&acknowledgement)),
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        if let Some(first) = state.first.take() {
            return Some((Ok::<_, Infallible>(first), state));
        }
        loop {
            if let Some(change) = state.pending.pop_front() {
                let event = sse::json_event(&change_message(&change, Some(&state.id)));
                return Some((Ok(event), state));
            }
            match tokio::time::timeout(sse::KEEP_ALIVE, state.ticks.changed()).await {
                Err(_) => return Some((Ok(sse::KEEP_ALIVE_COMMENT), state)),
                Ok(Err(_)) => return None,
                Ok(Ok(())) => {}
            }
            let now = Members::of(&state.hub, &state.identity).signature();
            state
                .pending
                .extend(changes(state.seen, now, &state.accepted));
            state.seen = now;
        }
    });
    sse_response(Body::from_stream(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_lists_that_changed_and_were_asked_for_are_told() {
        let requested: SubscriptionFilter = serde_json::from_value(serde_json::json!({
            "toolsListChanged": true,
            "resourcesListChanged": true,
        }))
        .expect("filter");
        let accepted = accepted(&requested);
        let before = Signature::default();
        let now = Signature {
            tools: 1,
            prompts: 2,
            resources: 0,
        };
        assert_eq!(
            changes(before, now, &accepted),
            vec![SessionEvent::ToolsChanged]
        );
        assert!(changes(now, now, &accepted).is_empty());
    }
}
