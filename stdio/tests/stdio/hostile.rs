//! Hostile input and misbehaving servers, both modes (issue 13, point 7): every
//! bad stdin line gets a JSON-RPC error naming the problem and the next call
//! still works; a duplicate request id is refused while the first goes on; an
//! HTTP answer without the JSON-RPC response, too large or never coming is a
//! JSON-RPC error naming why (and the setting); a loopback target is reached
//! past `HTTP(S)_PROXY`; an https target works (with the `https` feature) or
//! is refused at start with a sentence (without it); a client that stops reading
//! stdout ends the process. The misbehaving servers are small axum servers on
//! `127.0.0.1:0`, stopped when their guard drops.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::{DeafChild, RawChild, command};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The response limit the tests set (the smallest allowed).
const RESPONSE_LIMIT: &str = "65536";
/// The line limit the tests set.
const LINE_LIMIT: usize = 4096;

/// An axum app on `127.0.0.1:0`, stopped when dropped.
struct Served {
    addr: SocketAddr,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Served {
    async fn start(app: axum::Router) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Self { addr, _stop: stop }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

/// What the misbehaving servers received, as text.
#[derive(Clone, Default)]
struct Seen {
    bodies: Arc<Mutex<Vec<String>>>,
    gate: Arc<Notify>,
}

fn oversized(tail: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{{\"blob\":\"{}\"}}}}{tail}",
        "x".repeat(200_000)
    )
}

/// Answers by the request's (or tool's) name in the ways a server may
/// misbehave.
async fn misbehave(name: &str, id: &Value, seen: &Seen) -> Response {
    let sse = |events: String| ([(CONTENT_TYPE, "text/event-stream")], events).into_response();
    match name {
        "accepted" => StatusCode::ACCEPTED.into_response(),
        "no_content" => StatusCode::NO_CONTENT.into_response(),
        "empty" => ([(CONTENT_TYPE, "application/json")], "").into_response(),
        "early_sse" => sse(format!(
            "data: {}\n\n",
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}})
        )),
        "huge" => ([(CONTENT_TYPE, "application/json")], oversized("")).into_response(),
        "huge_stream" => {
            // No Content-Length: the limit must hold while reading.
            let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 4096])));
            Response::builder()
                .header(CONTENT_TYPE, "application/json")
                .body(Body::from_stream(futures_util::stream::iter(chunks)))
                .expect("response")
        }
        "huge_sse" => sse(format!("data: {}\n\n", oversized(""))),
        "silent" => std::future::pending().await,
        "gate" => {
            seen.gate.notified().await;
            let result = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "opened"}]}});
            axum::Json(result).into_response()
        }
        "big_numbers" => (
            [(CONTENT_TYPE, "application/json")],
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"n":123456789012345678901234567890,"e":1e400}}}}"#
            ),
        )
            .into_response(),
        _ => axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {}})).into_response(),
    }
}

/// An MCP endpoint that misbehaves by JSON-RPC method.
async fn misbehaving_mcp() -> (Served, Seen) {
    async fn mcp(State(seen): State<Seen>, body: String) -> Response {
        seen.bodies.lock().expect("lock").push(body.clone());
        let message: Value = serde_json::from_str(&body).unwrap_or_default();
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        misbehave(&method, &message["id"], &seen).await
    }
    let seen = Seen::default();
    let app = axum::Router::new()
        .route("/v1/mcp", axum::routing::post(mcp))
        .with_state(seen.clone());
    (Served::start(app).await, seen)
}

/// A Gateway whose `/tools/invoke` misbehaves by tool name; `fine` works.
async fn misbehaving_gateway() -> (Served, Seen) {
    async fn invoke(State(seen): State<Seen>, body: String) -> Response {
        seen.bodies.lock().expect("lock").push(body.clone());
        let request: Value = serde_json::from_str(&body).unwrap_or_default();
        match request["tool"].as_str().unwrap_or_default() {
            "fine" => axum::Json(json!({"ok": true, "result": "fine"})).into_response(),
            "gate" => {
                seen.gate.notified().await;
                axum::Json(json!({"ok": true, "result": "opened"})).into_response()
            }
            other => misbehave(other, &Value::Null, &seen).await,
        }
    }
    let seen = Seen::default();
    let app = axum::Router::new()
        .route("/tools/invoke", axum::routing::post(invoke))
        .with_state(seen.clone());
    (Served::start(app).await, seen)
}

