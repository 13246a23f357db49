//! The app asks back across nodes: the app's bridge on node A, the MCP
//! client on node B (and its answers or retries on B or C), in every era a
//! client may speak: a request on the call's SSE answer up to 2025-11-25
//! (the client's POSTed response goes to A over NATS), an `input_required`
//! round at 2026-07-28 (the retry resumes the call parked on B, wherever it
//! arrives), the legacy HTTP+SSE transport, and the proxy's own
//! confirmation gate. However a wait ends (answered, the client gone, the
//! app's bridge gone), nothing stays pending on A.

use std::time::Duration;

use openclaw_proxy_tests::listening::Open;
use openclaw_proxy_tests::prometheus::Scrape;
use openclaw_proxy_tests::{
    APP_TOKEN, LegacyClient, OPENCLAW_TOKEN, RawRequest, SseStream, ToolsCall2026, WsApp,
    eventually, initialize_body, legacy_session_body, no_hang,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Node, bridge_url, call_when_reachable, cluster_with};

/// Every node seals and opens `requestState` with this key.
const STATE_KEY: &str = "a key every node of the test cluster shares";

/// Three nodes on one NATS, sharing the request-state key.
async fn three_nodes() -> (openclaw_proxy_tests::processes::NatsServer, Vec<Node>) {
    let (nats, nodes, _) = cluster_with(3, 300, |settings| {
        settings.env("OPENCLAW_PROXY_REQUEST_STATE_KEY", STATE_KEY)
    })
    .await;
    (nats, nodes)
}

/// The question the app asks when a call's `text` is `ask`.
fn question() -> Value {
    json!({"message": "Which calendar?", "requestedSchema": {"type": "object",
        "properties": {"calendar": {"type": "string"}}}})
}

/// A WebSocket app: a call of `echo_text` with `text: "ask"`, and a
/// `prompts/get` of [`ASKING_PROMPT`], ask the client (`elicitation/create`,
/// id `q`) and answer with what the client said; any other call is
/// answered at once. Every frame the app receives goes to the test.
struct AskingApp {
    frames: mpsc::UnboundedReceiver<Value>,
    task: JoinHandle<()>,
}

impl AskingApp {
    async fn on(node: &Node, session_id: &str) -> Self {
        let mut app = WsApp::connect(&bridge_url(node, session_id), Some(APP_TOKEN))
            .await
            .expect("bridge");
        let (seen, frames) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            // The prompt requests waiting for the client's answer.
            let mut prompts = std::collections::HashSet::new();
            while let Ok(frame) = app.next_json().await {
                let _ = seen.send(frame.clone());
                let request_id = frame["request_id"].clone();
                match frame["type"].as_str() {
                    Some("mcp_request") => {
                        prompts.insert(request_id.to_string());
                        app.send_json(json!({"type": "client_request", "request_id": request_id,
                            "id": "q", "method": "elicitation/create", "params": question()}))
                            .await;
                    }
                    Some("client_response") if prompts.remove(&request_id.to_string()) => {
                        let calendar = &frame["result"]["content"]["calendar"];
                        let text = format!("Plan the week in {}", calendar.as_str().unwrap_or("?"));
                        app.send_json(json!({"type": "mcp_result", "request_id": request_id,
                            "result": {"messages": [{"role": "user",
                                "content": {"type": "text", "text": text}}]}}))
                            .await;
                    }
                    Some("invoke_tool") if frame["arguments"]["text"] == "ask" => {
                        app.send_json(json!({"type": "client_request", "request_id": request_id,
                            "id": "q", "method": "elicitation/create", "params": question()}))
                            .await;
                    }
                    Some("invoke_tool") => {
                        app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                            "ok": true, "content": {"echoed_text": frame["arguments"]["text"]}}))
                            .await;
                    }
                    Some("client_response") => {
                        let said = if frame["result"].is_null() {
                            frame["error"].clone()
                        } else {
                            frame["result"].clone()
                        };
                        app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                            "ok": true, "content": {"client_said": said}}))
                            .await;
                    }
                    _ => {}
                }
            }
        });
        Self { frames, task }
    }

    /// The next frame of `kind` the app received (others skipped).
    async fn next(&mut self, kind: &str) -> Value {
        loop {
            let frame = no_hang(self.frames.recv()).await.expect("the app runs");
            if frame["type"] == kind {
                return frame;
            }
        }
    }
}

