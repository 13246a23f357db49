//! Cluster mode end to end: a real `nats-server` and three real proxy nodes
//! (the binary, as child processes) on loopback. Every point of "any node
//! serves any request" and of the fault rules is driven here through real
//! clients: the tests' REST client, a WebSocket app, a gRPC app, and rmcp's
//! MCP client.

mod asks;
mod balancer;
mod python_app;
mod typescript_app;
mod user_view;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use openclaw_proxy_core::proto::{self, app_message};
use openclaw_proxy_tests::listening::Open;
use openclaw_proxy_tests::processes::{
    ClusterRound, NatsServer, TempDir, free_port, nats_server_binary,
};
use openclaw_proxy_tests::server_process::proxy_binary;
use openclaw_proxy_tests::{
    APP_TOKEN, AppRequest, BridgeKind, GrpcBridge, LegacyClient, Listener, OPENCLAW_TOKEN,
    RequestBridge, Rest, Route, ServerBuilder, ServerProcess, TestServer, WsApp, eventually,
    initialize_body, legacy_session_body, mcp_connect, sse_messages, texts,
};
use rmcp::model::{
    CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams, ResourceContents,
};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// A cluster node.
type Node = ServerProcess;

/// The pinned `nats-server` (installed on first use), with JetStream on a
/// free loopback port and these extra arguments.
async fn start_nats(extra: Vec<String>) -> NatsServer {
    let binary = nats_server_binary(Path::new(env!("CARGO_TARGET_TMPDIR"))).await;
    NatsServer::start(&binary, extra, 0)
        .await
        .expect("start nats-server")
}

/// The settings of a node on `nats`: a fresh prefix, this idle TTL, and a
/// minute per call.
fn node_on(nats: &NatsServer, ttl: u64) -> ServerBuilder {
    let prefix = format!("test_{}", free_port().expect("free port"));
    TestServer::builder()
        .nats(&nats.url(), &prefix)
        .session_ttl(Duration::from_secs(ttl))
        .tool_timeout(Duration::from_secs(60))
}

/// A cluster: one NATS, `count` nodes sharing a fresh prefix.
async fn cluster(count: usize, ttl: u64) -> (NatsServer, Vec<Node>, ServerBuilder) {
    cluster_with(count, ttl, |settings| settings).await
}

/// [`cluster`], every node with the settings `change` adds.
async fn cluster_with(
    count: usize,
    ttl: u64,
    change: impl FnOnce(ServerBuilder) -> ServerBuilder,
) -> (NatsServer, Vec<Node>, ServerBuilder) {
    let nats = start_nats(Vec::new()).await;
    let settings = change(node_on(&nats, ttl));
    let mut nodes = Vec::new();
    for _ in 0..count {
        nodes.push(settings.clone().spawn().await);
    }
    for node in &nodes {
        node.wait_ready(200).await;
    }
    (nats, nodes, settings)
}

/// Registers the documented session on `node`; returns its id.
async fn create(node: &Node) -> String {
    create_with_tokens(node).await.0
}

fn bridge_url(node: &Node, session_id: &str) -> String {
    format!("ws://{}/v1/chat/sessions/{session_id}/bridge", node.addr)
}

fn echo(text: &str) -> CallToolRequestParams {
    let Value::Object(arguments) = json!({"text": text}) else {
        unreachable!()
    };
    CallToolRequestParams::new("echo_text").with_arguments(arguments)
}

/// One `tools/call` on `node` through rmcp's client: `(is_error, text)`.
async fn call(node: &Node, session_id: &str, text: &str) -> (bool, String) {
    let client = mcp_connect(&node.url(), session_id, Route::Path).await;
    let result = client.call_tool(echo(text)).await.expect("tools/call");
    (result.is_error == Some(true), texts(&result).join(" "))
}

/// Calls until the bridge is reachable from `node` (an attach is announced
/// to the cluster asynchronously for a WebSocket app, which gets no
/// `attached` message).
async fn call_when_reachable(node: &Node, session_id: &str, text: &str) -> (bool, String) {
    for _ in 0..500 {
        let answer = call(node, session_id, text).await;
        if answer.1 != "Bridge is not connected." {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the bridge never became reachable from {}", node.addr);
}

/// A legacy app on `node` that reports progress, then echoes; records the
/// request ids it saw. Ends with the close code.
fn progress_app(
    mut app: WsApp,
    seen: tokio::sync::mpsc::UnboundedSender<String>,
) -> JoinHandle<(u16, String)> {
    tokio::spawn(async move {
        loop {
            match app.next_json().await {
                Ok(frame) if frame["type"] == "invoke_tool" => {
                    let request_id = frame["request_id"].clone();
                    let _ = seen.send(request_id.as_str().unwrap_or_default().to_owned());
                    if frame["arguments"]["text"] == "hold" {
                        continue;
                    }
                    app.send_json(json!({"type": "progress", "request_id": request_id, "progress": 1, "total": 2, "message": "halfway"}))
                        .await;
                    app.send_json(
                        json!({"type": "invoke_result", "request_id": request_id, "ok": true,
                                         "content": {"echoed_text": frame["arguments"]["text"]}}),
                    )
                    .await;
                }
                Ok(_) => {}
                Err(closed) => return closed,
            }
        }
    })
}

/// A WebSocket app on `node` that answers each call with what `answer`
/// makes of its arguments, after the delay it gives.
async fn app_on(
    node: &Node,
    session_id: &str,
    answer: fn(&Value) -> (Duration, Value),
) -> JoinHandle<()> {
    let mut app = WsApp::connect(&bridge_url(node, session_id), Some(APP_TOKEN))
        .await
        .expect("bridge");
    tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "invoke_tool" {
                continue;
            }
            let (delay, content) = answer(&frame["arguments"]);
            tokio::time::sleep(delay).await;
            app.send_json(
                json!({"type": "invoke_result", "request_id": frame["request_id"],
                                 "ok": true, "content": content}),
            )
            .await;
        }
    })
}

/// A call on `node` that the progress app holds without answering.
fn hold(node: &Node, session_id: &str) -> JoinHandle<rmcp::model::CallToolResult> {
    let (url, id) = (node.url(), session_id.to_owned());
    tokio::spawn(async move {
        let client = mcp_connect(&url, &id, Route::Path).await;
        client.call_tool(echo("hold")).await.expect("tools/call")
    })
}

/// A raw `tools/call` with a progress token: the SSE events in order.
async fn call_with_progress(node: &Node, session_id: &str) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "echo_text", "arguments": {"text": "far"}, "_meta": {"progressToken": "p1"}}});
    let response = node
        .rest()
        .token(OPENCLAW_TOKEN)
        .mcp(&format!("/v1/mcp/{session_id}"), &body)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await;
    sse_messages(&response.text())
}

