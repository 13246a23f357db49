//! Edge errors and their one HTTP rendering: a status and a JSON body
//! `{"error": {"code": "...", "message": "..."}}` whose message names the
//! problem.

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::{AuthError, ErrorKind, HubError, LimitError, UnknownSession, escape};
use serde_json::json;

use crate::oauth::TokenError;

/// Longest error message sent, in characters.
const MESSAGE_LIMIT: usize = 1024;

/// Everything the HTTP edge can refuse a request for.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    Unauthorized(#[from] AuthError),
    #[error("{0}")]
    Token(#[from] TokenError),
    #[error(
        "Content-Type {0:?} is not accepted: send the session as JSON with `Content-Type: application/json`"
    )]
    UnsupportedMediaType(String),
    #[error("request body is not valid JSON: {0}")]
    MalformedJson(String),
    #[error("invalid request body: {0}")]
    InvalidBody(String),
    #[error("request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("could not read the request body: {0}")]
    UnreadableBody(String),
    #[error("{}", BodyTimeout { limit: *.limit })]
    BodyTimeout { limit: std::time::Duration },
    #[error("missing session id: use /v1/mcp/{{session_id}} or send the MCP-Session-Id header")]
    MissingSessionId,
    #[error("{}; register it again with POST /v1/chat/sessions", UnknownSession(.0))]
    UnknownSession(String),
    #[error("{0}")]
    Hub(#[from] HubError),
    #[error("Host {} is not allowed: add it to OPENCLAW_PROXY_ALLOWED_HOSTS", escape::quoted(.0))]
    HostNotAllowed(String),
    #[error(
        "Origin {} is not allowed: add it to OPENCLAW_PROXY_ALLOWED_ORIGINS",
        escape::quoted(.0)
    )]
    OriginNotAllowed(String),
    #[error("the request path cannot be read: {0}")]
    InvalidPath(String),
    #[error("no such endpoint: {0}")]
    NotFound(String),
    #[error("method {method} is not allowed on {path}")]
    MethodNotAllowed { method: String, path: String },
    #[error(
        "unsupported WebSocket version: this bridge speaks version 13 (RFC 6455); send `Sec-WebSocket-Version: 13`"
    )]
    WebSocketVersion,
    #[error("not a WebSocket handshake: {0}")]
    NotWebSocket(String),
    #[error("not ready: {0}")]
    NotReady(String),
    #[error("{0}")]
    TooManyConnections(String),
    #[error("{0}")]
    HeadTooLarge(#[from] HeadTooLarge),
}

/// A request head over one of the limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeadTooLarge {
    #[error(
        "the request target is {length} bytes, over the limit of {limit} (OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES)"
    )]
    Target { length: usize, limit: usize },
    #[error(
        "the request has {count} header fields, over the limit of {limit} (OPENCLAW_PROXY_MAX_HEADERS)"
    )]
    Count { count: usize, limit: usize },
    #[error(
        "the request's header fields are {size} bytes (names and values), over the limit of {limit} (OPENCLAW_PROXY_MAX_HEADER_BYTES)"
    )]
    Bytes { size: usize, limit: usize },
}

impl HeadTooLarge {
    /// The refusal: gRPC's `RESOURCE_EXHAUSTED` to a gRPC request, else the
    /// JSON `414` or `431`.
    pub fn answer(self, grpc: bool) -> Response {
        if grpc {
            return super::grpc_answer(tonic::Status::resource_exhausted(self.to_string()));
        }
        ApiError::HeadTooLarge(self).into_response()
    }
}

/// The failure of reading a body that did not arrive in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the request body did not arrive within {limit:?} (OPENCLAW_PROXY_BODY_READ_TIMEOUT_SECONDS); send the whole body without pausing"
)]
pub struct BodyTimeout {
    /// The limit that was hit.
    pub limit: std::time::Duration,
}

impl ApiError {
    /// The refusal of `method` on a route that serves others.
    pub fn method_not_allowed(method: &axum::http::Method, uri: &axum::http::Uri) -> Self {
        Self::MethodNotAllowed {
            method: method.to_string(),
            path: escape::truncated(uri.path()).into_owned(),
        }
    }

