//! The gRPC control plane with a tonic client as the app, and the core's
//! invocation API as the caller.

use std::time::Duration;

use openclaw_proxy_core::{BridgeEnd, InvokeError, proto};
use openclaw_proxy_tests::*;
use serde_json::{Map, Value, json};
use tonic::Code;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

fn echo_tools() -> Vec<proto::ToolDefinition> {
    vec![tool(
        "echo_text",
        r#"{"type":"object","properties":{"text":{"type":"string"}}}"#,
    )]
}

type PendingCall = tokio::task::JoinHandle<Result<openclaw_proxy_core::ToolOutcome, InvokeError>>;

/// A server whose calls never time out, a session with a gRPC app, and one
/// call that the app received and holds unanswered.
async fn held_call() -> (TestServer, TestSession, GrpcBridge, PendingCall) {
    let server = TestServer::builder()
        .tool_timeout(Duration::from_secs(600))
        .start()
        .await;
    let session = TestSession::register_grpc(&server, echo_tools()).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("attach");
    let call = server.spawn_invoke(&session.id, "echo_text", json!({}));
    app.next_invoke().await;
    (server, session, app, call)
}

#[tokio::test]
async fn invocation_reaches_the_app_and_its_result_comes_back() {
    let server = TestServer::start().await;
    let mut sessions = server.sessions().await;
    let session_id = sessions.create(echo_tools()).await.expect("create").id;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session_id)
        .await
        .expect("attach");

    let hub = server.hub.clone();
    let id = session_id.clone();
    let call = tokio::spawn(async move {
        hub.invoke(&id, "echo_text", &args(json!({"text": "hello"})))
            .await
    });
    let invoke = app.next_invoke().await;
    assert_eq!(invoke.session_id, session_id);
    assert_eq!(invoke.tool_name, "echo_text");
    assert_eq!(invoke.request_id, format!("{session_id}:1"));
    let arguments: Value = serde_json::from_str(&invoke.arguments_json).expect("json");
    assert_eq!(arguments, json!({"text": "hello"}));
    app.answer(&invoke.request_id, true, r#"{"echoed_text":"hello"}"#, "")
        .await;

    let outcome = call.await.expect("join").expect("call succeeds");
    assert!(outcome.ok);
    assert_eq!(outcome.content_value(), json!({"echoed_text": "hello"}));

    let described = sessions.get(&session_id).await.expect("get");
    assert!(described.bridge_connected);
    assert_eq!(described.calls_in_flight, 0);
    assert_eq!(described.tools.len(), 1);
    assert_eq!(described.metadata.expect("metadata").chat_id, "chat-1");
}

#[tokio::test]
async fn request_ids_count_per_session_and_errors_pass_through() {
    let server = TestServer::start().await;
    let session_id = TestSession::register_grpc(&server, echo_tools()).await.id;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session_id)
        .await
        .expect("attach");
    for n in 1..=3 {
        let call = server.spawn_invoke(&session_id, "echo_text", json!({}));
        let invoke = app.next_invoke().await;
        assert_eq!(invoke.request_id, format!("{session_id}:{n}"));
        app.answer(&invoke.request_id, false, "", "disk is full")
            .await;
        let outcome = call.await.expect("join").expect("answered");
        assert!(!outcome.ok);
        assert_eq!(outcome.error, "disk is full");
        assert_eq!(outcome.content_value(), Value::Null);
    }
}

