//! One POSTed JSON-RPC message, as the MCP server reads it: the headers
//! that decide the revision it speaks, the envelope (a request, a
//! notification or a client's response), and of a request's `_meta` what
//! the server uses. Nothing is read into a tree: the params and `_meta`
//! stay the exact text the client sent, for the app.
//!
//! Every refusal here is a [`Rejected`]: a JSON-RPC error with the id of
//! the request where one could be read, and its HTTP status.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use openclaw_proxy_core::asking::{Askable, Elicitation};
use openclaw_proxy_core::escape;
use openclaw_proxy_core::progress::LogLevel;
use rmcp::model::{
    ClientCapabilities, ErrorCode, Implementation, ProgressToken, ProtocolVersion, RequestId,
};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::headers::check_standard_headers;
use super::{Rejected, single};
use crate::http::mcp::call::trace_parent_of;

pub use crate::http::request::MAX_NESTING;
use crate::http::request::nesting_within;

/// The two eras of the protocol, as far as the server answers them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revision {
    /// Up to 2025-11-25: `initialize` negotiated the revision, which the
    /// header names (absent: 2025-03-26). Results leave out what those
    /// revisions do not know (`resultType`).
    WithInitialize,
    /// 2026-07-28: every request carries its revision, client and
    /// capabilities in `_meta`, and names its method and target in headers.
    PerRequest,
}

impl Revision {
    /// Whether this is 2026-07-28.
    pub fn per_request(self) -> bool {
        self == Self::PerRequest
    }
}

/// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name`, as header names.
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// Checks the headers every POST needs: a JSON body and a client that
/// accepts JSON and event streams.
pub fn check_media(headers: &HeaderMap) -> Result<(), Rejected> {
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
    if !(json && sse) {
        return Err(Rejected::new(
            StatusCode::NOT_ACCEPTABLE,
            ErrorCode::INVALID_REQUEST,
            "Not Acceptable: the Accept header must name both application/json and text/event-stream",
        ));
    }
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if !json_body {
        return Err(Rejected::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::INVALID_REQUEST,
            "Unsupported Media Type: post JSON-RPC messages with Content-Type: application/json",
        ));
    }
    Ok(())
}

/// The `MCP-Protocol-Version` header's one value, if there is one.
fn header_version(headers: &HeaderMap) -> Result<Option<&str>, Rejected> {
    if !headers.contains_key(&PROTOCOL_VERSION) {
        return Ok(None);
    }
    single(headers, &PROTOCOL_VERSION).map(Some).ok_or_else(|| {
        Rejected::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            "Bad Request: send one MCP-Protocol-Version header, in visible ASCII",
        )
    })
}

/// The refusal of a header naming a revision this server does not speak.
fn unsupported_header(version: &str) -> Rejected {
    Rejected::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_REQUEST,
        format!(
            "Bad Request: Unsupported MCP-Protocol-Version {}; this server speaks {}",
            escape::quoted(version),
            supported_list()
        ),
    )
}

/// The revision a version names, if this server speaks it.
pub fn supported(version: &str) -> Option<Revision> {
    if version == ProtocolVersion::V_2026_07_28.as_str() {
        return Some(Revision::PerRequest);
    }
    ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
        .iter()
        .any(|known| known.as_str() == version)
        .then_some(Revision::WithInitialize)
}

/// The revisions this server speaks, oldest first.
pub fn supported_versions() -> Vec<ProtocolVersion> {
    let mut versions =
        ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE).to_vec();
    versions.push(ProtocolVersion::V_2026_07_28);
    versions
}

