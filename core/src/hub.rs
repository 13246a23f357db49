//! The hub: sessions, the bridges attached to them, the idle sweep and tool
//! invocation. Every transport operates on one shared [`Hub`].
//!
//! What is known about a session lives in a [`SessionDirectory`] (memory on
//! a single node, a shared store in a cluster); what only this process has
//! (an attached bridge and the calls waiting on it) lives here, in the local
//! map. A call for a session whose bridge is elsewhere goes to the
//! [`RemoteDelivery`].
//!
//! Rules (DESIGN.md, "Behaviour where the seeds are silent"):
//! - A session expires after `session_ttl` without activity (creation, bridge
//!   attach, tool call, bridge traffic). A session with a bridge attached or a
//!   call in flight never expires. The sweep runs every `sweep_interval`.
//! - A new bridge replaces the old one, which ends with [`BridgeEnd::Replaced`];
//!   its calls in flight fail at once.
//! - Losing a bridge, deleting its session and shutting down fail the calls in
//!   flight at once; nothing waits for the tool timeout.
//! - A bridge never stays attached to a session that no longer exists, even
//!   when it attaches at the moment the session expires, is deleted, or the
//!   proxy shuts down.
//! - Request ids are `"{session_id}:{n}"`, `n` counting from 1 per session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use futures_util::Stream;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::audit::{self, Origin};
use crate::auth::{AuthError, Credential, RandomnessUnavailable, SessionTokens, Side};
use crate::bridge::{self, Bridge, BridgeStream, Inbound, ProgressSink, SessionChange, proxy};
use crate::config::CoreConfig;
use crate::delivery::{NoRemote, RemoteCall, RemoteDelivery};
use crate::directory::{DirectoryError, MemoryDirectory, SessionDirectory, SessionRecord};
use crate::limits::{CreateLimiter, LimitError};
use crate::metrics::{CallOutcome, Metrics, Transport};
use crate::outcome::{BridgeEnd, InvokeError, ToolOutcome};
use crate::proto::{self, proxy_message};
use crate::tools::{Tool, ToolError, ToolSetCache, validate_tools};
use crate::trace;

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error(
        "session {} does not exist: it was never created, it expired, or it was deleted",
        crate::escape::quoted(.0)
    )]
    UnknownSession(String),
    #[error("session_id is empty: name the session returned by CreateSession")]
    MissingSessionId,
    #[error(transparent)]
    InvalidTool(#[from] ToolError),
    #[error("the proxy is shutting down and accepts no new sessions or bridges")]
    ShuttingDown,
    #[error(transparent)]
    Unavailable(#[from] DirectoryError),
    #[error(transparent)]
    Unauthenticated(#[from] AuthError),
    #[error(transparent)]
    NoRandomness(#[from] RandomnessUnavailable),
    #[error(transparent)]
    Limit(#[from] LimitError),
}

/// What the proxy knows about a call besides its tool and arguments: it
/// reaches the app with the invocation.
#[derive(Debug, Default)]
pub struct CallContext {
    /// The MCP request's `params._meta`, as JSON text; empty when it had none.
    pub meta_json: String,
    /// Who is calling.
    pub client: proto::CallerInfo,
    /// Where the app's progress reports go, if the caller wants them.
    pub progress: Option<ProgressSink>,
    /// The caller's W3C `traceparent` (from the MCP request or the node that
    /// forwarded the call); empty when it sent none.
    pub trace_parent: String,
    /// Where the call came from, for the audit log.
    pub origin: Origin,
}

/// Where a hub keeps its sessions and finds bridges it does not hold.
pub struct Backend {
    /// The session directory.
    pub directory: Arc<dyn SessionDirectory>,
    /// Delivery to bridges held by other processes.
    pub remote: Arc<dyn RemoteDelivery>,
}

impl Backend {
    /// One node, everything in memory.
    pub fn single_node() -> Self {
        Self {
            directory: Arc::new(MemoryDirectory::default()),
            remote: Arc::new(NoRemote),
        }
    }
}

/// The proxy's core: every transport operates on one shared `Hub`.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    config: CoreConfig,
    directory: Arc<dyn SessionDirectory>,
    remote: Arc<dyn RemoteDelivery>,
    /// Sessions with a bridge attached here, or calls still draining from one.
    local: RwLock<HashMap<Arc<str>, Arc<Local>>>,
    tool_sets: ToolSetCache,
    shutdown: CancellationToken,
    /// Set when the server starts to shut down but still serves for a
    /// moment (`OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS`): not ready.
    draining: std::sync::atomic::AtomicBool,
    metrics: Arc<Metrics>,
    /// Session creations per client address; `None` without a limit.
    creations: Option<CreateLimiter>,
}

/// This process's share of a session.
#[derive(Default)]
struct Local {
    state: Mutex<LocalState>,
}

#[derive(Default)]
struct LocalState {
    bridge: Option<Arc<Bridge>>,
    calls_in_flight: u32,
}

impl Local {
    fn state(&self) -> MutexGuard<'_, LocalState> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Hub {
    /// A single-node hub with no sessions.
    pub fn new(config: CoreConfig) -> Self {
        Self::with_backend(config, Backend::single_node())
    }

    /// A hub over the given directory and remote delivery.
    pub fn with_backend(config: CoreConfig, backend: Backend) -> Self {
        let metrics = Arc::new(Metrics::new(backend.remote.connected().is_some()));
        Self {
            inner: Arc::new(Inner {
                directory: backend.directory,
                remote: backend.remote,
                local: RwLock::default(),
                tool_sets: ToolSetCache::default(),
                shutdown: CancellationToken::new(),
                draining: std::sync::atomic::AtomicBool::new(false),
                metrics,
                creations: config
                    .limits
                    .session_create_rate
                    .and_then(CreateLimiter::new),
                config,
            }),
        }
    }

    /// The metrics of this hub and the transports in front of it.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The metrics in the Prometheus (OpenMetrics) text format.
    pub fn render_metrics(&self) -> String {
        self.inner
            .metrics
            .render(self.session_count(), self.inner.remote.connected())
    }

    /// The settings the hub runs with.
    pub fn config(&self) -> &CoreConfig {
        &self.inner.config
    }

    /// Registers a session with validated tools, for `client` (the address
    /// the creation rate is counted against; `None` when unknown).
    pub async fn create_session(
        &self,
        request: proto::CreateSessionRequest,
        client: Option<std::net::IpAddr>,
    ) -> Result<proto::CreateSessionResponse, HubError> {
        self.create_session_from(request, Origin::default(), client)
            .await
    }

    /// [`Hub::create_session`] for a request from `origin` (audit log);
    /// `client` is the address its creation rate is counted against.
    pub async fn create_session_from(
        &self,
        request: proto::CreateSessionRequest,
        origin: Origin,
        client: Option<std::net::IpAddr>,
    ) -> Result<proto::CreateSessionResponse, HubError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        let limits = &self.inner.config.limits;
        if let (Some(creations), Some(client)) = (&self.inner.creations, client) {
            creations.check(client)?;
        }
        if limits.max_sessions > 0 && self.inner.directory.len() >= limits.max_sessions {
            return Err(LimitError::TooManySessions {
                limit: limits.max_sessions,
            }
            .into());
        }
        limits.check_tools(&request.tools)?;
        let tools = validate_tools(request.tools)?;
        let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let tokens = SessionTokens::mint()?;
        let record = SessionRecord::new(
            id.clone(),
            request.metadata.unwrap_or_default(),
            self.inner.tool_sets.intern(tools),
            tokens.credentials(),
        );
        self.inner.directory.create(Arc::new(record)).await?;
        audit::event("session_created", &id, origin);
        Ok(proto::CreateSessionResponse {
            session_id: id.to_string(),
            session_token: tokens.session_token,
            mcp_token: tokens.mcp_token,
        })
    }

    /// Whether `credential` may create sessions: only the app token can.
    pub fn authorize_create(&self, credential: Credential<'_>) -> Result<(), AuthError> {
        let token = &self.inner.config.app_token;
        if credential.side == Side::App && credential.opens(token) {
            Ok(())
        } else if credential.bearer.is_none() {
            Err(AuthError::NoAppToken)
        } else {
            Err(AuthError::AppToken)
        }
    }

    /// Whether `credential` may be checked against a session at all, from the
    /// headers alone: the global token of its side where that still opens
    /// sessions, or a token shaped like one of that side's session tokens.
    /// Transports call this before reading a body or decoding a message that
    /// names the session; [`Hub::authorize`] decides once the id is known.
    pub fn precheck(&self, credential: Credential<'_>) -> Result<(), AuthError> {
        if self.global_opens_sessions(credential) || credential.looks_like_session_token() {
            Ok(())
        } else {
            Err(self.refusal(credential.side))
        }
    }

    /// The one decision about who may touch a session: its own token for
    /// that side (`session_token` for the app, `mcp_token` for MCP), or, unless
    /// `require_session_tokens` is set, the side's global token (an empty
    /// global token opening everything, as in the original proxy). A
    /// session's token never opens another session. An unknown session is
    /// [`HubError::UnknownSession`] for a credential that could have opened it,
    /// so an app with a stale session can tell that it must register again.
    pub async fn authorize(
        &self,
        session_id: &str,
        credential: Credential<'_>,
    ) -> Result<(), HubError> {
        if self.global_opens_sessions(credential) {
            return Ok(());
        }
        self.precheck(credential)?;
        let record = self.record(session_id).await?;
        match credential.bearer {
            Some(bearer) if record.credentials.accepts(credential.side, bearer) => Ok(()),
            _ => Err(self.refusal(credential.side).into()),
        }
    }

    /// Whether the global token of the credential's side opens sessions and
    /// was presented (or is empty).
    fn global_opens_sessions(&self, credential: Credential<'_>) -> bool {
        let config = &self.inner.config;
        if config.require_session_tokens {
            return false;
        }
        let token = match credential.side {
            Side::App => &config.app_token,
            Side::Mcp => &config.openclaw_token,
        };
        credential.opens(token)
    }

    fn refusal(&self, side: Side) -> AuthError {
        let global_allowed = !self.inner.config.require_session_tokens;
        match side {
            Side::App => AuthError::SessionToken { global_allowed },
            Side::Mcp => AuthError::McpToken { global_allowed },
        }
    }

    /// Removes a session, ending its bridge and failing its calls. Idempotent.
    pub async fn delete_session(
        &self,
        request: proto::DeleteSessionRequest,
    ) -> Result<proto::DeleteSessionResponse, HubError> {
        self.delete_session_from(request, Origin::default()).await
    }

    /// [`Hub::delete_session`] for a request from `origin` (audit log).
    pub async fn delete_session_from(
        &self,
        request: proto::DeleteSessionRequest,
        origin: Origin,
    ) -> Result<proto::DeleteSessionResponse, HubError> {
        let existed = self.inner.directory.remove(&request.session_id).await?;
        self.end_local_bridge(&request.session_id, BridgeEnd::SessionDeleted);
        if existed {
            audit::event("session_deleted", &request.session_id, origin);
        }
        Ok(proto::DeleteSessionResponse { existed })
    }

    /// Describes a live session. `calls_in_flight` counts the calls on
    /// bridges attached to this process.
    pub async fn get_session(
        &self,
        request: proto::GetSessionRequest,
    ) -> Result<proto::GetSessionResponse, HubError> {
        let record = self.record(&request.session_id).await?;
        let (bridge_connected, calls_in_flight) = match self.inner.local(&record.id) {
            Some(local) => {
                let state = local.state();
                (state.bridge.is_some(), state.calls_in_flight)
            }
            None => (false, 0),
        };
        Ok(proto::GetSessionResponse {
            session_id: record.id.to_string(),
            metadata: Some(record.metadata.clone()),
            tools: record.tools().iter().map(Tool::to_proto).collect(),
            bridge_connected,
            calls_in_flight,
            ..proto::GetSessionResponse::default()
        })
    }

    /// The tools of a live session, for MCP `tools/list`.
    pub async fn tools(&self, session_id: &str) -> Result<Arc<[Tool]>, HubError> {
        Ok(self.record(session_id).await?.tools())
    }

    /// Whether a live session has this id.
    pub async fn session_exists(&self, session_id: &str) -> Result<bool, HubError> {
        match self.record(session_id).await {
            Ok(_) => Ok(true),
            Err(HubError::UnknownSession(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Replaces a session's tools, validated as at creation.
    pub async fn update_tools(
        &self,
        session_id: &str,
        definitions: Vec<proto::ToolDefinition>,
    ) -> Result<proto::UpdateToolsResponse, HubError> {
        self.inner.config.limits.check_tools(&definitions)?;
        let tools = validate_tools(definitions)?;
        let count = u32::try_from(tools.len()).unwrap_or(u32::MAX);
        let tools = self.inner.tool_sets.intern(tools);
        if !self.inner.directory.update_tools(session_id, tools).await? {
            return Err(HubError::UnknownSession(session_id.to_owned()));
        }
        tracing::info!(session = short(session_id), tools = count, "tools updated");
        Ok(proto::UpdateToolsResponse {
            tools: count,
            ..proto::UpdateToolsResponse::default()
        })
    }

    /// Number of live sessions this process knows of.
    pub fn session_count(&self) -> usize {
        self.inner.directory.len()
    }

    async fn record(&self, session_id: &str) -> Result<Arc<SessionRecord>, HubError> {
        if let Some(record) = self.inner.directory.cached(session_id) {
            return Ok(record);
        }
        self.inner
            .directory
            .get(session_id)
            .await?
            .ok_or_else(|| HubError::UnknownSession(session_id.to_owned()))
    }

    /// The session a call is for, or the call's error.
    async fn record_for_call(&self, session_id: &str) -> Result<Arc<SessionRecord>, InvokeError> {
        match self.record(session_id).await {
            Ok(record) => Ok(record),
            Err(HubError::Unavailable(error)) => Err(InvokeError::Unavailable(error.0)),
            Err(_) => Err(InvokeError::UnknownSession(session_id.to_owned())),
        }
    }

    /// Attaches a bridge to a session, replacing any bridge it had.
    ///
    /// `inbound` carries the app's messages after its `hello`; the returned
    /// stream carries the proxy's messages, starting with `attached`, and ends
    /// with the reason the bridge ended.
    pub async fn attach<S>(&self, hello: proto::Hello, inbound: S) -> Result<BridgeStream, HubError>
    where
        S: Stream<Item = Inbound> + Send + 'static,
    {
        self.attach_from(hello, inbound, Origin::default()).await
    }

    /// [`Hub::attach`] for a bridge from `origin`: its transport labels the
    /// bridge in metrics and audit events.
    pub async fn attach_from<S>(
        &self,
        hello: proto::Hello,
        inbound: S,
        origin: Origin,
    ) -> Result<BridgeStream, HubError>
    where
        S: Stream<Item = Inbound> + Send + 'static,
    {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        if hello.session_id.is_empty() {
            return Err(HubError::MissingSessionId);
        }
        let record = self.record(&hello.session_id).await?;
        let id = record.id.clone();
        let (bridge, receiver, mut tool_updates) =
            Bridge::new(id.clone(), origin, self.inner.metrics.clone());
        // First in the queue, before any invocation a call could queue once
        // the bridge is installed.
        bridge.notify(proxy(proxy_message::Kind::Attached(proto::Attached {
            session_id: id.to_string(),
        })));
        let replaced = self.inner.install(&id, &bridge);
        // From here until its driver runs, a failure or a dropped future
        // must not leave the bridge installed.
        let mut unattached = Unattached {
            hub: self,
            id: &id,
            bridge: &bridge,
            armed: true,
        };
        let was_replaced = replaced.is_some();
        if let Some(old) = replaced {
            old.end(BridgeEnd::Replaced);
        }
        // Installed first, checked second: a sweep, delete or shutdown that
        // ran in between either sees this bridge and ends it, or is seen here.
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        if self.inner.directory.get(&id).await?.is_none() {
            return Err(HubError::UnknownSession(hello.session_id));
        }
        self.inner.directory.touch(&id);
        // Before the app hears `attached`, calls from anywhere can find it.
        self.inner.remote.bridge_attached(&record).await;
        let event = if was_replaced {
            "bridge_replaced"
        } else {
            "bridge_attached"
        };
        audit::event(event, &id, origin);
        // Counted from here to the end of the driver's task, however it ends.
        let counted = BridgeCounted::new(&self.inner.metrics, origin.transport);
        let hub = self.clone();
        let driven = bridge.clone();
        let session = id.clone();
        tokio::spawn(async move {
            let _counted = counted;
            let mut inbound = std::pin::pin!(inbound);
            let config = &hub.inner.config;
            let end = {
                let drive = bridge::drive(
                    &driven,
                    inbound.as_mut(),
                    bridge::Liveness {
                        ping_interval: config.ping_interval,
                        missed_pings_allowed: config.missed_pings_allowed,
                        write_timeout: config.bridge_write_timeout,
                    },
                );
                tokio::pin!(drive);
                loop {
                    tokio::select! {
                        end = &mut drive => break end,
                        Some(change) = tool_updates.recv() => {
                            hub.apply_change(&session, &driven, change);
                        }
                    }
                }
            };
            hub.detach(&session, &driven, end);
            bridge::drain(inbound).await;
        });
        unattached.armed = false;
        drop(unattached);
        Ok(BridgeStream::new(receiver, bridge))
    }

    /// Sends a tool call to the session's app and waits for its answer.
    pub async fn invoke(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<ToolOutcome, InvokeError> {
        self.invoke_with(session_id, tool_name, arguments, CallContext::default())
            .await
    }

    /// Like [`Hub::invoke`], with the request's context for the app and,
    /// when `context.progress` is set, the app's progress reports for this
    /// call, every one queued before the answer is returned.
    ///
    /// A caller that stops waiting (drops the future) cancels the call: the
    /// app is told to stop working on it.
    pub async fn invoke_with(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments: &Map<String, Value>,
        context: CallContext,
    ) -> Result<ToolOutcome, InvokeError> {
        // Serializing a map of JSON values cannot fail; `{}` would only show a bug.
        let arguments_json = serde_json::to_string(arguments).unwrap_or_else(|_| "{}".into());
        self.invoke_json(session_id, tool_name, arguments_json, context)
            .await
    }

    /// Like [`Hub::invoke_with`], with the arguments as the JSON text of an
    /// object, passed to the app exactly as given (the caller checked that it
    /// is an object): no number is rewritten on the way.
    pub async fn invoke_json(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
    ) -> Result<ToolOutcome, InvokeError> {
        let span = trace::span(|| {
            tracing::info_span!(
                "invoke_tool",
                session = %audit::short_session(session_id),
                tool = %crate::escape::truncated(tool_name),
                outcome = tracing::field::Empty,
            )
        });
        // Counts the call and writes its audit event however it ends; a
        // caller that stops waiting drops it unfinished: `cancelled`.
        let mut counted = CallCounted {
            metrics: &self.inner.metrics,
            started: tokio::time::Instant::now(),
            session_id,
            tool: tool_name,
            client: context.origin.client,
            transport: context.origin.transport,
            finished: false,
        };
        let outcome = self
            .invoke_routed(session_id, tool_name, arguments_json, context, &mut counted)
            .instrument(span.clone())
            .await;
        let label = counted.finish(&outcome);
        span.record("outcome", label.as_str());
        outcome
    }

    async fn invoke_routed(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
        counted: &mut CallCounted<'_>,
    ) -> Result<ToolOutcome, InvokeError> {
        let record = self.record_for_call(session_id).await?;
        if !record.has_tool(tool_name) {
            return Err(InvokeError::UnknownTool {
                tool: tool_name.to_owned(),
                available: record.tool_names(),
            });
        }
        if self.inner.local_bridge(&record.id).is_none() {
            self.inner.directory.touch(&record.id);
            if self.inner.remote.connected().is_some() {
                counted.transport = Transport::Nats;
            }
            let call = RemoteCall {
                session_id: &record.id,
                tool: tool_name,
                arguments_json,
                context,
                timeout: self.tool_timeout(&record, tool_name),
            };
            let span = trace::span(|| {
                tracing::info_span!(
                    "bridge_round_trip",
                    otel.kind = "client",
                    session = short(&record.id),
                    tool = tool_name,
                    transport = Transport::Nats.as_str(),
                    outcome = tracing::field::Empty,
                )
            });
            let outcome = self
                .inner
                .remote
                .invoke(call)
                .instrument(span.clone())
                .await;
            span.record("outcome", CallOutcome::of(&outcome).as_str());
            return outcome;
        }
        if let Some((_, bridge)) = self.inner.local_bridge(&record.id) {
            counted.transport = bridge.origin().transport;
        }
        self.invoke_local(&record, tool_name, arguments_json, context)
            .await
    }

    /// Sends a call that arrived from another node to the bridge attached
    /// here; never forwards it again. `arguments_json` is a JSON object.
    pub async fn invoke_here(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
    ) -> Result<ToolOutcome, InvokeError> {
        let record = self.record_for_call(session_id).await?;
        self.invoke_local(&record, tool_name, arguments_json, context)
            .await
    }

    /// The limit of one call of `tool_name`: the tool's own, capped by the
    /// server's maximum, or the server's default.
    fn tool_timeout(&self, record: &SessionRecord, tool_name: &str) -> Duration {
        let config = &self.inner.config;
        match record.tool(tool_name).map(|tool| tool.timeout_seconds) {
            Some(seconds) if seconds > 0 => {
                Duration::from_secs(u64::from(seconds)).min(config.max_tool_timeout)
            }
            _ => config.tool_timeout,
        }
    }

    async fn invoke_local(
        &self,
        record: &SessionRecord,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
    ) -> Result<ToolOutcome, InvokeError> {
        let timeout = self.tool_timeout(record, tool_name);
        let Some((local, bridge)) = self.inner.local_bridge(&record.id) else {
            return Err(InvokeError::NotConnected);
        };
        if bridge.end_reason().is_some() {
            // Ended and about to be detached: for a call from another node,
            // the bridge is elsewhere now.
            return Err(InvokeError::NotConnected);
        }
        let request_id = record.next_request_id();
        let span = trace::span(|| {
            tracing::info_span!(
                "bridge_round_trip",
                otel.kind = "client",
                session = short(&record.id),
                tool = tool_name,
                transport = bridge.origin().transport.as_str(),
                outcome = tracing::field::Empty,
            )
        });
        // Boxed at once, as the bridge's queue carries it: the call's future
        // then holds a pointer, not the message, across its awaits.
        let message = Box::new(proxy(proxy_message::Kind::Invoke(proto::InvokeTool {
            session_id: record.id.to_string(),
            request_id: request_id.clone(),
            tool_name: tool_name.to_owned(),
            arguments_json,
            meta_json: context.meta_json,
            client: Some(context.client),
            trace_parent: trace::hand_on(&span, &context.trace_parent),
        })));
        // Too large for the bridge: this call fails, the bridge stays up.
        let limit = self.inner.config.max_message_bytes;
        let bytes = prost::Message::encoded_len(&*message);
        if limit > 0 && bytes > limit {
            return Err(InvokeError::TooLarge {
                tool: tool_name.to_owned(),
                bytes,
                limit,
            });
        }
        self.inner.directory.touch(&record.id);
        // From here on the guard undoes the bookkeeping however the call ends,
        // including when the caller stops waiting.
        let limit = self.inner.config.limits.max_calls_per_session;
        let mut call = CallInFlight::start(self, &record.id, &local, &bridge, &request_id, limit)?;
        let answer = bridge
            .register(&request_id, tool_name, context.progress)
            .map_err(InvokeError::BridgeEnded)?;
        let outcome = tokio::time::timeout(timeout, async {
            bridge
                .send(message)
                .await
                .map_err(InvokeError::BridgeEnded)?;
            answer
                .await
                .unwrap_or(Err(InvokeError::BridgeEnded(BridgeEnd::Disconnected)))
        })
        .instrument(span.clone())
        .await
        .unwrap_or(Err(InvokeError::Timeout(timeout)));
        span.record("outcome", CallOutcome::of(&outcome).as_str());
        call.cancel_reason = match &outcome {
            Err(InvokeError::Timeout(limit)) => {
                Some(format!("the call timed out after {} seconds", limit.as_secs_f64()).into())
            }
            _ => None,
        };
        if let Err(InvokeError::Timeout(_)) = &outcome {
            tracing::warn!(
                session = short(&record.id),
                request = crate::escape::short_request(&request_id),
                tool = tool_name,
                "tool call timed out"
            );
        }
        drop(call);
        outcome
    }

    /// Removes sessions idle for longer than the TTL that have neither a
    /// bridge nor a call in flight here; sessions this process is using are
    /// kept alive in the directory. Returns how many were removed.
    pub async fn sweep_expired(&self) -> usize {
        let busy: Vec<Arc<str>> = self.inner.local_ids();
        for id in &busy {
            self.inner.directory.touch(id);
        }
        let mut removed = 0;
        for id in self.inner.directory.expired(self.inner.config.session_ttl) {
            if self.inner.local(&id).is_some() {
                continue;
            }
            match self.inner.directory.remove(&id).await {
                Ok(true) => {
                    removed += 1;
                    // A bridge that attached since the check above must not
                    // outlive its session.
                    self.end_local_bridge(&id, BridgeEnd::SessionDeleted);
                    audit::event("session_expired", &id, Origin::default());
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "the idle sweep cannot remove sessions"),
            }
        }
        removed
    }

    /// Runs the idle sweep every `sweep_interval` until shutdown.
    pub async fn run_sweeper(self) {
        let period = self.inner.config.sweep_interval;
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.inner.shutdown.cancelled() => return,
                _ = ticker.tick() => {
                    self.sweep_expired().await;
                    if let Some(creations) = &self.inner.creations {
                        creations.forget_idle();
                    }
                }
            }
        }
    }

    /// Ends the bridge attached here to `session_id`, if any, failing its
    /// calls. For a session deleted or taken over elsewhere.
    pub fn end_local_bridge(&self, session_id: &str, reason: BridgeEnd) {
        // Ended, not removed: the task driving the bridge detaches it.
        if let Some((_, bridge)) = self.inner.local_bridge(session_id) {
            bridge.end(reason);
        }
    }

    /// Ends every bridge with [`BridgeEnd::ShuttingDown`], failing their calls,
    /// and refuses new sessions and bridges from now on.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
        for id in self.inner.local_ids() {
            self.end_local_bridge(&id, BridgeEnd::ShuttingDown);
        }
    }

    /// Whether [`Hub::shutdown`] was called.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    /// Reports not ready from now on while everything is still served, so
    /// load balancers stop sending new work before [`Hub::shutdown`].
    pub fn begin_drain(&self) {
        self.inner
            .draining
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the hub can serve: not shutting down, and (in a cluster) its
    /// backend reachable. The error says what is missing.
    pub fn readiness(&self) -> Result<(), String> {
        if self.is_shutting_down()
            || self
                .inner
                .draining
                .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Err("the proxy is shutting down".into());
        }
        self.inner.remote.ready()
    }

    /// A handle that does not keep the hub alive, for the backend's tasks.
    pub fn downgrade(&self) -> WeakHub {
        WeakHub(Arc::downgrade(&self.inner))
    }

    /// Forgets an ended bridge if it is still the session's current one, and
    /// the session's local state once nothing uses it.
    fn detach(&self, session_id: &Arc<str>, bridge: &Arc<Bridge>, end: BridgeEnd) {
        let Some(local) = self.inner.local(session_id) else {
            return;
        };
        let current = {
            let mut state = local.state();
            let current = state
                .bridge
                .as_ref()
                .is_some_and(|attached| Arc::ptr_eq(attached, bridge));
            if current {
                state.bridge = None;
            }
            current
        };
        if current {
            self.inner.remote.bridge_detached(session_id);
            audit::bridge_ended(session_id, bridge.origin(), end.reason_for_app());
        }
        self.inner.directory.touch(session_id);
        self.inner.forget_if_unused(session_id);
    }
}

impl Inner {
    fn local_map(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Arc<str>, Arc<Local>>> {
        self.local.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn local_map_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<Arc<str>, Arc<Local>>> {
        self.local.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn local(&self, id: &str) -> Option<Arc<Local>> {
        self.local_map().get(id).cloned()
    }

    /// Makes `bridge` the session's bridge here; returns the one it replaces.
    /// Done under the map's lock, so that `forget_if_unused` cannot remove
    /// the entry between its lookup and the installation.
    fn install(&self, id: &Arc<str>, bridge: &Arc<Bridge>) -> Option<Arc<Bridge>> {
        let mut map = self.local_map_mut();
        let local = map.entry(id.clone()).or_default();
        let mut state = local.state();
        state.bridge.replace(bridge.clone())
    }

    /// The session's bridge here, if one is attached.
    fn local_bridge(&self, id: &str) -> Option<(Arc<Local>, Arc<Bridge>)> {
        let local = self.local(id)?;
        let bridge = local.state().bridge.clone()?;
        Some((local, bridge))
    }

    fn local_ids(&self) -> Vec<Arc<str>> {
        let map = self.local_map();
        let mut ids = Vec::with_capacity(map.len());
        ids.extend(map.keys().cloned());
        ids
    }

    /// Drops the session's local state when it has no bridge and no call.
    fn forget_if_unused(&self, id: &str) {
        let mut map = self.local_map_mut();
        let unused = map.get(id).is_some_and(|local| {
            let state = local.state();
            state.bridge.is_none() && state.calls_in_flight == 0
        });
        if unused {
            map.remove(id);
        }
    }
}

/// Ends and detaches a bridge whose attach did not complete (an error, or
/// the caller dropped the future), unless disarmed once its driver runs.
struct Unattached<'a> {
    hub: &'a Hub,
    id: &'a Arc<str>,
    bridge: &'a Arc<Bridge>,
    armed: bool,
}

impl Drop for Unattached<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.bridge.end(BridgeEnd::SessionDeleted);
            self.hub
                .detach(self.id, self.bridge, BridgeEnd::SessionDeleted);
        }
    }
}

impl Hub {
    /// Applies a change the app announced on its bridge: declarations
    /// beside the bridge (which keeps reading results and answering pings
    /// meanwhile), answered on it.
    fn apply_change(&self, session: &Arc<str>, bridge: &Arc<Bridge>, change: SessionChange) {
        match change {
            SessionChange::Declarations(update) => {
                let (hub, bridge, id) = (self.clone(), bridge.clone(), session.clone());
                tokio::spawn(async move {
                    let answer = hub.update_tools(&id, update.tools).await;
                    bridge.notify(tools_updated(answer));
                });
            }
            SessionChange::ResourceUpdated(uri) => {
                tracing::debug!(session = short(session), uri = %crate::escape::truncated(&uri), "resource updated");
            }
        }
    }
}

/// The answer on the bridge to a tool update it carried.
fn tools_updated(answer: Result<proto::UpdateToolsResponse, HubError>) -> proto::ProxyMessage {
    match answer {
        Ok(updated) => proxy(proxy_message::Kind::ToolsUpdated(proto::ToolsUpdated {
            tools: updated.tools,
            ..proto::ToolsUpdated::default()
        })),
        Err(error) => proxy(proxy_message::Kind::Error(proto::ErrorNotice {
            message: format!("the tool update was refused: {error}"),
            request_id: String::new(),
        })),
    }
}

/// Counts one tool call in the metrics and writes its audit event when
/// dropped: with its outcome once [`CallCounted::finish`] saw it, else as
/// cancelled (the caller stopped waiting).
struct CallCounted<'a> {
    metrics: &'a Metrics,
    started: tokio::time::Instant,
    session_id: &'a str,
    tool: &'a str,
    client: Option<std::net::SocketAddr>,
    /// How the call reached the app; the caller's transport until then.
    transport: Transport,
    finished: bool,
}

impl CallCounted<'_> {
    fn finish(&mut self, outcome: &Result<ToolOutcome, InvokeError>) -> CallOutcome {
        self.finished = true;
        let label = CallOutcome::of(outcome);
        self.record(label);
        label
    }

    fn record(&self, outcome: CallOutcome) {
        let duration = self.started.elapsed();
        self.metrics.tool_call(outcome, duration);
        audit::tool_call(
            self.session_id,
            self.tool,
            outcome,
            duration,
            self.client,
            self.transport,
        );
    }
}

impl Drop for CallCounted<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.record(CallOutcome::Cancelled);
        }
    }
}

