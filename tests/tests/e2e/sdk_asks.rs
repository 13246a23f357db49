//! The app asks back, answered by SDK clients we did not write: the
//! official TypeScript SDK (`tests/node/sdk-asks-client.mjs`) and the
//! official Python SDK, 1.x (`tests/python/sdk_asks_client.py`) and 2.x
//! (`tests/python/sdk_asks_client_2026.py`), each set up as an agent host
//! is, with handlers for `elicitation/create`, `sampling/createMessage` and
//! `roots/list`. Their tool call reaches an app that, while the call runs,
//! asks the user, then the model (with the user's answer), then the roots,
//! and answers with what it got back: on the WebSocket bridge (frames by
//! hand) and on the gRPC bridge (the app crate's `elicit`, `sample`,
//! `roots`).
//!
//! The TypeScript SDK and Python SDK 1.x speak up to 2025-11-25: each runs
//! over streamable HTTP (the request on the call's SSE answer, the response
//! POSTed back) and the legacy HTTP+SSE transport (the request on the
//! client's stream). Python SDK 2.x speaks 2026-07-28: it discovers the
//! server and answers each `input_required` round, and the app sees one
//! call. Each run checks what the client was asked, what the app got, and
//! the result.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{App, CallContext, Elicitation, Sampling, Serving, Tool, ToolError};
use openclaw_proxy_tests::conformance::{ensure_node_tools, node_dir};
use openclaw_proxy_tests::*;
use serde::Deserialize;
use serde_json::{Value, json};

/// The tool both apps serve.
const TOOL: &str = "ask_then_write";
/// What the SDK clients' handlers answer (see their scripts).
const COLOR: &str = "teal";
const MODEL: &str = "host-model-1";
const ROOT: &str = "file:///work/project";
/// What the apps ask, for the topic the clients send ("the sea").
const QUESTION: &str = "Which color for a line about the sea?";
const PROMPT: &str = "Write one line about the sea in teal.";
const SYSTEM: &str = "You write one line.";
const MAX_TOKENS: u32 = 60;

fn color_form() -> Value {
    json!({"type": "object", "properties": {"color": {"type": "string", "title": "Color"}},
           "required": ["color"]})
}

/// What an app got back from the client, in the order it asked.
type Received = Arc<Mutex<Vec<Value>>>;

fn keep(received: &Received, answer: Value) {
    if let Ok(mut all) = received.lock() {
        all.push(answer);
    }
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct Topic {
    topic: String,
}

/// A gRPC app (the app crate) whose tool elicits, samples and lists roots.
async fn grpc_app(server: &TestServer, received: &Received) -> Serving {
    let received = received.clone();
    let tool = Tool::new(
        TOOL,
        "Asks the user for a color, the model for a line, the client for its roots.",
        move |args: Topic, call: CallContext| ask_then_write(args.topic, call, received.clone()),
    );
    App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .tool(tool)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving")
}

/// The gRPC app's tool: asks the user, the model and the roots with the app
/// crate, and answers with what came back.
async fn ask_then_write(
    topic: String,
    call: CallContext,
    received: Received,
) -> Result<Value, ToolError> {
    let question = format!("Which color for a line about {topic}?");
    let answer = call
        .elicit(Elicitation::form(question, color_form()))
        .await?;
    let action = format!("{:?}", answer.action).to_lowercase();
    keep(
        &received,
        json!({"action": action, "content": answer.content}),
    );

    let color = answer
        .content
        .and_then(|content| content.get("color").cloned())
        .and_then(|color| color.as_str().map(str::to_owned))
        .ok_or_else(|| ToolError::new("the user named no color"))?;
    let prompt = format!("Write one line about {topic} in {color}.");
    let sampled = call
        .sample(Sampling::new(MAX_TOKENS).user(prompt).system_prompt(SYSTEM))
        .await?;
    let (line, model) = (sampled.text(), &sampled.model);
    keep(&received, json!({"text": line, "model": model}));

    let uris: Vec<String> = call
        .roots()
        .await?
        .into_iter()
        .map(|root| root.uri)
        .collect();
    keep(&received, json!({"roots": uris}));
    Ok(json!({"color": color, "line": line, "model": model, "roots": uris}))
}

/// A WebSocket app, frames by hand, doing what [`grpc_app`] does; serves
/// calls one after the other until the bridge ends.
async fn ws_app(
    server: &TestServer,
    received: &Received,
) -> (TestSession, tokio::task::JoinHandle<()>) {
    let mut body = legacy_session_body();
    body["tools"] = json!([{"name": TOOL, "description": "Asks, then writes.",
        "inputSchema": {"type": "object", "properties": {"topic": {"type": "string"}}}}]);
    let session = TestSession::register(server, &body).await;
    let mut app = WsApp::attached(server, &session).await;
    let received = received.clone();
    let served = tokio::spawn(async move {
        while let Ok(invoke) = app.next_json().await {
            if invoke["type"] == "invoke_tool" {
                serve_call(&mut app, &invoke, &received).await;
            }
        }
    });
    (session, served)
}

/// Serves one `invoke_tool` on the WebSocket bridge: asks the user, the
/// model and the roots, and answers with what came back.
async fn serve_call(app: &mut WsApp, invoke: &Value, received: &Received) {
    let call = &invoke["request_id"];
    let topic = invoke["arguments"]["topic"].as_str().unwrap_or_default();
    let form = json!({"mode": "form", "requestedSchema": color_form(),
                      "message": format!("Which color for a line about {topic}?")});
    let answer = ask(app, call, "color", "elicitation/create", form).await;
    keep(
        received,
        json!({"action": answer["action"], "content": answer["content"]}),
    );

    let color = answer["content"]["color"].as_str().unwrap_or_default();
    let prompt = format!("Write one line about {topic} in {color}.");
    let sampling = json!({"maxTokens": MAX_TOKENS, "systemPrompt": SYSTEM,
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}]});
    let sampled = ask(app, call, "line", "sampling/createMessage", sampling).await;
    let (line, model) = (&sampled["content"]["text"], &sampled["model"]);
    keep(received, json!({"text": line, "model": model}));

    let roots = ask(app, call, "roots", "roots/list", json!({})).await;
    let uris: Vec<&Value> = roots["roots"]
        .as_array()
        .map(|roots| roots.iter().map(|root| &root["uri"]).collect())
        .unwrap_or_default();
    keep(received, json!({"roots": uris}));

    let content = json!({"color": color, "line": line, "model": model, "roots": uris});
    let result =
        json!({"type": "invoke_result", "request_id": call, "ok": true, "content": content});
    app.send_json(result).await;
}

