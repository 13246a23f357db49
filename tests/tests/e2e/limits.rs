//! Limits and timeouts that keep a client from holding the server's
//! resources: each is a setting, and each ends with a status that names it.

use std::time::Duration;

use openclaw_proxy_core::proto::{self, bridge_service_client::BridgeServiceClient};
use openclaw_proxy_tests::*;

#[tokio::test]
async fn a_grpc_bridge_that_never_says_hello_is_ended() {
    let server = TestServer::builder()
        .core(|core| core.hello_timeout = Duration::from_millis(300))
        .start()
        .await;
    let mut bridges = BridgeServiceClient::new(server.channel().await);
    let silent = futures_util::stream::pending::<proto::AppMessage>();
    let status = no_hang(bridges.attach(with_token(silent, APP_TOKEN)))
        .await
        .expect_err("no hello, no bridge");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    assert!(
        status
            .message()
            .contains("OPENCLAW_PROXY_HELLO_TIMEOUT_SECONDS"),
        "{}",
        status.message()
    );
}

#[tokio::test]
async fn one_connection_carries_hundreds_of_bridges() {
    // hyper's own limit is 200 streams per HTTP/2 connection; a backend app
    // multiplexing its sessions' bridges needs more.
    const BRIDGES: usize = 300;
    let server = TestServer::start().await;
    let channel = server.channel().await;
    let mut ids = Vec::with_capacity(BRIDGES);
    let mut sessions = server.sessions().await;
    for _ in 0..BRIDGES {
        ids.push(
            sessions
                .create(vec![tool("echo_text", "")])
                .await
                .expect("create")
                .id,
        );
    }
    let mut bridges = Vec::with_capacity(BRIDGES);
    for id in &ids {
        let bridge = no_hang(GrpcBridge::open(channel.clone(), APP_TOKEN, id))
            .await
            .expect("attached on the shared connection");
        bridges.push(bridge);
    }
    assert_eq!(bridges.len(), BRIDGES);
}

/// A POST of a session body over REST, with extra headers; the raw response.
async fn post_session(
    server: &TestServer,
    body: &serde_json::Value,
    headers: &[(&str, &str)],
) -> Reply {
    let mut request = server.rest().post("/v1/chat/sessions").json(body);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    no_hang(request.send()).await
}

/// Asserts a 429 whose JSON error names `setting`.
fn assert_limited(response: Reply, setting: &str) {
    assert_eq!(response.status(), 429);
    let body = response.json();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(setting), "{body}");
}

fn tools_json(count: usize) -> serde_json::Value {
    serde_json::Value::Array(
        (0..count)
            .map(|n| serde_json::json!({"name": format!("tool_{n}")}))
            .collect(),
    )
}

#[tokio::test]
async fn sessions_past_the_limit_are_refused_on_both_surfaces_until_one_is_deleted() {
    let server = TestServer::builder()
        .core(|core| core.limits.max_sessions = 2)
        .start()
        .await;
    let first = TestSession::legacy(&server).await;
    TestSession::legacy(&server).await;
    let refused = post_session(&server, &legacy_session_body(), &[]).await;
    assert_limited(refused, "OPENCLAW_PROXY_MAX_SESSIONS");
    let status = server
        .sessions()
        .await
        .create(vec![tool("echo_text", "")])
        .await
        .expect_err("gRPC too");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().contains("OPENCLAW_PROXY_MAX_SESSIONS"));
    // The server still serves, and a deletion makes room.
    assert!(
        server
            .sessions()
            .await
            .delete(&first.id)
            .await
            .expect("delete")
    );
    TestSession::legacy(&server).await;
}

