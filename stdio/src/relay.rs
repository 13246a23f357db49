//! Relay mode: MCP messages between stdin/stdout and `{server}/v1/mcp`.
//!
//! The relay forwards JSON-RPC messages as they are, without parsing them
//! into typed MCP messages: whatever the client and the server agree on
//! (including fields this binary does not know, such as `mcpSessionId` in
//! `initialize`) passes through untouched. It adds only what the HTTP edge
//! needs: `MCP-Session-Id`, the OpenClaw bearer token, and the negotiated
//! `MCP-Protocol-Version`.
//!
//! - The session is bound by `initialize.params.mcpSessionId`, or by
//!   `--session-id` / `OPENCLAW_PROXY_SESSION_ID` (OpenClaw cannot add fields
//!   to `initialize`, and 2026-07-28 clients send no `initialize`).
//! - Each request is its own HTTP request, run concurrently; answers are
//!   written as they complete. JSON and SSE responses are both read, and the
//!   messages of one SSE response (progress, then the result) keep their order.
//! - `notifications/cancelled` aborts the matching HTTP request; the server
//!   sees the connection close and stops the call.
//! - Every failure becomes a JSON-RPC error with a sentence a user can act on:
//!   a bad stdin line ([`crate::line`]), a request id already in flight, an
//!   HTTP answer without the JSON-RPC response (202, 204, an empty body, an
//!   SSE stream that ends early), an answer over the size limit, a timeout.
//! - Messages pass as text, both ways: numbers of any size or precision
//!   arrive unchanged.
//! - A failed stdout write ends the relay (and its calls in flight) at once.
//! - stdout carries only MCP messages; logs go to stderr.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::model::ProtocolVersion;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PROTOCOL_VERSION,
    HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::{AbortHandle, JoinSet};

use crate::http::{BodyError, ClientError};
use crate::limits::Limits;
use crate::line::{self, INVALID_REQUEST, Kind, Message};
use crate::wire::{self, LineReader, Output, WriteFailed};

/// JSON-RPC error code for failures between the relay and the server.
pub const RELAY_ERROR: i64 = -32000;
/// JSON-RPC error code for a request before any session is bound.
pub const NOT_BOUND: i64 = -32002;

/// How long in-flight requests may still finish after stdin closes.
const EOF_GRACE: Duration = Duration::from_secs(10);

/// Longest excerpt of an error body quoted in a message.
const BODY_EXCERPT_CHARS: usize = 500;

/// Settings of the relay.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Base URL of the HTTP edge, without trailing slash.
    pub server_url: String,
    /// The OpenClaw bearer token; empty sends none.
    pub token: String,
    /// The session to use when `initialize` names none.
    pub session_id: Option<String>,
    /// Line limit, HTTP timeouts and answer size.
    pub limits: Limits,
}

/// Why the relay stopped before stdin closed.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("cannot read stdin: {0}")]
    Stdin(std::io::Error),
    #[error(transparent)]
    Stdout(#[from] WriteFailed),
}

