//! MCP tasks on the MCP endpoint (docs/mcp.md, "Tasks"): a `tools/call`
//! that carries `params.task` (2025-11-25) is answered at once with a
//! task, and the call runs on, detached from the request, as an ordinary
//! call of the app (its `InvokeTool.task_id` names the task). The client
//! polls `tasks/get`, fetches the result with `tasks/result` (which waits
//! for it), lists its tasks and cancels them.
//!
//! The task's state and result live in the core's store
//! ([`openclaw_proxy_core::tasks::Tasks`]); what lives here is per process:
//! the running calls ([`running`]), which keep what the app sends its
//! caller meanwhile (progress, log records, its requests to the client)
//! until a `tasks/result` request listens, and move the task to
//! `input_required` while the app waits for the client.
//!
//! Every operation names the task by id and opens it only for the session
//! and credential that created it; any other gets "not found", so ids of
//! other callers cannot be probed.

mod running;
mod wire;

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::tasks::{TaskError, TaskOwner, TaskSettings, Tasks};
use openclaw_proxy_core::tools::TaskSupport;
use rmcp::model::{ErrorCode, RequestId};
use serde::Deserialize;
use serde_json::Value;

use super::Context;
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::{Answer, Listening, answer_with_progress};
use crate::http::mcp::transport::request::{Request, Revision};
pub use running::Runs;

/// The key of the related task in a message's `_meta`.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// A `tools/call`'s `params.task` (2025-11-25): how long the client wants
/// the task kept.
#[derive(Debug, Default, Deserialize)]
pub struct TaskParams {
    #[serde(default)]
    pub ttl: Option<u64>,
}

/// The tasks of this process: the store and the calls running here.
pub struct TaskState {
    pub store: Arc<Tasks>,
    pub runs: Arc<Runs>,
}

impl TaskState {
    /// Tasks with `settings`, in memory.
    pub fn new(settings: TaskSettings) -> Self {
        let store = Arc::new(Tasks::new(settings));
        Self {
            runs: Arc::new(Runs::new(store.clone())),
            store,
        }
    }

    /// Whether clients may call tools as tasks.
    pub fn enabled(&self) -> bool {
        self.store.settings().enabled
    }
}

/// The `tasks` capability of 2025-11-25's `initialize`, when tasks are on.
pub fn capability() -> Value {
    serde_json::json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// Whether the revision of `request` knows `execution.taskSupport`
/// (2025-11-25 and later), so that `tools/list` shows it.
pub fn shows_execution(context: &Context<'_>, request: &Request) -> bool {
    request.revision == Revision::PerRequest
        || context
            .headers
            .get(crate::http::mcp::transport::request::PROTOCOL_VERSION)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|version| version >= "2025-11-25")
}

/// A `tools/list` entry's `execution`, for a tool that allows tasks.
pub fn execution(support: TaskSupport) -> Option<Value> {
    support
        .allows_task()
        .then(|| serde_json::json!({"taskSupport": support.as_str()}))
}

/// The owner of the tasks a request creates or opens.
fn owner(context: &Context<'_>) -> TaskOwner {
    TaskOwner::new(context.session_id, &context.caller)
}

/// The refusal of a task operation.
fn refusal(error: &TaskError) -> Rejected {
    match error {
        TaskError::NoRandomness => {
            Rejected::new(StatusCode::OK, ErrorCode::INTERNAL_ERROR, error.to_string())
        }
        TaskError::NotFound | TaskError::Terminal(_) | TaskError::BadCursor => {
            Rejected::invalid_params(error.to_string())
        }
    }
}

/// The refusal of a call of `tool` that runs as it may not: as a task when
/// the tool forbids it, or plainly when it requires a task (2025-11-25:
/// `-32601`, as the specification's tool-level negotiation says).
pub fn misuse(tool: &str, support: TaskSupport, as_task: bool) -> Option<Rejected> {
    let tool = openclaw_proxy_core::escape::quoted(tool);
    let message = match (support, as_task) {
        (TaskSupport::Forbidden, true) => format!(
            "Method not found: the tool {tool} cannot run as a task (its execution.taskSupport is \"forbidden\"); call it without params.task"
        ),
        (TaskSupport::Required, false) => format!(
            "Method not found: the tool {tool} runs only as a task (its execution.taskSupport is \"required\"); call it with params.task"
        ),
        _ => return None,
    };
    Some(Rejected::new(
        StatusCode::OK,
        ErrorCode::METHOD_NOT_FOUND,
        message,
    ))
}

/// The `taskId` params of `tasks/get`, `tasks/result` and `tasks/cancel`.
#[derive(Deserialize)]
struct Named {
    #[serde(rename = "taskId")]
    task_id: String,
}

#[derive(Deserialize)]
struct Paginated {
    #[serde(default)]
    cursor: Option<String>,
}