impl Drop for AskingApp {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The prompt whose `prompts/get` asks the client.
const ASKING_PROMPT: &str = "plan_week";

/// A registration body with the echo tool and [`ASKING_PROMPT`].
fn asking_body() -> Value {
    let mut body = legacy_session_body();
    body["prompts"] = json!([{"name": ASKING_PROMPT}]);
    body
}

/// A session created on A with its asking app attached to A, reachable
/// from every node.
async fn asking_session(nodes: &[Node], body: &Value) -> (String, AskingApp) {
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let response = a.rest().token(APP_TOKEN).create_session(body).await;
    assert_eq!(response.status(), 200);
    let id = response.json()["mcpSessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    let mut app = AskingApp::on(a, &id).await;
    for node in [b, c] {
        assert!(!call_when_reachable(node, &id, "warm").await.0);
    }
    while let Ok(frame) = app.frames.try_recv() {
        assert_eq!(frame["type"], "invoke_tool", "{frame}");
    }
    (id, app)
}

/// A POST to the session's MCP endpoint on `node` as a 2025-11-25 client.
fn post_2025(node: &Node, session_id: &str, body: &Value) -> RawRequest {
    node.rest()
        .token(OPENCLAW_TOKEN)
        .mcp(&format!("/v1/mcp/{session_id}"), body)
        .header("mcp-protocol-version", "2025-11-25")
}

fn tool_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// A 2025-11-25 call on `node` whose answer is a stream: the stream and
/// the first message on it (a request for the client).
async fn asked_on(node: &Node, session_id: &str, call: Value) -> (SseStream, Value) {
    // The answer's head comes with its first message.
    let response = no_hang(post_2025(node, session_id, &call).send_streaming()).await;
    assert_eq!(response.status(), 200);
    let mut stream = SseStream::of(response);
    let asked = no_hang(stream.next())
        .await
        .unwrap_or_else(|| panic!("the request; read {:?}", stream.unread()));
    (stream, asked)
}

/// A `tools/call` on `node` as a 2026-07-28 client declaring
/// `capabilities`, with `more` params (answers, state): its answer.
async fn call_2026(
    node: &Node,
    session_id: &str,
    tool: &str,
    arguments: Value,
    capabilities: Value,
    more: Value,
) -> Value {
    let call = ToolsCall2026 {
        tool,
        arguments,
        client_info: Some(json!({"name": "cluster-test", "version": "1"})),
    };
    let mcp_url = format!("{}/v1/mcp/{session_id}", node.url());
    let reply = call.post(&mcp_url, &capabilities, &more).send().await;
    assert_eq!(reply.status(), 200, "{}", reply.text());
    reply.json()
}

/// A `prompts/get` of [`ASKING_PROMPT`] on `node` as a 2026-07-28 client
/// that can elicit, with `more` params (answers, state): its answer.
async fn prompt_2026(node: &Node, session_id: &str, more: Value) -> Value {
    let mut params = json!({"name": ASKING_PROMPT, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    }});
    if let (Some(params), Some(more)) = (params.as_object_mut(), more.as_object()) {
        params.extend(more.clone());
    }
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "prompts/get", "params": params});
    let reply = node
        .rest()
        .token(OPENCLAW_TOKEN)
        .mcp(&format!("/v1/mcp/{session_id}"), &body)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "prompts/get")
        .header("mcp-name", ASKING_PROMPT)
        .send()
        .await;
    assert_eq!(reply.status(), 200, "{}", reply.text());
    reply.json()
}

async fn scrape(node: &Node) -> Scrape {
    let text = node.rest().token(APP_TOKEN).metrics().await.text();
    Scrape::parse(&text).expect("Prometheus text")
}

