//! The JSON-over-WebSocket bridge with tokio-tungstenite as the legacy app.

use std::time::Duration;

use openclaw_proxy_tests::*;
use serde_json::{Map, Value, json};
use tokio_tungstenite::tungstenite::Message;

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("object expected, got {other}"),
    }
}

#[tokio::test]
async fn invoke_frames_carry_both_spellings_and_either_is_accepted() {
    let server = TestServer::start().await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");

    for (n, key) in [(1, "request_id"), (2, "requestId")] {
        let hub = server.hub.clone();
        let session = id.clone();
        let call = tokio::spawn(async move {
            hub.invoke(&session, "echo_text", &args(json!({"text": "hello"})))
                .await
        });
        let frame = app.next_json().await.expect("invoke_tool");
        let request_id = format!("{id}:{n}");
        assert_eq!(
            frame,
            json!({
                "type": "invoke_tool",
                "mcpSessionId": id,
                "request_id": request_id,
                "requestId": request_id,
                "tool_name": "echo_text",
                "toolName": "echo_text",
                "arguments": {"text": "hello"},
                // Every invocation says who called; in-process, nobody
                // verified.
                "caller": {"kind": "none"}
            })
        );
        app.send_json(json!({
            "type": "invoke_result",
            "mcpSessionId": id,
            key: request_id,
            "ok": true,
            "content": {"echoed_text": "hello", "spelling": key}
        }))
        .await;
        let outcome = no_hang(call).await.expect("join").expect("answered");
        assert!(outcome.ok);
        assert_eq!(
            outcome.content_value(),
            json!({"echoed_text": "hello", "spelling": key})
        );
    }
}

#[tokio::test]
async fn error_results_and_missing_ok() {
    let server = TestServer::start().await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");
    let answers = [
        (
            json!({"ok": false, "error": "no such room"}),
            false,
            "no such room",
        ),
        (
            json!({"error": "implicit failure"}),
            false,
            "implicit failure",
        ),
        (json!({"content": "fine", "error": null}), true, ""),
    ];
    for (answer, ok, error) in answers {
        let call = server.spawn_invoke(&id, "echo_text", json!({}));
        let frame = app.next_json().await.expect("invoke");
        let mut answer = answer;
        answer["type"] = json!("invoke_result");
        answer["request_id"] = frame["request_id"].clone();
        app.send_json(answer).await;
        let outcome = no_hang(call).await.expect("join").expect("answered");
        assert_eq!(outcome.ok, ok);
        assert_eq!(outcome.error, error);
    }
}

#[tokio::test]
async fn close_codes_for_token_session_and_replacement() {
    let server = TestServer::start().await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;

    let mut app = WsApp::connect(&url, Some("wrong")).await.expect("upgrade");
    assert_eq!(app.closed().await, (4401, "invalid app token".into()));
    let mut app = WsApp::connect(&url, None).await.expect("upgrade");
    assert_eq!(app.closed().await.0, 4401);

    let unknown = WsApp::url(&server, "no-such-session");
    let mut app = WsApp::connect(&unknown, Some(APP_TOKEN))
        .await
        .expect("upgrade");
    let (code, reason) = app.closed().await;
    assert_eq!(code, 4404);
    assert!(reason.contains("no-such-session"), "{reason}");

    let mut first = WsApp::connect(&url, Some(APP_TOKEN)).await.expect("first");
    let second = WsApp::connect(&url, Some(APP_TOKEN)).await.expect("second");
    let (code, reason) = no_hang(first.closed()).await;
    assert_eq!(code, 4409);
    assert!(reason.contains("replaced"), "{reason}");

    // The newer bridge serves calls.
    let echo = second.serve_echo();
    let outcome = server
        .hub
        .invoke(&id, "echo_text", &args(json!({"text": "second"})))
        .await
        .expect("served");
    assert_eq!(outcome.content_value(), json!({"text": "second"}));

    // Deleting the session closes its bridge with 4404.
    let response = server.rest().delete_session(&id).await;
    assert_eq!(response.status(), 200);
    let (code, reason) = no_hang(echo).await.expect("join");
    assert_eq!(code, 4404);
    assert!(reason.contains("deleted"), "{reason}");
}