fn supported_list() -> String {
    supported_versions()
        .iter()
        .map(ProtocolVersion::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A JSON-RPC message's envelope, read without building a tree.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// One message POSTed to the endpoint.
pub enum Message {
    /// A request: it gets an answer.
    Request(Box<Request>),
    /// A notification: accepted with `202`.
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// The client's answer to a request the app sent it.
    Response,
}

/// A JSON-RPC request, its params as sent.
pub struct Request {
    pub id: RequestId,
    pub method: String,
    /// The params object as the client wrote it; `None` when absent.
    pub params: Option<Box<RawValue>>,
    /// The revision it speaks.
    pub revision: Revision,
    /// What the server reads of its `_meta`.
    pub meta: Meta,
}

impl Request {
    /// The params' text, `{}` when there are none.
    pub fn params_text(&self) -> &str {
        self.params.as_deref().map_or("{}", RawValue::get)
    }

    /// The params read as `T`, or `-32602` naming what does not fit.
    pub fn params_as<'a, T: Deserialize<'a>>(&'a self) -> Result<T, Rejected> {
        serde_json::from_str(self.params_text()).map_err(|error| {
            Rejected::invalid_params(format!(
                "Invalid params: {} needs other params: {error}",
                escape::quoted(&self.method)
            ))
            .answering(&self.id)
        })
    }

    /// The request's W3C `traceparent`: its `_meta` one, else the header's.
    pub fn trace_parent(&self, headers: &HeaderMap) -> String {
        trace_parent_of(self.meta.trace_parent.as_deref(), headers)
    }
}

/// What the server reads of a request's `_meta`; `_meta` itself goes to the
/// app as sent.
#[derive(Default)]
pub struct Meta {
    /// `_meta` as the client wrote it; `None` when absent or empty.
    pub text: Option<Box<RawValue>>,
    pub progress: Option<ProgressToken>,
    /// The client's identity (2026-07-28).
    pub client_info: Option<Implementation>,
    pub trace_parent: Option<String>,
    /// The least severe log record the client wants (2026-07-28).
    pub log_level: Option<LogLevel>,
    /// What the client can be asked: from its declared capabilities at
    /// 2026-07-28; before, anything (a stateless server does not keep what
    /// `initialize` declared).
    pub askable: Askable,
}

/// The keys of `_meta` the server reads. A key that is there but does not
/// decode is refused with `-32602`; `null` counts as absent.
#[derive(Default, Deserialize)]
struct MetaKeys<'a> {
    #[serde(rename = "progressToken", default)]
    progress_token: Option<ProgressToken>,
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        borrow,
        deserialize_with = "present"
    )]
    protocol_version: Option<&'a RawValue>,
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        borrow,
        deserialize_with = "present"
    )]
    client_capabilities: Option<&'a RawValue>,
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    client_info: Option<Implementation>,
    #[serde(default)]
    traceparent: Option<String>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default)]
    log_level: Option<String>,
}

/// A key that is there, whatever its value (`null` included).
fn present<'de, D: Deserializer<'de>>(value: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(value).map(Some)
}

/// The params keys every request may carry.
#[derive(Deserialize)]
struct MetaOnly<'a> {
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<&'a RawValue>,
}

/// `{}` with any whitespace.
pub fn is_empty_object(text: &str) -> bool {
    text.strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|inside| inside.trim().is_empty())
}

/// Reads one message at `revision`; a body that is no message the server
/// takes is [`Rejected`] with the reason.
/// Reads one message; a body that is no message the server takes is
/// [`Rejected`] with the reason.
///
/// The revision a request speaks: the one its `_meta` names (which the
/// `MCP-Protocol-Version` header must repeat: SEP-2243), else the header's,
/// else 2025-03-26. `initialize` names its own, which a header must not
/// contradict. At 2026-07-28 `_meta` must name the revision and the
/// client's capabilities, and the `Mcp-Method` / `Mcp-Name` headers the
/// method and what it names.
pub fn parse(body: &Bytes, headers: &HeaderMap) -> Result<Message, Rejected> {
    let header = header_version(headers)?;
    let value: &RawValue = serde_json::from_slice(body).map_err(|error| {
        Rejected::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARSE_ERROR,
            format!("Parse error: the request body is not JSON: {error}"),
        )
    })?;
    let text = value.get();
    if !text.starts_with('{') {
        let what = if text.starts_with('[') {
            "a batch (an array); post one message at a time"
        } else {
            "not a JSON object"
        };
        return Err(Rejected::not_json_rpc(what));
    }
    let envelope: Envelope<'_> =
        serde_json::from_str(text).map_err(|error| Rejected::not_json_rpc(&error.to_string()))?;
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(Rejected::not_json_rpc("\"jsonrpc\" must be \"2.0\""));
    }
    let id = match envelope.id {
        None => None,
        Some(raw) => Some(
            serde_json::from_str::<RequestId>(raw.get())
                .ok()
                .filter(|_| raw.get() != "null")
                .ok_or_else(|| Rejected::not_json_rpc("the id must be a string or an integer"))?,
        ),
    };
    let Some(method) = envelope.method else {
        if let Some(version) = header.filter(|version| supported(version).is_none()) {
            return Err(unsupported_header(version));
        }
        if id.is_some() && (envelope.result.is_some() || envelope.error.is_some()) {
            return Ok(Message::Response);
        }
        return Err(Rejected::not_json_rpc("it names no method"));
    };
    let method: String = serde_json::from_str(method.get())
        .map_err(|_| Rejected::not_json_rpc("the method must be a string"))?;
    let params = match envelope.params {
        None => None,
        Some(raw) if raw.get() == "null" => None,
        Some(raw) if raw.get().starts_with('{') => Some(raw.to_owned()),
        Some(_) => {
            let rejected = Rejected::invalid_params(format!(
                "Invalid params: the params of {} must be a JSON object",
                escape::quoted(&method)
            ));
            return match id {
                Some(id) => Err(rejected.answering(&id)),
                None => Err(Rejected::not_json_rpc(
                    "a notification's params must be an object",
                )),
            };
        }
    };
    let Some(id) = id else {
        if let Some(version) = header.filter(|version| supported(version).is_none()) {
            return Err(unsupported_header(version));
        }
        return Ok(Message::Notification { method, params });
    };
    if !nesting_within(body, MAX_NESTING) {
        return Err(Rejected::invalid_params(format!(
            "Invalid params: JSON nested deeper than {MAX_NESTING} levels, the limit"
        ))
        .answering(&id));
    }
    let (revision, meta) = read_request(&method, params.as_deref(), header, headers)
        .map_err(|rejected| rejected.answering(&id))?;
    Ok(Message::Request(Box::new(Request {
        id,
        method,
        params,
        revision,
        meta,
    })))
}

