//! The answer to a request the app answered: the app's result as it wrote
//! it, with what the request's revision requires and the app left out
//! (before 2026-07-28 no `resultType`, which those revisions do not know;
//! at 2026-07-28 `resultType: "complete"`, and a cacheable result's
//! caching hints), or a missing resource or prompt as that revision's
//! error. Kept apart from the sending because the rounds write the same
//! answer.

use openclaw_proxy_core::InvokeError;
use openclaw_proxy_core::outcome::McpReply;
use rmcp::model::{ErrorCode, RequestId};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::AppServed;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::{Revision, is_empty_object};

/// The JSON-RPC code of a resource that does not exist, up to 2025-11-25.
const RESOURCE_NOT_FOUND: i32 = -32002;
/// The same at 2026-07-28, which names the URI as an invalid param
/// (SEP-2164).
const INVALID_PARAMS: i32 = -32602;

/// The answer to a request's outcome at `revision`.
pub(crate) fn render(
    id: &RequestId,
    revision: Revision,
    served: &AppServed,
    target: &str,
    outcome: Result<McpReply, InvokeError>,
) -> Answer {
    let not_found = match revision {
        Revision::WithInitialize => RESOURCE_NOT_FOUND,
        Revision::PerRequest => INVALID_PARAMS,
    };
    let error = |code: i32, message: &str, data: Option<&RawValue>| {
        Answer::error(Some(id), ErrorCode(code), message, data)
    };
    let uri_data = || RawValue::from_string(serde_json::json!({ "uri": target }).to_string()).ok();
    match outcome {
        Ok(McpReply::Result(result)) => {
            let result = match revision {
                Revision::WithInitialize => without_result_type(result),
                Revision::PerRequest => completed_at_2026(result, served.cacheable),
            };
            Answer::result(id, &*result)
        }
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

/// The keys of a result completed at 2026-07-28, as far as they are read. A key counts when present at all (`null` included), so that none
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

/// A result as 2026-07-28 has it: `resultType: "complete"`
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
        // As `resources/read` declares itself; only the method and its
        // caching are read here.
        let read = &AppServed {
            method: "resources/read",
            target: |_| Ok(String::new()),
            in_rounds: true,
            cacheable: true,
        };
        let result = RawValue::from_string(
            r#"{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}"#.into(),
        )
        .expect("json");
        let answer = render(
            &id,
            Revision::WithInitialize,
            read,
            "a:1",
            Ok(McpReply::Result(result)),
        );
        assert_eq!(
            String::from_utf8_lossy(&answer.message),
            r#"{"jsonrpc":"2.0","id":7,"result":{"contents":[{"uri":"a:1","text":"x"}],"_meta":{"n":1e400}}}"#
        );
        for (revision, not_found) in [
            (Revision::WithInitialize, RESOURCE_NOT_FOUND),
            (Revision::PerRequest, INVALID_PARAMS),
        ] {
            let missing = render(
                &id,
                revision,
                read,
                "a:2",
                Err(InvokeError::UnknownResource { uri: "a:2".into() }),
            );
            let missing: serde_json::Value =
                serde_json::from_slice(&missing.message).expect("json");
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