#[tokio::test]
async fn json_values_arrive_exactly_as_sent_both_ways() {
    let server = TestServer::start().await;
    let session_id = TestSession::register_grpc(&server, echo_tools()).await.id;
    let app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session_id)
        .await
        .expect("attach");
    let echo = app.serve_echo();

    let mut nested = json!("bottom");
    for depth in 0..64 {
        nested = json!({ format!("level{depth}"): nested });
    }
    let sent = json!({
        "max": 9223372036854775807_i64,
        "min": -9223372036854775808_i64,
        "beyond_double": 9007199254740993_i64,
        "negative_zero": -0.0,
        "zero": 0,
        "unicode": "héllo — 你好 — 🦀 — \u{0000} — \"quoted\"",
        "nested": nested,
    });
    let outcome = server
        .hub
        .invoke(&session_id, "echo_text", &args(sent.clone()))
        .await
        .expect("echoed");
    assert_eq!(outcome.content_value().to_string(), sent.to_string());
    let content = &outcome.content_value();
    assert_eq!(content["max"].as_i64(), Some(i64::MAX));
    assert_eq!(content["min"].as_i64(), Some(i64::MIN));
    assert_eq!(content["beyond_double"].as_i64(), Some(9007199254740993));
    let negative_zero = content["negative_zero"].as_f64().expect("float");
    assert!(negative_zero == 0.0 && negative_zero.is_sign_negative());
    assert!(content["zero"].is_u64(), "0 must stay an integer");
    assert_eq!(content["unicode"], sent["unicode"]);
    let mut level = &content["nested"];
    for depth in (0..64).rev() {
        level = &level[format!("level{depth}")];
    }
    assert_eq!(level, "bottom");
    drop(server);
    echo.await.expect("echo task");
}

#[tokio::test]
async fn wrong_or_missing_app_token_is_unauthenticated() {
    let server = TestServer::start().await;
    let mut client =
        proto::session_service_client::SessionServiceClient::new(server.channel().await);
    let status = client
        .create_session(with_token(session_request(echo_tools()), "wrong"))
        .await
        .expect_err("wrong token");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(status.message(), "invalid app token");
    let status = client
        .create_session(session_request(echo_tools()))
        .await
        .expect_err("no token");
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(status.message().contains("Bearer"), "{}", status.message());

    let session = TestSession::register_grpc(&server, echo_tools()).await;
    let status = GrpcBridge::open(server.channel().await, "wrong", &session.id)
        .await
        .err()
        .expect("bridge with a wrong token");
    assert_eq!(status.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn open_server_accepts_requests_without_token() {
    let server = TestServer::builder().tokens("", "").start().await;
    let mut client =
        proto::session_service_client::SessionServiceClient::new(server.channel().await);
    let created = client
        .create_session(session_request(echo_tools()))
        .await
        .expect("no token needed");
    assert!(!created.into_inner().session_id.is_empty());
}

#[tokio::test]
async fn unknown_session_is_not_found_everywhere() {
    let server = TestServer::start().await;
    let mut sessions = server.sessions().await;
    let status = sessions.get("no-such-session").await.expect_err("get");
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("no-such-session"));
    let status = GrpcBridge::open(server.channel().await, APP_TOKEN, "no-such-session")
        .await
        .err()
        .expect("attach");
    assert_eq!(status.code(), Code::NotFound);
    let error = server
        .hub
        .invoke("no-such-session", "echo_text", &Map::new())
        .await
        .expect_err("invoke");
    assert!(matches!(error, InvokeError::UnknownSession(_)), "{error:?}");
}

#[tokio::test]
async fn first_bridge_message_must_be_hello() {
    let server = TestServer::start().await;
    let (sender, receiver) = tokio::sync::mpsc::channel(1);
    sender
        .send(proto::AppMessage {
            kind: Some(proto::app_message::Kind::Pong(proto::Pong { nonce: 1 })),
        })
        .await
        .expect("send");
    let mut client = proto::bridge_service_client::BridgeServiceClient::new(server.channel().await);
    let status = client
        .attach(with_token(
            tokio_stream::wrappers::ReceiverStream::new(receiver),
            APP_TOKEN,
        ))
        .await
        .expect_err("not hello");
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("hello"));
}