const GATEWAY_TOOLS: [&str; 8] = [
    "fine",
    "gate",
    "accepted",
    "no_content",
    "empty",
    "huge",
    "huge_stream",
    "silent",
];

/// A custom tool file with [`GATEWAY_TOOLS`], in a directory of this test.
fn gateway_tool_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "openclaw-proxy-stdio-hostile-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let tools: Vec<Value> = GATEWAY_TOOLS
        .iter()
        .map(|tool| json!({"name": tool, "description": tool, "parameters": {"type": "object"}}))
        .collect();
    let path = dir.join("tools.json");
    std::fs::write(&path, json!({"tools": tools}).to_string()).expect("write");
    path
}

/// Env of the relay against `server`, with the test limits.
fn relay_env(server: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OPENCLAW_PROXY_SERVER_URL", server.to_owned()),
        ("OPENCLAW_PROXY_OPENCLAW_TOKEN", OPENCLAW_TOKEN.to_owned()),
        (
            "OPENCLAW_PROXY_STDIO_MAX_RESPONSE_BYTES",
            RESPONSE_LIMIT.to_owned(),
        ),
        (
            "OPENCLAW_PROXY_STDIO_MAX_LINE_BYTES",
            LINE_LIMIT.to_string(),
        ),
        (
            "OPENCLAW_PROXY_STDIO_REQUEST_TIMEOUT_SECONDS",
            "2".to_owned(),
        ),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect()
}

/// Gateway mode against `gateway` with the test tools and limits.
fn gateway_command(
    gateway: &str,
    tools: &std::path::Path,
    extra: &[(&str, &str)],
) -> tokio::process::Command {
    let tools = tools.display().to_string();
    let mut env = vec![
        ("OPENCLAW_GATEWAY_URL", gateway),
        ("OPENCLAW_GATEWAY_TOKEN", "gw-token"),
        ("OPENCLAW_MCP_DISCOVERY", "off"),
        ("OPENCLAW_MCP_CUSTOM_TOOLS", tools.as_str()),
        ("OPENCLAW_PROXY_STDIO_MAX_RESPONSE_BYTES", RESPONSE_LIMIT),
        ("OPENCLAW_PROXY_STDIO_REQUEST_TIMEOUT_SECONDS", "2"),
    ];
    let line_limit = LINE_LIMIT.to_string();
    env.push(("OPENCLAW_PROXY_STDIO_MAX_LINE_BYTES", &line_limit));
    env.extend_from_slice(extra);
    command(&["gateway"], &env)
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn tool_call(id: u64, name: &str) -> Value {
    request(id, "tools/call", json!({"name": name, "arguments": {}}))
}

/// Initializes gateway mode over raw lines.
async fn initialize_gateway(child: &mut RawChild) {
    child.send(initialize_body(0, "2025-11-25")).await;
    let reply = child.recv().await;
    assert_eq!(reply["id"], 0, "{reply}");
    assert!(reply["result"].is_object(), "{reply}");
    child
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

fn error_message(reply: &Value) -> &str {
    reply["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {reply}"))
}

fn result_text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text result: {reply}"))
        .to_owned()
}

