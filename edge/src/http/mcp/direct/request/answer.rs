//! The answer to a request the app answered, as rmcp would write it at the
//! request's revision: the app's result as it wrote it (with `resultType`
//! left out before 2026-07-28, and completed as rmcp completes it at
//! 2026-07-28), a missing resource or prompt as that revision's error.
//! Kept apart from the sending because the rounds write the same answer.

use openclaw_proxy_core::InvokeError;
use openclaw_proxy_core::outcome::McpReply;
use rmcp::model::RequestId;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::http::mcp::direct::is_empty_object;
use crate::http::mcp::direct::parse::Revision;

/// The JSON-RPC code of a resource that does not exist, up to 2025-11-25.
const RESOURCE_NOT_FOUND: i32 = -32002;
/// The same at 2026-07-28, which names the URI as an invalid param.
const INVALID_PARAMS: i32 = -32602;
/// A JSON-RPC answer carrying the app's result as it wrote it.
#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a RawValue,
}

#[derive(Serialize)]
struct ErrorAnswer<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i32,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
}

/// What the answer to a request says besides its outcome.
pub(in crate::http::mcp::direct) struct Answered<'a> {
    pub(in crate::http::mcp::direct) id: &'a RequestId,
    pub(in crate::http::mcp::direct) method: &'static str,
    pub(in crate::http::mcp::direct) target: &'a str,
    pub(in crate::http::mcp::direct) revision: Revision,
}

impl Answered<'_> {
    /// The JSON-RPC answer to the request's outcome, as rmcp would give it
    /// at the request's revision, with the app's result as it wrote it.
    pub(in crate::http::mcp::direct) fn body(
        &self,
        outcome: Result<McpReply, InvokeError>,
    ) -> Vec<u8> {
        let Self {
            id,
            method,
            target,
            revision,
        } = *self;
        let not_found = match revision {
            Revision::WithInitialize => RESOURCE_NOT_FOUND,
            Revision::PerRequest => INVALID_PARAMS,
        };
        let result = |result: Box<RawValue>| match revision {
            // rmcp leaves `resultType` out for clients before 2026-07-28.
            Revision::WithInitialize => without_result_type(result),
            // And completes it at 2026-07-28.
            Revision::PerRequest => completed_at_2026(result, method == "resources/read"),
        };
        answer_body(
            id,
            target,
            not_found,
            outcome.map(|reply| match reply {
                McpReply::Result(raw) => McpReply::Result(result(raw)),
                other => other,
            }),
        )
    }
}

/// The JSON-RPC answer to a request's outcome; a missing resource is
/// `not_found`, carrying its URI.
fn answer_body(
    id: &RequestId,
    target: &str,
    not_found: i32,
    outcome: Result<McpReply, InvokeError>,
) -> Vec<u8> {
    let error = |code: i32, message: &str, data: Option<&RawValue>| {
        serde_json::to_vec(&ErrorAnswer {
            jsonrpc: "2.0",
            id,
            error: ErrorBody {
                code,
                message,
                data,
            },
        })
        .unwrap_or_default()
    };
    let uri_data = || RawValue::from_string(serde_json::json!({ "uri": target }).to_string()).ok();
    match outcome {
        Ok(McpReply::Result(result)) => serde_json::to_vec(&Answer {
            jsonrpc: "2.0",
            id,
            result: &result,
        })
        .unwrap_or_default(),
        Ok(McpReply::Error(failure)) if failure.code == RESOURCE_NOT_FOUND => {
            let data = failure.data.or_else(uri_data);
            error(not_found, &failure.message, data.as_deref())
        }
        Ok(McpReply::Error(failure)) => {
            error(failure.code, &failure.message, failure.data.as_deref())
        }
        Err(failure @ InvokeError::UnknownResource { .. }) => {
            let data = uri_data();
            error(not_found, &failure.to_string(), data.as_deref())
        }
        Err(failure @ InvokeError::UnknownPrompt { .. }) => {
            error(INVALID_PARAMS, &failure.to_string(), None)
        }
        Err(failure) => error(-32603, &failure.to_string(), None),
    }
}

