//! The relay: the real binary against the real server and a test app.

use std::time::Duration;

use crate::common::{RawChild, command};
use openclaw_proxy_tests::*;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

fn env<'a>(server: &'a str, token: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("OPENCLAW_PROXY_SERVER_URL", server),
        ("OPENCLAW_PROXY_OPENCLAW_TOKEN", token),
    ]
}

fn initialize(id: u64, session: Option<&str>) -> Value {
    let mut message = initialize_body(id, "2025-11-25");
    if let Some(session) = session {
        message["params"]["mcpSessionId"] = json!(session);
    }
    message
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Sends `initialize` (`hello`) and, once it is answered, the
/// `notifications/initialized` that completes the handshake; the answer.
async fn handshake(relay: &mut RawChild, hello: Value) -> Value {
    relay.send(hello).await;
    let reply = relay.recv().await;
    relay
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    reply
}

/// A session with a WebSocket app whose calls the test answers by hand.
async fn manual_session(server: &TestServer) -> (String, WsApp) {
    let session = server.rest().register(&legacy_session_body()).await;
    let id = session.id;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    wait_for_bridge(server, &id).await;
    (id, app)
}

async fn wait_for_bridge(server: &TestServer, id: &str) {
    server
        .wait_for_session(id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
}

async fn answer(app: &mut WsApp, content: Value) -> Value {
    let frame = app.next_json().await.expect("invoke_tool");
    app.send_json(json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": content}))
        .await;
    frame
}

#[tokio::test]
async fn binds_by_initialize_field_and_relays_everything() {
    let server = TestServer::start().await;
    let (id, mut app) = manual_session(&server).await;
    let url = server.http_url();
    let mut relay = RawChild::spawn(command(&[], &env(&url, OPENCLAW_TOKEN)));

    let reply = handshake(&mut relay, initialize(1, Some(&id))).await;
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(reply["result"]["serverInfo"]["name"], "openclaw-proxy");

    relay.send(request(2, "tools/list", json!({}))).await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 2);
    assert_eq!(reply["result"]["tools"][0]["name"], "echo_text");

    relay
        .send(request(
            3,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "hi"}}),
        ))
        .await;
    let frame = answer(&mut app, json!({"echoed_text": "hi"})).await;
    assert_eq!(frame["arguments"], json!({"text": "hi"}));
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 3);
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"echoed_text": "hi"})
    );

    let (status, rest) = relay.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[tokio::test]
async fn binds_by_session_id_for_the_sdk_client_old_and_stateless() {
    let server = TestServer::start().await;
    let session = server.rest().register(&legacy_session_body()).await;
    let id = session.id;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let _echo = app.serve_echo();
    wait_for_bridge(&server, &id).await;
    let url = server.http_url();

    // By environment variable, with the SDK's initialize handshake.
    let mut vars = env(&url, OPENCLAW_TOKEN);
    vars.push(("OPENCLAW_PROXY_SESSION_ID", &id));
    let client =
        ().serve(TokioChildProcess::new(command(&[], &vars)).expect("spawn"))
            .await
            .expect("initialize through the relay");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools[0].name, "echo_text");
    let arguments = json!({"text": "via env"});
    let result = client
        .call_tool(
            CallToolRequestParams::new("echo_text")
                .with_arguments(arguments.as_object().expect("object").clone()),
        )
        .await
        .expect("tools/call");
    assert_eq!(result.structured_content, Some(arguments));
    client.cancel().await.expect("close");

    // By flag, with a 2026-07-28 client that sends no initialize.
    let client = rmcp::model::ClientConfig::default()
        .serve_with_lifecycle(
            TokioChildProcess::new(command(&["--session-id", &id], &env(&url, OPENCLAW_TOKEN)))
                .expect("spawn"),
            rmcp::service::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover through the relay");
    let result = client
        .call_tool(
            CallToolRequestParams::new("echo_text")
                .with_arguments(json!({"n": 1}).as_object().expect("object").clone()),
        )
        .await
        .expect("tools/call");
    assert_eq!(result.structured_content, Some(json!({"n": 1})));
    client.cancel().await.expect("close");
}

use rmcp::service::ClientServiceExt;

#[tokio::test]
async fn binding_errors_name_the_session_and_say_how_to_bind() {
    let server = TestServer::start().await;
    let url = server.http_url();
    let mut relay = RawChild::spawn(command(&[], &env(&url, OPENCLAW_TOKEN)));

    relay.send(request(1, "tools/list", json!({}))).await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 1);
    assert_eq!(reply["error"]["code"], -32002);
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("mcpSessionId") && message.contains("--session-id"),
        "{message}"
    );

    relay.send(initialize(2, Some("no-such-session"))).await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 2);
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("\"no-such-session\"") && message.contains("404"),
        "{message}"
    );

    let (status, _) = relay.finish().await;
    assert!(status.success());
}

