//! MCP tasks (docs/mcp.md, "Tasks"): a tool declares whether its calls
//! may run as tasks (`execution.taskSupport`) on every surface, and a
//! 2025-11-25 client that calls it as a task is answered at once; the app
//! sees an ordinary call that names its task, and the client polls, fetches
//! the result as the app wrote it, lists and cancels, each task opening
//! only to the credential that created it. Driven by hand over HTTP here
//! against a WebSocket app answered by hand, and by the official
//! TypeScript SDK's task client (`tests/node/sdk-tasks-client.mjs`)
//! against a gRPC app written with the app crate.

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{App, CallContext, Elicitation, TaskSupport, Tool, ToolError};
use openclaw_proxy_tests::conformance::{ensure_node_tools, node_dir};
use openclaw_proxy_tests::*;
use serde::Deserialize;
use serde_json::{Value, json};

/// A session whose tools declare each task support, both spellings.
fn body() -> Value {
    json!({
        "device_id": "device-1",
        "app_version": "1.0.0",
        "tools": [
            {"name": "quick", "input_schema": {"type": "object"}},
            {"name": "slow", "inputSchema": {"type": "object"},
             "execution": {"taskSupport": "optional"}},
            {"name": "export", "input_schema": {"type": "object"},
             "execution": {"task_support": "required"}}
        ]
    })
}