#[tokio::test]
async fn tools_past_their_count_or_size_are_refused_at_creation_and_update() {
    let server = TestServer::builder()
        .core(|core| {
            core.limits.max_tools_per_session = 3;
            core.limits.max_tool_definition_bytes = 2000;
        })
        .start()
        .await;
    let mut body = legacy_session_body();
    body["tools"] = tools_json(4);
    let refused = post_session(&server, &body, &[]).await;
    assert_limited(refused, "OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION");
    body["tools"] = serde_json::json!([{"name": "big", "description": "x".repeat(3000)}]);
    let refused = post_session(&server, &body, &[]).await;
    assert_limited(refused, "OPENCLAW_PROXY_MAX_TOOL_DEFINITION_BYTES");

    let session = TestSession::legacy(&server).await;
    let update = serde_json::json!({"tools": tools_json(5)});
    let refused = no_hang(server.rest().put_tools(&session.id, &update)).await;
    assert_limited(refused, "OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION");
    let mut sessions = server.sessions().await;
    let grpc = sessions
        .create((0..4).map(|n| tool(&format!("t{n}"), "")).collect())
        .await
        .expect_err("gRPC creation");
    assert_eq!(grpc.code(), tonic::Code::ResourceExhausted);
    // Within the limits, the session still works and updates.
    let update = serde_json::json!({"tools": tools_json(3)});
    let updated = no_hang(server.rest().put_tools(&session.id, &update)).await;
    assert_eq!(updated.status(), 200);
}

#[tokio::test]
async fn tool_definitions_are_bounded_in_all_and_shared_sets_count_once() {
    // Room for two distinct sets of about 30 KB.
    let server = TestServer::builder()
        .core(|core| core.limits.max_total_tool_definition_bytes = 70_000)
        .start()
        .await;
    let body = |salt: usize| {
        let schema = openclaw_proxy_tests::exhaustion::wide_schema(1_200, salt);
        let mut body = legacy_session_body();
        body["tools"] = serde_json::json!([{"name": "wide",
            "input_schema": serde_json::from_str::<serde_json::Value>(&schema).expect("JSON")}]);
        body
    };
    let first = TestSession::register(&server, &body(1)).await;
    let second = TestSession::register(&server, &body(2)).await;
    let refused = post_session(&server, &body(3), &[]).await;
    assert_limited(refused, "OPENCLAW_PROXY_MAX_TOTAL_TOOL_DEFINITION_BYTES");
    // A set the server holds already is shared, not added.
    TestSession::register(&server, &body(1)).await;
    // A tool update past the limit is refused as well.
    let update = serde_json::json!({"tools": body(3)["tools"]});
    let refused = no_hang(server.rest().put_tools(&first.id, &update)).await;
    assert_limited(refused, "OPENCLAW_PROXY_MAX_TOTAL_TOOL_DEFINITION_BYTES");
    // Deleting the one session that holds a set makes room for another.
    let mut sessions = server.sessions().await;
    assert!(sessions.delete(&second.id).await.expect("delete"));
    TestSession::register(&server, &body(3)).await;
}

#[tokio::test]
async fn session_creation_is_rate_limited_per_client_address() {
    let limited = TestServer::builder()
        .core(|core| core.limits.session_create_rate = Some("1/2".parse().expect("rate")));
    let server = limited.clone().start().await;
    for _ in 0..2 {
        TestSession::legacy(&server).await;
    }
    let refused = post_session(&server, &legacy_session_body(), &[]).await;
    assert!(refused.headers().contains_key("retry-after"), "{refused:?}");
    assert_limited(refused, "OPENCLAW_PROXY_SESSION_CREATE_RATE");
    // A client cannot escape by claiming another address...
    let spoofed = post_session(
        &server,
        &legacy_session_body(),
        &[("x-forwarded-for", "198.51.100.1")],
    )
    .await;
    assert_limited(spoofed, "OPENCLAW_PROXY_SESSION_CREATE_RATE");
    // ...and gRPC counts against the same bucket.
    let status = server
        .sessions()
        .await
        .create(vec![tool("echo_text", "")])
        .await
        .expect_err("same address over gRPC");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);

    // Behind a trusted proxy, each forwarded client has its own bucket.
    let proxied = limited
        .core(|core| core.limits.trusted_proxies = vec!["127.0.0.0/8".parse().expect("range")])
        .start()
        .await;
    for _ in 0..2 {
        let created = post_session(
            &proxied,
            &legacy_session_body(),
            &[("x-forwarded-for", "198.51.100.1")],
        )
        .await;
        assert_eq!(created.status(), 200);
    }
    let refused = post_session(
        &proxied,
        &legacy_session_body(),
        &[("x-forwarded-for", "198.51.100.1")],
    )
    .await;
    assert_limited(refused, "OPENCLAW_PROXY_SESSION_CREATE_RATE");
    let other = post_session(
        &proxied,
        &legacy_session_body(),
        &[("x-forwarded-for", "198.51.100.2")],
    )
    .await;
    assert_eq!(other.status(), 200, "another client behind the proxy");
}

