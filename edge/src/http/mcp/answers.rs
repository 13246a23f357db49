//! A client's answer to a request the app sent it (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`): a JSON-RPC response POSTed to
//! the session's MCP endpoint, as streamable HTTP has clients answer a
//! request they received on a call's stream. It names the request by the
//! id the proxy gave it, and goes to the app's bridge, on whichever node of
//! a cluster holds it (`Hub::answer_client`).
//!
//! Accepted with `202` (as MCP asks of a server that takes a response); a
//! response that answers nothing waiting (unknown, late, twice, another
//! session's) gets `409` or `400` with a JSON-RPC error that says why,
//! never `404`, which clients read as "the session is gone", and is
//! counted as `openclaw_proxy_client_requests_total{outcome="unmatched"}`
//! (`Hub::answer_client` counts it).

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::bridge::{ClientAnswer, Unanswerable};
use openclaw_proxy_core::hub::AnswerError;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

/// A JSON-RPC response, as far as the edge reads it.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(default)]
    jsonrpc: Option<&'a str>,
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<WireError<'a>>,
    #[serde(borrow, default)]
    method: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireError<'a> {
    code: i32,
    #[serde(borrow)]
    message: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

/// A client's answer, read from a POSTed body.
pub struct ClientReply {
    /// The id it answers, as the proxy gave it.
    id: String,
    answer: ClientAnswer,
}

impl ClientReply {
    /// The id it answers, as the proxy gave it.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The client's answer in `body`, if the body is a JSON-RPC response (an
/// object with an `id` and a `result` or an `error`, and no `method`);
/// `Err` when it is one that cannot be used.
pub fn parse(body: &Bytes) -> Option<Result<ClientReply, String>> {
    let text = std::str::from_utf8(body).ok()?;
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let wire: Wire<'_> = serde_json::from_str(text).ok()?;
    if wire.method.is_some() || (wire.result.is_none() && wire.error.is_none()) {
        return None;
    }
    Some(reply_of(wire))
}

fn reply_of(wire: Wire<'_>) -> Result<ClientReply, String> {
    if wire.jsonrpc != Some("2.0") {
        return Err("a JSON-RPC response needs \"jsonrpc\": \"2.0\"".into());
    }
    let id: String = serde_json::from_str(wire.id.get()).map_err(|_| {
        format!(
            "the response's id {} is not one the proxy gave a request (those are strings)",
            openclaw_proxy_core::escape::truncated_to(wire.id.get(), 64)
        )
    })?;
    let answer = match (wire.result, wire.error) {
        (Some(result), None) if result.get().starts_with('{') => {
            ClientAnswer::Result(result.get().to_owned())
        }
        (Some(_), None) => return Err("the response's result must be a JSON object".into()),
        (None, Some(error)) => ClientAnswer::Error {
            code: error.code,
            message: error.message.into_owned(),
            data_json: error
                .data
                .map(|raw| raw.get().to_owned())
                .unwrap_or_default(),
        },
        _ => return Err("a JSON-RPC response carries a result or an error, not both".into()),
    };
    Ok(ClientReply { id, answer })
}

/// Passes the answer on to the app: `202` once it is on its way.
pub async fn deliver(hub: &Hub, session_id: &str, reply: Result<ClientReply, String>) -> Response {
    let reply = match reply {
        Ok(reply) => reply,
        Err(problem) => {
            // A response the proxy cannot read (an id not of its form, a
            // result that is not an object) answers nothing waiting either.
            hub.metrics().client_answer_unmatched();
            return refused(StatusCode::BAD_REQUEST, &problem);
        }
    };
    match hub.answer_client(session_id, &reply.id, reply.answer).await {
        Ok(()) => StatusCode::ACCEPTED.into_response(),
        Err(error) => {
            let status = match &error {
                // Nothing waits for it, here or anywhere: sending it
                // again would not help.
                AnswerError::Unanswerable(Unanswerable::NoCall | Unanswerable::NotOutstanding)
                | AnswerError::NotHere => StatusCode::CONFLICT,
                AnswerError::Unanswerable(Unanswerable::BridgeEnded)
                | AnswerError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
                AnswerError::Session(_) | AnswerError::ForeignId(_) => StatusCode::BAD_REQUEST,
            };
            refused(status, &error.to_string())
        }
    }
}

/// A refusal with a JSON-RPC error (no id: it answers no request).
fn refused(status: StatusCode, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32600, "message": format!("this response was not passed on: {message}")},
    });
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Option<Result<ClientReply, String>> {
        parse(&Bytes::from(text.to_owned()))
    }

    #[test]
    fn responses_are_told_from_requests_and_read() {
        assert!(parsed(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).is_none());
        assert!(parsed(r#"{"jsonrpc":"2.0","method":"notifications/x"}"#).is_none());
        assert!(parsed("[1]").is_none());
        let Some(Ok(reply)) =
            parsed(r#"{"jsonrpc":"2.0","id":"s:1/a","result":{"action":"accept","n":1e400}}"#)
        else {
            panic!("a response");
        };
        assert_eq!(reply.id, "s:1/a");
        assert!(matches!(reply.answer, ClientAnswer::Result(text) if text.contains("1e400")));
        let Some(Ok(reply)) =
            parsed(r#"{"jsonrpc":"2.0","id":"s:1/a","error":{"code":-32601,"message":"no"}}"#)
        else {
            panic!("an error response");
        };
        assert!(matches!(
            reply.answer,
            ClientAnswer::Error { code: -32601, .. }
        ));
        for refused in [
            r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"x","result":[]}"#,
            r#"{"id":"x","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":"x","result":{},"error":{"code":1,"message":"m"}}"#,
        ] {
            assert!(matches!(parsed(refused), Some(Err(_))), "{refused}");
        }
    }
}