/// The revision a request speaks and what the server reads of its
/// `_meta`, checked as [`parse`] says.
fn read_request(
    method: &str,
    params: Option<&RawValue>,
    header: Option<&str>,
    headers: &HeaderMap,
) -> Result<(Revision, Meta), Rejected> {
    let only: MetaOnly<'_> = match params {
        Some(params) => serde_json::from_str(params.get())
            .map_err(|error| Rejected::invalid_params(format!("Invalid params: {error}")))?,
        None => MetaOnly { meta: None },
    };
    let raw = only.meta.filter(|raw| raw.get() != "null");
    if raw.is_some_and(|raw| !raw.get().starts_with('{')) {
        return Err(Rejected::invalid_params(
            "Invalid params: _meta must be a JSON object",
        ));
    }
    let keys: MetaKeys<'_> = match raw {
        Some(raw) => serde_json::from_str(raw.get())
            .map_err(|error| Rejected::invalid_params(format!("Invalid params: _meta: {error}")))?,
        None => MetaKeys::default(),
    };
    let revision = revision_of(method, params, &keys, header)?;
    if revision == Revision::PerRequest {
        check_standard_headers(method, params, headers)?;
        check_meta_2026(&keys)?;
    }
    let log_level = match &keys.log_level {
        None => None,
        Some(level) => Some(LogLevel::parse(level).ok_or_else(|| {
            Rejected::invalid_params(format!(
                "Invalid params: unknown log level {}",
                escape::quoted(level)
            ))
        })?),
    };
    let askable = match revision {
        Revision::WithInitialize => Askable::Any,
        Revision::PerRequest => askable_of(keys.client_capabilities),
    };
    Ok((
        revision,
        Meta {
            text: raw
                .filter(|raw| !is_empty_object(raw.get()))
                .map(RawValue::to_owned),
            progress: keys.progress_token,
            client_info: keys.client_info,
            trace_parent: keys.traceparent,
            log_level,
            askable,
        },
    ))
}

