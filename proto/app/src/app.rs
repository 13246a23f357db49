//! The app's life: build it, `serve()` it, `shutdown()` it; in between, the
//! serve loop keeps one bridge attached whatever the network does, and the
//! app may change its declarations or announce a changed resource.
//!
//! The loop's states are few on purpose. Attached: read the proxy's messages,
//! answer pings, start calls. Bridge lost: cancel the calls it delivered (the
//! proxy has already failed them), wait a backoff delay, attach again with the
//! same session id (the proxy hands the session over: takeover). Session gone
//! (`NOT_FOUND`: the proxy restarted or the session expired): create a new one
//! and tell the app through the callback. Refused (bad token, taken over by
//! another instance): stop and report why, since retrying cannot help.
//!
//! Declarations changed while serving go to the proxy on the bridge, and
//! again on every later attach to the same session, so that a change made
//! while the bridge was down, or lost with it, still arrives; a re-created
//! session registers the current set from the start.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use openclaw_proxy_proto::v1::{
    AppMessage, CreateSessionRequest, InvokeTool, McpRequest, Pong, ResourceUpdated,
    SessionMetadata, ToolResult, app_message, proxy_message,
};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::{Code, Status};

use crate::call::{self, CallContext, CancelReason, InFlight, Scope};
use crate::completion::{self, CompletionHandler, CompletionOutput, CompletionRequest};
use crate::declarations::{Declarations, Lists, Update};
use crate::error::{AppError, is_permanent};
use crate::mcp::{self, McpError};
use crate::prompt::Prompt;
use crate::proxy::{Bridge, Proxy, ProxySettings, Session, SessionInfo};
use crate::resource::{Resource, ResourceTemplate};
use crate::tool::Tool;

/// How long [`Serving::update`] waits for the proxy's answer.
const UPDATE_TIMEOUT: Duration = Duration::from_secs(10);

type SessionCallback = dyn Fn(&SessionInfo) + Send + Sync;

/// Collects an app's settings and declarations; [`AppBuilder::build`]
/// checks them.
#[must_use]
pub struct AppBuilder {
    settings: ProxySettings,
    metadata: SessionMetadata,
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    resource_templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    completion: Option<Arc<CompletionHandler>>,
    max_concurrent_calls: usize,
    max_queued_calls: usize,
    on_session: Option<Arc<SessionCallback>>,
    min_delay: Duration,
    max_delay: Duration,
    idle_timeout: Duration,
}

impl AppBuilder {
    /// The app token (`OPENCLAW_PROXY_APP_TOKEN` on the proxy); empty or
    /// unset means none.
    pub fn app_token(mut self, token: impl Into<String>) -> Self {
        self.settings.app_token = Some(token.into());
        self
    }

    /// A stable id of the device the app runs on (required by the proxy;
    /// defaults to `"unknown-device"`).
    pub fn device_id(mut self, device_id: impl Into<String>) -> Self {
        self.metadata.device_id = device_id.into();
        self
    }

    /// A human-readable device name.
    pub fn device_name(mut self, device_name: impl Into<String>) -> Self {
        self.metadata.device_name = device_name.into();
        self
    }

    /// The app's version (required by the proxy; defaults to `"unknown"`).
    pub fn app_version(mut self, app_version: impl Into<String>) -> Self {
        self.metadata.app_version = app_version.into();
        self
    }

    /// The chat this session belongs to.
    pub fn chat_id(mut self, chat_id: impl Into<String>) -> Self {
        self.metadata.chat_id = chat_id.into();
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a resource: a document at a fixed URI.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }

