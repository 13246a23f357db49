//! The log, tried as an attacker would: values that spell fields of their
//! own (`x outcome="ok" … forged=1`), a line of their own, or a very long
//! one, sent through every route a caller or an app reaches (MCP, at
//! 2025-11-25 and 2026-07-28, legacy SSE, the
//! WebSocket and gRPC bridges' frames, REST bodies and paths, headers).
//! Every audit line must then hold exactly its documented fields, each
//! outside value as one field, and no line anywhere a field named by the
//! input; in the text format and the JSON format alike.
//!
//! These run the real binary (the log subscriber is installed once per
//! process), with the proxy's own debug lines on, where bridge frames are
//! logged.

use std::collections::BTreeSet;

use openclaw_proxy_core::proto::{self, app_message};
use openclaw_proxy_tests::forgery::{FORGED_KEY, forgeries};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

/// The proxy's log, with its own debug lines, in `format`.
async fn proxy(format: &str) -> ServerProcess {
    TestServer::builder()
        .env("OPENCLAW_PROXY_LOG_FORMAT", format)
        .env(
            "RUST_LOG",
            "info,openclaw_proxy_core=debug,openclaw_proxy_edge=debug",
        )
        .spawn()
        .await
}

/// An outside value as the log keeps it: cut after 128 characters.
fn as_logged(value: &str) -> String {
    match value.char_indices().nth(128) {
        Some((end, _)) => format!("{}…", &value[..end]),
        None => value.to_owned(),
    }
}

/// A path segment holding `value`, percent-encoded.
fn segment(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// POSTs a JSON-RPC request to `url` with `headers`; the reply.
async fn post(url: &str, body: impl std::fmt::Display, headers: &[(&str, &str)]) -> Reply {
    let request = headers.iter().fold(
        Rest::default()
            .mcp_raw(url, body.to_string())
            .bearer_auth(OPENCLAW_TOKEN),
        |request, (name, value)| request.header(name, value),
    );
    no_hang(request.send()).await
}

/// A request of `method` with `params`, as sent and with a params field
/// the server does not know (which it ignores).
fn both_shapes(method: &str, params: &Value) -> [String; 2] {
    let request =
        |params: &Value| json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let mut extended = params.clone();
    extended["x-extension"] = json!({});
    [request(params).to_string(), request(&extended).to_string()]
}

/// Calls, reads and gets each forgery on the streamable endpoint, in both
/// shapes: each is refused, and audited.
async fn mcp_requests(url: &str, forged: &str) {
    let requests = [
        ("tools/call", json!({"name": forged, "arguments": {}})),
        ("resources/read", json!({"uri": forged})),
        ("prompts/get", json!({"name": forged})),
    ];
    for (method, params) in &requests {
        for body in both_shapes(method, params) {
            let reply = post(url, &body, &[]).await;
            assert!(
                reply.json()["error"].is_object(),
                "{body}: {}",
                reply.text()
            );
        }
    }
}

/// 2026-07-28: a client named by the forgery calls it, with its headers,
/// a `_meta` key and the headers a caller chooses saying it too.
async fn mcp_2026(url: &str, forged: &str) {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": forged, "version": forged},
        forged: 1,
    });
    for tool in [forged, "echo_text"] {
        let params = json!({"name": tool, "arguments": {}, "_meta": meta});
        for body in both_shapes("tools/call", &params) {
            let headers = [
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", tool),
                ("traceparent", forged),
                ("user-agent", forged),
            ];
            let reply = post(url, &body, &headers).await;
            assert!(reply.status().as_u16() < 500, "{body}: {}", reply.text());
        }
    }
}

/// The legacy HTTP+SSE transport: opens a stream on `session_id`, posts
/// each body to the endpoint it names and reads each answer.
async fn legacy_sse(base: &str, session_id: &str, bodies: &[Value]) {
    use futures_util::StreamExt;
    let response = Rest::new(base)
        .get(&format!("/v1/mcp/{session_id}"))
        .header("accept", "text/event-stream")
        .bearer_auth(OPENCLAW_TOKEN)
        .send_streaming()
        .await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let mut next_data = async || {
        loop {
            if let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|line| line.strip_prefix("data:")) {
                    return data.trim().to_owned();
                }
                continue;
            }
            let chunk = no_hang(stream.next()).await.expect("the stream goes on");
            buffer.push_str(&String::from_utf8_lossy(&chunk.expect("a chunk")));
        }
    };
    let endpoint = format!("{base}{}", next_data().await);
    for body in bodies {
        let reply = post(&endpoint, body, &[]).await;
        assert_eq!(reply.status(), 202, "{}", reply.text());
        // Notifications may come first.
        let answer = loop {
            let message: Value = serde_json::from_str(&next_data().await).expect("JSON-RPC");
            if message["id"] == body["id"] {
                break message;
            }
        };
        assert!(answer["error"].is_object(), "{answer}");
    }
}