/// Each bad line, the error code it must get, and words its message must
/// hold (the problem, and for limits the limit and its setting).
fn corpus() -> Vec<(Vec<u8>, i64, Value, Vec<String>)> {
    let over_long = format!(
        r#"{{"jsonrpc":"2.0","id":99,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "p".repeat(LINE_LIMIT)
    );
    let words = |list: &[&str]| list.iter().map(|word| (*word).to_owned()).collect();
    vec![
        (
            b"\xff\xfe{\"jsonrpc\":\"2.0\"}".to_vec(),
            -32700,
            Value::Null,
            words(&["UTF-8", "offset 0"]),
        ),
        (
            over_long.into_bytes(),
            -32700,
            Value::Null,
            words(&[
                &LINE_LIMIT.to_string(),
                "OPENCLAW_PROXY_STDIO_MAX_LINE_BYTES",
            ]),
        ),
        (
            b"this is not json".to_vec(),
            -32700,
            Value::Null,
            words(&["not JSON"]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":1"#.to_vec(),
            -32700,
            Value::Null,
            words(&["not JSON"]),
        ),
        (
            "[".repeat(2_000).into_bytes(),
            -32700,
            Value::Null,
            words(&["not JSON"]),
        ),
        (
            b"42".to_vec(),
            -32600,
            Value::Null,
            words(&["got a number"]),
        ),
        (
            br#""a string""#.to_vec(),
            -32600,
            Value::Null,
            words(&["got a string"]),
        ),
        (b"[1, 2]".to_vec(), -32600, Value::Null, words(&["batches"])),
        (
            br#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#.to_vec(),
            -32600,
            json!(7),
            words(&["\"jsonrpc\" must be \"2.0\""]),
        ),
        (
            br#"{"id":8,"method":"ping"}"#.to_vec(),
            -32600,
            json!(8),
            words(&["\"jsonrpc\"", "missing"]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":9}"#.to_vec(),
            -32600,
            json!(9),
            words(&["\"method\""]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":10,"method":5}"#.to_vec(),
            -32600,
            json!(10),
            words(&["\"method\" must be a string"]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
            words(&["\"id\" must be a string or a number", "object"]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
            words(&["\"id\"", "null"]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":11,"method":"ping","params":3}"#.to_vec(),
            -32600,
            json!(11),
            words(&["\"params\" must be an object or an array"]),
        ),
        (
            br#"{"jsonrpc":"2.0","id":12,"id":13,"method":"ping"}"#.to_vec(),
            -32600,
            Value::Null,
            words(&["duplicate field"]),
        ),
    ]
}

/// Sends the corpus; each line must get its error, in order.
async fn send_corpus(child: &mut RawChild) {
    for (line, code, id, words) in corpus() {
        child.send_bytes(&line).await;
        let reply = child.recv().await;
        let shown = String::from_utf8_lossy(&line[..line.len().min(60)]).into_owned();
        assert_eq!(reply["error"]["code"], code, "{shown}: {reply}");
        assert_eq!(reply["id"], id, "{shown}: {reply}");
        let message = error_message(&reply);
        for word in &words {
            assert!(
                message.contains(word.as_str()),
                "{shown}: {message:?} lacks {word:?}"
            );
        }
    }
    // Blank lines are skipped without an answer.
    child.send_bytes(b"").await;
    child.send_bytes(b"  \r").await;
}

#[tokio::test]
async fn relay_answers_every_hostile_line_then_serves_a_call() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let _echo = app.serve_echo();
    server
        .wait_for_session(&session.id, "the bridge attaching", |s| s.bridge_connected)
        .await;
    let env = relay_env(&server.http_url());
    let mut relay = RawChild::spawn(command(&["--session-id", &session.id], &borrowed(&env)));
    send_corpus(&mut relay).await;

    relay
        .send(request(
            20,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": "still here"}}),
        ))
        .await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 20, "{reply}");
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"text": "still here"})
    );
    let (status, rest) = relay.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(rest.is_empty(), "{rest:?}");
}

/// Ids a server may write another way (`-0.0` read as the number 0): the
/// relay answers each with the id exactly as the client sent it, and writes
/// nothing else (no second, unsolicited answer with the server's id).
#[tokio::test]
async fn relay_answers_with_the_id_exactly_as_the_client_sent_it() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let _echo = app.serve_echo();
    server
        .wait_for_session(&session.id, "the bridge attaching", |s| s.bridge_connected)
        .await;
    let env = relay_env(&server.http_url());
    let mut relay = RawChild::spawn(command(&["--session-id", &session.id], &borrowed(&env)));
    for id in ["-0.0", "1.0", "2e0", "-0", "\"-0.0\""] {
        relay
            .send_raw(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo_text","arguments":{{"text":"x"}}}}}}"#
            ))
            .await;
        let line = relay.recv_line().await;
        assert!(line.contains(&format!(r#""id":{id}"#)), "{id}: {line}");
        let reply: Value = serde_json::from_str(&line).expect("JSON");
        assert_eq!(
            reply["result"]["structuredContent"],
            json!({"text": "x"}),
            "{id}: {line}"
        );
    }
    let (status, rest) = relay.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(rest.is_empty(), "unsolicited lines: {rest:?}");
}

#[tokio::test]
async fn gateway_answers_every_hostile_line_then_serves_a_call() {
    let (gateway, _seen) = misbehaving_gateway().await;
    let tools = gateway_tool_file("corpus");
    let mut child = RawChild::spawn(gateway_command(&gateway.url(), &tools, &[]));
    initialize_gateway(&mut child).await;
    send_corpus(&mut child).await;
    // Valid JSON-RPC with params MCP does not allow: rmcp's own error, for
    // that id.
    child
        .send(request(21, "tools/call", json!({"name": 5})))
        .await;
    let reply = child.recv().await;
    assert_eq!(reply["id"], 21, "{reply}");
    assert!(reply["error"]["code"].is_i64(), "{reply}");

    child.send(tool_call(22, "fine")).await;
    let reply = child.recv().await;
    assert_eq!(reply["id"], 22, "{reply}");
    assert_eq!(result_text(&reply), "fine");
    let (status, _) = child.finish().await;
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn relay_refuses_a_duplicate_request_id_while_the_first_goes_on() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    server
        .wait_for_session(&session.id, "the bridge attaching", |s| s.bridge_connected)
        .await;
    let env = relay_env(&server.http_url());
    let mut relay = RawChild::spawn(command(&["--session-id", &session.id], &borrowed(&env)));
    let call = |text: &str| {
        request(
            2,
            "tools/call",
            json!({"name": "echo_text", "arguments": {"text": text}}),
        )
    };

    relay.send(call("first")).await;
    let frame = app.next_json().await.expect("invoke_tool");
    relay.send(call("second")).await;
    let refusal = relay.recv().await;
    assert_eq!(refusal["id"], 2, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        error_message(&refusal).contains("request id 2 is already in flight"),
        "{refusal}"
    );

    app.send_json(json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": "first done"}))
        .await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 2);
    assert_eq!(
        reply["result"]["content"][0]["text"], "first done",
        "{reply}"
    );

    // Answered, the id is free again.
    relay.send(call("third")).await;
    let frame = app.next_json().await.expect("invoke_tool");
    assert_eq!(frame["arguments"]["text"], "third");
    app.send_json(json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": "third done"}))
        .await;
    assert_eq!(
        relay.recv().await["result"]["content"][0]["text"],
        "third done"
    );
}

#[tokio::test]
async fn gateway_refuses_a_duplicate_request_id_while_the_first_goes_on() {
    let (gateway, seen) = misbehaving_gateway().await;
    let tools = gateway_tool_file("duplicate");
    let mut child = RawChild::spawn(gateway_command(&gateway.url(), &tools, &[]));
    initialize_gateway(&mut child).await;

    child.send(tool_call(5, "gate")).await;
    child.send(tool_call(5, "fine")).await;
    let refusal = child.recv().await;
    assert_eq!(refusal["id"], 5, "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        error_message(&refusal).contains("request id 5 is already in flight"),
        "{refusal}"
    );
    seen.gate.notify_one();
    let reply = child.recv().await;
    assert_eq!(reply["id"], 5);
    assert_eq!(result_text(&reply), "opened");

    child.send(tool_call(5, "fine")).await;
    assert_eq!(result_text(&child.recv().await), "fine");
    // Only the two accepted calls reached the Gateway.
    assert_eq!(seen.bodies.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn relay_answers_requests_whose_http_answer_has_no_response() {
    let (mcp, seen) = misbehaving_mcp().await;
    let env = relay_env(&mcp.url());
    let mut relay = RawChild::spawn(command(&["--session-id", "s"], &borrowed(&env)));
    let cases: [(&str, &[&str]); 7] = [
        ("accepted", &["202", "without a JSON-RPC response"]),
        ("no_content", &["204", "without a JSON-RPC response"]),
        ("empty", &["200", "empty body"]),
        (
            "huge",
            &[
                "larger than 65536 bytes",
                "OPENCLAW_PROXY_STDIO_MAX_RESPONSE_BYTES",
            ],
        ),
        (
            "huge_stream",
            &["larger than 65536 bytes", "--max-response-bytes"],
        ),
        ("huge_sse", &["larger than 65536 bytes"]),
        (
            "silent",
            &[
                "did not answer",
                "2 seconds",
                "OPENCLAW_PROXY_STDIO_REQUEST_TIMEOUT_SECONDS",
            ],
        ),
    ];
    for (id, (method, words)) in (1..).zip(cases) {
        relay.send(request(id, method, json!({}))).await;
        let reply = relay.recv().await;
        assert_eq!(reply["id"], id, "{method}: {reply}");
        assert_eq!(reply["error"]["code"], -32000, "{method}: {reply}");
        let message = error_message(&reply);
        for word in words {
            assert!(
                message.contains(word),
                "{method}: {message:?} lacks {word:?}"
            );
        }
    }
    // An SSE stream that ends early: what came passes, then the error.
    relay.send(request(30, "early_sse", json!({}))).await;
    let progress = relay.recv().await;
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 30, "{reply}");
    assert!(
        error_message(&reply).contains("ended its event stream"),
        "{reply}"
    );

    // A notification needs no answer: the next line is the ping's.
    relay
        .send(json!({"jsonrpc": "2.0", "method": "accepted"}))
        .await;
    relay.send(request(31, "ping", json!({}))).await;
    let reply = relay.recv().await;
    assert_eq!(reply["id"], 31, "{reply}");
    assert!(reply["result"].is_object(), "{reply}");

    // Numbers beyond f64 pass unchanged, both ways.
    let sent = r#"{"jsonrpc":"2.0","id":32,"method":"big_numbers","params":{"n":123456789012345678901234567890,"x":0.1000000000000000055511151231257827}}"#;
    relay.send_raw(sent).await;
    let answer = relay.recv_line().await;
    assert!(
        answer.contains(r#""n":123456789012345678901234567890,"e":1e400"#),
        "{answer}"
    );
    // Exactly as sent. Not necessarily the last body the stand-in saw: the
    // notification above is posted without waiting, and may land after.
    let bodies = seen.bodies.lock().expect("lock").clone();
    assert!(bodies.iter().any(|body| body == sent), "{bodies:?}");
    let (status, rest) = relay.finish().await;
    assert!(status.success(), "{status:?}");
    assert!(rest.is_empty(), "{rest:?}");
}

#[tokio::test]
async fn gateway_explains_answers_it_cannot_use() {
    let (gateway, _seen) = misbehaving_gateway().await;
    let tools = gateway_tool_file("answers");
    let mut child = RawChild::spawn(gateway_command(&gateway.url(), &tools, &[]));
    initialize_gateway(&mut child).await;
    let cases: [(&str, &[&str]); 6] = [
        ("accepted", &["HTTP 202", "empty body"]),
        ("no_content", &["HTTP 204", "empty body"]),
        ("empty", &["HTTP 200", "empty body"]),
        (
            "huge",
            &[
                "larger than 65536 bytes",
                "OPENCLAW_PROXY_STDIO_MAX_RESPONSE_BYTES",
            ],
        ),
        ("huge_stream", &["larger than 65536 bytes"]),
        (
            "silent",
            &[
                "did not answer",
                "2 seconds",
                "OPENCLAW_PROXY_STDIO_REQUEST_TIMEOUT_SECONDS",
            ],
        ),
    ];
    for (id, (tool, words)) in (1..).zip(cases) {
        child.send(tool_call(id, tool)).await;
        let reply = child.recv().await;
        assert_eq!(reply["id"], id, "{tool}: {reply}");
        assert_eq!(reply["result"]["isError"], true, "{tool}: {reply}");
        let text = result_text(&reply);
        for word in words {
            assert!(text.contains(word), "{tool}: {text:?} lacks {word:?}");
        }
    }
    child.send(tool_call(10, "fine")).await;
    assert_eq!(result_text(&child.recv().await), "fine");
}

/// A "proxy" that counts the connections it gets and closes them.
async fn counting_proxy() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let count = Arc::new(AtomicUsize::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, count)
}

#[tokio::test]
async fn loopback_targets_never_go_through_the_proxy() {
    let (proxy, used) = counting_proxy().await;
    let proxies: Vec<(&str, &str)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ]
    .into_iter()
    .map(|name| (name, proxy.as_str()))
    .collect();
    let (mcp, _seen) = misbehaving_mcp().await;
    let port = mcp.addr.port();
    for base in [mcp.url(), format!("http://localhost:{port}")] {
        let mut env = relay_env(&base);
        env.extend(
            proxies
                .iter()
                .map(|(name, value)| (*name, (*value).to_owned())),
        );
        let mut relay = RawChild::spawn(command(&["--session-id", "s"], &borrowed(&env)));
        relay.send(request(1, "ping", json!({}))).await;
        let reply = relay.recv().await;
        assert!(reply["result"].is_object(), "{base}: {reply}");
        relay.finish().await;
    }

    let (gateway, _seen) = misbehaving_gateway().await;
    let tools = gateway_tool_file("proxy");
    let mut child = RawChild::spawn(gateway_command(&gateway.url(), &tools, &proxies));
    initialize_gateway(&mut child).await;
    child.send(tool_call(1, "fine")).await;
    assert_eq!(result_text(&child.recv().await), "fine");
    assert_eq!(
        used.load(Ordering::SeqCst),
        0,
        "a loopback request went to the proxy"
    );
}

#[tokio::test]
async fn a_client_that_stops_reading_stdout_ends_the_process() {
    let (mcp, _seen) = misbehaving_mcp().await;
    let env = relay_env(&mcp.url());
    let mut relay = DeafChild::spawn(command(&["--session-id", "s"], &borrowed(&env)));
    relay.send(request(1, "ping", json!({}))).await;
    let (status, stderr) = relay.exit().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write to stdout"), "{stderr}");

    let (gateway, _seen) = misbehaving_gateway().await;
    let tools = gateway_tool_file("deaf");
    let mut child = DeafChild::spawn(gateway_command(&gateway.url(), &tools, &[]));
    child.send(initialize_body(0, "2025-11-25")).await;
    let (status, stderr) = child.exit().await;
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write to stdout"), "{stderr}");
}

/// The default build reaches https:// targets, trusting the platform's
/// roots and what `SSL_CERT_FILE` adds.
#[cfg(feature = "https")]
#[tokio::test]
async fn https_targets_are_reached_with_the_platform_roots() {
    let authority = crate::tls::TestCa::new("https");
    let files = authority.files.clone();
    let ca = authority.ca_file();
    let server = TestServer::builder().tls(files).start().await;
    let url = format!("https://localhost:{}", server.addr.port());

    // Trusted through SSL_CERT_FILE: the server answers (the session is unknown).
    let mut env = relay_env(&url);
    env.push(("SSL_CERT_FILE", ca.clone()));
    let mut relay = RawChild::spawn(command(
        &["--session-id", "no-such-session"],
        &borrowed(&env),
    ));
    relay.send(initialize_body(1, "2025-11-25")).await;
    let reply = relay.recv().await;
    let message = error_message(&reply);
    assert!(
        message.contains("(404)") && message.contains(&url),
        "{message}"
    );
    relay.finish().await;

    // Without it, the certificate is refused: TLS really verifies.
    let env = relay_env(&url);
    let mut relay = RawChild::spawn(command(
        &["--session-id", "no-such-session"],
        &borrowed(&env),
    ));
    relay.send(initialize_body(1, "2025-11-25")).await;
    let reply = relay.recv().await;
    let message = error_message(&reply);
    assert!(
        message.contains("cannot reach") && message.to_lowercase().contains("certificate"),
        "{message}"
    );
    relay.finish().await;
}

/// Built without the `https` feature (`--no-default-features`), an https://
/// target is refused at start, with the way to get one.
#[cfg(not(feature = "https"))]
#[tokio::test]
async fn https_targets_without_tls_are_refused_with_the_build_to_use() {
    let output = command(
        &["--session-id", "s"],
        &[("OPENCLAW_PROXY_SERVER_URL", "https://localhost:1")],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("default features"), "{stderr}");
    assert!(output.stdout.is_empty());
}
