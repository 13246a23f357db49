//! Drop-in compatibility with apps written for the original proxy: its exact
//! request shapes replayed message for message, both spellings of a field at
//! once, broken frames that must not leave a call waiting, and the error
//! shapes of every surface.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

async fn post_json(server: &TestServer, body: &str) -> (u16, Value) {
    let response = server.rest().create_session_raw(body.to_owned()).await;
    (response.status().as_u16(), response.json())
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

/// The session bodies of the original implementation's own test suite and
/// of its README, replayed as sent, each answered with the documented reply.
#[tokio::test]
async fn the_original_session_bodies_are_accepted() {
    let server = TestServer::start().await;
    let bodies = [
        r#"{"deviceId":"test-device","deviceName":"test-device-name","appVersion":"1.0.0","tools":[]}"#,
        r#"{"deviceId":"test-device","appVersion":"1.0.0"}"#,
        r#"{"deviceId":"d","deviceName":"n","appVersion":"1.0.0","tools":[{"name":"echo_text","description":"Echo text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}]}"#,
        r#"{"device_id":"d","app_version":"2","unknown_field":{"ignored":true}}"#,
    ];
    for body in bodies {
        let (status, reply) = post_json(&server, body).await;
        assert_eq!(status, 200, "{body} -> {reply}");
        let session = TestSession::from_rest_reply(&reply).expect("the documented reply");
        assert!(
            server
                .hub
                .session_exists(&session.id)
                .await
                .expect("session lookup")
        );
    }
    // The defaults of the original: empty name, no chat, no tools, `{}`-less tools.
    let (_, reply) = post_json(&server, bodies[1]).await;
    let described = server
        .hub
        .get_session(openclaw_proxy_core::proto::GetSessionRequest {
            session_id: TestSession::from_rest_reply(&reply).expect("reply").id,
        })
        .await
        .expect("session");
    let metadata = described.metadata.expect("metadata");
    assert_eq!(
        (metadata.device_name.as_str(), metadata.chat_id.as_str()),
        ("", "")
    );
    assert!(described.tools.is_empty());
}

/// An app written for the original, message for message: camelCase body,
/// bridge frames with only `requestId`, `content: null` and `error: null`,
/// and a full MCP `tools/call` through it.
#[tokio::test]
async fn an_app_written_for_the_original_works_end_to_end() {
    let server = TestServer::start().await;
    let (status, reply) = post_json(
        &server,
        r#"{"deviceId":"legacy","deviceName":"legacy-app","appVersion":"0.9.0","tools":[
            {"name":"echo_text","description":"Echo text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}},
            {"name":"clear","description":"Returns nothing.","inputSchema":{}}]}"#,
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let session = TestSession::from_rest_reply(&reply).expect("the documented reply");
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let app_task = tokio::spawn(async move {
        for _ in 0..2 {
            let invoke = app.next_json().await.expect("invoke_tool");
            assert_eq!(invoke["type"], "invoke_tool");
            // The original spelled these in camelCase; we send both.
            let request_id = invoke["requestId"].clone();
            assert_eq!(invoke["request_id"], request_id);
            assert_eq!(invoke["toolName"], invoke["tool_name"]);
            let answer = if invoke["toolName"] == "clear" {
                json!({"type": "invoke_result", "mcpSessionId": invoke["mcpSessionId"],
                       "requestId": request_id, "ok": true, "content": null, "error": null})
            } else {
                json!({"type": "invoke_result", "mcpSessionId": invoke["mcpSessionId"],
                       "requestId": request_id, "ok": true,
                       "content": {"echoed_text": invoke["arguments"]["text"]}, "error": null})
            };
            app.send_json(answer).await;
        }
        app
    });
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;
    let result = client
        .call_tool(call("echo_text", json!({"text": "hello"})))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        result.structured_content,
        Some(json!({"echoed_text": "hello"}))
    );
    let result = client
        .call_tool(call("clear", json!({})))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert!(result.content.is_empty());
    no_hang(app_task).await.expect("app");
}

