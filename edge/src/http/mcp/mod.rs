//! The MCP endpoint: `POST /v1/mcp/{session_id}`, and `POST /v1/mcp` (or
//! `/v1/mcp/`) routed by the `MCP-Session-Id` header.
//!
//! rmcp's streamable HTTP transport does all protocol work, in stateless mode:
//! the server never mints a session id of its own (`MCP-Session-Id` is ours,
//! for routing), `GET` is refused with 405, answers are plain JSON unless the
//! handler streams, and every protocol revision rmcp knows is negotiated
//! (2024-11-05 through 2026-07-28, with `server/discover`).
//!
//! Before a request reaches rmcp, and before its body is read, this module
//! checks, in order: `Host` and `Origin` ([`super::guard`]), that the bearer
//! token could open a session at all (401 with `WWW-Authenticate: Bearer`),
//! that a session id was given (400), and that the session exists (404) and
//! accepts the token: its own `mcp_token`, or the OpenClaw token unless
//! session tokens are required (401), as the hub decides. The session id then rides in the request's
//! extensions to [`service::SessionTools`], the one transport-agnostic handler.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::escape::Outside;
use openclaw_proxy_core::metrics::{McpMethod, Surface};
use openclaw_proxy_core::{Caller, ClientAddr, Credential, HubError, trace};
use serde::Deserialize;
use tracing::Instrument;

use super::error::ApiError;
use super::public_url::RequestHead;
use super::request::{SessionIdPath, authorization, read_body, refusal};
use super::state::{EdgeShared, EdgeState};
use crate::oauth::Verifier;
use call::InFlight;
use legacy::LegacyStreams;
use service::McpService;

pub mod answers;
pub mod call;
pub mod carrier;
pub mod direct;
pub mod jsonrpc;
pub mod legacy;
pub mod logging;
pub mod oauth;
pub mod served;
pub mod service;

/// The state of the MCP handlers: the edge's, plus what only MCP keeps.
/// One pointer, as [`EdgeState`] is; field access reaches the edge's state
/// through it (`state.hub`).
#[derive(Clone)]
pub struct McpState(Arc<McpShared>);

impl McpState {
    /// The MCP state over the edge's.
    pub fn new(edge: EdgeState) -> Self {
        let in_flight = Arc::new(InFlight::default());
        let rounds = Arc::new(direct::Rounds::new(
            edge.hub.config().request_state_key.clone(),
            edge.hub.config().client_request_timeout,
        ));
        // Retries other nodes receive for calls parked here.
        edge.hub
            .serve_resumes(Arc::new(direct::ResumeHere(rounds.clone())));
        Self(Arc::new(McpShared {
            service: service::service(edge.hub.clone(), &edge.config, in_flight.clone()),
            oauth: edge
                .config
                .oauth
                .clone()
                .map(|settings| Arc::new(Verifier::new(settings))),
            in_flight,
            legacy: Arc::default(),
            listing: Listing::default(),
            rounds,
            edge,
        }))
    }
}

impl std::ops::Deref for McpState {
    type Target = McpShared;

    fn deref(&self) -> &McpShared {
        &self.0
    }
}

/// What [`McpState`] points to.
pub struct McpShared {
    /// The edge's state.
    pub edge: EdgeState,
    /// The MCP service, built once.
    pub service: McpService,
    /// MCP calls in flight, for `notifications/cancelled`.
    pub in_flight: Arc<InFlight>,
    /// The open streams of the legacy HTTP+SSE transport.
    pub legacy: Arc<LegacyStreams>,
    /// 2026-07-28 calls waiting for their clients' answers.
    pub rounds: Arc<direct::Rounds>,
    /// The access token checks, when OAuth is on.
    pub oauth: Option<Arc<Verifier>>,
    /// The `tools/list` answers being rendered.
    pub listing: Listing,
}

/// The `tools/list` answers being rendered, bounded by the bytes of their
/// schemas. A tool keeps its schema as text (`openclaw_proxy_proto::schema`
/// says why); rmcp wants each as a JSON tree, about 27 times the text for a
/// schema of many small properties, built per answer. Without a bound, a
/// client asking for a 1 MB list 500 times at once made the server build
/// 500 trees at once (gigabytes); with it, at most [`Listing::BYTES`] of
/// schema text is being rendered at any time, and the other answers wait
/// their turn.
pub struct Listing {
    rendering: Arc<tokio::sync::Semaphore>,
}

