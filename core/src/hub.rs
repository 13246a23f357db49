//! The hub: the session registry, bridge attachment, the idle sweep and tool
//! invocation.
//!
//! Rules (DESIGN.md, "Behaviour where the seeds are silent"):
//! - A session expires after `session_ttl` without activity (creation, bridge
//!   attach, tool call, bridge traffic). A session with a bridge attached or a
//!   call in flight never expires. The sweep runs every `sweep_interval`.
//! - A new bridge replaces the old one, which ends with [`BridgeEnd::Replaced`];
//!   its calls in flight fail at once.
//! - Losing a bridge, deleting its session and shutting down fail the calls in
//!   flight at once; nothing waits for the tool timeout.
//! - Results that arrive late or for an unknown request id are ignored, logged
//!   and answered with an error notice; the bridge stays up.
//! - Request ids are `"{session_id}:{n}"`, `n` counting from 1 per session.

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::bridge::{Bridge, BridgeEnd, BridgeStream, ProgressSink};
use crate::config::CoreConfig;
use crate::proto::{self, app_message, proxy_message};
use crate::tools::{Tool, ToolError, ToolSetCache, validate_tools};

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("session {0:?} does not exist: it was never created, it expired, or it was deleted")]
    UnknownSession(String),
    #[error("session_id is empty: name the session returned by CreateSession")]
    MissingSessionId,
    #[error(transparent)]
    InvalidTool(#[from] ToolError),
    #[error("the proxy is shutting down and accepts no new sessions or bridges")]
    ShuttingDown,
}

/// Why a tool call produced no answer from the app.
#[derive(Debug, thiserror::Error)]
pub enum InvokeError {
    #[error("session {0:?} does not exist: it was never created, it expired, or it was deleted")]
    UnknownSession(String),
    #[error("unknown tool {tool:?}: this session offers {available}")]
    UnknownTool { tool: String, available: String },
    #[error("Bridge is not connected.")]
    NotConnected,
    #[error("The tool did not answer within {} seconds.", .0.as_secs_f64())]
    Timeout(Duration),
    #[error("{}", .0.reason_for_caller())]
    BridgeEnded(BridgeEnd),
    #[error("The app's {what} for {tool} was malformed: {problem}")]
    MalformedAnswer {
        /// The tool that was called.
        tool: String,
        /// `"result"` or `"progress report"`.
        what: &'static str,
        /// What was wrong with it.
        problem: String,
    },
}

/// What the app sent over its bridge, as the hub reads it.
#[derive(Debug)]
pub enum Inbound {
    /// A well-formed message.
    Message(proto::AppMessage),
    /// A result or progress report that names a call but cannot be used
    /// (a field of the wrong type, say). The call fails at once with
    /// `problem`, and the app is told.
    Malformed {
        /// The request id the message named.
        request_id: String,
        /// Whether it was a result (`true`) or a progress report.
        result: bool,
        /// What was wrong, as a sentence for the app developer.
        problem: String,
    },
}

impl From<proto::AppMessage> for Inbound {
    fn from(message: proto::AppMessage) -> Self {
        Self::Message(message)
    }
}

/// The app's answer to a tool call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The tool's output; `Null` when the app sent none.
    pub content: Value,
    /// The app's error text when `ok` is false.
    pub error: String,
}

/// The proxy's core: every transport operates on one shared `Hub`.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    config: CoreConfig,
    sessions: RwLock<HashMap<Arc<str>, Arc<Session>>>,
    tool_sets: ToolSetCache,
    shutdown: CancellationToken,
}

struct Session {
    id: Arc<str>,
    metadata: proto::SessionMetadata,
    tools: Arc<[Tool]>,
    state: Mutex<SessionState>,
}

struct SessionState {
    bridge: Option<Arc<Bridge>>,
    last_activity: Instant,
    calls_in_flight: u32,
    calls_made: u64,
    deleted: bool,
}

impl Session {
    fn state(&self) -> MutexGuard<'_, SessionState> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        self.state().last_activity = Instant::now();
    }

    fn tool_names(&self) -> String {
        if self.tools.is_empty() {
            return "no tools".into();
        }
        let names: Vec<&str> = self.tools.iter().map(|tool| &*tool.name).collect();
        names.join(", ")
    }
}

