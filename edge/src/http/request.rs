//! What every handler reads of a request before its own work: the session id
//! of the path, the bearer token's verdict, the body (bounded), JSON with
//! errors that name the field, and both ends of the connection.
//!
//! Every check here reads the headers only, so a stranger is refused before
//! the server reads a byte of the body.

use std::net::SocketAddr;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};
use openclaw_proxy_core::metrics::Surface;
use openclaw_proxy_core::{Caller, Credential, HubError};

use super::error::ApiError;
use super::state::EdgeState;

/// The `{session_id}` of a route's path. A path that cannot be decoded
/// (invalid UTF-8 in a percent escape) is refused in the JSON error shape
/// rather than with axum's plain-text rejection.
#[derive(Debug)]
pub struct SessionIdPath(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SessionIdPath {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<String>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(session_id)) => Ok(Self(session_id)),
            Err(rejection) => Err(ApiError::InvalidPath(rejection.body_text())),
        }
    }
}

/// The `Authorization` header value, when it is text.
pub(crate) fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
}

/// Checks that a request may create sessions (the app token, which also
/// opens `/metrics`), from its headers alone; a refusal is counted on
/// `surface`.
pub(crate) fn check_app_token(
    state: &EdgeState,
    headers: &HeaderMap,
    surface: Surface,
) -> Result<(), ApiError> {
    state
        .hub
        .authorize_create(Credential::app(authorization(headers)))
        .map_err(|error| {
            state.hub.metrics().auth_failure(surface);
            ApiError::Unauthorized(error)
        })
}

/// Asks the hub whether a request on `surface` may touch `session_id`, from
/// its headers alone (the MCP side for the MCP endpoint, the app side
/// elsewhere). A credential that could have opened the session learns that
/// it does not exist ([`HubError::UnknownSession`]).
pub(crate) async fn check_session_token(
    state: &EdgeState,
    session_id: &str,
    surface: Surface,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let header = authorization(headers);
    let credential = match surface {
        Surface::Mcp => Credential::mcp(header),
        _ => Credential::app(header),
    };
    let checked = state.hub.authorize(session_id, credential).await;
    checked.map_err(|error| refusal(state, surface, error))
}

/// The edge's error for a refusal of the hub on `surface`; a refused
/// credential is counted among the auth failures.
pub(crate) fn refusal(state: &EdgeState, surface: Surface, error: HubError) -> ApiError {
    match error {
        HubError::Unauthenticated(error) => {
            state.hub.metrics().auth_failure(surface);
            ApiError::Unauthorized(error)
        }
        error => ApiError::Hub(error),
    }
}

/// Refuses a body that does not say it is JSON: a web page can send
/// `text/plain` across sites without a preflight, but not `application/json`.
pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or("<not text>"));
    let essence = content_type
        .and_then(|value| value.split(';').next())
        .map(str::trim);
    if essence.is_some_and(|essence| essence.eq_ignore_ascii_case("application/json")) {
        Ok(())
    } else {
        let shown = content_type.map_or_else(|| "(none)".to_owned(), |value| value.to_owned());
        Err(ApiError::UnsupportedMediaType(
            openclaw_proxy_core::escape::truncated(&shown).into_owned(),
        ))
    }
}

/// Reads a body up to `limit` bytes; the error names the problem.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let too_large = std::error::Error::source(&error)
            .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large {
            ApiError::BodyTooLarge { limit }
        } else if let Some(limit) = super::deadline::is_timeout(&error) {
            ApiError::BodyTimeout { limit }
        } else {
            ApiError::UnreadableBody(error.to_string())
        }
    })
}

/// How deep JSON may nest: serde_json's limit, which rmcp's path applies.
pub const MAX_NESTING: usize = 128;

/// Whether no array or object in `json` lies deeper than `limit`.
pub fn nesting_within(json: &[u8], limit: usize) -> bool {
    // No depth passes the number of brackets that open it. Counting them is
    // one pass the compiler vectorises, and a request seldom holds more than
    // the limit, so the walk that tells strings apart is mostly skipped.
    let opening: usize = json
        .iter()
        .map(|&byte| usize::from(byte == b'{' || byte == b'['))
        .sum();
    if opening <= limit {
        return true;
    }
    let (mut depth, mut in_string, mut escaped) = (0_usize, false, false);
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return false;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// Parses a JSON body; type errors name the offending field (`tools[0].name`).
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::MalformedJson(inner.to_string())
        } else if path == "." {
            ApiError::InvalidBody(inner.to_string())
        } else {
            ApiError::InvalidBody(format!("{path}: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|error| ApiError::MalformedJson(error.to_string()))?;
    // serde skips a field it does not know without counting its depth, so
    // a body nested 500 000 deep inside one would pass: the depth holds for
    // the whole body.
    if !nesting_within(body, MAX_NESTING) {
        return Err(ApiError::MalformedJson(format!(
            "recursion limit exceeded: the body nests deeper than {MAX_NESTING} levels"
        )));
    }
    Ok(value)
}

/// Both ends of the connection a request arrived on.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionInfo {
    /// The server's address as the client reached it.
    pub local: SocketAddr,
    /// The client's address.
    pub remote: SocketAddr,
    /// Whether the connection is TLS (answer URLs then say `https`/`wss`).
    pub tls: bool,
    /// Whether the client is one of `OPENCLAW_PROXY_TRUSTED_PROXIES`: only
    /// then are its `X-Forwarded-*` headers read.
    pub trusted_proxy: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Known {
        #[allow(dead_code)]
        name: String,
    }

    #[test]
    fn the_depth_limit_holds_for_fields_serde_skips() {
        let deep = |depth: usize| {
            format!(
                r#"{{"name":"n","skipped":{}1{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        assert!(parse_json::<Known>(deep(MAX_NESTING - 1).as_bytes()).is_ok());
        let refused = parse_json::<Known>(deep(500_000).as_bytes());
        assert!(
            matches!(&refused, Err(ApiError::MalformedJson(message)) if message.contains("128")),
            "{refused:?}"
        );
        // Brackets inside strings are text, not nesting.
        let text = format!(r#"{{"name":"{}"}}"#, "[".repeat(1000));
        assert!(parse_json::<Known>(text.as_bytes()).is_ok());
    }

    #[test]
    fn depth_is_told_from_the_number_of_brackets() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(nesting_within(nested(128).as_bytes(), 128));
        assert!(!nesting_within(nested(129).as_bytes(), 128));
        // More brackets than the limit, side by side or in strings: shallow.
        let wide = format!("[{}[]]", "[],".repeat(300));
        assert!(nesting_within(wide.as_bytes(), 128));
        let quoted = format!(
            r#"["{}", {{"a": "\"{}"}}]"#,
            "{".repeat(300),
            "[".repeat(300)
        );
        assert!(nesting_within(quoted.as_bytes(), 128));
        // Deep past the limit after many shallow ones.
        let late = format!("[{}{}]", "{},".repeat(300), nested(128));
        assert!(!nesting_within(late.as_bytes(), 128));
    }
}