impl Default for Listing {
    fn default() -> Self {
        Self {
            rendering: Arc::new(tokio::sync::Semaphore::new(Self::BYTES)),
        }
    }
}

impl Listing {
    /// The schema bytes rendered at once: a few large lists, or any number
    /// of small ones.
    pub const BYTES: usize = 4 * 1024 * 1024;

    /// Waits for room to render the `tools/list` of `session_id`; the room
    /// is given back when the permit is dropped.
    async fn permit(
        &self,
        hub: &openclaw_proxy_core::Hub,
        session_id: &str,
    ) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let bytes = match hub.tools(session_id).await {
            Ok(tools) => tools.iter().map(|tool| tool.input_schema.len()).sum(),
            Err(_) => 0,
        };
        let weight = u32::try_from(bytes.clamp(1, Self::BYTES)).unwrap_or(u32::MAX);
        // Never closed.
        self.rendering.clone().acquire_many_owned(weight).await.ok()
    }
}

impl std::ops::Deref for McpShared {
    type Target = EdgeShared;

    fn deref(&self) -> &EdgeShared {
        &self.edge
    }
}

/// The header that routes `/v1/mcp` to a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

/// The session a request was routed to.
#[derive(Clone, Debug)]
pub(super) struct SessionRoute(pub(super) Arc<str>);

/// `POST /v1/mcp/{session_id}`.
pub async fn by_path(
    State(state): State<McpState>,
    SessionIdPath(session_id): SessionIdPath,
    request: Request,
) -> Response {
    route(state, Some(session_id), request).await
}

/// `POST /v1/mcp` and `POST /v1/mcp/`, routed by `MCP-Session-Id`.
pub async fn by_header(State(state): State<McpState>, request: Request) -> Response {
    let session_id = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_owned());
    route(state, session_id, request).await
}

/// Serves one MCP request, counted by method and status.
async fn route(state: McpState, session_id: Option<String>, request: Request) -> Response {
    let mut method = McpMethod::Unread;
    let response = serve(&state, session_id, request, &mut method).await;
    state
        .hub
        .metrics()
        .mcp_request(method, response.status().as_u16());
    response
}

async fn serve(
    state: &McpState,
    session_id: Option<String>,
    request: Request,
    method: &mut McpMethod,
) -> Response {
    let mut request = request;
    match admit(state, session_id.as_deref(), RequestHead::of(&request)).await {
        Ok(caller) => request.extensions_mut().insert(caller),
        Err(refused) => return refused,
    };
    let session_id: Arc<str> = session_id.unwrap_or_default().into();
    let peer = request.extensions().get::<ClientAddr>().map(|addr| addr.0);
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    handle_message(state, session_id, parts, bytes, peer, method).await
}

/// Serves one admitted JSON-RPC message of `session_id` (its request head
/// and body): the direct path, `notifications/cancelled`, or rmcp. The one
/// place MCP messages are handled, for the streamable endpoint and the
/// legacy SSE transport ([`super::legacy`]) alike.
pub(super) async fn handle_message(
    state: &McpState,
    session_id: Arc<str>,
    parts: Parts,
    bytes: Bytes,
    peer: Option<std::net::SocketAddr>,
    method: &mut McpMethod,
) -> Response {
    // The direct path first: it carries most traffic, and a body it does
    // not take costs it little.
    if let Some(answering) = direct_call(state, &session_id, &parts, &bytes, peer) {
        *method = McpMethod::ToolsCall;
        return answering.await;
    }
    Box::pin(handle_other(state, session_id, parts, bytes, peer, method)).await
}

/// Which credential opened the request, as [`admit`] left it.
fn caller_of(parts: &Parts) -> Caller {
    parts
        .extensions
        .get::<Caller>()
        .cloned()
        .unwrap_or_default()
}

