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
    while let Ok(Some(_)) = no_hang(oldest.chunk()).await {}
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