/// Why forwarding one message failed.
#[derive(Debug, thiserror::Error)]
enum ForwardError {
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

/// The fields of `params` the relay looks at; the rest passes untouched.
#[derive(Debug, Default, Deserialize)]
struct Params {
    #[serde(rename = "mcpSessionId")]
    mcp_session_id: Option<String>,
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
    #[serde(rename = "requestId")]
    request_id: Option<Box<RawValue>>,
    name: Option<String>,
    uri: Option<String>,
    #[serde(rename = "_meta")]
    meta: Option<Meta>,
}

#[derive(Debug, Default, Deserialize)]
struct Meta {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: Option<String>,
}

impl Params {
    fn of(message: &Message<'_>) -> Self {
        // A `params` of unexpected shape is the server's to refuse.
        message
            .params
            .and_then(|params| serde_json::from_str(params.get()).ok())
            .unwrap_or_default()
    }
}

/// One message on its way to the server.
struct Outgoing {
    text: String,
    method: String,
    params: Params,
    /// The request's id text and its in-flight token; `None` for a
    /// notification.
    request: Option<(String, u64)>,
}

struct State {
    config: RelayConfig,
    http: reqwest::Client,
    session: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    /// Requests in flight by id text, with a token that tells a request from
    /// a later one that reuses its id.
    in_flight: Mutex<HashMap<String, (u64, AbortHandle)>>,
    next_token: AtomicU64,
}

impl State {
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Forgets request `id` if it is still the one with `token`.
    fn settle(&self, id: &str, token: u64) {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if in_flight.get(id).is_some_and(|(held, _)| *held == token) {
            in_flight.remove(id);
        }
    }
}

/// Runs the relay until stdin closes.
pub async fn run(config: RelayConfig) -> Result<(), RelayError> {
    run_with(config, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Runs the relay on any reader and writer (stdin/stdout in production).
/// Returns when `input` ends and the last answers are written, or at once
/// with [`RelayError::Stdout`] when `output` fails.
pub async fn run_with<R, W>(config: RelayConfig, input: R, output: W) -> Result<(), RelayError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let state = Arc::new(State {
        session: Mutex::new(config.session_id.clone().filter(|id| !id.is_empty())),
        http: crate::http::client(&config.server_url, &config.limits)?,
        config,
        protocol_version: Mutex::new(None),
        in_flight: Mutex::new(HashMap::new()),
        next_token: AtomicU64::new(0),
    });
    let (out, mut writer) = wire::output(output);
    // Dropping `serve` (stdout failed) drops its JoinSet, which aborts the
    // requests in flight: the server sees them cancelled.
    tokio::select! {
        served = serve(state, input, out) => served?,
        written = writer.wait() => written?,
    }
    writer.wait().await?;
    Ok(())
}

async fn serve<R: AsyncRead + Unpin>(
    state: Arc<State>,
    input: R,
    out: Output,
) -> Result<(), RelayError> {
    let mut tasks = JoinSet::new();
    let mut lines = LineReader::new(input, state.config.limits.max_line_bytes);
    while let Some(line) = lines.next_line().await.map_err(RelayError::Stdin)? {
        match line.and_then(line::parse) {
            Ok(Some(message)) => handle(&state, &out, &mut tasks, &message).await,
            Ok(None) => {}
            Err(error) => {
                tracing::debug!(%error, "bad line on stdin");
                out.send(line::error_reply(&error)).await;
            }
        }
        while tasks.try_join_next().is_some() {}
    }
    tracing::debug!("stdin closed; finishing {} request(s)", tasks.len());
    let drained = tokio::time::timeout(EOF_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "abandoning {} request(s) still running after stdin closed",
            tasks.len()
        );
        tasks.abort_all();
    }
    Ok(())
}

async fn handle(state: &Arc<State>, out: &Output, tasks: &mut JoinSet<()>, message: &Message<'_>) {
    let method = message.method.clone().unwrap_or_default();
    match message.kind {
        Kind::Notification if method == "notifications/cancelled" => {
            let Some(target) = Params::of(message).request_id else {
                return;
            };
            let handle = state
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(target.get());
            if let Some((_, handle)) = handle {
                tracing::debug!(request = %target, "cancelled by the client");
                handle.abort();
            }
        }
        Kind::Request => {
            let id = message.id_text().unwrap_or("null").to_owned();
            let params = Params::of(message);
            if method == "initialize" {
                bind_from_initialize(state, &params);
            }
            let Some(session) = state.session() else {
                out.send(line::error_line(
                    message.id,
                    NOT_BOUND,
                    "no session is bound: send initialize with params.mcpSessionId, or start openclaw-proxy-stdio with --session-id / OPENCLAW_PROXY_SESSION_ID",
                ))
                .await;
                return;
            };
            let duplicate = state
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&id);
            if duplicate {
                let quoted: String = id.chars().take(80).collect();
                out.send(line::error_line(
                    message.id,
                    INVALID_REQUEST,
                    &format!(
                        "request id {quoted} is already in flight: each request needs an id that no unanswered request uses; this one was refused, the first one goes on"
                    ),
                ))
                .await;
                return;
            }
            let token = state.next_token.fetch_add(1, Ordering::Relaxed);
            let outgoing = Outgoing {
                text: message.text.to_owned(),
                method,
                params,
                request: Some((id.clone(), token)),
            };
            let state_for_task = state.clone();
            let out_for_task = out.clone();
            // Held across the spawn so the task cannot settle its entry
            // before it is inserted.
            let mut in_flight = state
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let handle = tasks.spawn(async move {
                let result = forward(&state_for_task, &session, &outgoing, &out_for_task).await;
                state_for_task.settle(&id, token);
                if let Err(error) = result {
                    tracing::warn!(%error, "request failed");
                    let id = RawValue::from_string(id).ok();
                    out_for_task
                        .send(line::error_line(
                            id.as_deref(),
                            RELAY_ERROR,
                            &error.to_string(),
                        ))
                        .await;
                }
            });
            in_flight.insert(
                message.id_text().unwrap_or("null").to_owned(),
                (token, handle),
            );
        }
        Kind::Notification => {
            // Forwarded when a session is bound.
            if let Some(session) = state.session() {
                let outgoing = Outgoing {
                    text: message.text.to_owned(),
                    params: Params::of(message),
                    method,
                    request: None,
                };
                let state = state.clone();
                let out = out.clone();
                tasks.spawn(async move {
                    if let Err(error) = forward(&state, &session, &outgoing, &out).await {
                        tracing::warn!(%error, "notification not delivered");
                    }
                });
            }
        }
        Kind::Response => {
            // A response to a server request: the stateless server sends none.
            tracing::debug!("ignoring a response from the client: the server sends no requests");
        }
    }
}

