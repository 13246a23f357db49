//! The direct path of `tools/call`: the one request that carries the load.
//!
//! rmcp's stateless transport costs several task hand-offs per request, more
//! than the whole bridge round trip; for the common shapes of `tools/call`
//! (one JSON-RPC request, at any revision rmcp would accept it) this module
//! parses with rmcp's model types, runs the one [`call_tool`] and writes
//! rmcp's response shape, JSON or an SSE stream once progress comes first.
//! Everything unusual goes to rmcp unchanged, so every refusal stays rmcp's.
//! Answers carry [`SERVED_BY_HEADER`]` : direct`, so the end-to-end tests can
//! compare the two paths byte for byte. Arguments, `_meta` and object results
//! travel as the exact text sent (no number changes on the way).
//!
//! The shapes served and the fidelity rules: `docs/mcp.md` ("JSON fidelity");
//! why: `ARCHITECTURE.md` ("MCP").
//!
//! Which requests the path takes is `parse.rs`; this file answers them.

mod parse;
mod request;
mod rounds;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::{BoxFuture, Either};
use openclaw_proxy_core::progress::{Askable, CallEvent, LogLevel, ProgressReceiver};
use openclaw_proxy_core::{Caller, Hub};
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, ErrorCode, ProgressToken, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::common::http_header::HEADER_MCP_PROTOCOL_VERSION;
use serde_json::value::RawValue;
use tracing::Instrument;

use super::call::{
    InFlight, Progress, ToolCall, call_tool, caller_of, event_notification, log_thinned,
    trace_parent_of,
};
use crate::http::sse;

pub use parse::{DirectCall, MAX_NESTING, Revision, headers_allow, parse};
pub use request::{DirectRequest, answer_request, parse_request};
pub use rounds::{ResumeHere, Rounds};

/// `{}` with any whitespace: an empty `_meta`, which the app is not sent.
fn is_empty_object(text: &str) -> bool {
    text.strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .is_some_and(|inside| inside.trim().is_empty())
}

/// A JSON-RPC response carrying a tool result, in rmcp's field order, with
/// `structuredContent` written as the app's exact text.
fn exact_response<'a>(
    id: &'a RequestId,
    result: &'a CallToolResult,
    structured: Option<&'a RawValue>,
) -> impl serde::Serialize + 'a {
    #[derive(serde::Serialize)]
    struct Response<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: Body<'a>,
    }
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Body<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        result_type: Option<&'a rmcp::model::ResultType>,
        content: &'a [rmcp::model::ContentBlock],
        #[serde(skip_serializing_if = "Option::is_none")]
        structured_content: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<&'a rmcp::model::MetaObject>,
    }
    Response {
        jsonrpc: "2.0",
        id,
        result: Body {
            result_type: result.result_type.as_ref(),
            content: &result.content,
            structured_content: structured,
            is_error: result.is_error,
            meta: result.meta.as_ref(),
        },
    }
}

/// The response header that names the path which served a `tools/call`.
pub const SERVED_BY_HEADER: HeaderName = HeaderName::from_static("openclaw-proxy-served-by");

/// What a call ended with.
type Outcome = Result<RawToolResult, McpError>;

/// The JSON-RPC message answering a call, as rmcp writes it at `revision`
/// (with `structuredContent` as the app's exact text).
fn answer_message(id: &RequestId, revision: Revision, outcome: Outcome) -> Vec<u8> {
    let body = match outcome {
        Err(error) => serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(id.clone()))),
        Ok(RawToolResult { result, structured }) => {
            let mut result = ServerResult::CallToolResult(result);
            match revision {
                // The legacy-peer adjustments rmcp makes.
                Revision::WithInitialize => {
                    result.strip_result_type_for_legacy_peer();
                    result.strip_non_object_output_for_legacy_peer();
                }
                Revision::PerRequest => result.fill_missing_cache_hints(),
            }
            match &result {
                ServerResult::CallToolResult(result) => {
                    serde_json::to_vec(&exact_response(id, result, structured.as_deref()))
                }
                _ => serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone())),
            }
        }
    };
    body.unwrap_or_else(|error| {
        let error = McpError::internal_error(format!("cannot serialize the result: {error}"), None);
        serde_json::to_vec(&ServerJsonRpcMessage::error(error, Some(id.clone())))
            .unwrap_or_default()
    })
}

