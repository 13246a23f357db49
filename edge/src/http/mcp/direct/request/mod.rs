//! The direct path of the requests the app answers (`resources/read`,
//! `prompts/get`, `completion/complete`): the params go to the app as the
//! client wrote them and the app's result comes back as the app wrote it,
//! byte for byte, as tool results do.
//!
//! The plain shapes are taken at every revision: up to 2025-11-25, and at
//! 2026-07-28 when `_meta` and the `Mcp-Method`/`Mcp-Name` headers are
//! valid as rmcp judges them (a read's answer then gets the caching hints
//! rmcp would fill in, and a missing resource is `-32602`). Anything unusual
//! goes to rmcp, whose typed answer keeps every content type but not every
//! number's text.
//!
//! At 2026-07-28 a `prompts/get` or `resources/read` whose app asks the
//! client something while it answers goes in rounds, as a tool call does
//! ([`super::rounds`]): an `input_required` result, then the client's retry
//! with its answers. Up to 2025-11-25 the answer becomes an event stream
//! once the app reports progress, writes a log record the client wants
//! (the session's `logging/setLevel`, or at 2026-07-28 the request's own
//! level) or asks the client something, as a tool call's does.
//!
//! This file holds the request as taken and sends it to the app;
//! `parse.rs` decides which requests the direct path takes, `answer.rs`
//! writes the app's answer as rmcp would at the request's revision.

mod answer;
mod parse;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::HeaderMap;
use axum::response::Response;
use openclaw_proxy_core::outcome::McpReply;
use openclaw_proxy_core::progress::{Askable, LogLevel, ProgressReceiver};
use openclaw_proxy_core::{AppRequest, CallContext, Caller, Hub, InvokeError, Origin, Transport};
use rmcp::model::{Implementation, ProgressToken, RequestId};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use serde_json::value::RawValue;
use tracing::Instrument;

use super::super::call::{InFlight, caller_of, trace_parent_of};
use super::parse::Revision;
use super::rounds::{self, Finished, Named};
use super::{AbortOnDrop, Answering, Listening, answer_with_progress};

pub(super) use answer::Answered;
pub use parse::parse_request;

/// A request the app answers, as the direct path takes it.
pub struct DirectRequest {
    id: RequestId,
    method: &'static str,
    /// What it names: the URI read, the prompt got, the completion's
    /// reference.
    target: String,
    /// The params as the client wrote them.
    params: Box<RawValue>,
    trace_parent: Option<String>,
    /// The client's identity from `_meta` (2026-07-28).
    client_info: Option<Implementation>,
    revision: Revision,
    /// `_meta.progressToken`.
    progress: Option<ProgressToken>,
    /// The least severe log record the client wants (2026-07-28 `_meta`).
    log_level: Option<LogLevel>,
    /// The requests the client can be sent, from its capabilities
    /// (2026-07-28).
    askable: Askable,
    /// The answers and state of a retried request (2026-07-28).
    input_responses: Option<Box<RawValue>>,
    request_state: Option<String>,
}

impl DirectRequest {
    /// The MCP method.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// What the request names.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The request's W3C `traceparent`: its `_meta` one, else the header's
    /// ([`crate::http::mcp::call::trace_parent`]).
    pub fn trace_parent(&self, headers: &HeaderMap) -> String {
        trace_parent_of(self.trace_parent.as_deref(), headers)
    }
}

/// Answers a request the direct path took.
pub async fn answer_request(
    state: &super::super::McpState,
    session_id: &Arc<str>,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    caller: Caller,
    request: DirectRequest,
) -> Response {
    let DirectRequest {
        id,
        method,
        target,
        params,
        trace_parent,
        client_info,
        revision,
        progress,
        log_level,
        askable,
        input_responses,
        request_state,
    } = request;
    // The level the request names (2026-07-28), else the session's.
    let log_level = log_level.or_else(|| state.hub.log_level(session_id));
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let mut context = CallContext {
        meta_json: String::new(),
        client: caller_of(client_info.as_ref(), version),
        caller,
        progress: None,
        trace_parent: trace_parent_of(trace_parent.as_deref(), headers),
        origin: Origin::new(Transport::Mcp, peer),
    };
    let asked = Asked {
        jsonrpc_id: serde_json::to_string(&id).unwrap_or_default(),
        method,
        target,
        params_json: params.get().to_owned(),
    };
    let in_rounds = method != "completion/complete"
        && revision == Revision::PerRequest
        && (askable != Askable::NOTHING_DECLARED || request_state.is_some());
    if in_rounds {
        let round = rounds::Round {
            hub: &state.hub,
            rounds: &state.rounds,
            session_id,
            named: Named {
                method,
                name: asked.target.clone(),
            },
            id,
            token: progress,
            answers: rounds::answers_of(input_responses.as_deref()),
        };
        if let Some(request_state) = request_state {
            return round.resume(&request_state).await;
        }
        let listening = Listening {
            token: None,
            log_level,
            askable,
        };
        let (running, reports) = spawn_request(state, session_id, asked, context, listening);
        return round.start(running, reports).await;
    }
    let askable = match revision {
        // The answer can become a stream carrying the app's requests.
        Revision::WithInitialize => Askable::Any,
        // Only the methods above go in rounds.
        Revision::PerRequest if method == "completion/complete" => Askable::Nothing,
        // A client that declared nothing it can be asked: the app's request
        // is refused naming what the client lacks.
        Revision::PerRequest => askable,
    };
    let answering = Answering {
        id,
        revision,
        named: Named {
            method,
            name: asked.target.clone(),
        },
    };
    let listening = Listening {
        token: progress,
        log_level,
        askable,
    };
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let running = move |sink| async move {
        context.progress = Some(sink);
        Finished::Request(asked.send(&hub, &in_flight, &session, context).await)
    };
    answer_with_progress(session_id, running, listening, answering).await
}

/// The owned parts of a request for the app, so that one in rounds can move
/// to a task of its own.
struct Asked {
    jsonrpc_id: String,
    method: &'static str,
    target: String,
    params_json: String,
}

impl Asked {
    /// Sends the request to the app; its answer, or the client's
    /// cancellation.
    async fn send(
        &self,
        hub: &Hub,
        in_flight: &InFlight,
        session_id: &str,
        context: CallContext,
    ) -> Result<McpReply, InvokeError> {
        let registered = in_flight.register(session_id, &self.jsonrpc_id);
        let request = AppRequest {
            method: self.method,
            target: &self.target,
            params_json: self.params_json.clone(),
        };
        tokio::select! {
            outcome = hub.request(session_id, request, context) => outcome,
            () = registered.cancelled() => Err(InvokeError::Remote("the request was cancelled by the client".into())),
        }
    }
}

/// A request in rounds on a task of its own, and its events (the app's
/// requests to the client, its progress).
fn spawn_request(
    state: &super::super::McpState,
    session_id: &Arc<str>,
    asked: Asked,
    mut context: CallContext,
    listening: Listening,
) -> (AbortOnDrop<Finished>, ProgressReceiver) {
    let Listening {
        log_level, askable, ..
    } = listening;
    let (sink, reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    context.progress = Some(sink);
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let running = tokio::spawn(
        async move { Finished::Request(asked.send(&hub, &in_flight, &session, context).await) }
            .in_current_span(),
    );
    (AbortOnDrop(running), reports)
}
