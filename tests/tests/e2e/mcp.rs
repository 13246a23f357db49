//! The MCP endpoint with rmcp's streamable HTTP client (and raw HTTP where
//! the check sits below the SDK), apps on both bridges.

use std::time::Duration;

use openclaw_proxy_tests::*;
use rmcp::ServiceError;
use rmcp::model::{ContentBlock, ProtocolVersion};
use serde_json::{Value, json};

fn tool_json(name: &str) -> Value {
    json!({"name": name, "description": format!("The {name} tool."), "input_schema": {"type": "object"}})
}

fn mapping_app(call: &Call) -> Answer {
    match call.tool_name.as_str() {
        "object" => {
            Answer::Content(json!({"echoed": call.arguments, "n": 9223372036854775807_i64}))
        }
        "string" => Answer::Content(json!("plain text")),
        "blocks" => Answer::Content(json!([
            {"type": "text", "text": "first"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        ])),
        "number" => Answer::Content(json!(42)),
        "nothing" => Answer::Content(Value::Null),
        "fails" => Answer::Error("chat is read-only".into()),
        _ => Answer::Error("unexpected tool".into()),
    }
}

#[tokio::test]
async fn tools_list_mirrors_registered_tools_on_every_route() {
    let server = TestServer::start().await;
    let tools = json!([
        {"name": "echo_text", "description": "Echo text.", "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
        {"name": "no_schema"}
    ]);
    let mut body = legacy_session_body();
    body["tools"] = tools;
    let session = TestSession::register(&server, &body).await;
    for route in [Route::Path, Route::Header, Route::HeaderSlash] {
        let client = mcp_connect(&server.http_url(), &session.id, route.clone()).await;
        let listed = client.list_all_tools().await.expect("tools/list");
        assert_eq!(listed.len(), 2, "{route:?}");
        assert_eq!(listed[0].name, "echo_text");
        assert_eq!(listed[0].description.as_deref(), Some("Echo text."));
        assert_eq!(
            Value::Object((*listed[0].input_schema).clone()),
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
        );
        assert_eq!(listed[1].name, "no_schema");
        assert_eq!(listed[1].description, None);
        assert_eq!(
            Value::Object((*listed[1].input_schema).clone()),
            json!({"type": "object"})
        );
        client.cancel().await.expect("close");
    }
}

#[tokio::test]
async fn tool_results_are_mapped_as_documented_from_both_bridges() {
    for bridge in BridgeKind::BOTH {
        tool_results_are_mapped_as_documented(bridge).await;
    }
}

async fn tool_results_are_mapped_as_documented(bridge: BridgeKind) {
    let server = TestServer::start().await;
    let tools = json!(["object", "string", "blocks", "number", "nothing", "fails"].map(tool_json));
    let app = TestApp::start(&server, bridge, tools, mapping_app).await;
    let client = mcp_connect(&server.http_url(), &app.session.id, Route::Path).await;

    let result = client
        .call_tool(call("object", json!({"text": "hi"})))
        .await
        .expect("object");
    let expected = json!({"echoed": {"text": "hi"}, "n": 9223372036854775807_i64});
    assert_eq!(result.structured_content, Some(expected.clone()));
    assert_eq!(texts(&result), vec![expected.to_string()]);
    assert_ne!(result.is_error, Some(true));

    let result = client
        .call_tool(call("string", json!({})))
        .await
        .expect("string");
    assert_eq!(texts(&result), vec!["plain text".to_owned()]);
    assert_eq!(result.structured_content, None);

    let result = client
        .call_tool(call("blocks", json!({})))
        .await
        .expect("blocks");
    assert_eq!(result.content.len(), 2);
    assert_eq!(texts(&result), vec!["first".to_owned()]);
    match &result.content[1] {
        ContentBlock::Image(image) => {
            assert_eq!(image.mime_type, "image/png");
            assert_eq!(image.data, "iVBORw0KGgo=");
        }
        other => panic!("expected an image block, got {other:?}"),
    }

    let result = client
        .call_tool(call("number", json!({})))
        .await
        .expect("number");
    assert_eq!(texts(&result), vec!["42".to_owned()]);

    let result = client
        .call_tool(call("nothing", json!({})))
        .await
        .expect("null");
    assert!(result.content.is_empty());

    let result = client
        .call_tool(call("fails", json!({})))
        .await
        .expect("error result");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(texts(&result), vec!["chat is read-only".to_owned()]);
}

#[tokio::test]
async fn unknown_tool_is_invalid_params() {
    let server = TestServer::start().await;
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([tool_json("string")]),
        mapping_app,
    )
    .await;
    let client = mcp_connect(&server.http_url(), &app.session.id, Route::Path).await;
    let error = client
        .call_tool(call("missing", json!({})))
        .await
        .expect_err("unknown tool");
    match error {
        ServiceError::McpError(error) => {
            assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
            assert!(
                error.message.contains("unknown tool \"missing\""),
                "{}",
                error.message
            );
        }
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

#[tokio::test]
async fn proxy_side_failures_are_error_results() {
    let server = TestServer::builder()
        .tool_timeout(Duration::from_millis(300))
        .start()
        .await;
    let session = TestSession::legacy(&server).await;
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;

    // No bridge.
    let result = client
        .call_tool(call("echo_text", json!({"text": "x"})))
        .await
        .expect("result");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(texts(&result), vec!["Bridge is not connected.".to_owned()]);

    // A bridge that never answers: the tool timeout.
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let pending = tokio::spawn({
        let client_call = client.clone();
        async move {
            client_call
                .call_tool(call("echo_text", json!({"text": "slow"})))
                .await
        }
    });
    let frame = app.next_json().await.expect("invoke");
    assert_eq!(frame["type"], "invoke_tool");
    let result = no_hang(pending).await.expect("join").expect("result");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        texts(&result),
        vec!["The tool did not answer within 0.3 seconds.".to_owned()]
    );
    let cancel = app.next_json().await.expect("cancel_tool");
    assert_eq!(
        cancel["type"], "cancel_tool",
        "the timed-out call is cancelled"
    );
    assert_eq!(cancel["request_id"], frame["request_id"]);

    // A bridge lost mid-call fails the call at once.
    let pending = tokio::spawn({
        let client_call = client.clone();
        async move {
            client_call
                .call_tool(call("echo_text", json!({"text": "lost"})))
                .await
        }
    });
    let frame = app.next_json().await.expect("invoke");
    assert_eq!(frame["arguments"], json!({"text": "lost"}));
    drop(app);
    let result = no_hang(pending).await.expect("join").expect("result");
    assert_eq!(result.is_error, Some(true));
    assert_eq!(
        texts(&result),
        vec!["The app's bridge disconnected before the tool answered.".to_owned()]
    );
}

#[tokio::test]
async fn same_call_served_by_websocket_app_and_by_grpc_app() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let client = mcp_connect(&server.http_url(), &session.id, Route::Header).await;
    let arguments = json!({"text": "héllo", "big": 9007199254740993_i64, "neg_zero": -0.0});

    // The legacy app on the WebSocket bridge.
    let ws_app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("ws bridge");
    let ws_task = ws_app.serve_echo();
    let via_ws = client
        .call_tool(call("echo_text", arguments.clone()))
        .await
        .expect("via ws");

    // The native app takes the session over on the gRPC bridge.
    let grpc_app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("grpc");
    let (code, _) = no_hang(ws_task).await.expect("join");
    assert_eq!(code, 4409, "the WebSocket bridge is replaced");
    let grpc_task = grpc_app.serve_echo();
    let via_grpc = client
        .call_tool(call("echo_text", arguments.clone()))
        .await
        .expect("via grpc");

    assert_eq!(via_ws, via_grpc);
    assert_eq!(
        via_ws.structured_content.as_ref().map(Value::to_string),
        Some(arguments.to_string())
    );
    drop(server);
    no_hang(grpc_task).await.expect("join");
}

#[tokio::test]
async fn stateless_2026_client_discovers_and_calls() {
    let server = TestServer::start().await;
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([tool_json("object")]),
        mapping_app,
    )
    .await;
    let client = mcp_connect_stateless(&server.http_url(), &app.session.id).await;
    let listed = client.list_all_tools().await.expect("tools/list");
    assert_eq!(listed.len(), 1);
    let result = client
        .call_tool(call("object", json!({"a": 1})))
        .await
        .expect("call");
    assert_eq!(
        result.structured_content.expect("structured")["echoed"],
        json!({"a": 1})
    );
}

