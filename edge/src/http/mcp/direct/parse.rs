//! Which requests the direct path takes: the headers that allow it, and
//! the body of a `tools/call` of a common shape, read with rmcp's model
//! types without building a tree. Anything else is left to rmcp.

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, header};
use openclaw_proxy_core::progress::{Askable, Elicitation, LogLevel};
use rmcp::model::{ClientCapabilities, Implementation, ProgressToken, ProtocolVersion, RequestId};
use rmcp::transport::common::http_header::{BASE64_HEADER_PREFIX, BASE64_HEADER_SUFFIX};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::http::mcp::call::trace_parent_of;

pub use crate::http::request::MAX_NESTING;
pub(super) use crate::http::request::nesting_within;

/// The protocol revisions the direct path serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revision {
    /// Up to 2025-11-25: `initialize` negotiated the revision, which the
    /// header names (absent: 2025-03-26). Answers get rmcp's legacy-peer
    /// adjustments.
    WithInitialize,
    /// 2026-07-28: every request carries its revision, client and
    /// capabilities in `_meta`, and names its method and tool in headers.
    PerRequest,
}

/// rmcp's `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`, as header
/// names: looking one up by its text would parse the text on every request.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// The sole value of header `name` as text; `None` when it is absent,
/// repeated or not text (rmcp refuses the last two).
fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// The revision a request may be served at directly, from its headers: a
/// JSON body, a client that accepts JSON and SSE, and one protocol version
/// header naming a revision served here (or none, which means 2025-03-26
/// to rmcp).
pub fn headers_allow(headers: &HeaderMap) -> Option<Revision> {
    let revision = if headers.contains_key(&PROTOCOL_VERSION) {
        let version = single(headers, &PROTOCOL_VERSION)?;
        if version == ProtocolVersion::V_2026_07_28.as_str() {
            Revision::PerRequest
        } else if ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
            .iter()
            .any(|known| known.as_str() == version)
        {
            Revision::WithInitialize
        } else {
            return None;
        }
    } else {
        Revision::WithInitialize
    };
    let content_type_ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
        });
    let accept = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|item| item.split(';').next().unwrap_or_default().trim());
    let (mut json, mut sse) = (false, false);
    for item in accept {
        json |= item.eq_ignore_ascii_case("application/json");
        sse |= item.eq_ignore_ascii_case("text/event-stream");
    }
    (content_type_ok && json && sse).then_some(revision)
}

/// A `tools/call` as it arrives.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCall {
    // Checked by deserializing: only "2.0" and "tools/call" are accepted.
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion,
    id: RequestId,
    #[serde(rename = "method")]
    _method: ToolsCall,
    params: WireParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireParams {
    name: String,
    /// Passed to the app as sent; it must be a JSON object.
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
    /// Passed to the app as sent.
    #[serde(rename = "_meta", default)]
    meta: Option<Box<RawValue>>,
    /// The client's answers to the requests of an `input_required` result
    /// (2026-07-28), by key.
    #[serde(rename = "inputResponses", default)]
    input_responses: Option<Box<RawValue>>,
    /// The `requestState` of that result, echoed (2026-07-28).
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
}

#[derive(Deserialize)]
enum JsonRpcVersion {
    #[serde(rename = "2.0")]
    V2,
}

#[derive(Deserialize)]
enum ToolsCall {
    #[serde(rename = "tools/call")]
    ToolsCall,
}

/// A `tools/call` the direct path can answer.
pub struct DirectCall {
    pub(super) id: RequestId,
    pub(super) name: String,
    pub(super) arguments: Option<Box<RawValue>>,
    /// `_meta` as the client wrote it, for the app.
    pub(super) meta_text: Option<Box<RawValue>>,
    /// The client's identity from `_meta` (2026-07-28).
    pub(super) client_info: Option<Implementation>,
    /// `_meta.traceparent`.
    pub(super) trace_parent: Option<String>,
    pub(super) progress: Option<ProgressToken>,
    /// The least severe log record the client wants (2026-07-28 `_meta`).
    pub(super) log_level: Option<LogLevel>,
    pub(super) revision: Revision,
    /// The requests the client can be sent, from its capabilities
    /// (2026-07-28; before, they are not known: any).
    pub(super) askable: Askable,
    /// The answers and state of a retried call (2026-07-28).
    pub(super) input_responses: Option<Box<RawValue>>,
    pub(super) request_state: Option<String>,
}