#[tokio::test]
async fn any_node_serves_any_request() {
    let (_nats, nodes, _) = cluster(3, 300).await;
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let id = create(a).await;

    // The bridge on B, the call on C: progress first, then the answer.
    let app = WsApp::connect(&bridge_url(b, &id), Some(APP_TOKEN))
        .await
        .expect("bridge on B");
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let on_b = progress_app(app, seen_tx.clone());
    assert_eq!(
        call_when_reachable(c, &id, "hello").await,
        (false, r#"{"echoed_text":"hello"}"#.to_owned())
    );
    let events = call_with_progress(c, &id).await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["method"], "notifications/progress");
    assert_eq!(events[0]["params"]["message"], "halfway");
    assert_eq!(
        events[1]["result"]["structuredContent"]["echoed_text"],
        "far"
    );

    // Every node lists the tools, and knows an unknown session is unknown.
    for node in &nodes {
        let client = mcp_connect(&node.url(), &id, Route::Header).await;
        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), 1, "on {}", node.addr);
        let unknown = "00000000-0000-4000-8000-000000000000";
        assert_eq!(
            list_with(node, unknown, OPENCLAW_TOKEN).await,
            404,
            "on {}",
            node.addr
        );
    }

    // A new bridge on C replaces the one on B, whose call in flight fails
    // at once; the next call reaches C.
    let held = hold(c, &id);
    let mut ids_on_b = Vec::new();
    loop {
        let request_id = seen.recv().await.expect("B sees the held call");
        ids_on_b.push(request_id);
        if ids_on_b.len() == 3 {
            break;
        }
    }
    let app_c = WsApp::connect(&bridge_url(c, &id), Some(APP_TOKEN))
        .await
        .expect("bridge on C");
    let (seen_c_tx, mut seen_c) = tokio::sync::mpsc::unbounded_channel();
    let on_c = progress_app(app_c, seen_c_tx);
    let (code, _) = on_b.await.expect("B's app");
    assert_eq!(code, 4409, "B's bridge is replaced");
    let held = held.await.expect("held call");
    assert_eq!(held.is_error, Some(true));
    assert!(
        texts(&held)
            .join(" ")
            .contains("replaced by a newer connection"),
        "{:?}",
        texts(&held)
    );
    assert_eq!(
        call_when_reachable(a, &id, "after takeover").await,
        (false, r#"{"echoed_text":"after takeover"}"#.to_owned())
    );

    // Request ids stay unique across nodes.
    let mut ids = HashSet::new();
    for request_id in ids_on_b {
        assert!(ids.insert(request_id.clone()), "{request_id} repeated");
    }
    while let Ok(request_id) = seen_c.try_recv() {
        assert!(ids.insert(request_id.clone()), "{request_id} repeated on C");
    }

    // DELETE on A ends the bridge on C (4404) and fails its call in flight.
    let held = hold(b, &id);
    seen_c.recv().await.expect("C sees the held call");
    let deleted = a.rest().token(APP_TOKEN).delete_session(&id).await;
    assert_eq!(deleted.status(), 200);
    let (code, _) = on_c.await.expect("C's app");
    assert_eq!(code, 4404);
    let held = held.await.expect("held call");
    assert_eq!(held.is_error, Some(true));
    assert!(
        texts(&held).join(" ").contains("deleted"),
        "{:?}",
        texts(&held)
    );
    for node in &nodes {
        assert_eq!(
            list_with(node, &id, OPENCLAW_TOKEN).await,
            404,
            "deleted everywhere ({})",
            node.addr
        );
    }
}

#[tokio::test]
async fn a_grpc_bridge_serves_calls_from_other_nodes_and_no_bridge_is_not_connected() {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let id = create(a).await;
    // No bridge anywhere: NATS has no responder, and says so at once.
    assert_eq!(
        call(b, &id, "x").await,
        (true, "Bridge is not connected.".to_owned())
    );
    let channel = tonic::transport::Channel::from_shared(b.url())
        .expect("uri")
        .connect()
        .await
        .expect("connect to B");
    // `open` returns once the proxy said `attached`: by then the cluster knows.
    let bridge = GrpcBridge::open(channel, APP_TOKEN, &id)
        .await
        .expect("gRPC bridge on B");
    let served = bridge.serve_echo();
    let (is_error, text) = call(a, &id, "over grpc").await;
    assert!(!is_error, "{text}");
    assert!(text.contains("over grpc"), "{text}");
    served.abort();
}

#[tokio::test]
async fn the_idle_ttl_holds_across_the_cluster() {
    let (_nats, nodes, _) = cluster(3, 2).await;
    let idle = create(&nodes[0]).await;
    let kept = create(&nodes[0]).await;
    let app = WsApp::connect(&bridge_url(&nodes[1], &kept), Some(APP_TOKEN))
        .await
        .expect("bridge");
    let (seen_tx, _seen) = tokio::sync::mpsc::unbounded_channel();
    let app = progress_app(app, seen_tx);
    call_when_reachable(&nodes[2], &kept, "warm").await;

    // The idle one ages out of the bucket and every node forgets it.
    for node in &nodes {
        wait_gone(node, &idle).await;
    }
    // The bridged one lives on, several TTLs later, on every node.
    for node in &nodes {
        let (is_error, text) = call(node, &kept, "alive").await;
        assert!(!is_error, "{}: {text}", node.addr);
    }
    // Without its bridge, it expires too.
    app.abort();
    for node in &nodes {
        wait_gone(node, &kept).await;
    }
}

