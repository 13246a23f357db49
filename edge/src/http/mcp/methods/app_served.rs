//! The requests the app answers besides tools (`resources/read`,
//! `prompts/get`, `completion/complete`, and any later server method):
//! the params go to the app as the client wrote them, over the bridge's one
//! generic `mcp_request`, and the app's result comes back as the app wrote
//! it, byte for byte, as tool results do.
//!
//! Each method declares what differs in an [`AppServed`]: the param that
//! names its target (for the hub's checks and the audit log), whether it
//! goes in `input_required` rounds at 2026-07-28 (a `prompts/get` or
//! `resources/read` whose app asks the client something while it answers),
//! and whether its result is cacheable. Up to 2025-11-25 the answer becomes
//! an event stream once the app reports progress, writes a log record the
//! client wants or asks the client something, as a tool call's does.

mod answer;

use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::asking::Askable;
use openclaw_proxy_core::outcome::McpReply;
use openclaw_proxy_core::progress::ProgressReceiver;
use openclaw_proxy_core::{AppRequest, CallContext, Hub, InvokeError, Origin, Transport};
use rmcp::model::RequestId;
use tracing::Instrument;

use super::Context;
use crate::http::mcp::call::InFlight;
use crate::http::mcp::rounds::{self, Named};
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::{AbortOnDrop, Listening, answer_with_progress};
use crate::http::mcp::transport::request::{Request, Revision};

pub(crate) use answer::render;

/// What one method the app answers needs of the server.
pub struct AppServed {
    /// The MCP method.
    pub method: &'static str,
    /// What the request names (the URI read, the prompt got, the
    /// completion's reference), read from its params text; the error names
    /// the param that is missing.
    pub target: fn(&str) -> Result<String, String>,
    /// Whether, at 2026-07-28, the app may ask the client something while
    /// it answers (in `input_required` rounds).
    pub in_rounds: bool,
    /// Whether a complete result gets caching hints at 2026-07-28.
    pub cacheable: bool,
}

/// Answers a request the app answers.
pub(super) async fn answer(
    context: Context<'_>,
    request: Request,
    served: &'static AppServed,
) -> Response {
    let target = match (served.target)(request.params_text()) {
        Ok(target) => target,
        Err(why) => {
            return Rejected::invalid_params(format!("Invalid params: {}: {why}", served.method))
                .answering(&request.id)
                .into_response();
        }
    };
    #[derive(serde::Deserialize)]
    struct Retry {
        #[serde(rename = "inputResponses", default)]
        input_responses: Option<Box<serde_json::value::RawValue>>,
        #[serde(rename = "requestState", default)]
        request_state: Option<String>,
    }
    // Rounds are a 2026-07-28 thing; before, these keys are the app's.
    let retry = match request.revision {
        Revision::PerRequest if served.in_rounds => {
            serde_json::from_str::<Retry>(request.params_text()).unwrap_or(Retry {
                input_responses: None,
                request_state: None,
            })
        }
        _ => Retry {
            input_responses: None,
            request_state: None,
        },
    };
    let (log_level, client) = (context.log_level(&request), context.client(&request));
    let Context {
        state,
        session_id,
        headers,
        peer,
        caller,
    } = context;
    let meta = &request.meta;
    let mut context = CallContext {
        meta_json: String::new(),
        client,
        caller,
        progress: None,
        trace_parent: request.trace_parent(headers),
        origin: Origin::new(Transport::Mcp, peer),
        confirm: None,
        task_id: String::new(),
    };
    let asked = Asked {
        jsonrpc_id: serde_json::to_string(&request.id).unwrap_or_default(),
        served,
        target,
        params_json: request.params_text().to_owned(),
    };
    let askable = meta.askable;
    let in_rounds = served.in_rounds
        && request.revision == Revision::PerRequest
        && (askable != Askable::NOTHING_DECLARED || retry.request_state.is_some());
    if in_rounds {
        let round = rounds::Round {
            hub: state.hub.clone(),
            rounds: state.rounds.clone(),
            session_id: session_id.clone(),
            named: Named::of(served.method, asked.target.clone()),
            id: request.id.clone(),
            token: None,
            answers: rounds::answers_of(retry.input_responses.as_deref()),
        };
        if let Some(request_state) = retry.request_state {
            return round.resume(&request_state).await;
        }
        let (running, reports) =
            spawn_request(state, session_id, asked, context, log_level, askable);
        return round.start(running, reports).await;
    }
    let askable = match request.revision {
        // The answer can become a stream carrying the app's requests.
        Revision::WithInitialize => Askable::Any,
        // A method that goes in no rounds asks nothing at 2026-07-28.
        Revision::PerRequest if !served.in_rounds => Askable::Nothing,
        // A client that declared nothing it can be asked: the app's request
        // is refused naming what the client lacks.
        Revision::PerRequest => askable,
    };
    let listening = Listening {
        token: meta.progress.clone(),
        log_level,
        askable,
    };
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let named = asked.target.clone();
    let (id, revision) = (request.id.clone(), request.revision);
    let running = move |sink| async move {
        context.progress = Some(sink);
        let outcome = asked.send(&hub, &in_flight, &session, context).await;
        render(&id, revision, asked.served, &asked.target, outcome)
    };
    answer_with_progress(request.id, session_id.clone(), named, running, listening).await
}

/// The owned parts of a request for the app, so that one in rounds can move
/// to a task of its own.
struct Asked {
    jsonrpc_id: String,
    served: &'static AppServed,
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
            method: self.served.method,
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
    state: &crate::http::mcp::McpState,
    session_id: &std::sync::Arc<str>,
    asked: Asked,
    mut context: CallContext,
    log_level: Option<openclaw_proxy_core::progress::LogLevel>,
    askable: Askable,
) -> (AbortOnDrop<rounds::Finished>, ProgressReceiver) {
    let (sink, reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    context.progress = Some(sink);
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let running = tokio::spawn(
        async move {
            let outcome = asked.send(&hub, &in_flight, &session, context).await;
            Box::new(move |id: &RequestId| {
                render(
                    id,
                    Revision::PerRequest,
                    asked.served,
                    &asked.target,
                    outcome,
                )
            }) as rounds::Finished
        }
        .in_current_span(),
    );
    (AbortOnDrop(running), reports)
}