#[tokio::test]
async fn unreachable_server_and_rejected_token_are_explained() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let mut relay = RawChild::spawn(command(
        &["--session-id", "s"],
        &env(&closed, OPENCLAW_TOKEN),
    ));
    relay.send(initialize(1, None)).await;
    let reply = relay.recv().await;
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("cannot reach the openclaw-proxy server at") && message.contains(&closed),
        "{message}"
    );
    relay.finish().await;

    let server = TestServer::start().await;
    let (id, _app) = manual_session(&server).await;
    let mut relay = RawChild::spawn(command(
        &["--session-id", &id],
        &env(&server.http_url(), "wrong"),
    ));
    relay.send(initialize(1, None)).await;
    let reply = relay.recv().await;
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("rejected the OpenClaw token (401)"),
        "{message}"
    );
    assert!(
        message.contains("OPENCLAW_PROXY_OPENCLAW_TOKEN"),
        "{message}"
    );
    let (status, _) = relay.finish().await;
    assert!(status.success());
}

#[tokio::test]
async fn session_gone_later_is_a_404_error() {
    let server = TestServer::start().await;
    let (id, _app) = manual_session(&server).await;
    let mut relay = RawChild::spawn(command(&[], &env(&server.http_url(), OPENCLAW_TOKEN)));
    relay.send(initialize(1, Some(&id))).await;
    assert!(relay.recv().await["result"].is_object());
    let app_token = format!("Bearer {APP_TOKEN}");
    server
        .hub
        .delete(
            &id,
            openclaw_proxy_core::Credential::app(Some(&app_token)),
            openclaw_proxy_core::Origin::default(),
        )
        .await
        .expect("delete");
    relay.send(request(2, "tools/list", json!({}))).await;
    let reply = relay.recv().await;
    let message = reply["error"]["message"].as_str().expect("message");
    assert!(
        message.contains(&id) && message.contains("(404)"),
        "{message}"
    );
}

#[tokio::test]
async fn requests_run_concurrently_and_cancellation_aborts_the_call() {
    let server = TestServer::start().await;
    let (id, mut app) = manual_session(&server).await;
    let mut relay = RawChild::spawn(command(&[], &env(&server.http_url(), OPENCLAW_TOKEN)));
    relay.send(initialize(1, Some(&id))).await;
    relay.recv().await;

    // A slow call is held by the app...
    relay
        .send(request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "slow"}}),
        ))
        .await;
    let slow = app.next_json().await.expect("slow invoke");
    // ...while a listing and another call go through.
    relay.send(request(3, "tools/list", json!({}))).await;
    assert_eq!(relay.recv().await["id"], 3);
    relay
        .send(request(
            4,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "fast"}}),
        ))
        .await;
    let frame = answer(&mut app, json!("fast done")).await;
    assert_eq!(frame["arguments"]["text"], "fast");
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 4);
    assert_eq!(reply["result"]["content"][0]["text"], "fast done");

    // Cancelling the slow call ends it on the server too.
    relay
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user"}}))
        .await;
    server
        .wait_for_session(&id, "the cancelled call leaving the server", |s| {
            s.calls_in_flight == 0
        })
        .await;
    // A late answer from the app is ignored; the next reply is for the next request.
    app.send_json(json!({"type": "invoke_result", "request_id": slow["request_id"], "ok": true, "content": "late"}))
        .await;
    relay.send(request(5, "ping", json!({}))).await;
    let reply = relay.recv().await;
    assert_eq!(
        reply["id"], 5,
        "no reply for the cancelled request: {reply}"
    );

    let (status, rest) = relay.finish().await;
    assert!(status.success());
    assert!(rest.iter().all(|message| message["id"] != 2), "{rest:?}");
}

#[tokio::test]
async fn progress_streams_through_before_the_result() {
    let server = TestServer::start().await;
    let (id, mut app) = manual_session(&server).await;
    let mut relay = RawChild::spawn(command(&[], &env(&server.http_url(), OPENCLAW_TOKEN)));
    relay.send(initialize(1, Some(&id))).await;
    relay.recv().await;
    relay
        .send(request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {}, "_meta": {"progressToken": "p1"}}),
        ))
        .await;
    let frame = app.next_json().await.expect("invoke");
    for step in 1..=3 {
        app.send_json(json!({"type": "progress", "request_id": frame["request_id"], "progress": step, "total": 3}))
            .await;
    }
    app.send_json(json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": "finished"}))
        .await;
    for step in 1..=3 {
        let message = relay.recv().await;
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(message["params"]["progressToken"], "p1");
        assert_eq!(message["params"]["progress"], json!(f64::from(step)));
    }
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 2);
    assert_eq!(reply["result"]["content"][0]["text"], "finished");
}