    /// Adds a resource template: documents addressed by a URI template.
    /// A URI that no resource has exactly goes to the first template it
    /// fits, in the order they were added.
    pub fn resource_template(mut self, template: ResourceTemplate) -> Self {
        self.resource_templates.push(template);
        self
    }

    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self
    }

    /// Answers `completion/complete` (suggestions for a prompt's argument or
    /// a template's variable) with `handler`. It is only asked about
    /// declared prompts and templates and their own arguments. Without one,
    /// every question gets no suggestions.
    pub fn completion<R, F, Fut>(mut self, handler: F) -> Self
    where
        R: CompletionOutput,
        F: Fn(CompletionRequest, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, McpError>> + Send + 'static,
    {
        self.completion = Some(completion::boxed(handler));
        self
    }

    /// How many calls run at once (default 32), MCP requests such as
    /// `resources/read` included. Calls beyond that wait, up to as many
    /// again; past that they are answered at once with an error saying the
    /// app is busy.
    pub fn max_concurrent_calls(mut self, limit: usize) -> Self {
        self.max_concurrent_calls = limit.max(1);
        self.max_queued_calls = self.max_concurrent_calls;
        self
    }

    /// Called with the session's id, MCP URL and MCP token once the session
    /// is created and its bridge attached, and again whenever it is
    /// re-created (the proxy restarted or forgot it). Runs on the serve loop:
    /// keep it short (store, print, send).
    pub fn on_session(mut self, callback: impl Fn(&SessionInfo) + Send + Sync + 'static) -> Self {
        self.on_session = Some(Arc::new(callback));
        self
    }

    /// The reconnection delays: exponential from `min` to `max`, each with
    /// random jitter so that many apps do not return to a restarted proxy at
    /// the same instant (defaults 250 ms and 30 s).
    pub fn reconnect_delays(mut self, min: Duration, max: Duration) -> Self {
        self.min_delay = min;
        self.max_delay = max.max(min);
        self
    }

    /// How long the bridge may stay silent before the app presumes the
    /// connection dead and reconnects (default 70 s; the proxy pings every
    /// 20 s by default).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The base of the reported MCP URL, when OpenClaw reaches the proxy at
    /// another address than the app does (a reverse proxy); defaults to the
    /// proxy URL.
    pub fn mcp_base_url(mut self, url: impl Into<String>) -> Self {
        self.settings.mcp_base_url = Some(url.into());
        self
    }

    /// Trusts this PEM certificate authority for `https://` proxy URLs, in
    /// addition to the public web roots (a private CA, a self-signed proxy).
    pub fn tls_ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.settings.ca_certificate_pem = Some(pem.into());
        self
    }

    /// Checks the settings and declarations; nothing is dialled yet.
    pub fn build(self) -> Result<App, AppError> {
        let declarations = Declarations::new(
            self.tools,
            self.resources,
            self.resource_templates,
            self.prompts,
            self.completion,
        )?;
        let proxy = Proxy::new(self.settings)?;
        Ok(App {
            proxy,
            metadata: self.metadata,
            declarations,
            max_concurrent_calls: self.max_concurrent_calls,
            max_queued_calls: self.max_queued_calls,
            on_session: self.on_session,
            backoff: ExponentialBuilder::default()
                .with_min_delay(self.min_delay)
                .with_max_delay(self.max_delay)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times(),
            idle_timeout: self.idle_timeout,
        })
    }
}

/// An app ready to serve its tools (and resources and prompts) through a
/// proxy.
pub struct App {
    proxy: Proxy,
    metadata: SessionMetadata,
    declarations: Declarations,
    max_concurrent_calls: usize,
    max_queued_calls: usize,
    on_session: Option<Arc<SessionCallback>>,
    backoff: ExponentialBuilder,
    idle_timeout: Duration,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("tools", &self.declarations.tools())
            .finish_non_exhaustive()
    }
}

impl App {
    /// Starts describing an app that serves through the proxy at `proxy_url`
    /// (`http://host:port` or `https://host:port`, the proxy's one port).
    pub fn builder(proxy_url: impl Into<String>) -> AppBuilder {
        AppBuilder {
            settings: ProxySettings {
                url: proxy_url.into(),
                app_token: None,
                mcp_base_url: None,
                ca_certificate_pem: None,
            },
            metadata: SessionMetadata {
                device_id: "unknown-device".to_owned(),
                device_name: String::new(),
                app_version: "unknown".to_owned(),
                chat_id: String::new(),
            },
            tools: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
            prompts: Vec::new(),
            completion: None,
            max_concurrent_calls: 32,
            max_queued_calls: 32,
            on_session: None,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(70),
        }
    }

