//! The rest of the conversation between agent and app: cancellation reaching
//! the app on both bridges, the request's context (`_meta`, client, protocol
//! revision) arriving with the invocation, and per-tool timeouts.

use std::time::Duration;

use openclaw_proxy_core::proto::{self, proxy_message};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

fn call_body(id: u64, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

fn cancelled_body(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": id, "reason": "the user pressed stop"}})
}

/// Posts `body` to the session's MCP URL; the JSON answer.
async fn post(session: &TestSession, body: &Value) -> (u16, Value) {
    let response = mcp_post(&session.mcp_url, body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await;
    let status = response.status().as_u16();
    (
        status,
        serde_json::from_slice(response.bytes()).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_in_a_websocket_app() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            let params = json!({"name": "echo_text", "arguments": {"text": "long"}});
            post(&session, &call_body(11, params)).await
        }
    });
    let invoke = app.next_json().await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();

    let (status, _) = post(&session, &cancelled_body(11)).await;
    assert_eq!(status, 202);
    let cancel = app.next_json().await.expect("cancel_tool");
    assert_eq!(cancel["type"], "cancel_tool", "{cancel}");
    assert_eq!(cancel["request_id"], request_id);
    assert_eq!(cancel["requestId"], request_id);
    assert!(cancel["reason"].as_str().is_some_and(|r| !r.is_empty()));

    // The HTTP exchange ends without a tool result.
    let (_, answer) = no_hang(call).await.expect("call");
    assert!(answer["result"].is_null(), "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cancelled"), "{answer}");

    // A result after the cancel is ignored quietly: no error frame comes
    // back, the next frame is the answer to our ping.
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "late"}),
    )
    .await;
    app.send_json(json!({"type": "ping"})).await;
    let next = app.next_json().await.expect("pong");
    assert_eq!(next["type"], "pong", "{next}");
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_in_a_grpc_app() {
    let server = TestServer::start().await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("attach");
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            let params = json!({"name": "echo_text", "arguments": {}});
            post(&session, &call_body(12, params)).await
        }
    });
    let invoke = app.next_invoke().await;
    let (status, _) = post(&session, &cancelled_body(12)).await;
    assert_eq!(status, 202);
    let cancel = loop {
        match no_hang(app.raw_message()).await {
            Ok(Some(proxy_message::Kind::Cancel(cancel))) => break cancel,
            Ok(Some(proxy_message::Kind::Ping(_))) => {}
            other => panic!("expected CancelTool, got {other:?}"),
        }
    };
    assert_eq!(cancel.request_id, invoke.request_id);
    let (_, answer) = no_hang(call).await.expect("call");
    assert!(answer["result"].is_null(), "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cancelled"),
        "{answer}"
    );
    // A cancel for a call that is not in flight changes nothing.
    let (status, _) = post(&session, &cancelled_body(99)).await;
    assert_eq!(status, 202);
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_call_in_the_app() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    // A progress token makes the answer an SSE stream, which the client
    // abandons.
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            let params =
                json!({"name": "echo_text", "arguments": {}, "_meta": {"progressToken": 1}});
            post(&session, &call_body(13, params)).await
        }
    });
    let invoke = app.next_json().await.expect("invoke_tool");
    call.abort();
    let cancel = no_hang(app.next_json()).await.expect("cancel_tool");
    assert_eq!(cancel["type"], "cancel_tool", "{cancel}");
    assert_eq!(cancel["request_id"], invoke["request_id"]);
}

#[tokio::test]
async fn the_request_context_reaches_both_bridges() {
    let server = TestServer::start().await;
    let meta =
        json!({"openclaw": {"sessionKey": "agent:main:main"}, "vendor.example/trace": [1, 2]});

    // The legacy app sees `_meta` and `client` in its invoke_tool frame.
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let call = tokio::spawn({
        let session = session.clone();
        let meta = meta.clone();
        async move {
            let params = json!({"name": "echo_text", "arguments": {"text": "x"}, "_meta": meta});
            post(&session, &call_body(1, params)).await
        }
    });
    let invoke = app.next_json().await.expect("invoke_tool");
    assert_eq!(invoke["_meta"], meta, "{invoke}");
    assert_eq!(
        invoke["client"]["protocolVersion"], "2025-11-25",
        "{invoke}"
    );
    app.send_json(json!({"type": "invoke_result", "requestId": invoke["requestId"], "ok": true, "content": "ok"}))
        .await;
    let (_, answer) = no_hang(call).await.expect("call");
    assert_eq!(answer["result"]["content"][0]["text"], "ok", "{answer}");

    // The native app sees them in InvokeTool; the client's name comes from
    // the 2026-07-28 per-request `_meta` when it carries one.
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("attach");
    let mut with_client = meta.clone();
    with_client["io.modelcontextprotocol/clientInfo"] =
        json!({"name": "openclaw", "version": "2026.9.6"});
    let call = tokio::spawn({
        let session = session.clone();
        async move {
            let params = json!({"name": "echo_text", "arguments": {}, "_meta": with_client});
            post(&session, &call_body(2, params)).await
        }
    });
    let invoke = app.next_invoke().await;
    let received: Value = serde_json::from_str(&invoke.meta_json).expect("meta_json is JSON");
    assert_eq!(received["openclaw"], meta["openclaw"]);
    assert_eq!(
        received["vendor.example/trace"],
        meta["vendor.example/trace"]
    );
    let client = invoke.client.expect("client");
    assert_eq!(
        (client.name.as_str(), client.version.as_str()),
        ("openclaw", "2026.9.6")
    );
    app.answer(&invoke.request_id, true, "\"ok\"", "").await;
    no_hang(call).await.expect("call");
}