/// Waits until no request of the app waits for a client on `node`.
async fn nothing_pending(node: &Node, after: &str) {
    eventually(
        &format!("no request pending on the bridge's node after {after}"),
        Duration::from_secs(10),
        || async move {
            scrape(node)
                .await
                .value("openclaw_proxy_client_requests_pending", &[])
                == 0.0
        },
    )
    .await;
}

fn structured(result: &Value) -> Value {
    assert_eq!(result["isError"], false, "{result}");
    result["structuredContent"].clone()
}

#[tokio::test]
async fn a_2025_client_on_another_node_is_asked_and_its_answer_reaches_the_app_from_any_node() {
    let (_nats, nodes) = three_nodes().await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let (id, mut app) = asking_session(&nodes, &legacy_session_body()).await;

    // Answered on B, the caller's node, then on C, which has neither the
    // call nor the bridge.
    for (n, answering) in [(1, b), (2, c)] {
        let call = tool_call(n, "echo_text", json!({"text": "ask"}));
        let (mut stream, asked) = asked_on(b, &id, call).await;
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        assert_eq!(asked["params"], question(), "{asked}");
        assert_eq!(
            scrape(a)
                .await
                .value("openclaw_proxy_client_requests_pending", &[]),
            1.0
        );
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "accept", "content": {"calendar": "work"}}});
        let reply = post_2025(answering, &id, &answer).send().await;
        assert_eq!(reply.status(), 202, "{}", reply.text());
        let response = app.next("client_response").await;
        assert_eq!(response["id"], "q", "{response}");
        assert_eq!(response["result"]["content"]["calendar"], "work");
        let result = no_hang(stream.next()).await.expect("the result");
        assert_eq!(result["id"], n, "{result}");
        assert_eq!(
            structured(&result["result"])["client_said"]["action"],
            "accept"
        );
        nothing_pending(a, "the answer").await;

        // Twice: the bridge's node says nothing waits for it, on any node.
        let again = post_2025(answering, &id, &answer).send().await;
        assert_eq!(again.status(), 409, "{}", again.text());
        assert!(
            again.json()["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("no longer running")
                    || message.contains("no request with this id")),
            "{}",
            again.text()
        );
    }
    let on_a = scrape(a).await;
    let answered = [("method", "elicitation/create"), ("outcome", "answered")];
    assert_eq!(
        on_a.value("openclaw_proxy_client_requests_total", &answered),
        2.0
    );
}

/// A call of unusual shape, which the calling node leaves to rmcp (an
/// unknown params field), asks the same way: the request on its stream,
/// the answer from a third node reaching the app on A.
#[tokio::test]
async fn a_call_left_to_rmcp_on_another_node_is_asked_and_answered_from_any_node() {
    let (_nats, nodes) = three_nodes().await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let (id, mut app) = asking_session(&nodes, &legacy_session_body()).await;
    let mut call = tool_call(1, "echo_text", json!({"text": "ask"}));
    call["params"]["x-extension"] = json!({"k": 1});
    let (mut stream, asked) = asked_on(b, &id, call).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"], question(), "{asked}");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"calendar": "home"}}});
    let reply = post_2025(c, &id, &answer).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let response = app.next("client_response").await;
    assert_eq!(response["result"]["content"]["calendar"], "home");
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["id"], 1, "{result}");
    assert_eq!(
        structured(&result["result"])["client_said"]["content"]["calendar"],
        "home"
    );
    nothing_pending(a, "the answer").await;
}

