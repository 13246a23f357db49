//! Gateway mode: the real binary, spoken to by rmcp's client over stdio,
//! against a Gateway stand-in on loopback that records what it receives. The
//! stand-in produces what the real Gateway (`real_gateway.rs`) cannot be made
//! to: 401, 403 `tool_call_blocked`, 429 with `Retry-After`, odd result shapes.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use crate::common::{BINARY, command, startup_stderr};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const TOKEN: &str = "gw-token";

/// What the Gateway stand-in received: authorization header and body.
type Received = Arc<Mutex<Vec<(String, Value)>>>;

/// A Gateway on `127.0.0.1:0` answering by tool name; stops when dropped.
struct FakeGateway {
    url: String,
    received: Received,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn invoke(
    State(received): State<Received>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    received
        .lock()
        .expect("lock")
        .push((auth.clone(), body.clone()));
    if auth != format!("Bearer {TOKEN}") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(
                json!({"ok": false, "error": {"type": "unauthorized", "message": "Unauthorized"}}),
            ),
        )
            .into_response();
    }
    let ok = |result: Value| Json(json!({"ok": true, "result": result})).into_response();
    match body["tool"].as_str().unwrap_or_default() {
        "web_search" => ok(json!({
            "content": [{"type": "text", "text": "ignored when details exist"}],
            "details": {"results": [{"title": "Rust", "url": "https://www.rust-lang.org"}]}
        })),
        "web_fetch" => ok(json!({"content": [
            {"type": "text", "text": "page text"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        ]})),
        "pdf" => ok(json!("plain summary")),
        "canvas" => ok(json!({"status": "shown"})),
        "sessions_send" => ok(json!({"details": "sent"})),
        "browser" => (StatusCode::NOT_FOUND, Json(json!({"ok": false, "error": {"type": "not_found", "message": "Tool not available: browser"}}))).into_response(),
        "message" => (StatusCode::FORBIDDEN, Json(json!({"ok": false, "error": {"type": "tool_call_blocked", "message": "approval required"}}))).into_response(),
        "rooms_list" => (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "7")], Json(json!({"ok": false, "error": {"message": "slow down"}}))).into_response(),
        "rooms_join" => Json(json!({"ok": false, "error": {"type": "tool_error", "message": "room is full"}})).into_response(),
        other => (StatusCode::BAD_REQUEST, format!("unexpected tool {other}")).into_response(),
    }
}

impl FakeGateway {
    async fn start() -> Self {
        let received: Received = Arc::default();
        let app = axum::Router::new()
            .route("/tools/invoke", axum::routing::post(invoke))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Self {
            url: format!("http://{addr}"),
            received,
            _stop: stop,
        }
    }

    fn last(&self) -> (String, Value) {
        self.received
            .lock()
            .expect("lock")
            .last()
            .cloned()
            .expect("a request")
    }
}

/// The binary with the stand-in: discovery off, since the stand-in does not
/// speak the Gateway's WebSocket protocol (one test shows the fallback).
async fn connect(args: &[&str], env: &[(&str, &str)]) -> RunningService<rmcp::RoleClient, ()> {
    let mut full = vec!["gateway", "--discovery", "off"];
    full.extend_from_slice(args);
    ().serve(TokioChildProcess::new(command(&full, env)).expect("spawn"))
        .await
        .expect("MCP handshake over stdio")
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().expect("object").clone())
}

fn text(result: &CallToolResult) -> String {
    openclaw_proxy_tests::texts(result).join("\n")
}

fn write_file(dir: &std::path::Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).expect("write");
    path.display().to_string()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "openclaw-proxy-stdio-{name}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("mkdir");
    dir
}

