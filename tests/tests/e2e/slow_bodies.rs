//! Request bodies that never finish: trickled a byte at a time, declared and
//! never sent, chunked forever, or an HTTP/2 stream left open. Each gets its
//! answer (`408`, or `DEADLINE_EXCEEDED` to gRPC) once the body-read
//! timeout has passed, and an HTTP/1 connection is closed; bridge streams,
//! which are meant to stay open, outlive that timeout. A refusal sent before
//! the body was read says `Connection: close`, so a keep-alive client knows
//! to reconnect.
//!
//! The clients are raw TCP (bodies no HTTP library would send) and hyper's
//! HTTP/2 client; the waits are bounded by `no_hang`, never timed.

use std::time::Duration;

use bytes::Bytes;
use openclaw_proxy_tests::*;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The body-read timeout of these tests' servers.
const BODY_TIMEOUT: Duration = Duration::from_secs(1);

async fn server() -> TestServer {
    TestServer::builder()
        .edge(|edge| edge.connections.body_read_timeout = BODY_TIMEOUT)
        .start()
        .await
}

/// How the body after the head is sent.
#[derive(Clone, Copy)]
enum Feed {
    /// These bytes, then nothing.
    Stall(&'static [u8]),
    /// One byte every 100 ms, for at most a minute.
    Trickle,
    /// A chunk every 100 ms, for at most a minute.
    ChunksForever,
}

/// One HTTP/1.1 answer read to the server's close.
struct RawAnswer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl RawAnswer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Sends `head`, then feeds the body as told, and reads until the server
/// closes the connection (the test fails if it never does).
async fn exchange(server: &TestServer, head: String, feed: Feed) -> RawAnswer {
    let stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    writer.write_all(head.as_bytes()).await.expect("head");
    let feeder = tokio::spawn(async move {
        match feed {
            Feed::Stall(bytes) => {
                let _ = writer.write_all(bytes).await;
                std::future::pending::<()>().await;
            }
            Feed::Trickle => {
                for _ in 0..600 {
                    if writer.write_all(b" ").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Feed::ChunksForever => {
                for _ in 0..600 {
                    if writer.write_all(b"1\r\n \r\n").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    let mut received = Vec::new();
    no_hang(reader.read_to_end(&mut received))
        .await
        .expect("read the answer");
    feeder.abort();
    parse_answer(&received)
}

fn parse_answer(received: &[u8]) -> RawAnswer {
    let text = String::from_utf8_lossy(received);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("closed without an answer: {text:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    RawAnswer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// The head of a request with a body (`PUT` for a tools path, `POST`
/// otherwise), ending with `framing` (its length or chunked encoding).
fn body_head(path: &str, token: &str, framing: &str) -> String {
    let method = if path.ends_with("/tools") {
        "PUT"
    } else {
        "POST"
    };
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{framing}\r\n"
    )
}

#[tokio::test]
async fn bodies_that_stall_trickle_or_never_end_get_408_and_the_connection_closes() {
    let server = server().await;
    let live = TestSession::legacy(&server).await;
    let sessions = "/v1/chat/sessions";
    let tools = format!("/v1/chat/sessions/{}/tools", live.id);
    let mcp = format!("/v1/mcp/{}", live.id);
    let cases = [
        (
            sessions,
            APP_TOKEN,
            "Content-Length: 200\r\n",
            Feed::Stall(b"{\"device"),
        ),
        (
            sessions,
            APP_TOKEN,
            "Content-Length: 5000\r\n",
            Feed::Trickle,
        ),
        (
            sessions,
            APP_TOKEN,
            "Transfer-Encoding: chunked\r\n",
            Feed::ChunksForever,
        ),
        (
            &tools,
            APP_TOKEN,
            "Content-Length: 100\r\n",
            Feed::Stall(b""),
        ),
        (
            &mcp,
            OPENCLAW_TOKEN,
            "Content-Length: 100\r\n",
            Feed::Stall(b"{"),
        ),
        (
            &mcp,
            OPENCLAW_TOKEN,
            "Content-Length: 5000\r\n",
            Feed::Trickle,
        ),
        (
            &mcp,
            OPENCLAW_TOKEN,
            "Transfer-Encoding: chunked\r\n",
            Feed::ChunksForever,
        ),
    ];
    for (path, token, framing, feed) in cases {
        let what = format!("{path} {framing:?}");
        let answer = exchange(&server, body_head(path, token, framing), feed).await;
        assert_eq!(answer.status, 408, "{what}: {}", answer.body);
        assert_eq!(answer.header("connection"), Some("close"), "{what}");
        let reply: Value = serde_json::from_str(&answer.body)
            .unwrap_or_else(|_| panic!("{what}: not JSON: {}", answer.body));
        assert_eq!(reply["error"]["code"], "body_timeout", "{what}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("OPENCLAW_PROXY_BODY_READ_TIMEOUT_SECONDS"),
            "{what}: {message}"
        );
    }
    // Nothing was created, and the server still serves.
    assert_eq!(server.hub.session_count(), 1);
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([{"name": "echo_text"}]),
        echo,
    )
    .await;
    assert_echo(&server, &app.session.id).await;
}

/// A request on an HTTP/2 connection whose body never ends; its answer.
async fn open_h2_stream(
    sender: &mut hyper::client::conn::http2::SendRequest<BoxedBody>,
    request: hyper::http::request::Builder,
) -> hyper::Response<hyper::body::Incoming> {
    use futures_util::StreamExt;
    let first = Ok(hyper::body::Frame::data(Bytes::from_static(b"\0\0\0")));
    let never_ends = futures_util::stream::iter([first]).chain(futures_util::stream::pending());
    let body = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(never_ends));
    let request = request.body(body).expect("request");
    no_hang(sender.send_request(request))
        .await
        .expect("an answer")
}

type BoxedBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

#[tokio::test]
async fn an_http2_stream_without_end_stream_is_answered_and_the_connection_serves_on() {
    use http_body_util::BodyExt;
    let server = server().await;
    let live = TestSession::legacy(&server).await;
    let mut sender = openclaw_proxy_tests::h2c(server.addr).await;
    let base = format!("http://{}", server.addr);

    let mcp = hyper::Request::post(format!("{base}/v1/mcp/{}", live.id))
        .header("authorization", format!("Bearer {OPENCLAW_TOKEN}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    let response = open_h2_stream(&mut sender, mcp).await;
    assert_eq!(response.status(), 408);
    let body = no_hang(response.into_body().collect())
        .await
        .expect("body")
        .to_bytes();
    let reply: Value = serde_json::from_slice(&body).expect("a JSON error");
    assert_eq!(reply["error"]["code"], "body_timeout", "{reply}");

    let grpc = hyper::Request::post(format!(
        "{base}/openclaw.proxy.v1.SessionService/CreateSession"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .header("authorization", format!("Bearer {APP_TOKEN}"));
    let response = open_h2_stream(&mut sender, grpc).await;
    let status = match tonic::Status::from_header_map(response.headers()) {
        Some(status) => status,
        None => no_hang(response.into_body().collect())
            .await
            .expect("body")
            .trailers()
            .and_then(tonic::Status::from_header_map)
            .expect("a grpc-status"),
    };
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status:?}");
    assert!(
        status
            .message()
            .contains("OPENCLAW_PROXY_BODY_READ_TIMEOUT_SECONDS"),
        "{status:?}"
    );

    // The stream ended, not the connection.
    let health = hyper::Request::get(format!("{base}/health"))
        .body(
            http_body_util::Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed(),
        )
        .expect("request");
    let response = no_hang(sender.send_request(health)).await.expect("health");
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn bridges_outlive_the_body_read_timeout() {
    let server = server().await;
    let grpc = TestApp::start(
        &server,
        BridgeKind::Grpc,
        json!([{"name": "echo_text"}]),
        echo,
    )
    .await;
    let ws = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([{"name": "echo_text"}]),
        echo,
    )
    .await;
    // Well past the body-read timeout: the bridges' streams are not bodies
    // that must end.
    tokio::time::sleep(BODY_TIMEOUT * 3).await;
    assert_echo(&server, &grpc.session.id).await;
    assert_echo(&server, &ws.session.id).await;
}

#[tokio::test]
async fn a_refusal_sent_before_the_body_is_read_closes_the_connection_and_says_so() {
    let server = server().await;
    let live = TestSession::legacy(&server).await;
    let mcp = format!("/v1/mcp/{}", live.id);
    for (path, token) in [("/v1/chat/sessions", "wrong"), (mcp.as_str(), "wrong")] {
        let head = body_head(path, token, "Content-Length: 1000\r\n");
        let answer = exchange(&server, head, Feed::Stall(b"{\"a\":")).await;
        assert_eq!(answer.status, 401, "{path}: {}", answer.body);
        assert_eq!(answer.header("connection"), Some("close"), "{path}");
    }
    // A request whose body was read keeps its connection: a second request
    // on it is answered.
    let stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let request = format!(
        "PUT /v1/chat/sessions/{}/tools HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {APP_TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 12\r\n\r\n{{\"tools\":[]}}",
        live.id
    );
    let twice = format!(
        "{request}{}",
        request.replace("HTTP/1.1\r\n", "HTTP/1.1\r\nConnection: close\r\n")
    );
    writer.write_all(twice.as_bytes()).await.expect("send");
    let mut received = Vec::new();
    no_hang(reader.read_to_end(&mut received))
        .await
        .expect("read");
    let text = String::from_utf8_lossy(&received);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
}

async fn assert_echo(server: &TestServer, session_id: &str) {
    let client = no_hang(mcp_connect(&server.http_url(), session_id, Route::Path)).await;
    let result = no_hang(client.call_tool(call("echo_text", json!({"text": "still here"}))))
        .await
        .expect("tools/call");
    assert_eq!(
        result.structured_content,
        Some(json!({"text": "still here"}))
    );
}