/// [`handle_message`] for every message but a direct `tools/call`: boxed,
/// so that the futures of the calls carrying the load do not hold room for
/// rmcp's.
async fn handle_other(
    state: &McpState,
    session_id: Arc<str>,
    parts: Parts,
    bytes: Bytes,
    peer: Option<std::net::SocketAddr>,
    method: &mut McpMethod,
) -> Response {
    let caller = caller_of(&parts);
    // A request the app answers, in its plain shape: its result comes back
    // as the app wrote it.
    if let Some(revision) = direct::headers_allow(&parts.headers)
        && let Some(request) = direct::parse_request(&bytes, revision, &parts.headers)
    {
        *method = McpMethod::of(request.method());
        let span = request_span(request.method(), &session_id, request.target());
        trace::set_remote_parent(&span, &request.trace_parent(&parts.headers));
        return direct::answer_request(state, &session_id, &parts.headers, peer, caller, request)
            .instrument(span)
            .await;
    }
    if let Some(reply) = answers::parse(&bytes) {
        *method = McpMethod::Response;
        return answers::deliver(&state.hub, &session_id, reply).await;
    }
    if let Some(jsonrpc_id) = jsonrpc::cancelled_request(&bytes) {
        *method = McpMethod::Notification;
        // rmcp ignores this in stateless mode: the call is found here.
        let found = state.in_flight.cancel(&session_id, &jsonrpc_id);
        tracing::debug!(found, "notifications/cancelled");
        return axum::http::StatusCode::ACCEPTED.into_response();
    }
    let sniffed = Sniffed::of(&bytes);
    *method = sniffed
        .as_ref()
        .and_then(|sniffed| sniffed.method.as_deref())
        .map_or(McpMethod::Other, McpMethod::of);
    if let Some(refusal) = jsonrpc::refusal(&bytes) {
        return refusal;
    }
    let trace_parent = sniffed
        .as_ref()
        .and_then(|sniffed| sniffed.params.as_ref())
        .and_then(|params| params.meta.as_ref())
        .and_then(|meta| meta.traceparent.as_deref())
        .map(str::to_owned)
        .unwrap_or_else(|| call::trace_parent(None, &parts.headers));
    let span = request_span(
        method.as_str(),
        &session_id,
        sniffed
            .as_ref()
            .and_then(|sniffed| sniffed.params.as_ref())
            .and_then(|params| params.name.as_deref())
            .unwrap_or_default(),
    );
    trace::set_remote_parent(&span, &trace_parent);
    drop(sniffed);
    // A `tools/list` builds its schemas' trees for rmcp: bounded at once.
    let _rendering = match *method {
        McpMethod::ToolsList => Some(state.listing.permit(&state.hub, &session_id).await),
        _ => None,
    };
    let mut request = Request::from_parts(parts, Body::from(bytes));
    request.extensions_mut().insert(SessionRoute(session_id));
    request.extensions_mut().insert(RequestTrace {
        span: span.clone(),
        trace_parent,
        peer,
        caller,
    });
    let handled = state.service.handle(request).instrument(span).await;
    let response = jsonrpc::normalize(handled.map(Body::new)).await;
    // The app's requests ride rmcp's answer to a call or a request the app
    // answers as carriers.
    match *method {
        McpMethod::ToolsCall
        | McpMethod::PromptsGet
        | McpMethod::ResourcesRead
        | McpMethod::CompletionComplete => carrier::carried(response),
        _ => response,
    }
}

/// The answer of a `tools/call` the direct path takes, `None` for any other
/// message. Boxed, and built outside any async block: every MCP request's
/// future would otherwise be as large as a call's (kilobytes, copied at
/// each level that awaits it), and an async block keeps room for a value
/// it moved on.
fn direct_call<'a>(
    state: &'a McpState,
    session_id: &'a Arc<str>,
    parts: &'a Parts,
    bytes: &Bytes,
    peer: Option<std::net::SocketAddr>,
) -> Option<futures_util::future::BoxFuture<'a, Response>> {
    let revision = direct::headers_allow(&parts.headers)?;
    let call = direct::parse(bytes, revision, &parts.headers)?;
    let span = request_span("tools/call", session_id, call.tool());
    trace::set_remote_parent(&span, &call.trace_parent(&parts.headers));
    let answer = direct::answer(
        state,
        session_id,
        &parts.headers,
        peer,
        caller_of(parts),
        call,
    );
    Some(Box::pin(answer.instrument(span)))
}

/// The MCP request's span (when traces are exported): the root of the
/// proxy's part of a call, child of the client's span when it sent a
/// `traceparent`.
fn request_span(method: &str, session_id: &str, tool: &str) -> tracing::Span {
    trace::span(|| {
        tracing::info_span!(
            "mcp_request",
            otel.kind = "server",
            mcp.method.name = method,
            session = Outside::session(session_id).field(),
            tool = Outside::new(tool).field(),
        )
    })
}

