//! The one transport layer of the MCP server: how a POSTed message is read
//! ([`request`]: the envelope, the revision, what the server reads of
//! `_meta`; [`headers`]: the 2026-07-28 headers that repeat the body) and
//! how a request is answered ([`answer`]: JSON, or an event stream carrying
//! what the client hears before the answer). The methods sit above it;
//! nothing here knows one method from another beyond the headers that name
//! them at 2026-07-28. [`Rejected`], a message refused, is shared by all
//! three.

pub mod answer;
pub mod headers;
pub mod request;

use axum::http::{HeaderMap, HeaderName, StatusCode};
use openclaw_proxy_core::escape;
use rmcp::model::{ErrorCode, RequestId};
use serde_json::value::RawValue;

/// Longest error message the endpoint sends, in characters: a refusal
/// quotes what it refuses, and a client's input must not come back whole.
pub const MESSAGE_LIMIT: usize = 1024;

/// A message the server refuses: the JSON-RPC error, the id of the request
/// it answers (`None` when none could be read) and the HTTP status.
#[derive(Debug)]
pub struct Rejected {
    pub id: Option<RequestId>,
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    /// The error's `data`, where the specification gives it one.
    pub data: Option<Box<RawValue>>,
}

impl Rejected {
    /// A refusal with `status`, `code` and `message` (cut short).
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        let message = message.into();
        Self {
            id: None,
            status,
            code,
            message: escape::truncated_to(&message, MESSAGE_LIMIT).into_owned(),
            data: None,
        }
    }

    /// A call whose tool needs client capabilities the request did not
    /// declare (SEP-2575): `-32021`, 400, its `data.requiredCapabilities` a
    /// `ClientCapabilities` object of the missing ones.
    pub fn missing_capabilities(
        tool: &str,
        missing: &[openclaw_proxy_core::tools::ClientCapability],
    ) -> Self {
        use openclaw_proxy_core::tools::ClientCapability;
        let names: Vec<&str> = missing
            .iter()
            .map(|capability| capability.as_str())
            .collect();
        let mut required = serde_json::Map::new();
        for capability in missing {
            let (key, value) = match capability {
                ClientCapability::Elicitation => ("elicitation", serde_json::json!({"form": {}})),
                ClientCapability::ElicitationUrl => ("elicitation", serde_json::json!({"url": {}})),
                ClientCapability::Sampling => ("sampling", serde_json::json!({})),
                ClientCapability::Roots => ("roots", serde_json::json!({})),
            };
            match (required.get_mut(key), value) {
                (Some(serde_json::Value::Object(modes)), serde_json::Value::Object(more)) => {
                    modes.extend(more);
                }
                (_, value) => {
                    required.insert(key.to_owned(), value);
                }
            }
        }
        let mut rejected = Self::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!(
                "the tool {} needs client capabilities this request did not declare in io.modelcontextprotocol/clientCapabilities: {}",
                escape::quoted(tool),
                names.join(", ")
            ),
        );
        rejected.data = serde_json::value::to_raw_value(
            &serde_json::json!({ "requiredCapabilities": required }),
        )
        .ok();
        rejected
    }

    /// A header that does not agree with the body (SEP-2243): `-32020`, 400.
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH, message)
    }

    /// A body that is JSON but not a JSON-RPC message the server takes.
    fn not_json_rpc(why: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            format!("Invalid Request: the body is not a JSON-RPC request or notification: {why}"),
        )
    }

    /// Params that do not fit the method: `-32602`, answered with 200 as
    /// any JSON-RPC error of a request.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(StatusCode::OK, ErrorCode::INVALID_PARAMS, message)
    }

    /// The same refusal, answering `id`.
    pub fn answering(mut self, id: &RequestId) -> Self {
        self.id = Some(id.clone());
        self
    }
}

/// The sole value of header `name` as text; `None` when it is absent,
/// repeated or not text.
pub(crate) fn single<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Option<&'h str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}