fn bind_from_initialize(state: &State, params: &Params) {
    if let Some(session) = params.mcp_session_id.as_deref()
        && !session.is_empty()
    {
        *state.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.to_owned());
    }
    if let Some(version) = &params.protocol_version {
        *state
            .protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(version.clone());
    }
}

/// Sends one message and passes on what the server answers; for a request,
/// an answer without its response is an error.
async fn forward(
    state: &State,
    session: &str,
    message: &Outgoing,
    out: &Output,
) -> Result<(), ForwardError> {
    let url = &state.config.server_url;
    let limits = state.config.limits;
    let is_initialize = message.method == "initialize";
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
    if let Some(version) = version.filter(|_| !is_initialize) {
        for (name, value) in standard_headers(message, &version) {
            request = request.header(name, value);
        }
        request = request.header(HEADER_MCP_PROTOCOL_VERSION, version);
    }
    let response = request.send().await.map_err(|error| {
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
    let no_response = |what: String| {
        if message.request.is_some() {
            Err(ForwardError::NoResponse {
                url: url.clone(),
                what,
            })
        } else {
            Ok(())
        }
    };
    match status.as_u16() {
        200 => {}
        202 | 204 => return no_response(format!("answered HTTP {status}")),
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
    let mut body = crate::http::body_stream(response, limits);
    if is_sse {
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
        no_response("ended its event stream".to_owned())
    } else {
        let mut bytes = Vec::new();
        while let Some(chunk) = body.next().await {
            bytes.extend_from_slice(&chunk?);
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return no_response(format!("answered HTTP {status} with an empty body"));
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|error| ForwardError::BadAnswer(format!("not UTF-8: {error}")))?;
        if pass_on(state, message, text, out).await? {
            return Ok(());
        }
        no_response(format!("answered HTTP {status} with another message"))
    }
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
    let is_response = answer.kind == Kind::Response
        && message
            .request
            .as_ref()
            .is_some_and(|(id, _)| answer.id_text() == Some(id.as_str()));
    if is_response {
        if message.method == "initialize" {
            remember_version(state, answer.text);
        }
        if let Some((id, token)) = &message.request {
            state.settle(id, *token);
        }
    }
    // JSON text holds a raw line break only as whitespace between tokens.
    let one_line = if answer.text.contains(['\n', '\r']) {
        answer.text.replace(['\n', '\r'], " ")
    } else {
        answer.text.to_owned()
    };
    out.send(one_line).await;
    Ok(is_response)
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
