//! One message's round trip to the server: the HTTP request (session,
//! token, the revision's headers), the answer's status, and the messages of
//! a JSON or SSE answer passed on to stdout, up to the request's response.

use std::sync::PoisonError;

use futures_util::StreamExt;
use rmcp::model::ProtocolVersion;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PROTOCOL_VERSION,
    HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use serde::Deserialize;

use super::{Outgoing, State};
use crate::http::BodyError;
use crate::line::{self, Kind};
use crate::wire::Output;

/// Longest excerpt of an error body quoted in a message.
const BODY_EXCERPT_CHARS: usize = 500;

/// Why forwarding one message failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum ForwardError {
    #[error(
        "cannot reach the openclaw-proxy server at {url}: {reason}. Start it, or point --proxy-base-url / OPENCLAW_PROXY_SERVER_URL at it"
    )]
    Unreachable { url: String, reason: String },
    #[error("the openclaw-proxy server at {url} did not answer: {reason}")]
    NoAnswer { url: String, reason: String },
    #[error(
        "the openclaw-proxy server at {url} rejected the OpenClaw token (401): set OPENCLAW_PROXY_OPENCLAW_TOKEN to the server's token"
    )]
    Unauthorized { url: String },
    #[error(
        "session {session:?} does not exist on {url} (404): it was never registered, it expired, or it was deleted; register the app's session again and bind the new id"
    )]
    UnknownSession { session: String, url: String },
    #[error("the openclaw-proxy server at {url} answered {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error(
        "the openclaw-proxy server at {url} {what}, without a JSON-RPC response to this request"
    )]
    NoResponse { url: String, what: String },
    #[error("the openclaw-proxy server's answer could not be used: {0}")]
    Body(#[from] BodyError),
    #[error("the openclaw-proxy server's answer could not be read: {0}")]
    BadAnswer(String),
}

/// Sends one message and passes on what the server answers; for a request,
/// an answer without its response is an error.
pub(super) async fn forward(
    state: &State,
    session: &str,
    message: &Outgoing,
    out: &Output,
) -> Result<(), ForwardError> {
    let url = &state.config.server_url;
    let limits = state.config.limits;
    let response = post(state, session, message)
        .send()
        .await
        .map_err(|error| {
            let reason = crate::http::send_failure(&error, &limits);
            if error.is_timeout() && !error.is_connect() {
                ForwardError::NoAnswer {
                    url: url.clone(),
                    reason,
                }
            } else {
                ForwardError::Unreachable {
                    url: url.clone(),
                    reason,
                }
            }
        })?;
    let status = response.status();
    match status.as_u16() {
        200 => {}
        202 | 204 => return no_response(state, message, format!("answered HTTP {status}")),
        401 => return Err(ForwardError::Unauthorized { url: url.clone() }),
        404 => {
            return Err(ForwardError::UnknownSession {
                session: session.to_owned(),
                url: url.clone(),
            });
        }
        code => {
            let body = crate::http::read_body(response, limits)
                .await
                .map(|body| {
                    String::from_utf8_lossy(&body)
                        .chars()
                        .take(BODY_EXCERPT_CHARS)
                        .collect()
                })
                .unwrap_or_else(|error| format!("(body not read: {error})"));
            return Err(ForwardError::Status {
                url: url.clone(),
                status: code,
                body,
            });
        }
    }
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if is_sse {
        pass_on_events(state, message, response, out).await
    } else {
        pass_on_body(state, message, response, out).await
    }
}

/// The request that carries `message` to the server: the session, the
/// token, and the protocol revision's headers.
fn post(state: &State, session: &str, message: &Outgoing) -> reqwest::RequestBuilder {
    let url = &state.config.server_url;
    let mut request = state
        .http
        .post(format!("{url}/v1/mcp"))
        .header(HEADER_SESSION_ID, session)
        .header(
            "accept",
            format!("{JSON_MIME_TYPE}, {EVENT_STREAM_MIME_TYPE}"),
        )
        .header("content-type", JSON_MIME_TYPE)
        .body(message.text.clone());
    if !state.config.token.is_empty() {
        request = request.bearer_auth(&state.config.token);
    }
    // A 2026-07-28 request names its own version in `_meta`; older ones use
    // the version negotiated by `initialize`.
    let version = message
        .params
        .meta
        .as_ref()
        .and_then(|meta| meta.protocol_version.clone())
        .or_else(|| {
            state
                .protocol_version
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        });
    if let Some(version) = version.filter(|_| message.method != "initialize") {
        // A response (to a request the server sent) names no method.
        if !message.method.is_empty() {
            for (name, value) in standard_headers(message, &version) {
                request = request.header(name, value);
            }
        }
        request = request.header(HEADER_MCP_PROTOCOL_VERSION, version);
    }
    request
}

/// An answer that did not carry the response: an error for a request (the
/// server `what`), nothing for a notification.
fn no_response(state: &State, message: &Outgoing, what: String) -> Result<(), ForwardError> {
    if message.request.is_some() {
        Err(ForwardError::NoResponse {
            url: state.config.server_url.clone(),
            what,
        })
    } else {
        Ok(())
    }
}

