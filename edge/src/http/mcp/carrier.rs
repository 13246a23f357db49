//! The app's requests to the MCP client (elicitation, sampling, roots, and
//! the confirmation gate's question) on a `tools/call`, `prompts/get`,
//! `resources/read` or `completion/complete` rmcp serves.
//!
//! The client answers such a request in a POST of its own, which the edge
//! passes to the app by the id the proxy minted ([`super::answers`],
//! `Hub::answer_client`): the request must carry that id. rmcp's stateless
//! transport writes what the handler sends on the call's answer, but a
//! request sent through rmcp's peer gets an id of rmcp's (a counter per
//! HTTP request, so not routable) and waits for an answer that cannot
//! reach it (a stateless service reads the one message it was made for).
//! So the handler sends each request as a notification of the proxy's own
//! method, [`CARRIER_METHOD`], holding the whole JSON-RPC request as text
//! ([`notification`]); rmcp writes it on the answer's event stream like any
//! notification, in order with the call's progress and logs, and
//! [`carried`] replaces it there with the request it holds, exactly as the
//! direct path writes one ([`request_message`]). No carrier leaves the
//! proxy: every answer rmcp gives to those methods passes through
//! [`carried`], on the streamable endpoint and the legacy SSE transport
//! alike.
//!
//! At 2026-07-28 a server asks in `input_required` rounds, never on the
//! stream; the requests rmcp serves are not answered in rounds, and their
//! app's requests are refused at once, saying why (`Askable::OnePiece`).

use std::borrow::Cow;

use axum::body::Body;
use axum::response::Response;
use futures_util::StreamExt;
use openclaw_proxy_core::hub::client_request_id;
use openclaw_proxy_core::progress::ClientAsk;
use rmcp::model::{CustomNotification, ServerNotification};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::http::sse;

/// The method of the notification that carries a request to the edge; no
/// client ever sees it.
pub const CARRIER_METHOD: &str = "openclaw-proxy/client-request";

/// The JSON-RPC request that asks the client what the app asks, with the id
/// its answer is routed back by ([`client_request_id`]) and the params as
/// the app wrote them.
pub fn request_message(ask: &ClientAsk) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: String,
        method: &'static str,
        params: &'a RawValue,
    }
    // The core queues only params that read as a JSON object.
    let params: Option<&RawValue> = serde_json::from_str(&ask.params_json).ok();
    serde_json::to_vec(&Request {
        jsonrpc: "2.0",
        id: client_request_id(&ask.request_id, &ask.id),
        method: ask.method.as_str(),
        params: params.unwrap_or(RawValue::NULL),
    })
    .unwrap_or_default()
}

/// The notification that carries `ask`'s request through rmcp: its text,
/// as a JSON string, so that the app's params arrive byte for byte.
pub fn notification(ask: &ClientAsk) -> ServerNotification {
    let request = String::from_utf8_lossy(&request_message(ask)).into_owned();
    let params = serde_json::json!({ "request": request });
    ServerNotification::CustomNotification(CustomNotification::new(CARRIER_METHOD, Some(params)))
}

/// A carrier notification, as rmcp writes it.
#[derive(Deserialize)]
struct Carrier<'a> {
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: CarrierParams<'a>,
}

#[derive(Deserialize)]
struct CarrierParams<'a> {
    #[serde(borrow)]
    request: Cow<'a, str>,
}

/// The request a message carries, if it is a carrier; other messages (a
/// result that merely mentions the method among them) are `None`.
fn carried_request(message: &str) -> Option<String> {
    if !message.contains(CARRIER_METHOD) {
        return None;
    }
    let carrier: Carrier<'_> = serde_json::from_str(message).ok()?;
    (carrier.method == CARRIER_METHOD).then(|| carrier.params.request.into_owned())
}

/// rmcp's answer to a request the app answers, with each carrier on its event stream
/// replaced by the request it carries; a JSON answer (nothing was sent
/// before the result) is left as it is. The stream's other messages are
/// written again unchanged, and a keep-alive comment goes out after
/// [`sse::KEEP_ALIVE`] of silence, as rmcp's own would (a call may wait
/// minutes for its user). Dropping the answer drops rmcp's, which ends the
/// call as before.
pub fn carried(response: Response) -> Response {
    if !sse::is_event_stream(&response) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let messages = Box::pin(sse::data_of(body));
    // Once rmcp's answer broke off, the error is passed on (hyper then
    // aborts the response, so the client sees it cut off rather than
    // ended) and nothing more is read.
    let events = futures_util::stream::unfold(Some(messages), |messages| async move {
        let mut messages = messages?;
        let event = match tokio::time::timeout(sse::KEEP_ALIVE, messages.next()).await {
            Err(_) => sse::KEEP_ALIVE_COMMENT,
            Ok(None) => return None,
            Ok(Some(Err(error))) => {
                tracing::debug!(%error, "rmcp's answer broke off");
                let broken = std::io::Error::other(format!("the answer broke off: {error}"));
                return Some((Err(broken), None));
            }
            Ok(Some(Ok(message))) => match carried_request(&message) {
                Some(request) => sse::json_event(request.as_bytes()),
                None => sse::json_event(message.as_bytes()),
            },
        };
        Some((Ok(event), Some(messages)))
    });
    Response::from_parts(parts, Body::from_stream(events))
}

#[cfg(test)]
mod tests {
    use openclaw_proxy_core::progress::AskMethod;
    use rmcp::model::ServerJsonRpcMessage;

    use super::*;

    fn ask() -> ClientAsk {
        ClientAsk {
            request_id: "s:7".into(),
            id: "who".into(),
            method: AskMethod::Elicitation,
            params_json: r#"{"message":"n?","n":1e400,"big":123456789012345678901234567890}"#
                .into(),
        }
    }

    #[tokio::test]
    async fn a_carrier_becomes_its_request_byte_for_byte_and_the_rest_passes() {
        let carrier = ServerJsonRpcMessage::notification(notification(&ask()));
        let carrier = serde_json::to_string(&carrier).unwrap_or_default();
        let result = r#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"openclaw-proxy/client-request"}]}}"#;
        let body = format!("data: {carrier}\n\n: ping\n\ndata: {result}\n\n");
        let response = sse::response(Body::from(body));
        let rewritten = carried(response);
        assert!(sse::is_event_stream(&rewritten));
        let bytes = axum::body::to_bytes(rewritten.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        let expected = format!(
            "data: {}\n\ndata: {result}\n\n",
            String::from_utf8_lossy(&request_message(&ask()))
        );
        assert_eq!(String::from_utf8_lossy(&bytes), expected);
        assert!(expected.contains(r#""id":"s:7/who""#), "{expected}");
        assert!(expected.contains("1e400"), "{expected}");
    }

    #[tokio::test]
    async fn a_json_answer_is_left_alone() {
        let response = axum::response::IntoResponse::into_response(axum::Json(
            serde_json::json!({"method": CARRIER_METHOD}),
        ));
        let left = carried(response);
        let bytes = axum::body::to_bytes(left.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        assert!(String::from_utf8_lossy(&bytes).contains(CARRIER_METHOD));
    }
}
