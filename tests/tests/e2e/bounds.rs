//! What a client holds that it does not use: connections with nothing open
//! and streams that say nothing are closed after
//! `OPENCLAW_PROXY_CONNECTION_IDLE_TIMEOUT_SECONDS`, so no credential-less
//! client can keep the connection slots.

use std::time::Duration;

use openclaw_proxy_tests::*;

/// An HTTP/2 connection whose client task answers the server's pings for as
/// long as it runs; the task ends when the server closes the connection.
async fn h2_connection(
    server: &TestServer,
) -> (
    h2::client::SendRequest<bytes::Bytes>,
    tokio::task::JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (sender, connection) = h2::client::handshake(tcp).await.expect("handshake");
    (sender, tokio::spawn(connection))
}

async fn ready_status(server: &TestServer) -> u16 {
    no_hang(server.rest().ready()).await.status().as_u16()
}

#[tokio::test]
async fn idle_http2_connections_and_silent_reflection_streams_give_their_slots_back() {
    let server = TestServer::builder()
        .edge(|edge| {
            edge.connections.max_connections = 2;
            edge.connections.idle_timeout = Duration::from_millis(500);
        })
        .start()
        .await;
    // The preface and SETTINGS, pings answered, no stream.
    let (_idle_sender, idle) = h2_connection(&server).await;
    // A reflection stream that never sends its message.
    let (sender, reflecting) = h2_connection(&server).await;
    let mut sender = no_hang(sender.ready()).await.expect("a stream");
    let request = axum::http::Request::post(format!(
        "http://{}/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        server.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(())
    .expect("a request");
    let (response, _body) = sender.send_request(request, false).expect("sent");
    // Both slots are taken meanwhile: a third connection is told so.
    assert_eq!(ready_status(&server).await, 429);
    // The server closes both; the client tasks see their connections end.
    no_hang(idle)
        .await
        .expect("join")
        .expect("an idle connection is closed without an error");
    let response = no_hang(response)
        .await
        .expect("the reflection answer's head");
    assert_eq!(response.status(), 200);
    let _ = no_hang(reflecting).await.expect("join");
    // Their slots are free again.
    assert_eq!(ready_status(&server).await, 200);
}

#[tokio::test]
async fn a_quiet_bridge_keeps_its_connection_past_the_idle_timeout() {
    let server = TestServer::builder()
        .edge(|edge| edge.connections.idle_timeout = Duration::from_millis(300))
        .start()
        .await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let _bridge = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("bridge");
    server
        .wait_for_session(&session.id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    // Several idle timeouts with nothing sent: the bridge's stream is open,
    // so its connection is not idle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let request = openclaw_proxy_core::proto::GetSessionRequest {
        session_id: session.id.clone(),
    };
    let listed = server.hub.get_session(request).await.expect("the session");
    assert!(listed.bridge_connected, "the bridge is still attached");
}

/// A `subscriptions/listen` request for these resources.
fn listen_request(mcp_url: &str, resources: &[String]) -> openclaw_proxy_tests::rest::RawRequest {
    let meta = serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let listen = serde_json::json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                        "params": {"_meta": meta, "notifications": {
                            "resourceSubscriptions": resources}}});
    mcp_post(mcp_url, &listen)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .header("accept", "application/json, text/event-stream")
}

/// Opens a listen stream; the stream, held open, and its acknowledgement.
async fn listen(mcp_url: &str, resources: &[String]) -> (reqwest::Response, serde_json::Value) {
    let mut stream = listen_request(mcp_url, resources).send_streaming().await;
    assert_eq!(stream.status(), 200);
    let mut text = String::new();
    loop {
        let chunk = no_hang(stream.chunk())
            .await
            .expect("the listen stream")
            .expect("a chunk before the stream ends");
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(first) = openclaw_proxy_tests::mcp_client::sse_messages(&text)
            .into_iter()
            .next()
        {
            assert_eq!(
                first["method"], "notifications/subscriptions/acknowledged",
                "{first}"
            );
            return (stream, first);
        }
    }
}