/// Whether a 2026-07-28 request's client declared the tasks extension in
/// its `_meta` capabilities.
pub fn declares_extension(meta: Option<&serde_json::value::RawValue>) -> bool {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default)]
        capabilities: Option<Capabilities>,
    }
    #[derive(Deserialize)]
    struct Capabilities {
        #[serde(default)]
        extensions: Option<serde_json::Map<String, Value>>,
    }
    meta.and_then(|raw| serde_json::from_str::<Meta>(raw.get()).ok())
        .and_then(|meta| meta.capabilities?.extensions)
        .is_some_and(|extensions| extensions.contains_key(rmcp::model::TASKS_EXTENSION_ID))
}

/// Whether the session's tool `tool` may run as a task (for a 2026-07-28
/// client that declared the extension: the proxy then makes it one).
pub async fn runs_as_task(hub: &openclaw_proxy_core::Hub, session_id: &str, tool: &str) -> bool {
    hub.tools(session_id).await.is_ok_and(|tools| {
        tools
            .iter()
            .any(|known| &*known.name == tool && known.task_support.allows_task())
    })
}

/// The 2026-07-28 refusal of a call of a tool that runs only as a task,
/// from a client that did not declare the extension: `-32021`, naming it.
pub fn extension_missing(tool: &str) -> Rejected {
    missing_extension(format!(
        "the tool {} runs only as a task: declare the {} extension in io.modelcontextprotocol/clientCapabilities",
        openclaw_proxy_core::escape::quoted(tool),
        rmcp::model::TASKS_EXTENSION_ID
    ))
}

/// The refusal of a task method from a client that did not declare the
/// extension (2026-07-28): `-32021`.
fn extension_missing_for(method: &str) -> Rejected {
    missing_extension(format!(
        "{method} belongs to the {} extension: declare it in io.modelcontextprotocol/clientCapabilities",
        rmcp::model::TASKS_EXTENSION_ID
    ))
}

fn missing_extension(message: String) -> Rejected {
    let mut rejected = Rejected::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        message,
    );
    rejected.data = serde_json::value::to_raw_value(&serde_json::json!({
        "requiredCapabilities": {"extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}}
    }))
    .ok();
    rejected
}

/// Answers the tasks extension's `tasks/get`, `tasks/update` and
/// `tasks/cancel` (2026-07-28).
async fn answer_2026(context: &Context<'_>, request: &Request) -> Result<Answer, Rejected> {
    if !declares_extension(request.meta.text.as_deref()) {
        return Err(extension_missing_for(&request.method));
    }
    let tasks = &context.state.tasks;
    let owner = owner(context);
    let ack = serde_json::json!({"resultType": "complete"});
    match request.method.as_str() {
        "tasks/get" => {
            let Named { task_id } = request.params_as()?;
            let (state, outcome) = tasks
                .store
                .detailed(&owner, &task_id)
                .map_err(|error| refusal(&error))?;
            let waiting = tasks.runs.waiting_asks(&task_id);
            Ok(Answer::result(
                &request.id,
                wire::Task2026::detailed(&state, outcome.as_ref(), &waiting),
            ))
        }
        "tasks/update" => {
            #[derive(Deserialize)]
            struct Update {
                #[serde(rename = "taskId")]
                task_id: String,
                #[serde(rename = "inputResponses", default)]
                input_responses: serde_json::Map<String, Value>,
            }
            let Update {
                task_id,
                input_responses,
            } = request.params_as()?;
            tasks
                .store
                .get(&owner, &task_id)
                .map_err(|error| refusal(&error))?;
            // Keys not waiting (never issued, answered, another task's)
            // are ignored, as the extension says.
            for (key, response) in input_responses {
                if !tasks.runs.waits_on(&task_id, &key) {
                    continue;
                }
                let answer =
                    openclaw_proxy_core::bridge::ClientAnswer::Result(response.to_string());
                if context
                    .state
                    .hub
                    .answer_client(context.session_id, &key, answer)
                    .await
                    .is_ok()
                {
                    tasks.runs.answered(&key);
                }
            }
            Ok(Answer::result(&request.id, ack))
        }
        "tasks/cancel" => {
            let Named { task_id } = request.params_as()?;
            match tasks.store.cancel(&owner, &task_id) {
                // Acknowledged, ended or not: cancellation is cooperative.
                Ok(_) | Err(TaskError::Terminal(_)) => Ok(Answer::result(&request.id, ack)),
                Err(error) => Err(refusal(&error)),
            }
        }
        _ => Err(Rejected::new(
            StatusCode::NOT_FOUND,
            ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
        )),
    }
}

