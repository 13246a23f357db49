//! The legacy HTTP+SSE transport (MCP 2024-11-05), which OpenClaw speaks for
//! a server entry without `"transport": "streamable-http"`: a `GET` opens
//! the stream, its `endpoint` event names where to POST, and the answers
//! arrive on the stream. Driven raw (reqwest, reading the stream byte by
//! byte) and by the TypeScript SDK's `SSEClientTransport`.

use std::path::PathBuf;

use openclaw_proxy_core::proto::proxy_message;
use openclaw_proxy_tests::conformance::{ensure_node_tools, node_dir, start_fixture};
use openclaw_proxy_tests::listening::{Open, open_request, post_to};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

fn echo_tools() -> Value {
    json!([{
        "name": "echo_text",
        "description": "Echo text.",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}
    }])
}

#[tokio::test]
async fn a_legacy_client_initializes_lists_and_calls_over_its_stream() {
    let server = TestServer::start().await;
    for bridge in BridgeKind::BOTH {
        let app = TestApp::start(&server, bridge, echo_tools(), echo).await;
        for open in [Open::Path, Open::Header, Open::HeaderSlash] {
            let mut client = LegacyClient::open(&server.http_url(), &app.session.id, open).await;
            let what = format!("{bridge:?} {open:?}");

            let initialized = client.request(&initialize_body(1, "2024-11-05")).await;
            let result = &initialized["result"];
            assert_eq!(
                result["protocolVersion"], "2024-11-05",
                "{what}: {initialized}"
            );
            assert_eq!(result["serverInfo"]["name"], "openclaw-proxy");
            assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
            let (status, _) = client
                .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
            assert_eq!(status, 202);

            let listed = client
                .request(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
                .await;
            assert_eq!(listed["result"]["tools"][0]["name"], "echo_text", "{what}");

            let called = client
                .request(
                    &json!({"jsonrpc": "2.0", "id": "three", "method": "tools/call",
                    "params": {"name": "echo_text", "arguments": {"text": "héllo"}}}),
                )
                .await;
            assert_eq!(
                called["result"]["structuredContent"],
                json!({"text": "héllo"}),
                "{what}: {called}"
            );
            assert_eq!(called["result"]["isError"], false);

            // An unknown tool is the same JSON-RPC error as on the
            // streamable endpoint.
            let unknown = client
                .request(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "nope", "arguments": {}}}))
                .await;
            assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        }
    }
}

#[tokio::test]
async fn streamable_gets_keep_their_405_and_bad_requests_are_refused() {
    let server = TestServer::start().await;
    let app = TestApp::start(&server, BridgeKind::Ws, echo_tools(), echo).await;
    let id = &app.session.id;

    // A streamable HTTP client's GET names its revision: 405, as before.
    for open in [Open::Path, Open::Header, Open::HeaderSlash] {
        let response = open_request(&server.http_url(), id, open)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await;
        assert_eq!(response.status(), 405, "{open:?}");
    }
    // So is a GET that does not ask for an event stream.
    let response = Rest::default()
        .token(OPENCLAW_TOKEN)
        .get(&app.session.mcp_url)
        .header("accept", "application/json")
        .send()
        .await;
    assert_eq!(response.status(), 405);

    // A bad token: 401 with the Bearer challenge.
    let response = open_request(&server.http_url(), id, Open::Path)
        .bearer_auth("wrong")
        .send()
        .await;
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    // An unknown session: 404.
    let response = open_request(&server.http_url(), "no-such-session", Open::Header)
        .bearer_auth(OPENCLAW_TOKEN)
        .send()
        .await;
    assert_eq!(response.status(), 404);

    let mut client = LegacyClient::open(&server.http_url(), id, Open::Path).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    // The endpoint checks the token like every MCP route.
    let (status, _) = post_to(&client.endpoint, "wrong", &ping).await;
    assert_eq!(status, 401);
    // A body that is not JSON has no id to answer on the stream.
    let response = Rest::default()
        .token(OPENCLAW_TOKEN)
        .post(&client.endpoint)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await;
    assert_eq!(response.status(), 400);
    let body = response.json();
    assert_eq!(body["error"]["code"], -32700, "{body}");
    // An unknown stream id: 404 in JSON-RPC's shape.
    let unknown = format!("{}/v1/mcp/{id}/messages?legacy=nope", server.http_url());
    let (status, text) = post_to(&unknown, OPENCLAW_TOKEN, &ping).await;
    assert_eq!(status, 404, "{text}");
    let body: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("not open")),
        "{body}"
    );
    // Still served.
    let pong = client.request(&ping).await;
    assert_eq!(pong["result"], json!({}), "{pong}");

    // A closed stream's endpoint is gone too.
    let endpoint = client.endpoint.clone();
    drop(client);
    eventually(
        "the closed stream's endpoint answering 404",
        std::time::Duration::from_secs(10),
        || async { post_to(&endpoint, OPENCLAW_TOKEN, &ping).await.0 == 404 },
    )
    .await;
}