#[tokio::test]
async fn listen_streams_keep_only_served_uris_within_their_bytes_and_number() {
    let server = TestServer::builder()
        .edge(|edge| {
            edge.listen.streams_per_session = 2;
            edge.listen.uri_bytes = 1024;
        })
        .start()
        .await;
    let mut body = legacy_session_body();
    body["resources"] = serde_json::json!([{"uri": "notes:///7", "name": "seven"}]);
    body["resourceTemplates"] =
        serde_json::json!([{"uriTemplate": "notes:///{id}", "name": "note"}]);
    let session = server.rest().register(&body).await;
    let named: Vec<String> = ["notes:///7", "other:///x", "notes:///7", "notes:///abc"]
        .map(String::from)
        .to_vec();
    // Only what the session serves is kept, each once; the acknowledgement
    // says so.
    let (first, ack) = listen(&session.mcp_url, &named).await;
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        serde_json::json!(["notes:///7", "notes:///abc"]),
        "{ack}"
    );
    let (_second, _) = listen(&session.mcp_url, &named).await;
    // A third stream of the same session is refused, naming the setting.
    let refused = no_hang(listen_request(&session.mcp_url, &named).send()).await;
    let error = refused.json();
    assert!(
        error["error"]["message"].as_str().is_some_and(
            |message| message.contains("OPENCLAW_PROXY_MAX_LISTEN_STREAMS_PER_SESSION")
        ),
        "{error}"
    );
    // A stream closed makes room, but not for more URI bytes than a stream
    // may keep (each matches the template).
    drop(first);
    let many: Vec<String> = (0..100).map(|n| format!("notes:///{n:020}")).collect();
    eventually(
        "a closed listen stream's room",
        std::time::Duration::from_secs(10),
        || async {
            let refused = listen_request(&session.mcp_url, &many).send().await.json();
            refused["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("OPENCLAW_PROXY_MAX_LISTEN_URI_BYTES"))
        },
    )
    .await;
    let (_third, _) = listen(&session.mcp_url, &many[..10]).await;
}

#[tokio::test]
async fn with_every_legacy_stream_taken_a_newcomer_still_gets_its_share() {
    use openclaw_proxy_tests::listening::{Open, open_request};
    let server = TestServer::builder()
        .edge(|edge| {
            edge.legacy.streams_per_client = 3;
            edge.legacy.max_streams = 4;
        })
        // Behind a trusted proxy, each client is the address it forwards.
        .core(|core| core.limits.trusted_proxies = vec!["127.0.0.0/8".parse().expect("range")])
        .start()
        .await;
    let session = TestSession::legacy(&server).await;
    let open = |client: &str| {
        open_request(&server.http_url(), &session.id, Open::Path)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("x-forwarded-for", client)
            .send_streaming()
    };
    // One client holds three streams, another one: every slot is taken.
    let mut greedy = Vec::new();
    for _ in 0..3 {
        let stream = open("203.0.113.7").await;
        assert_eq!(stream.status(), 200);
        greedy.push(stream);
    }
    let modest = open("198.51.100.2").await;
    assert_eq!(modest.status(), 200);
    // A third client gets a stream: the largest holder's oldest is closed.
    let newcomer = open("192.0.2.9").await;
    assert_eq!(newcomer.status(), 200);
    let mut oldest = greedy.remove(0);
    // Bounded as a whole: an open stream sends keep-alives for ever.
    no_hang(async { while let Ok(Some(_)) = oldest.chunk().await {} }).await;
    // Past its share (as many as the largest holder), it is refused, and
    // told which setting.
    let refused = open("192.0.2.9").await;
    assert_eq!(refused.status(), 429);
    let body: serde_json::Value = refused.json().await.expect("a JSON-RPC error");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("OPENCLAW_PROXY_LEGACY_SSE_MAX_STREAMS")),
        "{body}"
    );
    drop((modest, newcomer, greedy));
}