impl Hub {
    /// A hub with no sessions.
    pub fn new(config: CoreConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                sessions: RwLock::default(),
                tool_sets: ToolSetCache::default(),
                shutdown: CancellationToken::new(),
            }),
        }
    }

    /// The settings the hub runs with.
    pub fn config(&self) -> &CoreConfig {
        &self.inner.config
    }

    /// Registers a session with validated tools.
    pub fn create_session(
        &self,
        request: proto::CreateSessionRequest,
    ) -> Result<proto::CreateSessionResponse, HubError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        let tools = validate_tools(request.tools)?;
        let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let session = Arc::new(Session {
            id: id.clone(),
            metadata: request.metadata.unwrap_or_default(),
            tools: self.inner.tool_sets.intern(tools),
            state: Mutex::new(SessionState {
                bridge: None,
                last_activity: Instant::now(),
                calls_in_flight: 0,
                calls_made: 0,
                deleted: false,
            }),
        });
        self.inner.sessions_mut().insert(id.clone(), session);
        tracing::info!(session_id = %id, "session created");
        Ok(proto::CreateSessionResponse {
            session_id: id.to_string(),
        })
    }

    /// Removes a session, ending its bridge and failing its calls. Idempotent.
    pub fn delete_session(
        &self,
        request: proto::DeleteSessionRequest,
    ) -> proto::DeleteSessionResponse {
        let removed = self
            .inner
            .sessions_mut()
            .remove(request.session_id.as_str());
        let existed = removed.is_some();
        if let Some(session) = removed {
            retire(&session, BridgeEnd::SessionDeleted);
            tracing::info!(session_id = %session.id, "session deleted");
        }
        proto::DeleteSessionResponse { existed }
    }

    /// Describes a live session.
    pub fn get_session(
        &self,
        request: proto::GetSessionRequest,
    ) -> Result<proto::GetSessionResponse, HubError> {
        let session = self.inner.session(&request.session_id)?;
        let state = session.state();
        Ok(proto::GetSessionResponse {
            session_id: session.id.to_string(),
            metadata: Some(session.metadata.clone()),
            tools: session.tools.iter().map(Tool::to_proto).collect(),
            bridge_connected: state.bridge.is_some(),
            calls_in_flight: state.calls_in_flight,
        })
    }

    /// The tools of a live session, for MCP `tools/list`.
    pub fn tools(&self, session_id: &str) -> Result<Arc<[Tool]>, HubError> {
        Ok(self.inner.session(session_id)?.tools.clone())
    }

    /// Whether a live session has this id.
    pub fn session_exists(&self, session_id: &str) -> bool {
        self.inner.session(session_id).is_ok()
    }

    /// Number of live sessions.
    pub fn session_count(&self) -> usize {
        self.inner.sessions().len()
    }

    /// Attaches a bridge to a session, replacing any bridge it had.
    ///
    /// `inbound` carries the app's messages after its `hello`; the returned
    /// stream carries the proxy's messages, starting with `attached`, and ends
    /// with the reason the bridge ended.
    pub fn attach<S>(&self, hello: proto::Hello, inbound: S) -> Result<BridgeStream, HubError>
    where
        S: Stream<Item = Inbound> + Send + 'static,
    {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        if hello.session_id.is_empty() {
            return Err(HubError::MissingSessionId);
        }
        let session = self.inner.session(&hello.session_id)?;
        let (bridge, receiver) = Bridge::new();
        let replaced = {
            let mut state = session.state();
            if state.deleted {
                return Err(HubError::UnknownSession(hello.session_id));
            }
            state.last_activity = Instant::now();
            state.bridge.replace(bridge.clone())
        };
        if let Some(old) = replaced {
            old.end(BridgeEnd::Replaced);
            tracing::info!(session_id = %session.id, "bridge replaced by a newer one");
        } else {
            tracing::info!(session_id = %session.id, "bridge attached");
        }
        bridge.notify(proxy(proxy_message::Kind::Attached(proto::Attached {
            session_id: session.id.to_string(),
        })));
        let on_drop = {
            let session = session.clone();
            let bridge = bridge.clone();
            Box::new(move || lose_bridge(&session, &bridge, BridgeEnd::Disconnected))
        };
        tokio::spawn(drive_bridge(
            self.inner.config.clone(),
            session,
            bridge.clone(),
            inbound,
        ));
        Ok(BridgeStream::new(receiver, bridge, on_drop))
    }

    /// Sends a tool call to the session's app and waits for its answer.
    pub async fn invoke(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<ToolOutcome, InvokeError> {
        self.invoke_with_progress(session_id, tool_name, arguments, None)
            .await
    }

    /// Like [`Hub::invoke`], passing the app's progress reports for this call
    /// to `progress`. Every report is queued before the answer is returned.
    pub async fn invoke_with_progress(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments: &Map<String, Value>,
        progress: Option<ProgressSink>,
    ) -> Result<ToolOutcome, InvokeError> {
        let session = self
            .inner
            .session(session_id)
            .map_err(|_| InvokeError::UnknownSession(session_id.to_owned()))?;
        if !session.tools.iter().any(|tool| &*tool.name == tool_name) {
            return Err(InvokeError::UnknownTool {
                tool: tool_name.to_owned(),
                available: session.tool_names(),
            });
        }
        let (bridge, request_id) = {
            let mut state = session.state();
            if state.deleted {
                return Err(InvokeError::UnknownSession(session_id.to_owned()));
            }
            let bridge = state.bridge.clone().ok_or(InvokeError::NotConnected)?;
            state.calls_made += 1;
            state.calls_in_flight += 1;
            state.last_activity = Instant::now();
            (bridge, format!("{}:{}", session.id, state.calls_made))
        };
        // From here on the guard undoes the bookkeeping however the call ends,
        // including when the caller stops waiting.
        let call = CallInFlight {
            session: &session,
            bridge: &bridge,
            request_id: &request_id,
        };
        let answer = bridge
            .register(&request_id, tool_name, progress)
            .map_err(InvokeError::BridgeEnded)?;
        let message = proxy(proxy_message::Kind::Invoke(proto::InvokeTool {
            session_id: session.id.to_string(),
            request_id: request_id.clone(),
            tool_name: tool_name.to_owned(),
            arguments_json: Value::Object(arguments.clone()).to_string(),
        }));
        let timeout = self.inner.config.tool_timeout;
        let outcome = tokio::time::timeout(timeout, async {
            bridge
                .send(message)
                .await
                .map_err(InvokeError::BridgeEnded)?;
            answer
                .await
                .unwrap_or(Err(InvokeError::BridgeEnded(BridgeEnd::Disconnected)))
        })
        .await
        .unwrap_or(Err(InvokeError::Timeout(timeout)));
        if let Err(InvokeError::Timeout(_)) = &outcome {
            tracing::warn!(%request_id, tool = tool_name, "tool call timed out");
        }
        drop(call);
        outcome
    }

    /// Removes sessions idle for longer than the TTL that have neither a
    /// bridge nor a call in flight. Returns how many were removed.
    pub fn sweep_expired(&self) -> usize {
        let ttl = self.inner.config.session_ttl;
        let now = Instant::now();
        let mut sessions = self.inner.sessions_mut();
        let before = sessions.len();
        sessions.retain(|id, session| {
            let state = session.state();
            let expired = state.bridge.is_none()
                && state.calls_in_flight == 0
                && now.saturating_duration_since(state.last_activity) >= ttl;
            if expired {
                tracing::info!(session_id = %id, "session expired");
            }
            !expired
        });
        before - sessions.len()
    }

    /// Runs the idle sweep every `sweep_interval` until shutdown.
    pub async fn run_sweeper(self) {
        let period = self.inner.config.sweep_interval;
        let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.inner.shutdown.cancelled() => return,
                _ = ticker.tick() => { self.sweep_expired(); }
            }
        }
    }

    /// Ends every bridge with [`BridgeEnd::ShuttingDown`], failing their calls,
    /// and refuses new sessions and bridges from now on.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
        let sessions: Vec<Arc<Session>> = self.inner.sessions().values().cloned().collect();
        for session in sessions {
            let bridge = session.state().bridge.take();
            if let Some(bridge) = bridge {
                bridge.end(BridgeEnd::ShuttingDown);
            }
        }
    }

    /// Whether [`Hub::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }
}