#[tokio::test]
async fn a_2026_client_on_another_node_gets_input_required_and_its_retry_resumes_from_any_node() {
    let (_nats, nodes) = three_nodes().await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let (id, mut app) = asking_session(&nodes, &asking_body()).await;
    let elicits = json!({"elicitation": {}});
    let ask = json!({"text": "ask"});

    // A prompt whose app asks goes in rounds too: input_required from B,
    // the retry on C sent on to B, the app on A asked once.
    let first = prompt_2026(b, &id, json!({})).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert_eq!(first["result"]["inputRequests"]["q"]["params"], question());
    let state = first["result"]["requestState"]
        .as_str()
        .expect("requestState");
    let retry = json!({"requestState": state,
        "inputResponses": {"q": {"action": "accept", "content": {"calendar": "work"}}}});
    let got = prompt_2026(c, &id, retry).await;
    assert_eq!(
        got["result"]["messages"][0]["content"]["text"], "Plan the week in work",
        "{got}"
    );
    app.next("client_response").await;
    nothing_pending(a, "the prompt's retry").await;

    // The round: input_required from B, the retry on C (sent on to B, where
    // the call waits), then on B.
    for retrying in [c, b] {
        let first = call_2026(b, &id, "echo_text", ask.clone(), elicits.clone(), json!({})).await;
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{first}");
        assert_eq!(result["inputRequests"]["q"]["method"], "elicitation/create");
        assert_eq!(result["inputRequests"]["q"]["params"], question());
        let state = result["requestState"].as_str().expect("requestState");
        let invoked = app.next("invoke_tool").await;

        let retry = json!({"requestState": state,
            "inputResponses": {"q": {"action": "accept", "content": {"calendar": "home"}}}});
        let answered = call_2026(
            retrying,
            &id,
            "echo_text",
            ask.clone(),
            elicits.clone(),
            retry.clone(),
        )
        .await;
        assert_eq!(
            structured(&answered["result"])["client_said"]["content"]["calendar"],
            "home",
            "{answered}"
        );
        // One call for the app, however many rounds the client made.
        let response = app.next("client_response").await;
        assert_eq!(response["request_id"], invoked["request_id"], "{response}");
        nothing_pending(a, "the retry").await;

        // The same state again: nothing waits for it any more.
        let again = call_2026(
            retrying,
            &id,
            "echo_text",
            ask.clone(),
            elicits.clone(),
            retry,
        )
        .await;
        assert!(again["error"]["message"].is_string(), "{again}");
    }

    // A tampered state is refused on a node it names no call of.
    let tampered = json!({"requestState": "bm90LWEtc3RhdGU.AAAA", "inputResponses": {}});
    let refused = call_2026(c, &id, "echo_text", ask.clone(), elicits, tampered).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("integrity"), "{refused}");

    // A client that declared no elicitation: the app hears at once, from A,
    // that this caller on B cannot be asked.
    let plain = call_2026(b, &id, "echo_text", ask, json!({}), json!({})).await;
    let said = &structured(&plain["result"])["client_said"];
    assert!(
        said["message"]
            .as_str()
            .is_some_and(|message| message.contains("elicitation capability")),
        "{plain}"
    );
    nothing_pending(a, "the refusal").await;
}

#[tokio::test]
async fn a_legacy_sse_client_on_another_node_is_asked_on_its_stream() {
    let (_nats, nodes) = three_nodes().await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let (id, mut app) = asking_session(&nodes, &legacy_session_body()).await;
    let mut client = LegacyClient::open(&b.url(), &id, Open::Path).await;
    let mut hello = initialize_body(1, "2024-11-05");
    hello["params"]["capabilities"] = json!({"elicitation": {}});
    client.request(&hello).await;
    let (status, _) = client
        .post(&tool_call(2, "echo_text", json!({"text": "ask"})))
        .await;
    assert_eq!(status, 202);

    let asked = client.next_message().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"], question(), "{asked}");
    let (status, text) = client
        .post(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}))
        .await;
    assert_eq!(status, 202, "{text}");
    let response = app.next("client_response").await;
    assert_eq!(
        response["result"],
        json!({"action": "decline"}),
        "{response}"
    );
    let result = client.next_message().await;
    assert_eq!(result["id"], 2, "{result}");
    assert_eq!(
        structured(&result["result"])["client_said"]["action"],
        "decline"
    );
    nothing_pending(a, "the answer").await;
}