#[tokio::test]
async fn a_connection_holding_more_unsent_than_its_limit_is_closed_before_the_write_timeout() {
    let server = TestServer::builder()
        .edge(|edge| {
            // The write timeout alone would wait ten minutes.
            edge.connections.response_write_timeout = Duration::from_secs(600);
            edge.connections.max_unsent_bytes_per_connection = 512 * 1024;
        })
        .start()
        .await;
    let body = format!(
        r#"{{"device_id":"d","app_version":"1","tools":[{{"name":"wide","input_schema":{}}}]}}"#,
        openclaw_proxy_tests::exhaustion::wide_schema(10_000, 0)
    );
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let session = TestSession::register(&server, &body).await;
    let tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    // A window of 0: the server may send heads, never a byte of a body.
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .expect("handshake");
    let connection = tokio::spawn(connection);
    let mut sender = no_hang(sender.ready()).await.expect("a stream");
    // Four answers of about 280 kB: over the limit together.
    let mut heads = Vec::new();
    for _ in 0..4 {
        let request = axum::http::Request::post(&session.mcp_url)
            .header("authorization", format!("Bearer {OPENCLAW_TOKEN}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(())
            .expect("a request");
        let (response, mut body) = sender.send_request(request, false).expect("sent");
        body.send_data(
            bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            true,
        )
        .expect("body sent");
        heads.push(response);
    }
    // Answering pings, reading nothing: the server closes the connection
    // (within no_hang's 30 s, long before the 600 s write timeout).
    let _ = no_hang(connection).await.expect("join");
    drop(heads);
    assert_eq!(no_hang(server.rest().health()).await.status(), 200);
}

/// Starts a 2026-07-28 call of `echo_text` on `session` whose app asks an
/// `elicitation/create` with a message of `size` bytes; the answer.
async fn parked_call(session: &TestSession, app: &mut WsApp, size: usize) -> serde_json::Value {
    let call = ToolsCall2026 {
        tool: "echo_text",
        arguments: serde_json::json!({"text": "ask"}),
        client_info: None,
    };
    let elicits = serde_json::json!({"elicitation": {}});
    let answer = tokio::spawn(
        call.post(&session.mcp_url, &elicits, &serde_json::json!({}))
            .send(),
    );
    // Frames about earlier calls (their cancellation) are passed over.
    let invoke = loop {
        let frame = no_hang(app.next_json()).await.expect("invoke_tool");
        if frame["type"] == "invoke_tool" {
            break frame;
        }
    };
    app.send_json(serde_json::json!({"type": "client_request",
        "request_id": invoke["request_id"], "id": "confirm",
        "method": "elicitation/create",
        "params": {"message": "x".repeat(size),
                   "requestedSchema": {"type": "object", "properties": {}}}}))
        .await;
    no_hang(answer).await.expect("the answer").json()
}

fn is_parked(answer: &serde_json::Value) -> bool {
    answer["result"]["resultType"] == "input_required"
}

fn refusal_names(answer: &serde_json::Value, setting: &str) -> bool {
    answer["error"]["message"]
        .as_str()
        .is_some_and(|message| message.contains(setting))
}

#[tokio::test]
async fn parked_calls_are_bounded_in_bytes_per_session_and_no_session_takes_the_pool() {
    let server = TestServer::builder()
        .edge(|edge| {
            edge.parked.calls = 2;
            edge.parked.bytes_per_session = 64 * 1024;
        })
        .start()
        .await;
    // One session's waiting calls keep at most 64 KiB of the app's requests.
    let heavy = TestSession::legacy(&server).await;
    let mut heavy_app = WsApp::attached(&server, &heavy).await;
    let first = parked_call(&heavy, &mut heavy_app, 40 * 1024).await;
    assert!(is_parked(&first), "{first}");
    let second = parked_call(&heavy, &mut heavy_app, 40 * 1024).await;
    assert!(
        refusal_names(&second, "OPENCLAW_PROXY_MAX_PARKED_BYTES_PER_SESSION"),
        "{second}"
    );
    // The pool (two calls here) is full once the session parks a small one.
    let small = parked_call(&heavy, &mut heavy_app, 10).await;
    assert!(is_parked(&small), "{small}");
    // Another session still parks its call: the largest holder's oldest
    // makes room.
    let other = TestSession::legacy(&server).await;
    let mut other_app = WsApp::attached(&server, &other).await;
    let theirs = parked_call(&other, &mut other_app, 10).await;
    assert!(is_parked(&theirs), "{theirs}");
    // Holding as many as anyone, it is refused, naming the setting.
    let more = parked_call(&other, &mut other_app, 10).await;
    assert!(
        refusal_names(&more, "OPENCLAW_PROXY_MAX_PARKED_CALLS"),
        "{more}"
    );
}

#[tokio::test]
async fn a_websocket_app_that_leaves_a_fragmented_message_unfinished_is_dropped_with_4408() {
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let server = TestServer::builder()
        .core(|core| core.ping_interval = Duration::from_millis(100))
        .start()
        .await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("connect");
    // Pong frames alone (the socket answers ping frames by itself) keep a
    // bridge: ten intervals pass.
    let mut pings = 0;
    while pings < 10 {
        match no_hang(app.next_event()).await {
            WsEvent::PingFrame => pings += 1,
            WsEvent::Json(frame) => assert_eq!(frame["type"], "ping", "{frame}"),
            other => panic!("the bridge ended while answering pings: {other:?}"),
        }
    }
    // The first fragment of a text message, never the last; pings are
    // still answered with pong frames.
    let first = Frame::message(
        b"{\"type\":\"pong\",\"padding\":\"".to_vec(),
        OpCode::Data(Data::Text),
        false,
    );
    app.send(Message::Frame(first)).await;
    // Bounded as a whole: a server that took the pongs for life would
    // ping for ever.
    let closed = no_hang(async {
        loop {
            match app.next_event().await {
                WsEvent::PingFrame | WsEvent::Json(_) => {}
                WsEvent::Closed(code, reason) => break (code, reason),
                WsEvent::Ended => panic!("ended without a close frame"),
            }
        }
    })
    .await;
    assert_eq!(closed.0, 4408, "{closed:?}");
}