/// A WebSocket app that says the forgery in every frame it can, then
/// answers every call with it as its error text.
async fn websocket_app(
    session: &TestSession,
    forged: &str,
) -> tokio::task::JoinHandle<(u16, String)> {
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let frames = [
        json!({"type": "invoke_result", "request_id": forged, "ok": true, "content": {}}),
        json!({"type": "progress", "request_id": forged, "progress": 1}),
        json!({"type": "log", "request_id": forged, "level": forged, "data": {}}),
        json!({"type": "resource_updated", "uri": forged}),
        json!({"type": forged}),
        json!({"type": "progress", "request_id": forged, "progress": forged}),
    ];
    for frame in frames {
        app.send_json(frame).await;
    }
    app.send(tokio_tungstenite::tungstenite::Message::Text(forged.into()))
        .await;
    let forged = forged.to_owned();
    serve_app(app, move |_| Answer::Error(forged.clone()))
}

/// A gRPC app likewise.
async fn grpc_app(
    channel: tonic::transport::Channel,
    session_id: &str,
    forged: &str,
) -> tokio::task::JoinHandle<tonic::Status> {
    let bridge = GrpcBridge::open(channel, APP_TOKEN, session_id)
        .await
        .expect("gRPC bridge");
    let id = || forged.to_owned();
    let messages = [
        app_message::Kind::Result(proto::ToolResult {
            request_id: id(),
            ok: false,
            error: id(),
            ..Default::default()
        }),
        app_message::Kind::Progress(proto::ToolProgress {
            request_id: id(),
            message: id(),
            ..Default::default()
        }),
        app_message::Kind::Log(proto::Log {
            request_id: id(),
            level: id(),
            logger: id(),
            data_json: id(),
        }),
        app_message::Kind::ResourceUpdated(proto::ResourceUpdated { uri: id() }),
        app_message::Kind::McpResult(proto::McpResult {
            request_id: id(),
            outcome: None,
        }),
    ];
    for message in messages {
        bridge.send(message).await;
    }
    let forged = forged.to_owned();
    serve_app(bridge, move |_| Answer::Error(forged.clone()))
}

/// REST bodies and paths, and a gRPC session and bridge, naming the
/// forgery: each refused, or taken as data.
async fn sessions_api(proxy: &ServerProcess, forged: &str) {
    let rest = proxy.rest().token(APP_TOKEN);
    let mut body = legacy_session_body();
    body["tools"][0]["name"] = json!(forged);
    assert_eq!(rest.create_session(&body).await.status(), 400);
    let mut body = legacy_session_body();
    for field in ["device_id", "device_name", "app_version", "chat_id"] {
        body[field] = json!(forged);
    }
    let created = rest.create_session(&body).await;
    assert!(created.status().as_u16() < 500, "{}", created.text());
    let path = segment(forged);
    let tools = json!({"tools": [{"name": forged, "description": forged}]});
    for reply in [
        rest.put_tools(&path, &tools).await,
        rest.get_session(&path).await,
        rest.delete_session(&path).await,
    ] {
        assert!(reply.status().as_u16() < 500, "{}", reply.text());
    }
    let bridge_url = format!("ws://{}/v1/chat/sessions/{path}/bridge", proxy.addr);
    // Refused at the upgrade, or closed at once.
    if let Ok(mut app) = WsApp::connect(&bridge_url, Some(APP_TOKEN)).await {
        no_hang(app.closed()).await;
    }
    let url = format!("{}/v1/mcp/{path}", proxy.url());
    let reply = post(&url, &initialize_body(1, "2025-11-25"), &[]).await;
    assert_eq!(reply.status(), 404);
    if !forged.contains('\n') {
        let reply = post(
            &format!("{}/v1/mcp", proxy.url()),
            &initialize_body(1, "2025-11-25"),
            &[("mcp-session-id", forged)],
        )
        .await;
        assert!(reply.status().is_client_error(), "{}", reply.text());
    }
    let channel = proxy.channel().await;
    assert!(
        GrpcBridge::open(channel.clone(), APP_TOKEN, forged)
            .await
            .is_err()
    );
    let mut sessions = Sessions::new(proxy.addr, channel);
    assert!(sessions.create(vec![tool(forged, "{}")]).await.is_err());
    assert!(sessions.delete(forged).await.is_ok());
}

