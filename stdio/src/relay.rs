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
//! - Every failure becomes a JSON-RPC error with a sentence a user can act on.
//! - stdout carries only MCP messages; logs go to stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use rmcp::model::ProtocolVersion;
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME, HEADER_MCP_PROTOCOL_VERSION,
    HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

/// JSON-RPC error code for failures between the relay and the server.
pub const RELAY_ERROR: i64 = -32000;
/// JSON-RPC error code for a request before any session is bound.
pub const NOT_BOUND: i64 = -32002;
/// JSON-RPC invalid request.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC parse error.
pub const PARSE_ERROR: i64 = -32700;

/// How long in-flight requests may still finish after stdin closes.
const EOF_GRACE: Duration = Duration::from_secs(10);

/// Settings of the relay.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Base URL of the HTTP edge, without trailing slash.
    pub server_url: String,
    /// The OpenClaw bearer token; empty sends none.
    pub token: String,
    /// The session to use when `initialize` names none.
    pub session_id: Option<String>,
}

/// Why forwarding one request failed.
#[derive(Debug, thiserror::Error)]
enum ForwardError {
    #[error(
        "cannot reach the openclaw-proxy server at {url}: {reason}. Start it, or point --proxy-base-url / OPENCLAW_PROXY_SERVER_URL at it"
    )]
    Unreachable { url: String, reason: String },
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
    #[error("the openclaw-proxy server's answer could not be read: {0}")]
    BadAnswer(String),
}

struct State {
    config: RelayConfig,
    http: reqwest::Client,
    session: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    in_flight: Mutex<HashMap<String, AbortHandle>>,
}

impl State {
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Runs the relay until stdin closes.
pub async fn run(config: RelayConfig) -> anyhow::Result<()> {
    run_with(config, tokio::io::stdin(), tokio::io::stdout()).await
}

/// Runs the relay on any reader and writer (stdin/stdout in production).
pub async fn run_with<R, W>(config: RelayConfig, input: R, output: W) -> anyhow::Result<()>
where
    R: tokio::io::AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let state = Arc::new(State {
        session: Mutex::new(config.session_id.clone().filter(|id| !id.is_empty())),
        config,
        http: reqwest::Client::builder().build()?,
        protocol_version: Mutex::new(None),
        in_flight: Mutex::new(HashMap::new()),
    });
    let (out, to_write) = mpsc::channel::<Value>(256);
    let writer = tokio::spawn(write_messages(output, to_write));
    let mut tasks = JoinSet::new();
    let mut lines = BufReader::new(input).lines();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(error) => {
                let _ = out
                    .send(error_reply(
                        Value::Null,
                        PARSE_ERROR,
                        format!("not a JSON-RPC message: {error}"),
                    ))
                    .await;
                continue;
            }
        };
        handle(&state, &out, &mut tasks, message).await;
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
    drop(out);
    writer.await??;
    Ok(())
}

async fn write_messages<W: AsyncWrite + Unpin>(
    mut output: W,
    mut messages: mpsc::Receiver<Value>,
) -> std::io::Result<()> {
    while let Some(message) = messages.recv().await {
        let mut line = message.to_string();
        line.push('\n');
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

fn error_reply(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

async fn handle(
    state: &Arc<State>,
    out: &mpsc::Sender<Value>,
    tasks: &mut JoinSet<()>,
    message: Value,
) {
    let method = message
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let id = message.get("id").cloned();
    match (method.as_deref(), id) {
        (Some("notifications/cancelled"), None) => {
            let target = message.pointer("/params/requestId").map(id_key);
            if let Some(target) = target {
                let handle = state
                    .in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&target);
                if let Some(handle) = handle {
                    tracing::debug!(request = %target, "cancelled by the client");
                    handle.abort();
                }
            }
        }
        (Some(method), Some(id)) => {
            if method == "initialize" {
                bind_from_initialize(state, &message);
            }
            let Some(session) = state.session() else {
                let _ = out
                    .send(error_reply(
                        id,
                        NOT_BOUND,
                        "no session is bound: send initialize with params.mcpSessionId, or start openclaw-proxy-stdio with --session-id / OPENCLAW_PROXY_SESSION_ID".into(),
                    ))
                    .await;
                return;
            };
            let key = id_key(&id);
            // Held across the spawn so the task cannot remove its entry
            // before it is inserted.
            let mut in_flight = state
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let state_for_task = state.clone();
            let out_for_task = out.clone();
            let handle = tasks.spawn(async move {
                let is_initialize =
                    message.get("method").and_then(Value::as_str) == Some("initialize");
                let result = forward(
                    &state_for_task,
                    &session,
                    &message,
                    &out_for_task,
                    is_initialize,
                )
                .await;
                state_for_task
                    .in_flight
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id_key(&id));
                if let Err(error) = result {
                    tracing::warn!(%error, "request failed");
                    let _ = out_for_task
                        .send(error_reply(id, RELAY_ERROR, error.to_string()))
                        .await;
                }
            });
            in_flight.insert(key, handle);
        }
        (Some(_), None) => {
            // A notification: forward it when a session is bound.
            if let Some(session) = state.session() {
                let state = state.clone();
                let out = out.clone();
                tasks.spawn(async move {
                    if let Err(error) = forward(&state, &session, &message, &out, false).await {
                        tracing::warn!(%error, "notification not delivered");
                    }
                });
            }
        }
        (None, _) if message.get("result").is_some() || message.get("error").is_some() => {
            // A response to a server request: the stateless server sends none.
            tracing::debug!("ignoring a response from the client: the server sends no requests");
        }
        (None, id) => {
            let _ = out
                .send(error_reply(
                    id.unwrap_or(Value::Null),
                    INVALID_REQUEST,
                    "not a JSON-RPC request, notification or response: expected an object with \"method\"".into(),
                ))
                .await;
        }
    }
}

fn bind_from_initialize(state: &State, message: &Value) {
    if let Some(session) = message
        .pointer("/params/mcpSessionId")
        .and_then(Value::as_str)
        && !session.is_empty()
    {
        *state.session.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.to_owned());
    }
    if let Some(version) = message
        .pointer("/params/protocolVersion")
        .and_then(Value::as_str)
    {
        *state
            .protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(version.to_owned());
    }
}

