//! Retries that reach another node than the one their call is parked on:
//! the node a retry reaches sends it over NATS to the node its
//! `requestState` names ([`Retry`]), that node resumes the call as if the
//! retry had arrived there ([`ResumeHere`]) and the answer is relayed back
//! whole ([`Resumed`]). Kept apart from the rounds themselves, which need
//! none of this on a single node.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::Response;
use futures_util::future::BoxFuture;
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::delivery::{Resumed, Unrouted};
use openclaw_proxy_core::hub::Resumer;
use rmcp::model::{ProgressToken, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{Found, NO_CALL, Named, Round, Rounds, TOOLS_CALL, error_response, refused};
use crate::http::mcp::transport::answer::{json_response, sse_response};

/// A retry on its way to the node its call is parked on: what a [`Round`]
/// needs besides the hub and the parked calls.
#[derive(Serialize, Deserialize)]
struct Retry {
    session_id: String,
    /// What the call names: its tool, prompt or URI.
    tool: String,
    /// Its method; absent from nodes that parked tool calls only.
    #[serde(default = "tools_call")]
    method: String,
    id: RequestId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<ProgressToken>,
    answers: HashMap<String, Box<RawValue>>,
    request_state: String,
}

fn tools_call() -> String {
    TOOLS_CALL.to_owned()
}

/// The most of a resumed retry's answer relayed back, in bytes: the app's
/// result and the notifications gathered before it.
const MAX_RESUMED_BYTES: usize = 64 * 1024 * 1024;

/// Runs the retries other nodes of the cluster receive for calls parked
/// here.
pub struct ResumeHere(pub Arc<Rounds>);

impl Resumer for ResumeHere {
    fn resume(&self, hub: Hub, retry: Bytes) -> BoxFuture<'static, Resumed> {
        let rounds = self.0.clone();
        Box::pin(async move {
            let response = match serde_json::from_slice::<Retry>(&retry) {
                Ok(retry) => {
                    let session_id: Arc<str> = retry.session_id.into();
                    let round = Round {
                        hub,
                        rounds,
                        session_id,
                        named: Named {
                            method: retry.method.into(),
                            name: retry.tool,
                        },
                        id: retry.id,
                        token: retry.token,
                        answers: retry.answers,
                    };
                    round.resume_here(&retry.request_state).await
                }
                Err(error) => refused(
                    &RequestId::Number(0),
                    &format!("the retry forwarded by another proxy node was unreadable: {error}"),
                ),
            };
            resumed_of(response).await
        })
    }
}

/// A response made here, for the node that relays it.
async fn resumed_of(response: Response) -> Resumed {
    let status = response.status().as_u16();
    let event_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    // Every round's answer is made whole before it is sent.
    let body = axum::body::to_bytes(response.into_body(), MAX_RESUMED_BYTES)
        .await
        .unwrap_or_default();
    Resumed {
        status,
        event_stream,
        body,
    }
}

/// The response relayed from the node that resumed a retry.
fn response_of(resumed: Resumed) -> Response {
    let status = StatusCode::from_u16(resumed.status).unwrap_or(StatusCode::BAD_GATEWAY);
    if resumed.event_stream {
        let mut response = sse_response(Body::from(resumed.body));
        *response.status_mut() = status;
        response
    } else {
        json_response(status, resumed.body.to_vec())
    }
}

/// The JSON-RPC error answering a retry whose call's node cannot be
/// reached now.
fn unavailable(id: &RequestId, why: &str) -> Response {
    let message =
        format!("the retry could not reach the server its call waits on: {why}; try again");
    error_response(
        id,
        rmcp::model::ErrorCode::INTERNAL_ERROR,
        &message,
        StatusCode::SERVICE_UNAVAILABLE,
    )
}

impl Round {
    /// A retry another node received and sent here: resumed here or not
    /// at all.
    async fn resume_here(self, state: &str) -> Response {
        let here = self.hub.node_id();
        match self
            .rounds
            .resume(state, &self.session_id, &self.named, here)
        {
            Ok(Found::Here(parked)) => self.resume_parked(parked).await,
            Ok(Found::Elsewhere(_)) => self.bad_state(
                "requestState names another server than the one it was sent to; send the request again without it",
            ),
            Err(message) => self.bad_state(&message),
        }
    }

    /// Sends the retry to `node`, where its call is parked; its answer.
    pub(super) async fn resume_on(self, node: &str, state: &str) -> Response {
        let id = self.id.clone();
        let metrics = self.hub.metrics().clone();
        let retry = Retry {
            session_id: self.session_id.to_string(),
            tool: self.named.name,
            method: self.named.method.to_string(),
            id: self.id,
            token: self.token,
            answers: self.answers,
            request_state: state.to_owned(),
        };
        let Ok(retry) = serde_json::to_vec(&retry) else {
            return refused(
                &id,
                "the retry could not be forwarded; send the request again without its requestState",
            );
        };
        match self.hub.resume_elsewhere(node, Bytes::from(retry)).await {
            Ok(resumed) => response_of(resumed),
            Err(Unrouted::NoHolder) => {
                metrics.request_state_refused();
                refused(&id, NO_CALL)
            }
            Err(Unrouted::Unavailable(why)) => unavailable(&id, &why),
        }
    }
}