#[tokio::test]
async fn every_protocol_version_is_negotiated() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    for version in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let response = mcp_post(&session.mcp_url, &initialize_body(1, version))
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", version)
            .send()
            .await;
        assert_eq!(response.status(), 200, "{version}");
        assert!(
            response.headers().get("mcp-session-id").is_none(),
            "stateless: no minted session"
        );
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
        let body: Value = response.json();
        assert_eq!(body["result"]["protocolVersion"], version, "{body}");
        assert!(body["result"]["capabilities"]["tools"].is_object());
    }
    // The SDK's own handshake at the two ends of the range.
    for version in [ProtocolVersion::V_2024_11_05, ProtocolVersion::V_2025_11_25] {
        let client = mcp_connect_at(
            &server.http_url(),
            &session.id,
            Route::Path,
            version.clone(),
        )
        .await
        .expect("connects");
        let info = client.peer_info().expect("server info");
        assert_eq!(info.protocol_version, version);
    }
}

#[tokio::test]
async fn http_errors_missing_session_bad_token_unknown_session_get() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let url = session.mcp_url.clone();
    let base = server.http_url();
    let init = initialize_body(1, "2025-11-25");

    for bare in [format!("{base}/v1/mcp"), format!("{base}/v1/mcp/")] {
        let response = mcp_post(&bare, &init)
            .bearer_auth(OPENCLAW_TOKEN)
            .send()
            .await;
        assert_eq!(response.status(), 400);
        let body: Value = response.json();
        assert_eq!(body["error"]["code"], "missing_session_id");
        assert!(
            body["error"]["message"]
                .as_str()
                .expect("msg")
                .contains("MCP-Session-Id")
        );
    }

    for token in [Some("wrong"), None] {
        let mut request = mcp_post(&url, &init);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await;
        assert_eq!(response.status(), 401);
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer")
        );
    }
    let refused = mcp_connect_with_token(&base, &session.id, Some("wrong")).await;
    let Err(error) = refused else {
        panic!("the SDK client must be refused");
    };
    assert!(error.to_string().contains("Auth required"), "{error}");

    let response = mcp_post(&format!("{base}/v1/mcp/no-such-session"), &init)
        .bearer_auth(OPENCLAW_TOKEN)
        .send()
        .await;
    assert_eq!(response.status(), 404);
    let body: Value = response.json();
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("no-such-session")
    );
    let response = mcp_post(&format!("{base}/v1/mcp"), &init)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-session-id", "no-such-session")
        .send()
        .await;
    assert_eq!(response.status(), 404);

    // A streamable HTTP client's GET (it names its revision) finds no
    // server stream; without the header it would open a legacy SSE stream
    // (tests/e2e/legacy_sse.rs).
    let response = Rest::default()
        .token(OPENCLAW_TOKEN)
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await;
    assert_eq!(response.status(), 405);
}