#[tokio::test]
async fn both_spellings_in_a_session_body_agree_or_are_refused() {
    let server = TestServer::start().await;
    let agreeing = r#"{"device_id":"d","deviceId":"d","app_version":"1","appVersion":"1",
        "device_name":"n","deviceName":"n","chat_id":"c","chatId":"c",
        "tools":[{"name":"t","input_schema":{"type":"object"},"inputSchema":{"type":"object"}}]}"#;
    let (status, reply) = post_json(&server, agreeing).await;
    assert_eq!(status, 200, "{reply}");

    let conflicts = [
        (
            r#"{"device_id":"a","deviceId":"b","app_version":"1"}"#,
            ["\"device_id\"", "\"deviceId\""],
        ),
        (
            r#"{"device_id":"a","app_version":"1","appVersion":"2"}"#,
            ["\"app_version\"", "\"appVersion\""],
        ),
        (
            r#"{"device_id":"a","app_version":"1","device_name":"x","deviceName":"y"}"#,
            ["\"device_name\"", "\"deviceName\""],
        ),
        (
            r#"{"device_id":"a","app_version":"1","chat_id":"x","chatId":"y"}"#,
            ["\"chat_id\"", "\"chatId\""],
        ),
        (
            r#"{"device_id":"a","app_version":"1","tools":[{"name":"t","input_schema":{},"inputSchema":{"type":"object"}}]}"#,
            ["\"input_schema\"", "\"inputSchema\""],
        ),
    ];
    for (body, keys) in conflicts {
        let (status, reply) = post_json(&server, body).await;
        assert_eq!(status, 400, "{body} -> {reply}");
        assert_eq!(reply["error"]["code"], "invalid_body");
        for key in keys {
            assert!(error_message(&reply).contains(key), "{reply} lacks {key}");
        }
    }
    for (body, needle) in [
        (r#"{"appVersion":"1"}"#, "device_id"),
        (r#"{"deviceId":"d"}"#, "app_version"),
    ] {
        let (status, reply) = post_json(&server, body).await;
        assert_eq!(status, 400, "{body} -> {reply}");
        assert!(error_message(&reply).contains(needle), "{reply}");
    }
    assert_eq!(
        server.hub.session_count(),
        1,
        "only the agreeing body registered"
    );
}

/// Frames with both spellings of the request id: agreeing ones answer the
/// call; conflicting ones get an error frame naming both keys, and the
/// bridge stays up.
#[tokio::test]
async fn both_spellings_in_a_bridge_frame_agree_or_are_refused() {
    let server = TestServer::start().await;
    let session_id = TestSession::legacy(&server).await.id;
    let mut app = WsApp::connect(&WsApp::url(&server, &session_id), Some(APP_TOKEN))
        .await
        .expect("bridge");
    server
        .wait_for_session(&session_id, "bridge attached", |s| s.bridge_connected)
        .await;

    let call = server.spawn_invoke(&session_id, "echo_text", json!({"text": "x"}));
    let invoke = app.next_json().await.expect("invoke");
    let request_id = invoke["request_id"].clone();
    app.send_json(json!({"type": "invoke_result", "request_id": "someone-else", "requestId": request_id, "ok": true, "content": "no"}))
        .await;
    let error = app.next_json().await.expect("error frame");
    assert_eq!(error["type"], "error");
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains("\"request_id\"") && message.contains("\"requestId\""),
        "{message}"
    );
    app.send_json(json!({"type": "progress", "request_id": request_id, "requestId": request_id, "progress": 1}))
        .await;
    app.send_json(json!({"type": "invoke_result", "request_id": request_id, "requestId": request_id, "ok": true, "content": "yes"}))
        .await;
    let outcome = no_hang(call).await.expect("task").expect("answered");
    assert_eq!(outcome.content_value(), json!("yes"));
}

/// A result or progress frame that names a waiting call but cannot be used
/// fails that call at once with a sentence naming the problem; the app gets
/// an error frame and the bridge keeps serving.
#[tokio::test]
async fn a_broken_result_fails_its_call_at_once() {
    let server = TestServer::start().await;
    let session_id = TestSession::legacy(&server).await.id;
    let mut app = WsApp::connect(&WsApp::url(&server, &session_id), Some(APP_TOKEN))
        .await
        .expect("bridge");
    let client = mcp_connect(&server.http_url(), &session_id, Route::Path).await;

    let broken = [
        (
            json!({"type": "invoke_result", "ok": "yes", "content": {}}),
            "\"ok\" must be a boolean",
            "result",
        ),
        (
            json!({"type": "invoke_result", "request_id": "@", "requestId": "@", "ok": 1}),
            "\"ok\" must be a boolean",
            "result",
        ),
        (
            json!({"type": "progress", "progress": "half"}),
            "\"progress\" must be a number",
            "progress report",
        ),
        (
            json!({"type": "progress", "progress": 1, "message": 7}),
            "\"message\" must be a string",
            "progress report",
        ),
    ];
    for (mut frame, problem, what) in broken {
        let pending = {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .call_tool(call("echo_text", json!({"text": "x"})))
                    .await
            })
        };
        let invoke = app.next_json().await.expect("invoke");
        let request_id = invoke["requestId"].clone();
        // Name the call under one spelling or the other (or both).
        if frame["request_id"] == "@" {
            frame["request_id"] = request_id.clone();
            frame["requestId"] = request_id.clone();
        } else {
            frame["requestId"] = request_id.clone();
        }
        app.send_json(frame).await;
        let result = no_hang(pending).await.expect("task").expect("answer");
        assert_eq!(result.is_error, Some(true));
        let text = texts(&result).join(" ");
        assert!(
            text.contains(&format!("The app's {what} for echo_text was malformed"))
                && text.contains(problem),
            "{text}"
        );
        let notice = app.next_json().await.expect("error frame");
        assert_eq!(notice["type"], "error", "{notice}");
        assert_eq!(notice["requestId"], request_id);
        assert!(
            notice["message"]
                .as_str()
                .unwrap_or_default()
                .contains(problem),
            "{notice}"
        );
    }

    // The bridge is still up and serves the next call.
    let answered = app.serve_echo();
    let result = client
        .call_tool(call("echo_text", json!({"text": "still here"})))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(
        result.structured_content,
        Some(json!({"text": "still here"}))
    );
    drop(answered);
}