/// Passes on the messages of an SSE answer, up to the response.
async fn pass_on_events(
    state: &State,
    message: &Outgoing,
    response: reqwest::Response,
    out: &Output,
) -> Result<(), ForwardError> {
    let body = crate::http::body_stream(response, state.config.limits);
    let mut events = sse_stream::SseStream::from_bytes_stream(body);
    while let Some(event) = events.next().await {
        let event = event.map_err(|error| match error {
            sse_stream::Error::Body(inner) => match inner.downcast::<BodyError>() {
                Ok(body) => ForwardError::Body(*body),
                Err(other) => ForwardError::BadAnswer(other.to_string()),
            },
            other => ForwardError::BadAnswer(other.to_string()),
        })?;
        let Some(data) = event.data.filter(|data| !data.trim().is_empty()) else {
            continue;
        };
        if pass_on(state, message, &data, out).await? {
            return Ok(());
        }
    }
    no_response(state, message, "ended its event stream".to_owned())
}

/// Passes on a JSON answer, which should be the response.
async fn pass_on_body(
    state: &State,
    message: &Outgoing,
    response: reqwest::Response,
    out: &Output,
) -> Result<(), ForwardError> {
    let status = response.status();
    let mut body = crate::http::body_stream(response, state.config.limits);
    let mut bytes = Vec::new();
    while let Some(chunk) = body.next().await {
        bytes.extend_from_slice(&chunk?);
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        let what = format!("answered HTTP {status} with an empty body");
        return no_response(state, message, what);
    }
    let text = std::str::from_utf8(&bytes)
        .map_err(|error| ForwardError::BadAnswer(format!("not UTF-8: {error}")))?;
    if pass_on(state, message, text, out).await? {
        return Ok(());
    }
    no_response(
        state,
        message,
        format!("answered HTTP {status} with another message"),
    )
}

/// Writes one message from the server; `true` when it is the response to
/// `message`, which settles the request before it is written (so the client
/// may reuse the id as soon as it reads the answer).
async fn pass_on(
    state: &State,
    message: &Outgoing,
    text: &str,
    out: &Output,
) -> Result<bool, ForwardError> {
    let answer = match line::parse(text.as_bytes()) {
        Ok(Some(answer)) => answer,
        Ok(None) => return Ok(false),
        Err(error) => return Err(ForwardError::BadAnswer(error.to_string())),
    };
    let sent_id = message.request.as_ref().map(|(id, _)| id.as_str());
    let is_response = answer.kind == Kind::Response
        && sent_id.is_some_and(|sent| answer.id_text().is_some_and(|got| same_id(got, sent)));
    if is_response {
        if message.method == "initialize" {
            remember_version(state, answer.text);
        }
        if let Some((id, token)) = &message.request {
            state.settle(id, *token);
        }
    }
    // The client gets its id back exactly as it wrote it.
    let text = match sent_id {
        Some(sent) if is_response && answer.id_text() != Some(sent) => with_id(&answer, sent),
        _ => answer.text.to_owned(),
    };
    // JSON text holds a raw line break only as whitespace between tokens.
    let one_line = if text.contains(['\n', '\r']) {
        text.replace(['\n', '\r'], " ")
    } else {
        text
    };
    out.send(one_line).await;
    Ok(is_response)
}

/// Whether the server's id `answered` names the client's request `sent`:
/// the same text, or the same number written another way (a server that
/// reads ids as numbers answers `-0.0` with `0`, `1.0` with `1`).
fn same_id(answered: &str, sent: &str) -> bool {
    if answered == sent {
        return true;
    }
    let number = |text: &str| {
        text.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
            .then(|| text.parse::<f64>().ok())
            .flatten()
    };
    matches!((number(answered), number(sent)), (Some(a), Some(b)) if a == b)
}

/// The response `answer` with the client's id text `id` in place of the
/// server's, its `result` or `error` passed on as text.
fn with_id(answer: &line::Message<'_>, id: &str) -> String {
    #[derive(serde::Deserialize)]
    struct Outcome<'a> {
        #[serde(borrow, default)]
        result: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default)]
        error: Option<&'a serde_json::value::RawValue>,
    }
    match serde_json::from_str::<Outcome<'_>>(answer.text) {
        Ok(Outcome {
            result: Some(result),
            ..
        }) => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{}}}"#, result.get()),
        Ok(Outcome {
            error: Some(error), ..
        }) => format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#, error.get()),
        _ => answer.text.to_owned(),
    }
}

/// `Mcp-Method` and `Mcp-Name` for revisions that require them. Values that
/// are not plain visible ASCII are sent Base64-encoded as `=?base64?...?=`.
fn standard_headers(message: &Outgoing, version: &str) -> Vec<(&'static str, String)> {
    // The first revision whose requests carry `Mcp-Method` and `Mcp-Name`.
    if version < ProtocolVersion::STANDARD_HEADERS.as_str() {
        return Vec::new();
    }
    let method = message.method.as_str();
    let mut headers = vec![(HEADER_MCP_METHOD, header_value(method))];
    let name = match method {
        "tools/call" | "prompts/get" => message.params.name.as_deref(),
        "resources/read" => message.params.uri.as_deref(),
        _ => None,
    };
    if let Some(name) = name {
        headers.push((HEADER_MCP_NAME, header_value(name)));
    }
    headers
}

fn header_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        && !value.starts_with(' ')
        && !value.ends_with(' ');
    if plain {
        value.to_owned()
    } else {
        use base64::Engine as _;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

fn remember_version(state: &State, response: &str) {
    #[derive(Deserialize)]
    struct Initialized {
        result: InitializeResult,
    }
    #[derive(Deserialize)]
    struct InitializeResult {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
    }
    if let Ok(initialized) = serde_json::from_str::<Initialized>(response) {
        *state
            .protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(initialized.result.protocol_version);
    }
}