#[tokio::test]
async fn replays_what_openclaws_client_sends() {
    // OpenClaw's MCP client (the TypeScript SDK's StreamableHTTPClientTransport)
    // with `headers` configured: static Authorization and MCP-Session-Id on
    // every request, initialize at 2025-11-25, the initialized notification,
    // a GET for the server stream (405 means "none"), then list and call.
    let server = TestServer::start().await;
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([tool_json("object")]),
        mapping_app,
    )
    .await;
    let id = &app.session.id;
    let url = format!("{}/v1/mcp", server.http_url());
    let client = Rest::default();
    let post = |body: Value, version: Option<&str>| {
        let mut request = client
            .post(&url)
            .header("authorization", format!("Bearer {OPENCLAW_TOKEN}"))
            .header("mcp-session-id", id)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(version) = version {
            request = request.header("mcp-protocol-version", version);
        }
        request
    };

    let response = post(initialize_body(0, "2025-11-25"), None).send().await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json();
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(body["result"]["serverInfo"]["name"], "openclaw-proxy");

    let response = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        Some("2025-11-25"),
    )
    .send()
    .await;
    assert_eq!(response.status(), 202);

    let response = client
        .get(&url)
        .header("authorization", format!("Bearer {OPENCLAW_TOKEN}"))
        .header("mcp-session-id", id)
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await;
    assert_eq!(response.status(), 405);

    let response = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
        Some("2025-11-25"),
    )
    .send()
    .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json();
    assert_eq!(body["result"]["tools"][0]["name"], "object");

    let response = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "object", "arguments": {"q": "x"}}}),
        Some("2025-11-25"),
    )
    .send().await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json();
    assert_eq!(body["id"], 2);
    assert_eq!(
        body["result"]["structuredContent"]["echoed"],
        json!({"q": "x"})
    );
    assert_eq!(body["result"]["isError"], false);
}