#[tokio::test]
async fn grpc_create_session_requires_only_device_id_and_app_version() {
    use openclaw_proxy_core::proto::{self, session_service_client::SessionServiceClient};
    let server = TestServer::start().await;
    let mut sessions = SessionServiceClient::new(server.channel().await);
    let request = |device_id: &str, app_version: &str| {
        with_token(
            proto::CreateSessionRequest {
                metadata: Some(proto::SessionMetadata {
                    device_id: device_id.into(),
                    app_version: app_version.into(),
                    ..Default::default()
                }),
                tools: Vec::new(),
                ..Default::default()
            },
            APP_TOKEN,
        )
    };
    let created = sessions
        .create_session(request("d", "1"))
        .await
        .expect("only the required fields")
        .into_inner();
    assert!(
        server
            .hub
            .session_exists(&created.session_id)
            .await
            .expect("session lookup")
    );
    for (device_id, app_version, field) in [("", "1", "device_id"), ("d", "", "app_version")] {
        let status = sessions
            .create_session(request(device_id, app_version))
            .await
            .expect_err("missing field");
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains(field), "{}", status.message());
    }
    let status = sessions
        .create_session(with_token(
            proto::CreateSessionRequest::default(),
            APP_TOKEN,
        ))
        .await
        .expect_err("no metadata");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
}

/// Paths and methods we do not serve get the JSON error shape; only gRPC
/// requests get gRPC's UNIMPLEMENTED.
#[tokio::test]
async fn unknown_routes_are_json_404_and_wrong_methods_405() {
    let server = TestServer::start().await;
    let client = Rest::new(server.http_url());
    for (method, path, status, code) in [
        (Method::PUT, "/v1/chat/sessions/x/nothing", 404, "not_found"),
        (Method::GET, "/nothing/here", 404, "not_found"),
        (Method::GET, "/v1/chat/sessions", 405, "method_not_allowed"),
        (
            Method::PUT,
            "/v1/chat/sessions/x",
            405,
            "method_not_allowed",
        ),
        (Method::POST, "/health", 405, "method_not_allowed"),
        (
            Method::DELETE,
            "/v1/chat/sessions/%FF%FE",
            400,
            "invalid_path",
        ),
        (Method::POST, "/v1/mcp/%C3%28", 400, "invalid_path"),
    ] {
        let response = client.request(method.clone(), path).send().await;
        assert_eq!(response.status().as_u16(), status, "{method} {path}");
        assert!(response.headers().get("grpc-status").is_none());
        let body = response.json();
        assert_eq!(body["error"]["code"], code, "{method} {path}: {body}");
    }

    // A gRPC request for a method nobody serves: UNIMPLEMENTED, in gRPC terms.
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.expect("ready");
    let status = grpc
        .unary::<(), (), _>(
            tonic::Request::new(()),
            "/openclaw.proxy.v1.Nothing/Nope".parse().expect("path"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .expect_err("unimplemented");
    assert_eq!(status.code(), tonic::Code::Unimplemented);
}

/// Every refusal of the MCP endpoint is a JSON-RPC error an MCP client can
/// show, found by sending it bad input.
#[tokio::test]
async fn mcp_refusals_are_json_rpc_errors() {
    let server = TestServer::start().await;
    let url = TestSession::legacy(&server).await.mcp_url;
    let send = |body: String, content_type: &'static str, accept: &'static str| {
        let request = server
            .rest()
            .token(OPENCLAW_TOKEN)
            .post(&url)
            .header("content-type", content_type)
            .header("accept", accept)
            .body(body);
        async move {
            let response = request.send().await;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let body = response.json();
            assert!(content_type.starts_with("application/json"), "{body}");
            (status, body)
        }
    };
    let both = "application/json, text/event-stream";
    let (status, body) = send("{not json".into(), "application/json", both).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32700)),
        "{body}"
    );

    for params in [
        json!({}),
        json!({"name": 5}),
        json!({"name": "echo_text", "arguments": 3}),
    ] {
        let request = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
        let (_, body) = send(request.to_string(), "application/json", both).await;
        assert_eq!(body["error"]["code"], -32602, "{params} -> {body}");
        assert_eq!(body["id"], 7);
    }

    let initialize = initialize_body(1, "2025-11-25").to_string();
    let (status, body) = send(initialize.clone(), "text/plain", both).await;
    assert_eq!(status, 415, "{body}");
    assert_eq!(body["error"]["code"], -32600);
    let (status, body) = send(initialize, "application/json", "text/html").await;
    assert_eq!(status, 406, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Accept")
            || body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("accept"),
        "{body}"
    );
}

