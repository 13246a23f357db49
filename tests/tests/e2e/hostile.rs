//! Hostile input, one corpus per surface (REST, WebSocket frames, MCP, gRPC
//! messages): each bad input gets a precise refusal that names the problem
//! in a short message without raw control characters, and afterwards the
//! server still serves a normal tool call end to end.
//!
//! The server is the real one on `127.0.0.1:0`; the clients are reqwest
//! (through the tests' REST client), tokio-tungstenite, rmcp, tonic, and a
//! raw hyper HTTP/2 client for gRPC bodies no tonic client would send.

use openclaw_proxy_core::proto::{self, app_message};
use openclaw_proxy_tests::forgery::{FORGED_FIELDS, FORGED_LINE};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tonic::Code;

/// Longest refusal text accepted: enough for a sentence quoting a cut-short
/// value, far less than the 100 KB values sent.
const MESSAGE_LIMIT: usize = 2048;

/// Asserts that a refusal's text names the problem (`word`), is bounded and
/// holds no raw control character (it cannot forge a log line).
fn assert_names(text: &str, word: &str, what: &str) {
    assert!(text.contains(word), "{what}: {word:?} is not in {text:?}");
    assert!(
        text.len() <= MESSAGE_LIMIT,
        "{what}: a refusal of {} bytes: {}…",
        text.len(),
        text.chars().take(200).collect::<String>()
    );
    assert!(
        !text.chars().any(char::is_control),
        "{what}: a raw control character in {text:?}"
    );
}

/// `depth` nested JSON arrays around `1`.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// Proves the server still serves: a fresh app on the WebSocket bridge, and
/// an echo call through MCP (rmcp's client) that comes back unchanged.
async fn assert_serves(server: &TestServer) {
    let app = TestApp::start(server, BridgeKind::Ws, json!([{"name": "echo_text"}]), echo).await;
    assert_echoes(server, &app.session.id).await;
}

/// An echo call of `echo_text` through MCP on `session_id`.
async fn assert_echoes(server: &TestServer, session_id: &str) {
    let client = no_hang(mcp_connect(&server.http_url(), session_id, Route::Path)).await;
    let result = no_hang(client.call_tool(call("echo_text", json!({"text": "still here"}))))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(
        result.structured_content,
        Some(json!({"text": "still here"}))
    );
}

/// One bad REST request and the refusal it must get.
struct RestCase {
    method: Method,
    path: String,
    content_type: Option<&'static [u8]>,
    body: Vec<u8>,
    status: u16,
    /// The JSON error code; empty when hyper refuses before any route.
    code: &'static str,
    word: &'static str,
}

fn rest(
    method: &str,
    path: impl Into<String>,
    body: impl Into<Vec<u8>>,
    status: u16,
    code: &'static str,
    word: &'static str,
) -> RestCase {
    RestCase {
        method: method.parse().expect("method"),
        path: path.into(),
        content_type: Some(b"application/json"),
        body: body.into(),
        status,
        code,
        word,
    }
}