#[tokio::test]
async fn json_pings_and_websocket_ping_frames_are_sent() {
    let server = TestServer::builder()
        .core(|core| core.ping_interval = Duration::from_millis(50))
        .start()
        .await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");
    let (mut json_pings, mut frame_pings) = (0, 0);
    while json_pings < 5 || frame_pings < 5 {
        match no_hang(app.next_event()).await {
            WsEvent::Json(frame) => {
                assert_eq!(frame["type"], "ping", "{frame}");
                assert!(frame["nonce"].is_u64());
                json_pings += 1;
                app.send_json(json!({"type": "pong"})).await;
            }
            WsEvent::PingFrame => frame_pings += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    // Five intervals passed with answers: still attached (the limit is three
    // silent intervals).
    let session = server
        .hub
        .get_session(openclaw_proxy_core::proto::GetSessionRequest { session_id: id })
        .await
        .expect("session");
    assert!(session.bridge_connected);
}

#[tokio::test]
async fn silent_app_is_dropped_with_4408() {
    let server = TestServer::builder()
        .core(|core| core.ping_interval = Duration::from_millis(50))
        .start()
        .await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");
    // The app reads nothing, so it answers neither JSON pings nor ping frames
    // (tungstenite only answers ping frames while the socket is read).
    server
        .wait_for_session(&id, "the silent bridge being dropped", |session| {
            !session.bridge_connected
        })
        .await;
    let code = loop {
        match no_hang(app.next_event()).await {
            WsEvent::Closed(code, _) => break code,
            WsEvent::Ended => break 0,
            _ => {}
        }
    };
    assert_eq!(code, 4408);
}

#[tokio::test]
async fn malformed_frames_get_error_frames_and_the_bridge_stays_up() {
    let server = TestServer::start().await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");
    let bad_frames = [
        (
            Message::Text("not json".into()),
            "not a JSON object of the bridge protocol",
        ),
        (
            Message::Text("[1,2]".into()),
            "not a JSON object of the bridge protocol",
        ),
        (
            Message::Text(r#"{"request_id":"x"}"#.into()),
            "frame has no \"type\"",
        ),
        (
            Message::Text(r#"{"type":"dance"}"#.into()),
            "unknown frame type \"dance\"",
        ),
        (
            Message::Text(r#"{"type":"invoke_result","ok":true}"#.into()),
            "no \"request_id\"",
        ),
        (Message::Binary(vec![1, 2, 3].into()), "binary frames"),
    ];
    for (frame, expected) in bad_frames {
        app.send(frame).await;
        let reply = app.next_json().await.expect("error frame");
        assert_eq!(reply["type"], "error", "{reply}");
        let message = reply["message"].as_str().expect("message");
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
    }

    // A result for a call nobody waits for gets an error naming its id.
    app.send_json(
        json!({"type": "invoke_result", "request_id": "ghost:7", "ok": true, "content": 1}),
    )
    .await;
    let reply = app.next_json().await.expect("notice");
    assert_eq!(reply["type"], "error");
    assert_eq!(reply["request_id"], "ghost:7");

    // An app-initiated JSON ping is answered.
    app.send_json(json!({"type": "ping"})).await;
    assert_eq!(
        app.next_json().await.expect("pong"),
        json!({"type": "pong"})
    );

    // After all that, the bridge still serves calls.
    let echo = app.serve_echo();
    let outcome = server
        .hub
        .invoke(&id, "echo_text", &args(json!({"still": "up"})))
        .await
        .expect("served");
    assert_eq!(outcome.content_value(), json!({"still": "up"}));
    drop(server);
    let _ = no_hang(echo).await;
}

#[tokio::test]
async fn app_closing_its_socket_fails_calls_at_once() {
    let server = TestServer::builder()
        .tool_timeout(Duration::from_secs(600))
        .start()
        .await;
    let TestSession {
        id,
        bridge_url: url,
        ..
    } = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");
    let call = server.spawn_invoke(&id, "echo_text", json!({}));
    app.next_json().await.expect("invoke");
    app.send(Message::Close(None)).await;
    let error = no_hang(call).await.expect("join").expect_err("fails");
    assert_eq!(
        error.to_string(),
        "The app's bridge disconnected before the tool answered."
    );
}

#[tokio::test]
async fn shutdown_closes_websocket_bridges_with_1001() {
    let server = TestServer::start().await;
    let url = TestSession::legacy(&server).await.bridge_url;
    let mut app = WsApp::connect(&url, Some(APP_TOKEN))
        .await
        .expect("connect");
    let stopped = tokio::spawn(server.shutdown());
    let (code, reason) = no_hang(app.closed()).await;
    assert_eq!(code, 1001);
    assert!(reason.contains("shutting down"), "{reason}");
    no_hang(stopped).await.expect("join").expect("clean stop");
}