impl Inner {
    fn sessions(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, Arc<Session>>> {
        self.sessions.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn sessions_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Arc<str>, Arc<Session>>> {
        self.sessions
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn session(&self, id: &str) -> Result<Arc<Session>, HubError> {
        self.sessions()
            .get(id)
            .cloned()
            .ok_or_else(|| HubError::UnknownSession(id.to_owned()))
    }
}

/// Undoes a call's bookkeeping when the call ends, however it ends.
struct CallInFlight<'a> {
    session: &'a Session,
    bridge: &'a Bridge,
    request_id: &'a str,
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        self.bridge.forget(self.request_id);
        let mut state = self.session.state();
        state.calls_in_flight = state.calls_in_flight.saturating_sub(1);
        state.last_activity = Instant::now();
    }
}

fn proxy(kind: proxy_message::Kind) -> proto::ProxyMessage {
    proto::ProxyMessage { kind: Some(kind) }
}

fn notice(message: String, request_id: String) -> proto::ProxyMessage {
    proxy(proxy_message::Kind::Error(proto::ErrorNotice {
        message,
        request_id,
    }))
}

/// Marks a removed session deleted and ends its bridge.
fn retire(session: &Session, reason: BridgeEnd) {
    let bridge = {
        let mut state = session.state();
        state.deleted = true;
        state.bridge.take()
    };
    if let Some(bridge) = bridge {
        bridge.end(reason);
    }
}

/// Ends a bridge and detaches it from its session if it is still the current one.
fn lose_bridge(session: &Session, bridge: &Arc<Bridge>, reason: BridgeEnd) {
    if bridge.end(reason) {
        tracing::info!(session_id = %session.id, reason = reason.reason_for_app(), "bridge ended");
    }
    let mut state = session.state();
    if state
        .bridge
        .as_ref()
        .is_some_and(|current| Arc::ptr_eq(current, bridge))
    {
        state.bridge = None;
        state.last_activity = Instant::now();
    }
}

/// Reads the app's messages and keeps the bridge alive with pings until the
/// bridge ends.
async fn drive_bridge<S>(config: CoreConfig, session: Arc<Session>, bridge: Arc<Bridge>, inbound: S)
where
    S: Stream<Item = Inbound> + Send + 'static,
{
    let mut inbound = pin!(inbound);
    let period = config.ping_interval;
    let silence_limit = period * config.missed_pings_allowed.max(1);
    let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_heard = Instant::now();
    let mut nonce = 0_u64;
    loop {
        tokio::select! {
            biased;
            () = bridge.closed() => {
                drain(inbound, CLOSE_GRACE).await;
                return;
            }
            message = inbound.next() => {
                let Some(message) = message else {
                    lose_bridge(&session, &bridge, BridgeEnd::Disconnected);
                    return;
                };
                last_heard = Instant::now();
                session.touch();
                match message {
                    Inbound::Message(message) => handle_app_message(&session, &bridge, message),
                    Inbound::Malformed { request_id, result, problem } => {
                        fail_malformed(&session, &bridge, request_id, result, problem);
                    }
                }
            }
            _ = ticker.tick() => {
                if last_heard.elapsed() >= silence_limit {
                    tracing::warn!(session_id = %session.id, "bridge silent too long; dropping it");
                    lose_bridge(&session, &bridge, BridgeEnd::Unresponsive);
                    drain(inbound, CLOSE_GRACE).await;
                    return;
                }
                nonce += 1;
                bridge.notify(proxy(proxy_message::Kind::Ping(proto::Ping { nonce })));
            }
        }
    }
}

/// How long an ended bridge keeps reading (and ignoring) the app's messages,
/// so the app can complete a closing handshake before the connection drops.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

async fn drain<S: Stream + Unpin>(mut inbound: S, grace: Duration) {
    let _ = tokio::time::timeout(grace, async { while inbound.next().await.is_some() {} }).await;
}

fn handle_app_message(session: &Session, bridge: &Bridge, message: proto::AppMessage) {
    match message.kind {
        Some(app_message::Kind::Result(result)) => {
            let request_id = result.request_id;
            let content = match parse_content(&result.content_json) {
                Ok(content) => content,
                Err(reason) => {
                    let problem = format!("content_json is not valid JSON: {reason}");
                    fail_malformed(session, bridge, request_id, true, problem);
                    return;
                }
            };
            let answer = Ok(ToolOutcome {
                ok: result.ok,
                content,
                error: result.error,
            });
            if !bridge.complete(&request_id, answer) {
                tracing::warn!(session_id = %session.id, %request_id, "result for no waiting call ignored");
                bridge.notify(notice(
                    format!(
                        "no call is waiting for request id {request_id:?}: it already timed out, was cancelled, or never existed; the result was ignored"
                    ),
                    request_id,
                ));
            }
        }
        Some(app_message::Kind::Progress(report)) => {
            let request_id = report.request_id.clone();
            if !bridge.progress(report) {
                tracing::debug!(session_id = %session.id, %request_id, "progress for no waiting call ignored");
                bridge.notify(notice(
                    format!("no call is waiting for request id {request_id:?}: progress ignored"),
                    request_id,
                ));
            }
        }
        Some(app_message::Kind::Pong(_)) => {}
        Some(app_message::Kind::Hello(_)) => bridge.notify(notice(
            format!(
                "this bridge is already attached to session {}; hello is only valid as the first message",
                session.id
            ),
            String::new(),
        )),
        None => bridge.notify(notice(
            "empty message: set one of hello, result, progress or pong".into(),
            String::new(),
        )),
    }
}

fn parse_content(json: &str) -> Result<Value, serde_json::Error> {
    if json.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(json)
}

/// Fails the call a malformed result or progress report names, and tells the
/// app what was wrong; the bridge stays up.
fn fail_malformed(
    session: &Session,
    bridge: &Bridge,
    request_id: String,
    result: bool,
    problem: String,
) {
    let what = if result { "result" } else { "progress report" };
    let failed = bridge.fail(&request_id, |tool| InvokeError::MalformedAnswer {
        tool: tool.to_owned(),
        what,
        problem: problem.clone(),
    });
    tracing::warn!(session_id = %session.id, %request_id, %problem, failed_call = failed, "malformed {what} from the app");
    let message = if failed {
        format!(
            "your {what} for request id {request_id:?} was malformed and the call failed: {problem}"
        )
    } else {
        format!(
            "your {what} for request id {request_id:?} was malformed, and no call is waiting for that id: {problem}"
        )
    };
    bridge.notify(notice(message, request_id));
}
