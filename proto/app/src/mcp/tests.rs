//! The MCP requests end to end inside the app: a request in, exactly one
//! answer (and its logs) out, for each way a handler or a client can go wrong.

use std::time::Duration;

use openclaw_proxy_proto::v1::CallerInfo;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use super::*;
use crate::call::CallContext;
use crate::completion::{self, CompletionRequest};
use crate::content::{Content, ResourceContents};
use crate::prompt::{GetPromptResult, Prompt, PromptMessage};
use crate::resource::{ReadRequest, Resource, ResourceTemplate};
use crate::{LogLevel, McpError};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct TwoArguments {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

fn declarations() -> Declarations {
    let text = Resource::new(
        "test://static-text",
        "static-text",
        |read: ReadRequest, _| async move {
            Ok::<_, McpError>(ResourceContents::text(read.uri(), "static").mime_type("text/plain"))
        },
    );
    let binary = Resource::new(
        "test://static-binary",
        "static-binary",
        |read: ReadRequest, _| async move {
            Ok::<_, McpError>(ResourceContents::blob_bytes(read.uri(), [1, 2, 3]))
        },
    );
    let raw = Resource::new("test://raw", "raw", |_, _| async {
        Ok::<_, McpError>(json!({"contents": [{"uri": "test://raw", "text": "9007199254740993"}]}))
    });
    let not_an_object = Resource::new("test://scalar", "scalar", |_, _| async {
        Ok::<_, McpError>(json!(["not", "an", "object"]))
    });
    let panics = Resource::new("test://panic", "panic", |_, _| async {
        if true {
            panic!("disk on fire");
        }
        Ok::<_, McpError>(json!({}))
    });
    let logs = Resource::new(
        "test://logs",
        "logs",
        |read: ReadRequest, call: CallContext| async move {
            call.log(LogLevel::Info, "reader", json!({"reading": read.uri()}))
                .await;
            Ok::<_, McpError>(ResourceContents::text(read.uri(), "logged"))
        },
    );
    let slow = Resource::new("test://slow", "slow", |_, call: CallContext| async move {
        call.cancelled().await;
        Ok::<_, McpError>(ResourceContents::text(
            "test://slow",
            format!("{:?}", call.cancel_reason()),
        ))
    });
    let template = ResourceTemplate::new(
        "test://template/{id}/data",
        "template",
        |read: ReadRequest, _| async move {
            let id = read.variable("id").unwrap_or_default();
            Ok::<_, McpError>(ResourceContents::text(
                read.uri(),
                format!("Data for ID: {id}"),
            ))
        },
    );
    let prompt = Prompt::new(
        "test_prompt_with_arguments",
        "With arguments.",
        |args: TwoArguments, _| async move {
            Ok::<_, McpError>(GetPromptResult::new([PromptMessage::user(Content::text(
                format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    args.arg1, args.arg2
                ),
            ))]))
        },
    );
    Declarations::new(
        Vec::new(),
        vec![text, binary, raw, not_an_object, panics, logs, slow],
        vec![template],
        vec![prompt],
        None,
    )
    .expect("valid declarations")
}

struct Answered {
    result: Option<Value>,
    error: Option<proto::McpError>,
    logs: Vec<proto::Log>,
}

async fn ask_with(
    declarations: Declarations,
    method: &str,
    params: Value,
    revision: &str,
) -> Answered {
    let (outbound, mut inbound) = mpsc::channel(16);
    let request = McpRequest {
        session_id: "s".into(),
        request_id: "s:1".into(),
        method: method.into(),
        params_json: params.to_string(),
        client: Some(CallerInfo {
            name: "test".into(),
            version: "1".into(),
            protocol_version: revision.into(),
        }),
        trace_parent: String::new(),
        caller: None,
    };
    let permit = Arc::new(Semaphore::new(1))
        .acquire_owned()
        .await
        .expect("a permit");
    run(
        Arc::new(declarations),
        request,
        outbound,
        InFlight::default(),
        Scope::default(),
        permit,
    )
    .await;
    let mut answered = Answered {
        result: None,
        error: None,
        logs: Vec::new(),
    };
    while let Ok(message) = inbound.try_recv() {
        match message.kind {
            Some(app_message::Kind::Log(log)) => answered.logs.push(log),
            Some(app_message::Kind::McpResult(result)) => {
                assert_eq!(result.request_id, "s:1");
                match result.outcome {
                    Some(proto::mcp_result::Outcome::ResultJson(json)) => {
                        answered.result = Some(serde_json::from_str(&json).expect("result JSON"));
                    }
                    Some(proto::mcp_result::Outcome::Error(error)) => answered.error = Some(error),
                    None => panic!("an answer without an outcome"),
                }
            }
            other => panic!("unexpected message {other:?}"),
        }
    }
    answered
}