/// Waits (bounded) until `node` answers 404 for the session.
async fn wait_gone(node: &Node, session_id: &str) {
    for _ in 0..1_000 {
        if list_with(node, session_id, OPENCLAW_TOKEN).await == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("session still known to {} after expiry", node.addr);
}

#[tokio::test]
async fn a_killed_node_fails_its_calls_and_its_sessions_live_on() {
    let (_nats, mut nodes, _) = cluster(3, 300).await;
    let id = create(&nodes[0]).await;
    let app = WsApp::connect(&bridge_url(&nodes[1], &id), Some(APP_TOKEN))
        .await
        .expect("bridge on B");
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let app = progress_app(app, seen_tx);
    call_when_reachable(&nodes[2], &id, "warm").await;
    seen.recv().await.expect("warm call seen");

    // A call waits on B; B dies.
    let held = hold(&nodes[2], &id);
    seen.recv().await.expect("B has the call");
    let b = nodes.remove(1);
    b.kill().await;
    let held = held.await.expect("held call");
    assert_eq!(held.is_error, Some(true));
    let text = texts(&held).join(" ");
    assert!(text.contains("stopped answering"), "{text}");
    app.abort();

    // The app reconnects to another node and gets its session back.
    let app = WsApp::connect(&bridge_url(&nodes[0], &id), Some(APP_TOKEN))
        .await
        .expect("bridge on A");
    let (seen_tx, _seen) = tokio::sync::mpsc::unbounded_channel();
    let _app = progress_app(app, seen_tx);
    assert_eq!(
        call_when_reachable(&nodes[1], &id, "back").await,
        (false, r#"{"echoed_text":"back"}"#.to_owned())
    );
}

#[tokio::test]
async fn a_call_that_outlasts_the_silence_guard_lives_on_the_holders_alive_messages() {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let id = create(&nodes[0]).await;
    // Calls of "slow" are answered after four seconds: longer than the
    // three silent seconds after which a caller gives the holder up, so
    // only the holder's `alive` keeps the call.
    let app = app_on(&nodes[0], &id, |arguments| {
        let text = arguments["text"].clone();
        let delay = if text == "slow" { 4 } else { 0 };
        (Duration::from_secs(delay), json!({"echoed_text": text}))
    })
    .await;
    call_when_reachable(&nodes[1], &id, "warm").await;
    assert_eq!(
        call(&nodes[1], &id, "slow").await,
        (false, r#"{"echoed_text":"slow"}"#.to_owned())
    );
    app.abort();
}

/// A call or an answer larger than NATS's `max_payload` (1 MB by default,
/// under the proxy's own 4 MB body limit) cannot cross between nodes: the
/// call fails at once with a message naming the NATS setting, rather than
/// waiting on an answer that cannot come, and the next call goes through.
#[tokio::test]
async fn a_call_or_answer_too_large_for_nats_fails_at_once_naming_max_payload() {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let id = create(&nodes[0]).await;
    let app = app_on(&nodes[0], &id, |arguments| {
        let text = arguments["text"].as_str().unwrap_or_default();
        let content = if text == "a large answer" {
            json!({ "padding": "y".repeat(1_500_000) })
        } else {
            json!({ "length": text.len() })
        };
        (Duration::ZERO, content)
    })
    .await;
    call_when_reachable(&nodes[1], &id, "warm").await;
    let (is_error, text) = call(&nodes[1], &id, &"x".repeat(1_500_000)).await;
    assert!(is_error, "{text}");
    assert!(text.starts_with("The call is 15000"), "{text}");
    assert!(text.contains("(1048576 bytes, its max_payload)"), "{text}");
    let (is_error, text) = call(&nodes[1], &id, "a large answer").await;
    assert!(is_error, "{text}");
    assert!(text.starts_with("The answer is 15000"), "{text}");
    assert!(text.contains("max_payload"), "{text}");
    // On the bridge's own node nothing crosses NATS.
    assert_eq!(
        call(&nodes[0], &id, &"x".repeat(1_500_000)).await,
        (false, r#"{"length":1500000}"#.to_owned())
    );
    assert!(!call(&nodes[0], &id, "a large answer").await.0);
    assert_eq!(
        call(&nodes[1], &id, "small").await,
        (false, r#"{"length":5}"#.to_owned())
    );
    app.abort();
}

#[tokio::test]
async fn nodes_ride_out_a_nats_restart() {
    let (mut nats, nodes, _) = cluster(2, 300).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let id = create(a).await;
    let app = WsApp::connect(&bridge_url(b, &id), Some(APP_TOKEN))
        .await
        .expect("bridge on B");
    let (seen_tx, _seen) = tokio::sync::mpsc::unbounded_channel();
    let _app = progress_app(app, seen_tx);
    call_when_reachable(a, &id, "before").await;

    nats.stop().await;
    for node in &nodes {
        node.wait_ready(503).await;
        assert_eq!(node.status_of("/health").await, 200, "liveness stays");
    }
    let refused = a
        .rest()
        .token(APP_TOKEN)
        .create_session(&legacy_session_body())
        .await;
    assert_eq!(refused.status(), 503);
    let body = refused.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("NATS"),
        "{body}"
    );
    // A call that needs the cluster fails with a sentence, not a hang.
    let (is_error, text) = call(a, &id, "during").await;
    assert!(is_error && text.contains("NATS"), "{text}");

    nats.resume().await.expect("restart nats-server");
    for node in &nodes {
        node.wait_ready(200).await;
    }
    assert_eq!(
        call_when_reachable(a, &id, "after").await,
        (false, r#"{"echoed_text":"after"}"#.to_owned())
    );
    create(b).await;
}

#[tokio::test]
async fn bad_cluster_settings_stop_the_node_and_an_absent_nats_is_not_ready() {
    let settings = TestServer::builder()
        .nats("nats://127.0.0.1:1:2", "bad")
        .session_ttl(Duration::from_secs(300))
        .tool_timeout(Duration::from_secs(60));
    let stderr = settings
        .clone()
        .try_spawn()
        .await
        .err()
        .expect("a malformed URL stops the node");
    assert!(stderr.contains("OPENCLAW_PROXY_NATS_URL"), "{stderr}");

    let port = free_port().expect("free port");
    let settings = settings.nats(&format!("nats://127.0.0.1:{port}"), "bad");
    let stderr = settings
        .clone()
        .env("OPENCLAW_PROXY_NATS_CREDS_FILE", "/nonexistent/node.creds")
        .try_spawn()
        .await
        .err()
        .expect("unreadable credentials stop the node");
    assert!(
        stderr.contains("OPENCLAW_PROXY_NATS_CREDS_FILE"),
        "{stderr}"
    );

    // Nobody listens there: the node runs, alive but not ready.
    let node = settings.spawn().await;
    assert_eq!(node.status_of("/health").await, 200);
    node.wait_ready(503).await;
}

/// Registers on `node` and returns `(id, session_token, mcp_token)`.
async fn create_with_tokens(node: &Node) -> (String, String, String) {
    let response = node
        .rest()
        .token(APP_TOKEN)
        .create_session(&legacy_session_body())
        .await;
    assert_eq!(response.status(), 200, "create on {}", node.addr);
    let reply = response.json();
    let field = |name: &str| reply[name].as_str().expect(name).to_owned();
    (
        field("mcpSessionId"),
        field("session_token"),
        field("mcp_token"),
    )
}

/// `tools/list` on `node` with `token`: the HTTP status.
async fn list_with(node: &Node, session_id: &str, token: &str) -> u16 {
    node.rest()
        .token(token)
        .mcp(
            &format!("/v1/mcp/{session_id}"),
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .send()
        .await
        .status()
        .as_u16()
}

#[tokio::test]
async fn per_session_tokens_work_on_every_node() {
    let nats = start_nats(Vec::new()).await;
    let strict = node_on(&nats, 300).require_session_tokens(true);
    let mut nodes = Vec::new();
    for _ in 0..3 {
        let node = strict.clone().spawn().await;
        node.wait_ready(200).await;
        nodes.push(node);
    }
    let (id, session_token, mcp_token) = create_with_tokens(&nodes[0]).await;
    let (other_id, _, other_mcp_token) = create_with_tokens(&nodes[0]).await;
    for node in &nodes {
        assert_eq!(list_with(node, &id, &mcp_token).await, 200, "{}", node.addr);
        assert_eq!(
            list_with(node, &id, &other_mcp_token).await,
            401,
            "another session's token, on {}",
            node.addr
        );
        assert_eq!(list_with(node, &other_id, &mcp_token).await, 401);
        assert_eq!(list_with(node, &id, OPENCLAW_TOKEN).await, 401);
    }
    // The session token opens the bridge on another node; the MCP token
    // reaches it from a third.
    let app = WsApp::connect(&bridge_url(&nodes[1], &id), Some(&session_token))
        .await
        .expect("bridge with the session token");
    let (seen_tx, _seen) = tokio::sync::mpsc::unbounded_channel();
    let _app = progress_app(app, seen_tx);
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "echo_text", "arguments": {"text": "t"}}});
    let mut answered = Value::Null;
    for _ in 0..500 {
        answered = nodes[2]
            .rest()
            .token(&mcp_token)
            .mcp(&format!("/v1/mcp/{id}"), &body)
            .send()
            .await
            .json();
        if answered["result"]["isError"] != json!(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        answered["result"]["structuredContent"]["echoed_text"], "t",
        "{answered}"
    );
}

#[tokio::test]
async fn a_tool_update_on_one_node_is_seen_on_every_node() {
    let (_nats, nodes, _) = cluster(3, 300).await;
    let id = create(&nodes[0]).await;
    // Every node has the session cached before the update.
    for node in &nodes {
        let client = mcp_connect(&node.url(), &id, Route::Path).await;
        assert_eq!(client.list_all_tools().await.expect("tools/list").len(), 1);
    }
    let response = nodes[1]
        .rest()
        .token(APP_TOKEN)
        .put_tools(&id, &json!({"tools": [{"name": "a"}, {"name": "b"}]}))
        .await;
    assert_eq!(response.status(), 200);
    for node in &nodes {
        let mut names = Vec::new();
        for _ in 0..500 {
            let client = mcp_connect(&node.url(), &id, Route::Path).await;
            let tools = client.list_all_tools().await.expect("tools/list");
            names = tools.iter().map(|tool| tool.name.to_string()).collect();
            if names.len() == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(names, vec!["a", "b"], "on {}", node.addr);
    }
}

#[tokio::test]
async fn the_callers_traceparent_crosses_nats_and_metrics_count_on_the_calling_node() {
    const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (_nats, nodes, _) = cluster(2, 300).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let id = create(a).await;
    let channel = tonic::transport::Channel::from_shared(b.url())
        .expect("uri")
        .connect()
        .await
        .expect("connect to B");
    let mut bridge = GrpcBridge::open(channel, APP_TOKEN, &id)
        .await
        .expect("gRPC bridge on B");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "echo_text", "arguments": {"text": "hi"}}});
    let request = a
        .rest()
        .token(OPENCLAW_TOKEN)
        .mcp(&format!("/v1/mcp/{id}"), &body)
        .header("traceparent", CALLER)
        .send();
    let app = async {
        let invoke = bridge.next_invoke().await;
        bridge
            .answer(&invoke.request_id, true, &invoke.arguments_json, "")
            .await;
        invoke
    };
    let (response, invoke) = tokio::join!(request, app);
    assert_eq!(response.status(), 200);
    // Nodes export no traces here, so the caller's own value arrives.
    assert_eq!(invoke.trace_parent, CALLER);

    let scrape = |node: &Node| {
        let rest = node.rest().token(APP_TOKEN);
        async move {
            let text = rest.metrics().await.text();
            openclaw_proxy_tests::prometheus::Scrape::parse(&text).expect("Prometheus text")
        }
    };
    let (on_a, on_b) = (scrape(a).await, scrape(b).await);
    let ok = [("outcome", "ok")];
    assert_eq!(on_a.value("openclaw_proxy_tool_calls_total", &ok), 1.0);
    assert_eq!(on_b.value("openclaw_proxy_tool_calls_total", &ok), 0.0);
    // A sent it over NATS; B, which served it, forwarded nothing.
    assert_eq!(on_a.value("openclaw_proxy_calls_forwarded_total", &[]), 1.0);
    assert_eq!(on_b.value("openclaw_proxy_calls_forwarded_total", &[]), 0.0);
    assert_eq!(on_a.value("openclaw_proxy_nats_connected", &[]), 1.0);
    let grpc = [("transport", "grpc")];
    assert_eq!(on_a.value("openclaw_proxy_bridges", &grpc), 0.0);
    assert_eq!(on_b.value("openclaw_proxy_bridges", &grpc), 1.0);
}

#[tokio::test]
async fn a_caller_that_goes_away_on_one_node_cancels_the_call_in_the_app_on_another() {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let id = create(&nodes[0]).await;
    let mut app = WsApp::connect(&bridge_url(&nodes[0], &id), Some(APP_TOKEN))
        .await
        .expect("bridge on A");
    // The app echoes, holds calls of "hold", and reports what it is told.
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let app = tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            let request_id = frame["request_id"].as_str().unwrap_or_default().to_owned();
            match frame["type"].as_str() {
                Some("invoke_tool") if frame["arguments"]["text"] == "hold" => {
                    let _ = events_tx.send(("invoked", request_id));
                }
                Some("invoke_tool") => {
                    app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                                         "ok": true, "content": "echo"}))
                        .await;
                }
                Some("cancel_tool") => {
                    let _ = events_tx.send(("cancelled", request_id));
                }
                _ => {}
            }
        }
    });
    call_when_reachable(&nodes[1], &id, "warm").await;

    // A call on B waits on A's bridge; its MCP client goes away.
    let held = hold(&nodes[1], &id);
    let (what, invoked) = events.recv().await.expect("the app got the call");
    assert_eq!(what, "invoked");
    held.abort();
    let (what, cancelled) = tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("a cancellation within the guard")
        .expect("the app is still up");
    assert_eq!((what, cancelled), ("cancelled", invoked));
    // The bridge goes on serving.
    let (failed, text) = call(&nodes[1], &id, "after").await;
    assert!(!failed, "{text}");
    app.abort();
}