#[tokio::test]
async fn host_and_origin_checks() {
    let server = TestServer::start().await;
    let url = TestSession::legacy(&server).await.mcp_url;
    let init = initialize_body(1, "2025-11-25");
    let send = |host: Option<&str>, origin: Option<&str>| {
        let mut request = mcp_post(&url, &init).bearer_auth(OPENCLAW_TOKEN);
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };

    let response = send(Some("evil.example"), None).await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json();
    assert_eq!(body["error"]["code"], "host_not_allowed");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("OPENCLAW_PROXY_ALLOWED_HOSTS")
    );

    let response = send(None, Some("https://evil.example")).await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json();
    assert_eq!(body["error"]["code"], "origin_not_allowed");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("https://evil.example")
    );

    // The check comes first: an unauthenticated page learns nothing more.
    let response = mcp_post(&url, &init)
        .header("origin", "https://evil.example")
        .send()
        .await;
    assert_eq!(response.status(), 403);

    assert_eq!(
        send(None, Some("http://localhost:3000")).await.status(),
        200
    );
    assert_eq!(send(Some("localhost:8000"), None).await.status(), 200);

    // Configured hosts and origins, and the public URL's host, are allowed.
    let server = TestServer::builder()
        .edge(|edge| {
            edge.allowed_hosts = vec!["proxy.internal".into()];
            edge.allowed_origins = vec!["https://app.example".into()];
            edge.public_url = Some("https://mcp.example.com".into());
        })
        .start()
        .await;
    let id = TestSession::legacy(&server).await.id;
    let url = format!("{}/v1/mcp/{id}", server.http_url());
    for (host, origin, expected) in [
        ("proxy.internal:8443", None, 200),
        ("mcp.example.com", Some("https://mcp.example.com"), 200),
        ("proxy.internal", Some("https://app.example"), 200),
        ("proxy.internal", Some("https://other.example"), 403),
        ("other.example", None, 403),
    ] {
        let mut request = mcp_post(&url, &init)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("host", host);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let status = request.send().await.status();
        assert_eq!(status, expected, "{host} {origin:?}");
    }
}

#[tokio::test]
async fn open_mcp_endpoint_needs_no_token() {
    let server = TestServer::builder().tokens(APP_TOKEN, "").start().await;
    let session = TestSession::legacy(&server).await;
    let response = mcp_post(&session.mcp_url, &initialize_body(1, "2025-11-25"))
        .send()
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn progress_reaches_the_client_before_the_result_from_both_bridges() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let url = &session.mcp_url;
    let call = |token: &str| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "echo_text", "arguments": {"text": "x"}, "_meta": {"progressToken": token}
        }})
    };
    let check = |body: &str, token: &str| {
        let messages = sse_messages(body);
        assert_eq!(messages.len(), 3, "{body}");
        for (index, message) in messages[..2].iter().enumerate() {
            assert_eq!(message["method"], "notifications/progress", "{message}");
            assert_eq!(message["params"]["progressToken"], token);
            assert_eq!(message["params"]["progress"], json!(index as f64 + 1.0));
            assert_eq!(message["params"]["total"], json!(2.0));
        }
        assert_eq!(messages[0]["params"]["message"], "halfway");
        assert_eq!(messages[2]["id"], 7);
        assert_eq!(messages[2]["result"]["content"][0]["text"], "done");
    };

    // The legacy app reports progress with JSON frames.
    let mut ws_app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let request = mcp_post(url, &call("ws-token"))
        .bearer_auth(OPENCLAW_TOKEN)
        .send();
    let request = tokio::spawn(request);
    let frame = ws_app.next_json().await.expect("invoke");
    let request_id = frame["request_id"].clone();
    ws_app
        .send_json(json!({"type": "progress", "requestId": request_id, "progress": 1, "total": 2, "message": "halfway"}))
        .await;
    ws_app
        .send_json(json!({"type": "progress", "request_id": request_id, "progress": 2, "total": 2}))
        .await;
    ws_app
        .send_json(json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "done"}))
        .await;
    let response = no_hang(request).await.expect("join");
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    check(&response.text(), "ws-token");

    // The native app reports progress with ToolProgress messages.
    let mut grpc_app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("grpc");
    let request = tokio::spawn(
        mcp_post(url, &call("grpc-token"))
            .bearer_auth(OPENCLAW_TOKEN)
            .send(),
    );
    let invoke = grpc_app.next_invoke().await;
    for (progress, message) in [(1.0, "halfway"), (2.0, "")] {
        grpc_app
            .send(openclaw_proxy_core::proto::app_message::Kind::Progress(
                openclaw_proxy_core::proto::ToolProgress {
                    request_id: invoke.request_id.clone(),
                    progress,
                    total: Some(2.0),
                    message: message.into(),
                },
            ))
            .await;
    }
    grpc_app
        .answer(&invoke.request_id, true, "\"done\"", "")
        .await;
    let response = no_hang(request).await.expect("join");
    check(&response.text(), "grpc-token");
}

