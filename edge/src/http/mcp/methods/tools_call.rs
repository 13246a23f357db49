//! `tools/call`: the request that carries the load. The arguments and
//! `_meta` go to the app as the exact text the client sent, and an object
//! result comes back as the exact text the app wrote (no number changes on
//! the way; docs/mcp.md, "JSON fidelity"). The call runs through the one
//! [`call_tool`]; its answer is JSON, or an event stream once the app
//! reports progress, logs or asks the client something first. At
//! 2026-07-28 a call whose app asks the client goes in `input_required`
//! rounds ([`crate::http::mcp::rounds`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use std::future::Future;

use futures_util::future::{BoxFuture, Either};
use openclaw_proxy_core::asking::Askable;
use openclaw_proxy_core::progress::{LogLevel, ProgressReceiver};
use openclaw_proxy_core::tools::ClientCapability;
use openclaw_proxy_core::{Caller, Hub};
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::ErrorData as McpError;
use rmcp::model::{ContentBlock, MetaObject, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tracing::Instrument;

use super::Context;
use crate::http::mcp::call::{InFlight, Progress, ToolCall, call_tool};
use crate::http::mcp::methods::tasks;
use crate::http::mcp::rounds::{self, Named};
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::{AbortOnDrop, Answer, Listening, answer_with_progress};
use crate::http::mcp::transport::headers::check_param_headers;
use crate::http::mcp::transport::request::{Request, Revision};

/// The params of a `tools/call`, the arguments unread.
#[derive(Deserialize)]
struct Params<'a> {
    name: String,
    /// Passed to the app as sent; it must be a JSON object.
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    /// The client's answers to the requests of an `input_required` result
    /// (2026-07-28), by key.
    #[serde(rename = "inputResponses", default)]
    input_responses: Option<Box<RawValue>>,
    /// The `requestState` of that result, echoed (2026-07-28).
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
    /// Set when the client calls the tool as a task (2025-11-25).
    #[serde(default)]
    task: Option<tasks::TaskParams>,
}

/// A tool's result as this server writes it: `structuredContent` as the
/// app's exact text, `resultType` at 2026-07-28 only.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult<'a> {
    content: &'a [ContentBlock],
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a MetaObject>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result_type: Option<&'static str>,
}

/// The answer to a call's outcome at `revision`.
pub(crate) fn render(
    id: &RequestId,
    revision: Revision,
    outcome: Result<RawToolResult, McpError>,
) -> Answer {
    match outcome {
        Ok(RawToolResult { result, structured }) => Answer::result(
            id,
            ToolResult {
                content: &result.content,
                structured_content: structured.as_deref(),
                is_error: result.is_error,
                meta: result.meta.as_ref(),
                result_type: revision.per_request().then_some("complete"),
            },
        ),
        Err(error) => {
            let data = error
                .data
                .as_ref()
                .and_then(|data| serde_json::value::to_raw_value(data).ok());
            Answer::error(Some(id), error.code, &error.message, data.as_deref())
        }
    }
}

/// The owned parts of a [`ToolCall`], so that a call can move to a task of
/// its own.
struct Prepared {
    jsonrpc_id: String,
    name: String,
    arguments_json: String,
    meta_json: String,
    client: openclaw_proxy_core::proto::CallerInfo,
    caller: Caller,
    peer: Option<SocketAddr>,
    trace_parent: String,
    /// What the operator's policy asks the user to confirm, if anything.
    confirm: Option<Arc<str>>,
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
            confirm: self.confirm,
            task_id: String::new(),
        }
    }
}