#[tokio::test]
async fn a_node_reaches_a_tls_nats_through_the_configured_ca_only() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let dir = TempDir::new("nats-tls").expect("temp dir");
    let mut authority = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    authority.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let authority = CertifiedIssuer::self_signed(authority, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let certificate = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("server params")
        .signed_by(&key, &authority)
        .expect("server certificate");
    let (ca, cert, server_key) = (
        dir.path().join("ca.pem"),
        dir.path().join("server.pem"),
        dir.path().join("server.key"),
    );
    std::fs::write(&ca, authority.pem()).expect("write CA");
    std::fs::write(&cert, certificate.pem()).expect("write certificate");
    std::fs::write(&server_key, key.serialize_pem()).expect("write key");
    let path = |file: &std::path::Path| file.display().to_string();
    let nats = start_nats(vec![
        "--tls".into(),
        "--tlscert".into(),
        path(&cert),
        "--tlskey".into(),
        path(&server_key),
    ])
    .await;
    let settings = node_on(&nats, 300);
    // With the CA the node joins: ready, and sessions work.
    let trusting = settings
        .clone()
        .env("OPENCLAW_PROXY_NATS_TLS_CA_FILE", &path(&ca))
        .spawn()
        .await;
    trusting.wait_ready(200).await;
    let id = create(&trusting).await;
    let stored = trusting.rest().token(APP_TOKEN).get_session(&id).await;
    assert_eq!(
        stored.status(),
        200,
        "the session is in the directory over TLS"
    );
    // Without it the server's certificate is not trusted: alive, not ready.
    let untrusting = settings.spawn().await;
    assert_eq!(untrusting.status_of("/health").await, 200);
    untrusting.wait_ready(503).await;
}