#[test]
fn missing_token_is_a_clear_error_with_status_2() {
    let output = std::process::Command::new(BINARY)
        .arg("gateway")
        .env_clear()
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("OPENCLAW_GATEWAY_TOKEN"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing on stdout but MCP");

    let output = std::process::Command::new(BINARY)
        .arg("gateway")
        .env_clear()
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .env("OPENCLAW_MCP_TOOLS", "web_search,teleport")
        .env("OPENCLAW_MCP_DISCOVERY", "off")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("\"teleport\"") && stderr.contains("web_fetch"),
        "{stderr}"
    );

    let output = std::process::Command::new(BINARY)
        .args(["gateway", "--discovery", "maybe"])
        .env_clear()
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not on or off"), "{stderr}");
}

#[tokio::test]
async fn lists_builtin_tools_with_session_key_rules_and_filter() {
    let gateway = FakeGateway::start().await;
    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| &*tool.name).collect();
    assert_eq!(
        names,
        [
            "web_search",
            "web_fetch",
            "browser",
            "pdf",
            "message",
            "canvas",
            "sessions_send",
            "sessions_list",
            "sessions_history",
            "session_status",
            "sessions_search",
            "agents_list",
            "memory_search",
            "memory_get"
        ]
    );
    let search = &tools[0];
    assert_eq!(
        search.input_schema["properties"]["sessionKey"]["type"],
        "string"
    );
    assert_eq!(search.input_schema["required"], json!(["query"]));
    assert_eq!(search.input_schema["additionalProperties"], json!(true));
    for property in [
        "count",
        "country",
        "language",
        "freshness",
        "date_after",
        "date_before",
    ] {
        assert!(
            search.input_schema["properties"][property].is_object(),
            "{property}"
        );
    }
    let browser = &tools[2];
    assert_eq!(
        browser.input_schema["properties"]["coordinate"]["type"],
        "array"
    );
    let send = &tools[6];
    assert_eq!(send.input_schema["required"], json!(["message"]));
    assert!(
        send.input_schema["properties"]["sessionKey"]["description"]
            .as_str()
            .expect("own description")
            .contains("target session")
    );
    client.cancel().await.expect("close");

    let client = connect(
        &["--tools", "web_fetch,pdf"],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["web_fetch", "pdf"]);
}

#[tokio::test]
async fn calls_carry_token_args_and_session_key_rules() {
    let gateway = FakeGateway::start().await;
    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
            ("OPENCLAW_MCP_SESSION_KEY", "agent:main"),
        ],
    )
    .await;

    client
        .call_tool(call(
            "web_search",
            json!({"query": "rust", "count": 3, "extra": true, "sessionKey": "chat:42"}),
        ))
        .await
        .expect("call");
    let (auth, body) = gateway.last();
    assert_eq!(auth, format!("Bearer {TOKEN}"));
    assert_eq!(
        body,
        json!({"tool": "web_search", "args": {"query": "rust", "count": 3, "extra": true}, "sessionKey": "chat:42"})
    );

    client
        .call_tool(call("pdf", json!({"pdf": "/tmp/a.pdf"})))
        .await
        .expect("call");
    let (_, body) = gateway.last();
    assert_eq!(
        body,
        json!({"tool": "pdf", "args": {"pdf": "/tmp/a.pdf"}, "sessionKey": "agent:main"})
    );

    client
        .call_tool(call(
            "sessions_send",
            json!({"sessionKey": "other", "message": "hi"}),
        ))
        .await
        .expect("call");
    let (_, body) = gateway.last();
    assert_eq!(
        body,
        json!({"tool": "sessions_send", "args": {"sessionKey": "other", "message": "hi"}, "sessionKey": "agent:main"})
    );
    client.cancel().await.expect("close");

    // Without a default, a call without sessionKey sends none.
    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .await;
    client
        .call_tool(call("pdf", json!({})))
        .await
        .expect("call");
    assert_eq!(gateway.last().1, json!({"tool": "pdf", "args": {}}));
}