/// The HTTP status rmcp gives an answer of a 2026-07-28 request whose
/// `_meta` is well formed (this path serves no other); 200 before.
fn status_of(revision: Revision, outcome: &Outcome) -> StatusCode {
    match (revision, outcome) {
        (Revision::PerRequest, Err(error)) => match error.code {
            ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
            | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
            | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
            ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            _ => StatusCode::OK,
        },
        _ => StatusCode::OK,
    }
}

/// The message of one event of a call: a notification as rmcp writes it,
/// or the JSON-RPC request of the app to the client; `None` for a progress
/// report the client gave no token for.
fn notification_message(token: Option<&ProgressToken>, event: CallEvent) -> Option<Vec<u8>> {
    if let CallEvent::Ask(ask) = &event {
        return Some(super::carrier::request_message(ask));
    }
    let message = ServerJsonRpcMessage::notification(event_notification(token, event)?);
    Some(serde_json::to_vec(&message).unwrap_or_default())
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (SERVED_BY_HEADER, HeaderValue::from_static("direct")),
        ],
        Body::from(body),
    )
        .into_response()
}

/// An event stream of the direct path.
fn sse_response(body: Body) -> Response {
    let mut response = sse::response(body);
    response
        .headers_mut()
        .insert(SERVED_BY_HEADER, HeaderValue::from_static("direct"));
    response
}

/// A task that is aborted when this handle is dropped: a streaming call
/// whose client went away.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The owned parts of a [`ToolCall`], so a streaming call can move to a
/// task of its own.
struct Prepared {
    jsonrpc_id: String,
    name: String,
    arguments_json: String,
    meta_json: String,
    client: openclaw_proxy_core::proto::CallerInfo,
    caller: Caller,
    peer: Option<SocketAddr>,
    trace_parent: String,
}

impl Prepared {
    fn call(self, session_id: &str) -> ToolCall<'_> {
        ToolCall {
            session_id,
            jsonrpc_id: self.jsonrpc_id,
            client: self.client,
            caller: self.caller,
            name: self.name,
            arguments_json: self.arguments_json,
            meta_json: self.meta_json,
            peer: self.peer,
            trace_parent: self.trace_parent,
        }
    }
}

/// The answer of a parsed call. A client that goes away drops this future
/// (or the answer's stream), which releases the call on the bridge.
///
/// Not async: the call is prepared here, and its future is the one that
/// listens for what comes before the answer (an async block would keep
/// room for the values it moved into the call, and this future is moved
/// per call). A call that may be parked (2026-07-28 rounds) is boxed.
pub fn answer<'a>(
    state: &'a super::McpState,
    session_id: &'a Arc<str>,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
    caller: Caller,
    call: DirectCall,
) -> Either<impl Future<Output = Response> + Send + 'a, BoxFuture<'a, Response>> {
    let (hub, in_flight) = (&state.hub, &state.in_flight);
    let DirectCall {
        id,
        name,
        arguments,
        meta_text,
        client_info,
        trace_parent,
        progress,
        log_level,
        revision,
        askable,
        input_responses,
        request_state,
    } = call;
    // The level the request names (2026-07-28), else the session's.
    let log_level = log_level.or_else(|| hub.log_level(session_id));
    let version = headers
        .get(HEADER_MCP_PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok());
    let prepared = Prepared {
        jsonrpc_id: serde_json::to_string(&id).unwrap_or_default(),
        // The client's name from a 2026-07-28 `_meta`.
        client: caller_of(client_info.as_ref(), version),
        caller,
        trace_parent: trace_parent_of(trace_parent.as_deref(), headers),
        name,
        arguments_json: arguments.map_or_else(|| "{}".to_owned(), |raw| raw.get().to_owned()),
        meta_json: meta_text
            .map(|raw| raw.get().to_owned())
            .filter(|text| !is_empty_object(text))
            .unwrap_or_default(),
        peer,
    };
    // Every call not parked listens (before 2026-07-28 the app may ask its
    // client anything); at 2026-07-28 a client that sent no capabilities at
    // all (`Askable::Nothing`) is parked, one that declared none is not.
    if revision == Revision::PerRequest
        && (askable != Askable::NOTHING_DECLARED || request_state.is_some())
    {
        let round = rounds::Round {
            hub,
            rounds: &state.rounds,
            session_id,
            named: rounds::Named::tool(prepared.name.clone()),
            id,
            token: progress,
            answers: rounds::answers_of(input_responses.as_deref()),
        };
        // Async blocks: the call's task is spawned when the answer first
        // runs, inside the request's span, which the task inherits.
        return Either::Right(match request_state {
            Some(state) => Box::pin(async move { round.resume(&state).await }),
            None => Box::pin(async move {
                let (running, reports) =
                    spawn_call(hub, in_flight, session_id, prepared, log_level, askable);
                round.start(running, reports).await
            }),
        });
    }
    let answering = Answering {
        id,
        revision,
        named: rounds::Named::tool(prepared.name.clone()),
    };
    let listening = Listening {
        token: progress,
        log_level,
        askable,
    };
    let (hub, in_flight, session) = (hub.clone(), in_flight.clone(), session_id.clone());
    let running = move |sink| async move {
        let call = prepared.call(&session);
        let progress = Some(Progress::Reports(sink));
        let outcome = call_tool(&hub, &in_flight, call, progress, std::future::pending()).await;
        rounds::Finished::Tool(outcome)
    };
    Either::Left(answer_with_progress(
        session_id, running, listening, answering,
    ))
}