/// What the edge reads of a request's `_meta`, read without building a tree
/// (the whole `_meta` travels to the app as sent). Each key it decodes reads
/// as rmcp's `RequestMetaObject` reads it, where a value that does not
/// decode counts as absent; here it fails the parse instead, which leaves the
/// request to rmcp. `null` counts as absent in both. The revision and the
/// client's capabilities are kept raw and judged where they are used. Keys
/// it does not read are skipped unjudged, as the arguments are: their text
/// reaches the app as sent (a `1e400` included, at every revision, which
/// rmcp's tree would refuse).
#[derive(Default, Deserialize)]
pub(super) struct MetaKeys<'a> {
    #[serde(rename = "progressToken", default)]
    pub(super) progress_token: Option<ProgressToken>,
    /// Present at all (even `null`). Below 2026-07-28 that leaves the
    /// request to rmcp, which negotiates a revision named there; at
    /// 2026-07-28 it must decode ([`MetaKeys::valid_at_2026`]).
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        borrow,
        deserialize_with = "present"
    )]
    pub(super) protocol_version: Option<&'a RawValue>,
    /// Present at all; judged by [`MetaKeys::valid_at_2026`].
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        borrow,
        deserialize_with = "present"
    )]
    client_capabilities: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    pub(super) client_info: Option<Implementation>,
    #[serde(default)]
    pub(super) traceparent: Option<String>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default)]
    pub(super) log_level: Option<String>,
}

/// A key that is there, whatever its value (`null` included).
fn present<'de, D: Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(value).map(Some)
}

impl MetaKeys<'_> {
    /// The requests a 2026-07-28 client's declared capabilities allow.
    pub(super) fn askable(&self) -> Askable {
        let capabilities = self
            .client_capabilities
            .and_then(|raw| serde_json::from_str::<ClientCapabilities>(raw.get()).ok());
        let Some(capabilities) = capabilities else {
            return Askable::Nothing;
        };
        // `elicitation: {}` is form mode only; URL mode is named.
        let elicitation = capabilities
            .elicitation
            .as_ref()
            .map_or(Elicitation::NONE, |modes| {
                Elicitation::declared(modes.form.is_some(), modes.url.is_some())
            });
        Askable::Declared {
            elicitation,
            sampling: capabilities.sampling.is_some(),
            roots: capabilities.roots.is_some(),
        }
    }

    /// Whether a 2026-07-28 request is valid as rmcp judges it
    /// (`RequestMetaObject::missing_required_keys`): `_meta` names that
    /// revision and declares the client's capabilities, both readable.
    pub(super) fn valid_at_2026(&self) -> bool {
        let revision = self
            .protocol_version
            .and_then(|raw| serde_json::from_str::<ProtocolVersion>(raw.get()).ok());
        revision.is_some_and(|revision| revision == ProtocolVersion::V_2026_07_28)
            && self
                .client_capabilities
                .is_some_and(|raw| serde_json::from_str::<ClientCapabilities>(raw.get()).is_ok())
    }
}

impl DirectCall {
    /// The tool called.
    pub fn tool(&self) -> &str {
        &self.name
    }

    /// The request's W3C `traceparent` ([`crate::http::mcp::call::trace_parent`]).
    pub fn trace_parent(&self, headers: &HeaderMap) -> String {
        trace_parent_of(self.trace_parent.as_deref(), headers)
    }
}

/// Whether the SEP-2243 headers of a 2026-07-28 request name exactly its
/// method and what it names (the tool, prompt or URI; `None` for a method
/// that names nothing), as rmcp checks them; a Base64-wrapped name is left
/// to rmcp, which decodes it.
pub(super) fn standard_headers_match(
    headers: &HeaderMap,
    method: &str,
    name: Option<&str>,
) -> bool {
    single(headers, &MCP_METHOD) == Some(method)
        && name.is_none_or(|name| {
            single(headers, &MCP_NAME) == Some(name)
                && !(name.starts_with(BASE64_HEADER_PREFIX) && name.ends_with(BASE64_HEADER_SUFFIX))
        })
}

