//! What a round answers when the app asks the client something: the
//! `input_required` result, its `inputRequests` written from the app's
//! requests as the app wrote them. Kept apart so the rounds read as what
//! they do, not how their result is spelled.

use openclaw_proxy_core::asking::ClientAsk;
use rmcp::model::RequestId;
use serde::Serialize;
use serde_json::value::RawValue;

/// The `inputRequests` of a result: each request by its key (the app's id),
/// its params as the app wrote them.
pub(super) fn input_requests(asks: &[ClientAsk]) -> Box<RawValue> {
    #[derive(Serialize)]
    struct InputRequest<'a> {
        method: &'static str,
        params: &'a RawValue,
    }
    let mut text = String::from("{");
    for (n, ask) in asks.iter().enumerate() {
        // The core queues only params that read as a JSON object.
        let params: &RawValue = serde_json::from_str(&ask.params_json).unwrap_or(RawValue::NULL);
        let request = InputRequest {
            method: ask.method.as_str(),
            params,
        };
        if n > 0 {
            text.push(',');
        }
        text.push_str(&serde_json::to_string(&ask.id).unwrap_or_default());
        text.push(':');
        text.push_str(&serde_json::to_string(&request).unwrap_or_default());
    }
    text.push('}');
    RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// The JSON-RPC message of an `input_required` result.
pub(super) fn input_required(id: &RequestId, requests: &RawValue, state: &str) -> Vec<u8> {
    #[derive(Serialize)]
    struct Message<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: Result<'a>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Result<'a> {
        result_type: &'static str,
        input_requests: &'a RawValue,
        request_state: &'a str,
    }
    serde_json::to_vec(&Message {
        jsonrpc: "2.0",
        id,
        result: Result {
            result_type: "input_required",
            input_requests: requests,
            request_state: state,
        },
    })
    .unwrap_or_default()
}
