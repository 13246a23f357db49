//! One URL for a signed-in user: `POST /v1/mcp` with an OAuth access token
//! and no session named serves one MCP server made of every live session
//! the token's issuer and subject own, wherever in a cluster their bridges
//! are.
//!
//! The view is a thin layer over the per-session server: it answers the
//! lists itself (each session's tools and prompts under `{name}__{item}`,
//! resources and templates under their own URIs, [`lists`]), and hands
//! every other request to the session it routes to ([`members`]), with the
//! name put back to the app's own ([`params`]), through the same
//! [`super::methods::answer`] a request on the session's own URL takes. A
//! call through the view therefore has everything a call there has:
//! progress, cancellation, the app's requests to the client, logs, the
//! caller (the token's identity), and whatever checks the session's
//! methods make.
//!
//! Only a verified access token opens a view, and only its own sessions
//! are in it: the static OpenClaw token and the sessions' own tokens keep
//! needing a session named (400 otherwise), a session without an owner is
//! in no view, and a name or URI that is not the user's is answered as
//! unknown, never as someone else's. A session whose bridge is down stays
//! in the view (apps on phones reconnect often, and a list that flickers
//! with every reconnection helps no agent); its tools fail at once with
//! `Bridge is not connected.`, as on its own URL.

mod listen;
mod lists;
mod members;
mod params;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::escape;
use openclaw_proxy_core::metrics::McpMethod;
use openclaw_proxy_core::progress::LogLevel;
use openclaw_proxy_core::{Caller, ClientAddr, OAuthIdentity, trace};
use serde::Deserialize;
use tracing::Instrument;

use super::McpState;
use super::methods::{self, Context};
use super::transport::Rejected;
use super::transport::answer::Answer;
use super::transport::request::{self as message, Message, Revision};
use crate::http::public_url::RequestHead;
use crate::http::request::read_body;
use members::Members;

/// Who a request without a session named comes from, when it carries a
/// verified access token: `Some(caller)` opens the user's view, `None`
/// leaves the request to the session checks (which want a session named),
/// `Err` is the refusal of a bad token, with its challenge.
pub(super) async fn admit(
    state: &McpState,
    head: RequestHead<'_>,
) -> Result<Option<Caller>, Response> {
    let checked = async {
        state.guard.check(head.headers, head.uri)?;
        super::oauth::verify(state, &head, None).await
    };
    match checked.await {
        Ok(identity) => Ok(identity.map(Caller::oauth)),
        Err(error) => Err(super::oauth::refusal(state, &head, None, error)),
    }
}

/// Serves one message of a signed-in user's view.
pub(super) async fn serve(
    state: &McpState,
    caller: Caller,
    request: Request,
    method: &mut McpMethod,
) -> Response {
    let Some(identity) = caller.identity.clone() else {
        return crate::http::error::ApiError::MissingSessionId.into_response();
    };
    let peer = request.extensions().get::<ClientAddr>().map(|addr| addr.0);
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    *method = McpMethod::Other;
    let parsed =
        message::check_media(&parts.headers).and_then(|()| message::parse(&bytes, &parts.headers));
    let request = match parsed {
        Err(rejected) => return rejected.into_response(),
        Ok(Message::Response) => {
            *method = McpMethod::Response;
            return match super::answers::parse(&bytes) {
                Some(reply) => {
                    let session = answered_session(state, &identity, &bytes);
                    super::answers::deliver(&state.hub, &session, reply).await
                }
                None => axum::http::StatusCode::ACCEPTED.into_response(),
            };
        }
        Ok(Message::Notification { method: name, .. }) => {
            *method = McpMethod::Notification;
            if name == "notifications/cancelled"
                && let Some(jsonrpc_id) = super::jsonrpc::cancelled_request(&bytes)
            {
                // The call is registered under its session's id: the
                // user's sessions are the only places it can be.
                for record in state.hub.owned_sessions(&identity) {
                    state.in_flight.cancel(&record.id, &jsonrpc_id);
                }
            }
            return axum::http::StatusCode::ACCEPTED.into_response();
        }
        Ok(Message::Request(request)) => request,
    };
    *method = McpMethod::of(&request.method);
    let span = super::request_span(&request.method, "", || super::named_in(&request));
    trace::set_remote_parent(&span, &request.trace_parent(&parts.headers));
    let asked = Asked {
        state,
        identity,
        caller,
        parts: &parts,
        peer,
    };
    Box::pin(asked.answer(*request)).instrument(span).await
}

/// The session a client's answer names (the ids the proxy gives the app's
/// requests begin with the session's id), if it is one of the user's;
/// otherwise none, which the hub answers as answering nothing.
fn answered_session(state: &McpState, identity: &OAuthIdentity, body: &[u8]) -> Arc<str> {
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    let Ok(Id { id }) = serde_json::from_slice::<Id>(body) else {
        return "".into();
    };
    let session = id.split(':').next().unwrap_or_default();
    state
        .hub
        .owned_sessions(identity)
        .into_iter()
        .find(|record| &*record.id == session)
        .map_or_else(|| "".into(), |record| record.id.clone())
}

/// A request of the view and where it arrived.
struct Asked<'a> {
    state: &'a McpState,
    identity: Arc<OAuthIdentity>,
    caller: Caller,
    parts: &'a Parts,
    peer: Option<SocketAddr>,
}

