//! The 2026-07-28 headers that repeat what the body says, so that a
//! balancer can route without reading it (SEP-2243): `Mcp-Method`,
//! `Mcp-Name`, and the `Mcp-Param-*` headers of a tool's annotated
//! arguments. Each mismatch is `-32020`, 400.

use axum::http::{HeaderMap, HeaderName};
use openclaw_proxy_core::escape;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Rejected, single};

const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The form of a header value that carries Base64 (SEP-2243), for names
/// that are not visible ASCII.
const BASE64_PREFIX: &str = "=?base64?";
const BASE64_SUFFIX: &str = "?=";

/// At 2026-07-28, the `Mcp-Method` and `Mcp-Name` headers must name the
/// request's method and what it names (SEP-2243; values compared without
/// the whitespace around them, names in their Base64 form decoded).
pub(super) fn check_standard_headers(
    method: &str,
    params: Option<&RawValue>,
    headers: &HeaderMap,
) -> Result<(), Rejected> {
    let ows = |value: &'_ str| value.trim_matches([' ', '\t']).to_owned();
    match single(headers, &MCP_METHOD).map(ows) {
        Some(named) if named == method => {}
        Some(named) => {
            return Err(Rejected::header_mismatch(format!(
                "Header mismatch: Mcp-Method {} does not name the request's method {}",
                escape::quoted(&named),
                escape::quoted(method)
            )));
        }
        None => {
            return Err(Rejected::header_mismatch(
                "Header mismatch: a 2026-07-28 request names its method in one Mcp-Method header",
            ));
        }
    }
    let Some(key) = named_key(method) else {
        return Ok(());
    };
    #[derive(Deserialize)]
    struct Names {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        uri: Option<String>,
        #[serde(default, rename = "taskId")]
        task_id: Option<String>,
    }
    let names: Names = params
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Names {
            name: None,
            uri: None,
            task_id: None,
        });
    let target = match key {
        "uri" => names.uri,
        "taskId" => names.task_id,
        _ => names.name,
    };
    let Some(target) = target else {
        // The method's own check names the missing param.
        return Ok(());
    };
    match single(headers, &MCP_NAME).map(|value| decode_header(&ows(value))) {
        Some(Some(named)) if named == target => Ok(()),
        Some(Some(named)) => Err(Rejected::header_mismatch(format!(
            "Header mismatch: Mcp-Name {} does not name the request's {key} {}",
            escape::quoted(&named),
            escape::quoted(&target)
        ))),
        Some(None) => Err(Rejected::header_mismatch(
            "Header mismatch: Mcp-Name is not valid Base64 in its =?base64?…?= form",
        )),
        None => Err(Rejected::header_mismatch(format!(
            "Header mismatch: a 2026-07-28 {method} names its {key} in one Mcp-Name header"
        ))),
    }
}

/// The param a method's `Mcp-Name` header names, for the methods that have
/// one.
fn named_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The tasks extension: a follow-up names its task, so that a
        // balancer can route it to a node that holds it.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// The `Mcp-Param-*` headers of a 2026-07-28 `tools/call` (SEP-2243): each