#[tokio::test]
async fn bad_tool_definitions_are_invalid_arguments_naming_the_field() {
    let server = TestServer::start().await;
    let mut sessions = server.sessions().await;
    let cases = [
        (
            vec![tool("same", ""), tool("same", "")],
            "tools[1].name \"same\" is used by tools[0] already",
        ),
        (
            vec![tool("has space", "")],
            "tools[0].name \"has space\" is not a valid MCP tool name",
        ),
        (vec![tool("", "")], "tools[0].name is empty"),
        (
            vec![tool(&"x".repeat(129), "")],
            "is not a valid MCP tool name",
        ),
        (
            vec![tool("ok", ""), tool("list", "[]")],
            "tools[1].input_schema must be a JSON object",
        ),
        (
            vec![tool("s", "\"object\"")],
            "tools[0].input_schema must be a JSON object",
        ),
        (
            vec![tool("t", r#"{"type":"array"}"#)],
            "tools[0].input_schema must describe an object",
        ),
        (
            vec![tool("j", "{not json")],
            "tools[0].input_schema is not valid JSON",
        ),
    ];
    for (tools, expected) in cases {
        let status = sessions.create(tools).await.expect_err(expected);
        assert_eq!(status.code(), Code::InvalidArgument, "{expected}");
        assert!(
            status.message().contains(expected),
            "{:?} lacks {expected:?}",
            status.message()
        );
    }
    // The valid edge cases are accepted, and an empty schema is normalised.
    let session = sessions
        .create(vec![tool("a.b-c_d", ""), tool(&"y".repeat(128), "{}")])
        .await
        .expect("valid names");
    let described = sessions.get(&session.id).await.expect("get");
    let schema: Value = serde_json::from_str(&described.tools[0].input_schema_json).expect("json");
    assert_eq!(schema, json!({"type": "object"}));
}

#[tokio::test]
async fn unknown_tool_and_missing_bridge_are_reported() {
    let server = TestServer::start().await;
    let session_id = TestSession::register_grpc(&server, echo_tools()).await.id;
    let error = server
        .hub
        .invoke(&session_id, "nope", &Map::new())
        .await
        .expect_err("unknown tool");
    assert_eq!(
        error.to_string(),
        "unknown tool \"nope\": this session offers echo_text"
    );
    let error = server
        .hub
        .invoke(&session_id, "echo_text", &Map::new())
        .await
        .expect_err("no bridge");
    assert_eq!(error.to_string(), "Bridge is not connected.");
}

#[tokio::test]
async fn idle_session_expires_after_ttl() {
    let server = TestServer::builder()
        .core(|core| {
            core.session_ttl = Duration::from_millis(200);
            core.sweep_interval = Duration::from_millis(20);
        })
        .start()
        .await;
    let mut sessions = server.sessions().await;
    let session_id = sessions.create(echo_tools()).await.expect("create").id;
    assert!(sessions.get(&session_id).await.is_ok());
    let channel = server.channel().await;
    eventually("the idle session expiring", Duration::from_secs(10), || {
        let mut sessions = Sessions::new(server.addr, channel.clone());
        let id = session_id.clone();
        async move {
            sessions
                .get(&id)
                .await
                .is_err_and(|status| status.code() == Code::NotFound)
        }
    })
    .await;
}

#[tokio::test]
async fn connected_bridge_and_call_in_flight_keep_the_session() {
    let server = TestServer::builder()
        .core(|core| {
            core.session_ttl = Duration::from_millis(200);
            core.sweep_interval = Duration::from_millis(20);
        })
        .tool_timeout(Duration::from_secs(60))
        .start()
        .await;
    let mut sessions = server.sessions().await;
    // With a TTL this short, a starved machine may let the new session
    // expire before its bridge is open: then a new one is tried.
    let mut attempts = 0;
    let (bridged, mut app) = loop {
        attempts += 1;
        let bridged = sessions.create(echo_tools()).await.expect("create").id;
        match GrpcBridge::open(server.channel().await, APP_TOKEN, &bridged).await {
            Ok(app) => break (bridged, app),
            Err(status) if status.code() == Code::NotFound && attempts < 5 => continue,
            Err(status) => panic!("attach: {status:?}"),
        }
    };
    let call = server.spawn_invoke(&bridged, "echo_text", json!({}));
    let invoke = app.next_invoke().await;

    // A session created after the bridged one, with no bridge, expires: once
    // it is gone, the bridged session has been idle for longer than the TTL.
    let control = sessions
        .create(echo_tools())
        .await
        .expect("create control")
        .id;
    let channel = server.channel().await;
    eventually(
        "the control session expiring",
        Duration::from_secs(10),
        || {
            let mut sessions = Sessions::new(server.addr, channel.clone());
            let id = control.clone();
            async move { sessions.get(&id).await.is_err() }
        },
    )
    .await;
    let described = sessions
        .get(&bridged)
        .await
        .expect("bridged session survives");
    assert_eq!(described.calls_in_flight, 1);

    app.answer(&invoke.request_id, true, "\"done\"", "").await;
    let outcome = call.await.expect("join").expect("call completes");
    assert_eq!(outcome.content_value(), json!("done"));
}

#[tokio::test]
async fn new_bridge_replaces_old_one_and_fails_its_calls() {
    let (server, session, mut old, call) = held_call().await;

    let new = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("attach new");
    let status = no_hang(old.ended()).await;
    assert_eq!(status.code(), Code::Aborted);
    assert!(
        status.message().contains("replaced"),
        "{}",
        status.message()
    );
    let error = no_hang(call).await.expect("join").expect_err("call fails");
    assert!(
        matches!(error, InvokeError::BridgeEnded(BridgeEnd::Replaced)),
        "{error:?}"
    );

    let echo = new.serve_echo();
    let outcome = server
        .hub
        .invoke(&session.id, "echo_text", &args(json!({"via": "new"})))
        .await
        .expect("served by the new bridge");
    assert_eq!(outcome.content_value(), json!({"via": "new"}));
    drop(server);
    echo.await.expect("echo task");
}

#[tokio::test]
async fn lost_bridge_fails_calls_at_once() {
    let (server, session, app, call) = held_call().await;
    let mut sessions = server.sessions().await;
    drop(app);
    let error = no_hang(call).await.expect("join").expect_err("call fails");
    assert_eq!(
        error.to_string(),
        "The app's bridge disconnected before the tool answered."
    );
    let described = sessions.get(&session.id).await.expect("session remains");
    assert!(!described.bridge_connected);
}

#[tokio::test]
async fn timeout_then_late_and_unknown_results_are_ignored() {
    let server = TestServer::builder()
        .tool_timeout(Duration::from_millis(300))
        .start()
        .await;
    let session_id = TestSession::register_grpc(&server, echo_tools()).await.id;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session_id)
        .await
        .expect("attach");
    let call = server.spawn_invoke(&session_id, "echo_text", json!({}));
    let late = app.next_invoke().await;
    let error = no_hang(call).await.expect("join").expect_err("times out");
    assert!(matches!(error, InvokeError::Timeout(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "The tool did not answer within 0.3 seconds."
    );

    // The timed-out call is cancelled in the app, and its late result is
    // dropped quietly; a result for an id nobody sent gets a notice.
    match app.next().await {
        Received::Cancel(cancel) => {
            assert_eq!(cancel.request_id, late.request_id);
            assert!(cancel.reason.contains("timed out"), "{}", cancel.reason);
        }
        other => panic!("expected a cancel, got {other:?}"),
    }
    app.answer(&late.request_id, true, "\"late\"", "").await;
    app.answer("made-up:99", true, "{}", "").await;
    assert!(
        matches!(app.next().await, Received::Notice(notice) if notice.request_id == "made-up:99")
    );

    // The bridge is still up and serves the next call.
    let echo = app.serve_echo();
    let outcome = server
        .hub
        .invoke(&session_id, "echo_text", &args(json!({"n": 2})))
        .await
        .expect("next call works");
    assert_eq!(outcome.content_value(), json!({"n": 2}));
    drop(server);
    echo.await.expect("echo task");
}

#[tokio::test]
async fn invalid_result_json_fails_the_call_with_a_notice() {
    let server = TestServer::start().await;
    let session_id = TestSession::register_grpc(&server, echo_tools()).await.id;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session_id)
        .await
        .expect("attach");
    let call = server.spawn_invoke(&session_id, "echo_text", json!({}));
    let invoke = app.next_invoke().await;
    app.answer(&invoke.request_id, true, "{broken", "").await;
    assert!(
        matches!(app.next().await, Received::Notice(notice) if notice.message.contains("not valid JSON"))
    );
    let error = call.await.expect("join").expect_err("invalid content");
    assert!(error.to_string().starts_with(
        "The app's result for echo_text was malformed: content_json is not valid JSON"
    ));
}

#[tokio::test]
async fn delete_ends_the_bridge_fails_calls_and_is_idempotent() {
    let (server, session, mut app, call) = held_call().await;
    let mut sessions = server.sessions().await;

    assert!(sessions.delete(&session.id).await.expect("delete"));
    let status = no_hang(app.ended()).await;
    assert_eq!(status.code(), Code::NotFound);
    assert!(status.message().contains("deleted"));
    let error = no_hang(call).await.expect("join").expect_err("call fails");
    assert_eq!(
        error.to_string(),
        "The session was deleted before the tool answered."
    );
    assert!(!sessions.delete(&session.id).await.expect("delete again"));
    assert_eq!(
        sessions.get(&session.id).await.expect_err("gone").code(),
        Code::NotFound
    );
}

#[tokio::test]
async fn pings_are_sent_and_a_silent_bridge_is_dropped() {
    let server = TestServer::builder()
        .core(|core| {
            core.ping_interval = Duration::from_millis(50);
            core.missed_pings_allowed = 3;
        })
        .start()
        .await;
    let mut sessions = server.sessions().await;
    let lively_id = sessions.create(echo_tools()).await.expect("create").id;
    let silent_id = sessions.create(echo_tools()).await.expect("create").id;

    // This app answers every ping (`next` does) and must stay attached.
    let mut lively = GrpcBridge::open(server.channel().await, APP_TOKEN, &lively_id)
        .await
        .expect("attach");
    let lively = tokio::spawn(async move { lively.next().await });

    // This app, attached later, reads without ever answering.
    let mut silent = GrpcBridge::open(server.channel().await, APP_TOKEN, &silent_id)
        .await
        .expect("attach");
    let mut pings = 0;
    let status = loop {
        match no_hang(silent.raw_message()).await {
            Ok(Some(proto::proxy_message::Kind::Ping(_))) => pings += 1,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(status) => break status,
        }
    };
    assert!(pings >= 1, "pings precede the drop");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(
        !sessions
            .get(&silent_id)
            .await
            .expect("session remains")
            .bridge_connected
    );

    // The silent bridge was dropped after three intervals; the lively one,
    // attached earlier, is still there.
    assert!(
        sessions
            .get(&lively_id)
            .await
            .expect("get")
            .bridge_connected
    );
    assert!(!lively.is_finished());
    lively.abort();
}

#[tokio::test]
async fn health_and_reflection_are_served() {
    use tonic_health::pb::{
        HealthCheckRequest, health_check_response::ServingStatus, health_client::HealthClient,
    };
    use tonic_reflection::pb::v1::{
        ServerReflectionRequest, server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
    };

    let server = TestServer::start().await;
    let mut health = HealthClient::new(server.channel().await);
    let status = health
        .check(HealthCheckRequest {
            service: "openclaw.proxy.v1.BridgeService".into(),
        })
        .await
        .expect("health")
        .into_inner()
        .status;
    assert_eq!(status, ServingStatus::Serving as i32);

    let mut reflection = ServerReflectionClient::new(server.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection")
        .into_inner();
    let response = responses.message().await.expect("response").expect("one");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("expected a service list");
    };
    let names: Vec<String> = list
        .service
        .into_iter()
        .map(|service| service.name)
        .collect();
    for expected in [
        "openclaw.proxy.v1.SessionService",
        "openclaw.proxy.v1.BridgeService",
        "grpc.health.v1.Health",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} missing from {names:?}"
        );
    }
}

#[tokio::test]
async fn shutdown_ends_bridges_and_fails_calls_in_flight() {
    let (server, _session, mut app, call) = held_call().await;

    let stopped = tokio::spawn(server.shutdown());
    let error = no_hang(call).await.expect("join").expect_err("call fails");
    assert_eq!(
        error.to_string(),
        "The proxy is shutting down; the tool call was abandoned."
    );
    let status = no_hang(app.ended()).await;
    assert_eq!(status.code(), Code::Unavailable);
    no_hang(stopped)
        .await
        .expect("join")
        .expect("server stops cleanly");
}