/// The cluster benchmark (`loadgen cluster`) runs whole on a real
/// `nats-server` and two nodes: every call of every run checked. It asserts
/// what ran, never how fast.
#[tokio::test]
async fn the_cluster_benchmark_runs_same_node_and_cross_node_calls() {
    let round = ClusterRound {
        binary: proxy_binary().await.display().to_string(),
        nats_server: nats_server_binary(Path::new(env!("CARGO_TARGET_TMPDIR")))
            .await
            .display()
            .to_string(),
        rounds: 1,
        duration: Duration::from_millis(400),
        concurrency: vec![1, 4],
        node_threads: 1,
        nats_threads: 1,
        app_token: APP_TOKEN.into(),
        openclaw_token: OPENCLAW_TOKEN.into(),
        elicit: true,
    };
    let mut lines = Vec::new();
    let summary = round
        .run(&mut |line| lines.push(line.clone()))
        .await
        .expect("cluster round");
    let placements: Vec<(u64, &str, &str)> = lines
        .iter()
        .map(|line| {
            assert_eq!(line["errors"], 0, "{line}");
            assert!(line["calls"].as_u64() > Some(0), "{line}");
            (
                line["concurrency"].as_u64().unwrap_or_default(),
                line["kind"].as_str().unwrap_or_default(),
                line["placement"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let mut expected = Vec::new();
    for concurrency in [1, 4] {
        for kind in ["plain", "elicit 2025-11-25", "elicit 2026-07-28"] {
            expected.push((concurrency, kind, "same"));
            expected.push((concurrency, kind, "cross"));
        }
    }
    assert_eq!(placements, expected);
    // Each eliciting run's calls were asked their question, by the
    // revision named, wherever the client was.
    for line in lines.iter().filter(|line| line["kind"] != "plain") {
        assert_eq!(line["elicit"], true, "{line}");
        let kind = line["kind"].as_str().unwrap_or_default();
        assert!(
            kind.ends_with(line["protocol"].as_str().unwrap_or("?")),
            "{line}"
        );
    }
    // Cross-node calls went through the second node and NATS: both worked
    // (CPU time counts in 10 ms ticks, so over both cross-node runs).
    let cross_cpu = |process: &str| -> f64 {
        lines
            .iter()
            .filter(|line| line["placement"] == "cross")
            .filter_map(|line| line["cpu_us_per_call"][process].as_f64())
            .sum()
    };
    assert!(cross_cpu("calling_node") > 0.0, "{lines:?}");
    assert!(cross_cpu("nats_server") > 0.0, "{lines:?}");
    for concurrency in ["c1", "c4", "c1 elicit 2025-11-25", "c4 elicit 2026-07-28"] {
        let figures = &summary["by_concurrency"][concurrency];
        assert!(
            figures["cross_over_same_calls_per_s"].as_f64() > Some(0.0),
            "{summary}"
        );
        assert!(figures["cross_p50_us"].as_f64() > Some(0.0), "{summary}");
    }
}

/// A registration body with the echo tool, a resource, a resource template
/// (so an undeclared URI reaches the app) and two prompts.
fn declaring_body() -> Value {
    let mut body = legacy_session_body();
    body["resources"] = json!([
        {"uri": "notes://welcome", "name": "welcome", "title": "Welcome", "mimeType": "text/plain"}
    ]);
    body["resourceTemplates"] = json!([
        {"uriTemplate": "notes://by-id/{id}", "name": "note"}
    ]);
    body["prompts"] = json!([
        {"name": "summarise", "arguments": [{"name": "ticket", "required": true}]},
        {"name": "locked"}
    ]);
    body
}

/// A WebSocket app that answers `mcp_request` frames as a notes app would,
/// and reports each request it gets.
/// A notes app's answers to MCP requests; each request seen is sent on
/// `seen` as `{method, params}`.
fn notes_app(
    app: RequestBridge,
    seen: tokio::sync::mpsc::UnboundedSender<Value>,
) -> JoinHandle<Vec<AppRequest>> {
    app.serve(move |request| {
        let params = &request.params;
        let _ = seen.send(json!({"method": request.method, "params": params}));
        match (request.method.as_str(), params["uri"].as_str()) {
            ("resources/read", Some("notes://welcome")) => Ok(json!({"contents": [
                {"uri": "notes://welcome", "mimeType": "text/plain", "text": "Hello from A"}]})),
            ("resources/read", uri) => Err((
                -32002,
                format!("No note at {}", uri.unwrap_or_default()),
                json!({"uri": uri}),
            )),
            ("prompts/get", _) if params["name"] == "locked" => Err((
                -32001,
                "locked".to_owned(),
                json!({"until": 12345678901234567890_u64, "by": "ops"}),
            )),
            ("prompts/get", _) => Ok(json!({"messages": [{"role": "user", "content": {
                "type": "text",
                "text": format!("Summarise {}", params["arguments"]["ticket"].as_str().unwrap_or("?"))}}]})),
            _ => Err((-32601, "not served".to_owned(), Value::Null)),
        }
    })
}

#[tokio::test]
async fn resources_and_prompts_on_one_node_are_read_from_another() {
    for kind in BridgeKind::BOTH {
        resources_and_prompts_read_from_another_node(kind).await;
    }
}

/// A session whose app is on node A over `kind` serves a client on node B.
async fn resources_and_prompts_read_from_another_node(kind: BridgeKind) {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let created = a
        .rest()
        .token(APP_TOKEN)
        .create_session(&declaring_body())
        .await;
    assert_eq!(created.status(), 200);
    let id = created.json()["mcpSessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    let app = RequestBridge::attach(kind, &a.url(), &id).await;
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let app = notes_app(app, seen_tx);
    let client = mcp_connect(&b.url(), &id, Route::Path).await;

    // B lists from the shared declaration, without asking the app.
    let resources = client.list_resources(None).await.expect("resources/list");
    let uris: Vec<&str> = resources.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["notes://welcome"]);
    let prompts = client.list_prompts(None).await.expect("prompts/list");
    let names: Vec<&str> = prompts.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["summarise", "locked"]);

    // A read on B reaches the app on A (once A's attach is known to B).
    let mut read = None;
    for _ in 0..500 {
        match client
            .read_resource(ReadResourceRequestParams::new("notes://welcome"))
            .await
        {
            Ok(result) => {
                read = Some(result);
                break;
            }
            Err(error) if format!("{error:?}").contains("Bridge is not connected") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("resources/read: {error:?}"),
        }
    }
    let read =
        read.unwrap_or_else(|| panic!("{}: the bridge on A became reachable from B", kind.name()));
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "Hello from A"),
        other => panic!("expected text, got {other:?}"),
    }
    let asked = seen.recv().await.expect("the app saw the read");
    assert_eq!(asked["method"], "resources/read");
    assert_eq!(asked["params"]["uri"], "notes://welcome");

    // A prompt, with its argument.
    let mut arguments = serde_json::Map::new();
    arguments.insert("ticket".into(), json!("T-7"));
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("summarise").with_arguments(arguments))
        .await
        .expect("prompts/get");
    let messages = serde_json::to_value(&prompt.messages).expect("messages");
    assert_eq!(
        messages[0]["content"]["text"], "Summarise T-7",
        "{messages}"
    );
    let asked = seen.recv().await.expect("the app saw the prompt request");
    assert_eq!(asked["params"]["arguments"]["ticket"], "T-7");

    // An unknown URI: the app's resource-not-found crosses back, carrying
    // the URI and the app's own words.
    let error = client
        .read_resource(ReadResourceRequestParams::new("notes://by-id/missing"))
        .await
        .expect_err("not found");
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code.0, -32002, "{error:?}");
    assert_eq!(error.message, "No note at notes://by-id/missing");
    assert_eq!(
        error.data,
        Some(json!({"uri": "notes://by-id/missing"})),
        "{error:?}"
    );

    // An app's error keeps its code and its data.
    let error = client
        .get_prompt(GetPromptRequestParams::new("locked"))
        .await
        .expect_err("locked");
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code.0, -32001, "{error:?}");
    assert_eq!(
        error.data,
        Some(json!({"until": 12345678901234567890_u64, "by": "ops"}))
    );
    client.cancel().await.expect("close");

    // Counted on the node that received them, as tool calls are.
    let scrape = |node: &Node| {
        let rest = node.rest().token(APP_TOKEN);
        async move {
            let text = rest.metrics().await.text();
            openclaw_proxy_tests::prometheus::Scrape::parse(&text).expect("Prometheus text")
        }
    };
    let (on_a, on_b) = (scrape(a).await, scrape(b).await);
    let read_ok = [("method", "resources/read"), ("outcome", "ok")];
    assert_eq!(
        on_b.value("openclaw_proxy_app_requests_total", &read_ok),
        1.0
    );
    assert_eq!(
        on_a.get("openclaw_proxy_app_requests_total", &read_ok)
            .unwrap_or_default(),
        0.0
    );
    let prompt_errors = [("method", "prompts/get"), ("outcome", "tool_error")];
    assert_eq!(
        on_b.value("openclaw_proxy_app_requests_total", &prompt_errors),
        1.0
    );
    app.abort();
}