#[tokio::test]
async fn a_progress_flood_is_thinned_but_the_latest_report_and_the_result_arrive() {
    const REPORTS: u32 = 5000;
    let server = TestServer::start().await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("grpc");
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "echo_text", "arguments": {}, "_meta": {"progressToken": "flood"}
    }});
    let request = tokio::spawn(
        mcp_post(&session.mcp_url, &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .send(),
    );
    let invoke = no_hang(app.next_invoke()).await;
    for n in 1..=REPORTS {
        app.send(openclaw_proxy_core::proto::app_message::Kind::Progress(
            openclaw_proxy_core::proto::ToolProgress {
                request_id: invoke.request_id.clone(),
                progress: f64::from(n),
                total: Some(f64::from(REPORTS)),
                message: String::new(),
            },
        ))
        .await;
    }
    app.answer(&invoke.request_id, true, "\"done\"", "").await;
    let response = no_hang(request).await.expect("join");
    let messages = sse_messages(&response.text());
    let (result, progress) = messages.split_last().expect("messages");
    assert_eq!(result["result"]["content"][0]["text"], "done", "{result}");
    let delivered: Vec<f64> = progress
        .iter()
        .map(|message| {
            message["params"]["progress"]
                .as_f64()
                .expect("a progress value")
        })
        .collect();
    assert_eq!(
        delivered.last(),
        Some(&f64::from(REPORTS)),
        "the latest arrives"
    );
    assert!(
        delivered.windows(2).all(|pair| pair[0] < pair[1]),
        "in order"
    );
    // Every report is either delivered or counted as thinned.
    let scrape = openclaw_proxy_tests::prometheus::Scrape::parse(&server.hub.render_metrics())
        .expect("metrics");
    let thinned = scrape.value(
        "openclaw_proxy_bridge_messages_dropped_total",
        &[("reason", "progress_overflow")],
    );
    assert_eq!(delivered.len() as f64 + thinned, f64::from(REPORTS));
}

#[tokio::test]
async fn client_disconnect_ends_the_call_on_the_server() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo_text", "arguments": {}}});
    let mut socket = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let text = body.to_string();
    let path = session
        .mcp_url
        .split_once(&server.addr.to_string())
        .expect("url")
        .1
        .to_owned();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {OPENCLAW_TOKEN}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
        server.addr,
        text.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut socket, head.as_bytes())
        .await
        .expect("write");
    app.next_json().await.expect("invoke");
    drop(socket);
    server
        .wait_for_session(
            &session.id,
            "the abandoned call leaving the server",
            |session| session.calls_in_flight == 0,
        )
        .await;
}

#[tokio::test]
async fn the_tool_timeout_holds_while_the_client_leaves_its_progress_unread() {
    // The client asks for progress and never reads its answer; the app
    // floods progress and never answers. The call still times out (and the
    // app is told), so neither the call nor its session is held forever.
    let server = TestServer::builder()
        .tool_timeout(Duration::from_secs(1))
        .start()
        .await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("grpc");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo_text", "arguments": {}, "_meta": {"progressToken": "unread"}
    }})
    .to_string();
    let mut socket = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let path = session
        .mcp_url
        .split_once(&server.addr.to_string())
        .expect("url")
        .1
        .to_owned();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {OPENCLAW_TOKEN}\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut socket, head.as_bytes())
        .await
        .expect("write");
    let invoke = no_hang(app.next_invoke()).await;
    // Far more progress than the socket buffers hold, 8 KiB a report.
    let message = "p".repeat(8 * 1024);
    let flood = {
        let request_id = invoke.request_id.clone();
        let sender = app.sender();
        tokio::spawn(async move {
            for n in 0..2_000_u32 {
                let report = openclaw_proxy_core::proto::ToolProgress {
                    request_id: request_id.clone(),
                    progress: f64::from(n),
                    total: None,
                    message: message.clone(),
                };
                let kind = openclaw_proxy_core::proto::app_message::Kind::Progress(report);
                if !sender.send(kind).await {
                    return;
                }
            }
        })
    };
    match no_hang(app.next()).await {
        Received::Cancel(cancel) => {
            assert_eq!(cancel.request_id, invoke.request_id);
            assert!(cancel.reason.contains("timed out"), "{}", cancel.reason);
        }
        other => panic!("expected the call to be cancelled, got {other:?}"),
    }
    flood.abort();
    drop(socket);
}