async fn forward(
    state: &State,
    session: &str,
    message: &Value,
    out: &mpsc::Sender<Value>,
    is_initialize: bool,
) -> Result<(), ForwardError> {
    let url = format!("{}/v1/mcp", state.config.server_url);
    let mut request = state
        .http
        .post(&url)
        .header(HEADER_SESSION_ID, session)
        .header(
            "accept",
            format!("{JSON_MIME_TYPE}, {EVENT_STREAM_MIME_TYPE}"),
        )
        .header("content-type", JSON_MIME_TYPE)
        .body(message.to_string());
    if !state.config.token.is_empty() {
        request = request.bearer_auth(&state.config.token);
    }
    // A 2026-07-28 request names its own version in `_meta`; older ones use
    // the version negotiated by `initialize`.
    let version = message
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        .map(str::to_owned)
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
    let response = request
        .send()
        .await
        .map_err(|error| ForwardError::Unreachable {
            url: state.config.server_url.clone(),
            reason: crate::root_cause(&error),
        })?;
    let status = response.status();
    match status.as_u16() {
        200 => {}
        202 | 204 => return Ok(()),
        401 => {
            return Err(ForwardError::Unauthorized {
                url: state.config.server_url.clone(),
            });
        }
        404 => {
            return Err(ForwardError::UnknownSession {
                session: session.to_owned(),
                url: state.config.server_url.clone(),
            });
        }
        code => {
            let body = response.text().await.unwrap_or_default();
            return Err(ForwardError::Status {
                url: state.config.server_url.clone(),
                status: code,
                body: body.chars().take(500).collect(),
            });
        }
    }
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if is_sse {
        let mut events = sse_stream::SseStream::from_bytes_stream(response.bytes_stream());
        while let Some(event) = events.next().await {
            let event = event.map_err(|error| ForwardError::BadAnswer(error.to_string()))?;
            let Some(data) = event.data.filter(|data| !data.trim().is_empty()) else {
                continue;
            };
            let message: Value = serde_json::from_str(&data)
                .map_err(|error| ForwardError::BadAnswer(error.to_string()))?;
            remember_version(state, &message, is_initialize);
            let _ = out.send(message).await;
        }
    } else {
        let bytes = response
            .bytes()
            .await
            .map_err(|error| ForwardError::BadAnswer(error.to_string()))?;
        if bytes.is_empty() {
            return Ok(());
        }
        let message: Value = serde_json::from_slice(&bytes)
            .map_err(|error| ForwardError::BadAnswer(error.to_string()))?;
        remember_version(state, &message, is_initialize);
        let _ = out.send(message).await;
    }
    Ok(())
}

/// `Mcp-Method` and `Mcp-Name` for revisions that require them. Values that
/// are not plain visible ASCII are sent Base64-encoded as `=?base64?...?=`.
fn standard_headers(message: &Value, version: &str) -> Vec<(&'static str, String)> {
    // The first revision whose requests carry `Mcp-Method` and `Mcp-Name`.
    if version < ProtocolVersion::STANDARD_HEADERS.as_str() {
        return Vec::new();
    }
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return Vec::new();
    };
    let mut headers = vec![(HEADER_MCP_METHOD, header_value(method))];
    let name = match method {
        "tools/call" | "prompts/get" => message.pointer("/params/name"),
        "resources/read" => message.pointer("/params/uri"),
        _ => None,
    };
    if let Some(name) = name.and_then(Value::as_str) {
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

fn remember_version(state: &State, message: &Value, is_initialize: bool) {
    if is_initialize
        && let Some(version) = message
            .pointer("/result/protocolVersion")
            .and_then(Value::as_str)
    {
        *state
            .protocol_version
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(version.to_owned());
    }
}