impl Asked<'_> {
    async fn answer(self, mut request: message::Request) -> Response {
        let members = Members::of(&self.state.hub, &self.identity);
        let answered = match request.method.as_str() {
            "tools/list" => {
                let context = Context {
                    state: self.state,
                    session_id: &Arc::from(""),
                    headers: &self.parts.headers,
                    peer: self.peer,
                    caller: self.caller.clone(),
                };
                let rules = lists::ToolRules {
                    caller: &self.caller,
                    policy: self.state.config.policy.as_deref(),
                    shows_execution: super::methods::tasks::shows_execution(&context, &request),
                };
                lists::tools(&members, &request, &rules)
            }
            "prompts/list" => lists::prompts(&members, &request),
            "resources/list" => lists::resources(&members, &request),
            "resources/templates/list" => lists::templates(&members, &request),
            "subscriptions/listen" if request.revision == Revision::PerRequest => {
                return listen::listen(&self.state.hub, self.identity.clone(), &request);
            }
            "logging/setLevel" if request.revision == Revision::WithInitialize => {
                self.set_level(&members, &request).await
            }
            "tools/call" | "prompts/get" => {
                let Some(name) = named(&request, None, "name") else {
                    return self.on(None, request).await;
                };
                let found = if request.method == "tools/call" {
                    members.tool(&name)
                } else {
                    members.prompt(&name)
                };
                let Some((member, own)) = found else {
                    return unknown(&request, &name).into_response();
                };
                let session = member.record.id.clone();
                match params::renamed(request.params_text(), None, "name", own) {
                    Ok(renamed) => request.params = Some(renamed),
                    Err(_) => return self.on(None, request).await,
                }
                drop(members);
                return self.on(Some(session), request).await;
            }
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let Some(uri) = named(&request, None, "uri") else {
                    return self.on(None, request).await;
                };
                let Some(member) = members.reader(&uri) else {
                    return unknown(&request, &uri).into_response();
                };
                let session = member.record.id.clone();
                drop(members);
                return self.on(Some(session), request).await;
            }
            "completion/complete" => {
                if let Some(name) = named(&request, Some("ref"), "name") {
                    let Some((member, own)) = members.prompt(&name) else {
                        return unknown(&request, &name).into_response();
                    };
                    let session = member.record.id.clone();
                    match params::renamed(request.params_text(), Some("ref"), "name", own) {
                        Ok(renamed) => request.params = Some(renamed),
                        Err(_) => return self.on(None, request).await,
                    }
                    drop(members);
                    return self.on(Some(session), request).await;
                }
                let Some(uri) = named(&request, Some("ref"), "uri") else {
                    return self.on(None, request).await;
                };
                let Some(member) = members.template_owner(&uri) else {
                    return unknown(&request, &uri).into_response();
                };
                let session = member.record.id.clone();
                drop(members);
                return self.on(Some(session), request).await;
            }
            _ => {
                drop(members);
                return self.on(None, request).await;
            }
        };
        answered
            .unwrap_or_else(|rejected| rejected.answering(&request.id).into())
            .into_response()
    }

    /// The request answered as on the session's own URL; with no session,
    /// as the server answers what no session serves (`initialize`,
    /// `server/discover`, `ping`, a method it does not know, params it
    /// cannot read).
    async fn on(self, session: Option<Arc<str>>, request: message::Request) -> Response {
        let session_id = session.unwrap_or_else(|| "".into());
        let context = Context {
            state: self.state,
            session_id: &session_id,
            headers: &self.parts.headers,
            peer: self.peer,
            caller: self.caller,
        };
        methods::answer(context, request).await
    }

    /// `logging/setLevel` (up to 2025-11-25): the level of every session in
    /// the view.
    async fn set_level(
        &self,
        members: &Members,
        request: &message::Request,
    ) -> Result<Answer, Rejected> {
        #[derive(Deserialize)]
        struct SetLevel {
            level: String,
        }
        let SetLevel { level } = request.params_as()?;
        let level = LogLevel::parse(&level).ok_or_else(|| {
            Rejected::invalid_params(format!(
                "Invalid params: unknown log level {}; MCP names debug, info, notice, warning, error, critical, alert and emergency",
                escape::quoted(&level)
            ))
        })?;
        for member in members.iter() {
            // A session that ended meanwhile has no level to keep.
            let _ = self.state.hub.set_log_level(&member.record.id, level).await;
        }
        Ok(Answer::result(&request.id, serde_json::json!({})))
    }
}

/// The string param `key` (of the object param `outer`, when given).
fn named(request: &message::Request, outer: Option<&str>, key: &str) -> Option<String> {
    let params: serde_json::Value = serde_json::from_str(request.params_text()).ok()?;
    let holder = match outer {
        Some(outer) => params.get(outer)?,
        None => &params,
    };
    holder.get(key)?.as_str().map(str::to_owned)
}

/// The refusal of a name or URI that no session of the user's serves now.
fn unknown(request: &message::Request, named: &str) -> Answer {
    let what = match request.method.as_str() {
        "tools/call" => "tool",
        "prompts/get" => "prompt",
        "completion/complete" if !named.contains(':') => "prompt",
        _ => "resource",
    };
    Rejected::invalid_params(format!(
        "Unknown {what} {}: none of your sessions serves it now (the session may have ended); list again to see what your sessions serve",
        escape::quoted(named)
    ))
    .answering(&request.id)
    .into()
}