/// Answers a `tools/call`. A client that goes away drops this future (or
/// the answer's stream), which releases the call on the bridge.
///
/// Not async: the call is prepared here, and the future returned is the one
/// that listens for what comes before the answer (an async block would keep
/// room for every value it moved on). A call that may be parked (2026-07-28
/// rounds) and a refusal are boxed.
pub fn answer<'a>(
    context: Context<'a>,
    request: Request,
) -> Either<impl Future<Output = Response> + Send + 'a, BoxFuture<'a, Response>> {
    let refused = |rejected: Rejected| -> Either<_, BoxFuture<'a, Response>> {
        let response = rejected.answering(&request.id).into_response();
        Either::Right(Box::pin(std::future::ready(response)))
    };
    let params: Params<'_> = match serde_json::from_str(request.params_text()) {
        Ok(params) => params,
        Err(error) => {
            return refused(Rejected::invalid_params(format!(
                "Invalid params: tools/call needs params {{\"name\": string, \"arguments\"?: object}}: {error}"
            )));
        }
    };
    if params
        .arguments
        .is_some_and(|raw| !raw.get().starts_with('{') && raw.get() != "null")
    {
        return refused(Rejected::invalid_params(
            "Invalid params: tools/call arguments must be a JSON object",
        ));
    }
    let (log_level, client) = (context.log_level(&request), context.client(&request));
    let Context {
        state,
        session_id,
        headers,
        peer,
        caller,
    } = context;
    let (hub, in_flight) = (&state.hub, &state.in_flight);
    let meta = &request.meta;
    let prepared = Prepared {
        jsonrpc_id: serde_json::to_string(&request.id).unwrap_or_default(),
        client,
        caller,
        trace_parent: request.trace_parent(headers),
        arguments_json: params
            .arguments
            .filter(|raw| raw.get() != "null")
            .map_or_else(|| "{}".to_owned(), |raw| raw.get().to_owned()),
        meta_json: meta
            .text
            .as_deref()
            .map(|raw| raw.get().to_owned())
            .unwrap_or_default(),
        name: params.name,
        peer,
        confirm: None,
    };
    let askable = meta.askable;
    let revision = request.revision;
    let policy = state.config.policy.clone();
    let tasks_on = revision == Revision::WithInitialize && state.tasks.enabled();
    if tasks_on && let Some(task) = params.task {
        let listening = (request.id, meta.progress.clone(), log_level, askable);
        return Either::Right(Box::pin(async move {
            let mut prepared = prepared;
            if let Err(refused) = admit(policy.as_deref(), hub, session_id, &mut prepared).await {
                return render(&listening.0, revision, Err(refused)).into_response();
            }
            as_task(state, session_id, listening, (task, revision), prepared).await
        }));
    }
    // At 2026-07-28 the proxy makes a task of a call whose tool allows it,
    // for a client that declared the extension; `None` with tasks off.
    let tasks_declared = (revision == Revision::PerRequest && state.tasks.enabled())
        .then(|| tasks::declares_extension(meta.text.as_deref()));
    // At 2026-07-28 a call whose client can be asked something goes in
    // rounds; one that declared nothing it can be asked is not parked (the
    // app's requests are refused naming what the client lacks).
    if revision == Revision::PerRequest
        && (askable != Askable::NOTHING_DECLARED
            || params.request_state.is_some()
            || tasks_declared == Some(true))
    {
        let round = rounds::Round {
            hub: hub.clone(),
            rounds: state.rounds.clone(),
            session_id: session_id.clone(),
            named: Named::tool(prepared.name.clone()),
            id: request.id.clone(),
            token: meta.progress.clone(),
            answers: rounds::answers_of(params.input_responses.as_deref()),
        };
        return Either::Right(match params.request_state {
            Some(state) => Box::pin(async move { round.resume(&state).await }),
            // An async block: the call's task is spawned when the answer
            // first runs, inside the request's span, which the task inherits.
            None => Box::pin(async move {
                let mut prepared = prepared;
                if let Err(refused) = admit(policy.as_deref(), hub, session_id, &mut prepared).await
                {
                    return render(&round.id, revision, Err(refused)).into_response();
                }
                let named = (prepared.name.as_str(), prepared.arguments_json.as_str());
                let checks = (askable, tasks_declared, &prepared.caller);
                if let Err(rejected) = preflight(hub, session_id, named, headers, checks).await {
                    return rejected.answering(&round.id).into_response();
                }
                if tasks_declared == Some(true)
                    && tasks::runs_as_task(hub, session_id, &prepared.name).await
                {
                    let listening = (round.id.clone(), None, log_level, askable);
                    let task = (tasks::TaskParams::default(), revision);
                    return as_task(state, session_id, listening, task, prepared).await;
                }
                let (running, reports) =
                    spawn_call(hub, in_flight, session_id, prepared, log_level, askable);
                round.start(running, reports).await
            }),
        });
    }
    let listening = Listening {
        token: meta.progress.clone(),
        log_level,
        askable,
    };
    let named = prepared.name.clone();
    let (hub, in_flight, session) = (hub.clone(), in_flight.clone(), session_id.clone());
    let id = request.id.clone();
    // At 2026-07-28 the client's capabilities and the `Mcp-Param-*` headers
    // are checked against the session's own tool before the call is made.
    let param_headers_sent = (revision == Revision::PerRequest).then(|| {
        headers
            .iter()
            .filter(|(name, _)| name.as_str().starts_with("mcp-param-"))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect::<axum::http::HeaderMap>()
    });
    let running = move |sink| async move {
        let mut prepared = prepared;
        if let Err(refused) = admit(policy.as_deref(), &hub, &session, &mut prepared).await {
            return render(&id, revision, Err(refused));
        }
        if tasks_on && let Err(rejected) = tasks::refuse_plain(&hub, &session, &prepared.name).await
        {
            return rejected.answering(&id).into();
        }
        if let Some(sent) = param_headers_sent {
            let call = (prepared.name.as_str(), prepared.arguments_json.as_str());
            let checks = (askable, tasks_declared, &prepared.caller);
            if let Err(rejected) = preflight(&hub, &session, call, &sent, checks).await {
                return rejected.answering(&id).into();
            }
        }
        let call = prepared.call(&session);
        let progress = Some(Progress::Reports(sink));
        let outcome = call_tool(&hub, &in_flight, call, progress, std::future::pending()).await;
        render(&id, revision, outcome)
    };
    Either::Left(answer_with_progress(
        request.id,
        session_id.clone(),
        named,
        running,
        listening,
    ))
}