/// Sends raw bytes on a fresh connection; the status line of the answer.
async fn raw_status_line(server: &TestServer, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    // The server may answer (and close) before it has read everything.
    let _ = stream.write_all(request).await;
    let mut received = Vec::new();
    let mut buffer = [0_u8; 1024];
    while !received.windows(2).any(|pair| pair == b"\r\n") {
        let read = no_hang(stream.read(&mut buffer)).await.unwrap_or(0);
        assert!(read > 0, "closed without an answer: {received:?}");
        received.extend_from_slice(&buffer[..read]);
    }
    let text = String::from_utf8_lossy(&received);
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn rest_refuses_every_bad_request_precisely_and_goes_on_serving() {
    let server = TestServer::start().await;
    let live = TestSession::legacy(&server).await;
    let sessions = "/v1/chat/sessions";
    let tools_of = |id: &str| format!("/v1/chat/sessions/{id}/tools");
    // Long, yet within the request-target limit (8 KiB).
    let long_id = "a".repeat(8_000);
    let over_limit_id = "a".repeat(60_000);
    let huge_name = "n".repeat(100_000);
    let many_types = vec!["x"; 20_000];
    let session = |tools: Value| {
        json!({"device_id": "d", "app_version": "1", "tools": tools})
            .to_string()
            .into_bytes()
    };
    // One case a line.
    #[rustfmt::skip]
    let mut cases = vec![
        // Not JSON, or not the body's shape.
        rest("POST", sessions, "", 400, "malformed_json", "EOF"),
        rest("POST", sessions, "{", 400, "malformed_json", "EOF"),
        rest("POST", sessions, "{} x", 400, "malformed_json", "trailing"),
        rest("POST", sessions, "null", 400, "invalid_body", "invalid type"),
        rest("POST", sessions, "[]", 400, "invalid_body", "invalid"),
        rest("POST", sessions, "\"text\"", 400, "invalid_body", "invalid type"),
        rest("POST", sessions, b"{\"device_id\":\"\xff\xfe\",\"app_version\":\"1\"}".to_vec(), 400, "malformed_json", "unicode"),
        rest("POST", sessions, r#"{"app_version":"1"}"#, 400, "invalid_body", "device_id"),
        rest("POST", sessions, r#"{"device_id":5,"app_version":"1"}"#, 400, "invalid_body", "device_id"),
        rest("POST", sessions, r#"{"device_id":"d","app_version":["1"]}"#, 400, "invalid_body", "app_version"),
        rest("POST", sessions, session(json!({})), 400, "invalid_body", "tools"),
        rest("POST", sessions, session(json!([5])), 400, "invalid_body", "tools[0]"),
        rest("POST", sessions, session(json!([{"name": ["x"]}])), 400, "invalid_body", "tools[0].name"),
        // A wrongly typed value is quoted cut short, however long it is.
        rest("POST", sessions, session(json!("x".repeat(100_000))), 400, "invalid_body", "tools"),
        // Huge numbers.
        rest("POST", sessions, session(json!([{"name": "t", "timeout_seconds": 4_294_967_296_u64}])), 400, "invalid_body", "timeout_seconds"),
        rest("POST", sessions, r#"{"device_id":"d","app_version":"1","tools":[{"name":"t","timeout_seconds":123456789012345678901234567890}]}"#, 400, "invalid_body", "timeout_seconds"),
        rest("POST", sessions, r#"{"device_id":"d","app_version":"1","tools":[{"name":"t","timeout_seconds":-1}]}"#, 400, "invalid_body", "timeout_seconds"),
        rest("POST", sessions, r#"{"device_id":"d","app_version":"1","tools":[{"name":"t","timeout_seconds":1e400}]}"#, 400, "malformed_json", "out of range"),
        // Deep nesting, in a known field and in an ignored one.
        rest("POST", sessions, format!(r#"{{"device_id":"d","app_version":"1","tools":[{{"name":"t","input_schema":{{"a":{}}}}}]}}"#, nested(10_000)), 400, "malformed_json", "recursion limit"),
        rest("POST", sessions, format!(r#"{{"device_id":{},"app_version":"1"}}"#, nested(10_000)), 400, "invalid_body", "device_id"),
        rest("POST", sessions, format!(r#"{{"device_id":"d","app_version":"1","unknown":{}}}"#, nested(500_000)), 400, "malformed_json", "recursion limit"),
        // In a tool's unknown field, which serde skips without counting.
        rest("POST", sessions, format!(r#"{{"device_id":"d","app_version":"1","tools":[{{"name":"t","unknown":{}}}]}}"#, nested(500_000)), 400, "malformed_json", "128"),
        rest("PUT", tools_of(&live.id), format!(r#"{{"tools":[{{"name":"t","unknown":{}}}]}}"#, nested(200)), 400, "malformed_json", "128"),
        // Bad tool names and schemas.
        rest("POST", sessions, session(json!([{"name": ""}])), 400, "invalid_tool", "empty"),
        rest("POST", sessions, session(json!([{"name": "has space"}])), 400, "invalid_tool", "not a valid MCP tool name"),
        rest("POST", sessions, session(json!([{"name": "bell\u{7}\r\nline"}])), 400, "invalid_tool", "not a valid MCP tool name"),
        rest("POST", sessions, session(json!([{"name": huge_name}])), 400, "invalid_tool", "not a valid MCP tool name"),
        rest("POST", sessions, session(json!([{"name": FORGED_FIELDS}])), 400, "invalid_tool", "not a valid MCP tool name"),
        rest("POST", sessions, session(json!([{"name": FORGED_LINE}])), 400, "invalid_tool", "not a valid MCP tool name"),
        rest("POST", sessions, session(json!([{"name": "t"}, {"name": "t"}])), 400, "invalid_tool", "tools[0] already"),
        rest("POST", sessions, session(json!([{"name": "t", "input_schema": "object"}])), 400, "invalid_tool", "must be a JSON object"),
        rest("POST", sessions, session(json!([{"name": "t", "input_schema": {"type": "string"}}])), 400, "invalid_tool", "\"string\""),
        rest("POST", sessions, session(json!([{"name": "t", "input_schema": {"type": many_types}}])), 400, "invalid_tool", "expected \"object\""),
        rest("POST", sessions, session(json!([{"name": "t", "input_schema": {"a": 1}, "inputSchema": {"a": 2}}])), 400, "invalid_body", "two spellings"),
        // Oversized: the test server's limit is 1 MiB.
        rest("POST", sessions, vec![b' '; 2 * 1024 * 1024], 413, "body_too_large", "1048576"),
        // Replacing tools.
        rest("PUT", tools_of(&live.id), "{", 400, "malformed_json", "EOF"),
        rest("PUT", tools_of(&live.id), "{}", 400, "invalid_body", "tools"),
        rest("PUT", tools_of(&live.id), r#"{"tools":5}"#, 400, "invalid_body", "tools"),
        rest("PUT", tools_of(&live.id), r#"{"tools":[{"name":"a/b"}]}"#, 400, "invalid_tool", "not a valid MCP tool name"),
        rest("PUT", tools_of(&live.id), vec![b' '; 2 * 1024 * 1024], 413, "body_too_large", "1048576"),
        rest("PUT", tools_of("no-such-session"), r#"{"tools":[]}"#, 404, "unknown_session", "does not exist"),
        // Path ids: control characters, invalid UTF-8, very long.
        rest("GET", format!("{sessions}/a%0D%0Ab%07"), "", 404, "unknown_session", "does not exist"),
        rest("DELETE", format!("{sessions}/a%0D%0Ab%07"), "", 200, "", ""),
        rest("GET", format!("{sessions}/%FF%FE"), "", 400, "invalid_path", "UTF-8"),
        rest("DELETE", format!("{sessions}/%FF%FE"), "", 400, "invalid_path", "UTF-8"),
        rest("GET", format!("{sessions}/{long_id}"), "", 404, "unknown_session", "does not exist"),
        rest("PUT", tools_of(&long_id), r#"{"tools":[]}"#, 404, "unknown_session", "does not exist"),
        rest("DELETE", format!("{sessions}/{long_id}"), "", 200, "", ""),
        // Over the request-target limit: refused before any route.
        rest("GET", format!("{sessions}/{over_limit_id}"), "", 414, "request_target_too_long", "OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES"),
        rest("PUT", tools_of(&over_limit_id), r#"{"tools":[]}"#, 414, "request_target_too_long", "8192"),
        // Routes and methods nothing serves.
        rest("PATCH", sessions, "{}", 405, "method_not_allowed", "PATCH"),
        rest("POST", format!("{sessions}/{}/nothing", live.id), "{}", 404, "not_found", "no such endpoint"),
    ];
    // Wrong content types, on both routes that read a body.
    for path in [sessions.to_owned(), tools_of(&live.id)] {
        for content_type in [
            None,
            Some(&b"text/plain"[..]),
            Some(&b"application/jsonx"[..]),
            Some(&b"application/x-www-form-urlencoded"[..]),
            Some(&b"application/\xffjson"[..]),
        ] {
            let method = if path == sessions { "POST" } else { "PUT" };
            cases.push(RestCase {
                content_type,
                ..rest(
                    method,
                    path.clone(),
                    r#"{"tools":[]}"#,
                    415,
                    "unsupported_media_type",
                    "Content-Type",
                )
            });
        }
    }

    let client = server.rest();
    for case in cases {
        let what = format!(
            "{} {}… {:?}",
            case.method,
            case.path.chars().take(60).collect::<String>(),
            String::from_utf8_lossy(&case.body)
                .chars()
                .take(80)
                .collect::<String>()
        );
        let mut request = client
            .request(case.method.clone(), &case.path)
            .body(case.body);
        if let Some(content_type) = case.content_type {
            request = request.header("content-type", content_type);
        }
        let response = no_hang(request.send()).await;
        assert_eq!(response.status().as_u16(), case.status, "{what}");
        let text = response.text();
        if case.code.is_empty() {
            continue;
        }
        let reply: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
        assert_eq!(reply["error"]["code"], case.code, "{what}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert_names(message, case.word, &what);
    }
    // Beyond what an HTTP/1 request target may be at all (65534 bytes):
    // hyper refuses it itself (the JSON body it gets: `refusals.rs`).
    let request = format!(
        "GET {sessions}/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {APP_TOKEN}\r\n\r\n",
        "a".repeat(100_000)
    );
    assert_eq!(
        raw_status_line(&server, request.as_bytes()).await,
        "HTTP/1.1 414 URI Too Long"
    );
    // Nothing was created by the corpus, and the live session still serves.
    assert_eq!(server.hub.session_count(), 1);
    assert_serves(&server).await;
}

#[tokio::test]
async fn the_websocket_bridge_answers_every_bad_frame_and_stays_up() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    server
        .wait_for_session(&session.id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    let id = &session.id;
    let text = |frame: &str| Message::Text(frame.to_owned().into());
    let frame = |value: Value| Message::Text(value.to_string().into());
    let long_id = "r".repeat(100_000);
    // One case a line.
    #[rustfmt::skip]
    let cases: Vec<(Message, &str)> = vec![
        (Message::Binary(b"{\"type\":\"pong\"}".to_vec().into()), "binary frames"),
        (text("not json"), "not a JSON object"),
        (text(""), "not a JSON object"),
        (text("[1, 2]"), "not a JSON object"),
        (text("\"invoke_result\""), "not a JSON object"),
        (text("{"), "not a JSON object"),
        (text("{} {}"), "not a JSON object"),
        (text("{}"), "has no \"type\""),
        (frame(json!({"type": 5})), "\"type\" must be a string"),
        (frame(json!({"type": null})), "has no \"type\""),
        (frame(json!({"type": "nonsense"})), "unknown frame type"),
        (frame(json!({"type": "bell\u{7}\r\n".repeat(50)})), "unknown frame type"),
        (frame(json!({"type": "invoke_result"})), "has no \"request_id\""),
        (frame(json!({"type": "invoke_result", "request_id": 5})), "\"request_id\" must be a string"),
        (frame(json!({"type": "invoke_result", "requestId": {"a": 1}})), "\"requestId\" must be a string"),
        (frame(json!({"type": "invoke_result", "request_id": "a", "requestId": "b"})), "two spellings"),
        // Results and progress for ids nobody waits for, short or huge.
        (frame(json!({"type": "invoke_result", "request_id": format!("{id}:99"), "ok": true})), "no call is waiting"),
        (frame(json!({"type": "invoke_result", "request_id": long_id, "ok": true})), "no call is waiting"),
        (frame(json!({"type": "invoke_result", "request_id": "a\r\nforged log line", "ok": true})), "no call is waiting"),
        (frame(json!({"type": "invoke_result", "request_id": FORGED_FIELDS, "ok": true})), "no call is waiting"),
        (frame(json!({"type": "progress", "request_id": FORGED_LINE, "progress": 1})), "no call is waiting"),
        (frame(json!({"type": FORGED_FIELDS})), "unknown frame type"),
        (frame(json!({"type": "progress", "request_id": format!("{id}:98"), "progress": 1})), "no call is waiting"),
        // Wrongly typed fields of a frame that names a call.
        (frame(json!({"type": "invoke_result", "request_id": format!("{id}:97"), "ok": "yes"})), "\"ok\" must be a boolean"),
        (text(&format!("{{\"type\":\"invoke_result\",\"request_id\":\"{id}:96\",\"ok\":[\r\n1,\n2]}}")), "\"ok\" must be a boolean"),
        (frame(json!({"type": "invoke_result", "request_id": long_id, "ok": "x".repeat(100_000)})), "\"ok\" must be a boolean"),
        (frame(json!({"type": "progress", "request_id": format!("{id}:95"), "progress": "half"})), "\"progress\" must be a number"),
        (frame(json!({"type": "progress", "request_id": format!("{id}:94")})), "no numeric \"progress\""),
        (frame(json!({"type": "progress", "request_id": format!("{id}:93"), "progress": 1, "total": "all"})), "\"total\" must be a number"),
        (text(&format!("{{\"type\":\"progress\",\"request_id\":\"{id}:92\",\"progress\":1e400}}")), "\"progress\" must be a number"),
        // Tool updates.
        (frame(json!({"type": "update_tools"})), "has no \"tools\""),
        (frame(json!({"type": "update_tools", "tools": "x".repeat(100_000)})), "not a tool array"),
        (frame(json!({"type": "update_tools", "tools": [{"name": "bad name"}]})), "not a valid MCP tool name"),
        (frame(json!({"type": "update_tools", "tools": [{"name": "n".repeat(100_000)}]})), "not a valid MCP tool name"),
        // Deeply nested JSON: kept as it is where a value passes through
        // (here to no waiting call), refused where a string is expected.
        (text(&format!("{{\"type\":\"invoke_result\",\"request_id\":\"{id}:91\",\"content\":{}}}", nested(10_000))), "no call is waiting"),
        (text(&format!("{{\"type\":\"invoke_result\",\"request_id\":{}}}", nested(10_000))), "\"request_id\" must be a string"),
    ];
    for (message, word) in cases {
        let what = format!("{:.80}", format!("{message:?}"));
        app.send(message).await;
        let reply = no_hang(app.next_json()).await.expect("the bridge stays up");
        assert_eq!(reply["type"], "error", "{what}: {reply}");
        let message = reply["message"].as_str().unwrap_or_default();
        assert_names(message, word, &what);
    }
    // A bridge for a session that does not exist, however long its id, is
    // closed with 4404 and a reason a close frame can carry.
    for unknown in [
        "no-such-session".to_owned(),
        "u".repeat(300),
        "é".repeat(200),
    ] {
        let url = WsApp::url(&server, &unknown);
        let mut stranger = WsApp::connect(&url, Some(APP_TOKEN))
            .await
            .expect("upgraded");
        let (code, reason) = no_hang(stranger.closed()).await;
        assert_eq!(code, 4404, "{reason}");
        assert!(
            reason.len() <= 123 && reason.starts_with("session"),
            "{reason}"
        );
    }
    // The same bridge still carries calls.
    let serving = serve_app(app, echo);
    assert_echoes(&server, &session.id).await;
    serving.abort();

    // A message over the size limit (1 MiB here) ends that bridge only.
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    server
        .wait_for_session(&session.id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    let oversized = json!({"type": "pong", "pad": "x".repeat(1024 * 1024)});
    app.send(frame(oversized)).await;
    let (code, reason) = no_hang(app.closed()).await;
    assert_eq!(code, 1009, "{reason}");
    server
        .wait_for_session(&session.id, "the bridge detaching", |session| {
            !session.bridge_connected
        })
        .await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("a new bridge");
    let serving = serve_app(app, echo);
    server
        .wait_for_session(&session.id, "the bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    assert_echoes(&server, &session.id).await;
    serving.abort();
    assert_serves(&server).await;
}

/// One bad MCP request and the JSON-RPC refusal it must get.
struct McpCase {
    body: Vec<u8>,
    headers: Vec<(&'static str, &'static str)>,
    status: u16,
    /// The JSON-RPC error code; 0 for an answer without one.
    code: i64,
    word: &'static str,
}

fn mcp(body: impl Into<Vec<u8>>, status: u16, code: i64, word: &'static str) -> McpCase {
    McpCase {
        body: body.into(),
        headers: Vec::new(),
        status,
        code,
        word,
    }
}

#[tokio::test]
async fn mcp_refuses_every_bad_request_in_json_rpc_terms_and_goes_on_serving() {
    let server = TestServer::start().await;
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([{"name": "echo_text"}]),
        echo,
    )
    .await;
    let url = app.session.mcp_url.clone();
    let request = |method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
            .to_string()
            .into_bytes()
    };
    let initialize = initialize_body(1, "2025-11-25").to_string();
    // One case a line.
    #[rustfmt::skip]
    let cases = vec![
        // Not JSON-RPC.
        mcp("not json", 400, -32700, "not JSON"),
        mcp("", 400, -32700, "not JSON"),
        mcp(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec(), 400, -32700, "not JSON"),
        mcp(format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"a\":{}}}}}", nested(10_000)), 200, -32602, "deeper than 128"),
        mcp(format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{{\"name\":\"echo_text\",\"arguments\":{{\"a\":{}}}}}}}", nested(130)), 200, -32602, "deeper than 128"),
        mcp("5", 400, -32600, "not a JSON-RPC request"),
        mcp("[]", 400, -32600, "not a JSON-RPC request"),
        mcp(format!("[{initialize},{initialize}]"), 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"jsonrpc":"2.0","id":1}"#, 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#, 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"id":1,"method":"tools/list"}"#, 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#, 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"tools/list"}"#, 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"jsonrpc":"2.0","id":1,"method":"no/such/method"}"#, 200, -32601, "no/such/method"),
        // tools/call whose params do not fit.
        mcp(request("tools/call", json!(null)), 200, -32602, "Invalid params"),
        mcp(request("tools/call", json!([])), 200, -32602, "Invalid params"),
        mcp(request("tools/call", json!({"name": 5})), 200, -32602, "Invalid params"),
        mcp(request("tools/call", json!({"name": "echo_text", "arguments": [1]})), 200, -32602, "Invalid params"),
        mcp(request("tools/call", json!({"name": "no_such_tool"})), 200, -32602, "unknown tool"),
        mcp(request("tools/call", json!({"name": "bell\u{7}\r\n".repeat(20)})), 200, -32602, "unknown tool"),
        mcp(request("tools/call", json!({"name": "n".repeat(100_000)})), 200, -32602, "unknown tool"),
        mcp(request("tools/call", json!({"name": FORGED_FIELDS})), 200, -32602, "unknown tool"),
        mcp(request("tools/call", json!({"name": FORGED_LINE})), 200, -32602, "unknown tool"),
        // Notifications with bad params: refused when they do not fit the
        // notification, accepted (and ignored) when they name no call.
        mcp(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#, 400, -32600, "not a JSON-RPC request"),
        mcp(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{"a":[1]}}}"#, 202, 0, ""),
        mcp(r#"{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}"#, 400, -32600, "not a JSON-RPC request"),
        // Wrong headers and protocol versions.
        McpCase {
            headers: vec![("accept", "text/html")],
            ..mcp(initialize.clone(), 406, -32600, "Accept")
        },
        McpCase {
            headers: vec![("content-type", "text/plain")],
            ..mcp(initialize.clone(), 415, -32600, "Content-Type")
        },
        McpCase {
            headers: vec![("mcp-protocol-version", "1999-01-01")],
            ..mcp(request("tools/list", json!({})), 400, -32600, "1999-01-01")
        },
        // Oversized: the test server's limit is 1 MiB.
        mcp(vec![b' '; 2 * 1024 * 1024], 413, 0, "body_too_large"),
    ];
    let client = server.rest().token(OPENCLAW_TOKEN);
    for case in cases {
        let what = format!(
            "{:.100} {:?}",
            String::from_utf8_lossy(&case.body),
            case.headers
        );
        let mut request = client.mcp_raw(&url, case.body);
        for (name, value) in &case.headers {
            request = request.header(name, value);
        }
        let response = no_hang(request.send()).await;
        let status = response.status().as_u16();
        let text = response.text();
        assert_eq!(status, case.status, "{what}: {text:.300}");
        if case.code == 0 {
            if !case.word.is_empty() {
                assert_names(&text, case.word, &what);
            }
            continue;
        }
        let reply: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{what}: {text}"));
        assert_eq!(reply["error"]["code"], case.code, "{what}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert_names(message, case.word, &what);
    }

    // Session routing refusals, in the edge's JSON error shape.
    let long_id = "s".repeat(60_000);
    for (path, header, status, code) in [
        ("/v1/mcp", None, 400, "missing_session_id"),
        ("/v1/mcp", Some("a\tb"), 404, "unknown_session"),
        ("/v1/mcp/", Some(long_id.as_str()), 404, "unknown_session"),
        ("/v1/mcp/a%0D%0Ab", None, 404, "unknown_session"),
        ("/v1/mcp/%FF", None, 400, "invalid_path"),
    ] {
        let mut request = client.mcp(path, &json!({}));
        if let Some(id) = header {
            request = request.header("mcp-session-id", id);
        }
        let response = no_hang(request.send()).await;
        assert_eq!(response.status().as_u16(), status, "{path}");
        let reply = response.json();
        assert_eq!(reply["error"]["code"], code, "{path}: {reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert_names(message, "", path);
    }
    let get = no_hang(client.get(&url).send()).await;
    assert_eq!(get.status(), 405);

    // A huge string id is a valid JSON-RPC id: answered, and echoed.
    let huge_id = "i".repeat(100_000);
    let body = json!({"jsonrpc": "2.0", "id": huge_id, "method": "tools/list"});
    let reply = no_hang(client.mcp(&url, &body).send()).await.json();
    assert_eq!(reply["id"], json!(huge_id));
    assert!(reply["result"]["tools"].is_array(), "{reply:.300}");

    assert_echoes(&server, &app.session.id).await;
}

/// The status of a raw gRPC call whose request body is `body` (one or more
/// length-prefixed messages, or anything else), as the server's trailers
/// (or trailers-only headers) give it.
async fn raw_grpc(server: &TestServer, method: &str, body: Vec<u8>) -> tonic::Status {
    use http_body_util::BodyExt;
    let mut sender = openclaw_proxy_tests::h2c(server.addr).await;
    let request = hyper::Request::post(format!("http://{}{method}", server.addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {APP_TOKEN}"))
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .expect("request");
    let response = no_hang(sender.send_request(request))
        .await
        .expect("response");
    if let Some(status) = tonic::Status::from_header_map(response.headers()) {
        return status;
    }
    let collected = no_hang(response.into_body().collect()).await.expect("body");
    collected
        .trailers()
        .and_then(tonic::Status::from_header_map)
        .expect("a grpc-status")
}

/// `message` framed as one gRPC message (uncompressed).
fn grpc_frame(message: &[u8]) -> Vec<u8> {
    let length = u32::try_from(message.len()).expect("small message");
    let mut frame = vec![0];
    frame.extend_from_slice(&length.to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// Opens `Attach` and sends `messages`; the status the stream ends with
/// before (or instead of) `attached`.
async fn attach_refused(server: &TestServer, messages: Vec<proto::AppMessage>) -> tonic::Status {
    let mut client = proto::bridge_service_client::BridgeServiceClient::new(server.channel().await);
    let outbound = futures_util::stream::iter(messages);
    let mut inbound = match no_hang(client.attach(with_token(outbound, APP_TOKEN))).await {
        Err(status) => return status,
        Ok(response) => response.into_inner(),
    };
    match no_hang(inbound.message()).await {
        Err(status) => status,
        Ok(other) => panic!("expected a refusal, got {other:?}"),
    }
}

fn hello(session_id: &str) -> proto::AppMessage {
    proto::AppMessage {
        kind: Some(app_message::Kind::Hello(proto::Hello {
            session_id: session_id.to_owned(),
        })),
    }
}

/// Asserts a status's code, and that its message names the problem.
fn assert_status(status: &tonic::Status, code: Code, word: &str, what: &str) {
    assert_eq!(status.code(), code, "{what}: {status:?}");
    assert_names(status.message(), word, what);
}

#[tokio::test]
async fn grpc_refuses_every_bad_message_with_its_own_status_and_goes_on_serving() {
    let server = TestServer::start().await;
    let live = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let session_service = "/openclaw.proxy.v1.SessionService";
    let attach = "/openclaw.proxy.v1.BridgeService/Attach";
    let garbage = grpc_frame(&[0xff; 8]);
    // Field 1 (a string or a message everywhere here) sent as a varint.
    let wrong_wire_type = grpc_frame(&[0x08, 0x01]);
    // Field 1 as a string of bytes that are not UTF-8.
    let not_utf8 = grpc_frame(&[0x0a, 0x02, 0xff, 0xfe]);
    // A length-delimited field that claims more bytes than follow.
    let cut_field = grpc_frame(&[0x0a, 0x7f, b'a']);
    // One case a line.
    #[rustfmt::skip]
    let raw_cases: Vec<(String, Vec<u8>, Code, &str)> = vec![
        (format!("{session_service}/CreateSession"), garbage.clone(), Code::InvalidArgument, "protobuf"),
        (format!("{session_service}/CreateSession"), wrong_wire_type.clone(), Code::InvalidArgument, "protobuf"),
        (format!("{session_service}/GetSession"), garbage.clone(), Code::InvalidArgument, "protobuf"),
        (format!("{session_service}/GetSession"), not_utf8.clone(), Code::InvalidArgument, "protobuf"),
        (format!("{session_service}/DeleteSession"), cut_field.clone(), Code::InvalidArgument, "protobuf"),
        (format!("{session_service}/UpdateTools"), wrong_wire_type.clone(), Code::InvalidArgument, "protobuf"),
        (attach.to_owned(), garbage.clone(), Code::InvalidArgument, "protobuf"),
        (attach.to_owned(), not_utf8.clone(), Code::InvalidArgument, "protobuf"),
        (attach.to_owned(), grpc_frame(&[0x0a, 0x02, 0x0a, 0x7f]), Code::InvalidArgument, "protobuf"),
        // Framing tonic refuses itself, and garbage to its own health
        // service: tonic's INTERNAL, in tonic's words (docs/security.md, "gRPC
        // framing"); the server serves on after each.
        (format!("{session_service}/GetSession"), vec![0, 0, 0, 0, 10, 0x0a], Code::Internal, ""),
        (format!("{session_service}/GetSession"), vec![], Code::Internal, ""),
        (format!("{session_service}/GetSession"), vec![2, 0, 0, 0, 0], Code::Internal, ""),
        ("/grpc.health.v1.Health/Check".to_owned(), garbage.clone(), Code::Internal, ""),
        (format!("{session_service}/GetSession"), vec![1, 0, 0, 0, 0], Code::Internal, ""),
        // Reflection stops reading at a message it cannot decode and ends
        // its stream as done (tonic-reflection's behaviour, docs/security.md).
        ("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo".to_owned(), garbage.clone(), Code::Ok, ""),
    ];
    for (method, body, code, word) in raw_cases {
        let what = format!("{method} {:?}", &body[..body.len().min(12)]);
        let status = raw_grpc(&server, &method, body).await;
        assert_status(&status, code, word, &what);
    }

    // Attach: wrong message kinds, empty and hostile session ids.
    let pong = proto::AppMessage {
        kind: Some(app_message::Kind::Pong(proto::Pong { nonce: 1 })),
    };
    let long_id = "s".repeat(100_000);
    let attach_cases: Vec<(Vec<proto::AppMessage>, Code, &str)> = vec![
        (vec![pong.clone()], Code::InvalidArgument, "hello"),
        (
            vec![proto::AppMessage { kind: None }],
            Code::InvalidArgument,
            "hello",
        ),
        (vec![], Code::InvalidArgument, "ended before"),
        (
            vec![hello("")],
            Code::InvalidArgument,
            "session_id is empty",
        ),
        (
            vec![hello("no-such-session")],
            Code::NotFound,
            "does not exist",
        ),
        (
            vec![hello("a\r\nforged\u{7}")],
            Code::NotFound,
            "does not exist",
        ),
        (vec![hello(&long_id)], Code::NotFound, "does not exist"),
        (vec![hello(FORGED_FIELDS)], Code::NotFound, "does not exist"),
    ];
    for (messages, code, word) in attach_cases {
        let what = format!("Attach {:.100}", format!("{messages:?}"));
        let status = attach_refused(&server, messages).await;
        assert_status(&status, code, word, &what);
    }

    // Session RPCs with empty and hostile ids, and hostile tools.
    let mut sessions =
        proto::session_service_client::SessionServiceClient::new(server.channel().await);
    for id in ["", "a\r\nb", long_id.as_str()] {
        let (code, word) = (Code::NotFound, "does not exist");
        let what = format!("{:.40}", format!("{id:?}"));
        let request = proto::GetSessionRequest {
            session_id: id.into(),
        };
        let status = no_hang(sessions.get_session(with_token(request, APP_TOKEN)))
            .await
            .expect_err("no such session");
        assert_status(&status, code, word, &format!("GetSession {what}"));
        let request = proto::UpdateToolsRequest {
            session_id: id.into(),
            tools: vec![],
            ..Default::default()
        };
        let status = no_hang(sessions.update_tools(with_token(request, APP_TOKEN)))
            .await
            .expect_err("no such session");
        assert_status(&status, code, word, &format!("UpdateTools {what}"));
    }
    let huge_name = "n".repeat(100_000);
    let huge_type = format!(r#"{{"type":"{}"}}"#, "x".repeat(100_000));
    let deep_schema = format!(r#"{{"a":{}}}"#, nested(10_000));
    let tool_cases: Vec<(proto::ToolDefinition, &str)> = vec![
        (tool("has space", ""), "not a valid MCP tool name"),
        (tool(&huge_name, ""), "not a valid MCP tool name"),
        (tool(FORGED_FIELDS, ""), "not a valid MCP tool name"),
        (tool("bell\u{7}", ""), "not a valid MCP tool name"),
        (tool("t", "[1]"), "must be a JSON object"),
        (tool("t", "{"), "not valid JSON"),
        (tool("t", &huge_type), "expected \"object\""),
        (tool("t", &deep_schema), "recursion limit"),
    ];
    for (definition, word) in tool_cases {
        let what = format!("CreateSession with {:.80}", format!("{definition:?}"));
        let status = no_hang(
            sessions.create_session(with_token(session_request(vec![definition]), APP_TOKEN)),
        )
        .await
        .expect_err("refused");
        assert_status(&status, Code::InvalidArgument, word, &what);
    }
    let status = no_hang(sessions.create_session(with_token(
        proto::CreateSessionRequest {
            metadata: None,
            tools: vec![],
            ..Default::default()
        },
        APP_TOKEN,
    )))
    .await
    .expect_err("no metadata");
    assert_status(
        &status,
        Code::InvalidArgument,
        "device_id",
        "CreateSession without metadata",
    );

    // On an attached bridge: messages the proxy cannot use get a notice and
    // the bridge stays up.
    let mut bridge = GrpcBridge::open(server.channel().await, APP_TOKEN, &live.id)
        .await
        .expect("bridge");
    let result = |request_id: &str| {
        app_message::Kind::Result(proto::ToolResult {
            request_id: request_id.into(),
            ok: true,
            content_json: "{}".into(),
            error: String::new(),
        })
    };
    let bridge_cases: Vec<(app_message::Kind, &str)> = vec![
        (result(&format!("{}:99", live.id)), "no call is waiting"),
        (result(&long_id), "no call is waiting"),
        (result("a\r\nforged"), "no call is waiting"),
        (result(FORGED_FIELDS), "no call is waiting"),
        (result(FORGED_LINE), "no call is waiting"),
        (
            app_message::Kind::Progress(proto::ToolProgress {
                request_id: long_id.clone(),
                progress: 1.0,
                total: None,
                message: "m".repeat(100_000),
            }),
            "no call is waiting",
        ),
        (
            app_message::Kind::UpdateTools(proto::UpdateTools {
                tools: vec![tool(&huge_name, "")],
                ..Default::default()
            }),
            "not a valid MCP tool name",
        ),
    ];
    for (kind, word) in bridge_cases {
        let what = format!("bridge {:.100}", format!("{kind:?}"));
        bridge.send(kind).await;
        match no_hang(bridge.next()).await {
            Received::Notice(notice) => assert_names(&notice.message, word, &what),
            other => panic!("{what}: expected a notice, got {other:?}"),
        }
    }
    // A second hello on an attached bridge changes nothing.
    bridge
        .send(app_message::Kind::Hello(proto::Hello {
            session_id: "another".into(),
        }))
        .await;
    let serving = bridge.serve_echo();
    assert_echoes(&server, &live.id).await;
    serving.abort();
    assert_serves(&server).await;
}