#[tokio::test]
async fn log_records_of_a_call_on_one_node_reach_a_client_on_another_at_its_level() {
    let (_nats, nodes, _) = cluster(2, 300).await;
    let (a, b) = (&nodes[0], &nodes[1]);
    let created = a
        .rest()
        .token(APP_TOKEN)
        .create_session(&legacy_session_body())
        .await;
    assert_eq!(created.status(), 200);
    let id = created.json()["mcpSessionId"]
        .as_str()
        .expect("session id")
        .to_owned();
    let mut app = WsApp::connect(&bridge_url(a, &id), Some(APP_TOKEN))
        .await
        .expect("bridge on A");
    let app = tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "invoke_tool" {
                continue;
            }
            let id = frame["request_id"].clone();
            for (level, data) in [
                ("debug", json!("quiet")),
                ("error", json!({"disk": "full"})),
            ] {
                app.send_json(json!({"type": "log", "request_id": id, "level": level,
                                     "logger": "a", "data": data}))
                    .await;
            }
            app.send_json(
                json!({"type": "invoke_result", "request_id": id, "ok": true,
                                 "content": "done"}),
            )
            .await;
        }
    });
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/logLevel": "warning"});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "echo_text", "arguments": {"text": "x"}, "_meta": meta}});
    // B learns of A's bridge shortly after the attach.
    let mut messages = Vec::new();
    for _ in 0..500 {
        let reply = b
            .rest()
            .mcp(&format!("/v1/mcp/{id}"), &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo_text")
            .header("accept", "application/json, text/event-stream")
            .send()
            .await;
        let text = reply.text();
        if text.contains("Bridge is not connected") {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        messages = sse_messages(&text);
        break;
    }
    let logs: Vec<&Value> = messages
        .iter()
        .filter(|message| message["method"] == "notifications/message")
        .collect();
    assert_eq!(
        logs.len(),
        1,
        "only the error is at warning or above: {messages:?}"
    );
    assert_eq!(logs[0]["params"]["level"], "error");
    assert_eq!(logs[0]["params"]["data"], json!({"disk": "full"}));
    assert_eq!(messages.last().map(|m| m["id"].clone()), Some(json!(1)));
    app.abort();
}

/// OAuth in cluster mode: a session bound to alice on one node opens to her
/// access token on every node, her identity crossing NATS to the app; every
/// bad token of the end-to-end tests is refused on every node and every MCP
/// route with the challenge naming the public URL the nodes share.
#[tokio::test]
async fn access_tokens_open_owned_sessions_on_every_node_and_bad_ones_none() {
    use openclaw_proxy_tests::oauth::{assert_challenged, on_every_route};
    let issuer = openclaw_proxy_tests::TestIssuer::start().await;
    let nats = start_nats(Vec::new()).await;
    let public = "https://mcp.example.com";
    let mut oauth = openclaw_proxy_edge::oauth::OAuthSettings::new(issuer.url.clone());
    oauth.required_scopes = vec!["mcp".into()];
    let settings = node_on(&nats, 300)
        .env("OPENCLAW_PROXY_PUBLIC_URL", public)
        .oauth(oauth);
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let node = settings.clone().spawn().await;
        node.wait_ready(200).await;
        nodes.push(node);
    }
    let mut body = legacy_session_body();
    body["owner"] = json!({"subject": "alice"});
    let reply = nodes[0]
        .rest()
        .token(APP_TOKEN)
        .create_session(&body)
        .await
        .json();
    let id = reply["mcpSessionId"].as_str().expect("id").to_owned();
    let session_token = reply["session_token"].as_str().expect("token").to_owned();
    let (other, _, _) = create_with_tokens(&nodes[0]).await;
    let audience = format!("{public}/v1/mcp");
    let alice = issuer.token("alice", &audience);
    let mut refused = issuer.bad_tokens("alice", &audience);
    refused.push(openclaw_proxy_tests::oauth::BadToken {
        case: "another subject",
        token: issuer.token("bob", &audience),
        error: "invalid_token",
    });
    for node in &nodes {
        assert_eq!(list_with(node, &id, &alice).await, 200, "{}", node.addr);
        assert_eq!(list_with(node, &other, &alice).await, 401, "{}", node.addr);
        for bad in &refused {
            let replies = on_every_route(&node.url(), &id, &bad.token).await;
            assert_eq!(
                replies.len(),
                4,
                "{} on {}: a route let it in",
                bad.case,
                node.addr
            );
            let case = format!("{} on {}", bad.case, node.addr);
            for (route, reply) in replies {
                assert_challenged(public, &id, (&case, &route), &reply, bad.error);
            }
        }
    }
    // The bridge on node 0, the call from node 1: the caller crosses NATS.
    let mut app = WsApp::connect(&bridge_url(&nodes[0], &id), Some(&session_token))
        .await
        .expect("bridge");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "echo_text", "arguments": {"text": "t"}}});
    let rest = nodes[1].rest().token(&alice);
    let path = format!("/v1/mcp/{id}");
    let caller = tokio::spawn(async move {
        for _ in 0..500 {
            let answered = rest.mcp(&path, &call).send().await.json();
            if answered["result"]["isError"] != json!(true) {
                return answered;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Value::Null
    });
    let frame = loop {
        let frame = app.next_json().await.expect("a frame");
        if frame["type"] == "invoke_tool" {
            break frame;
        }
    };
    app.send_json(
        json!({"type": "invoke_result", "request_id": frame["request_id"],
                         "ok": true, "content": {"echoed_text": "t"}}),
    )
    .await;
    let answered = caller.await.expect("the call");
    assert_eq!(
        answered["result"]["structuredContent"]["echoed_text"], "t",
        "{answered}"
    );
    assert_eq!(frame["caller"]["kind"], "oauth", "{frame}");
    assert_eq!(frame["caller"]["subject"], "alice", "{frame}");
    assert_eq!(frame["caller"]["issuer"], json!(issuer.url), "{frame}");
}

/// The app's end of a bridge, on either transport, as far as announcing
/// changes goes.
enum Announcer {
    Ws(Box<WsApp>),
    Grpc(Box<GrpcBridge>),
}

impl Announcer {
    /// Attaches a bridge of this kind to the session on `node`.
    async fn attach(kind: BridgeKind, node: &Node, session_id: &str) -> Self {
        match kind {
            BridgeKind::Ws => Self::Ws(Box::new(
                WsApp::connect(&bridge_url(node, session_id), Some(APP_TOKEN))
                    .await
                    .expect("WebSocket bridge"),
            )),
            BridgeKind::Grpc => Self::Grpc(Box::new(
                GrpcBridge::open(node.channel().await, APP_TOKEN, session_id)
                    .await
                    .expect("gRPC bridge"),
            )),
        }
    }

    /// Says the resource `uri` changed.
    async fn resource_updated(&mut self, uri: &str) {
        match self {
            Self::Ws(app) => {
                app.send_json(json!({"type": "resource_updated", "uri": uri}))
                    .await;
            }
            Self::Grpc(bridge) => {
                bridge
                    .send(app_message::Kind::ResourceUpdated(proto::ResourceUpdated {
                        uri: uri.into(),
                    }))
                    .await;
            }
        }
    }
}

/// How many subscriptions NATS (monitored on `monitor`) holds on the
/// session's changes subject, over every connection.
async fn change_subscriptions(monitor: u16, session_id: &str) -> usize {
    let reply = Rest::new(format!("http://127.0.0.1:{monitor}"))
        .get("/connz?subs=1")
        .send()
        .await;
    let suffix = format!(".changes.{session_id}");
    reply.json()["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|connection| {
            connection["subscriptions_list"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter(|subject| subject.as_str().is_some_and(|s| s.ends_with(&suffix)))
        .count()
}

/// The updated URIs among `heard`, in order.
fn updated_uris(heard: &[Value]) -> Vec<String> {
    heard
        .iter()
        .filter(|message| message["method"] == "notifications/resources/updated")
        .filter_map(|message| message["params"]["uri"].as_str().map(str::to_owned))
        .collect()
}

/// The legacy client's messages up to the update of `uri`.
async fn legacy_until_updated(client: &mut LegacyClient, uri: &str) -> Vec<Value> {
    let mut heard = Vec::new();
    loop {
        let message = client.next_message().await;
        let done = message["method"] == "notifications/resources/updated"
            && message["params"]["uri"] == uri;
        heard.push(message);
        if done {
            return heard;
        }
    }
}

/// The 2026-07-28 listener's messages up to the update of `uri`.
async fn listener_until_updated(listener: &mut Listener, uri: &str) -> Vec<Value> {
    let mut heard = Vec::new();
    loop {
        let mut more = listener.until("notifications/resources/updated").await;
        let done = more.last().is_some_and(|last| last["params"]["uri"] == uri);
        heard.append(&mut more);
        if done {
            return heard;
        }
    }
}

#[tokio::test]
async fn a_sessions_changes_reach_its_listeners_on_every_node_once() {
    let monitor = free_port().expect("free port");
    let nats = start_nats(vec!["-m".into(), monitor.to_string()]).await;
    let settings = node_on(&nats, 300);
    let (a, b) = (settings.clone().spawn().await, settings.spawn().await);
    a.wait_ready(200).await;
    b.wait_ready(200).await;
    const WATCHED: [&str; 4] = [
        "notes://welcome",
        "notes://end",
        "notes://end-of-lists",
        "notes://after",
    ];
    // A listen stream keeps only the URIs its session serves: the app
    // serves every watched one.
    let mut body = declaring_body();
    if let Some(resources) = body["resources"].as_array_mut() {
        for uri in &WATCHED[1..] {
            resources.push(json!({"uri": uri, "name": uri.trim_start_matches("notes://")}));
        }
    }
    for kind in BridgeKind::BOTH {
        let created = a.rest().token(APP_TOKEN).create_session(&body).await;
        assert_eq!(created.status(), 200);
        let id = created.json()["mcpSessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        // The app's bridge on A.
        let mut app = Announcer::attach(kind, &a, &id).await;
        // Nobody listens: no node subscribes to the session's changes.
        assert_eq!(change_subscriptions(monitor, &id).await, 0, "{kind:?}");

        // Listeners on B, and one on A beside the bridge.
        let mcp_url = |node: &Node| format!("{}/v1/mcp/{id}", node.url());
        let mut on_b = Listener::open(&mcp_url(&b), &WATCHED).await;
        let mut on_a = Listener::open(&mcp_url(&a), &WATCHED).await;
        let mut legacy_on_b = LegacyClient::open(&b.url(), &id, Open::Path).await;
        legacy_on_b.request(&initialize_body(1, "2024-11-05")).await;
        for (n, uri) in WATCHED.iter().enumerate() {
            let subscribed = legacy_on_b
                .request(
                    &json!({"jsonrpc": "2.0", "id": 10 + n, "method": "resources/subscribe",
                                 "params": {"uri": uri}}),
                )
                .await;
            assert_eq!(subscribed["result"], json!({}), "{subscribed}");
        }
        // One subscription per node with listeners, however many they are.
        eventually(
            "A and B subscribing to the session's changes",
            Duration::from_secs(10),
            || async { change_subscriptions(monitor, &id).await == 2 },
        )
        .await;

        // The app on A says a resource changed: every listener hears it
        // once, those on B through NATS, the one on A from A itself.
        app.resource_updated("notes://welcome").await;
        app.resource_updated("notes://end").await;
        let heard = listener_until_updated(&mut on_b, "notes://end").await;
        assert_eq!(
            updated_uris(&heard),
            ["notes://welcome", "notes://end"],
            "{kind:?} on B: {heard:?}"
        );
        let heard = listener_until_updated(&mut on_a, "notes://end").await;
        assert_eq!(
            updated_uris(&heard),
            ["notes://welcome", "notes://end"],
            "{kind:?} on A: {heard:?}"
        );
        let heard = legacy_until_updated(&mut legacy_on_b, "notes://end").await;
        assert_eq!(
            updated_uris(&heard),
            ["notes://welcome", "notes://end"],
            "{kind:?} legacy on B: {heard:?}"
        );

        // An update taken on A changes the prompts (not the resources).
        let update = json!({"tools": declaring_body()["tools"], "prompts": [{"name": "greet"}]});
        let reply = a.rest().token(APP_TOKEN).put_tools(&id, &update).await;
        assert_eq!(reply.status(), 200, "{}", reply.text());
        app.resource_updated("notes://end-of-lists").await;
        for (listener, node) in [(&mut on_b, "B"), (&mut on_a, "A")] {
            let heard = listener_until_updated(listener, "notes://end-of-lists").await;
            let methods: Vec<&str> = heard
                .iter()
                .filter_map(|message| message["method"].as_str())
                .collect();
            assert_eq!(
                methods,
                [
                    "notifications/prompts/list_changed",
                    "notifications/resources/updated"
                ],
                "{kind:?} on {node}: {heard:?}"
            );
        }
        // Listing again on hearing of it shows the new list on B.
        let client = mcp_connect(&b.url(), &id, Route::Path).await;
        let prompts = client.list_prompts(None).await.expect("prompts/list");
        let names: Vec<&str> = prompts.prompts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["greet"], "{kind:?}");
        client.cancel().await.expect("close");
        let heard = legacy_until_updated(&mut legacy_on_b, "notes://end-of-lists").await;
        let methods: Vec<&str> = heard
            .iter()
            .filter_map(|message| message["method"].as_str())
            .collect();
        assert_eq!(
            methods,
            [
                "notifications/prompts/list_changed",
                "notifications/resources/updated"
            ],
            "{kind:?} legacy on B: {heard:?}"
        );

        // B's listeners go: B drops its subscription, A keeps its own.
        drop(on_b);
        drop(legacy_on_b);
        eventually(
            "B dropping its subscription with its last listener",
            Duration::from_secs(30),
            || async { change_subscriptions(monitor, &id).await == 1 },
        )
        .await;
        // The listener on A still hears A's changes.
        app.resource_updated("notes://after").await;
        let heard = listener_until_updated(&mut on_a, "notes://after").await;
        assert_eq!(updated_uris(&heard), ["notes://after"], "{kind:?}");
        drop(on_a);
        eventually(
            "A dropping its subscription with its last listener",
            Duration::from_secs(30),
            || async { change_subscriptions(monitor, &id).await == 0 },
        )
        .await;
    }
}

/// A rolling upgrade: a call sent in a wire version newer than the node
/// reads (as a node of a later release would send one) is refused with a
/// failure naming both versions, not misread; a call in the node's own
/// version is served.
#[tokio::test]
async fn a_call_in_a_wire_version_the_node_cannot_read_fails_naming_both_versions() {
    use futures_util::StreamExt;
    let nats = start_nats(Vec::new()).await;
    let prefix = format!("test_{}", free_port().expect("free port"));
    let node = TestServer::builder()
        .nats(&nats.url(), &prefix)
        .spawn()
        .await;
    node.wait_ready(200).await;
    let id = create(&node).await;
    let app = app_on(&node, &id, |_| (Duration::ZERO, json!({"served": true}))).await;
    call_when_reachable(&node, &id, "warm").await;

    let client = async_nats::connect(nats.url()).await.expect("NATS");
    let send = async |version: &str| {
        let inbox = client.new_inbox();
        let mut replies = client.subscribe(inbox.clone()).await.expect("subscribe");
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Ocp-Wire", version);
        headers.insert("Ocp-Tool", "echo_text");
        client
            .publish_with_reply_and_headers(
                format!("{prefix}.call.{id}"),
                inbox,
                headers,
                r#"{"text":"x"}"#.into(),
            )
            .await
            .expect("publish");
        loop {
            let reply = tokio::time::timeout(Duration::from_secs(20), replies.next())
                .await
                .expect("a reply within 20 s")
                .expect("the reply subject");
            let kind = reply
                .headers
                .as_ref()
                .and_then(|headers| headers.get("Ocp-Kind"))
                .map(|kind| kind.as_str().to_owned())
                .unwrap_or_default();
            if kind != "alive" {
                return (kind, String::from_utf8_lossy(&reply.payload).into_owned());
            }
        }
    };
    let (kind, body) = send("99").await;
    assert_eq!(kind, "failure", "{body}");
    assert!(
        body.contains(r#"wire version \"99\""#) && body.contains("up to 3"),
        "{body}"
    );
    let (kind, body) = send("2").await;
    assert_eq!(kind, "answer", "{body}");
    assert!(body.contains("served"), "{body}");
    app.abort();
}