/// The documented session plus `delete_files`, which needs the user's yes.
fn gated_body() -> Value {
    let mut body = legacy_session_body();
    if let Some(tools) = body["tools"].as_array_mut() {
        tools.push(
            json!({"name": "delete_files", "description": "Deletes files.",
            "confirm": {"message": "Delete the files for real?"}}),
        );
    }
    body
}

#[tokio::test]
async fn the_confirmation_gate_asks_a_client_on_another_node_in_both_eras() {
    let (_nats, nodes) = three_nodes().await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let (id, mut app) = asking_session(&nodes, &gated_body()).await;

    // 2025-11-25: declined (answered on C), and the app never hears; then
    // accepted (answered on B), and the app gets the call.
    let (mut stream, asked) =
        asked_on(b, &id, tool_call(1, "delete_files", json!({"n": 40}))).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let message = asked["params"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Delete the files for real?"),
        "{message}"
    );
    assert!(message.contains(r#"{"n":40}"#), "{message}");
    let decline = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}});
    let reply = post_2025(c, &id, &decline).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("declined"), "{text}");

    let (mut stream, asked) =
        asked_on(b, &id, tool_call(2, "delete_files", json!({"n": 41}))).await;
    let accept = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}});
    let reply = post_2025(b, &id, &accept).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let invoked = app.next("invoke_tool").await;
    // The declined call never reached the app: this is the accepted one.
    assert_eq!(invoked["tool_name"], "delete_files", "{invoked}");
    assert_eq!(invoked["arguments"], json!({"n": 41}), "{invoked}");
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["result"]["isError"], false, "{result}");

    // 2026-07-28: the gate's input_required from B, accepted in a retry on C.
    let elicits = json!({"elicitation": {}});
    let first = call_2026(
        b,
        &id,
        "delete_files",
        json!({"n": 42}),
        elicits.clone(),
        json!({}),
    )
    .await;
    let round = &first["result"];
    assert_eq!(round["resultType"], "input_required", "{first}");
    assert_eq!(
        round["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    let state = round["requestState"].as_str().expect("requestState");
    let retry = json!({"requestState": state,
        "inputResponses": {"confirm": {"action": "accept"}}});
    let answered = call_2026(c, &id, "delete_files", json!({"n": 42}), elicits, retry).await;
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    let invoked = app.next("invoke_tool").await;
    assert_eq!(invoked["arguments"], json!({"n": 42}), "{invoked}");

    // Decided on A, where the bridge is: counted there.
    let on_a = scrape(a).await;
    let answered = [("method", "elicitation/create"), ("outcome", "answered")];
    assert_eq!(
        on_a.value("openclaw_proxy_client_requests_total", &answered),
        3.0
    );
    nothing_pending(a, "the confirmations").await;
}

#[tokio::test]
async fn a_client_or_a_bridge_that_goes_away_leaves_nothing_pending_across_nodes() {
    let (_nats, nodes) = three_nodes().await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let (id, mut app) = asking_session(&nodes, &legacy_session_body()).await;

    // The client on B goes away while the app waits for it: A's app is
    // told to stop, and nothing waits on A.
    let (stream, asked) = asked_on(b, &id, tool_call(1, "echo_text", json!({"text": "ask"}))).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let invoked = app.next("invoke_tool").await;
    drop(stream);
    let cancel = app.next("cancel_tool").await;
    assert_eq!(cancel["request_id"], invoked["request_id"], "{cancel}");
    nothing_pending(a, "the client went away").await;

    // The app's bridge on A ends while the client on B waits: the call
    // fails at once with why, and nothing waits on A.
    let (mut stream, _) = asked_on(b, &id, tool_call(2, "echo_text", json!({"text": "ask"}))).await;
    app.next("invoke_tool").await;
    drop(app);
    let result = no_hang(stream.next()).await.expect("the call ends");
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(result["result"]["isError"], true, "{result}");
    assert!(text.to_lowercase().contains("bridge"), "{text}");
    nothing_pending(a, "the bridge ended").await;
}
