//! The MCP methods the server answers, one file per method (or per family
//! of methods answered alike), over the one transport
//! ([`super::transport`]): each gets the parsed request and the
//! [`Context`] it arrived in, and returns the answer.
//!
//! The methods the app answers (`resources/read`, `prompts/get`,
//! `completion/complete`) share one path, [`app_served`], and differ only in
//! the [`app_served::AppServed`] each declares: which param names what it
//! asks for, whether it goes in `input_required` rounds at 2026-07-28, and
//! whether its result is cacheable. A new such method is its own file
//! declaring one, and a line in [`answer`] (ARCHITECTURE.md, "Adding an MCP
//! method the app answers").

mod app_served;
mod completion_complete;
mod discover;
mod initialize;
mod lists;
mod logging;
mod prompts_get;
mod resources_read;
mod subscriptions;
pub(crate) mod tasks;
mod tools_call;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::Response;
use openclaw_proxy_core::{Caller, escape};
use rmcp::model::ErrorCode;

use super::McpState;
use super::transport::Rejected;
use super::transport::answer::Answer;
use super::transport::request::{Request, Revision};
use axum::http::StatusCode;

/// The list pieces the one-URL view ([`super::view`]) builds its lists of.
pub(crate) use lists::{page, page_answer_ttl};
pub use tools_call::answer as call_tool;

/// Where a request arrived: the session it was routed to and what the
/// edge knows of it besides its body.
pub struct Context<'a> {
    pub state: &'a McpState,
    pub session_id: &'a Arc<str>,
    pub headers: &'a HeaderMap,
    /// The client's address.
    pub peer: Option<SocketAddr>,
    /// Which credential opened the request.
    pub caller: Caller,
}

impl Context<'_> {
    /// The least severe log record the client of `request` wants: the
    /// level the request names (2026-07-28), else the session's.
    fn log_level(&self, request: &Request) -> Option<openclaw_proxy_core::progress::LogLevel> {
        request
            .meta
            .log_level
            .or_else(|| self.state.hub.log_level(self.session_id))
    }

    /// Who is calling, as the client names itself (2026-07-28 `_meta`), and
    /// the revision its header names.
    fn client(&self, request: &Request) -> openclaw_proxy_core::proto::CallerInfo {
        let version = self
            .headers
            .get(super::transport::request::PROTOCOL_VERSION)
            .and_then(|value| value.to_str().ok());
        super::call::caller_of(request.meta.client_info.as_ref(), version)
    }
}

/// How long a client may treat a list as fresh (2026-07-28 `ttlMs`): lists
/// change only when the app updates them, and clients that hold a stream
/// hear of that at once; the others look again soon.
pub const TTL_MS: u64 = 60_000;

/// Answers one request.
pub async fn answer(context: Context<'_>, request: Request) -> Response {
    let answered = match request.method.as_str() {
        "tools/call" => return tools_call::answer(context, request).await,
        "resources/read" => &resources_read::METHOD,
        "prompts/get" => &prompts_get::METHOD,
        "completion/complete" => &completion_complete::METHOD,
        "subscriptions/listen" => return subscriptions::listen(context, request).await,
        "tasks/result" if context.state.tasks.enabled() && !request.revision.per_request() => {
            return crate::http::mcp::methods::tasks::result(context, request).await;
        }
        _ => {
            return Box::pin(answer_here(context, request))
                .await
                .into_response();
        }
    };
    Box::pin(app_served::answer(context, request, answered)).await
}

/// The methods 2026-07-28 removed: unknown at that revision.
const REMOVED_IN_2026: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Answers a request the server answers itself, from what it holds.
async fn answer_here(context: Context<'_>, request: Request) -> Answer {
    let removed = request.revision == Revision::PerRequest
        && REMOVED_IN_2026.contains(&request.method.as_str());
    let answered = match request.method.as_str() {
        _ if removed => Err(not_found(&request.method, request.revision)),
        "initialize" => initialize::answer(&context, &request),
        "server/discover" => Ok(discover::answer(&context, &request)),
        "ping" => Ok(Answer::result(&request.id, serde_json::json!({}))),
        "tools/list" => lists::tools(&context, &request).await,
        "resources/list" => lists::resources(&context, &request).await,
        "resources/templates/list" => lists::templates(&context, &request).await,
        "prompts/list" => lists::prompts(&context, &request).await,
        "logging/setLevel" => logging::set_level(&context, &request).await,
        "resources/subscribe" | "resources/unsubscribe" => {
            subscriptions::subscribe(&context, &request).await
        }
        "tasks/get" | "tasks/list" | "tasks/cancel"
            if context.state.tasks.enabled() && !request.revision.per_request() =>
        {
            crate::http::mcp::methods::tasks::answer(&context, &request).await
        }
        "tasks/get" | "tasks/update" | "tasks/cancel"
            if context.state.tasks.enabled() && request.revision.per_request() =>
        {
            crate::http::mcp::methods::tasks::answer(&context, &request).await
        }
        method => Err(not_found(method, request.revision)),
    };
    answered.unwrap_or_else(|rejected| rejected.answering(&request.id).into())
}

/// The refusal of a method this server does not serve (at this
/// revision), the method quoted cut short; at 2026-07-28 also a 404.
fn not_found(method: &str, revision: Revision) -> Rejected {
    let status = match revision {
        Revision::WithInitialize => StatusCode::OK,
        Revision::PerRequest => StatusCode::NOT_FOUND,
    };
    Rejected::new(
        status,
        ErrorCode::METHOD_NOT_FOUND,
        format!(
            "Method not found: this server does not serve {}",
            escape::quoted(method)
        ),
    )
}

/// The refusal of a request whose session went away, or whose session
/// state could not be read.
fn hub_refusal(error: &openclaw_proxy_core::HubError) -> Rejected {
    Rejected::new(
        StatusCode::OK,
        ErrorCode::INVALID_REQUEST,
        error.to_string(),
    )
}