#[tokio::test]
async fn closing_the_stream_cancels_its_call_in_a_websocket_app() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    let (status, _) = client
        .post(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "echo_text", "arguments": {"text": "long"}}}))
        .await;
    assert_eq!(status, 202);
    let invoke = app.next_json().await.expect("invoke_tool");
    assert_eq!(invoke["type"], "invoke_tool", "{invoke}");
    drop(client);
    let cancel = no_hang(app.next_json()).await.expect("cancel_tool");
    assert_eq!(cancel["type"], "cancel_tool", "{cancel}");
    assert_eq!(cancel["request_id"], invoke["request_id"]);
}

#[tokio::test]
async fn closing_the_stream_cancels_its_call_in_a_grpc_app() {
    let server = TestServer::start().await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("attach");
    let client = LegacyClient::open(&server.http_url(), &session.id, Open::Header).await;
    // With a progress token the call goes through rmcp's path.
    let (status, _) = client
        .post(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "echo_text", "arguments": {}, "_meta": {"progressToken": 1}}}))
        .await;
    assert_eq!(status, 202);
    let invoke = app.next_invoke().await;
    drop(client);
    let cancel = loop {
        match no_hang(app.raw_message()).await {
            Ok(Some(proxy_message::Kind::Cancel(cancel))) => break cancel,
            Ok(Some(proxy_message::Kind::Ping(_))) => {}
            other => panic!("expected CancelTool, got {other:?}"),
        }
    };
    assert_eq!(cancel.request_id, invoke.request_id);
}

#[tokio::test]
async fn progress_and_cancellation_notices_travel_like_on_the_streamable_endpoint() {
    let server = TestServer::start().await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("attach");
    let mut client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    let (status, _) = client
        .post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "echo_text", "arguments": {}, "_meta": {"progressToken": "p"}}}))
        .await;
    assert_eq!(status, 202);
    let invoke = app.next_invoke().await;
    app.send(openclaw_proxy_core::proto::app_message::Kind::Progress(
        openclaw_proxy_core::proto::ToolProgress {
            request_id: invoke.request_id.clone(),
            progress: 0.5,
            total: Some(1.0),
            message: "half".into(),
        },
    ))
    .await;
    let progress = client.next_message().await;
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], "p");
    assert_eq!(progress["params"]["progress"], 0.5);

    // notifications/cancelled posted to the endpoint cancels the call.
    let (status, _) = client
        .post(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 9, "reason": "stop"}}),
        )
        .await;
    assert_eq!(status, 202);
    let cancel = loop {
        match no_hang(app.raw_message()).await {
            Ok(Some(proxy_message::Kind::Cancel(cancel))) => break cancel,
            Ok(Some(proxy_message::Kind::Ping(_))) => {}
            other => panic!("expected CancelTool, got {other:?}"),
        }
    };
    assert_eq!(cancel.request_id, invoke.request_id);
    let answer = client.next_message().await;
    assert_eq!(answer["id"], 9, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("cancelled")),
        "{answer}"
    );
}