/// Answers `tasks/get`, `tasks/list` and `tasks/cancel` (2025-11-25), and
/// the extension's `tasks/get`, `tasks/update` and `tasks/cancel`
/// (2026-07-28), from the store.
pub async fn answer(context: &Context<'_>, request: &Request) -> Result<Answer, Rejected> {
    if request.revision.per_request() {
        return answer_2026(context, request).await;
    }
    let tasks = &context.state.tasks;
    let owner = owner(context);
    match request.method.as_str() {
        "tasks/get" => {
            let Named { task_id } = request.params_as()?;
            let state = tasks
                .store
                .get(&owner, &task_id)
                .map_err(|error| refusal(&error))?;
            Ok(Answer::result(&request.id, wire::Task::of(&state)))
        }
        "tasks/list" => {
            let Paginated { cursor } = request.params_as()?;
            let (page, next) = tasks
                .store
                .list(&owner, cursor.as_deref())
                .map_err(|error| refusal(&error))?;
            let listed: Vec<wire::Task<'_>> = page.iter().map(wire::Task::of).collect();
            Ok(Answer::result(
                &request.id,
                wire::List {
                    tasks: &listed,
                    next_cursor: next,
                },
            ))
        }
        "tasks/cancel" => {
            let Named { task_id } = request.params_as()?;
            let state = tasks
                .store
                .cancel(&owner, &task_id)
                .map_err(|error| refusal(&error))?;
            tracing::info!(
                session = openclaw_proxy_core::escape::Outside::session(context.session_id).field(),
                "task cancelled by its client"
            );
            Ok(Answer::result(&request.id, wire::Task::of(&state)))
        }
        _ => Err(Rejected::new(
            StatusCode::OK,
            ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
        )),
    }
}

/// Answers `tasks/result`: the call's answer once the task ended, as the
/// call would have been answered, with the task named in its `_meta`.
/// While it runs, what the app sends its caller goes out on this request's
/// stream (its requests to the client among them, answered as any), and
/// the request waits.
pub async fn result(context: Context<'_>, request: Request) -> Response {
    let Named { task_id } = match request.params_as() {
        Ok(named) => named,
        Err(rejected) => return rejected.answering(&request.id).into_response(),
    };
    let owner = owner(&context);
    let tasks = &context.state.tasks;
    if let Err(error) = tasks.store.get(&owner, &task_id) {
        return refusal(&error).answering(&request.id).into_response();
    }
    let run = tasks.runs.get(&task_id);
    let listening = Listening {
        token: run.as_ref().and_then(|run| run.token.clone()),
        log_level: run.as_ref().and_then(|run| run.log_level),
        askable: openclaw_proxy_core::asking::Askable::Any,
    };
    let store = tasks.store.clone();
    let id = request.id.clone();
    let waiting = move |sink| async move {
        let _listening = run.map(|run| running::Run::listen(run, sink));
        match store.outcome(&owner, &task_id).await {
            Ok((_, outcome)) => wire::result_answer(&id, &task_id, &outcome),
            Err(error) => refusal(&error).answering(&id).into(),
        }
    };
    answer_with_progress(
        request.id,
        context.session_id.clone(),
        "tasks/result".to_owned(),
        waiting,
        listening,
    )
    .await
}

/// A plain `tools/call` of a tool that runs only as a task is refused
/// before the app sees it; a tool the session does not have is the call's
/// own error to report.
pub async fn refuse_plain(
    hub: &openclaw_proxy_core::Hub,
    session_id: &str,
    tool: &str,
) -> Result<(), Rejected> {
    let Ok(tools) = hub.tools(session_id).await else {
        return Ok(());
    };
    match tools.iter().find(|known| &*known.name == tool) {
        Some(known) => misuse(tool, known.task_support, false).map_or(Ok(()), Err),
        None => Ok(()),
    }
}

/// Answers a `tools/call` that asked to run as a task: refused when the
/// tool forbids it (or the session has no such tool), else the task is
/// created, its call started with `start`, and the answer is the task
/// (`CreateTaskResult`), at once.
pub async fn call_as_task(
    state: &super::McpState,
    session_id: &str,
    caller: &openclaw_proxy_core::Caller,
    (request_id, tool, revision): (&RequestId, &str, Revision),
    params: &TaskParams,
    start: impl FnOnce(String, tokio_util::sync::CancellationToken) -> running::Started,
) -> Answer {
    let tools = match state.hub.tools(session_id).await {
        Ok(tools) => tools,
        Err(error) => {
            return Rejected::new(
                StatusCode::OK,
                ErrorCode::INVALID_REQUEST,
                error.to_string(),
            )
            .answering(request_id)
            .into();
        }
    };
    let Some(known) = tools.iter().find(|known| &*known.name == tool) else {
        return Rejected::invalid_params(format!(
            "Unknown tool: this session has no tool {}",
            openclaw_proxy_core::escape::quoted(tool)
        ))
        .answering(request_id)
        .into();
    };
    if let Some(rejected) = misuse(tool, known.task_support, true) {
        return rejected.answering(request_id).into();
    }
    let tasks = &state.tasks;
    let owner = TaskOwner::new(session_id, caller);
    let created = match tasks.store.create(owner, params.ttl) {
        Ok(created) => created,
        Err(error) => return refusal(&error).answering(request_id).into(),
    };
    let started = start(created.state.id.clone(), created.cancel);
    tasks.runs.start(created.state.id.clone(), started);
    tracing::info!(
        session = openclaw_proxy_core::escape::Outside::session(session_id).field(),
        ttl_ms = created.state.ttl_ms,
        "task created"
    );
    match revision {
        Revision::WithInitialize => Answer::result(
            request_id,
            wire::Created {
                task: wire::Task::of(&created.state),
            },
        ),
        Revision::PerRequest => Answer::result(request_id, wire::Task2026::created(&created.state)),
    }
}

pub use running::Started;