/// Answer URLs name what the client reached: a valid `Host`, or the
/// `:authority` of an HTTP/2 request, or the listening address; never a
/// header value that is not `host[:port]`.
#[tokio::test]
async fn answer_urls_come_from_a_valid_host_or_the_listening_address() {
    // Any Host passes the guard here: this test is about the answer's URLs.
    let server = TestServer::builder()
        .edge(|edge| edge.allowed_hosts = vec!["*".into()])
        .start()
        .await;
    let body = legacy_session_body().to_string();
    let with_host = |host: &'static str| {
        server
            .rest()
            .post("/v1/chat/sessions")
            .header("content-type", "application/json")
            .header("host", host)
            .body(body.clone())
    };
    let reply = with_host("proxy.example.com:9443").send().await.json();
    assert!(
        reply["mcp_url"]
            .as_str()
            .unwrap_or_default()
            .starts_with("http://proxy.example.com:9443/v1/mcp/"),
        "{reply}"
    );
    let reply = with_host("evil.com\"><script>").send().await.json();
    let expected = format!("http://{}/v1/mcp/", server.addr);
    assert!(
        reply["mcp_url"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&expected),
        "{reply}"
    );

    // HTTP/2 (prior knowledge): no Host header, the authority is in the URI.
    let mut sender = openclaw_proxy_tests::h2c(server.addr).await;
    let request = hyper::Request::post(format!("http://{}/v1/chat/sessions", server.addr))
        .header("authorization", format!("Bearer {APP_TOKEN}"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(body.clone())))
        .expect("request");
    let response = no_hang(sender.send_request(request))
        .await
        .expect("POST over HTTP/2");
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body")
        .to_bytes();
    let reply: Value = serde_json::from_slice(&bytes).expect("JSON");
    assert!(
        reply["bridge_url"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("ws://{}/v1/chat/sessions/", server.addr)),
        "{reply}"
    );

    // A raw HTTP/1.0 request without any Host header.
    let raw = format!(
        "POST /v1/chat/sessions HTTP/1.0\r\nauthorization: Bearer {APP_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    tokio::io::AsyncWriteExt::write_all(&mut stream, raw.as_bytes())
        .await
        .expect("write");
    let mut answer = Vec::new();
    no_hang(tokio::io::AsyncReadExt::read_to_end(
        &mut stream,
        &mut answer,
    ))
    .await
    .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    assert!(answer.contains(&expected), "{answer}");
}

/// A client's close frame is answered with the same code, and a handshake
/// with an unsupported version is refused before the upgrade.
#[tokio::test]
async fn the_bridge_answers_close_frames_and_refuses_other_versions() {
    let server = TestServer::start().await;
    let TestSession {
        id: session_id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;

    let mut request = url.as_str().into_client_request().expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {APP_TOKEN}").parse().expect("header"),
    );
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("connect");
    server
        .wait_for_session(&session_id, "bridge attached", |s| s.bridge_connected)
        .await;
    socket
        .send(Message::Close(Some(CloseFrame {
            code: CloseCode::Library(4000),
            reason: "app going to background".into(),
        })))
        .await
        .expect("send close");
    let mut echoed = None;
    while let Some(frame) = no_hang(socket.next()).await {
        match frame {
            Ok(Message::Close(frame)) => {
                echoed = frame.map(|frame| u16::from(frame.code));
                break;
            }
            Ok(_) => {}
            Err(error) => panic!("the bridge ended without answering the close frame: {error}"),
        }
    }
    assert_eq!(echoed, Some(4000));
    server
        .wait_for_session(&session_id, "bridge detached", |s| !s.bridge_connected)
        .await;

    let response = server
        .rest()
        .get(&url.replacen("ws://", "http://", 1))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "8")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .timeout(Duration::from_secs(30))
        .send()
        .await;
    assert_eq!(response.status().as_u16(), 426);
    assert_eq!(
        response
            .headers()
            .get("sec-websocket-version")
            .and_then(|value| value.to_str().ok()),
        Some("13")
    );
    let body = response.json();
    assert_eq!(body["error"]["code"], "unsupported_websocket_version");
}
