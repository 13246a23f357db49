//! Session REST as documented, with the tests' REST client as the app.

use openclaw_proxy_tests::*;
use serde_json::{Value, json};

async fn post_session(
    server: &TestServer,
    token: Option<&str>,
    body: String,
) -> (StatusCode, Value) {
    let response = server
        .rest()
        .token_opt(token)
        .create_session_raw(body)
        .await;
    (response.status(), response.json())
}

fn assert_error(status: StatusCode, body: &Value, expected_status: u16, code: &str, needle: &str) {
    assert_eq!(status.as_u16(), expected_status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().expect("message");
    assert!(message.contains(needle), "{message:?} lacks {needle:?}");
}

#[tokio::test]
async fn health_answers_ok() {
    let server = TestServer::start().await;
    let response = Rest::new(server.http_url()).health().await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text(), "ok");
}

#[tokio::test]
async fn create_with_documented_body_answers_urls_from_host() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let session_id = session.id.as_str();
    assert_eq!(
        session.bridge_url,
        format!("ws://{}/v1/chat/sessions/{session_id}/bridge", server.addr)
    );
    assert_eq!(
        session.mcp_url,
        format!("http://{}/v1/mcp/{session_id}", server.addr)
    );
    let tools = server.hub.tools(session_id).await.expect("session exists");
    assert_eq!(&*tools[0].name, "echo_text");
    assert_eq!(&*tools[0].description, "Echo text.");
    assert_eq!(&*tools[0].path, "/tools/echo_text");
    assert_eq!(
        tools[0].input_schema.to_object()["properties"]["text"]["type"],
        "string"
    );
}

#[tokio::test]
async fn create_accepts_the_original_camel_case_body() {
    let server = TestServer::start().await;
    let body = json!({
        "deviceId": "device-1",
        "deviceName": "desktop",
        "appVersion": "1.0.0",
        "chatId": "chat-9",
        "tools": [{"name": "read_chat", "inputSchema": {"type": "object", "required": ["limit"]}}]
    });
    let session = TestSession::register(&server, &body).await;
    let session_id = session.id.as_str();
    let described = server
        .hub
        .get_session(openclaw_proxy_core::proto::GetSessionRequest {
            session_id: session_id.into(),
        })
        .await
        .expect("session");
    assert_eq!(described.metadata.expect("metadata").chat_id, "chat-9");
    let tools = server.hub.tools(session_id).await.expect("tools");
    assert_eq!(
        tools[0].input_schema.to_object()["required"],
        json!(["limit"])
    );
}

#[tokio::test]
async fn urls_follow_public_url_and_forwarded_proto_from_trusted_proxies() {
    let server = TestServer::builder()
        .edge(|edge| edge.public_url = Some("https://proxy.example.com/base".into()))
        .start()
        .await;
    let session = TestSession::legacy(&server).await;
    let id = &session.id;
    assert_eq!(
        session.bridge_url,
        format!("wss://proxy.example.com/base/v1/chat/sessions/{id}/bridge")
    );
    assert_eq!(
        session.mcp_url,
        format!("https://proxy.example.com/base/v1/mcp/{id}")
    );

    // The Host guard lets this host in only when it is allowed, and
    // `X-Forwarded-Proto` counts only from a trusted proxy.
    for (trusted, scheme) in [(false, "http"), (true, "https")] {
        let server = TestServer::builder()
            .edge(|edge| {
                edge.allowed_hosts = vec!["proxy.internal".into()];
                if trusted {
                    edge.connections.trusted_proxies = vec!["127.0.0.0/8".parse().expect("range")];
                }
            })
            .start()
            .await;
        let response = server
            .rest()
            .post("/v1/chat/sessions")
            .header("host", "proxy.internal:9443")
            .header("x-forwarded-proto", "https")
            .json(&legacy_session_body())
            .send()
            .await;
        let reply = response.json();
        let session = TestSession::from_rest_reply(&reply).expect("registration reply");
        let id = &session.id;
        let ws = if trusted { "wss" } else { "ws" };
        assert_eq!(
            session.bridge_url,
            format!("{ws}://proxy.internal:9443/v1/chat/sessions/{id}/bridge")
        );
        assert_eq!(
            session.mcp_url,
            format!("{scheme}://proxy.internal:9443/v1/mcp/{id}")
        );
    }
}