/// argument whose property in the tool's `schema` carries `x-mcp-header`
/// is repeated in the header that names, so that a balancer can route by
/// it without reading the body. A header that is missing while the body
/// holds the value, that does not decode, or that says otherwise than the
/// body is `-32020`, 400. Only schemas that name the annotation are read.
pub fn check_param_headers(
    schema: &str,
    arguments: &str,
    headers: &HeaderMap,
) -> Result<(), Rejected> {
    const ANNOTATION: &str = "x-mcp-header";
    if !schema.contains(ANNOTATION) {
        return Ok(());
    }
    #[derive(Deserialize)]
    struct Schema {
        #[serde(default)]
        properties: std::collections::HashMap<String, Property>,
    }
    #[derive(Deserialize)]
    struct Property {
        #[serde(rename = "x-mcp-header", default)]
        header: Option<String>,
    }
    let Ok(schema) = serde_json::from_str::<Schema>(schema) else {
        return Ok(());
    };
    let annotated: Vec<(String, String)> = schema
        .properties
        .into_iter()
        .filter_map(|(name, property)| property.header.map(|header| (name, header)))
        .collect();
    if annotated.is_empty() {
        return Ok(());
    }
    let arguments: std::collections::HashMap<String, Box<RawValue>> =
        serde_json::from_str(arguments).unwrap_or_default();
    for (property, suffix) in annotated {
        let Some(value) = arguments.get(&property) else {
            continue;
        };
        // A string is compared as text; a number or a boolean as written.
        let expected = match serde_json::from_str::<String>(value.get()) {
            Ok(text) => text,
            Err(_) if value.get().starts_with(['{', '[', 'n']) => continue,
            Err(_) => value.get().to_owned(),
        };
        let header = format!("mcp-param-{suffix}");
        let Ok(name) = HeaderName::from_bytes(header.as_bytes()) else {
            continue;
        };
        let named = match single(headers, &name) {
            Some(value) => decode_header(value.trim_matches([' ', '\t'])),
            None => {
                return Err(Rejected::header_mismatch(format!(
                    "Header mismatch: argument {} is sent in the Mcp-Param-{} header too (x-mcp-header)",
                    escape::quoted(&property),
                    escape::truncated_to(&suffix, 64)
                )));
            }
        };
        match named {
            Some(named) if named == expected => {}
            Some(_) => {
                return Err(Rejected::header_mismatch(format!(
                    "Header mismatch: Mcp-Param-{} does not say what argument {} says",
                    escape::truncated_to(&suffix, 64),
                    escape::quoted(&property)
                )));
            }
            None => {
                return Err(Rejected::header_mismatch(format!(
                    "Header mismatch: Mcp-Param-{} is not valid Base64 in its =?base64?…?= form",
                    escape::truncated_to(&suffix, 64)
                )));
            }
        }
    }
    Ok(())
}

/// A header value as text: its Base64 form decoded (`None` when that does
/// not decode to UTF-8), any other value as it is.
fn decode_header(value: &str) -> Option<String> {
    use base64::Engine;
    match value
        .strip_prefix(BASE64_PREFIX)
        .and_then(|rest| rest.strip_suffix(BASE64_SUFFIX))
    {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use rmcp::model::ErrorCode;

    #[test]
    fn param_headers_must_repeat_the_annotated_arguments() {
        let schema = r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer","x-mcp-header":"N"},"free":{"type":"string"}}}"#;
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            for (name, value) in pairs {
                headers.insert(*name, HeaderValue::from_static(value));
            }
            headers
        };
        let arguments = r#"{"region":"Hello","n":3,"free":"x"}"#;
        let check = |headers: &HeaderMap| check_param_headers(schema, arguments, headers);
        assert!(
            check(&with(&[
                ("mcp-param-region", "Hello"),
                ("mcp-param-n", "3")
            ]))
            .is_ok()
        );
        assert!(
            check(&with(&[
                ("mcp-param-region", "=?base64?SGVsbG8=?="),
                ("mcp-param-n", " 3 ")
            ]))
            .is_ok()
        );
        for wrong in [
            with(&[("mcp-param-n", "3")]),
            with(&[("mcp-param-region", "Hullo"), ("mcp-param-n", "3")]),
            with(&[
                ("mcp-param-region", "=?base64?SGVsbG8?="),
                ("mcp-param-n", "3"),
            ]),
            with(&[
                ("mcp-param-region", "=?base64?SGVs!!!bG8=?="),
                ("mcp-param-n", "3"),
            ]),
        ] {
            let rejected = check(&wrong).err();
            assert_eq!(
                rejected.map(|r| r.code),
                Some(ErrorCode::HEADER_MISMATCH),
                "{wrong:?}"
            );
        }
        // A literal that merely looks like Base64 is compared as it is.
        let literal = r#"{"region":"SGVsbG8="}"#;
        let headers = with(&[("mcp-param-region", "SGVsbG8=")]);
        assert!(check_param_headers(schema, literal, &headers).is_ok());
        // No annotation, nothing to check.
        assert!(check_param_headers(r#"{"type":"object"}"#, arguments, &HeaderMap::new()).is_ok());
    }
}
