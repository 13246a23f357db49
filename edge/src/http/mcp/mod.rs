//! The MCP endpoint: `POST /v1/mcp/{session_id}`, and `POST /v1/mcp` (or
//! `/v1/mcp/`) routed by the `MCP-Session-Id` header.
//!
//! The server speaks streamable HTTP, stateless: it never mints a session
//! id of its own (`MCP-Session-Id` is ours, for routing), `GET` is refused
//! with 405, and answers are plain JSON unless something must reach the
//! client first. Every revision from 2024-11-05 through 2026-07-28 (with
//! `server/discover`) is served. One implementation serves every method at
//! every revision, on this endpoint and the legacy SSE transport alike:
//! [`transport`] reads a message and writes answers, [`methods`] holds one
//! file per method, [`rounds`] the 2026-07-28 `input_required` rounds.
//!
//! Before a request's body is read, this module checks, in order: `Host`
//! and `Origin` ([`super::guard`]), that the bearer token could open a
//! session at all (401 with `WWW-Authenticate: Bearer`), that a session id
//! was given (400), and that the session exists (404) and accepts the
//! token: its own `mcp_token`, or the OpenClaw token unless session tokens
//! are required (401), as the hub decides.

use std::sync::Arc;

use axum::body::Bytes;
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
use transport::request::Message;

pub mod answers;
pub mod call;
pub mod jsonrpc;
pub mod legacy;
pub mod listens;
pub mod methods;
pub mod oauth;
pub mod rounds;
pub mod transport;
pub mod view;

/// The state of the MCP handlers: the edge's, plus what only MCP keeps.
/// One pointer, as [`EdgeState`] is; field access reaches the edge's state
/// through it (`state.hub`).
#[derive(Clone)]
pub struct McpState(Arc<McpShared>);

