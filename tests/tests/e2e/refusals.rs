//! Refusals that must say what went wrong: a bridge dropped for a message
//! over the size limit tells its callers the limit (setting and value); a
//! WebSocket protocol violation closes with `1002` / `1007`, not `1000`; a
//! result frame the reader refuses as a whole (a duplicate key) still fails
//! the call it names at once, and the bridge stays up.
//!
//! A request head over the server's limits (its target, its header fields
//! in bytes or in number) is refused before any route with the JSON error of
//! every refusal (gRPC: `RESOURCE_EXHAUSTED`) naming the setting, on HTTP/1.1
//! and HTTP/2, and the connection serves on. An HTTP/1.1 head hyper cannot
//! read at all (not HTTP, a target over 65534 bytes, more fields than it
//! keeps) gets the same JSON error, and the connection closes.
//!
//! The WebSocket violations are written as raw frames on a raw TCP socket,
//! since no WebSocket library sends them; so are the HTTP/1.1 heads.

use openclaw_proxy_core::{BridgeEnd, InvokeError};
use openclaw_proxy_tests::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;

/// The test server's WebSocket message limit (`TestServer`'s
/// `max_body_bytes`).
const LIMIT: usize = 1024 * 1024;

fn assert_names_the_limit(error: &InvokeError, expected: usize, what: &str) {
    assert!(
        matches!(error, InvokeError::BridgeEnded(BridgeEnd::TooLarge { limit }) if *limit == expected),
        "{what}: {error:?}"
    );
    let sentence = error.to_string();
    assert!(
        sentence.contains("OPENCLAW_PROXY_MAX_BODY_BYTES")
            && sentence.contains(&expected.to_string()),
        "{what}: {sentence}"
    );
}

#[tokio::test]
async fn a_result_over_the_size_limit_fails_its_call_naming_the_limit() {
    let server = TestServer::start().await;
    // WebSocket: the app answers with a frame over the limit.
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::attached(&server, &session).await;
    let call = server.spawn_invoke(&session.id, "echo_text", json!({}));
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    let huge = "x".repeat(LIMIT + 1024);
    app.send_json(json!({
        "type": "invoke_result",
        "request_id": invoke["request_id"],
        "ok": true,
        "content": {"text": huge},
    }))
    .await;
    let error = no_hang(call).await.expect("join").expect_err("dropped");
    assert_names_the_limit(&error, LIMIT, "WebSocket");
    let (code, reason) = no_hang(app.closed()).await;
    assert_eq!(code, 1009, "{reason}");

    // gRPC: the same, as a ToolResult over the core's message limit.
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut bridge = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("bridge");
    let call = server.spawn_invoke(&session.id, "echo_text", json!({}));
    let invoke = no_hang(bridge.next_invoke()).await;
    let limit = server.hub.config().max_message_bytes;
    let content = json!({"text": "x".repeat(limit + 1024)}).to_string();
    bridge.answer(&invoke.request_id, true, &content, "").await;
    let error = no_hang(call).await.expect("join").expect_err("dropped");
    assert_names_the_limit(&error, limit, "gRPC");
}

/// Opens a WebSocket bridge on a raw socket: the handshake, and the socket
/// after its `101`.
async fn raw_bridge(server: &TestServer, session_id: &str) -> tokio::net::TcpStream {
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let handshake = format!(
        "GET /v1/chat/sessions/{session_id}/bridge HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer {APP_TOKEN}\r\n\r\n"
    );
    stream
        .write_all(handshake.as_bytes())
        .await
        .expect("handshake");
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0_u8];
        let read = no_hang(stream.read(&mut byte)).await.expect("read");
        assert_eq!(read, 1, "closed during the handshake: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    stream
}

/// A client frame: `first` (FIN, RSV bits, opcode), masked unless `masked`
/// is false.
fn client_frame(first: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let length = u8::try_from(payload.len()).expect("a short payload");
    assert!(length < 126);
    let mask = [0x12, 0x34, 0x56, 0x78];
    let mut frame = vec![first, if masked { 0x80 | length } else { length }];
    if masked {
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    } else {
        frame.extend_from_slice(payload);
    }
    frame
}