    /// Creates the session, attaches its bridge, and keeps serving in the
    /// background until [`Serving::shutdown`] (or until the handle is
    /// dropped). Returns once the tools are reachable; an error here means
    /// the first attempt failed (wrong URL or token, proxy down, a
    /// declaration the proxy refused). After that, every failure is retried.
    pub async fn serve(self) -> Result<Serving, AppError> {
        let shared = Arc::new(Shared {
            declarations: RwLock::new(Arc::new(self.declarations)),
            metadata: self.metadata,
            changed: AtomicBool::new(false),
            link: Mutex::new(Link::default()),
            updating: tokio::sync::Mutex::new(()),
            admitted: Arc::new(Semaphore::new(
                self.max_concurrent_calls + self.max_queued_calls,
            )),
            running: Arc::new(Semaphore::new(self.max_concurrent_calls)),
            max_concurrent_calls: self.max_concurrent_calls,
            in_flight: InFlight::default(),
            on_session: self.on_session,
            backoff: self.backoff,
            idle_timeout: self.idle_timeout,
            proxy: self.proxy,
        });
        let session = shared
            .proxy
            .create_session(shared.create_request())
            .await
            .map_err(|status| AppError::rpc("creating the session", status))?;
        let bridge = match shared.proxy.attach(&session).await {
            Ok(bridge) => bridge,
            Err(status) => {
                // Leave no session behind that nobody serves; the proxy
                // would list its tools until the idle lifetime ran out.
                let _ = shared.proxy.delete_session(&session).await;
                return Err(AppError::rpc("attaching the bridge", status));
            }
        };
        shared.announce(&session);
        // Attached from now on, before the loop's task first runs.
        shared.set_attached(Some(bridge.outbound.clone()));
        let (current, watcher) = watch::channel(session.clone());
        let stop = CancellationToken::new();
        let task = tokio::spawn(serve_loop(
            shared.clone(),
            session,
            bridge,
            current,
            stop.clone(),
        ));
        Ok(Serving {
            shared,
            session: watcher,
            stop,
            task: Some(task),
        })
    }
}

/// What the serve loop, every bridge and the `Serving` handle share.
struct Shared {
    proxy: Proxy,
    metadata: SessionMetadata,
    /// The current declarations; replaced whole by an update.
    declarations: RwLock<Arc<Declarations>>,
    /// Whether the app changed its declarations since it started: a bridge
    /// attached again to the same session then sends them all.
    changed: AtomicBool,
    /// The bridge attached now, if any.
    link: Mutex<Link>,
    /// Updates go one at a time, so that an answer is never taken for
    /// another update's.
    updating: tokio::sync::Mutex<()>,
    /// Calls accepted: running or waiting to run.
    admitted: Arc<Semaphore>,
    /// Calls running.
    running: Arc<Semaphore>,
    max_concurrent_calls: usize,
    in_flight: InFlight,
    on_session: Option<Arc<SessionCallback>>,
    backoff: ExponentialBuilder,
    idle_timeout: Duration,
}

impl Shared {
    fn announce(&self, session: &Session) {
        tracing::info!(session = %session.short_id(), "session ready");
        if let Some(callback) = &self.on_session {
            callback(&session.info);
        }
    }

    /// Starts one call on its own task, or answers at once when the app
    /// already holds as many calls as it accepts.
    fn start_call(&self, invoke: InvokeTool, bridge: &Bridge, scope: &Scope) {
        let Ok(admitted) = self.admitted.clone().try_acquire_owned() else {
            let busy = ToolResult {
                request_id: invoke.request_id,
                ok: false,
                content_json: String::new(),
                error: format!(
                    "The app is busy: it is already running {} calls and has as many waiting. Try again shortly.",
                    self.max_concurrent_calls
                ),
            };
            send_now(bridge, app_message::Kind::Result(busy));
            return;
        };
        let declarations = self.declarations();
        let running = self.running.clone();
        let outbound = bridge.outbound.clone();
        let in_flight = self.in_flight.clone();
        let scope = scope.clone();
        tokio::spawn(async move {
            let _admitted = admitted;
            // The semaphore is never closed, so this cannot fail.
            let Ok(permit) = running.acquire_owned().await else {
                return;
            };
            call::run(declarations, invoke, outbound, in_flight, scope, permit).await;
        });
    }