/// One attached bridge in the `bridges` gauge, from its driver's start to
/// the end of its task.
struct BridgeCounted {
    metrics: Arc<Metrics>,
    transport: Transport,
}

impl BridgeCounted {
    fn new(metrics: &Arc<Metrics>, transport: Transport) -> Self {
        metrics.bridge(transport, 1);
        Self {
            metrics: metrics.clone(),
            transport,
        }
    }
}

impl Drop for BridgeCounted {
    fn drop(&mut self) {
        self.metrics.bridge(self.transport, -1);
    }
}

/// A [`Hub`] that may be gone (see [`Hub::downgrade`]).
#[derive(Clone)]
pub struct WeakHub(std::sync::Weak<Inner>);

impl WeakHub {
    /// The hub, if it still exists.
    pub fn upgrade(&self) -> Option<Hub> {
        self.0.upgrade().map(|inner| Hub { inner })
    }
}

/// Undoes a call's bookkeeping when the call ends, however it ends; a call
/// whose caller stopped waiting, or that timed out, is cancelled in the app.
struct CallInFlight<'a> {
    hub: &'a Hub,
    session_id: &'a str,
    local: &'a Local,
    bridge: &'a Bridge,
    request_id: &'a str,
    /// Why the app should stop working on the call when it ends; `None`
    /// once it was answered (or failed in a way the app knows of).
    cancel_reason: Option<std::borrow::Cow<'static, str>>,
}