#[tokio::test]
async fn a_tool_can_have_its_own_timeout_capped_by_the_server() {
    let server = TestServer::builder()
        .core(|core| core.max_tool_timeout = Duration::from_secs(2))
        .start()
        .await;
    let body = json!({"deviceId": "d", "appVersion": "1", "tools": [
        {"name": "quick", "timeoutSeconds": 1},
        {"name": "greedy", "timeout_seconds": 86400}
    ]});
    let session = TestSession::register(&server, &body).await;
    let tools = server.hub.tools(&session.id).await.expect("tools");
    assert_eq!(
        tools
            .iter()
            .map(|tool| tool.timeout_seconds)
            .collect::<Vec<_>>(),
        vec![1, 86400]
    );
    let _app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    // The app never answers: each call ends at its tool's limit, and says so.
    for (tool, limit) in [("quick", "1 seconds"), ("greedy", "2 seconds")] {
        let (_, answer) = post(&session, &call_body(3, json!({"name": tool}))).await;
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains(limit), "{tool}: {text}");
    }
    let conflicting = json!({"deviceId": "d", "appVersion": "1",
        "tools": [{"name": "t", "timeout_seconds": 1, "timeoutSeconds": 2}]});
    let response = server.rest().create_session(&conflicting).await;
    assert_eq!(response.status(), 400);

    // gRPC carries the same field.
    let mut definition = tool("slow", "");
    definition.timeout_seconds = 1;
    let session = TestSession::register_grpc(&server, vec![definition]).await;
    let described = server
        .hub
        .get_session(proto::GetSessionRequest {
            session_id: session.id.clone(),
        })
        .await
        .expect("session");
    assert_eq!(described.tools[0].timeout_seconds, 1);
}

/// The session's tool names as an MCP client sees them.
async fn listed(server: &TestServer, session: &TestSession) -> Vec<String> {
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    tools.iter().map(|tool| tool.name.to_string()).collect()
}

#[tokio::test]
async fn an_app_replaces_its_tools_on_every_channel() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    assert_eq!(listed(&server, &session).await, vec!["echo_text"]);
    let rest = server.rest();
    let put = |body: Value| {
        let (rest, id) = (rest.clone(), session.id.clone());
        async move { rest.put_tools(&id, &body).await }
    };

    // REST, both spellings of the schema.
    let response = put(json!({"tools": [
        {"name": "read_chat", "inputSchema": {"type": "object"}},
        {"name": "post_message", "input_schema": {"type": "object"}}
    ]}))
    .await;
    assert_eq!(response.status(), 200);
    let body = response.json();
    assert_eq!(
        body,
        json!({"ok": true, "tools": 2, "resources": 0, "resource_templates": 0, "prompts": 0})
    );
    assert_eq!(
        listed(&server, &session).await,
        vec!["read_chat", "post_message"]
    );
    // Validated as at creation, naming the field; the old list stays.
    let response = put(json!({"tools": [{"name": "a b"}]})).await;
    assert_eq!(response.status(), 400);
    let body = response.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("tools[0].name"),
        "{body}"
    );
    assert_eq!(listed(&server, &session).await.len(), 2);

    // The WebSocket bridge, answered on the bridge.
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    app.send_json(json!({"type": "update_tools", "tools": [{"name": "only_one"}]}))
        .await;
    let answer = app.next_json().await.expect("tools_updated");
    assert_eq!(
        answer,
        json!({"type": "tools_updated", "tools": 1, "resources": 0,
               "resource_templates": 0, "resourceTemplates": 0, "prompts": 0})
    );
    assert_eq!(listed(&server, &session).await, vec!["only_one"]);
    app.send_json(json!({"type": "update_tools", "tools": [{"name": "x"}, {"name": "x"}]}))
        .await;
    let refused = app.next_json().await.expect("error frame");
    assert_eq!(refused["type"], "error", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap_or_default()
            .contains("tools[1].name"),
        "{refused}"
    );

    // gRPC: the RPC, and the bridge message.
    let grpc_session = TestSession::register_grpc(&server, vec![tool("first", "")]).await;
    let mut sessions =
        proto::session_service_client::SessionServiceClient::new(server.channel().await);
    let updated = sessions
        .update_tools(with_token(
            proto::UpdateToolsRequest {
                session_id: grpc_session.id.clone(),
                tools: vec![tool("second", ""), tool("third", "")],
                ..Default::default()
            },
            APP_TOKEN,
        ))
        .await
        .expect("UpdateTools")
        .into_inner();
    assert_eq!(updated.tools, 2);
    assert_eq!(
        listed(&server, &grpc_session).await,
        vec!["second", "third"]
    );
    let bridge = GrpcBridge::open(server.channel().await, APP_TOKEN, &grpc_session.id)
        .await
        .expect("attach");
    bridge
        .send(proto::app_message::Kind::UpdateTools(proto::UpdateTools {
            tools: vec![tool("fourth", "")],
            ..Default::default()
        }))
        .await;
    let mut bridge = bridge;
    loop {
        match no_hang(bridge.raw_message()).await {
            Ok(Some(proxy_message::Kind::ToolsUpdated(updated))) => {
                assert_eq!(updated.tools, 1);
                break;
            }
            Ok(Some(proxy_message::Kind::Ping(_))) => {}
            other => panic!("expected ToolsUpdated, got {other:?}"),
        }
    }
    assert_eq!(listed(&server, &grpc_session).await, vec!["fourth"]);
}