/// The result without a `resultType` key, which clients before 2026-07-28
/// do not know; unchanged (and not re-read) when it has none.
fn without_result_type(result: Box<RawValue>) -> Box<RawValue> {
    if !result.get().contains("\"resultType\"") {
        return result;
    }
    let Ok(mut object) =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(result.get())
    else {
        return result;
    };
    object.remove("resultType");
    serde_json::value::to_raw_value(&object).unwrap_or(result)
}

/// The keys of a result that rmcp completes at 2026-07-28, as far as the
/// direct path reads them. A key counts when present at all (`null` included), so that none
/// is written twice.
#[derive(Deserialize)]
struct CacheHints<'a> {
    #[serde(rename = "ttlMs", default, borrow, deserialize_with = "present")]
    ttl_ms: Option<&'a RawValue>,
    #[serde(rename = "cacheScope", default, borrow, deserialize_with = "present")]
    cache_scope: Option<&'a RawValue>,
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
}

fn present<'de, D: serde::Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(value).map(Some)
}

/// A result as rmcp completes it at 2026-07-28: `resultType: "complete"`
/// when the app named no type, and for a complete read (`cacheable`) the
/// caching hints the app gave none of (`ttlMs: 0`, `cacheScope:
/// "private"`); written after the app's own text, which is kept as it is.
fn completed_at_2026(result: Box<RawValue>, cacheable: bool) -> Box<RawValue> {
    let Ok(hints) = serde_json::from_str::<CacheHints<'_>>(result.get()) else {
        return result;
    };
    let mut missing = Vec::new();
    if hints.result_type.is_none() {
        missing.push(r#""resultType":"complete""#);
    }
    let complete = hints
        .result_type
        .as_deref()
        .is_none_or(|kind| kind == "complete");
    if cacheable && complete && hints.ttl_ms.is_none() {
        missing.push(r#""ttlMs":0"#);
    }
    if cacheable && complete && hints.cache_scope.is_none() {
        missing.push(r#""cacheScope":"private""#);
    }
    let text = result.get().trim_end();
    let Some(inside) = text.strip_suffix('}') else {
        return result;
    };
    if missing.is_empty() {
        return result;
    }
    let separator = if is_empty_object(text) { "" } else { "," };
    let extended = format!("{inside}{separator}{}}}", missing.join(","));
    RawValue::from_string(extended).unwrap_or(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_their_text_and_errors_carry_the_uri() {
        let id = RequestId::Number(7);
        let result = RawValue::from_string(
            r#"{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}"#.into(),
        )
        .expect("json");
        let answer = answer_body(&id, "a:1", RESOURCE_NOT_FOUND, Ok(McpReply::Result(result)));
        assert_eq!(
            String::from_utf8_lossy(&answer),
            r#"{"jsonrpc":"2.0","id":7,"result":{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}}"#
        );
        for not_found in [RESOURCE_NOT_FOUND, INVALID_PARAMS] {
            let missing = answer_body(
                &id,
                "a:2",
                not_found,
                Err(InvokeError::UnknownResource { uri: "a:2".into() }),
            );
            let missing: serde_json::Value = serde_json::from_slice(&missing).expect("json");
            assert_eq!(missing["error"]["code"], not_found);
            assert_eq!(missing["error"]["data"]["uri"], "a:2");
        }
    }

    #[test]
    fn a_2026_result_gets_what_rmcp_adds_and_keeps_its_own() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).expect("json");
        let read = |text: &str| completed_at_2026(raw(text), true).get().to_owned();
        assert_eq!(
            read(r#"{"contents":[],"x":1e400}"#),
            r#"{"contents":[],"x":1e400,"resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
        );
        assert_eq!(
            read("{ }"),
            r#"{ "resultType":"complete","ttlMs":0,"cacheScope":"private"}"#
        );
        assert_eq!(
            read(r#"{"contents":[],"ttlMs":5,"resultType":"complete"}"#),
            r#"{"contents":[],"ttlMs":5,"resultType":"complete","cacheScope":"private"}"#
        );
        let own = r#"{"contents":[],"ttlMs":5,"cacheScope":"public","resultType":"complete"}"#;
        assert_eq!(read(own), own);
        let incomplete = r#"{"resultType":"input_required"}"#;
        assert_eq!(read(incomplete), incomplete);
        let prompt = completed_at_2026(raw(r#"{"messages":[]}"#), false);
        assert_eq!(prompt.get(), r#"{"messages":[],"resultType":"complete"}"#);
    }
}