#[tokio::test]
async fn tool_updates_reach_the_stream_and_deleting_the_session_ends_it() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    client.request(&initialize_body(1, "2024-11-05")).await;

    let response = server
        .rest()
        .put_tools(
            &session.id,
            &json!({"tools": [{"name": "read_chat"}, {"name": "post_message"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let changed = client.next_message().await;
    assert_eq!(
        changed,
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    );
    let listed = client
        .request(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["read_chat", "post_message"]);

    let response = server.rest().delete_session(&session.id).await;
    assert!(response.status().is_success());
    // The stream ends: nothing but keep-alives until then.
    assert_eq!(no_hang(client.next_event()).await, None);
}

async fn node() -> PathBuf {
    tokio::task::spawn_blocking(ensure_node_tools)
        .await
        .expect("join")
        .expect("Node.js tools installed")
}

#[tokio::test]
async fn typescript_sdk_sse_client_configured_as_openclaw_does() {
    let node = node().await;
    let server = TestServer::start().await;
    let fixture = start_fixture(&server.http_url(), APP_TOKEN)
        .await
        .expect("fixture app");
    // The session URL, and the stable URL with the session in a header.
    let routes = [
        (
            format!("{}/v1/mcp/{}", server.http_url(), fixture.session_id),
            None,
        ),
        (
            format!("{}/v1/mcp", server.http_url()),
            Some(&fixture.session_id),
        ),
    ];
    for (url, header) in routes {
        let mut command = tokio::process::Command::new(&node);
        command
            .arg(node_dir().join("openclaw-sse-client.mjs"))
            .arg(&url)
            .arg(OPENCLAW_TOKEN);
        if let Some(session_id) = header {
            command.arg(session_id);
        }
        let output = no_hang(command.current_dir(node_dir()).output())
            .await
            .expect("run the TypeScript SDK client");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "client failed on {url}:\n{stdout}\n{stderr}"
        );
        let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
        assert_eq!(line["ok"], true);
        assert_eq!(line["progress"], json!([0, 50, 100]));
    }
}

#[tokio::test]
async fn subscribed_resource_updates_and_list_changes_reach_the_stream() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["resources"] = json!([
        {"uri": "notes://a", "name": "a"},
        {"uri": "notes://b", "name": "b"}
    ]);
    let session = server.rest().register(&body).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let mut client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    client.request(&initialize_body(1, "2024-11-05")).await;
    let subscribed = client
        .request(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                         "params": {"uri": "notes://b"}}),
        )
        .await;
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");

    // Only the subscribed resource is announced.
    app.send_json(json!({"type": "resource_updated", "uri": "notes://a"}))
        .await;
    app.send_json(json!({"type": "resource_updated", "uri": "notes://b"}))
        .await;
    let updated = client.next_message().await;
    assert_eq!(
        updated,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
               "params": {"uri": "notes://b"}})
    );

    // A prompt list that changes is announced; the same resources are not.
    let tools = legacy_session_body()["tools"].clone();
    let reply = server
        .rest()
        .put_tools(
            &session.id,
            &json!({"tools": tools, "prompts": [{"name": "greet"}]}),
        )
        .await;
    assert_eq!(reply.status(), 200);
    let changed = client.next_message().await;
    assert_eq!(
        changed,
        json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
    );
}