#[tokio::test]
async fn a_params_field_the_server_does_not_know_leaves_a_tools_call_answer_unchanged() {
    // A params field MCP may add later is ignored: the answer is the same,
    // at every revision, for every kind of result.
    let server = TestServer::builder()
        .tool_timeout(Duration::from_millis(300))
        .start()
        .await;
    let tools = json!(["object", "string", "blocks", "number", "nothing", "fails"].map(tool_json));
    let app = TestApp::start(&server, BridgeKind::Ws, tools, mapping_app).await;
    let url = &app.session.mcp_url;
    let cases = [
        (
            "object",
            json!({"text": "héllo", "big": 9007199254740993_i64}),
        ),
        ("string", json!({})),
        ("blocks", json!({})),
        ("number", json!({})),
        ("nothing", json!({})),
        ("fails", json!({})),
        ("no_such_tool", json!({})),
    ];
    for version in [
        None,
        Some("2024-11-05"),
        Some("2025-06-18"),
        Some("2025-11-25"),
    ] {
        for (tool, arguments) in &cases {
            let mut bodies = Vec::new();
            for extra in [None, Some(json!({"trace": "x"}))] {
                let mut params = json!({"name": tool, "arguments": arguments, "_meta": {"k": 1}});
                if let Some(extra) = extra {
                    params["x-extension"] = extra;
                }
                let body =
                    json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params});
                let mut request = mcp_post(url, &body).bearer_auth(OPENCLAW_TOKEN);
                if let Some(version) = version {
                    request = request.header("mcp-protocol-version", version);
                }
                let response = request.send().await;
                assert_eq!(response.status(), 200);
                assert_eq!(
                    response
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok()),
                    Some("application/json")
                );
                bodies.push(response.json());
            }
            assert_eq!(bodies[0], bodies[1], "{tool} at {version:?}");
        }
    }
    // No bridge: the same sentence either way.
    let session = TestSession::legacy(&server).await;
    let url = &session.mcp_url;
    let mut bodies = Vec::new();
    for params in [
        json!({"name": "echo_text"}),
        json!({"name": "echo_text", "x-extension": {}}),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": params});
        let response = mcp_post(url, &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .send()
            .await;
        bodies.push(response.json());
    }
    assert_eq!(bodies[0], bodies[1]);
    assert_eq!(
        bodies[0]["result"]["content"][0]["text"],
        "Bridge is not connected."
    );
}

/// A WebSocket app that answers as [`mapping_app`] does, after as many
/// progress reports as the call's `reports` argument asks for.
fn serve_with_progress(mut app: WsApp) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "invoke_tool" {
                continue;
            }
            let request_id = frame["request_id"].clone();
            let reports = frame["arguments"]["reports"].as_u64().unwrap_or(0);
            for n in 1..=reports {
                app.send_json(json!({"type": "progress", "request_id": request_id,
                    "progress": n, "total": reports, "message": format!("step {n}")}))
                    .await;
            }
            let call = Call {
                session_id: String::new(),
                request_id: String::new(),
                tool_name: frame["tool_name"].as_str().unwrap_or_default().to_owned(),
                arguments: frame["arguments"].clone(),
                trace_parent: None,
            };
            let answer = match mapping_app(&call) {
                Answer::Content(content) => {
                    json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": content})
                }
                Answer::Error(error) => {
                    json!({"type": "invoke_result", "request_id": request_id, "ok": false, "error": error})
                }
            };
            app.send_json(answer).await;
        }
    })
}

/// The `_meta` of a 2026-07-28 request: its revision, the client's
/// capabilities and name.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "equivalence", "version": "1"}
    })
}

/// Posts a `tools/call` with `params`, at `version` (with the 2026-07-28
/// headers naming `method` and `name` when given); status, content type
/// and the body, exactly.
async fn post_call(
    url: &str,
    params: Value,
    version: Option<&str>,
    standard_headers: Option<(&str, &str)>,
) -> (u16, Option<String>, String) {
    let body = json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": params});
    let mut request = mcp_post(url, &body).bearer_auth(OPENCLAW_TOKEN);
    if let Some(version) = version {
        request = request.header("mcp-protocol-version", version);
    }
    if let Some((method, name)) = standard_headers {
        request = request
            .header("mcp-method", method)
            .header("mcp-name", name);
    }
    let response = no_hang(request.send()).await;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let content_type = header("content-type");
    let status = response.status().as_u16();
    let text = response.text();
    (status, content_type, text)
}