#[tokio::test]
async fn results_are_mapped() {
    let gateway = FakeGateway::start().await;
    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .await;

    let result = client
        .call_tool(call("web_search", json!({"query": "rust"})))
        .await
        .expect("call");
    let details = json!({"results": [{"title": "Rust", "url": "https://www.rust-lang.org"}]});
    // The proxy's one mapping: an object is structured content plus its JSON.
    assert_eq!(result.structured_content, Some(details.clone()));
    assert_eq!(text(&result), details.to_string());

    let result = client
        .call_tool(call("web_fetch", json!({"url": "https://example.com"})))
        .await
        .expect("call");
    assert_eq!(result.content.len(), 2);
    assert_eq!(text(&result), "page text");
    assert!(
        matches!(&result.content[1], ContentBlock::Image(image) if image.mime_type == "image/png")
    );

    let result = client
        .call_tool(call("pdf", json!({})))
        .await
        .expect("call");
    assert_eq!(text(&result), "plain summary");

    let result = client
        .call_tool(call("canvas", json!({"action": "present"})))
        .await
        .expect("call");
    assert_eq!(text(&result), json!({"status": "shown"}).to_string());
    assert_eq!(result.structured_content, Some(json!({"status": "shown"})));

    let result = client
        .call_tool(call("sessions_send", json!({"message": "m"})))
        .await
        .expect("call");
    assert_eq!(text(&result), "sent");
    assert_ne!(result.is_error, Some(true));
}