    /// Starts one MCP request (`resources/read`, ...) like a call: on its
    /// own task, within the same limits.
    fn start_mcp_request(&self, request: McpRequest, bridge: &Bridge, scope: &Scope) {
        let Ok(admitted) = self.admitted.clone().try_acquire_owned() else {
            let busy = McpError::internal(format!(
                "The app is busy: it is already running {} calls and has as many waiting. Try again shortly.",
                self.max_concurrent_calls
            ));
            let revision = request
                .client
                .as_ref()
                .map(|client| client.protocol_version.as_str());
            let answer = mcp::answer(request.request_id.clone(), Err(busy), revision);
            send_now(bridge, app_message::Kind::McpResult(answer));
            return;
        };
        let declarations = self.declarations();
        let running = self.running.clone();
        let outbound = bridge.outbound.clone();
        let in_flight = self.in_flight.clone();
        let scope = scope.clone();
        tokio::spawn(async move {
            let _admitted = admitted;
            // The semaphore is never closed, so this cannot fail.
            let Ok(permit) = running.acquire_owned().await else {
                return;
            };
            mcp::run(declarations, request, outbound, in_flight, scope, permit).await;
        });
    }

    fn declarations(&self) -> Arc<Declarations> {
        self.declarations
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn replace_declarations(&self, declarations: Arc<Declarations>) {
        *self
            .declarations
            .write()
            .unwrap_or_else(PoisonError::into_inner) = declarations;
    }

    /// The session's creation with the current declarations.
    fn create_request(&self) -> CreateSessionRequest {
        self.declarations().create_request(&self.metadata)
    }

    fn attached(&self) -> Option<mpsc::Sender<AppMessage>> {
        lock(&self.link).outbound.clone()
    }

    /// Records the bridge attached now (or none); a bridge that ends takes
    /// the wait for an update's answer with it.
    fn set_attached(&self, outbound: Option<mpsc::Sender<AppMessage>>) {
        *lock(&self.link) = Link {
            outbound,
            update_answer: None,
        };
    }

    /// The attached bridge's queue and the answer to an update sent on it;
    /// `None` when no bridge is attached.
    fn await_update_answer(&self) -> Option<(mpsc::Sender<AppMessage>, UpdateAnswer)> {
        let mut link = lock(&self.link);
        let outbound = link.outbound.clone()?;
        let (answer, answered) = oneshot::channel();
        link.update_answer = Some(answer);
        Some((outbound, answered))
    }

    /// Hands the proxy's answer to the update waiting for it; false when
    /// none waits.
    fn answer_update(&self, answer: Result<(), String>) -> bool {
        match lock(&self.link).update_answer.take() {
            Some(waiting) => {
                let _ = waiting.send(answer);
                true
            }
            None => false,
        }
    }
}

/// The bridge attached now, and the update waiting for the proxy's answer
/// on it. One lock for both, so that an update never waits on a bridge
/// that has already ended.
#[derive(Default)]
struct Link {
    outbound: Option<mpsc::Sender<AppMessage>>,
    update_answer: Option<oneshot::Sender<Result<(), String>>>,
}

/// The proxy's answer to an update: taken, or refused with its reason. An
/// error receiving it means the bridge ended first.
type UpdateAnswer = oneshot::Receiver<Result<(), String>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Queues a message without waiting; a full queue means the connection is
/// stuck, which the idle timeout and the proxy's pings will find.
fn send_now(bridge: &Bridge, kind: app_message::Kind) {
    let _ = bridge.outbound.try_send(AppMessage { kind: Some(kind) });
}

/// How a bridge ended.
enum End {
    /// `shutdown()` was called.
    Stopped,
    /// The connection failed or the proxy ended the bridge: attach again.
    Lost(Status),
    /// The proxy no longer knows the session: create a new one.
    SessionGone,
    /// Retrying cannot help.
    Fatal(AppError),
}

fn classify(status: Status, session: &Session, step: &'static str) -> End {
    match status.code() {
        Code::NotFound => End::SessionGone,
        Code::Aborted => End::Fatal(AppError::Replaced {
            session_id: session.id().to_owned(),
        }),
        _ if is_permanent(&status) => End::Fatal(AppError::rpc(step, status)),
        _ => End::Lost(status),
    }
}

/// Reads one attached bridge until it ends.
async fn serve_bridge(
    shared: &Shared,
    session: &Session,
    mut bridge: Bridge,
    scope: &Scope,
    stop: &CancellationToken,
) -> End {
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return End::Stopped,
            next = tokio::time::timeout(shared.idle_timeout, bridge.inbound.message()) => next,
        };
        let message = match next {
            Err(_) => {
                return End::Lost(Status::deadline_exceeded(format!(
                    "the proxy sent nothing for {:?}; the connection is presumed dead",
                    shared.idle_timeout
                )));
            }
            Ok(Ok(Some(message))) => message,
            Ok(Ok(None)) => return End::Lost(Status::unavailable("the proxy ended the bridge")),
            Ok(Err(status)) => return classify(status, session, "serving the bridge"),
        };
        // Every kind the proxy can send has its arm: a new kind in the
        // contract fails to compile here until it is handled.
        match message.kind {
            Some(proxy_message::Kind::Cancel(cancel)) => {
                shared
                    .in_flight
                    .cancel(&cancel.request_id, CancelReason::Proxy(cancel.reason));
            }
            Some(proxy_message::Kind::Invoke(invoke)) => {
                shared.start_call(invoke, &bridge, scope);
            }
            Some(proxy_message::Kind::Ping(ping)) => {
                send_now(&bridge, app_message::Kind::Pong(Pong { nonce: ping.nonce }));
            }
            Some(proxy_message::Kind::Error(notice)) => {
                // The contract answers an update with ToolsUpdated or with a
                // notice naming the problem, which concerns no call.
                let refusal = notice.request_id.is_empty()
                    && shared.answer_update(Err(notice.message.clone()));
                if !refusal {
                    // The request id is left out: it holds the full session id.
                    tracing::warn!(
                        message = %notice.message,
                        "the proxy could not use a message from the app"
                    );
                }
            }
            Some(proxy_message::Kind::ToolsUpdated(updated)) => {
                shared.answer_update(Ok(()));
                tracing::debug!(
                    tools = updated.tools,
                    resources = updated.resources,
                    resource_templates = updated.resource_templates,
                    prompts = updated.prompts,
                    "the proxy took the new declarations"
                );
            }
            Some(proxy_message::Kind::McpRequest(request)) => {
                shared.start_mcp_request(request, &bridge, scope);
            }
            Some(proxy_message::Kind::Attached(_)) | None => {}
        }
    }
}