/// What the rmcp path needs of a request's tracing: its span (rmcp runs
/// the handler in a task of its own), the `traceparent` for the app, and
/// the client's address.
#[derive(Clone)]
pub(super) struct RequestTrace {
    pub(super) span: tracing::Span,
    pub(super) trace_parent: String,
    pub(super) peer: Option<std::net::SocketAddr>,
    /// Which credential opened the request.
    pub(super) caller: Caller,
}

impl RequestTrace {
    /// What a request that carries none has: no span, no `traceparent`.
    pub(super) fn none() -> Self {
        Self {
            span: tracing::Span::none(),
            trace_parent: String::new(),
            peer: None,
            caller: Caller::default(),
        }
    }
}

/// The few fields of a JSON-RPC request the edge looks at before rmcp:
/// the method (metrics), the tool and the `traceparent` (tracing).
#[derive(Deserialize)]
struct Sniffed<'a> {
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    params: Option<SniffedParams<'a>>,
}

#[derive(Deserialize)]
struct SniffedParams<'a> {
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(rename = "_meta", default, borrow)]
    meta: Option<SniffedMeta<'a>>,
}

#[derive(Deserialize)]
struct SniffedMeta<'a> {
    #[serde(default, borrow)]
    traceparent: Option<Cow<'a, str>>,
}

impl<'a> Sniffed<'a> {
    /// `None` for a body that is not one JSON-RPC object (a batch, not JSON).
    fn of(body: &'a [u8]) -> Option<Self> {
        serde_json::from_slice(body).ok()
    }
}

/// Checks `Host`/`Origin`, the token and the session of an MCP request,
/// from its head alone: who got in, or the answer to send.
pub(super) async fn admit(
    state: &McpState,
    session_id: Option<&str>,
    head: RequestHead<'_>,
) -> Result<Caller, Response> {
    checked(state, session_id, &head)
        .await
        .map_err(|error| oauth::refusal(state, &head, session_id, error))
}

async fn checked(
    state: &McpState,
    session_id: Option<&str>,
    head: &RequestHead<'_>,
) -> Result<Caller, ApiError> {
    state.guard.check(head.headers, head.uri)?;
    let identity = oauth::verify(state, head, session_id).await?;
    let credential = match &identity {
        Some(identity) => Credential::oauth(identity),
        None => Credential::mcp(authorization(head.headers)),
    };
    // Refused from the headers alone when no session could accept the token.
    if let Err(error) = state.hub.precheck(credential) {
        state.hub.metrics().auth_failure(Surface::Mcp);
        return Err(error.into());
    }
    let session_id = session_id
        .filter(|id| !id.is_empty())
        .ok_or(ApiError::MissingSessionId)?;
    let unknown = || ApiError::UnknownSession(session_id.to_owned());
    let caller = match state.hub.authorize(session_id, credential).await {
        Ok(caller) => caller,
        Err(HubError::UnknownSession(_)) => return Err(unknown()),
        Err(error) => return Err(refusal(&state.edge, Surface::Mcp, error)),
    };
    // A global token is accepted without a lookup: the session may not exist.
    if !state.hub.session_exists(session_id).await? {
        return Err(unknown());
    }
    Ok(caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_mcp_requests_future_stays_small() {
        // axum boxes each request's future and every level above the call
        // moves it before it first runs: its size is copied several times
        // per call. It was 7 KB while the OAuth verification (5.4 KB) and
        // the direct call (4.4 KB, with room for the values it moved on)
        // were laid out inside it; both are boxed now, the call once it is
        // made.
        let hub = openclaw_proxy_core::Hub::new(openclaw_proxy_core::config::CoreConfig::default());
        let state = McpState::new(EdgeState::new(hub, crate::config::EdgeConfig::default()));
        let request = Request::new(Body::empty());
        let size = std::mem::size_of_val(&route(state.clone(), Some("s".into()), request));
        assert!(size <= 1600, "an MCP request's future is {size} bytes");

        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        );
        let headers = axum::http::HeaderMap::new();
        let call = direct::parse(&body, direct::Revision::WithInitialize, &headers).expect("call");
        let session_id: Arc<str> = "s".into();
        let answer = direct::answer(&state, &session_id, &headers, None, Caller::default(), call);
        let size = std::mem::size_of_val(&answer);
        assert!(size <= 900, "a direct call's answer future is {size} bytes");
    }
}
