//! One stdin line → one checked JSON-RPC message, or the error to answer.
//!
//! Both modes read their MCP client's stdin through [`parse`], so every
//! hostile line (invalid UTF-8, not JSON, a batch, a wrong `jsonrpc`, an `id`
//! that is an object, ...) is answered with a JSON-RPC error that names the
//! problem instead of being dropped or ending the process. The check looks at
//! the envelope only and keeps the message's own text ([`Message::text`]), so
//! the relay forwards exactly what the client sent: no number changes on the
//! way, however large or precise. Lines longer than the limit never get here:
//! [`crate::wire::LineReader`] skips them without buffering and reports
//! [`LineError::TooLong`].
//!
//! This is the parser `stdio/fuzz` and the property tests drive: it must
//! return, never panic, on any bytes.

use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use serde::Deserialize;
use serde_json::value::RawValue;

/// JSON-RPC parse error: the line is not JSON (or not UTF-8, or too long).
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC invalid request: JSON, but not a valid JSON-RPC message.
pub const INVALID_REQUEST: i64 = -32600;

/// Longest excerpt of a client-supplied value quoted in an error message.
const QUOTE_CHARS: usize = 80;

/// What kind of JSON-RPC message a line holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `method` and `id`: the client waits for an answer with that id.
    Request,
    /// `method` without `id`: no answer.
    Notification,
    /// `result` or `error`: the client answers a request of ours.
    Response,
}

/// A checked JSON-RPC message, borrowing the line it came from.
#[derive(Clone, Debug)]
pub struct Message<'a> {
    /// The message's JSON text as the client sent it (without the line end,
    /// a byte order mark or surrounding whitespace).
    pub text: &'a str,
    /// Request, notification or response.
    pub kind: Kind,
    /// The `id` as sent (a JSON string or number); `None` for notifications.
    pub id: Option<&'a RawValue>,
    /// The `method`, for requests and notifications.
    pub method: Option<String>,
    /// The `params` as sent (an object or an array), if any.
    pub params: Option<&'a RawValue>,
}

impl Message<'_> {
    /// The id's JSON text (`1`, `"a"`), the key that tells requests apart.
    pub fn id_text(&self) -> Option<&str> {
        self.id.map(RawValue::get)
    }
}

/// Why a line is not a JSON-RPC message; [`LineError::code`] and
/// [`LineError::id`] give the rest of its JSON-RPC error.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LineError {
    #[error(
        "stdin line longer than {limit} bytes (the limit is --max-line-bytes / OPENCLAW_PROXY_STDIO_MAX_LINE_BYTES): the line was skipped"
    )]
    TooLong { limit: usize },
    #[error(
        "stdin line is not valid UTF-8 (invalid byte at offset {offset}): JSON-RPC messages are UTF-8 JSON text; the line was skipped"
    )]
    InvalidUtf8 { offset: usize },
    #[error("not a JSON-RPC message: the line is not JSON ({0})")]
    NotJson(String),
    #[error(
        "not a JSON-RPC message: JSON-RPC batches (arrays) are not supported; send one message per line"
    )]
    Batch,
    #[error("not a JSON-RPC message: expected a JSON object with \"method\", got {0}")]
    NotAnObject(&'static str),
    #[error("not a JSON-RPC message: {0}")]
    BadEnvelope(String),
    #[error("\"jsonrpc\" must be \"2.0\", not {found}")]
    WrongVersion {
        found: String,
        id: Option<Box<RawValue>>,
    },
    #[error("\"id\" must be a string or a number, not {0}")]
    BadId(&'static str),
    #[error("\"method\" must be a string, not {found}")]
    BadMethod {
        found: &'static str,
        id: Option<Box<RawValue>>,
    },
    #[error("\"params\" must be an object or an array, not {found}")]
    BadParams {
        found: &'static str,
        id: Option<Box<RawValue>>,
    },
    #[error(
        "not a JSON-RPC request, notification or response: expected an object with \"method\" (or \"result\" / \"error\" and \"id\")"
    )]
    MissingMethod { id: Option<Box<RawValue>> },
}

impl LineError {
    /// The JSON-RPC error code: parse error for what is not JSON text,
    /// invalid request for JSON that is not a valid message.
    pub fn code(&self) -> i64 {
        match self {
            Self::TooLong { .. } | Self::InvalidUtf8 { .. } | Self::NotJson(_) => PARSE_ERROR,
            _ => INVALID_REQUEST,
        }
    }