/// A JSON-RPC request of `method` with `params`.
fn rpc(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// POSTs `body` to the session as a client of `version`, with `token`.
async fn post_as(session: &TestSession, token: &str, version: &str, body: &Value) -> Value {
    let reply = mcp_post(&session.mcp_url, body)
        .bearer_auth(token)
        .header("mcp-protocol-version", version)
        .send()
        .await;
    assert_eq!(reply.status(), 200, "{body}: {}", reply.text());
    reply.json()
}

async fn post(session: &TestSession, body: &Value) -> Value {
    post_as(session, OPENCLAW_TOKEN, "2025-11-25", body).await
}

/// The `tools/list` entries by name.
fn listed(reply: &Value) -> std::collections::HashMap<String, Value> {
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a tools list: {reply}"))
        .iter()
        .map(|tool| {
            (
                tool["name"].as_str().unwrap_or_default().to_owned(),
                tool.clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn task_support_is_declared_on_every_surface_listed_and_advertised() {
    let server = TestServer::start().await;
    let rest = server.rest();
    let session = rest.register(&body()).await;
    let list = rpc(1, "tools/list", json!({}));
    let tools = listed(&post(&session, &list).await);
    assert_eq!(tools["quick"].get("execution"), None, "absent is forbidden");
    assert_eq!(
        tools["slow"]["execution"],
        json!({"taskSupport": "optional"})
    );
    assert_eq!(
        tools["export"]["execution"],
        json!({"taskSupport": "required"})
    );
    // A revision without tasks lists no execution.
    let older = listed(&post_as(&session, OPENCLAW_TOKEN, "2025-06-18", &list).await);
    assert_eq!(older["slow"].get("execution"), None);

    // An unknown value is refused, naming its place.
    let mut wrong = body();
    wrong["tools"][1]["execution"]["taskSupport"] = json!("sometimes");
    let reply = rest.create_session(&wrong).await;
    assert_eq!(reply.status(), 400);
    assert!(
        reply.text().contains("tools[1].execution.taskSupport"),
        "{}",
        reply.text()
    );
    let mut both = body();
    both["tools"][1]["execution"]["task_support"] = json!("required");
    assert_eq!(
        rest.create_session(&both).await.status(),
        400,
        "spellings disagree"
    );

    // A tools update declares it too.
    let update = json!({"tools": [{"name": "later", "execution": {"taskSupport": "required"}}]});
    let reply = rest.put_tools(&session.id, &update).await;
    assert_eq!(reply.status(), 200, "{}", reply.text());
    let tools = listed(&post(&session, &list).await);
    assert_eq!(tools["later"]["execution"]["taskSupport"], "required");

    // The app crate declares it on the gRPC bridge.
    let tool = Tool::with_schema(
        "report",
        "A slow report.",
        json!({"type": "object"}),
        |_: Value, _: CallContext| async { Ok::<_, ToolError>(json!("done")) },
    )
    .task_support(TaskSupport::Optional);
    let serving = App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .tool(tool)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let info = serving.session();
    let grpc_session = TestSession {
        id: info.session_id.clone(),
        mcp_url: format!("{}/v1/mcp/{}", server.http_url(), info.session_id),
        bridge_url: String::new(),
        session_token: None,
        mcp_token: None,
    };
    let tools = listed(&post(&grpc_session, &list).await);
    assert_eq!(tools["report"]["execution"]["taskSupport"], "optional");
    no_hang(serving.shutdown()).await.expect("shutdown");

    // The capability and the extension are advertised.
    let init = post(&session, &initialize_body(1, "2025-11-25")).await;
    assert_eq!(
        init["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let discover = mcp_post(
        &session.mcp_url,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}}),
    )
    .bearer_auth(OPENCLAW_TOKEN)
    .header("mcp-protocol-version", "2026-07-28")
    .header("mcp-method", "server/discover")
    .send()
    .await
    .json();
    assert!(
        discover["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{discover}"
    );
}

#[tokio::test]
async fn with_tasks_off_nothing_is_advertised_and_a_task_request_is_a_plain_call() {
    let server = TestServer::builder()
        .core(|core| core.tasks.enabled = false)
        .start()
        .await;
    let session = server.rest().register(&body()).await;
    let mut app = WsApp::attached(&server, &session).await;
    let init = post(&session, &initialize_body(1, "2025-11-25")).await;
    assert_eq!(init["result"]["capabilities"].get("tasks"), None);
    let call = rpc(
        2,
        "tools/call",
        json!({"name": "slow", "arguments": {}, "task": {}}),
    );
    let answering = tokio::spawn({
        let session = session.clone();
        async move { post(&session, &call).await }
    });
    let invoke = no_hang(app.next_json()).await.expect("invoke");
    assert_eq!(invoke.get("task_id"), None);
    app.send_json(
        json!({"type": "invoke_result", "request_id": invoke["request_id"],
        "ok": true, "content": "plain"}),
    )
    .await;
    let reply = no_hang(answering).await.expect("join");
    assert_eq!(reply["result"]["content"][0]["text"], "plain", "{reply}");
    let get = post(&session, &rpc(3, "tasks/get", json!({"taskId": "x"}))).await;
    assert_eq!(get["error"]["code"], -32601, "{get}");
}

/// Calls `tool` as a task; the task the answer carries.
async fn create(session: &TestSession, tool: &str, id: u64) -> Value {
    let call = rpc(
        id,
        "tools/call",
        json!({"name": tool, "arguments": {"n": id}, "task": {"ttl": 60_000}}),
    );
    let reply = post(session, &call).await;
    let task = reply["result"]["task"].clone();
    assert!(task["taskId"].is_string(), "a CreateTaskResult: {reply}");
    task
}

#[tokio::test]
async fn a_task_answers_at_once_and_keeps_its_result_for_its_own_client() {
    let server = TestServer::start().await;
    let session = server.rest().register(&body()).await;
    let mut app = WsApp::attached(&server, &session).await;

    let task = create(&session, "slow", 1).await;
    let task_id = task["taskId"].as_str().expect("id").to_owned();
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 60_000);
    assert!(task["pollInterval"].is_u64(), "{task}");
    for stamp in ["createdAt", "lastUpdatedAt"] {
        let text = task[stamp]
            .as_str()
            .unwrap_or_else(|| panic!("{stamp}: {task}"));
        assert!(text.ends_with('Z') && text.len() == 24, "{stamp}: {text}");
    }
    // The app gets an ordinary call that names its task.
    let invoke = no_hang(app.next_json()).await.expect("invoke");
    assert_eq!(invoke["tool_name"], "slow");
    assert_eq!(invoke["task_id"], task_id.as_str());

    let get = rpc(2, "tasks/get", json!({"taskId": task_id}));
    let polled = post(&session, &get).await;
    assert_eq!(polled["result"]["status"], "working", "{polled}");
    assert_eq!(polled["result"]["taskId"], task_id.as_str());

    // Another credential of the same session learns nothing of it.
    let mcp_token = session.mcp_token.clone().expect("the session's own token");
    let foreign = post_as(&session, &mcp_token, "2025-11-25", &get).await;
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let listed_there = post_as(
        &session,
        &mcp_token,
        "2025-11-25",
        &rpc(3, "tasks/list", json!({})),
    )
    .await;
    assert_eq!(listed_there["result"]["tasks"], json!([]), "{listed_there}");

    // tasks/result waits for the app's answer, then is the call's answer.
    let fetching = tokio::spawn({
        let (session, fetch) = (
            session.clone(),
            rpc(4, "tasks/result", json!({"taskId": task_id})),
        );
        async move {
            mcp_post(&session.mcp_url, &fetch)
                .bearer_auth(OPENCLAW_TOKEN)
                .header("mcp-protocol-version", "2025-11-25")
                .send()
                .await
        }
    });
    let exact = r#"{"n":9007199254740993,"price":1.10}"#;
    let answer = format!(
        r#"{{"type":"invoke_result","request_id":{},"ok":true,"content":{exact}}}"#,
        invoke["request_id"]
    );
    app.send(tokio_tungstenite::tungstenite::Message::Text(answer.into()))
        .await;
    let fetched = no_hang(fetching).await.expect("join");
    assert_eq!(fetched.status(), 200);
    let text = fetched.text();
    assert!(
        text.contains(&format!(r#""structuredContent":{exact}"#)),
        "the app's values unchanged: {text}"
    );
    let result: Value = fetched.json();
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let polled = post(&session, &get).await;
    assert_eq!(polled["result"]["status"], "completed", "{polled}");
    // Fetched again, the same.
    let again = post(
        &session,
        &rpc(5, "tasks/result", json!({"taskId": task_id})),
    )
    .await;
    assert_eq!(again["result"], result["result"]);

    // Cancelling a task that ended is refused with its status.
    let cancel = post(
        &session,
        &rpc(6, "tasks/cancel", json!({"taskId": task_id})),
    )
    .await;
    assert_eq!(cancel["error"]["code"], -32602, "{cancel}");
    assert!(
        cancel["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("completed")),
        "{cancel}"
    );

    let listed = post(&session, &rpc(7, "tasks/list", json!({}))).await;
    let ids: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|task| task["taskId"].as_str())
        .collect();
    assert_eq!(ids, [task_id.as_str()]);
    let forged = post(&session, &rpc(8, "tasks/list", json!({"cursor": "x"}))).await;
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    let unknown = post(&session, &rpc(9, "tasks/get", json!({"taskId": "nope"}))).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
}

#[tokio::test]
async fn each_tool_runs_only_as_it_allows_and_a_cancelled_task_stays_cancelled() {
    let server = TestServer::start().await;
    let session = server.rest().register(&body()).await;
    let mut app = WsApp::attached(&server, &session).await;

    // A forbidden tool refuses a task, a required one a plain call: -32601.
    let as_task = rpc(
        1,
        "tools/call",
        json!({"name": "quick", "arguments": {}, "task": {}}),
    );
    let refused = post(&session, &as_task).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    let plain = rpc(2, "tools/call", json!({"name": "export", "arguments": {}}));
    let refused = post(&session, &plain).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    let unknown = rpc(
        3,
        "tools/call",
        json!({"name": "nothing", "arguments": {}, "task": {}}),
    );
    assert_eq!(post(&session, &unknown).await["error"]["code"], -32602);

    let task = create(&session, "export", 4).await;
    let task_id = task["taskId"].as_str().expect("id").to_owned();
    let invoke = no_hang(app.next_json()).await.expect("invoke");
    assert_eq!(
        invoke["task_id"],
        task_id.as_str(),
        "only the task reached the app"
    );
    let cancelled = post(
        &session,
        &rpc(5, "tasks/cancel", json!({"taskId": task_id})),
    )
    .await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    // The app is told to stop its call.
    let told = no_hang(app.next_json()).await.expect("cancel");
    assert_eq!(told["type"], "cancel_tool", "{told}");
    assert_eq!(told["request_id"], invoke["request_id"]);
    // It answers anyway: the task stays cancelled.
    app.send_json(
        json!({"type": "invoke_result", "request_id": invoke["request_id"],
        "ok": true, "content": "late"}),
    )
    .await;
    let get = rpc(6, "tasks/get", json!({"taskId": task_id}));
    assert_eq!(post(&session, &get).await["result"]["status"], "cancelled");
    let fetched = post(
        &session,
        &rpc(7, "tasks/result", json!({"taskId": task_id})),
    )
    .await;
    assert!(fetched["error"].is_object(), "{fetched}");
    let again = post(
        &session,
        &rpc(8, "tasks/cancel", json!({"taskId": task_id})),
    )
    .await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct Topic {
    topic: String,
}

/// What the official TypeScript SDK's task client did (see its script).
#[derive(Deserialize, Debug)]
struct SdkRun {
    listed: Value,
    created: Value,
    statuses: Vec<String>,
    result: Value,
    elicited: Vec<Value>,
    tasks: Vec<Value>,
    cancelled: Value,
}

#[tokio::test]
async fn the_typescript_sdk_task_client_creates_polls_answers_fetches_lists_and_cancels() {
    let node = tokio::task::spawn_blocking(ensure_node_tools)
        .await
        .expect("join")
        .expect("Node.js tools installed");
    let server = TestServer::start().await;
    // The app asks the user for a color during the task, then writes.
    let write = Tool::new(
        "write_line",
        "Asks for a color, then writes a line about the topic.",
        |args: Topic, call: CallContext| async move {
            let task = call.task_id().map(str::to_owned).unwrap_or_default();
            let form = json!({"type": "object",
                "properties": {"color": {"type": "string"}}, "required": ["color"]});
            let answer = call
                .elicit(Elicitation::form("Which color?", form))
                .await
                .map_err(|error| ToolError::new(error.to_string()))?;
            let color = answer
                .content
                .as_ref()
                .and_then(|c| c["color"].as_str().map(str::to_owned));
            Ok(
                json!({"line": format!("{} in {}", args.topic, color.unwrap_or_default()),
                      "task": task}),
            )
        },
    )
    .task_support(TaskSupport::Required);
    // A tool that waits until it is cancelled.
    let wait = Tool::with_schema(
        "wait",
        "Waits until cancelled.",
        json!({"type": "object"}),
        |_: Value, call: CallContext| async move {
            call.cancelled().await;
            Ok::<_, ToolError>(json!("stopped"))
        },
    )
    .task_support(TaskSupport::Optional);
    let serving = App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .tool(write)
        .tool(wait)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let url = format!(
        "{}/v1/mcp/{}",
        server.http_url(),
        serving.session().session_id
    );
    let script = node_dir().join("sdk-tasks-client.mjs");
    let output = no_hang(
        tokio::process::Command::new(&node)
            .arg(&script)
            .args([url.as_str(), OPENCLAW_TOKEN])
            .output(),
    )
    .await
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    let run: SdkRun =
        serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {stdout}"));
    assert_eq!(run.listed["write_line"], "required", "{run:?}");
    assert_eq!(run.listed["wait"], "optional", "{run:?}");
    let task_id = run.created["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    assert!(
        run.statuses.iter().any(|status| status == "input_required"),
        "the task waited for the client: {run:?}"
    );
    assert_eq!(run.elicited.len(), 1, "{run:?}");
    assert_eq!(
        run.elicited[0]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    assert_eq!(
        run.result["structuredContent"]["line"], "the sea in teal",
        "{run:?}"
    );
    assert_eq!(
        run.result["structuredContent"]["task"],
        task_id.as_str(),
        "the app saw its task"
    );
    assert!(
        run.tasks
            .iter()
            .any(|task| task["taskId"] == task_id.as_str()),
        "{run:?}"
    );
    assert_eq!(run.cancelled["status"], "cancelled", "{run:?}");
    no_hang(serving.shutdown()).await.expect("shutdown");
}

/// A 2026-07-28 request of `method` naming `name` in `Mcp-Name`, from a
/// client that declared `capabilities`.
async fn post_2026(session: &TestSession, method: &str, name: &str, params: Value) -> (u16, Value) {
    let capabilities = json!({"elicitation": {"form": {}},
        "extensions": {"io.modelcontextprotocol/tasks": {}}});
    post_2026_declaring(session, method, name, params, &capabilities).await
}

async fn post_2026_declaring(
    session: &TestSession,
    method: &str,
    name: &str,
    mut params: Value,
    capabilities: &Value,
) -> (u16, Value) {
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}});
    let reply = mcp_post(&session.mcp_url, &rpc(1, method, params))
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("mcp-name", name)
        .send()
        .await;
    (reply.status().as_u16(), reply.json())
}

#[tokio::test]
async fn at_2026_07_28_the_extension_makes_tasks_that_ask_through_get_and_update() {
    let server = TestServer::start().await;
    let session = server.rest().register(&body()).await;
    let mut app = WsApp::attached(&server, &session).await;

    // A required tool refuses a client without the extension: -32021.
    let (status, refused) = post_2026_declaring(
        &session,
        "tools/call",
        "export",
        json!({"name": "export", "arguments": {}}),
        &json!({}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"]
            ["io.modelcontextprotocol/tasks"]
            .is_object(),
        "{refused}"
    );

    // With it, the call is a task at once.
    let (_, created) = post_2026(
        &session,
        "tools/call",
        "slow",
        json!({"name": "slow", "arguments": {}}),
    )
    .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    assert_eq!(task["status"], "working");
    assert!(
        task["ttlMs"].is_u64() && task["pollIntervalMs"].is_u64(),
        "{created}"
    );
    let task_id = task["taskId"].as_str().expect("id").to_owned();
    let invoke = no_hang(app.next_json()).await.expect("invoke");
    assert_eq!(invoke["task_id"], task_id.as_str());

    // The app asks the user; the task shows the request.
    app.send_json(
        json!({"type": "client_request", "request_id": invoke["request_id"],
        "id": "color", "method": "elicitation/create",
        "params": {"message": "Which color?", "requestedSchema": {"type": "object",
            "properties": {"color": {"type": "string"}}}}}),
    )
    .await;
    let get = json!({"taskId": task_id});
    let waiting = poll_until(&session, &task_id, "input_required").await;
    assert_eq!(waiting["result"]["resultType"], "complete", "{waiting}");
    let requests = waiting["result"]["inputRequests"]
        .as_object()
        .expect("inputRequests");
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, request) = requests.iter().next().expect("one");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "Which color?");

    // The answer goes to the app through tasks/update.
    let update = json!({"taskId": task_id, "inputResponses": {
        key.clone(): {"action": "accept", "content": {"color": "teal"}},
        "never-issued": {"action": "decline"}}});
    let (status, acked) = post_2026(&session, "tasks/update", &task_id, update).await;
    assert_eq!(status, 200, "{acked}");
    assert_eq!(acked["result"]["resultType"], "complete");
    let response = no_hang(app.next_json()).await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["result"]["content"]["color"], "teal", "{response}");
    app.send_json(
        json!({"type": "invoke_result", "request_id": invoke["request_id"],
        "ok": true, "content": {"line": "teal sea"}}),
    )
    .await;
    let done = poll_until(&session, &task_id, "completed").await;
    assert_eq!(
        done["result"]["result"]["structuredContent"]["line"], "teal sea",
        "{done}"
    );
    assert_eq!(
        done["result"]["result"]["_meta"],
        Value::Null,
        "no related-task meta on an inlined result: {done}"
    );

    // Mcp-Name must name the task.
    let (status, mismatch) = post_2026(&session, "tasks/get", "another", get.clone()).await;
    assert_eq!(
        (status, mismatch["error"]["code"].clone()),
        (400, json!(-32020)),
        "{mismatch}"
    );
    // Cancelling an ended task is acknowledged; tasks/list is not served.
    let (_, acked) = post_2026(&session, "tasks/cancel", &task_id, get.clone()).await;
    assert_eq!(acked["result"]["resultType"], "complete", "{acked}");
    let (status, _) = post_2026(&session, "tasks/list", "", json!({})).await;
    assert_eq!(status, 404);
}

/// Polls task `task_id` at 2026-07-28 until it is in `status` (a bounded
/// poll: the condition is eventual, the bound only stops a hang).
async fn poll_until(session: &TestSession, task_id: &str, status: &str) -> Value {
    let get = json!({"taskId": task_id});
    let mut last = Value::Null;
    for _ in 0..2000 {
        let (_, polled) = post_2026(session, "tasks/get", task_id, get.clone()).await;
        if polled["result"]["status"] == status {
            return polled;
        }
        last = polled;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("task {task_id} never reached {status}: {last}");
}