#[tokio::test]
async fn delete_is_idempotent_and_needs_the_token() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let id = session.id.as_str();
    let rest = server.rest();

    let response = rest.token("wrong").delete_session(id).await;
    assert_eq!(response.status(), 401);
    assert!(server.hub.session_exists(id).await.expect("session lookup"));

    for _ in 0..2 {
        let response = rest.delete_session(id).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.json(), json!({"ok": true}));
    }
    assert!(!server.hub.session_exists(id).await.expect("session lookup"));
}

#[tokio::test]
async fn wrong_or_missing_app_token_is_401() {
    let server = TestServer::start().await;
    let body = legacy_session_body().to_string();
    let (status, reply) = post_session(&server, Some("wrong"), body.clone()).await;
    assert_error(status, &reply, 401, "unauthorized", "app token");
    let (status, reply) = post_session(&server, None, body).await;
    assert_error(status, &reply, 401, "unauthorized", "Authorization: Bearer");
    assert_eq!(server.hub.session_count(), 0);
}

#[tokio::test]
async fn bad_bodies_get_json_errors_naming_the_problem() {
    let server = TestServer::start().await;
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = legacy_session_body();
        change(&mut body);
        body.to_string()
    };
    let cases: Vec<(String, u16, &str, &str)> = vec![
        ("{not json".into(), 400, "malformed_json", "not valid JSON"),
        ("".into(), 400, "malformed_json", "not valid JSON"),
        ("[]".into(), 400, "invalid_body", "expected struct"),
        (
            with(&|b| {
                b.as_object_mut().map(|o| o.remove("device_id"));
            }),
            400,
            "invalid_body",
            "missing field \"device_id\" (or \"deviceId\")",
        ),
        (
            with(&|b| b["tools"] = json!("all of them")),
            400,
            "invalid_body",
            "tools: invalid type: string",
        ),
        (
            with(&|b| b["tools"][0]["name"] = json!(5)),
            400,
            "invalid_body",
            "tools[0].name",
        ),
        (
            with(&|b| {
                b["tools"][0].as_object_mut().map(|o| o.remove("name"));
            }),
            400,
            "invalid_body",
            "missing field `name`",
        ),
        (
            with(&|b| b["chat_id"] = json!(5)),
            400,
            "invalid_body",
            "chat_id",
        ),
        (
            with(&|b| {
                let t = b["tools"][0].clone();
                if let Some(tools) = b["tools"].as_array_mut() {
                    tools.push(t);
                }
            }),
            400,
            "invalid_tool",
            "tools[1].name \"echo_text\" is used by tools[0] already",
        ),
        (
            with(&|b| b["tools"][0]["name"] = json!("echo text")),
            400,
            "invalid_tool",
            "tools[0].name \"echo text\" is not a valid MCP tool name",
        ),
        (
            with(&|b| b["tools"][0]["name"] = json!("")),
            400,
            "invalid_tool",
            "tools[0].name is empty",
        ),
        (
            with(&|b| b["tools"][0]["input_schema"] = json!("object")),
            400,
            "invalid_tool",
            "tools[0].input_schema must be a JSON object",
        ),
        (
            with(&|b| b["tools"][0]["input_schema"] = json!([1])),
            400,
            "invalid_tool",
            "tools[0].input_schema must be a JSON object",
        ),
        (
            with(&|b| b["tools"][0]["input_schema"] = json!({"type": "string"})),
            400,
            "invalid_tool",
            "must describe an object",
        ),
    ];
    for (body, status_code, code, needle) in cases {
        let (status, reply) = post_session(&server, Some(APP_TOKEN), body.clone()).await;
        assert_error(status, &reply, status_code, code, needle);
    }
    assert_eq!(server.hub.session_count(), 0);
}

#[tokio::test]
async fn oversized_body_is_413_with_json() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["tools"][0]["description"] = json!("x".repeat(2 * 1024 * 1024));
    let (status, reply) = post_session(&server, Some(APP_TOKEN), body.to_string()).await;
    assert_error(
        status,
        &reply,
        413,
        "body_too_large",
        "larger than the limit of 1048576 bytes",
    );
    // The server is unharmed.
    TestSession::legacy(&server).await;
}
