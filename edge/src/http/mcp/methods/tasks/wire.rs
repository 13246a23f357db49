//! Tasks as MCP writes them: the `Task` object, `CreateTaskResult`,
//! `ListTasksResult`, and the call's outcome as kept in the store and as
//! `tasks/result` answers it (the app's values unchanged, the task named
//! in `_meta`).

use openclaw_proxy_core::asking::ClientAsk;
use openclaw_proxy_core::tasks::{TaskOutcome, TaskState, TaskStatus, rfc3339};
use openclaw_proxy_proto::mcp::RawToolResult;
use rmcp::ErrorData as McpError;
use rmcp::model::{ErrorCode, RequestId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::RELATED_TASK;
use crate::http::mcp::transport::answer::Answer;

/// MCP's `Task` (2025-11-25).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task<'a> {
    task_id: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    status_message: &'a str,
    created_at: String,
    last_updated_at: String,
    ttl: u64,
    poll_interval: u64,
}

impl<'a> Task<'a> {
    pub fn of(state: &'a TaskState) -> Self {
        Self {
            task_id: &state.id,
            status: state.status.as_str(),
            status_message: &state.status_message,
            created_at: rfc3339(state.created_ms),
            last_updated_at: rfc3339(state.updated_ms),
            ttl: state.ttl_ms,
            poll_interval: state.poll_interval_ms,
        }
    }
}

/// `CreateTaskResult` (2025-11-25).
#[derive(Serialize)]
pub struct Created<'a> {
    pub task: Task<'a>,
}

/// `ListTasksResult`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct List<'a> {
    pub tasks: &'a [Task<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A task at 2026-07-28 (the tasks extension): `CreateTaskResult`
/// (`resultType: "task"`) and `tasks/get`'s `DetailedTask`
/// (`resultType: "complete"`, with what its status carries inlined).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task2026<'a> {
    result_type: &'static str,
    task_id: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    status_message: &'a str,
    created_at: String,
    last_updated_at: String,
    ttl_ms: u64,
    poll_interval_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_requests: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
}

impl<'a> Task2026<'a> {
    /// The `CreateTaskResult` of a task just created.
    pub fn created(state: &'a TaskState) -> Self {
        Self::of(state, "task", None, &[])
    }

    /// `tasks/get`'s answer: a tool result (an error result too) inlined
    /// as `completed`, a JSON-RPC error as `failed`, the app's waiting
    /// requests to the client as `inputRequests`.
    pub fn detailed(
        state: &'a TaskState,
        outcome: Option<&'a TaskOutcome>,
        waiting: &[(String, ClientAsk)],
    ) -> Self {
        Self::of(state, "complete", outcome, waiting)
    }

    fn of(
        state: &'a TaskState,
        result_type: &'static str,
        outcome: Option<&'a TaskOutcome>,
        waiting: &[(String, ClientAsk)],
    ) -> Self {
        let mut task = Self {
            result_type,
            task_id: &state.id,
            status: state.status.as_str(),
            status_message: &state.status_message,
            created_at: rfc3339(state.created_ms),
            last_updated_at: rfc3339(state.updated_ms),
            ttl_ms: state.ttl_ms,
            poll_interval_ms: state.poll_interval_ms,
            input_requests: None,
            result: None,
            error: None,
        };
        match (state.status, outcome) {
            (TaskStatus::InputRequired, _) => {
                task.input_requests = Some(
                    waiting
                        .iter()
                        .map(|(key, ask)| {
                            let params: Value =
                                serde_json::from_str(&ask.params_json).unwrap_or(Value::Null);
                            (
                                key.clone(),
                                serde_json::json!({"method": ask.method.as_str(), "params": params}),
                            )
                        })
                        .collect(),
                );
            }
            (TaskStatus::Completed | TaskStatus::Failed, Some(TaskOutcome::Result(raw))) => {
                task.status = TaskStatus::Completed.as_str();
                task.result = Some(raw);
            }
            (
                TaskStatus::Failed,
                Some(TaskOutcome::Error {
                    code,
                    message,
                    data,
                }),
            ) => {
                let mut error = serde_json::json!({"code": code, "message": message});
                if let Some(data) = data
                    && let Ok(data) = serde_json::from_str::<Value>(data.get())
                {
                    error["data"] = data;
                }
                task.error = Some(error);
            }
            _ => {}
        }
        task
    }
}

/// A tool's result as kept: `structuredContent` the app's exact text.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept<'a> {
    #[serde(borrow)]
    content: &'a RawValue,
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a RawValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    meta: Option<Map<String, Value>>,
}

/// A call's outcome as the store keeps it, and whether the task failed
/// (an error result, or a JSON-RPC error instead of a result).
pub fn outcome_of(outcome: Result<RawToolResult, McpError>) -> (TaskOutcome, bool) {
    match outcome {
        Ok(RawToolResult { result, structured }) => {
            let content = serde_json::value::to_raw_value(&result.content);
            let meta = result
                .meta
                .as_ref()
                .and_then(|meta| serde_json::to_value(meta).ok())
                .and_then(|meta| match meta {
                    Value::Object(map) => Some(map),
                    _ => None,
                });
            let failed = result.is_error == Some(true);
            let kept = content.ok().and_then(|content| {
                serde_json::value::to_raw_value(&Kept {
                    content: &content,
                    structured_content: structured.as_deref(),
                    is_error: result.is_error,
                    meta,
                })
                .ok()
            });
            match kept {
                Some(kept) => (TaskOutcome::Result(kept), failed),
                None => (
                    TaskOutcome::Error {
                        code: ErrorCode::INTERNAL_ERROR.0,
                        message: "the tool's result could not be kept".to_owned(),
                        data: None,
                    },
                    true,
                ),
            }
        }
        Err(error) => (
            TaskOutcome::Error {
                code: error.code.0,
                message: error.message.into_owned(),
                data: error
                    .data
                    .as_ref()
                    .and_then(|data| serde_json::value::to_raw_value(data).ok()),
            },
            true,
        ),
    }
}

/// `tasks/result`'s answer to `id`: the call's result with the task named
/// in its `_meta`, or its JSON-RPC error.
pub fn result_answer(id: &RequestId, task_id: &str, outcome: &TaskOutcome) -> Answer {
    match outcome {
        TaskOutcome::Result(raw) => match serde_json::from_str::<Kept<'_>>(raw.get()) {
            Ok(mut kept) => {
                kept.meta.get_or_insert_with(Map::new).insert(
                    RELATED_TASK.to_owned(),
                    serde_json::json!({ "taskId": task_id }),
                );
                Answer::result(id, kept)
            }
            Err(_) => Answer::result(id, raw),
        },
        TaskOutcome::Error {
            code,
            message,
            data,
        } => Answer::error(Some(id), ErrorCode(*code), message, data.as_deref()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_result_comes_back_as_the_app_wrote_it_with_the_task_named() {
        let structured =
            RawValue::from_string(r#"{"n": 9007199254740993, "x": 1.10}"#.into()).expect("json");
        let result =
            rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text("done")]);
        let (outcome, failed) = outcome_of(Ok(RawToolResult {
            result,
            structured: Some(structured),
        }));
        assert!(!failed);
        let answer = result_answer(&RequestId::Number(4), "t1", &outcome);
        let text = String::from_utf8(answer.message).expect("utf-8");
        assert!(
            text.contains(r#""structuredContent":{"n": 9007199254740993, "x": 1.10}"#),
            "{text}"
        );
        assert!(
            text.contains(r#""_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}}"#),
            "{text}"
        );
    }
}