#[tokio::test]
async fn progress_and_2026_calls_answer_byte_for_byte_alike_with_an_unknown_params_field() {
    // Calls with a progress token (at every revision with `initialize`) and
    // valid 2026-07-28 calls, with and without a params field the server
    // does not know: status, content type and body are the same bytes, JSON
    // when the result comes first, SSE with the progress events in order
    // when the app reports.
    let server = TestServer::builder()
        .tool_timeout(Duration::from_millis(300))
        .start()
        .await;
    let mut body = legacy_session_body();
    body["tools"] =
        json!(["object", "string", "blocks", "number", "nothing", "fails"].map(tool_json));
    let session = TestSession::register(&server, &body).await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let app = serve_with_progress(app);
    server
        .wait_for_session(&session.id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    let url = &session.mcp_url;
    let tools = [
        "object",
        "string",
        "blocks",
        "number",
        "nothing",
        "fails",
        "no_such_tool",
    ];
    let mut streamed = 0;
    for version in [
        None,
        Some("2024-11-05"),
        Some("2025-11-25"),
        Some("2026-07-28"),
    ] {
        let per_request = version == Some("2026-07-28");
        for tool in tools {
            // No progress token; a token the app never reports to; a token
            // with one and with three reports before the result.
            let progress: [Option<u64>; 4] = [None, Some(0), Some(1), Some(3)];
            for (case, reports) in progress.into_iter().enumerate() {
                if reports.is_none() && !per_request {
                    // The plain call: `a_params_field_the_server_does_not_know_leaves_a_tools_call_answer_unchanged`.
                    continue;
                }
                let mut meta = if per_request {
                    meta_2026()
                } else {
                    json!({"k": 1})
                };
                if reports.is_some() {
                    meta["progressToken"] = json!(format!("token-{case}"));
                }
                let arguments = json!({"text": "héllo", "big": 9007199254740993_i64, "reports": reports.unwrap_or(0)});
                let params = json!({"name": tool, "arguments": arguments, "_meta": meta});
                let mut answers = Vec::new();
                for extended in [false, true] {
                    let mut params = params.clone();
                    if extended {
                        params["x-extension"] = json!({"trace": "x"});
                    }
                    let headers = per_request.then_some(("tools/call", tool));
                    answers.push(post_call(url, params, version, headers).await);
                }
                assert_eq!(
                    answers[0], answers[1],
                    "{tool} at {version:?}, {reports:?} reports"
                );
                let (status, content_type, text) = &answers[0];
                assert_eq!(*status, 200, "{text}");
                let reported = reports.unwrap_or(0);
                let answered = tool != "no_such_tool";
                if answered && reported > 0 {
                    streamed += 1;
                    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
                    let messages = sse_messages(text);
                    assert_eq!(messages.len() as u64, reported + 1, "{text}");
                    for (n, message) in messages[..messages.len() - 1].iter().enumerate() {
                        assert_eq!(message["method"], "notifications/progress", "{text}");
                        assert_eq!(message["params"]["progress"], json!(n as f64 + 1.0));
                        assert_eq!(message["params"]["progressToken"], format!("token-{case}"));
                    }
                    assert_eq!(messages[messages.len() - 1]["id"], 41, "{text}");
                } else {
                    assert_eq!(content_type.as_deref(), Some("application/json"), "{text}");
                }
                let answer: Value = match sse_messages(text).pop() {
                    Some(last) if content_type.as_deref() == Some("text/event-stream") => last,
                    _ => serde_json::from_str(text).expect("JSON answer"),
                };
                if answered {
                    // 2026-07-28 results say they are complete; older ones do not.
                    assert_eq!(
                        answer["result"]["resultType"].as_str(),
                        per_request.then_some("complete"),
                        "{text}"
                    );
                } else {
                    assert_eq!(answer["error"]["code"], -32602, "{text}");
                }
            }
        }
    }
    assert!(streamed > 0);
    app.abort();
}

#[tokio::test]
async fn invalid_2026_calls_are_refused_with_400_naming_the_problem() {
    // Headers that disagree with the body, or a `_meta` without what
    // 2026-07-28 requires: a 400 before the app sees anything.
    let server = TestServer::start().await;
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([tool_json("object")]),
        mapping_app,
    )
    .await;
    let url = &app.session.mcp_url;
    let params = |meta: Value| json!({"name": "object", "arguments": {}, "_meta": meta});
    let mut without_capabilities = meta_2026();
    without_capabilities
        .as_object_mut()
        .expect("object")
        .remove("io.modelcontextprotocol/clientCapabilities");
    let mut older = meta_2026();
    older["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let cases = [
        // Headers that disagree with the body, or are missing.
        (params(meta_2026()), Some(("tools/call", "other"))),
        (params(meta_2026()), Some(("tools/list", "object"))),
        (params(meta_2026()), None),
        // `_meta` without what 2026-07-28 requires, or naming another revision.
        (params(without_capabilities), Some(("tools/call", "object"))),
        (params(older), Some(("tools/call", "object"))),
        (params(json!({})), Some(("tools/call", "object"))),
    ];
    for (params, headers) in cases {
        let (status, _, text) = post_call(url, params.clone(), Some("2026-07-28"), headers).await;
        assert_eq!(status, 400, "{params} {headers:?}: {text}");
        let answer: Value = serde_json::from_str(&text).expect("a JSON-RPC error");
        assert!(answer["error"]["code"].is_i64(), "{text}");
    }
    // A revision named in `_meta` that the header does not repeat.
    let (status, _, text) = post_call(url, params(meta_2026()), Some("2025-11-25"), None).await;
    assert_eq!(status, 400, "{text}");
    let answer: Value = serde_json::from_str(&text).expect("a JSON-RPC error");
    assert_eq!(answer["error"]["code"], -32020, "{text}");
}