/// The revision a request speaks ([`parse`] says how it is decided).
fn revision_of(
    method: &str,
    params: Option<&RawValue>,
    keys: &MetaKeys<'_>,
    header: Option<&str>,
) -> Result<Revision, Rejected> {
    if method == "initialize" {
        #[derive(Deserialize)]
        struct Initialize {
            #[serde(rename = "protocolVersion", default)]
            protocol_version: Option<String>,
        }
        let named = params
            .and_then(|raw| serde_json::from_str::<Initialize>(raw.get()).ok())
            .and_then(|params| params.protocol_version);
        if let (Some(header), Some(named)) = (header, named.as_deref())
            && header != named
        {
            return Err(Rejected::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::INVALID_REQUEST,
                format!(
                    "Invalid Request: the MCP-Protocol-Version header ({}) does not match initialize params.protocolVersion ({})",
                    escape::quoted(header),
                    escape::quoted(named)
                ),
            ));
        }
        if keys.protocol_version.is_none() {
            return Ok(Revision::WithInitialize);
        }
    }
    let named = keys
        .protocol_version
        .filter(|raw| raw.get() != "null")
        .map(|raw| serde_json::from_str::<String>(raw.get()));
    match named {
        Some(Ok(version)) => {
            let Some(header) = header else {
                return Err(Rejected::header_mismatch(
                    "Header mismatch: a request whose _meta names its protocolVersion names it in the MCP-Protocol-Version header too",
                ));
            };
            if header != version {
                return Err(Rejected::header_mismatch(format!(
                    "Header mismatch: the MCP-Protocol-Version header ({}) does not match the request's _meta protocolVersion ({})",
                    escape::quoted(header),
                    escape::quoted(&version)
                )));
            }
            supported(&version).ok_or_else(|| unsupported_version(&version))
        }
        // A revision that is not text is a malformed required field.
        Some(Err(_)) => Ok(Revision::PerRequest),
        None => match header {
            Some(version) => match supported(version) {
                None => Err(unsupported_header(version)),
                // A 2026-07-28 request without its revision in `_meta`.
                Some(Revision::PerRequest) => Ok(Revision::PerRequest),
                Some(Revision::WithInitialize) if method == "server/discover" => {
                    Ok(Revision::PerRequest)
                }
                Some(Revision::WithInitialize) => Ok(Revision::WithInitialize),
            },
            None if method == "server/discover" => Ok(Revision::PerRequest),
            None => Ok(Revision::WithInitialize),
        },
    }
}

/// The refusal of a request whose `_meta` names a revision this server
/// does not speak: `-32022` with the revisions it does speak (SEP-2575).
fn unsupported_version(version: &str) -> Rejected {
    let mut rejected = Rejected::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version {}: this server speaks {}",
            escape::quoted(version),
            supported_list()
        ),
    );
    let requested = escape::truncated_to(version, 64);
    rejected.data = serde_json::value::to_raw_value(&serde_json::json!({
        "supported": supported_versions(),
        "requested": requested,
    }))
    .ok();
    rejected
}