impl McpState {
    /// The MCP state over the edge's.
    pub fn new(edge: EdgeState) -> Self {
        let in_flight = Arc::new(InFlight::default());
        let rounds = Arc::new(rounds::Rounds::new(
            edge.hub.config().request_state_key.clone(),
            edge.hub.config().client_request_timeout,
            edge.config.parked,
        ));
        // Retries other nodes receive for calls parked here.
        edge.hub
            .serve_resumes(Arc::new(rounds::ResumeHere(rounds.clone())));
        Self(Arc::new(McpShared {
            oauth: edge
                .config
                .oauth
                .clone()
                .map(|settings| Arc::new(Verifier::new(settings))),
            in_flight,
            legacy: Arc::default(),
            listens: Arc::default(),
            rounds,
            tasks: methods::tasks::TaskState::new(edge.hub.config().tasks.clone()),
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
    /// MCP calls in flight, for `notifications/cancelled`.
    pub in_flight: Arc<InFlight>,
    /// The open streams of the legacy HTTP+SSE transport.
    pub legacy: Arc<LegacyStreams>,
    /// 2026-07-28 calls waiting for their clients' answers.
    pub rounds: Arc<rounds::Rounds>,
    /// The access token checks, when OAuth is on.
    pub oauth: Option<Arc<Verifier>>,
    /// The open `subscriptions/listen` streams of each session.
    pub listens: Arc<listens::ListenStreams>,
    /// MCP tasks: their store and the task calls running here.
    pub tasks: methods::tasks::TaskState,
}

impl std::ops::Deref for McpShared {
    type Target = EdgeShared;

    fn deref(&self) -> &EdgeShared {
        &self.edge
    }
}

/// The header that routes `/v1/mcp` to a session.
pub const SESSION_HEADER: &str = "mcp-session-id";

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
    // No session named, with OAuth on: a signed-in user's one-URL view.
    if session_id.as_deref().is_none_or(str::is_empty) && state.oauth.is_some() {
        match view::admit(state, RequestHead::of(&request)).await {
            Ok(Some(caller)) => return Box::pin(view::serve(state, caller, request, method)).await,
            Ok(None) => {}
            Err(refused) => return refused,
        }
    }
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
    // Boxed: a request's future would otherwise hold room for the
    // largest method's, and it is moved several times before it runs.
    Box::pin(handle_message(
        state, session_id, parts, bytes, peer, method,
    ))
    .await
}

/// Serves one admitted JSON-RPC message of `session_id` (its request head
/// and body): a request gets its method's answer ([`methods`]), a
/// notification `202`, a client's response goes to the app that asked. The
/// one place MCP messages are handled, for the streamable endpoint and the
/// legacy SSE transport ([`legacy`]) alike.
pub(super) async fn handle_message(
    state: &McpState,
    session_id: Arc<str>,
    parts: Parts,
    bytes: Bytes,
    peer: Option<std::net::SocketAddr>,
    method: &mut McpMethod,
) -> Response {
    *method = McpMethod::Other;
    let parsed = transport::request::check_media(&parts.headers)
        .and_then(|()| transport::request::parse(&bytes, &parts.headers));
    let request = match parsed {
        Err(rejected) => return rejected.into_response(),
        Ok(Message::Response) => {
            *method = McpMethod::Response;
            return match answers::parse(&bytes) {
                Some(reply) => {
                    let answered = reply.as_ref().ok().map(|reply| reply.id().to_owned());
                    let response = answers::deliver(&state.hub, &session_id, reply).await;
                    if let Some(answered) = answered {
                        state.tasks.runs.answered(&answered);
                    }
                    response
                }
                None => axum::http::StatusCode::ACCEPTED.into_response(),
            };
        }
        Ok(Message::Notification { method: name, .. }) => {
            *method = McpMethod::Notification;
            if name == "notifications/cancelled"
                && let Some(jsonrpc_id) = jsonrpc::cancelled_request(&bytes)
            {
                let found = state.in_flight.cancel(&session_id, &jsonrpc_id);
                tracing::debug!(found, "notifications/cancelled");
            }
            return axum::http::StatusCode::ACCEPTED.into_response();
        }
        Ok(Message::Request(request)) => request,
    };
    *method = McpMethod::of(&request.method);
    let span = request_span(&request.method, &session_id, || named_in(&request));
    trace::set_remote_parent(&span, &request.trace_parent(&parts.headers));
    let context = methods::Context {
        state,
        session_id: &session_id,
        headers: &parts.headers,
        peer,
        caller: caller_of(&parts),
    };
    methods::answer(context, *request).instrument(span).await
}

/// What a request names, for its span: its tool or prompt, or its URI.
fn named_in(request: &transport::request::Request) -> String {
    #[derive(Deserialize)]
    struct Named {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        uri: Option<String>,
    }
    serde_json::from_str::<Named>(request.params_text())
        .ok()
        .and_then(|named| named.name.or(named.uri))
        .unwrap_or_default()
}

/// Which credential opened the request, as [`admit`] left it.
fn caller_of(parts: &Parts) -> Caller {
    parts
        .extensions
        .get::<Caller>()
        .cloned()
        .unwrap_or_default()
}

/// The MCP request's span (when traces are exported): the root of the
/// proxy's part of a call, child of the client's span when it sent a
/// `traceparent`.
fn request_span(method: &str, session_id: &str, named: impl FnOnce() -> String) -> tracing::Span {
    trace::span(|| {
        let named = named();
        tracing::info_span!(
            "mcp_request",
            otel.kind = "server",
            mcp.method.name = method,
            session = Outside::session(session_id).field(),
            tool = Outside::new(&named).field(),
        )
    })
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
        let request = Request::new(axum::body::Body::empty());
        let size = std::mem::size_of_val(&route(state.clone(), Some("s".into()), request));
        assert!(size <= 1600, "an MCP request's future is {size} bytes");

        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        );
        let headers = axum::http::HeaderMap::new();
        let Ok(Message::Request(call)) = transport::request::parse(&body, &headers) else {
            panic!("a call");
        };
        let session_id: Arc<str> = "s".into();
        let context = methods::Context {
            state: &state,
            session_id: &session_id,
            headers: &headers,
            peer: None,
            caller: Caller::default(),
        };
        let answer = methods::call_tool(context, *call);
        let size = std::mem::size_of_val(&answer);
        assert!(size <= 900, "a call's answer future is {size} bytes");
    }
}