/// An app that asks the user mid-call, over the legacy transport: the
/// request arrives on the client's stream, the client POSTs its response to
/// the endpoint, the app receives it, and the call's result follows on the
/// stream.
#[tokio::test]
async fn a_request_from_the_app_goes_on_the_stream_and_its_response_through_the_endpoint() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let mut client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    let mut hello = initialize_body(1, "2024-11-05");
    hello["params"]["capabilities"] = json!({"elicitation": {}});
    client.request(&hello).await;
    let (status, _) = client
        .post(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo_text", "arguments": {"text": "delete"}}}))
        .await;
    assert_eq!(status, 202);
    let invoke = app.next_json().await.expect("invoke_tool");
    let call = invoke["request_id"].clone();
    app.send_json(json!({"type": "client_request", "request_id": call, "id": "confirm-1",
        "method": "elicitation/create",
        "params": {"message": "Really delete?",
                   "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}))
        .await;

    let asked = client.next_message().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Really delete?", "{asked}");
    let (status, text) = client
        .post(&json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "decline"}}))
        .await;
    assert_eq!(status, 202, "{text}");
    let answered = app.next_json().await.expect("client_response");
    assert_eq!(answered["type"], "client_response", "{answered}");
    assert_eq!(answered["id"], "confirm-1");
    assert_eq!(answered["result"], json!({"action": "decline"}));

    app.send_json(
        json!({"type": "invoke_result", "request_id": call, "ok": true,
        "content": {"deleted": false}}),
    )
    .await;
    let result = client.next_message().await;
    assert_eq!(result["id"], 2, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");
}

#[tokio::test]
async fn a_stream_left_unread_past_its_bound_is_closed_and_its_requests_answered_with_an_error() {
    const QUEUE_BYTES: usize = 256 * 1024;
    let server = TestServer::builder()
        .edge(|edge| edge.legacy.queue_bytes = QUEUE_BYTES)
        .start()
        .await;
    // Each tools/list answer is about 260 KB.
    let schema = openclaw_proxy_tests::exhaustion::wide_schema(10_000, 0);
    let tools = json!([{"name": "wide", "input_schema": serde_json::from_str::<Value>(&schema).expect("JSON")}]);
    let session = TestSession::register(&server, &session_body(tools)).await;
    let mut client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    // Posted and never read, until the server closes the stream: answers
    // past what the sockets hold pile up in the stream's queue.
    let mut accepted = Vec::new();
    let mut closed = None;
    for id in 1..=400 {
        let (status, text) = client
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .await;
        match status {
            202 => accepted.push(id),
            404 => {
                closed = Some(text);
                break;
            }
            // Too many messages in progress at once: the next post waits.
            429 => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            other => panic!("post {id}: {other} {text}"),
        }
    }
    let closed = closed.expect("the stream is closed while nobody reads it");
    assert!(closed.contains("is not open"), "{closed}");
    // What the client finds when it reads at last: the answers that were
    // queued before the bound, then an error answer for every request the
    // stream dropped, naming the setting; then the end.
    let mut answered = Vec::new();
    let mut refused = Vec::new();
    while let Some((event, data)) = no_hang(client.next_event()).await {
        assert_eq!(event, "message", "{data}");
        let message: Value = serde_json::from_str(&data).expect("JSON-RPC");
        let id = message["id"].as_i64().expect("an id");
        if message["result"]["tools"].is_array() {
            answered.push(id);
        } else {
            let error = message["error"]["message"].as_str().unwrap_or_default();
            assert!(
                error.contains("OPENCLAW_PROXY_LEGACY_SSE_QUEUE_BYTES"),
                "{message}"
            );
            refused.push(id);
        }
    }
    assert!(
        !refused.is_empty(),
        "requests dropped with their stream are answered"
    );
    for id in answered.iter().chain(&refused) {
        assert!(accepted.contains(id), "{id} was posted");
    }
    // The slot is free again: a new stream works.
    let mut again = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    let listed = again
        .request(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert_eq!(listed["result"]["tools"][0]["name"], "wide");
}

fn session_body(tools: Value) -> Value {
    json!({"device_id": "d", "app_version": "1", "tools": tools})
}

#[tokio::test]
async fn one_client_cannot_take_every_legacy_stream_slot() {
    let server = TestServer::builder()
        .edge(|edge| edge.legacy.streams_per_client = 3)
        // Behind a trusted proxy, each client is the address it forwards.
        .core(|core| core.limits.trusted_proxies = vec!["127.0.0.0/8".parse().expect("range")])
        .start()
        .await;
    let first = TestSession::register(&server, &session_body(echo_tools())).await;
    let second = TestSession::register(&server, &session_body(echo_tools())).await;
    let open = |session: &str, client: &str| {
        open_request(&server.http_url(), session, Open::Path)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("x-forwarded-for", client)
            .send_streaming()
    };
    // One client's streams, over two sessions (each within its own limit).
    let mut held = Vec::new();
    for session in [&first.id, &first.id, &second.id] {
        let stream = open(session, "203.0.113.7").await;
        assert_eq!(stream.status(), 200);
        held.push(stream);
    }
    let refused = open(&second.id, "203.0.113.7").await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.expect("a JSON-RPC error");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("OPENCLAW_PROXY_LEGACY_SSE_STREAMS_PER_CLIENT")
            && message.contains("203.0.113.7"),
        "{body}"
    );
    // Another client still gets a stream on the same sessions.
    let other = open(&second.id, "198.51.100.2").await;
    assert_eq!(other.status(), 200);
    // A stream that ends gives its client's slot back.
    held.pop();
    eventually(
        "the closed stream's slot is free",
        std::time::Duration::from_secs(10),
        || async { open(&second.id, "203.0.113.7").await.status() == 200 },
    )
    .await;
}