/// A call made as an MCP task: answered at once with the task, its call
/// running on detached from this request (`crate::http::mcp::methods::tasks`).
async fn as_task(
    state: &crate::http::mcp::McpState,
    session_id: &Arc<str>,
    (id, token, log_level, askable): (
        RequestId,
        Option<rmcp::model::ProgressToken>,
        Option<LogLevel>,
        Askable,
    ),
    (task, revision): (tasks::TaskParams, Revision),
    prepared: Prepared,
) -> Response {
    let caller = prepared.caller.clone();
    let name = prepared.name.clone();
    let (hub, in_flight, session) = (
        state.hub.clone(),
        state.in_flight.clone(),
        session_id.clone(),
    );
    let start = move |task_id: String, cancel: tokio_util::sync::CancellationToken| {
        let (sink, events) = openclaw_proxy_core::progress::call_channel(log_level, askable);
        let call = Box::pin(async move {
            let mut call = prepared.call(&session);
            // Not cancelled by `notifications/cancelled` of the request
            // that made it: a task is cancelled with `tasks/cancel`.
            call.jsonrpc_id = format!("task:{task_id}");
            call.task_id = task_id;
            let progress = Some(Progress::Reports(sink));
            call_tool(&hub, &in_flight, call, progress, cancel.cancelled()).await
        });
        tasks::Started {
            call,
            events,
            token,
            log_level,
        }
    };
    tasks::call_as_task(
        state,
        session_id,
        &caller,
        (&id, &name, revision),
        &task,
        start,
    )
    .await
    .into_response()
}

/// The call under the operator's policy, when there is one: refused, or
/// renamed back to the app's tool and given the pinned arguments.
async fn admit(
    policy: Option<&crate::policy::Live>,
    hub: &Hub,
    session_id: &str,
    prepared: &mut Prepared,
) -> Result<(), McpError> {
    let Some(policy) = policy else {
        return Ok(());
    };
    let (name, arguments) = (&prepared.name, &prepared.arguments_json);
    let admitted = policy
        .admit_call(hub, session_id, name, arguments, &prepared.caller)
        .await?;
    if let Some(tool) = admitted.tool {
        prepared.name = tool;
    }
    if let Some(arguments_json) = admitted.arguments_json {
        prepared.arguments_json = arguments_json;
    }
    prepared.confirm = admitted.confirm;
    Ok(())
}

/// A 2026-07-28 call checked against the session's tool `named` (name,
/// arguments) before it is made: the client capabilities the tool needs
/// (`-32021`, 400, naming the missing ones), then the `Mcp-Param-*`
/// headers against its schema. A tool the session does not have, or that
/// this caller may not see, is the call's own error to report.
async fn preflight(
    hub: &Hub,
    session_id: &str,
    (tool, arguments): (&str, &str),
    headers: &axum::http::HeaderMap,
    (askable, tasks_declared, caller): (Askable, Option<bool>, &Caller),
) -> Result<(), Rejected> {
    let Ok(tools) = hub.tools(session_id).await else {
        return Ok(());
    };
    let Some(known) = tools.iter().find(|known| &*known.name == tool) else {
        return Ok(());
    };
    if !caller.may_use(known) {
        return Ok(());
    }
    if tasks_declared == Some(false)
        && known.task_support == openclaw_proxy_core::tools::TaskSupport::Required
    {
        return Err(tasks::extension_missing(tool));
    }
    let missing: Vec<ClientCapability> = known
        .requires_client
        .iter()
        .filter(|capability| !declares(askable, *capability))
        .collect();
    if !missing.is_empty() {
        return Err(Rejected::missing_capabilities(tool, &missing));
    }
    check_param_headers(known.input_schema.as_str(), arguments, headers)
}

/// Whether a client that can be asked `askable` declared `capability`. A
/// client whose capabilities are not known here (before 2026-07-28) is
/// taken at its word, as for the app's own requests.
fn declares(askable: Askable, capability: ClientCapability) -> bool {
    match askable {
        Askable::Any => true,
        Askable::Nothing => false,
        Askable::Declared {
            elicitation,
            sampling,
            roots,
        } => match capability {
            ClientCapability::Elicitation => elicitation.form,
            ClientCapability::ElicitationUrl => elicitation.url,
            ClientCapability::Sampling => sampling,
            ClientCapability::Roots => roots,
        },
    }
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
            Box::new(move |id: &RequestId| render(id, Revision::PerRequest, outcome))
                as rounds::Finished
        }
        .in_current_span(),
    );
    (AbortOnDrop(running), reports)
}
