//! Answers a client does not read: an HTTP/2 client that opens streams with
//! a flow-control window of 0 and answers pings would make the server hold
//! every answer for as long as it likes. The streams one connection may
//! open are bounded (`OPENCLAW_PROXY_HTTP2_MAX_CONCURRENT_STREAMS`, one more
//! is refused with `REFUSED_STREAM`), and a connection that leaves an answer
//! unread for `OPENCLAW_PROXY_RESPONSE_WRITE_TIMEOUT_SECONDS` is closed.

use std::time::Duration;

use openclaw_proxy_tests::exhaustion::wide_schema;
use openclaw_proxy_tests::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A session whose `tools/list` answer is about `properties * 28` bytes.
async fn session_with_wide_tools(server: &TestServer, properties: usize) -> String {
    let body = format!(
        r#"{{"device_id":"d","app_version":"1","tools":[{{"name":"wide","input_schema":{}}}]}}"#,
        wide_schema(properties, 0)
    );
    let body: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    TestSession::register(server, &body).await.id
}

fn tools_list(server: &TestServer, session: &str) -> axum::http::Request<()> {
    axum::http::Request::post(format!("http://{}/v1/mcp/{session}", server.addr))
        .header("authorization", format!("Bearer {OPENCLAW_TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(())
        .expect("a request")
}

#[tokio::test]
async fn an_http2_client_that_reads_no_answers_is_disconnected() {
    let server = TestServer::builder()
        .edge(|edge| edge.connections.response_write_timeout = Duration::from_secs(1))
        .start()
        .await;
    let session = session_with_wide_tools(&server, 10_000).await;
    let tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    // A window of 0: the server may send headers, never a byte of a body.
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, bytes::Bytes>(tcp)
        .await
        .expect("handshake");
    // The connection task answers the server's pings for as long as it runs.
    let mut connection = tokio::spawn(connection);
    let mut sender = no_hang(sender.ready()).await.expect("a stream");
    let mut heads = Vec::new();
    for _ in 0..4 {
        let (response, mut body) = sender
            .send_request(tools_list(&server, &session), false)
            .expect("sent");
        body.send_data(
            bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            true,
        )
        .expect("body sent");
        heads.push(response);
    }
    // Kept (a dropped answer is a cancelled stream), never read.
    let mut answers = Vec::new();
    for response in heads {
        let response = no_hang(response).await.expect("an answer's head");
        assert_eq!(response.status(), 200);
        answers.push(response);
    }
    // Still answering pings, but never reading: the server closes the
    // connection, and the client sees it end.
    let ended = tokio::time::timeout(Duration::from_secs(30), &mut connection).await;
    assert!(
        ended.is_ok(),
        "the server kept a connection that reads none of its answers"
    );
    drop(answers);
    // The server still serves everyone else.
    let health = no_hang(Rest::new(server.http_url()).get("/health").send()).await;
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn a_client_that_reads_its_answers_over_http2_keeps_its_connection() {
    let server = TestServer::builder()
        .edge(|edge| edge.connections.response_write_timeout = Duration::from_secs(1))
        .start()
        .await;
    // Answers much larger than one slice of a body and than the default
    // window: read as they come, in full.
    let session = session_with_wide_tools(&server, 20_000).await;
    let tcp = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (sender, connection) = h2::client::handshake(tcp).await.expect("handshake");
    let connection = tokio::spawn(connection);
    let mut sender = sender;
    for _ in 0..3 {
        sender = no_hang(sender.ready()).await.expect("a stream");
        let (response, mut body) = sender
            .send_request(tools_list(&server, &session), false)
            .expect("sent");
        body.send_data(
            bytes::Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            true,
        )
        .expect("body sent");
        let mut answer = no_hang(response).await.expect("head").into_body();
        let mut text = Vec::new();
        while let Some(chunk) = no_hang(answer.data()).await {
            let chunk = chunk.expect("data");
            let _ = answer.flow_control().release_capacity(chunk.len());
            text.extend_from_slice(&chunk);
        }
        let answer: serde_json::Value = serde_json::from_slice(&text).expect("JSON");
        let schema = &answer["result"]["tools"][0]["inputSchema"];
        assert_eq!(
            schema["properties"].as_object().map(|p| p.len()),
            Some(20_000)
        );
        // A pause longer than the write timeout, with nothing unread.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert!(!connection.is_finished(), "the connection is kept");
}

/// One HTTP/2 frame: its type, flags, stream and payload.
struct Frame {
    kind: u8,
    stream: u32,
    payload: Vec<u8>,
}

async fn read_frame(stream: &mut tokio::net::TcpStream) -> Option<Frame> {
    let mut head = [0_u8; 9];
    stream.read_exact(&mut head).await.ok()?;
    let length = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let mut payload = vec![0_u8; length];
    stream.read_exact(&mut payload).await.ok()?;
    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some(Frame {
        kind: head[3],
        stream: id,
        payload,
    })
}

/// A HEADERS frame opening stream `id` with `GET /` (HPACK: indexed
/// `:method GET`, `:scheme http`, `:path /`, and a literal `:authority`),
/// its end of stream flag set.
fn get_headers(id: u32, authority: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86, 0x84, 0x01];
    block.push(u8::try_from(authority.len()).expect("a short authority"));
    block.extend_from_slice(authority.as_bytes());
    let length = u32::try_from(block.len()).expect("a small block");
    let mut frame = length.to_be_bytes()[1..].to_vec();
    // HEADERS, END_STREAM | END_HEADERS.
    frame.extend_from_slice(&[0x1, 0x5]);
    frame.extend_from_slice(&id.to_be_bytes());
    frame.extend_from_slice(&block);
    frame
}

#[tokio::test]
async fn streams_past_the_limit_of_one_connection_are_refused() {
    // The default limit: more than hyper's 200, so a backend app can
    // multiplex hundreds of bridges on one connection, and bounded.
    const LIMIT: u32 = 1024;
    let server = TestServer::start().await;
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    // The preface, and SETTINGS with an initial window of 0: no answer
    // can be sent, so every stream stays open.
    let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0];
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .expect("preface");
    stream.write_all(&settings).await.expect("settings");
    let first = no_hang(read_frame(&mut stream)).await.expect("a frame");
    assert_eq!(first.kind, 4, "the server opens with SETTINGS");
    // SETTINGS_MAX_CONCURRENT_STREAMS (3) as the server announces it.
    let announced = first
        .payload
        .chunks(6)
        .find(|setting| setting[..2] == [0, 3])
        .map(|setting| u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]));
    assert_eq!(announced, Some(LIMIT));
    stream
        .write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0])
        .await
        .expect("settings ack");
    let authority = server.addr.to_string();
    let mut frames = Vec::new();
    for n in 0..=LIMIT {
        frames.extend_from_slice(&get_headers(2 * n + 1, &authority));
    }
    stream.write_all(&frames).await.expect("streams opened");
    // The stream past the limit is reset with REFUSED_STREAM (7); the
    // others are answered (their heads; their bodies wait for a window).
    let past = 2 * LIMIT + 1;
    let refused = no_hang(async {
        loop {
            let frame = read_frame(&mut stream).await.expect("the connection stays");
            if frame.kind == 3 {
                return (frame.stream, frame.payload);
            }
        }
    })
    .await;
    assert_eq!(refused, (past, 7_u32.to_be_bytes().to_vec()));
}