/// Keeps the session's bridge attached until stopped or refused.
async fn serve_loop(
    shared: Arc<Shared>,
    mut session: Session,
    first: Bridge,
    current: watch::Sender<Session>,
    stop: CancellationToken,
) -> Result<(), AppError> {
    let mut bridge = Some(first);
    let mut delays = shared.backoff.build();
    // A session created a moment ago that the proxy already does not know
    // points at trouble on its side: back off before creating another.
    let mut fresh = true;
    // A re-created session is reported once its bridge is attached, so the
    // app hands out MCP URLs whose tools answer.
    let mut unreported = false;
    // A bridge attached again to a session that may hold declarations older
    // than the app's sends the app's.
    let mut resync = false;
    loop {
        let end = match bridge.take() {
            Some(attached) => {
                delays = shared.backoff.build();
                fresh = false;
                if std::mem::take(&mut unreported) {
                    shared.announce(&session);
                }
                tracing::info!(session = %session.short_id(), "bridge attached");
                if std::mem::take(&mut resync) {
                    let update = shared.declarations().update_message(Lists::ALL);
                    send_now(&attached, app_message::Kind::UpdateTools(update));
                }
                shared.set_attached(Some(attached.outbound.clone()));
                let scope = Scope::default();
                let end = serve_bridge(&shared, &session, attached, &scope, &stop).await;
                shared.set_attached(None);
                scope.end(match &end {
                    End::Stopped => CancelReason::Shutdown,
                    _ => CancelReason::BridgeLost,
                });
                end
            }
            None => {
                let attaching = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    attaching = shared.proxy.attach(&session) => attaching,
                };
                match attaching {
                    Ok(attached) => {
                        resync = !fresh && shared.changed.load(Ordering::SeqCst);
                        bridge = Some(attached);
                        continue;
                    }
                    Err(status) => classify(status, &session, "attaching the bridge"),
                }
            }
        };
        match end {
            End::Stopped => return Ok(()),
            End::Fatal(error) => {
                tracing::error!(session = %session.short_id(), %error, "the app stopped serving");
                return Err(error);
            }
            End::Lost(status) => {
                tracing::warn!(
                    session = %session.short_id(),
                    code = ?status.code(),
                    message = %status.message(),
                    "bridge lost; reconnecting"
                );
                if !pause(&mut delays, &stop).await {
                    return Ok(());
                }
            }
            End::SessionGone => {
                tracing::warn!(session = %session.short_id(), "the proxy no longer knows the session; creating a new one");
                if fresh && !pause(&mut delays, &stop).await {
                    return Ok(());
                }
                let Some(created) = recreate(&shared, &mut delays, &stop).await? else {
                    return Ok(());
                };
                session = created;
                fresh = true;
                unreported = true;
                current.send_replace(session.clone());
            }
        }
    }
}