    /// The status of the refusal, and the header that goes with it. Those
    /// the core classified take their form from [`of_kind`].
    fn form(&self) -> (StatusCode, Option<(HeaderName, HeaderValue)>) {
        let plain = |status| (status, None);
        match self {
            Self::Unauthorized(error) => of_kind(error.kind()),
            Self::Token(error) => token_refusal(error),
            Self::Hub(error) => of_kind(error.kind()),
            Self::UnknownSession(_) => of_kind(ErrorKind::NotFound),
            Self::UnsupportedMediaType(_) => plain(StatusCode::UNSUPPORTED_MEDIA_TYPE),
            Self::MalformedJson(_)
            | Self::InvalidBody(_)
            | Self::MissingSessionId
            | Self::UnreadableBody(_)
            | Self::InvalidPath(_)
            | Self::NotWebSocket(_) => plain(StatusCode::BAD_REQUEST),
            Self::BodyTooLarge { .. } => plain(StatusCode::PAYLOAD_TOO_LARGE),
            Self::BodyTimeout { .. } => plain(StatusCode::REQUEST_TIMEOUT),
            Self::HostNotAllowed(_) | Self::OriginNotAllowed(_) => plain(StatusCode::FORBIDDEN),
            Self::NotFound(_) => plain(StatusCode::NOT_FOUND),
            Self::MethodNotAllowed { .. } => plain(StatusCode::METHOD_NOT_ALLOWED),
            Self::WebSocketVersion => (
                StatusCode::UPGRADE_REQUIRED,
                Some((
                    header::SEC_WEBSOCKET_VERSION,
                    HeaderValue::from_static("13"),
                )),
            ),
            Self::NotReady(_) => plain(StatusCode::SERVICE_UNAVAILABLE),
            Self::TooManyConnections(_) => plain(StatusCode::TOO_MANY_REQUESTS),
            Self::HeadTooLarge(HeadTooLarge::Target { .. }) => plain(StatusCode::URI_TOO_LONG),
            Self::HeadTooLarge(HeadTooLarge::Count { .. } | HeadTooLarge::Bytes { .. }) => {
                plain(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
            }
        }
    }

    fn code(&self) -> &'static str {
        match self {
            Self::Unauthorized(_) | Self::Hub(HubError::Unauthenticated(_)) => "unauthorized",
            Self::Token(error) => error.code(),
            Self::Hub(HubError::InvalidOwner(_)) => "invalid_owner",
            Self::Hub(HubError::InvalidName(_)) => "invalid_name",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::MalformedJson(_) => "malformed_json",
            Self::InvalidBody(_) => "invalid_body",
            Self::BodyTooLarge { .. } => "body_too_large",
            Self::UnreadableBody(_) => "unreadable_body",
            Self::BodyTimeout { .. } => "body_timeout",
            Self::MissingSessionId => "missing_session_id",
            Self::UnknownSession(_) | Self::Hub(HubError::UnknownSession(_)) => "unknown_session",
            Self::Hub(HubError::MissingSessionId) => "missing_session_id",
            Self::Hub(HubError::InvalidTool(_)) => "invalid_tool",
            Self::Hub(HubError::InvalidDeclaration(_)) => "invalid_declaration",
            Self::Hub(HubError::Limit(LimitError::TooManyDeclared { .. })) => "too_many_declared",
            Self::Hub(HubError::Limit(LimitError::TooManySessions { .. })) => "too_many_sessions",
            Self::Hub(HubError::Limit(LimitError::TooManyTools { .. })) => "too_many_tools",
            Self::Hub(HubError::Limit(LimitError::ToolDefinitionsTooLarge { .. })) => {
                "tool_definitions_too_large"
            }
            Self::Hub(HubError::Limit(LimitError::TotalToolDefinitions { .. })) => {
                "server_tool_definitions_full"
            }
            Self::Hub(HubError::Limit(LimitError::CreateRate { .. })) => "rate_limited",
            Self::Hub(HubError::ShuttingDown) => "shutting_down",
            Self::Hub(HubError::Unavailable(_) | HubError::NoRandomness(_)) => "unavailable",
            Self::HostNotAllowed(_) => "host_not_allowed",
            Self::OriginNotAllowed(_) => "origin_not_allowed",
            Self::InvalidPath(_) => "invalid_path",
            Self::NotFound(_) => "not_found",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::WebSocketVersion => "unsupported_websocket_version",
            Self::NotWebSocket(_) => "not_websocket",
            Self::NotReady(_) => "not_ready",
            Self::TooManyConnections(_) => "too_many_connections",
            Self::HeadTooLarge(HeadTooLarge::Target { .. }) => "request_target_too_long",
            Self::HeadTooLarge(HeadTooLarge::Count { .. }) => "too_many_headers",
            Self::HeadTooLarge(HeadTooLarge::Bytes { .. }) => "headers_too_large",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, header) = self.form();
        // Messages may quote what the client sent (a parser's error quotes a
        // wrongly typed string in full): bounded, control characters escaped.
        let message = self.to_string();
        let message = escape::truncated_to(&message, MESSAGE_LIMIT);
        let mut response = (status, Json(body(self.code(), &message))).into_response();
        if let Some((name, value)) = header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// The JSON body of every refusal: `{"error": {"code", "message"}}`.
pub fn body(code: &str, message: &str) -> serde_json::Value {
    json!({"error": {"code": code, "message": message}})
}

/// The HTTP form of a refused access token (RFC 6750): 401 with
/// `invalid_token`, or 403 with `insufficient_scope`, and the reason in
/// `error_description` ([`token_challenge`]).
fn token_refusal(error: &TokenError) -> (StatusCode, Option<(HeaderName, HeaderValue)>) {
    let status = match error {
        TokenError::MissingScope { .. } => StatusCode::FORBIDDEN,
        _ => StatusCode::UNAUTHORIZED,
    };
    let challenge = format!("Bearer {}", token_challenge(error));
    let value = HeaderValue::from_str(&challenge).unwrap_or(HeaderValue::from_static("Bearer"));
    (status, Some((header::WWW_AUTHENTICATE, value)))
}

/// Longest `error_description` of a challenge, in characters: the whole
/// message is in the body; the header is for a client that reads no body.
const DESCRIPTION_LIMIT: usize = 256;

/// The `error` and `error_description` parameters of the challenge refusing
/// a token. RFC 6750 allows printable ASCII but `"` and `\` in the
/// description, so it is made of those alone, on its own (the message may
/// quote a `kid` of any length and script): other characters become `?`,
/// and a description cut short ends with `...`. Whatever the message says,
/// the parameters are a valid part of a header, so a challenge built with
/// them keeps every other parameter.
pub(crate) fn token_challenge(error: &TokenError) -> String {
    let message = error.to_string();
    let mut description = String::with_capacity(message.len().min(DESCRIPTION_LIMIT + 3));
    for (count, c) in message.chars().enumerate() {
        if count == DESCRIPTION_LIMIT {
            description.push_str("...");
            break;
        }
        match c {
            ' '..='~' if c != '"' && c != '\\' => description.push(c),
            _ => description.push('?'),
        }
    }
    format!(
        "error=\"{}\", error_description=\"{description}\"",
        error.code()
    )
}

/// The HTTP form of each kind of refusal the core classifies: the one table.
fn of_kind(kind: ErrorKind) -> (StatusCode, Option<(HeaderName, HeaderValue)>) {
    match kind {
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, None),
        ErrorKind::Invalid => (StatusCode::BAD_REQUEST, None),
        ErrorKind::Unauthenticated => (
            StatusCode::UNAUTHORIZED,
            Some((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))),
        ),
        ErrorKind::Exhausted { retry_after } => (
            StatusCode::TOO_MANY_REQUESTS,
            retry_after.map(|wait| {
                // Whole seconds, rounded up: 0 would invite a retry storm.
                let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                (header::RETRY_AFTER, HeaderValue::from(seconds.max(1)))
            }),
        ),
        ErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, None),
    }
}