/// Drives every route with every forgery.
async fn drive(proxy: &ServerProcess) {
    let base = proxy.url();
    let rest = proxy.rest().token(APP_TOKEN);
    let ws_session = rest.register(&legacy_session_body()).await;
    let grpc_session = Sessions::new(proxy.addr, proxy.channel().await)
        .create(vec![tool("echo_text", "{}")])
        .await
        .expect("CreateSession");
    let bridged = |connected: bool| {
        let (rest, id) = (rest.clone(), ws_session.id.clone());
        move || {
            let (rest, id) = (rest.clone(), id.clone());
            async move { rest.get_session(&id).await.json()["bridge_connected"] == connected }
        }
    };
    let limit = std::time::Duration::from_secs(10);
    for forged in &forgeries() {
        let ws = websocket_app(&ws_session, forged).await;
        let grpc = grpc_app(proxy.channel().await, &grpc_session.id, forged).await;
        eventually("the WebSocket bridge attaching", limit, bridged(true)).await;
        for session in [&ws_session, &grpc_session] {
            mcp_requests(&session.mcp_url, forged).await;
            let known = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                               "params": {"name": "echo_text", "arguments": {}}});
            let reply = post(&session.mcp_url, &known, &[]).await;
            assert_eq!(reply.json()["result"]["isError"], true, "{}", reply.text());
        }
        // A header holds no line break.
        if !forged.contains('\n') {
            mcp_2026(&ws_session.mcp_url, forged).await;
        }
        let refused = [
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                   "params": {"name": forged, "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 10, "method": "resources/read",
                   "params": {"uri": forged}}),
        ];
        legacy_sse(&base, &ws_session.id, &refused).await;
        let client = mcp_connect(&base, &ws_session.id, Route::Path).await;
        assert!(
            no_hang(client.call_tool(call(forged, json!({}))))
                .await
                .is_err()
        );
        drop(client);
        sessions_api(proxy, forged).await;
        ws.abort();
        grpc.abort();
        eventually("the WebSocket bridge ending", limit, bridged(false)).await;
    }
    let deleted = rest.delete_session(&ws_session.id).await;
    assert!(deleted.status().is_success());
}

/// The fields each audit event holds, beside the ones every event has.
fn audit_fields(event: &str) -> BTreeSet<&'static str> {
    let mut fields = BTreeSet::from(["event", "session", "client", "transport"]);
    match event {
        "tool_call" => fields.extend(["tool", "outcome", "duration_ms", "subject", "client_id"]),
        "app_request" => fields.extend([
            "method",
            "target_name",
            "outcome",
            "duration_ms",
            "subject",
            "client_id",
        ]),
        "tool_confirmation" => fields.extend(["tool", "decision", "subject", "client_id"]),
        "bridge_ended" => fields.extend(["reason"]),
        "session_created" | "session_deleted" | "session_expired" | "bridge_attached"
        | "bridge_replaced" => {}
        other => panic!("an audit event the documentation does not name: {other:?}"),
    }
    fields
}

/// One audit event: its fields, each once.
type Fields = std::collections::BTreeMap<String, String>;

/// Checks one audit event's fields (exactly those of its kind, each value
/// of its shape) and returns them.
fn checked(fields: Fields, line: &str) -> Fields {
    let event = fields.get("event").map(String::as_str).unwrap_or_default();
    let names: BTreeSet<&str> = fields.keys().map(String::as_str).collect();
    assert_eq!(names, audit_fields(event), "{line}");
    let client = &fields["client"];
    assert!(
        client == "-" || client.parse::<std::net::SocketAddr>().is_ok(),
        "{line}"
    );
    for outside in [
        "session",
        "tool",
        "method",
        "target_name",
        "subject",
        "client_id",
    ] {
        if let Some(value) = fields.get(outside) {
            assert!(value.chars().count() <= 129, "{line}");
        }
    }
    if let Some(duration) = fields.get("duration_ms") {
        assert!(duration.parse::<f64>().is_ok(), "{line}");
    }
    fields
}