#[tokio::test]
async fn failures_are_error_results_with_hints() {
    let gateway = FakeGateway::start().await;
    let dir = temp_dir("failures");
    let custom = write_file(
        &dir,
        "rooms.json",
        r#"{"tools": [{"name": "rooms_list", "description": "List rooms.", "parameters": {"type": "object"}},
                      {"name": "rooms_join", "parameters": {"type": "object", "properties": {"room": {"type": "string"}}}}]}"#,
    );
    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
            ("OPENCLAW_MCP_CUSTOM_TOOLS", &custom),
        ],
    )
    .await;
    let cases = [
        (
            "browser",
            vec!["Tool not available: browser", "gateway.tools.allow", "404"],
        ),
        (
            "message",
            vec!["approval required", "tool_call_blocked", "403"],
        ),
        (
            "rooms_list",
            vec!["slow down", "retry after 7 seconds", "429"],
        ),
        ("rooms_join", vec!["room is full"]),
    ];
    for (tool, needles) in cases {
        let result = client
            .call_tool(call(tool, json!({"action": "x"})))
            .await
            .expect("call");
        assert_eq!(result.is_error, Some(true), "{tool}");
        let text = text(&result);
        for needle in needles {
            assert!(text.contains(needle), "{tool}: {text:?} lacks {needle:?}");
        }
    }
    client.cancel().await.expect("close");

    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", "wrong"),
        ],
    )
    .await;
    let result = client
        .call_tool(call("pdf", json!({})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("rejected the token (401)")
            && text(&result).contains("OPENCLAW_GATEWAY_TOKEN")
    );
    client.cancel().await.expect("close");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    let client = connect(
        &[],
        &[
            ("OPENCLAW_GATEWAY_URL", &closed),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .await;
    let result = client
        .call_tool(call("pdf", json!({})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains(&format!("Cannot reach the OpenClaw Gateway at {closed}")),
        "{}",
        text(&result)
    );
}

#[tokio::test]
async fn config_file_custom_tools_and_environment_precedence() {
    let gateway = FakeGateway::start().await;
    let dir = temp_dir("config");
    write_file(
        &dir,
        "pdf.json",
        r#"{"name": "pdf", "description": "Our own pdf.", "parameters": {"type": "object", "properties": {"file": {"type": "string"}}}}"#,
    );
    write_file(
        &dir,
        "single.json",
        r#"{"name": "rooms_join", "description": "Join a room.", "parameters": {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]}}"#,
    );
    let config = write_file(
        &dir,
        "config.json",
        &json!({
            "gateway": {"url": "http://127.0.0.1:9", "token": TOKEN},
            "tools": ["pdf"],
            "customTools": ["single.json", "pdf.json"]
        })
        .to_string(),
    );
    // The environment's URL wins over the file's; the file gives the token,
    // the tool selection and a custom tool file relative to itself.
    let client = connect(
        &[],
        &[
            ("OPENCLAW_MCP_CONFIG", &config),
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
        ],
    )
    .await;
    let tools = client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|tool| &*tool.name).collect();
    // A custom tool replaces the built-in of the same name, in its place.
    assert_eq!(names, ["pdf", "rooms_join"]);
    assert_eq!(tools[0].description.as_deref(), Some("Our own pdf."));
    assert!(tools[0].input_schema["properties"]["file"].is_object());
    assert_eq!(tools[1].input_schema["required"], json!(["room"]));
    assert!(tools[1].input_schema["properties"]["sessionKey"].is_object());
    let result = client
        .call_tool(call("rooms_join", json!({"room": "lobby"})))
        .await
        .expect("call");
    assert!(text(&result).contains("room is full"));
    assert_eq!(
        gateway.last().1,
        json!({"tool": "rooms_join", "args": {"room": "lobby"}})
    );
}

#[test]
fn malformed_custom_tool_files_are_refused_at_start() {
    let dir = temp_dir("malformed");
    let cases = [
        ("broken.json", "{\"name\": ", "not valid JSON"),
        (
            "noname.json",
            r#"{"tools": [{"description": "x"}]}"#,
            "tools[0]: \"name\" is missing",
        ),
        (
            "badschema.json",
            r#"{"name": "t", "parameters": {"type": "string"}}"#,
            "must be an object schema",
        ),
        (
            "dup.json",
            r#"{"tools": [{"name": "rooms"}, {"name": "rooms"}]}"#,
            "defined twice",
        ),
    ];
    for (name, content, needle) in cases {
        let path = write_file(&dir, name, content);
        let output = std::process::Command::new(BINARY)
            .arg("gateway")
            .env_clear()
            .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
            .env("OPENCLAW_MCP_CUSTOM_TOOLS", &path)
            .output()
            .expect("run");
        assert_eq!(output.status.code(), Some(2), "{name}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{name}: {stderr}");
        if needle != "defined twice" {
            assert!(
                stderr.contains(&path),
                "{name}: the path is named: {stderr}"
            );
        }
    }
    let missing = dir.join("missing.json").display().to_string();
    let output = std::process::Command::new(BINARY)
        .arg("gateway")
        .env_clear()
        .env("OPENCLAW_GATEWAY_TOKEN", TOKEN)
        .env("OPENCLAW_MCP_CUSTOM_TOOLS", &missing)
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains(&missing));
}

#[tokio::test]
async fn without_discovery_the_builtin_list_is_served_and_stderr_says_why() {
    // The stand-in has no WebSocket protocol: discovery fails, the reason is
    // on stderr, and the built-in list is served.
    let gateway = FakeGateway::start().await;
    let output = command(
        &["gateway"],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .expect("run");
    assert!(output.stdout.is_empty(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("tool discovery is not possible, serving the built-in tool list")
            && stderr.contains("instead of a WebSocket"),
        "{stderr}"
    );

    // Turned off, discovery is not tried and nothing is said.
    let output = command(
        &["gateway", "--discovery", "off"],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .expect("run");
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("discovery"),
        "{output:?}"
    );
}

/// An MCP client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct ListChanges(Arc<tokio::sync::watch::Sender<u32>>);

impl ListChanges {
    /// How many notifications arrived so far.
    pub fn count(&self) -> u32 {
        *self.0.borrow()
    }

    /// Waits (bounded) until at least `count` notifications arrived.
    pub async fn wait_for(&self, count: u32) {
        let mut seen = self.0.subscribe();
        openclaw_proxy_tests::no_hang(seen.wait_for(|n| *n >= count))
            .await
            .expect("notifications/tools/list_changed");
    }
}

impl rmcp::ClientHandler for ListChanges {
    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        self.0.send_modify(|n| *n += 1);
    }
}

/// Connects a client that counts list changes to `gateway` with `args`.
pub async fn connect_watching(
    args: &[&str],
    env: &[(&str, &str)],
) -> (RunningService<rmcp::RoleClient, ListChanges>, ListChanges) {
    let mut full = vec!["gateway"];
    full.extend_from_slice(args);
    let changes = ListChanges::default();
    let client = changes
        .clone()
        .serve(TokioChildProcess::new(command(&full, env)).expect("spawn"))
        .await
        .expect("MCP handshake over stdio");
    (client, changes)
}

#[tokio::test]
async fn a_tool_answering_not_found_is_dropped_and_the_list_change_announced() {
    let gateway = FakeGateway::start().await;
    let (client, changes) = connect_watching(
        &["--discovery", "off"],
        &[
            ("OPENCLAW_GATEWAY_URL", &gateway.url),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .await;
    let result = client
        .call_tool(call("browser", json!({"action": "status"})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("removed from this server's tool list"),
        "{}",
        text(&result)
    );
    changes.wait_for(1).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(!names.iter().any(|n| n == "browser"), "{names:?}");
    assert!(names.iter().any(|n| n == "web_search"), "{names:?}");
    let error = client
        .call_tool(call("browser", json!({"action": "status"})))
        .await
        .expect_err("no longer offered");
    assert!(error.to_string().contains("unknown tool"), "{error}");

    // Other failures keep the tool.
    let result = client
        .call_tool(call("message", json!({"action": "send"})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.iter().any(|n| n == "message"), "{names:?}");
}

/// What the WebSocket stand-in answers: the protocol, scopes and methods its
/// `hello-ok` reports, and its `tools.catalog` and `config.get` payloads.
#[derive(Clone)]
struct WsScript {
    /// How many connects to refuse first as "still starting".
    starting: Arc<std::sync::atomic::AtomicUsize>,
    protocol: u64,
    scopes: Vec<&'static str>,
    methods: Vec<&'static str>,
    catalog: Value,
    config: Value,
}

/// A Gateway stand-in that speaks the WebSocket protocol as scripted (for
/// what the real Gateway cannot be made to do: an older method set, another
/// protocol version, fewer scopes).
async fn start_ws_gateway(script: WsScript) -> (String, tokio::sync::oneshot::Sender<()>) {
    let app = ws_gateway_app(script);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
    });
    (format!("http://{addr}"), stop)
}

/// The stand-in's routes: the WebSocket protocol at `/`, and a
/// `/tools/invoke` that answers every tool with its name.
fn ws_gateway_app(script: WsScript) -> axum::Router {
    use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};

    async fn serve(mut socket: WebSocket, script: WsScript) {
        let challenge = json!({"type": "event", "event": "connect.challenge", "payload": {"nonce": "n", "ts": 1}});
        if socket
            .send(Message::Text(challenge.to_string().into()))
            .await
            .is_err()
        {
            return;
        }
        while let Some(Ok(Message::Text(text))) = socket.recv().await {
            let Ok(request) = serde_json::from_str::<Value>(text.as_str()) else {
                return;
            };
            let method = request["method"].as_str().unwrap_or_default();
            let still_starting = method == "connect"
                && script
                    .starting
                    .fetch_update(
                        std::sync::atomic::Ordering::SeqCst,
                        std::sync::atomic::Ordering::SeqCst,
                        |n| n.checked_sub(1),
                    )
                    .is_ok();
            if still_starting {
                let refusal = json!({"type": "res", "id": request["id"], "ok": false, "error": {
                    "code": "UNAVAILABLE", "message": "gateway starting", "retryable": true,
                    "retryAfterMs": 100, "details": {"reason": "startup-sidecars"}}});
                let _ = socket.send(Message::Text(refusal.to_string().into())).await;
                return;
            }
            if method == "tools.effective" {
                // A Gateway with no session for the key, as a fresh one or one
                // whose agents run under their own session ids.
                let key = request["params"]["sessionKey"].as_str().unwrap_or_default();
                let refusal = json!({"type": "res", "id": request["id"], "ok": false, "error": {
                    "code": "INVALID_REQUEST", "message": format!("unknown session key \"{key}\"")}});
                if socket
                    .send(Message::Text(refusal.to_string().into()))
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            let payload = match method {
                "connect" => json!({
                    "type": "hello-ok",
                    "protocol": script.protocol,
                    "auth": {"role": "operator", "scopes": script.scopes},
                    "features": {"methods": script.methods, "events": []},
                }),
                "tools.catalog" => script.catalog.clone(),
                "config.get" => script.config.clone(),
                other => panic!("the stand-in offers no {other}"),
            };
            let answer =
                json!({"type": "res", "id": request["id"], "ok": true, "payload": payload});
            if socket
                .send(Message::Text(answer.to_string().into()))
                .await
                .is_err()
            {
                return;
            }
        }
    }

    async fn invoke(Json(request): Json<Value>) -> Json<Value> {
        let tool = request["tool"].as_str().unwrap_or_default();
        Json(json!({"ok": true, "result": format!("ran {tool}")}))
    }

    axum::Router::new()
        .route(
            "/",
            axum::routing::get(move |upgrade: WebSocketUpgrade| {
                let script = script.clone();
                async move { upgrade.on_upgrade(move |socket| serve(socket, script)) }
            }),
        )
        .route("/tools/invoke", axum::routing::post(invoke))
}

fn catalog() -> Value {
    json!({"agentId": "main", "groups": [
        {"id": "web", "source": "core", "tools": [
            {"id": "web_search", "description": "Search the web"},
            {"id": "web_fetch", "description": "Fetch web content"}]},
        {"id": "sessions", "source": "core", "tools": [
            {"id": "sessions_list", "description": "List sessions."},
            {"id": "sessions_send", "description": "Send to a session."}]},
        {"id": "fs", "source": "core", "tools": [{"id": "read", "description": "Read files"}]},
        {"id": "plugin:memory-core", "source": "plugin", "tools": [
            {"id": "memory_get", "description": "Read memory...", "fullDescription": "Read memory files, whole."}]}
    ]})
}

/// Also: a Gateway still starting (twice "UNAVAILABLE, retry") is retried.
#[tokio::test]
async fn a_gateway_without_tools_effective_is_read_through_its_catalog() {
    let (url, _stop) = start_ws_gateway(WsScript {
        starting: Arc::new(2.into()),
        protocol: 4,
        scopes: vec!["operator.read", "operator.admin"],
        methods: vec!["tools.catalog", "config.get"],
        catalog: catalog(),
        config: json!({"config": {"gateway": {"tools": {"deny": ["Web_Search", "web_fetch"]}}}}),
    })
    .await;
    let env = [
        ("OPENCLAW_GATEWAY_URL", url.as_str()),
        ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
    ];
    let stderr = startup_stderr(&env).await;
    assert!(
        stderr.contains("does not offer tools.effective") && !stderr.contains("built-in"),
        "{stderr}"
    );
    let (client, _changes) = connect_watching(&[], &env).await;
    let tools = client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|tool| &*tool.name).collect();
    // web_* denied by gateway.tools.deny, sessions_send by the default HTTP
    // deny list, read never built for HTTP.
    assert_eq!(names, ["sessions_list", "memory_get"]);
    assert_eq!(tools[0].description.as_deref(), Some("List sessions."));
    assert!(tools[0].input_schema["properties"]["activeMinutes"].is_object());
    assert_eq!(
        tools[1].description.as_deref(),
        Some("Read memory files, whole.")
    );
    assert_eq!(tools[1].input_schema["required"], json!(["path"]));
}

/// A Gateway that offers `tools.effective` but has no session for the key
/// is read through `tools.catalog`, minus its HTTP deny list, and stderr
/// says which it used.
#[tokio::test]
async fn a_gateway_without_the_session_is_read_through_its_catalog() {
    let (url, _stop) = start_ws_gateway(WsScript {
        starting: Arc::default(),
        protocol: 4,
        scopes: vec!["operator.read", "operator.admin"],
        methods: vec!["tools.effective", "tools.catalog", "config.get"],
        catalog: catalog(),
        config: json!({}),
    })
    .await;
    let env = [
        ("OPENCLAW_GATEWAY_URL", url.as_str()),
        ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
    ];
    let stderr = startup_stderr(&env).await;
    assert!(
        stderr.contains("has no session \"main\"")
            && stderr.contains("tools.catalog")
            && !stderr.contains("built-in"),
        "{stderr}"
    );
    let (client, _changes) = connect_watching(&[], &env).await;
    let tools = client.list_all_tools().await.expect("list");
    let names: Vec<&str> = tools.iter().map(|tool| &*tool.name).collect();
    // sessions_send is on the default HTTP deny list, read is never built
    // for HTTP.
    assert_eq!(
        names,
        ["web_search", "web_fetch", "sessions_list", "memory_get"]
    );
}

#[tokio::test]
async fn an_unknown_protocol_or_missing_scopes_fall_back_or_assume_defaults() {
    let script = WsScript {
        starting: Arc::default(),
        protocol: 5,
        scopes: vec!["operator.read", "operator.admin"],
        methods: vec!["tools.catalog", "config.get"],
        catalog: catalog(),
        config: json!({}),
    };
    let (url, _stop) = start_ws_gateway(script.clone()).await;
    let output = command(
        &["gateway"],
        &[
            ("OPENCLAW_GATEWAY_URL", url.as_str()),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("serving the built-in tool list") && stderr.contains("speaks protocol 5"),
        "{stderr}"
    );

    // Without operator.admin, config.get is not asked: the default deny list
    // is assumed, and stderr says so.
    let (url, _stop) = start_ws_gateway(WsScript {
        protocol: 4,
        scopes: vec!["operator.read"],
        ..script.clone()
    })
    .await;
    let env = [
        ("OPENCLAW_GATEWAY_URL", url.as_str()),
        ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
    ];
    let stderr = startup_stderr(&env).await;
    assert!(stderr.contains("no operator.admin scope"), "{stderr}");
    let (client, _changes) = connect_watching(&[], &env).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["web_search", "web_fetch", "sessions_list", "memory_get"]
    );

    // No scope at all (a remote Gateway without device pairing): fallback.
    let (url, _stop) = start_ws_gateway(WsScript {
        protocol: 4,
        scopes: vec![],
        ..script
    })
    .await;
    let output = command(
        &["gateway"],
        &[
            ("OPENCLAW_GATEWAY_URL", url.as_str()),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .expect("run");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("serving the built-in tool list")
            && stderr.contains("needs operator.read")
            && stderr.contains("paired device"),
        "{stderr}"
    );
}

/// The default build reaches a Gateway behind TLS: discovery over `wss://`
/// and calls over `https://`, trusting the test CA through `SSL_CERT_FILE`
/// (and refusing the Gateway without it).
#[cfg(feature = "https")]
#[tokio::test]
async fn a_gateway_over_tls_is_discovered_and_called() {
    let authority = crate::tls::TestCa::new("gateway");
    let url = authority
        .serve(ws_gateway_app(WsScript {
            starting: Arc::default(),
            protocol: 4,
            scopes: vec!["operator.read", "operator.admin"],
            methods: vec!["tools.catalog", "config.get"],
            catalog: catalog(),
            config: json!({}),
        }))
        .await;
    let ca = authority.ca_file();
    let env = [
        ("OPENCLAW_GATEWAY_URL", url.as_str()),
        ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ("SSL_CERT_FILE", ca.as_str()),
    ];
    let (client, _changes) = connect_watching(&[], &env).await;
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    // From the stand-in's catalog, not the built-in list: discovery crossed TLS.
    assert!(names.iter().any(|name| name == "memory_get"), "{names:?}");
    let result = client
        .call_tool(call("memory_get", json!({"path": "a"})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(
        format!("{:?}", result.content).contains("ran memory_get"),
        "{result:?}"
    );
    let _ = client.cancel().await;

    // Without the CA the handshake fails, discovery says so, and the
    // built-in list is served.
    let stderr = startup_stderr(&env[..2]).await;
    assert!(
        stderr.contains("built-in") && stderr.to_lowercase().contains("certificate"),
        "{stderr}"
    );
}