/// Reads server frames until a close frame; its code (0 when the socket
/// closed without one).
async fn close_code(stream: &mut tokio::net::TcpStream) -> u16 {
    let mut received = Vec::new();
    loop {
        // Parse what is in: server frames are unmasked.
        let mut at = 0;
        while received.len() >= at + 2 {
            let opcode = received[at] & 0x0f;
            let (length, start) = match received[at + 1] & 0x7f {
                126 if received.len() >= at + 4 => (
                    usize::from(u16::from_be_bytes([received[at + 2], received[at + 3]])),
                    at + 4,
                ),
                126 | 127 => break,
                short => (usize::from(short), at + 2),
            };
            if received.len() < start + length {
                break;
            }
            if opcode == 0x8 {
                return match received.get(start..start + 2) {
                    Some(code) => u16::from_be_bytes([code[0], code[1]]),
                    None => 1005,
                };
            }
            at = start + length;
        }
        let mut buffer = [0_u8; 4096];
        let read = no_hang(stream.read(&mut buffer)).await.unwrap_or(0);
        if read == 0 {
            return 0;
        }
        received.extend_from_slice(&buffer[..read]);
    }
}

#[tokio::test]
async fn websocket_protocol_violations_close_with_1002_or_1007() {
    let server = TestServer::start().await;
    let cases: [(&str, Vec<u8>, u16); 5] = [
        (
            "invalid UTF-8 text",
            client_frame(0x81, b"\xff\xfe", true),
            1007,
        ),
        (
            "an unmasked client frame",
            client_frame(0x81, b"{}", false),
            1002,
        ),
        ("RSV1 set", client_frame(0xC1, b"{}", true), 1002),
        (
            "reserved data opcode 3",
            client_frame(0x83, b"{}", true),
            1002,
        ),
        (
            "reserved control opcode 11",
            client_frame(0x8B, b"", true),
            1002,
        ),
    ];
    for (what, frame, expected) in cases {
        let session = TestSession::legacy(&server).await;
        let mut stream = raw_bridge(&server, &session.id).await;
        server
            .wait_for_session(&session.id, "the bridge attaching", |s| s.bridge_connected)
            .await;
        stream.write_all(&frame).await.expect("frame");
        assert_eq!(close_code(&mut stream).await, expected, "{what}");
    }
    // A well-behaved bridge still closes normally when it leaves.
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([{"name": "echo_text"}]),
        echo,
    )
    .await;
    let client = no_hang(mcp_connect(
        &server.http_url(),
        &app.session.id,
        Route::Path,
    ))
    .await;
    let result = no_hang(client.call_tool(call("echo_text", json!({"text": "ok"}))))
        .await
        .expect("tools/call");
    assert_eq!(result.structured_content, Some(json!({"text": "ok"})));
}

#[tokio::test]
async fn a_result_that_cannot_be_read_whole_fails_its_call_at_once_and_the_bridge_stays_up() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::attached(&server, &session).await;
    // Each frame names its call before it goes wrong: a key twice,
    // characters after the object, a number JSON does not allow, a raw
    // control character in a string.
    type FrameOf = fn(&str) -> String;
    let cases: [(FrameOf, &str); 4] = [
        (
            |id| {
                format!(
                    r#"{{"type":"invoke_result","request_id":"{id}","ok":true,"ok":false,"content":{{}}}}"#
                )
            },
            "duplicate field",
        ),
        (
            |id| {
                format!(
                    r#"{{"type":"invoke_result","request_id":"{id}","ok":true,"content":{{}}}} and more"#
                )
            },
            "trailing characters",
        ),
        (
            |id| {
                format!(
                    r#"{{"type":"invoke_result","request_id":"{id}","ok":true,"content":{{"n":01}}}}"#
                )
            },
            "malformed",
        ),
        (
            |id| {
                format!(
                    "{{\"type\":\"invoke_result\",\"request_id\":\"{id}\",\"ok\":true,\"content\":\"a\u{1}b\"}}"
                )
            },
            "control character",
        ),
    ];
    for (frame_of, word) in cases {
        let call = server.spawn_invoke(&session.id, "echo_text", json!({}));
        let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
        let request_id = invoke["request_id"]
            .as_str()
            .expect("request id")
            .to_owned();
        let frame = frame_of(&request_id);
        app.send(Message::Text(frame.clone().into())).await;
        // Well before the tool timeout (120 s): no_hang gives up after 30 s.
        let error = no_hang(call).await.expect("join").expect_err("malformed");
        let sentence = error.to_string();
        assert!(
            sentence.contains("malformed") && sentence.contains(word),
            "{frame}: {sentence}"
        );
        // The app is told.
        let notice = no_hang(app.next_json()).await.expect("the bridge stays up");
        assert_eq!(notice["type"], "error", "{frame}: {notice}");
    }
    // The bridge serves the next call.
    let call = server.spawn_invoke(&session.id, "echo_text", json!({"text": "again"}));
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    app.send_json(json!({
        "type": "invoke_result",
        "request_id": invoke["request_id"],
        "ok": true,
        "content": {"text": "again"},
    }))
    .await;
    let outcome = no_hang(call).await.expect("join").expect("answered");
    assert!(outcome.ok);
}