#[tokio::test]
async fn eof_waits_for_in_flight_replies_then_exits_zero() {
    let server = TestServer::start().await;
    let (id, mut app) = manual_session(&server).await;
    let mut relay = RawChild::spawn(command(&[], &env(&server.http_url(), OPENCLAW_TOKEN)));
    relay.send(initialize(1, Some(&id))).await;
    relay.recv().await;
    relay
        .send(request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "last"}}),
        ))
        .await;
    let frame = app.next_json().await.expect("invoke");
    let finishing = tokio::spawn(relay.finish());
    app.send_json(json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": "written"}))
        .await;
    let (status, rest) = no_hang(finishing).await.expect("join");
    assert!(status.success(), "{status:?}");
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], 2);
    assert_eq!(rest[0]["result"]["content"][0]["text"], "written");
}

#[tokio::test]
async fn garbage_on_stdin_is_a_parse_error_not_a_crash() {
    let server = TestServer::start().await;
    let (id, _app) = manual_session(&server).await;
    let mut relay = RawChild::spawn(command(
        &["--session-id", &id],
        &env(&server.http_url(), OPENCLAW_TOKEN),
    ));
    relay.send_raw("this is not json").await;
    let reply = relay.recv().await;
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    assert!(
        reply["error"]["message"]
            .as_str()
            .expect("msg")
            .contains("not a JSON-RPC message")
    );
    relay.send_raw("[1, 2]").await;
    let reply = relay.recv().await;
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    relay.send(request(2, "ping", json!({}))).await;
    assert_eq!(relay.recv().await["id"], 2);
}

#[tokio::test]
async fn stdio_benchmark_smoke_run() {
    let server = TestServer::start().await;
    let target = openclaw_proxy_tests::bench::Target {
        base_url: server.http_url(),
        app_token: APP_TOKEN.into(),
        openclaw_token: OPENCLAW_TOKEN.into(),
        mcp_base_url: None,
    };
    let sessions = openclaw_proxy_tests::bench::start_apps(
        &target,
        openclaw_proxy_tests::bench::BridgeKind::Ws,
        1,
    )
    .await
    .expect("app");
    let report = openclaw_proxy_tests::bench::run_stdio(
        crate::common::BINARY,
        &target,
        &sessions[0],
        Duration::from_secs(120),
        Some(100),
    )
    .await
    .expect("stdio run");
    assert_eq!(report.errors, 0);
    assert_eq!(report.calls, 100);
}

#[tokio::test]
async fn log_records_and_resource_updates_reach_the_stdio_client() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["resources"] = json!([{"uri": "notes://a", "name": "a"}]);
    let session = server.rest().register(&body).await;
    let id = session.id;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    wait_for_bridge(&server, &id).await;
    let mut relay = RawChild::spawn(command(
        &["--session-id", &id],
        &env(&server.http_url(), OPENCLAW_TOKEN),
    ));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});

    // A call whose client asked for warnings: the app's warning arrives
    // before the result, its debug record not at all.
    let mut with_level = meta.clone();
    with_level["io.modelcontextprotocol/logLevel"] = json!("warning");
    relay
        .send(request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {}, "_meta": with_level}),
        ))
        .await;
    let frame = app.next_json().await.expect("invoke");
    for level in ["debug", "warning"] {
        app.send_json(
            json!({"type": "log", "request_id": frame["request_id"], "level": level,
                             "data": level}),
        )
        .await;
    }
    app.send_json(json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": "done"}))
        .await;
    let logged = relay.recv().await;
    assert_eq!(logged["method"], "notifications/message", "{logged}");
    assert_eq!(logged["params"]["level"], "warning");
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 2, "{reply}");

    // A 2026-07-28 subscription held open through the relay.
    relay
        .send(request(
            3,
            "subscriptions/listen",
            json!({"_meta": meta, "notifications": {"resourceSubscriptions": ["notes://a"]}}),
        ))
        .await;
    let acknowledged = relay.recv().await;
    assert_eq!(
        acknowledged["method"], "notifications/subscriptions/acknowledged",
        "{acknowledged}"
    );
    app.send_json(json!({"type": "resource_updated", "uri": "notes://a"}))
        .await;
    let updated = relay.recv().await;
    assert_eq!(
        updated["method"], "notifications/resources/updated",
        "{updated}"
    );
    assert_eq!(updated["params"]["uri"], "notes://a");
}