/// A new session for the app, retried with backoff while the failure may
/// pass; `None` when stopped meanwhile.
async fn recreate(
    shared: &Shared,
    delays: &mut impl Iterator<Item = Duration>,
    stop: &CancellationToken,
) -> Result<Option<Session>, AppError> {
    loop {
        let creating = tokio::select! {
            () = stop.cancelled() => return Ok(None),
            creating = shared.proxy.create_session(shared.create_request()) => creating,
        };
        match creating {
            Ok(created) => return Ok(Some(created)),
            Err(status) if is_permanent(&status) => {
                return Err(AppError::rpc("re-creating the session", status));
            }
            Err(status) => {
                tracing::warn!(code = ?status.code(), message = %status.message(), "could not re-create the session; retrying");
                if !pause(delays, stop).await {
                    return Ok(None);
                }
            }
        }
    }
}

/// Waits the next backoff delay; false when stopped meanwhile.
async fn pause(delays: &mut impl Iterator<Item = Duration>, stop: &CancellationToken) -> bool {
    let delay = delays.next().unwrap_or(Duration::from_secs(30));
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(delay) => true,
    }
}

/// A serving app. Dropping it stops serving without deleting the session
/// (the proxy forgets it after its idle lifetime); [`Serving::shutdown`]
/// deletes it.
pub struct Serving {
    shared: Arc<Shared>,
    session: watch::Receiver<Session>,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), AppError>>>,
}

impl std::fmt::Debug for Serving {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serving")
            .field("session", &self.session.borrow().info)
            .finish_non_exhaustive()
    }
}

impl Serving {
    /// The current session's id, MCP URL and MCP token.
    pub fn session(&self) -> SessionInfo {
        self.session.borrow().info.clone()
    }