/// The test server's request head limits (the defaults).
const TARGET_LIMIT: usize = 8 * 1024;
const HEADER_BYTES_LIMIT: usize = 64 * 1024;
const HEADERS_LIMIT: usize = 50;

/// Reads one HTTP/1.1 answer from `stream`: its status line, its header
/// block (lower case) and its body, as long as `Content-Length` says.
async fn read_answer(stream: &mut tokio::net::TcpStream) -> (String, String, String) {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0_u8];
        let read = no_hang(stream.read(&mut byte)).await.unwrap_or(0);
        assert_eq!(read, 1, "closed before a whole answer: {head:?}");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let (status, headers) = head.split_once("\r\n").unwrap_or((&head, ""));
    let length: usize = headers
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0_u8; length];
    no_hang(stream.read_exact(&mut body))
        .await
        .expect("the body");
    (
        status.to_owned(),
        headers.to_owned(),
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// Asks `stream` for `/health` and asserts the answer is 200.
async fn assert_health_answers(stream: &mut tokio::net::TcpStream) {
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .expect("send");
    let (line, _, body) = read_answer(stream).await;
    assert!(line.starts_with("http/1.1 200"), "{line}: {body}");
}

/// Asserts a JSON refusal of a request head: its code, and a message that
/// names the setting and its value.
fn assert_head_refusal(
    answer: &(String, String, String),
    status: &str,
    code: &str,
    names: &[&str],
) {
    let (line, headers, body) = answer;
    assert!(line.starts_with(status), "{line}: {body}");
    assert!(
        headers.contains("content-type: application/json"),
        "{headers}"
    );
    let reply: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("{line}: not JSON: {body:?}"));
    assert_eq!(reply["error"]["code"], code, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    for name in names {
        assert!(message.contains(name), "{name} not in {message}");
    }
}

#[tokio::test]
async fn an_http1_head_over_the_limits_is_refused_in_json_naming_the_setting() {
    let server = TestServer::start().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");

    // A target just over the limit, on a keep-alive connection.
    let target = format!("/v1/chat/sessions/{}", "a".repeat(TARGET_LIMIT));
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {APP_TOKEN}\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    let answer = read_answer(&mut stream).await;
    assert_head_refusal(
        &answer,
        "http/1.1 414",
        "request_target_too_long",
        &["OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES", "8192"],
    );
    // The connection serves on.
    assert_health_answers(&mut stream).await;

    // Header fields over the limit in bytes, and in number, on an MCP post
    // with its body.
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |extra: String| {
        format!(
            "POST /v1/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {OPENCLAW_TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n{extra}\r\n{body}",
            body.len()
        )
    };
    let large = format!("X-Padding: {}\r\n", "p".repeat(HEADER_BYTES_LIMIT));
    let many: String = (0..=HEADERS_LIMIT)
        .map(|n| format!("X-Field-{n}: v\r\n"))
        .collect();
    for (extra, code, names) in [
        (
            large,
            "headers_too_large",
            ["OPENCLAW_PROXY_MAX_HEADER_BYTES", "65536"],
        ),
        (
            many,
            "too_many_headers",
            ["OPENCLAW_PROXY_MAX_HEADERS", "50"],
        ),
    ] {
        let mut stream = tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect");
        stream
            .write_all(post(extra).as_bytes())
            .await
            .expect("send");
        let answer = read_answer(&mut stream).await;
        assert_head_refusal(&answer, "http/1.1 431", code, &names);
    }

    // The server serves on, a new connection and a session's life.
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::attached(&server, &session).await;
    let call = server.spawn_invoke(&session.id, "echo_text", json!({"text": "hi"}));
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    app.send_json(json!({
        "type": "invoke_result",
        "request_id": invoke["request_id"],
        "ok": true,
        "content": {"text": "hi"},
    }))
    .await;
    no_hang(call).await.expect("join").expect("the call");
}

/// Asserts hyper's own refusal of a head it cannot take: the status, and
/// the connection closed after it.
async fn assert_closed_after(stream: &mut tokio::net::TcpStream, status: &str) {
    let (line, headers, body) = read_answer(stream).await;
    assert!(line.starts_with(status), "{line}: {headers} {body}");
    // Closed: the end of the stream, or a reset when the server closed with
    // the rest of the head unread.
    let mut rest = Vec::new();
    match no_hang(stream.read_to_end(&mut rest)).await {
        Ok(_) => assert!(rest.is_empty(), "{rest:?}"),
        Err(error) => assert_eq!(error.kind(), std::io::ErrorKind::ConnectionReset, "{error}"),
    }
}

#[tokio::test]
async fn an_http1_head_hyper_cannot_read_gets_hyper_s_refusal_and_the_connection_closes() {
    // Heads within about twice the limits get the server's JSON refusal
    // naming the setting (above); beyond that room, and for bytes that are
    // not HTTP, hyper answers itself, without a body, and closes the
    // connection, as linkerd and nginx do. Nothing else is disturbed.
    let server = TestServer::start().await;
    let connect = || async {
        tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect")
    };

    // Not HTTP, after a request served on the same connection.
    let mut stream = connect().await;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nHELLO\x01 there\r\n\r\n")
        .await
        .expect("send");
    let (line, _, body) = read_answer(&mut stream).await;
    assert!(line.starts_with("http/1.1 200"), "{line}: {body}");
    assert_closed_after(&mut stream, "http/1.1 400").await;

    // A target longer than HTTP/1.1 allows here, whatever the settings.
    let mut stream = connect().await;
    let request = format!(
        "GET /v1/chat/sessions/{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        "a".repeat(100_000)
    );
    stream.write_all(request.as_bytes()).await.expect("send");
    assert_closed_after(&mut stream, "http/1.1 414").await;

    // More header fields than hyper keeps (twice the limit, at least 100).
    let mut stream = connect().await;
    let fields: String = (0..150).map(|n| format!("X-Field-{n}: v\r\n")).collect();
    let request = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    assert_closed_after(&mut stream, "http/1.1 431").await;

    // The server serves on.
    assert_health_answers(&mut connect().await).await;
}

#[tokio::test]
async fn an_http2_head_over_the_limits_is_refused_as_json_or_grpc_naming_the_setting() {
    use http_body_util::BodyExt;
    let server = TestServer::start().await;
    let mut sender = openclaw_proxy_tests::h2c(server.addr).await;
    let empty = || http_body_util::Full::new(bytes::Bytes::new());

    // JSON: more header fields than the limit.
    let mut request = hyper::Request::get(format!("http://{}/health", server.addr));
    for n in 0..=HEADERS_LIMIT {
        request = request.header(format!("x-field-{n}"), "v");
    }
    let response = no_hang(sender.send_request(request.body(empty()).expect("request")))
        .await
        .expect("response");
    assert_eq!(response.status(), 431);
    let body = no_hang(response.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    let reply: serde_json::Value = serde_json::from_slice(&body).expect("a JSON error");
    assert_eq!(reply["error"]["code"], "too_many_headers", "{reply}");

    // gRPC: metadata over the limit in bytes.
    let request = hyper::Request::post(format!(
        "http://{}/openclaw.proxy.v1.SessionService/DeleteSession",
        server.addr
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .header("authorization", format!("Bearer {APP_TOKEN}"))
    .header("x-padding", "p".repeat(HEADER_BYTES_LIMIT))
    .body(http_body_util::Full::new(bytes::Bytes::from_static(&[
        0, 0, 0, 0, 0,
    ])))
    .expect("request");
    let response = no_hang(sender.send_request(request))
        .await
        .expect("response");
    let status = tonic::Status::from_header_map(response.headers()).expect("trailers-only");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(
        status.message().contains("OPENCLAW_PROXY_MAX_HEADER_BYTES"),
        "{status:?}"
    );

    // The connection serves on.
    let request = hyper::Request::get(format!("http://{}/health", server.addr))
        .body(empty())
        .expect("request");
    let response = no_hang(sender.send_request(request))
        .await
        .expect("response");
    assert_eq!(response.status(), 200);
}