    /// The request's id when the line had a valid one (the error answers
    /// that request); `None` answers with `"id": null`.
    pub fn id(&self) -> Option<&RawValue> {
        match self {
            Self::WrongVersion { id, .. }
            | Self::BadMethod { id, .. }
            | Self::BadParams { id, .. }
            | Self::MissingMethod { id } => id.as_deref(),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

/// A member that is there, `null` included (plain `Option` reads `null` as
/// absent, and a request with `"id": null` is not a notification).
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// The JSON type of a raw value, for messages.
fn kind_of(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// A client-supplied value, shortened for an error message.
fn quote(raw: &RawValue) -> String {
    let text = raw.get();
    if text.chars().count() <= QUOTE_CHARS {
        text.to_owned()
    } else {
        let mut short: String = text.chars().take(QUOTE_CHARS).collect();
        short.push('…');
        short
    }
}

/// Checks one line (without its `\n`; a trailing `\r` and a leading byte order
/// mark are allowed). `Ok(None)` for a blank line, which is skipped silently.
pub fn parse(line: &[u8]) -> Result<Option<Message<'_>>, LineError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let text = std::str::from_utf8(line).map_err(|error| LineError::InvalidUtf8 {
        offset: error.valid_up_to(),
    })?;
    let text = text.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\r' | '\n'));
    if text.is_empty() {
        return Ok(None);
    }
    let whole: &RawValue =
        serde_json::from_str(text).map_err(|error| LineError::NotJson(error.to_string()))?;
    match whole.get().as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => return Err(LineError::Batch),
        _ => return Err(LineError::NotAnObject(kind_of(whole))),
    }
    let envelope: Envelope<'_> =
        serde_json::from_str(text).map_err(|error| LineError::BadEnvelope(error.to_string()))?;
    // An error response to something unparsable carries `"id": null`; any
    // other message with a null id could never be answered, so it is refused.
    let null_id_error_response = envelope.method.is_none()
        && envelope.error.is_some()
        && envelope.id.map(RawValue::get) == Some("null");
    let id = match envelope.id {
        Some(id) if matches!(id.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9')) => {
            Some(id)
        }
        Some(_) if null_id_error_response => None,
        Some(id) => return Err(LineError::BadId(kind_of(id))),
        None => None,
    };
    let owned_id = || id.map(RawValue::to_owned);
    let version = envelope
        .jsonrpc
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    if version.as_deref() != Some("2.0") {
        return Err(LineError::WrongVersion {
            found: envelope.jsonrpc.map_or_else(|| "missing".to_owned(), quote),
            id: owned_id(),
        });
    }
    let params = envelope.params.filter(|params| params.get() != "null");
    if let Some(params) = params
        && !matches!(params.get().as_bytes().first(), Some(b'{' | b'['))
    {
        return Err(LineError::BadParams {
            found: kind_of(params),
            id: owned_id(),
        });
    }
    let method = match envelope.method {
        Some(raw) if raw.get() == "null" => None,
        Some(raw) => match serde_json::from_str::<String>(raw.get()) {
            Ok(method) => Some(method),
            Err(_) => {
                return Err(LineError::BadMethod {
                    found: kind_of(raw),
                    id: owned_id(),
                });
            }
        },
        None => None,
    };
    let kind = match (&method, id) {
        (Some(_), Some(_)) => Kind::Request,
        (Some(_), None) => Kind::Notification,
        (None, Some(_)) if envelope.result.is_some() || envelope.error.is_some() => Kind::Response,
        (None, None) if null_id_error_response => Kind::Response,
        (None, _) => return Err(LineError::MissingMethod { id: owned_id() }),
    };
    Ok(Some(Message {
        text,
        kind,
        id,
        method,
        params,
    }))
}

/// A JSON-RPC error line (without `\n`) answering `id` (`null` when `None`).
pub fn error_line(id: Option<&RawValue>, code: i64, message: &str) -> String {
    let id = id.map_or("null", RawValue::get);
    // Serializing a `&str` cannot fail.
    let message = serde_json::to_string(message).unwrap_or_else(|_| "\"\"".to_owned());
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#)
}

/// The error line refusing a request whose id (`id_text`) an unanswered
/// request already uses; the first one goes on.
pub fn already_in_flight(id: Option<&RawValue>, id_text: &str) -> String {
    let quoted: String = id_text.chars().take(80).collect();
    error_line(
        id,
        INVALID_REQUEST,
        &format!(
            "request id {quoted} is already in flight: each request needs an id that no unanswered request uses; this one was refused, the first one goes on"
        ),
    )
}

/// The error line answering a bad line, logged (at DEBUG: a client's
/// mistake, not news) with its text as one quoted field, since the text may
/// quote the line.
pub fn error_reply(error: &LineError) -> String {
    let text = error.to_string();
    tracing::debug!(
        error = Outside::within(&text, TEXT_LIMIT).field(),
        "bad line on stdin"
    );
    error_line(error.id(), error.code(), &text)
}
