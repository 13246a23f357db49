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
//! - A request the server sends on a call's stream (an app asking the user,
//!   its model or its roots: `elicitation/create`, `sampling/createMessage`,
//!   `roots/list`) is written to stdout like any message; the client's
//!   response on stdin is POSTed back, as a notification is.
//! - Every failure becomes a JSON-RPC error with a sentence a user can act on:
//!   a bad stdin line ([`crate::line`]), a request id already in flight, an
//!   HTTP answer without the JSON-RPC response (202, 204, an empty body, an
//!   SSE stream that ends early), an answer over the size limit, a timeout.
//! - Messages pass as text, both ways: numbers of any size or precision
//!   arrive unchanged.
//! - A failed stdout write ends the relay (and its calls in flight) at once.
//! - stdout carries only MCP messages; logs go to stderr.
//!
//! This file reads stdin and decides what each message needs; one message's
//! round trip to the server, and the errors it can meet, are `forward.rs`.

mod forward;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::{AbortHandle, JoinSet};

use crate::http::ClientError;
use crate::limits::Limits;
use crate::line::{self, Kind, Message};
use crate::wire::{self, LineReader, Output, WriteFailed};
use forward::forward;

/// JSON-RPC error code for failures between the relay and the server.
pub const RELAY_ERROR: i64 = -32000;
/// JSON-RPC error code for a request before any session is bound.
pub const NOT_BOUND: i64 = -32002;

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
        Kind::Notification if method == "notifications/cancelled" => cancel(state, message),
        Kind::Request => request(state, out, tasks, message, method).await,
        // A notification, or the client's response to a request the server
        // sent on a call's stream (an app asking the user, its model or its
        // roots): forwarded when a session is bound; the server answers 202.
        Kind::Notification | Kind::Response => {
            if let Some(session) = state.session() {
                let what = if message.kind == Kind::Response {
                    "response"
                } else {
                    "notification"
                };
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
                        tracing::warn!(
                            error = Outside::within(&error.to_string(), TEXT_LIMIT).field(),
                            "{what} not delivered"
                        );
                    }
                });
            }
        }
    }
}

/// `notifications/cancelled`: aborts the request it names, if in flight.
fn cancel(state: &State, message: &Message<'_>) {
    let Some(target) = Params::of(message).request_id else {
        return;
    };
    let handle = state
        .in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(target.get());
    if let Some((_, handle)) = handle {
        tracing::debug!(
            request = Outside::new(target.get()).field(),
            "cancelled by the client"
        );
        handle.abort();
    }
}

/// A request: refused at once when no session is bound or its id is in
/// flight, else forwarded in a task of its own.
async fn request(
    state: &Arc<State>,
    out: &Output,
    tasks: &mut JoinSet<()>,
    message: &Message<'_>,
    method: String,
) {
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
        out.send(line::already_in_flight(message.id, &id)).await;
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
    // Held across the spawn so the task cannot settle its entry before it is
    // inserted.
    let mut in_flight = state
        .in_flight
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let handle = tasks.spawn(async move {
        let result = forward(&state_for_task, &session, &outgoing, &out_for_task).await;
        state_for_task.settle(&id, token);
        if let Err(error) = result {
            tracing::warn!(
                error = Outside::within(&error.to_string(), TEXT_LIMIT).field(),
                "request failed"
            );
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
