//! Changes of a session, to the clients that want to hear of them:
//! `subscriptions/listen` (2026-07-28), one request held open as an event
//! stream of the changes its filter names, and `resources/subscribe` /
//! `resources/unsubscribe` (up to 2025-11-25), which a stateless endpoint
//! acknowledges: the updates reach the streams that can carry them (the
//! legacy SSE stream, the stdio relay; docs/mcp.md, "Resources and
//! prompts"). Each revision's methods are unknown to the other, as the
//! specification has it.

use std::convert::Infallible;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::SessionEvent;
use rmcp::model::{RequestId, SubscriptionFilter};
use serde::{Deserialize, Serialize};

use super::{Context, hub_refusal, not_found};
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::{
    Answer, SubscriptionMeta, change_message, notification, sse_response,
};
use crate::http::mcp::transport::request::{Request, Revision};
use crate::http::sse;

/// `resources/subscribe` and `resources/unsubscribe`: the session must
/// exist.
pub(super) async fn subscribe(
    context: &Context<'_>,
    request: &Request,
) -> Result<Answer, Rejected> {
    if request.revision == Revision::PerRequest {
        return Err(not_found(&request.method, request.revision));
    }
    #[derive(Deserialize)]
    struct Subscribe {
        #[allow(dead_code)]
        uri: String,
    }
    let _: Subscribe = request.params_as()?;
    context
        .state
        .hub
        .catalog(context.session_id)
        .await
        .map_err(|error| hub_refusal(&error))?;
    Ok(Answer::result(&request.id, serde_json::json!({})))
}

#[derive(Deserialize)]
struct Listen {
    notifications: SubscriptionFilter,
}

/// What a listen stream carries: every kind of change this server has is
/// advertised, so the client gets what it asked for, but only of the
/// resources the session serves (`serves`: one it declares, or an expansion
/// of one of its templates), each once. The acknowledgement names what was
/// accepted, so a client learns which of its URIs it will hear of.
fn accepted(requested: SubscriptionFilter, serves: impl Fn(&str) -> bool) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::default();
    let on = |wanted: Option<bool>| (wanted == Some(true)).then_some(true);
    accepted.tools_list_changed = on(requested.tools_list_changed);
    accepted.prompts_list_changed = on(requested.prompts_list_changed);
    accepted.resources_list_changed = on(requested.resources_list_changed);
    accepted.resource_subscriptions = requested.resource_subscriptions.map(|uris| {
        let mut seen = std::collections::HashSet::new();
        let mut kept: Vec<String> = uris
            .into_iter()
            .filter(|uri| serves(uri) && seen.insert(uri.clone()))
            .collect();
        kept.shrink_to_fit();
        kept
    });
    accepted
}

/// The bytes of resource URIs a stream would keep: over
/// `OPENCLAW_PROXY_MAX_LISTEN_URI_BYTES`, the stream is refused.
fn uri_bytes(accepted: &SubscriptionFilter) -> usize {
    accepted
        .resource_subscriptions
        .iter()
        .flatten()
        .map(String::len)
        .sum()
}

/// Whether the stream's filter lets `change` through.
fn wanted(accepted: &SubscriptionFilter, change: &SessionEvent) -> bool {
    match change {
        SessionEvent::ToolsChanged => accepted.tools_list_changed == Some(true),
        SessionEvent::PromptsChanged => accepted.prompts_list_changed == Some(true),
        SessionEvent::ResourcesChanged => accepted.resources_list_changed == Some(true),
        SessionEvent::ResourceUpdated(uri) => accepted
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|wanted| **wanted == **uri)),
    }
}

/// The acknowledgement that opens a listen stream, naming what it carries.
fn acknowledgement(id: &RequestId, accepted: &SubscriptionFilter) -> Vec<u8> {
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "_meta")]
        meta: SubscriptionMeta<'a>,
        notifications: &'a SubscriptionFilter,
    }
    notification(
        "notifications/subscriptions/acknowledged",
        Params {
            meta: SubscriptionMeta { id },
            notifications: accepted,
        },
    )
}