/// A `tools/call` of `echo_text` with a progress token, on a new
/// bridge of `session`, whose app has reported once (1 of 2) and not
/// answered: the app, the call's request id on the bridge, the answer
/// (a live stream) and its first event, read.
async fn streaming_call(
    session: &TestSession,
    id: u64,
    arguments: Value,
    token: &str,
) -> (WsApp, Value, reqwest::Response, String) {
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let params = json!({"name": "echo_text", "arguments": arguments,
        "_meta": {"progressToken": token}});
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let request = tokio::spawn(
        mcp_post(&session.mcp_url, &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2025-11-25")
            .send_streaming(),
    );
    let invoke = app.next_json().await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();
    app.send_json(json!({"type": "progress", "request_id": request_id, "progress": 1, "total": 2}))
        .await;
    let mut response = no_hang(request).await.expect("join");
    assert_eq!(
        response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = no_hang(response.chunk())
            .await
            .expect("read")
            .expect("an event");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    (app, request_id, response, text)
}

#[tokio::test]
async fn a_streaming_call_sends_each_report_as_it_comes_then_the_result() {
    // The result waits until the client has read the first report, so the
    // answer is a live stream, not one body: report 1, then report 2 and
    // the result once the app sends them.
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let arguments = json!({"text": "done"});
    let (mut app, request_id, mut response, mut text) =
        streaming_call(&session, 6, arguments, "live").await;
    assert!(
        !text.contains("\"result\""),
        "only the first report so far: {text}"
    );
    app.send_json(json!({"type": "progress", "request_id": request_id, "progress": 2, "total": 2}))
        .await;
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true,
        "content": {"text": "done"}}),
    )
    .await;
    while let Some(chunk) = no_hang(response.chunk()).await.expect("read") {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let messages: Vec<Value> = text
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).expect("JSON event"))
        .collect();
    assert_eq!(messages.len(), 3, "{text}");
    for (n, message) in messages[..2].iter().enumerate() {
        assert_eq!(message["method"], "notifications/progress", "{text}");
        assert_eq!(message["params"]["progressToken"], "live");
        assert_eq!(message["params"]["progress"].as_f64(), Some(n as f64 + 1.0));
    }
    assert_eq!(messages[2]["id"], 6, "{text}");
    assert_eq!(
        messages[2]["result"]["structuredContent"]["text"], "done",
        "{text}"
    );
    server
        .wait_for_session(&session.id, "the call leaving the server", |session| {
            session.calls_in_flight == 0
        })
        .await;
}

#[tokio::test]
async fn a_client_that_leaves_a_streaming_call_cancels_it_in_the_app() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let (mut app, request_id, response, first) =
        streaming_call(&session, 5, json!({}), "leaving").await;
    assert!(first.contains("notifications/progress"), "{first}");
    drop(response);
    let cancel = no_hang(app.next_json()).await.expect("cancel_tool");
    assert_eq!(cancel["type"], "cancel_tool", "{cancel}");
    assert_eq!(cancel["request_id"], request_id);
    server
        .wait_for_session(&session.id, "the call leaving the server", |session| {
            session.calls_in_flight == 0
        })
        .await;
}