#[tokio::test]
async fn calls_past_the_session_limit_get_an_mcp_error_naming_the_setting() {
    let server = TestServer::builder()
        .core(|core| core.limits.max_calls_per_session = 1)
        .start()
        .await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("bridge");
    let held = server.spawn_invoke(&session.id, "echo_text", serde_json::json!({}));
    let invoke = no_hang(app.next_invoke()).await;
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;
    let refused = no_hang(client.call_tool(call("echo_text", serde_json::json!({}))))
        .await
        .expect("an MCP answer");
    assert_eq!(refused.is_error, Some(true));
    let text = texts(&refused).join(" ");
    assert!(
        text.contains("OPENCLAW_PROXY_MAX_CALLS_PER_SESSION"),
        "{text}"
    );
    // The held call finishes; the next one goes through.
    app.answer(&invoke.request_id, true, "\"done\"", "").await;
    no_hang(held).await.expect("join").expect("answered");
    let app = app.serve_echo();
    let answered =
        no_hang(client.call_tool(call("echo_text", serde_json::json!({"text": "again"}))))
            .await
            .expect("an MCP answer");
    assert_ne!(answered.is_error, Some(true), "{answered:?}");
    drop(app);
}

/// Sends one HTTP/1.1 request on `stream` and returns the response head and
/// body (read up to the blank line and `Content-Length`).
async fn http1_exchange(stream: &mut tokio::net::TcpStream, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut received = Vec::new();
    let mut buffer = [0_u8; 4096];
    loop {
        let read = no_hang(stream.read(&mut buffer)).await.expect("read");
        if read == 0 {
            break;
        }
        received.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&received);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= length {
                break;
            }
        }
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// Reads until the server closes the connection; returns what it sent.
async fn until_closed(stream: &mut tokio::net::TcpStream) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let mut received = Vec::new();
    // An error (a reset) is a close too.
    let _ = no_hang(stream.read_to_end(&mut received)).await;
    received
}

#[tokio::test]
async fn connections_past_the_limit_are_answered_429_and_closed() {
    let server = TestServer::builder()
        .edge(|edge| edge.connections.max_connections = 2)
        .start()
        .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        let response = http1_exchange(&mut stream, "/health").await;
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        held.push(stream);
    }
    let mut third = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let response = http1_exchange(&mut third, "/health").await;
    assert!(response.starts_with("HTTP/1.1 429"), "{response}");
    assert!(
        response.contains("OPENCLAW_PROXY_MAX_CONNECTIONS"),
        "{response}"
    );
    assert!(
        until_closed(&mut third).await.is_empty(),
        "closed after the answer"
    );
    // gRPC on a new connection is told in its own terms.
    let status = server
        .sessions()
        .await
        .create(vec![tool("echo_text", "")])
        .await
        .expect_err("over the limit");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("OPENCLAW_PROXY_MAX_CONNECTIONS"));
    // A closed connection makes room.
    drop(held.pop());
    eventually(
        "a freed connection slot",
        Duration::from_secs(10),
        || async {
            let Ok(mut stream) = tokio::net::TcpStream::connect(server.addr).await else {
                return false;
            };
            http1_exchange(&mut stream, "/health")
                .await
                .starts_with("HTTP/1.1 200")
        },
    )
    .await;
}

#[tokio::test]
async fn stalled_and_idle_clients_are_disconnected() {
    use tokio::io::AsyncWriteExt;
    let server = TestServer::builder()
        .edge(|edge| edge.connections.header_read_timeout = Duration::from_millis(500))
        .start()
        .await;
    // Slowloris: half a request header, then nothing.
    let mut half = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    half.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .expect("write");
    until_closed(&mut half).await;
    // A client that never sends a byte.
    let mut silent = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    assert!(until_closed(&mut silent).await.is_empty());
    // Clients that send part of the HTTP/2 preface, then nothing: the
    // protocol is never told, and the timeout still closes them.
    for prefix in [&b"P"[..], b"PRI * HTTP/2.0\r\n"] {
        let mut partial = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        partial.write_all(prefix).await.expect("write");
        assert!(until_closed(&mut partial).await.is_empty());
    }
    // An idle keep-alive connection after a complete exchange.
    let mut idle = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let response = http1_exchange(&mut idle, "/health").await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(until_closed(&mut idle).await.is_empty());
    // The server goes on serving.
    let mut fresh = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    assert!(
        http1_exchange(&mut fresh, "/health")
            .await
            .starts_with("HTTP/1.1 200")
    );
}