    /// Changes the app's declarations while it serves: each list the update
    /// gives replaces the app's list of that kind (tools, resources,
    /// resource templates, prompts). New requests use the new handlers at
    /// once; MCP clients see the new lists at their next `*/list`.
    ///
    /// Waits for the proxy's answer when a bridge is attached. When none is
    /// (the app is reconnecting), or it is lost before the answer, the
    /// change is sent when the bridge is back, and a re-created session
    /// registers it; this returns `Ok` then. Fails, changing nothing, when
    /// a declaration is wrong ([`AppError::InvalidTool`] and its siblings)
    /// or the proxy refuses the change ([`AppError::UpdateRefused`]).
    pub async fn update(&self, update: Update) -> Result<(), AppError> {
        let shared = &self.shared;
        let _one_at_a_time = shared.updating.lock().await;
        let previous = shared.declarations();
        let (next, lists) = previous.updated(update)?;
        let next = Arc::new(next);
        shared.replace_declarations(next.clone());
        shared.changed.store(true, Ordering::SeqCst);
        let Some((outbound, answered)) = shared.await_update_answer() else {
            // The next bridge sends the change.
            return Ok(());
        };
        let message = AppMessage {
            kind: Some(app_message::Kind::UpdateTools(next.update_message(lists))),
        };
        if outbound.send(message).await.is_err() {
            // The bridge ended meanwhile; the next one sends the change.
            return Ok(());
        }
        match tokio::time::timeout(UPDATE_TIMEOUT, answered).await {
            Ok(Ok(Ok(()))) | Ok(Err(_)) => Ok(()),
            Ok(Ok(Err(refusal))) => {
                // The session keeps what it had, and so does the app.
                let mut current = shared
                    .declarations
                    .write()
                    .unwrap_or_else(PoisonError::into_inner);
                if Arc::ptr_eq(&current, &next) {
                    *current = previous;
                }
                Err(AppError::UpdateRefused(refusal))
            }
            Err(_) => {
                lock(&shared.link).update_answer.take();
                Err(AppError::rpc(
                    "updating the declarations",
                    Status::deadline_exceeded(format!(
                        "the proxy did not answer the update within {UPDATE_TIMEOUT:?}"
                    )),
                ))
            }
        }
    }

    /// Tells the proxy that the resource at `uri` changed: MCP clients that
    /// subscribed to it receive `notifications/resources/updated`. Fails
    /// with [`AppError::NotAttached`] while the app is reconnecting.
    pub async fn resource_updated(&self, uri: impl Into<String>) -> Result<(), AppError> {
        let outbound = self.shared.attached().ok_or(AppError::NotAttached)?;
        let message = AppMessage {
            kind: Some(app_message::Kind::ResourceUpdated(ResourceUpdated {
                uri: uri.into(),
            })),
        };
        outbound
            .send(message)
            .await
            .map_err(|_| AppError::NotAttached)
    }

    /// Waits until the app stops serving by itself, which it does only when
    /// retrying cannot help (the token was refused, another instance took
    /// the session over); returns why. Pending forever otherwise, so select
    /// it against a shutdown signal.
    pub async fn closed(&mut self) -> Result<(), AppError> {
        // The handle stays in place while waiting, so that `shutdown` still
        // finds the loop when this future is dropped by a `select!`.
        let Some(task) = &mut self.task else {
            return Ok(());
        };
        let ended = task.await;
        self.task = None;
        joined(ended)
    }

    /// Stops serving: cancels the calls still running (their handlers see
    /// [`CancelReason::Shutdown`]), closes the bridge and deletes the
    /// session, so that the agent sees no stale tools.
    pub async fn shutdown(mut self) -> Result<(), AppError> {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            // A loop that already failed has reported it through `closed`,
            // or it is reported now; either way the session goes.
            let ended = joined(task.await);
            if let Err(error) = &ended {
                tracing::debug!(%error, "the serve loop had stopped");
            }
        }
        let session = self.session.borrow().clone();
        self.shared
            .proxy
            .delete_session(&session)
            .await
            .map_err(|status| AppError::rpc("deleting the session", status))?;
        tracing::info!(session = %session.short_id(), "session deleted");
        Ok(())
    }
}

fn joined(result: Result<Result<(), AppError>, tokio::task::JoinError>) -> Result<(), AppError> {
    result.unwrap_or_else(|error| Err(AppError::Stopped(error.to_string())))
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