async fn ask(method: &str, params: Value) -> Answered {
    ask_with(declarations(), method, params, "2025-11-25").await
}

fn error(answered: &Answered) -> &proto::McpError {
    answered.error.as_ref().expect("an error answer")
}

#[tokio::test]
async fn a_resource_is_read_by_its_exact_uri_as_text_or_blob() {
    let text = ask("resources/read", json!({"uri": "test://static-text"})).await;
    assert_eq!(
        text.result,
        Some(
            json!({"contents": [{"uri": "test://static-text", "mimeType": "text/plain", "text": "static"}]})
        )
    );
    let binary = ask("resources/read", json!({"uri": "test://static-binary"})).await;
    assert_eq!(
        binary.result,
        Some(json!({"contents": [{"uri": "test://static-binary", "blob": "AQID"}]}))
    );
}

#[tokio::test]
async fn a_uri_that_fits_a_template_reaches_its_handler_with_the_variables() {
    let read = ask("resources/read", json!({"uri": "test://template/123/data"})).await;
    assert_eq!(
        read.result,
        Some(
            json!({"contents": [{"uri": "test://template/123/data", "text": "Data for ID: 123"}]})
        )
    );
}

#[tokio::test]
async fn an_unknown_uri_is_resource_not_found_carrying_the_uri_with_the_revisions_code() {
    let uri = "test://nonexistent";
    let old = ask("resources/read", json!({"uri": uri})).await;
    assert_eq!(error(&old).code, -32002);
    assert!(error(&old).message.contains(uri), "{:?}", old.error);
    assert_eq!(
        serde_json::from_str::<Value>(&error(&old).data_json).expect("data"),
        json!({"uri": uri})
    );
    let new = ask_with(
        declarations(),
        "resources/read",
        json!({"uri": uri}),
        "2026-07-28",
    )
    .await;
    assert_eq!(error(&new).code, -32602, "SEP-2164");
    assert_eq!(
        serde_json::from_str::<Value>(&error(&new).data_json).expect("data"),
        json!({"uri": uri})
    );
}

#[tokio::test]
async fn a_raw_json_result_passes_and_one_that_is_not_an_object_is_an_internal_error() {
    let raw = ask("resources/read", json!({"uri": "test://raw"})).await;
    assert_eq!(
        raw.result.expect("result")["contents"][0]["text"],
        "9007199254740993"
    );
    let scalar = ask("resources/read", json!({"uri": "test://scalar"})).await;
    assert_eq!(error(&scalar).code, -32603);
    assert!(error(&scalar).message.contains("not a JSON object"));
}

#[tokio::test]
async fn a_panicking_handler_is_an_internal_error_naming_the_panic() {
    let answered = ask("resources/read", json!({"uri": "test://panic"})).await;
    assert_eq!(error(&answered).code, -32603);
    assert!(error(&answered).message.contains("disk on fire"));
}