#[tokio::test]
async fn an_app_that_stops_reading_is_dropped_and_its_calls_fail_at_once() {
    for bridge in BridgeKind::BOTH {
        let server = TestServer::builder()
            .core(|core| core.bridge_write_timeout = Duration::from_millis(500))
            .edge(|edge| edge.connections.write_timeout = Duration::from_millis(500))
            .start()
            .await;
        // The app attaches and then reads nothing more.
        let (session, _app): (TestSession, Box<dyn std::any::Any + Send>) = match bridge {
            BridgeKind::Ws => {
                let session = TestSession::legacy(&server).await;
                let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
                    .await
                    .expect("bridge");
                (session, Box::new(app))
            }
            BridgeKind::Grpc => {
                let session =
                    TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
                let app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
                    .await
                    .expect("bridge");
                (session, Box::new(app))
            }
        };
        server
            .wait_for_session(&session.id, "the bridge attaching", |session| {
                session.bridge_connected
            })
            .await;
        // Far more than socket and HTTP/2 buffers hold.
        let text = "x".repeat(512 * 1024);
        let calls: Vec<_> = (0..40)
            .map(|_| {
                server.spawn_invoke(&session.id, "echo_text", serde_json::json!({"text": text}))
            })
            .collect();
        for call in calls {
            let error = no_hang(call)
                .await
                .expect("join")
                .expect_err("never answered");
            // The caller learns why, in the words docs/configuration.md
            // promises, not that the bridge "disconnected".
            assert!(
                matches!(
                    error,
                    openclaw_proxy_core::InvokeError::BridgeEnded(
                        openclaw_proxy_core::BridgeEnd::Stalled
                    )
                ),
                "{}: {error}",
                bridge.name()
            );
            assert_eq!(
                error.to_string(),
                "The app stopped reading its bridge, which was dropped before the tool answered."
            );
        }
        // The session survives its bridge, ready for a new one.
        server
            .wait_for_session(&session.id, "the bridge detaching", |session| {
                !session.bridge_connected
            })
            .await;
    }
}

#[tokio::test]
async fn an_http2_peer_that_stops_answering_pings_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TestServer::builder()
        .edge(|edge| edge.connections.http2_keepalive = Duration::from_millis(300))
        .start()
        .await;
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    // The HTTP/2 preface and an empty SETTINGS frame, then the
    // acknowledgement of the server's SETTINGS once they arrive; never a
    // PING acknowledgement.
    const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
    const SETTINGS_ACK: [u8; 9] = [0, 0, 0, 4, 1, 0, 0, 0, 0];
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .expect("preface");
    stream.write_all(&SETTINGS).await.expect("settings");
    let mut first = [0_u8; 9];
    no_hang(stream.read_exact(&mut first))
        .await
        .expect("the server's first frame");
    assert_eq!(first[3], 4, "the server opens with SETTINGS");
    let length = usize::from(first[0]) << 16 | usize::from(first[1]) << 8 | usize::from(first[2]);
    let mut payload = vec![0_u8; length];
    no_hang(stream.read_exact(&mut payload))
        .await
        .expect("the server's SETTINGS");
    stream.write_all(&SETTINGS_ACK).await.expect("settings ack");
    // The server pings, gets no answer, and closes the connection.
    let mut rest = Vec::new();
    let _ = no_hang(stream.read_to_end(&mut rest)).await;
    // Among what it sent before closing: a PING frame (type 6).
    let mut frames = rest.as_slice();
    let mut pinged = false;
    while frames.len() >= 9 {
        let length =
            usize::from(frames[0]) << 16 | usize::from(frames[1]) << 8 | usize::from(frames[2]);
        pinged |= frames[3] == 6;
        frames = frames.get(9 + length..).unwrap_or_default();
    }
    assert!(pinged, "the server pinged before closing: {rest:?}");
}