/// Sends the call's `client_request` and returns the result its
/// `client_response` carries.
async fn ask(app: &mut WsApp, call: &Value, id: &str, method: &str, params: Value) -> Value {
    let request = json!({"type": "client_request", "request_id": call, "id": id,
                         "method": method, "params": params});
    app.send_json(request).await;
    let response = app.next_json().await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["id"], id, "{response}");
    response["result"].clone()
}

/// Checks one client run's line and what the app received during it.
fn check_run(what: &str, line: &Value, received: &Received, revision: &str) {
    assert_eq!(line["protocolVersion"], revision, "{what}: {line}");
    let asked = &line["elicited"];
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{what}: {line}");
    assert_eq!(asked[0]["message"], QUESTION, "{what}: {line}");
    assert_eq!(asked[0]["requestedSchema"], color_form(), "{what}: {line}");
    let sampled = &line["sampled"];
    assert_eq!(sampled.as_array().map(Vec::len), Some(1), "{what}: {line}");
    assert_eq!(sampled[0]["maxTokens"], MAX_TOKENS, "{what}: {line}");
    assert_eq!(sampled[0]["systemPrompt"], SYSTEM, "{what}: {line}");
    assert_eq!(
        sampled[0]["messages"][0]["content"]["text"], PROMPT,
        "{what}: {line}"
    );
    assert_eq!(line["roots_asked"], 1, "{what}: {line}");

    let written = format!("The model read: {PROMPT}");
    let result = &line["result"];
    assert_ne!(result["isError"], true, "{what}: {line}");
    assert_eq!(
        result["structuredContent"],
        json!({"color": COLOR, "line": written, "model": MODEL, "roots": [ROOT]}),
        "{what}: {line}"
    );
    let got = std::mem::take(&mut *received.lock().expect("received"));
    assert_eq!(
        got,
        [
            json!({"action": "accept", "content": {"color": COLOR}}),
            json!({"text": written, "model": MODEL}),
            json!({"roots": [ROOT]}),
        ],
        "{what}: what the app received"
    );
}

/// Runs a client program (`program` `args`... `<mcp-url> <token> <tool>
/// <transport>`); its one JSON line.
async fn run_client(program: &Path, args: &[PathBuf], url: &str, transport: &str) -> Value {
    let output = tokio::process::Command::new(program)
        .args(args)
        .args([url, OPENCLAW_TOKEN, TOOL, transport])
        .current_dir(node_dir())
        .output()
        .await
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client failed ({transport}, {url}):\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.trim()).expect("one JSON line")
}

/// Each of `transports` the client speaks, at `revision`, against both
/// bridges' apps.
async fn against_both_bridges(
    program: &Path,
    args: &[PathBuf],
    transports: &[&str],
    revision: &str,
) {
    let server = TestServer::start().await;
    let from_ws = Received::default();
    let (session, served) = ws_app(&server, &from_ws).await;
    let from_grpc = Received::default();
    let serving = grpc_app(&server, &from_grpc).await;
    let grpc_url = format!(
        "{}/v1/mcp/{}",
        server.http_url(),
        serving.session().session_id
    );
    for &transport in transports {
        let line = no_hang(run_client(program, args, &session.mcp_url, transport)).await;
        check_run(
            &format!("WebSocket app, {transport}"),
            &line,
            &from_ws,
            revision,
        );
        let line = no_hang(run_client(program, args, &grpc_url, transport)).await;
        check_run(
            &format!("gRPC app, {transport}"),
            &line,
            &from_grpc,
            revision,
        );
    }
    served.abort();
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn the_typescript_sdk_host_answers_an_app_that_elicits_samples_and_lists_roots() {
    let node = tokio::task::spawn_blocking(ensure_node_tools)
        .await
        .expect("join")
        .expect("Node.js tools installed");
    let script = node_dir().join("sdk-asks-client.mjs");
    against_both_bridges(&node, &[script], &["streamable", "sse"], "2025-11-25").await;
}

#[tokio::test]
async fn the_python_sdk_host_answers_an_app_that_elicits_samples_and_lists_roots() {
    let python =
        openclaw_proxy_tests::processes::mcp_python(Path::new(env!("CARGO_TARGET_TMPDIR"))).await;
    let script = python_dir().join("sdk_asks_client.py");
    against_both_bridges(&python, &[script], &["streamable", "sse"], "2025-11-25").await;
}

#[tokio::test]
async fn the_python_sdk_2_host_answers_the_same_app_at_2026_07_28() {
    let python =
        openclaw_proxy_tests::processes::mcp_python_2026(Path::new(env!("CARGO_TARGET_TMPDIR")))
            .await;
    let script = python_dir().join("sdk_asks_client_2026.py");
    against_both_bridges(&python, &[script], &["streamable"], "2026-07-28").await;
}

fn python_dir() -> PathBuf {
    node_dir().parent().expect("tests/").join("python")
}
