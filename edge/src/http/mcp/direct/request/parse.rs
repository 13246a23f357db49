//! Which of the requests the app answers the direct path takes: the plain
//! shapes of `resources/read`, `prompts/get` and `completion/complete`, read
//! only as far as the path needs (what they name, `_meta`, the retry's
//! keys); the rest of the params travels unread. Kept apart from the
//! sending so that what is taken can be read, and tested, on its own.

use axum::body::Bytes;
use axum::http::HeaderMap;
use openclaw_proxy_core::progress::LogLevel;
use rmcp::model::RequestId;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::DirectRequest;
use crate::http::mcp::direct::MAX_NESTING;
use crate::http::mcp::direct::parse::{self, MetaKeys, Revision, standard_headers_match};

#[derive(Deserialize)]
struct Wire {
    jsonrpc: String,
    id: RequestId,
    method: String,
    params: Box<RawValue>,
}

/// The keys of the params the direct path reads; the rest travels unread.
#[derive(Deserialize)]
struct Params<'a> {
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "ref", default)]
    reference: Option<Reference>,
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
    /// The client's answers to an `input_required` result (2026-07-28).
    #[serde(rename = "inputResponses", default)]
    input_responses: Option<Box<RawValue>>,
    /// That result's `requestState`, echoed (2026-07-28).
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
}

#[derive(Deserialize)]
struct Reference {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uri: Option<String>,
}

/// The request in `body`, if the direct path can answer it: a request
/// (not a notification) of one of the three methods, params an object
/// naming what it asks for; up to 2025-11-25 no revision in `_meta` (rmcp
/// negotiates those), at 2026-07-28 a `_meta` and headers rmcp would
/// accept; a log level in `_meta`, if any, one MCP names.
pub fn parse_request(
    body: &Bytes,
    revision: Revision,
    headers: &HeaderMap,
) -> Option<DirectRequest> {
    if !parse::nesting_within(body, MAX_NESTING) {
        return None;
    }
    let wire: Wire = serde_json::from_slice(body).ok()?;
    if wire.jsonrpc != "2.0" || !wire.params.get().starts_with('{') {
        return None;
    }
    let params: Params<'_> = serde_json::from_str(wire.params.get()).ok()?;
    let meta: MetaKeys<'_> = match params.meta {
        Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get()).ok()?,
        Some(_) => return None,
        None => MetaKeys::default(),
    };
    let (method, target, named) = match wire.method.as_str() {
        "resources/read" => ("resources/read", params.uri?, true),
        "prompts/get" => ("prompts/get", params.name?, true),
        "completion/complete" => {
            let reference = params.reference?;
            let target = reference.name.or(reference.uri)?;
            ("completion/complete", target, false)
        }
        _ => return None,
    };
    let acceptable = match revision {
        Revision::WithInitialize => meta.protocol_version.is_none(),
        Revision::PerRequest => {
            meta.valid_at_2026()
                && standard_headers_match(headers, method, named.then_some(target.as_str()))
        }
    };
    if !acceptable {
        return None;
    }
    // A level MCP does not name is rmcp's to refuse.
    let log_level = match &meta.log_level {
        None => None,
        Some(level) => Some(LogLevel::parse(level)?),
    };
    let askable = meta.askable();
    let MetaKeys {
        client_info,
        traceparent,
        progress_token,
        ..
    } = meta;
    // Rounds are a 2026-07-28 thing; before, these keys are the app's.
    let (input_responses, request_state) = match revision {
        Revision::PerRequest => (params.input_responses, params.request_state),
        Revision::WithInitialize => (None, None),
    };
    Some(DirectRequest {
        id: wire.id,
        method,
        target,
        trace_parent: traceparent,
        client_info,
        revision,
        progress: progress_token,
        log_level,
        askable,
        input_responses,
        request_state,
        params: wire.params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(text: &str) -> Bytes {
        Bytes::from(text.to_owned())
    }

    #[test]
    fn plain_requests_are_taken_and_others_left_to_rmcp() {
        let none = HeaderMap::new();
        let read = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:1","x":1e400}}"#,
        );
        let taken = parse_request(&read, Revision::WithInitialize, &none).expect("taken");
        assert_eq!((taken.method(), taken.target()), ("resources/read", "a:1"));
        assert_eq!(taken.params.get(), r#"{"uri":"a:1","x":1e400}"#);
        // 2026-07-28 needs its `_meta` and headers.
        assert!(parse_request(&read, Revision::PerRequest, &none).is_none());
        for refused in [
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"a:1"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/logLevel":"loud"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":[1]}"#,
        ] {
            assert!(
                parse_request(&body(refused), Revision::WithInitialize, &none).is_none(),
                "{refused}"
            );
        }
        // A log level MCP names is served here, on a stream when records come.
        let logged = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/logLevel":"info"}}}"#,
        );
        let taken = parse_request(&logged, Revision::WithInitialize, &none).expect("taken");
        assert_eq!(taken.log_level, LogLevel::parse("info"));
        let complete = body(
            r#"{"jsonrpc":"2.0","id":"c","method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"x"}}}"#,
        );
        let taken = parse_request(&complete, Revision::WithInitialize, &none).expect("taken");
        assert_eq!(taken.target(), "p");
    }

    #[test]
    fn at_2026_the_meta_and_the_headers_must_be_valid() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;
        let read = body(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"a:1","_meta":{meta}}}}}"#
        ));
        let headers = |method: &str, name: Option<&str>| {
            let mut headers = HeaderMap::new();
            headers.insert("mcp-method", method.parse().expect("header"));
            if let Some(name) = name {
                headers.insert("mcp-name", name.parse().expect("header"));
            }
            headers
        };
        let taken = parse_request(
            &read,
            Revision::PerRequest,
            &headers("resources/read", Some("a:1")),
        )
        .expect("taken");
        assert_eq!(
            taken.client_info.map(|info| info.name).as_deref(),
            Some("c")
        );
        for wrong in [
            headers("resources/read", None),
            headers("resources/read", Some("a:2")),
            headers("prompts/get", Some("a:1")),
        ] {
            assert!(parse_request(&read, Revision::PerRequest, &wrong).is_none());
        }
        let no_capabilities = body(
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        assert!(
            parse_request(
                &no_capabilities,
                Revision::PerRequest,
                &headers("resources/read", Some("a:1"))
            )
            .is_none()
        );
    }
}