/// What the audit log must hold after [`drive`]: for each forgery, its
/// refused calls (direct, rmcp, legacy SSE, the SDK's, 2026-07-28 on both
/// paths) and requests (reads and prompts on both paths, a legacy read),
/// each one field holding it; and calls of the known tool over each bridge.
fn assert_audited(events: &[Fields]) {
    let count = |name: &str, value: &str| {
        events
            .iter()
            .filter(|fields| fields.get(name).map(String::as_str) == Some(value))
            .count()
    };
    for forged in forgeries() {
        let logged = as_logged(&forged);
        let calls = if forged.contains('\n') {
            2 * 2 + 2
        } else {
            2 * 2 + 2 + 2
        };
        assert_eq!(count("tool", &logged), calls, "{logged:?} in {events:#?}");
        assert_eq!(count("target_name", &logged), 2 * 4 + 1, "{logged:?}");
    }
    for transport in ["websocket", "grpc"] {
        let known = events.iter().filter(|fields| {
            fields.get("tool").map(String::as_str) == Some("echo_text")
                && fields["transport"] == transport
        });
        assert!(known.count() >= 3, "{transport} in {events:#?}");
    }
}

/// The text format's fields after `target: `: `key=value` or
/// `key="escaped"`, separated by one space; `None` when the rest is not
/// such fields alone.
fn text_fields(mut rest: &str) -> Option<Vec<(String, String)>> {
    let mut fields = Vec::new();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        let (value, after) = match after.strip_prefix('"') {
            Some(quoted) => unquote(quoted)?,
            None => {
                let end = after.find(' ').unwrap_or(after.len());
                (after[..end].to_owned(), &after[end..])
            }
        };
        fields.push((key.to_owned(), value));
        rest = match after.strip_prefix(' ') {
            Some(next) if !next.is_empty() && !next.starts_with(' ') => next,
            Some(_) => return None,
            None if after.is_empty() => after,
            None => return None,
        };
    }
    Some(fields)
}