/// Parses `body` when it is exactly a `tools/call` request this path
/// serves at `revision` with these `headers`; anything else (other methods,
/// batches, unknown fields, a request rmcp would refuse or negotiate on its
/// own) returns `None` and is left to rmcp.
pub fn parse(body: &Bytes, revision: Revision, headers: &HeaderMap) -> Option<DirectCall> {
    // Deeper JSON goes to rmcp, which refuses it (serde_json's limit), so
    // the limit is the same on every path although this one builds no tree.
    if !nesting_within(body, MAX_NESTING) {
        return None;
    }
    let call: WireCall = serde_json::from_slice(body).ok()?;
    let params = call.params;
    // rmcp refuses arguments that are not an object, in its own words.
    let object = |raw: &RawValue| raw.get().starts_with('{');
    if !params.arguments.as_deref().is_none_or(object) {
        return None;
    }
    // An object only: serde would also read a struct from an array.
    let meta_text = params.meta.as_deref();
    if meta_text.is_some_and(|raw| !object(raw)) {
        return None;
    }
    let keys: MetaKeys<'_> = match meta_text {
        Some(raw) => serde_json::from_str(raw.get()).ok()?,
        None => MetaKeys::default(),
    };
    let acceptable = match revision {
        // A revision named in `_meta` makes rmcp negotiate the request on
        // its own, with checks of its own.
        Revision::WithInitialize => keys.protocol_version.is_none(),
        // Valid as rmcp judges validity, headers included.
        Revision::PerRequest => {
            keys.valid_at_2026()
                && standard_headers_match(headers, "tools/call", Some(&params.name))
        }
    };
    if !acceptable {
        return None;
    }
    let askable = keys.askable();
    let MetaKeys {
        progress_token: progress,
        client_info,
        traceparent: trace_parent,
        log_level,
        ..
    } = keys;
    // A level MCP does not name is rmcp's to refuse.
    let log_level = match log_level {
        None => None,
        Some(level) => Some(LogLevel::parse(&level)?),
    };
    let askable = match revision {
        Revision::WithInitialize => Askable::Any,
        Revision::PerRequest => askable,
    };
    Some(DirectCall {
        id: call.id,
        name: params.name,
        arguments: params.arguments,
        meta_text: params.meta,
        client_info,
        trace_parent,
        progress,
        log_level,
        revision,
        askable,
        input_responses: params.input_responses,
        request_state: params.request_state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use rmcp::transport::common::http_header::{
        HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PROTOCOL_VERSION,
    };

    #[test]
    fn the_header_names_are_rmcps() {
        for (ours, rmcps) in [
            (&PROTOCOL_VERSION, HEADER_MCP_PROTOCOL_VERSION),
            (&MCP_METHOD, HEADER_MCP_METHOD),
            (&MCP_NAME, HEADER_MCP_NAME),
        ] {
            assert!(ours.as_str().eq_ignore_ascii_case(rmcps), "{ours} {rmcps}");
        }
    }

    #[test]
    fn elicitation_modes_are_read_from_the_declared_capability() {
        let askable = |capabilities: &str| {
            let meta =
                format!(r#"{{"io.modelcontextprotocol/clientCapabilities":{capabilities}}}"#);
            let keys: MetaKeys<'_> = serde_json::from_str(&meta).expect("meta");
            match keys.askable() {
                Askable::Declared { elicitation, .. } => elicitation,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(askable(r#"{"elicitation":{}}"#), Elicitation::FORM);
        assert_eq!(askable(r#"{"elicitation":{"form":{}}}"#), Elicitation::FORM);
        assert_eq!(
            askable(r#"{"elicitation":{"form":{},"url":{}}}"#),
            Elicitation::BOTH
        );
        assert_eq!(
            askable(r#"{"elicitation":{"url":{}}}"#),
            Elicitation::declared(false, true)
        );
        assert_eq!(askable(r#"{"sampling":{}}"#), Elicitation::NONE);
    }

    #[test]
    fn accept_items_are_compared_in_any_case() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("Application/JSON, TEXT/event-stream;q=0.5"),
        );
        assert_eq!(headers_allow(&headers), Some(Revision::WithInitialize));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(headers_allow(&headers), None);
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(PROTOCOL_VERSION, HeaderValue::from_static("2026-07-28"));
        assert_eq!(headers_allow(&headers), Some(Revision::PerRequest));
    }
}