/// The call's task and its events, for a call that may be parked.
fn spawn_call(
    hub: &Hub,
    in_flight: &Arc<InFlight>,
    session_id: &Arc<str>,
    prepared: Prepared,
    log_level: Option<LogLevel>,
    askable: Askable,
) -> (AbortOnDrop<rounds::Finished>, ProgressReceiver) {
    let (sink, reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    let (hub, in_flight, session) = (hub.clone(), in_flight.clone(), session_id.clone());
    let running = tokio::spawn(
        async move {
            let call = prepared.call(&session);
            let progress = Some(Progress::Reports(sink));
            let outcome = call_tool(&hub, &in_flight, call, progress, std::future::pending()).await;
            rounds::Finished::Tool(outcome)
        }
        .in_current_span(),
    );
    (AbortOnDrop(running), reports)
}

/// What the answer to a call needs: the request's id and revision, and
/// what it asked for.
struct Answering {
    id: RequestId,
    revision: Revision,
    named: rounds::Named,
}

impl Answering {
    /// The JSON-RPC message answering what the call ended with, and its
    /// HTTP status.
    fn message(&self, finished: rounds::Finished) -> (StatusCode, Vec<u8>) {
        match finished {
            rounds::Finished::Tool(outcome) => (
                status_of(self.revision, &outcome),
                answer_message(&self.id, self.revision, outcome),
            ),
            rounds::Finished::Request(outcome) => {
                let answered = request::Answered {
                    id: &self.id,
                    method: self.named.method,
                    target: &self.named.name,
                    revision: self.revision,
                };
                (StatusCode::OK, answered.body(outcome))
            }
        }
    }

    /// The answer as one JSON response.
    fn json(&self, finished: rounds::Finished) -> Response {
        let (status, message) = self.message(finished);
        json_response(status, message)
    }
}

/// What the client of a call wants to hear before the answer.
struct Listening {
    /// Its `progressToken`, for progress reports.
    token: Option<ProgressToken>,
    /// The least severe log record it wants.
    log_level: Option<LogLevel>,
    /// Which requests of the app it can be sent.
    askable: Askable,
}

/// Answers a call whose client may hear of it before the answer (progress,
/// logs, the app's requests): as rmcp answers, JSON when the result comes
/// first, SSE once a notification or request does. `running` starts the
/// call, its events going to the sink it is given.
async fn answer_with_progress<F, Fut>(
    session_id: &Arc<str>,
    running: F,
    listening: Listening,
    answering: Answering,
) -> Response
where
    F: FnOnce(openclaw_proxy_core::progress::ProgressSink) -> Fut,
    Fut: Future<Output = rounds::Finished> + Send + 'static,
{
    // The core keeps the app's reports for this call; they are read here
    // and written on the answer, so a call whose app never reports costs
    // no notification at all.
    let Listening {
        token,
        log_level,
        askable,
    } = listening;
    let (sink, mut reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    let mut running = Box::pin(running(sink));
    let first = tokio::select! {
        biased;
        finished = &mut running => {
            let mut body = Vec::new();
            while let Some(event) = reports.try_recv_event() {
                if let Some(message) = notification_message(token.as_ref(), event) {
                    sse::push_json_event(&mut body, &message);
                }
            }
            log_thinned(session_id, &answering.named.name, reports.thinned());
            if body.is_empty() {
                return answering.json(finished);
            }
            let (_, answer) = answering.message(finished);
            sse::push_json_event(&mut body, &answer);
            return sse_response(Body::from(body));
        }
        Some(first) = first_notification(&mut reports, token.as_ref()) => first,
    };
    // Run on, whether or not the client reads, until the client goes away;
    // the core thins the reports a slow client leaves waiting.
    let running = AbortOnDrop(tokio::spawn(running.in_current_span()));
    let rest = Streaming {
        reports,
        running,
        token,
        session_id: session_id.clone(),
        answering,
        finished: None,
    };
    let first = sse::json_event(&first);
    let first = futures_util::stream::once(std::future::ready(Ok::<_, Infallible>(first)));
    let rest = futures_util::stream::unfold(Some(rest), |rest| async move {
        let mut rest = rest?;
        match rest.next().await {
            Next::Event(event) => Some((Ok(event), Some(rest))),
            Next::Last(event) => Some((Ok(event), None)),
        }
    });
    sse_response(Body::from_stream(futures_util::StreamExt::chain(
        first, rest,
    )))
}

/// A streaming call after its first notification.
struct Streaming {
    reports: ProgressReceiver,
    running: AbortOnDrop<rounds::Finished>,
    token: Option<ProgressToken>,
    session_id: Arc<str>,
    answering: Answering,
    /// What the call ended with, once its task has ended.
    finished: Option<rounds::Finished>,
}

enum Next {
    Event(Bytes),
    Last(Bytes),
}

impl Streaming {
    /// The SSE event of one event of the call, if it makes one.
    fn progress_event(&self, event: CallEvent) -> Option<Bytes> {
        notification_message(self.token.as_ref(), event).map(|message| sse::json_event(&message))
    }

    /// The next event: a notification, a keep-alive comment after
    /// [`sse::KEEP_ALIVE`] without one, or the answer, last (after every
    /// report that came before it, whoever still holds the report queue).
    async fn next(&mut self) -> Next {
        let keep_alive = || Next::Event(sse::KEEP_ALIVE_COMMENT);
        if self.finished.is_none() {
            tokio::select! {
                biased;
                event = self.reports.recv_event() => {
                    if let Some(event) = event {
                        return match self.progress_event(event) {
                            Some(event) => Next::Event(event),
                            None => Next::Event(Bytes::new()),
                        };
                    }
                    // No report can come any more: the answer is next.
                }
                joined = &mut self.running.0 => self.finished = Some(rounds::finished(joined)),
                () = tokio::time::sleep(sse::KEEP_ALIVE) => return keep_alive(),
            }
        }
        while let Some(event) = self.reports.try_recv_event() {
            if let Some(event) = self.progress_event(event) {
                return Next::Event(event);
            }
        }
        let finished = match self.finished.take() {
            Some(finished) => finished,
            None => tokio::select! {
                joined = &mut self.running.0 => rounds::finished(joined),
                () = tokio::time::sleep(sse::KEEP_ALIVE) => return keep_alive(),
            },
        };
        let named = &self.answering.named.name;
        log_thinned(&self.session_id, named, self.reports.thinned());
        let (_, answer) = self.answering.message(finished);
        Next::Last(sse::json_event(&answer))
    }
}

/// The first notification of a call: the first event that makes one (a
/// report without a token makes none); `None` once no event can come.
async fn first_notification(
    reports: &mut ProgressReceiver,
    token: Option<&ProgressToken>,
) -> Option<Vec<u8>> {
    loop {
        if let Some(message) = notification_message(token, reports.recv_event().await?) {
            return Some(message);
        }
    }
}