/// A string as `{:?}` writes it, from after its opening quote: the string
/// and what follows its closing quote.
fn unquote(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[at + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                'r' => value.push('\r'),
                't' => value.push('\t'),
                '0' => value.push('\0'),
                'u' => {
                    let (_, '{') = chars.next()? else { return None };
                    let hex: String = chars
                        .by_ref()
                        .map(|(_, c)| c)
                        .take_while(|c| *c != '}')
                        .collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

/// The fields of an audit line in the text format,
/// `{timestamp}  INFO {span}: … audit: {fields}` (rmcp runs its handlers in
/// a span of its own, without fields).
fn audit_fields_of(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once(' ')?;
    let mut rest = rest.trim_start().strip_prefix("INFO ")?;
    loop {
        if let Some(fields) = rest.strip_prefix("audit: ") {
            return Some(fields);
        }
        let (span, after) = rest.split_once(": ")?;
        if !span.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        rest = after;
    }
}

/// `line` without its quoted strings.
fn unquoted_parts(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('"') {
        out.push_str(&rest[..at]);
        match unquote(&rest[at + 1..]) {
            Some((_, after)) => rest = after,
            None => return out + &rest[at..],
        }
    }
    out + rest
}

/// Drives every route against the binary logging in `format`, then checks
/// every audit event `audit_event` reads from its lines (a line that is no
/// audit event is `None`; the reader checks it holds no forged field).
async fn audited(format: &str, audit_event: impl Fn(&str) -> Option<Fields>) {
    let proxy = proxy(format).await;
    drive(&proxy).await;
    let lines = proxy.stop().await;
    let events: Vec<Fields> = lines
        .iter()
        .filter_map(|line| audit_event(line).map(|fields| checked(fields, line)))
        .collect();
    assert_audited(&events);
}

/// A text line's audit event, each field once.
fn text_event(line: &str) -> Option<Fields> {
    assert!(
        !unquoted_parts(line).contains(&format!(" {FORGED_KEY}=")),
        "a field from the input: {line}"
    );
    let rest = audit_fields_of(line)?;
    let fields = text_fields(rest).unwrap_or_else(|| panic!("not fields alone: {line}"));
    let count = fields.len();
    let fields: Fields = fields.into_iter().collect();
    assert_eq!(fields.len(), count, "a field twice: {line}");
    Some(fields)
}

/// A JSON line's audit event, its values as text.
fn json_event(line: &str) -> Option<Fields> {
    let event: serde_json::Map<String, Value> =
        serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}"));
    assert!(
        !event.contains_key(FORGED_KEY),
        "a field from the input: {line}"
    );
    if event.get("target").and_then(Value::as_str) != Some("audit") {
        return None;
    }
    let fields = event
        .into_iter()
        .filter(|(name, _)| !["timestamp", "level", "target"].contains(&name.as_str()))
        .map(|(name, value)| match value {
            Value::String(text) => (name, text),
            other => (name, other.to_string()),
        })
        .collect();
    Some(fields)
}

#[tokio::test]
async fn text_log_lines_hold_each_outside_value_as_one_quoted_field() {
    audited("text", text_event).await;
}

#[tokio::test]
async fn json_log_lines_hold_each_outside_value_as_one_string_field() {
    audited("json", json_event).await;
}

#[tokio::test]
async fn answered_requests_are_audited_and_counted_per_method_on_both_bridges() {
    let proxy = proxy("json").await;
    let rest = proxy.rest().token(APP_TOKEN);
    let mut body = legacy_session_body();
    body["resources"] = json!([{"uri": "notes:///1", "name": "one"}]);
    body["prompts"] = json!([{"name": "greet"}]);
    let mut sessions = Vec::new();
    let mut served = Vec::new();
    for kind in BridgeKind::BOTH {
        let session = rest.register(&body).await;
        let app = RequestBridge::attach(kind, &proxy.url(), &session.id).await;
        served.push(app.serve(|request| match request.method.as_str() {
            "resources/read" => Ok(json!({"contents": [{"uri": "notes:///1", "text": "one"}]})),
            _ => Err((-32001, "locked".to_owned(), Value::Null)),
        }));
        let id = session.id.clone();
        eventually(
            "the bridge attaching",
            std::time::Duration::from_secs(10),
            || {
                let rest = rest.clone();
                let id = id.clone();
                async move { rest.get_session(&id).await.json()["bridge_connected"] == true }
            },
        )
        .await;
        let read = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                          "params": {"uri": "notes:///1"}});
        let reply = post(&session.mcp_url, &read, &[]).await;
        assert_eq!(
            reply.json()["result"]["contents"][0]["text"],
            "one",
            "{}: {}",
            kind.name(),
            reply.text()
        );
        let prompt = json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
                            "params": {"name": "greet"}});
        let reply = post(&session.mcp_url, &prompt, &[]).await;
        assert_eq!(
            reply.json()["error"]["code"],
            -32001,
            "{}: {}",
            kind.name(),
            reply.text()
        );
        sessions.push((kind, session.id));
    }

    // Counted per method and outcome, as tool calls are: one of each per
    // bridge.
    let scrape = prometheus::Scrape::parse(&rest.metrics().await.text()).expect("Prometheus text");
    for (method, outcome) in [("resources/read", "ok"), ("prompts/get", "tool_error")] {
        assert_eq!(
            scrape.value(
                "openclaw_proxy_app_requests_total",
                &[("method", method), ("outcome", outcome)]
            ),
            2.0,
            "{method} {outcome}"
        );
    }

    let lines = proxy.stop().await;
    drop(served);
    let events: Vec<Fields> = lines
        .iter()
        .filter_map(|line| json_event(line).map(|fields| checked(fields, line)))
        .filter(|fields| fields["event"] == "app_request")
        .collect();
    for (kind, id) in &sessions {
        let transport = match kind {
            BridgeKind::Ws => "websocket",
            BridgeKind::Grpc => "grpc",
        };
        for (method, target, outcome) in [
            ("resources/read", "notes:///1", "ok"),
            ("prompts/get", "greet", "tool_error"),
        ] {
            let matching = events
                .iter()
                .filter(|fields| {
                    fields["session"] == id[..8]
                        && fields["method"] == method
                        && fields["target_name"] == target
                        && fields["outcome"] == outcome
                        && fields["transport"] == transport
                })
                .count();
            assert_eq!(
                matching, 1,
                "{method} {target} {outcome} over {transport} in {events:#?}"
            );
        }
    }
}