impl<'a> CallInFlight<'a> {
    fn start(
        hub: &'a Hub,
        session_id: &'a str,
        local: &'a Local,
        bridge: &'a Bridge,
        request_id: &'a str,
        limit: u32,
    ) -> Result<Self, InvokeError> {
        {
            let mut state = local.state();
            if limit > 0 && state.calls_in_flight >= limit {
                return Err(InvokeError::TooManyCalls { limit });
            }
            state.calls_in_flight += 1;
        }
        Ok(Self {
            hub,
            session_id,
            local,
            bridge,
            request_id,
            cancel_reason: Some("the MCP client cancelled the call or went away".into()),
        })
    }
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        match self.cancel_reason.take() {
            Some(reason) => self.bridge.cancel(self.request_id, &reason),
            None => self.bridge.forget(self.request_id),
        }
        let idle = {
            let mut state = self.local.state();
            state.calls_in_flight = state.calls_in_flight.saturating_sub(1);
            state.bridge.is_none() && state.calls_in_flight == 0
        };
        self.hub.inner.directory.touch(self.session_id);
        if idle {
            self.hub.inner.forget_if_unused(self.session_id);
        }
    }
}

/// The short form of a session id used in log lines at INFO and above.
pub use crate::escape::short_id as short;

#[cfg(test)]
mod tests {
    //! The hub's rules, with tokio's clock paused: time moves only when the
    //! test advances it, so expiry and timeouts are exact and instant.