#[tokio::test]
async fn a_handler_logs_for_its_request_before_the_answer() {
    let answered = ask("resources/read", json!({"uri": "test://logs"})).await;
    assert!(answered.result.is_some());
    let [log] = answered.logs.as_slice() else {
        panic!("one log record, got {:?}", answered.logs);
    };
    assert_eq!(
        (
            log.request_id.as_str(),
            log.level.as_str(),
            log.logger.as_str()
        ),
        ("s:1", "info", "reader")
    );
    assert_eq!(log.data_json, r#"{"reading":"test://logs"}"#);
}

#[tokio::test]
async fn a_prompt_is_rendered_with_its_arguments() {
    let answered = ask(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
    )
    .await;
    assert_eq!(
        answered.result,
        Some(
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='hello', arg2='world'"}}]})
        )
    );
}

#[tokio::test]
async fn an_unknown_prompt_or_a_missing_argument_is_invalid_params_naming_it() {
    let unknown = ask("prompts/get", json!({"name": "nope"})).await;
    assert_eq!(error(&unknown).code, -32602);
    assert!(error(&unknown).message.contains("`nope`"));
    let missing = ask(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}),
    )
    .await;
    assert_eq!(error(&missing).code, -32602);
    assert!(
        error(&missing).message.contains("`arg2`"),
        "{:?}",
        missing.error
    );
    let wrong_type = ask(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x", "arg2": 7}}),
    )
    .await;
    assert_eq!(error(&wrong_type).code, -32602);
    assert!(
        error(&wrong_type).message.contains("arg2"),
        "{:?}",
        wrong_type.error
    );
}

#[tokio::test]
async fn other_methods_and_bad_params_are_refused_with_their_codes() {
    let other = ask("resources/subscribe", json!({"uri": "test://static-text"})).await;
    assert_eq!(error(&other).code, -32601);
    assert!(error(&other).message.contains("resources/subscribe"));
    let no_uri = ask("resources/read", json!({})).await;
    assert_eq!(error(&no_uri).code, -32602);
    assert!(error(&no_uri).message.contains("\"uri\""));
}

#[tokio::test]
async fn completion_checks_the_reference_then_asks_the_handler() {
    let completing = |request: CompletionRequest, _: CallContext| async move {
        let prefix = request.value().to_owned();
        Ok::<_, McpError>(crate::Completion::new(
            ["paris", "park", "party", "rome"]
                .into_iter()
                .filter(move |city| city.starts_with(&prefix)),
        ))
    };
    let mut declared = declarations();
    declared.set_completion(Some(completion::boxed(completing)));
    let answered = ask_with(
        declared,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
        "2025-11-25",
    )
    .await;
    assert_eq!(
        answered.result,
        Some(json!({"completion": {"values": ["paris", "park", "party"]}}))
    );

    let without_handler = ask(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"}, "argument": {"name": "id", "value": "1"}}),
    )
    .await;
    assert_eq!(
        without_handler.result,
        Some(json!({"completion": {"values": []}}))
    );

    let unknown_argument = ask(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg9", "value": ""}}),
    )
    .await;
    assert_eq!(error(&unknown_argument).code, -32602);
    let unknown_template = ask(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "test://other/{id}"}, "argument": {"name": "id", "value": ""}}),
    )
    .await;
    assert_eq!(error(&unknown_template).code, -32602);
}

#[tokio::test]
async fn a_cancelled_request_sees_why_and_still_answers() {
    let in_flight = InFlight::default();
    let (outbound, mut inbound) = mpsc::channel(16);
    let request = McpRequest {
        session_id: "s".into(),
        request_id: "s:7".into(),
        method: "resources/read".into(),
        params_json: json!({"uri": "test://slow"}).to_string(),
        ..McpRequest::default()
    };
    let permit = Arc::new(Semaphore::new(1))
        .acquire_owned()
        .await
        .expect("permit");
    let running = tokio::spawn(run(
        Arc::new(declarations()),
        request,
        outbound,
        in_flight.clone(),
        Scope::default(),
        permit,
    ));
    let cancelled = async {
        while !in_flight.cancel("s:7", crate::CancelReason::Proxy("gone".into())) {
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), cancelled)
        .await
        .expect("registered");
    running.await.expect("join");
    let Some(AppMessage {
        kind: Some(app_message::Kind::McpResult(result)),
    }) = inbound.recv().await
    else {
        panic!("an answer");
    };
    let Some(proto::mcp_result::Outcome::ResultJson(json)) = result.outcome else {
        panic!("a result");
    };
    assert!(json.contains("Proxy(\\\"gone\\\")"), "{json}");
}