/// `subscriptions/listen`: the session's changes, for as long as the client
/// holds the request open; a keep-alive comment after [`sse::KEEP_ALIVE`]
/// of silence. The stream ends when the session does.
pub(super) async fn listen(context: Context<'_>, request: Request) -> Response {
    if request.revision == Revision::WithInitialize {
        return Answer::from(not_found(&request.method, request.revision).answering(&request.id))
            .into_response();
    }
    let listen: Listen = match request.params_as() {
        Ok(listen) => listen,
        Err(rejected) => return rejected.into_response(),
    };
    let limits = context.state.config.listen;
    let open = match context
        .state
        .listens
        .open(context.session_id, limits.streams_per_session)
    {
        Ok(open) => open,
        Err(refusal) => {
            tracing::debug!(%refusal, "subscriptions/listen refused");
            return Rejected::new(
                axum::http::StatusCode::OK,
                rmcp::model::ErrorCode::INVALID_REQUEST,
                refusal.to_string(),
            )
            .answering(&request.id)
            .into_response();
        }
    };
    let catalog = match context.state.hub.catalog(context.session_id).await {
        Ok(catalog) => catalog,
        Err(error) => return hub_refusal(&error).answering(&request.id).into_response(),
    };
    let accepted = accepted(listen.notifications, |uri| catalog.serves(uri));
    drop(catalog);
    let bytes = uri_bytes(&accepted);
    if bytes > limits.uri_bytes {
        let limit = limits.uri_bytes;
        return Rejected::invalid_params(format!(
            "the resources named to listen to come to {bytes} bytes; a stream may listen to {limit} (OPENCLAW_PROXY_MAX_LISTEN_URI_BYTES)"
        ))
        .answering(&request.id)
        .into_response();
    }
    let changes = match context.state.hub.watch(context.session_id).await {
        Ok(changes) => changes,
        Err(error) => return hub_refusal(&error).answering(&request.id).into_response(),
    };
    let first = sse::json_event(&acknowledgement(&request.id, &accepted));
    let id = request.id;
    let stream = futures_util::stream::unfold(
        (Some(first), changes, accepted, id),
        |(first, mut changes, accepted, id)| async move {
            if let Some(first) = first {
                return Some((Ok::<_, Infallible>(first), (None, changes, accepted, id)));
            }
            loop {
                let change = match tokio::time::timeout(sse::KEEP_ALIVE, changes.recv()).await {
                    Err(_) => {
                        let event = sse::KEEP_ALIVE_COMMENT;
                        return Some((Ok(event), (None, changes, accepted, id)));
                    }
                    Ok(Ok(change)) => change,
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
                    Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return None,
                };
                if wanted(&accepted, &change) {
                    let event = sse::json_event(&change_message(&change, Some(&id)));
                    return Some((Ok(event), (None, changes, accepted, id)));
                }
            }
        },
    );
    // Counted for as long as the stream is open.
    let stream = futures_util::StreamExt::map(stream, move |event| {
        let _open = &open;
        event
    });
    sse_response(Body::from_stream(stream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_carries_what_its_filter_names() {
        let requested: SubscriptionFilter = serde_json::from_value(serde_json::json!({
            "toolsListChanged": true,
            "promptsListChanged": false,
            "resourceSubscriptions": ["a:1", "b:1", "a:1"],
        }))
        .expect("filter");
        let accepted = accepted(requested, |uri| uri.starts_with("a:"));
        assert!(wanted(&accepted, &SessionEvent::ToolsChanged));
        assert!(!wanted(&accepted, &SessionEvent::PromptsChanged));
        assert!(!wanted(&accepted, &SessionEvent::ResourcesChanged));
        assert!(wanted(
            &accepted,
            &SessionEvent::ResourceUpdated("a:1".into())
        ));
        assert!(!wanted(
            &accepted,
            &SessionEvent::ResourceUpdated("a:2".into())
        ));
        assert_eq!(
            accepted.resource_subscriptions,
            Some(vec!["a:1".to_owned()]),
            "only what the session serves, once"
        );
        assert_eq!(uri_bytes(&accepted), 3);
        let ack = acknowledgement(&RequestId::Number(4), &accepted);
        let ack: serde_json::Value = serde_json::from_slice(&ack).expect("json");
        assert_eq!(
            ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            4
        );
        assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true);
    }
}