    use std::time::Duration;

    use futures_util::StreamExt;
    use serde_json::json;
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::*;
    use crate::proto::app_message;

    const TTL: Duration = Duration::from_secs(60);

    fn config() -> CoreConfig {
        CoreConfig {
            session_ttl: TTL,
            sweep_interval: Duration::from_secs(1),
            tool_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(3600),
            bridge_write_timeout: Duration::from_secs(3600),
            ..CoreConfig::default()
        }
    }

    fn hub() -> Hub {
        Hub::new(config())
    }

    #[tokio::test]
    async fn a_calls_future_stays_small() {
        // Every path's call embeds this future, and futures are moved (a
        // streaming call's is boxed): each kilobyte here is copied per call.
        // It was 2.4 KB while the invocation went by value through it.
        let hub = hub();
        let call = hub.invoke_json("s", "t", String::new(), CallContext::default());
        let size = std::mem::size_of_val(&call);
        assert!(size <= 2048, "Hub::invoke_json's future is {size} bytes");
    }

    async fn session(hub: &Hub) -> String {
        let request = proto::CreateSessionRequest {
            metadata: None,
            tools: vec![proto::ToolDefinition {
                name: "echo".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        hub.create_session(request, None)
            .await
            .expect("create")
            .session_id
    }

    /// The app's end of a bridge attached in-process.
    struct App {
        to_hub: mpsc::Sender<Inbound>,
        from_hub: BridgeStream,
    }

    impl App {
        async fn attach(hub: &Hub, session_id: &str) -> Self {
            let (to_hub, inbound) = mpsc::channel(16);
            let hello = proto::Hello {
                session_id: session_id.to_owned(),
            };
            let from_hub = hub
                .attach(hello, ReceiverStream::new(inbound))
                .await
                .expect("attach");
            Self { to_hub, from_hub }
        }

        /// The next message that is not `attached` or a ping; `Err` with the
        /// end reason when the bridge ended instead.
        async fn next(&mut self) -> Result<proxy_message::Kind, BridgeEnd> {
            loop {
                match self.from_hub.next().await {
                    Some(Ok(message)) => match message.kind {
                        Some(proxy_message::Kind::Attached(_) | proxy_message::Kind::Ping(_))
                        | None => {}
                        Some(kind) => return Ok(kind),
                    },
                    Some(Err(end)) => return Err(end),
                    None => return Err(BridgeEnd::Disconnected),
                }
            }
        }

        async fn next_invoke(&mut self) -> proto::InvokeTool {
            match self.next().await {
                Ok(proxy_message::Kind::Invoke(invoke)) => invoke,
                other => panic!("expected an invocation, got {other:?}"),
            }
        }

        async fn answer(&self, request_id: &str, content: serde_json::Value) {
            let result = proto::ToolResult {
                request_id: request_id.to_owned(),
                ok: true,
                content_json: content.to_string(),
                error: String::new(),
            };
            let message = proto::AppMessage {
                kind: Some(app_message::Kind::Result(result)),
            };
            self.to_hub
                .send(Inbound::Message(message))
                .await
                .expect("bridge reads");
        }
    }

    fn spawn_call(
        hub: &Hub,
        session_id: &str,
    ) -> tokio::task::JoinHandle<Result<ToolOutcome, InvokeError>> {
        let (hub, session_id) = (hub.clone(), session_id.to_owned());
        tokio::spawn(async move { hub.invoke(&session_id, "echo", &Map::new()).await })
    }

    /// Lets the bridge's task run until it has detached the bridge.
    async fn detached(hub: &Hub, session_id: &str) {
        for _ in 0..100 {
            if hub.inner.local(session_id).is_none() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the ended bridge was never detached");
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_bridge_replaces_the_old_one_and_fails_its_calls_at_once() {
        let hub = hub();
        let id = session(&hub).await;
        let mut old = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        let invoke = old.next_invoke().await;
        assert_eq!(invoke.request_id, format!("{id}:1"));

        let mut new = App::attach(&hub, &id).await;
        assert_eq!(old.next().await.err(), Some(BridgeEnd::Replaced));
        let error = call.await.expect("join").expect_err("cut off");
        assert!(
            matches!(error, InvokeError::BridgeEnded(BridgeEnd::Replaced)),
            "{error}"
        );

        // The new bridge serves the next call, with the next request id.
        let call = spawn_call(&hub, &id);
        let invoke = new.next_invoke().await;
        assert_eq!(invoke.request_id, format!("{id}:2"));
        new.answer(&invoke.request_id, json!("fresh")).await;
        let outcome = call.await.expect("join").expect("answered");
        assert_eq!(outcome.content_value(), json!("fresh"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timed_out_call_is_cancelled_and_its_late_result_ignored() {
        let hub = hub();
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        tokio::time::advance(hub.config().tool_timeout).await;
        let error = call.await.expect("join").expect_err("timed out");
        assert!(matches!(error, InvokeError::Timeout(_)), "{error}");
        match app.next().await {
            Ok(proxy_message::Kind::Cancel(cancel)) => {
                assert_eq!(cancel.request_id, invoke.request_id);
            }
            other => panic!("expected a cancel, got {other:?}"),
        }

        // The late result is dropped quietly; a result nobody asked for is
        // answered with a notice.
        app.answer(&invoke.request_id, json!("too late")).await;
        app.answer("made-up:1", json!("never asked")).await;
        match app.next().await {
            Ok(proxy_message::Kind::Error(notice)) => {
                assert_eq!(notice.request_id, "made-up:1");
                assert!(
                    notice.message.contains("no call is waiting"),
                    "{}",
                    notice.message
                );
            }
            other => panic!("expected a notice, got {other:?}"),
        }
        // The bridge is still up.
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.answer(&invoke.request_id, json!(1)).await;
        assert_eq!(
            call.await.expect("join").expect("answered").content_value(),
            json!(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_app_that_stops_reading_is_dropped_and_its_calls_fail_at_once() {
        let hub = Hub::new(CoreConfig {
            bridge_write_timeout: Duration::from_secs(5),
            tool_timeout: Duration::from_secs(600),
            ..config()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        app.next_invoke().await;
        // A reading app is never dropped, however long its call runs.
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(hub.inner.local_bridge(&id).is_some(), "a reading app stays");
        // Now it stops reading while the proxy has something for it.
        let unread = spawn_call(&hub, &id);
        tokio::time::advance(Duration::from_secs(7)).await;
        for call in [call, unread] {
            let error = call.await.expect("join").expect_err("dropped");
            assert!(
                matches!(error, InvokeError::BridgeEnded(BridgeEnd::Stalled)),
                "{error}"
            );
        }
        assert_eq!(app.next().await.err(), Some(BridgeEnd::Stalled));
    }

    #[tokio::test(start_paused = true)]
    async fn calls_past_the_session_limit_are_refused_and_the_rest_go_on() {
        let mut limited = config();
        limited.limits.max_calls_per_session = 2;
        let hub = Hub::new(limited);
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let (first, second) = (spawn_call(&hub, &id), spawn_call(&hub, &id));
        let (one, _two) = (app.next_invoke().await, app.next_invoke().await);
        let error = hub
            .invoke(&id, "echo", &Map::new())
            .await
            .expect_err("third");
        assert!(
            matches!(error, InvokeError::TooManyCalls { limit: 2 }),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_CALLS_PER_SESSION"),
            "{error}"
        );
        // One finishes; the next call fits again.
        app.answer(&one.request_id, json!("one")).await;
        let _ = first.await.expect("join").expect("answered");
        let third = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.answer(&invoke.request_id, json!(3)).await;
        assert_eq!(
            third
                .await
                .expect("join")
                .expect("answered")
                .content_value(),
            json!(3)
        );
        drop(second);
    }

    #[tokio::test(start_paused = true)]
    async fn an_invocation_too_large_for_the_bridge_fails_alone() {
        let hub = Hub::new(CoreConfig {
            max_message_bytes: 1024,
            ..config()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let mut big = Map::new();
        big.insert("text".into(), json!("x".repeat(2000)));
        let error = hub.invoke(&id, "echo", &big).await.expect_err("too large");
        assert!(
            matches!(error, InvokeError::TooLarge { limit: 1024, .. }),
            "{error}"
        );
        // The bridge stays up and serves the next call.
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.answer(&invoke.request_id, json!("small")).await;
        assert_eq!(
            call.await.expect("join").expect("answered").content_value(),
            json!("small")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_and_tools_past_their_limits_are_refused_naming_the_setting() {
        let mut limited = config();
        limited.limits.max_sessions = 1;
        limited.limits.max_tools_per_session = 1;
        let hub = Hub::new(limited);
        let id = session(&hub).await;
        let refused = hub
            .create_session(proto::CreateSessionRequest::default(), None)
            .await
            .expect_err("second session");
        assert!(
            matches!(
                refused,
                HubError::Limit(LimitError::TooManySessions { limit: 1 })
            ),
            "{refused}"
        );
        let two = ["a", "b"].map(|name| proto::ToolDefinition {
            name: name.into(),
            ..Default::default()
        });
        let refused = hub
            .update_tools(&id, two.to_vec())
            .await
            .expect_err("two tools");
        assert!(
            refused
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION"),
            "{refused}"
        );
        // Deleting makes room again.
        let deleted = hub
            .delete_session(proto::DeleteSessionRequest { session_id: id })
            .await
            .expect("delete");
        assert!(deleted.existed);
        session(&hub).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweep_removes_idle_sessions_only() {
        let hub = hub();
        let idle = session(&hub).await;
        let bridged = session(&hub).await;
        let _app = App::attach(&hub, &bridged).await;

        tokio::time::advance(TTL - Duration::from_secs(1)).await;
        assert_eq!(hub.sweep_expired().await, 0, "not idle long enough yet");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(hub.sweep_expired().await, 1);
        assert!(!hub.session_exists(&idle).await.expect("lookup"));
        assert!(hub.session_exists(&bridged).await.expect("lookup"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_in_flight_keeps_its_session_after_the_bridge_is_gone() {
        let hub = Hub::new(CoreConfig {
            session_ttl: TTL,
            tool_timeout: TTL * 3,
            ping_interval: Duration::from_secs(3600),
            ..CoreConfig::default()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;

        // Long past the TTL, the call still runs: the session stays.
        tokio::time::advance(TTL * 2).await;
        assert_eq!(hub.sweep_expired().await, 0);
        app.answer(&invoke.request_id, json!("done")).await;
        assert_eq!(
            call.await.expect("join").expect("answered").content_value(),
            json!("done")
        );

        // Once the bridge is gone and the TTL has passed since, it expires.
        drop(app);
        detached(&hub, &id).await;
        tokio::time::advance(TTL).await;
        assert_eq!(hub.sweep_expired().await, 1);
    }

    /// A directory in which the session disappears between attach's lookup
    /// and its check: the interleaving of an attach with a concurrent expiry
    /// or delete, forced.
    #[derive(Default)]
    struct VanishingDirectory(MemoryDirectory);

    impl SessionDirectory for VanishingDirectory {
        fn create(
            &self,
            record: Arc<SessionRecord>,
        ) -> futures_util::future::BoxFuture<'_, Result<(), DirectoryError>> {
            self.0.create(record)
        }
        fn cached(&self, id: &str) -> Option<Arc<SessionRecord>> {
            self.0.cached(id)
        }
        fn get<'a>(
            &'a self,
            id: &'a str,
        ) -> futures_util::future::BoxFuture<'a, Result<Option<Arc<SessionRecord>>, DirectoryError>>
        {
            Box::pin(async move {
                self.0.remove(id).await?;
                Ok(None)
            })
        }
        fn touch(&self, id: &str) {
            self.0.touch(id);
        }
        fn remove<'a>(
            &'a self,
            id: &'a str,
        ) -> futures_util::future::BoxFuture<'a, Result<bool, DirectoryError>> {
            self.0.remove(id)
        }
        fn update_tools<'a>(
            &'a self,
            id: &'a str,
            tools: Arc<[Tool]>,
        ) -> futures_util::future::BoxFuture<'a, Result<bool, DirectoryError>> {
            self.0.update_tools(id, tools)
        }
        fn expired(&self, ttl: Duration) -> Vec<Arc<str>> {
            self.0.expired(ttl)
        }
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_bridge_cannot_stay_on_a_session_removed_while_it_attaches() {
        let hub = Hub::with_backend(
            CoreConfig::default(),
            Backend {
                directory: Arc::new(VanishingDirectory::default()),
                remote: Arc::new(NoRemote),
            },
        );
        let id = session(&hub).await;
        let hello = proto::Hello {
            session_id: id.clone(),
        };
        let (_to_hub, inbound) = mpsc::channel(1);
        let refused = hub.attach(hello, ReceiverStream::new(inbound)).await;
        assert!(matches!(refused, Err(HubError::UnknownSession(_))));
        assert!(hub.inner.local(&id).is_none(), "no bridge is left behind");
    }

    #[tokio::test(start_paused = true)]
    async fn a_bridge_cannot_attach_during_shutdown() {
        let hub = hub();
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        hub.shutdown();
        assert_eq!(app.next().await.err(), Some(BridgeEnd::ShuttingDown));
        let hello = proto::Hello { session_id: id };
        let (_to_hub, inbound) = mpsc::channel(1);
        let refused = hub.attach(hello, ReceiverStream::new(inbound)).await;
        assert!(matches!(refused, Err(HubError::ShuttingDown)));
    }
}