/// The requests a 2026-07-28 client's declared capabilities allow.
fn askable_of(capabilities: Option<&RawValue>) -> Askable {
    let capabilities =
        capabilities.and_then(|raw| serde_json::from_str::<ClientCapabilities>(raw.get()).ok());
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

/// A 2026-07-28 request's `_meta` names its revision and declares the
/// client's capabilities, both readable (`-32602`, 400, naming what is
/// missing).
fn check_meta_2026(keys: &MetaKeys<'_>) -> Result<(), Rejected> {
    let version = keys
        .protocol_version
        .is_some_and(|raw| serde_json::from_str::<String>(raw.get()).is_ok());
    let capabilities = keys
        .client_capabilities
        .is_some_and(|raw| serde_json::from_str::<ClientCapabilities>(raw.get()).is_ok());
    let mut missing = Vec::new();
    if !version {
        missing.push("io.modelcontextprotocol/protocolVersion");
    }
    if !capabilities {
        missing.push("io.modelcontextprotocol/clientCapabilities");
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Rejected::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::INVALID_PARAMS,
        format!(
            "Invalid params: request _meta is missing or has malformed required fields: {}",
            missing.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(version: Option<&'static str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("Application/JSON, TEXT/event-stream;q=0.5"),
        );
        if let Some(version) = version {
            headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(version));
        }
        headers
    }

    #[test]
    fn the_body_and_the_headers_decide_the_revision() {
        let revision =
            |body: &str, headers: &HeaderMap| match parse(&Bytes::from(body.to_owned()), headers) {
                Ok(Message::Request(request)) => Ok(request.revision),
                Ok(_) => panic!("not a request"),
                Err(rejected) => Err((rejected.status, rejected.code)),
            };
        let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert_eq!(revision(list, &headers(None)), Ok(Revision::WithInitialize));
        assert_eq!(
            revision(list, &headers(Some("2025-06-18"))),
            Ok(Revision::WithInitialize)
        );
        assert_eq!(
            revision(list, &headers(Some("1999-01-01"))),
            Err((StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST))
        );
        // 2026-07-28 without its `_meta`.
        assert_eq!(
            revision(list, &headers(Some("2026-07-28")))
                .err()
                .map(|e| e.1),
            Some(ErrorCode::HEADER_MISMATCH),
            "no Mcp-Method"
        );
        let mut named = headers(Some("2026-07-28"));
        named.insert("mcp-method", HeaderValue::from_static("tools/list"));
        assert_eq!(
            revision(list, &named),
            Err((StatusCode::BAD_REQUEST, ErrorCode::INVALID_PARAMS))
        );
        let meta = |version: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{version}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
            )
        };
        assert_eq!(
            revision(&meta("2026-07-28"), &named),
            Ok(Revision::PerRequest)
        );
        // The header must repeat the revision `_meta` names.
        assert_eq!(
            revision(&meta("2026-07-28"), &headers(None)),
            Err((StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH))
        );
        let mut v999 = named.clone();
        v999.insert(PROTOCOL_VERSION, HeaderValue::from_static("v999"));
        assert_eq!(
            revision(&meta("v999"), &v999),
            Err((
                StatusCode::BAD_REQUEST,
                ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            ))
        );
        // `initialize` names its own; a header must not contradict it.
        let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
        assert_eq!(
            revision(initialize, &headers(None)),
            Ok(Revision::WithInitialize)
        );
        assert_eq!(
            revision(initialize, &headers(Some("2025-11-25"))),
            Err((StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST))
        );
    }

    #[test]
    fn media_types_are_checked() {
        assert!(check_media(&headers(None)).is_ok());
        let mut json_only = headers(None);
        json_only.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let refused = check_media(&json_only).err();
        assert_eq!(refused.map(|r| r.status), Some(StatusCode::NOT_ACCEPTABLE));
    }

    #[test]
    fn elicitation_modes_are_read_from_the_declared_capability() {
        let askable = |capabilities: &str| {
            let raw = RawValue::from_string(capabilities.to_owned()).expect("json");
            match askable_of(Some(&raw)) {
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
    fn messages_are_told_apart_and_bad_ones_named() {
        let none = HeaderMap::new();
        let read = |text: &str| parse(&Bytes::from(text.to_owned()), &none);
        let Ok(Message::Request(request)) = read(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","arguments":{"n":1e400},"_meta":{"progressToken":3}}}"#,
        ) else {
            panic!("a request");
        };
        assert_eq!(request.method, "tools/call");
        assert!(request.params_text().contains("1e400"));
        assert_eq!(
            request.meta.progress,
            Some(ProgressToken(RequestId::Number(3)))
        );
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification { .. })
        ));
        assert!(matches!(
            read(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Message::Response)
        ));
        for (text, code) in [
            ("nope", ErrorCode::PARSE_ERROR),
            ("[]", ErrorCode::INVALID_REQUEST),
            (r#"{"jsonrpc":"2.0","id":1}"#, ErrorCode::INVALID_REQUEST),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                ErrorCode::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
                ErrorCode::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}"#,
                ErrorCode::INVALID_PARAMS,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"x","params":"x"}"#,
                ErrorCode::INVALID_REQUEST,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/logLevel":"loud"}}}"#,
                ErrorCode::INVALID_PARAMS,
            ),
        ] {
            let rejected = read(text).err().unwrap_or_else(|| panic!("{text}"));
            assert_eq!(rejected.code, code, "{text}");
        }
    }

    #[test]
    fn at_2026_the_meta_and_the_headers_must_be_valid() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}"#;
        let read = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"a:1","_meta":{meta}}}}}"#
        ));
        let headers = |method: &str, name: Option<&str>| {
            let mut headers = HeaderMap::new();
            headers.insert(PROTOCOL_VERSION, HeaderValue::from_static("2026-07-28"));
            headers.insert("mcp-method", method.parse().expect("header"));
            if let Some(name) = name {
                headers.insert("mcp-name", name.parse().expect("header"));
            }
            headers
        };
        let Ok(Message::Request(taken)) = parse(&read, &headers("resources/read", Some("a:1")))
        else {
            panic!("taken");
        };
        assert_eq!(
            taken.meta.client_info.map(|info| info.name).as_deref(),
            Some("c")
        );
        let encoded = headers("resources/read", Some("=?base64?YTox?="));
        assert!(parse(&read, &encoded).is_ok());
        for wrong in [
            headers("resources/read", None),
            headers("resources/read", Some("a:2")),
            headers("prompts/get", Some("a:1")),
        ] {
            let rejected = parse(&read, &wrong).err();
            assert_eq!(rejected.map(|r| r.code), Some(ErrorCode::HEADER_MISMATCH));
        }
        let no_capabilities = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a:1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        );
        let rejected = parse(&no_capabilities, &headers("resources/read", Some("a:1"))).err();
        assert_eq!(rejected.map(|r| r.status), Some(StatusCode::BAD_REQUEST));
    }
}