/// The default build relays to a proxy behind TLS (here a terminator in
/// front of the real server, trusted through `SSL_CERT_FILE`): initialize,
/// list and a call answered by the app all cross the handshake.
#[cfg(feature = "https")]
#[tokio::test]
async fn a_proxy_behind_tls_is_relayed_by_the_default_build() {
    let server = TestServer::start().await;
    let (id, mut app) = manual_session(&server).await;
    let authority = crate::tls::TestCa::new("relay");
    let url = authority.terminate(server.addr).await;
    let ca = authority.ca_file();
    let mut env = env(&url, OPENCLAW_TOKEN);
    env.push(("SSL_CERT_FILE", &ca));
    let mut relay = RawChild::spawn(command(&[], &env));

    let reply = handshake(&mut relay, initialize(1, Some(&id))).await;
    assert_eq!(
        reply["result"]["serverInfo"]["name"], "openclaw-proxy",
        "{reply}"
    );
    relay.send(request(2, "tools/list", json!({}))).await;
    let reply = relay.recv().await;
    assert_eq!(reply["result"]["tools"][0]["name"], "echo_text", "{reply}");
    relay
        .send(request(
            3,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "over TLS"}}),
        ))
        .await;
    let frame = answer(&mut app, json!({"echo": "over TLS"})).await;
    assert_eq!(frame["arguments"]["text"], "over TLS");
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 3);
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    assert!(
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("over TLS"),
        "{reply}"
    );
    relay.finish().await;
}

/// An app that asks the user mid-call: the server's `elicitation/create`
/// reaches the stdio client on stdout, the client's response on stdin goes
/// back to the server and on to the app, and the call then ends with the
/// app's answer. The app sees the user's answer as the client wrote it.
#[tokio::test]
async fn a_request_from_the_app_reaches_the_client_and_its_response_the_app() {
    let server = TestServer::start().await;
    let (id, mut app) = manual_session(&server).await;
    let url = server.http_url();
    let mut relay = RawChild::spawn(command(&[], &env(&url, OPENCLAW_TOKEN)));
    let mut hello = initialize(1, Some(&id));
    hello["params"]["capabilities"] = json!({"elicitation": {"form": {}}});
    assert_eq!(handshake(&mut relay, hello).await["id"], 1);

    relay
        .send(request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "delete"}}),
        ))
        .await;
    let invoke = app.next_json().await.expect("invoke_tool");
    let call = invoke["request_id"].clone();
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
    app.send_json(
        json!({"type": "client_request", "request_id": call, "id": "confirm-1",
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Really delete?", "requestedSchema": schema}}),
    )
    .await;

    let asked = relay.recv().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Really delete?", "{asked}");
    assert!(!asked["id"].is_null(), "a request has an id: {asked}");
    relay
        .send(json!({"jsonrpc": "2.0", "id": asked["id"],
            "result": {"action": "accept", "content": {"ok": true}}}))
        .await;

    let answered = app.next_json().await.expect("client_response");
    assert_eq!(answered["type"], "client_response", "{answered}");
    assert_eq!(answered["id"], "confirm-1", "{answered}");
    assert_eq!(
        answered["result"],
        json!({"action": "accept", "content": {"ok": true}})
    );
    app.send_json(
        json!({"type": "invoke_result", "request_id": call, "ok": true,
        "content": {"deleted": true}}),
    )
    .await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 2, "{reply}");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    relay.finish().await;
}

#[tokio::test]
async fn an_oauth_access_token_is_the_relays_bearer_and_its_user_the_caller() {
    let issuer = TestIssuer::start().await;
    let server = TestServer::builder()
        .oauth(openclaw_proxy_edge::oauth::OAuthSettings::new(
            issuer.url.clone(),
        ))
        .start()
        .await;
    let mut body = legacy_session_body();
    body["owner"] = json!({"subject": "alice"});
    let session = server.rest().register(&body).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    wait_for_bridge(&server, &session.id).await;
    let url = server.http_url();
    let alice = issuer.token("alice", &format!("{url}/v1/mcp"));
    let mut relay = RawChild::spawn(command(&[], &env(&url, &alice)));

    relay.send(initialize(1, Some(&session.id))).await;
    assert_eq!(
        relay.recv().await["result"]["protocolVersion"],
        "2025-11-25"
    );
    relay
        .send(request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "hi"}}),
        ))
        .await;
    let frame = answer(&mut app, json!({"echoed_text": "hi"})).await;
    assert_eq!(frame["caller"]["kind"], "oauth", "{frame}");
    assert_eq!(frame["caller"]["subject"], "alice", "{frame}");
    let reply = relay.recv().await;
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"echoed_text": "hi"}),
        "{reply}"
    );
    let (status, rest) = relay.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(rest.is_empty(), "{rest:?}");
}
