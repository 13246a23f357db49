//! Who may touch a session (issue 12): per-session tokens on every route and
//! in both modes, the Host/Origin guard on every route, `Content-Type` on
//! session creation, authentication before any body is read or any gRPC
//! message decoded, and logs without tokens or full session ids.
//!
//! The server is the real one on `127.0.0.1:0`; the clients are reqwest
//! (through the tests' REST client), tokio-tungstenite, tonic and a raw hyper
//! HTTP/2 client for what must be seen below tonic (a message that is never
//! decoded).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use openclaw_proxy_core::proto::{self, app_message, proxy_message};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tonic::Code;
use tonic::transport::Channel;

/// A session as the REST answer gives it.
#[derive(Clone, Debug)]
pub struct Created {
    pub id: String,
    pub session_token: String,
    pub mcp_token: String,
    pub bridge_url: String,
    pub mcp_url: String,
}

/// The documented body with one tool.
pub fn body() -> Value {
    json!({
        "device_id": "device-1",
        "app_version": "1.0.0",
        "tools": [{"name": "echo_text", "input_schema": {"type": "object"}}]
    })
}

/// `POST /v1/chat/sessions` on `server` with the app token.
pub async fn create(server: &TestServer) -> Created {
    let session = server.rest().register(&body()).await;
    Created {
        session_token: session.session_token.expect("session_token in the reply"),
        mcp_token: session.mcp_token.expect("mcp_token in the reply"),
        id: session.id,
        bridge_url: session.bridge_url,
        mcp_url: session.mcp_url,
    }
}

/// Asserts the shape of a minted token: prefix and 256 bits in base64url.
pub fn assert_minted(token: &str, prefix: &str) {
    let rest = token
        .strip_prefix(prefix)
        .unwrap_or_else(|| panic!("{token:?} lacks {prefix}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(rest)
        .expect("base64url");
    assert_eq!(bytes.len(), 32, "{token}");
}

pub fn with_bearer<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().expect("metadata value");
        request.metadata_mut().insert("authorization", value);
    }
    request
}

async fn rest_get(server: &TestServer, id: &str, token: Option<&str>) -> StatusCode {
    server
        .rest()
        .token_opt(token)
        .get_session(id)
        .await
        .status()
}

async fn rest_delete(server: &TestServer, id: &str, token: Option<&str>) -> StatusCode {
    server
        .rest()
        .token_opt(token)
        .delete_session(id)
        .await
        .status()
}

async fn grpc_get(channel: Channel, id: &str, token: Option<&str>) -> Code {
    let request = proto::GetSessionRequest {
        session_id: id.to_owned(),
    };
    match proto::session_service_client::SessionServiceClient::new(channel)
        .get_session(with_bearer(request, token))
        .await
    {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

async fn grpc_delete(channel: Channel, id: &str, token: Option<&str>) -> Code {
    let request = proto::DeleteSessionRequest {
        session_id: id.to_owned(),
    };
    match proto::session_service_client::SessionServiceClient::new(channel)
        .delete_session(with_bearer(request, token))
        .await
    {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

/// An app's gRPC bridge: what it sends, and what the proxy sends it.
pub struct GrpcBridgeEnd {
    pub to_proxy: tokio::sync::mpsc::Sender<proto::AppMessage>,
    pub from_proxy: tonic::Streaming<proto::ProxyMessage>,
}

impl GrpcBridgeEnd {
    /// Answers the next invocation with its own arguments; returns it.
    pub async fn echo_one(&mut self) -> proto::InvokeTool {
        loop {
            match self.from_proxy.message().await.expect("bridge") {
                Some(proto::ProxyMessage {
                    kind: Some(proxy_message::Kind::Invoke(invoke)),
                }) => {
                    let result = proto::ToolResult {
                        request_id: invoke.request_id.clone(),
                        ok: true,
                        content_json: invoke.arguments_json.clone(),
                        error: String::new(),
                    };
                    let message = proto::AppMessage {
                        kind: Some(app_message::Kind::Result(result)),
                    };
                    self.to_proxy.send(message).await.expect("bridge open");
                    return invoke;
                }
                Some(_) => {}
                None => panic!("the bridge ended"),
            }
        }
    }
}

/// Opens a gRPC bridge; `Ok` once the proxy answered `attached`.
pub async fn grpc_attach(
    channel: Channel,
    id: &str,
    token: Option<&str>,
) -> Result<GrpcBridgeEnd, tonic::Status> {
    let (to_proxy, outbound) = tokio::sync::mpsc::channel(8);
    let hello = proto::AppMessage {
        kind: Some(app_message::Kind::Hello(proto::Hello {
            session_id: id.to_owned(),
        })),
    };
    to_proxy.send(hello).await.expect("queued");
    let outbound = tokio_stream::wrappers::ReceiverStream::new(outbound);
    let mut from_proxy = proto::bridge_service_client::BridgeServiceClient::new(channel)
        .attach(with_bearer(outbound, token))
        .await?
        .into_inner();
    match from_proxy.message().await? {
        Some(proto::ProxyMessage {
            kind: Some(proxy_message::Kind::Attached(_)),
        }) => Ok(GrpcBridgeEnd {
            to_proxy,
            from_proxy,
        }),
        other => panic!("expected attached, got {other:?}"),
    }
}

/// What a WebSocket bridge handshake led to.
#[derive(Debug, PartialEq, Eq)]
enum WsOutcome {
    /// The bridge is attached (the session reports it).
    Attached,
    /// The proxy closed the socket with this code.
    Closed(u16),
    /// The handshake was refused with this HTTP status.
    Refused(u16),
}

async fn ws_open(
    server: &TestServer,
    id: &str,
    token: Option<&str>,
    origin: Option<&str>,
) -> WsOutcome {
    let url = format!("ws://{}/v1/chat/sessions/{id}/bridge", server.addr);
    let mut request = url.into_client_request().expect("request");
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().expect("header");
        request.headers_mut().insert("authorization", value);
    }
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("origin", origin.parse().expect("header"));
    }
    let mut socket = match tokio_tungstenite::connect_async(request).await {
        Ok((socket, _)) => socket,
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            return WsOutcome::Refused(response.status().as_u16());
        }
        Err(error) => panic!("handshake: {error}"),
    };
    let attached = async {
        server
            .wait_for_session(id, "the bridge attached", |session| {
                session.bridge_connected
            })
            .await;
    };
    let closed = async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Close(frame))) => {
                    return frame.map_or(1005, |frame| u16::from(frame.code));
                }
                Some(Ok(_)) => {}
                _ => return 1006,
            }
        }
    };
    let outcome = tokio::select! {
        () = attached => WsOutcome::Attached,
        code = closed => WsOutcome::Closed(code),
    };
    let _ = socket.close(None).await;
    outcome
}

/// How `POST` of an MCP `initialize` is answered, by path or by header.
async fn mcp_status(
    server: &TestServer,
    id: &str,
    token: Option<&str>,
    by_header: bool,
) -> StatusCode {
    let path = if by_header {
        "/v1/mcp".to_owned()
    } else {
        format!("/v1/mcp/{id}")
    };
    let mut request = Rest::new(server.http_url())
        .token_opt(token)
        .mcp(&path, &initialize_body(1, "2025-11-25"));
    if by_header {
        request = request.header("mcp-session-id", id);
    }
    let response = request.send().await;
    if response.status() == StatusCode::UNAUTHORIZED {
        assert_eq!(
            response
                .headers()
                .get("www-authenticate")
                .and_then(|value| value.to_str().ok()),
            Some("Bearer")
        );
    }
    response.status()
}

fn start_server(require_session_tokens: bool) -> impl std::future::Future<Output = TestServer> {
    TestServer::builder()
        .require_session_tokens(require_session_tokens)
        .start()
}

#[tokio::test]
async fn creation_returns_two_prefixed_256_bit_tokens_over_rest_and_grpc() {
    let server = TestServer::start().await;
    let first = create(&server).await;
    let second = create(&server).await;
    for created in [&first, &second] {
        assert_minted(&created.session_token, "ocps_");
        assert_minted(&created.mcp_token, "ocpm_");
    }
    assert!(
        first
            .bridge_url
            .ends_with(&format!("/v1/chat/sessions/{}/bridge", first.id)),
        "{first:?}"
    );
    assert_ne!(first.session_token, second.session_token);
    assert_ne!(first.mcp_token, second.mcp_token);

    let mut sessions =
        proto::session_service_client::SessionServiceClient::new(server.channel().await);
    let created = sessions
        .create_session(with_bearer(
            session_request(vec![tool("echo", "")]),
            Some(APP_TOKEN),
        ))
        .await
        .expect("gRPC create")
        .into_inner();
    assert_minted(&created.session_token, "ocps_");
    assert_minted(&created.mcp_token, "ocpm_");
    // The gRPC session's own token opens it.
    let channel = server.channel().await;
    assert_eq!(
        grpc_get(channel, &created.session_id, Some(&created.session_token)).await,
        Code::Ok
    );
}

/// Every app-side route, with one token, against one session.
async fn app_side(
    server: &TestServer,
    id: &str,
    token: Option<&str>,
) -> (StatusCode, WsOutcome, Code, Code) {
    let rest = rest_get(server, id, token).await;
    let ws = ws_open(server, id, token, None).await;
    let get = grpc_get(server.channel().await, id, token).await;
    let attach = match grpc_attach(server.channel().await, id, token).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    };
    (rest, ws, get, attach)
}

const OPENED: (StatusCode, WsOutcome, Code, Code) =
    (StatusCode::OK, WsOutcome::Attached, Code::Ok, Code::Ok);
const REFUSED: (StatusCode, WsOutcome, Code, Code) = (
    StatusCode::UNAUTHORIZED,
    WsOutcome::Closed(4401),
    Code::Unauthenticated,
    Code::Unauthenticated,
);

#[tokio::test]
async fn a_session_token_opens_its_own_session_only_and_the_global_tokens_still_work() {
    let server = start_server(false).await;
    let a = create(&server).await;
    let b = create(&server).await;

    assert_eq!(
        app_side(&server, &a.id, Some(&a.session_token)).await,
        OPENED
    );
    assert_eq!(app_side(&server, &a.id, Some(APP_TOKEN)).await, OPENED);
    assert_eq!(
        app_side(&server, &a.id, Some(&b.session_token)).await,
        REFUSED
    );
    assert_eq!(app_side(&server, &a.id, Some(&a.mcp_token)).await, REFUSED);
    assert_eq!(app_side(&server, &a.id, None).await, REFUSED);

    for by_header in [false, true] {
        let status = |token| mcp_status(&server, &a.id, token, by_header);
        assert_eq!(status(Some(&a.mcp_token)).await, StatusCode::OK);
        assert_eq!(status(Some(OPENCLAW_TOKEN)).await, StatusCode::OK);
        assert_eq!(status(Some(&b.mcp_token)).await, StatusCode::UNAUTHORIZED);
        assert_eq!(
            status(Some(&a.session_token)).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(status(None).await, StatusCode::UNAUTHORIZED);
    }

    // Another session's token deletes nothing, over REST or gRPC.
    assert_eq!(
        rest_delete(&server, &a.id, Some(&b.session_token)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        grpc_delete(server.channel().await, &a.id, Some(&b.session_token)).await,
        Code::Unauthenticated
    );
    assert!(server.hub.session_exists(&a.id).await.expect("lookup"));
    assert_eq!(
        rest_delete(&server, &a.id, Some(&a.session_token)).await,
        StatusCode::OK
    );
    assert!(!server.hub.session_exists(&a.id).await.expect("lookup"));
    assert_eq!(
        grpc_delete(server.channel().await, &b.id, Some(&b.session_token)).await,
        Code::Ok
    );
    assert!(!server.hub.session_exists(&b.id).await.expect("lookup"));
    // Deleting again stays idempotent for the token's holder.
    assert_eq!(
        rest_delete(&server, &a.id, Some(&a.session_token)).await,
        StatusCode::OK
    );
}

#[tokio::test]
async fn with_session_tokens_required_the_global_tokens_only_create() {
    let server = start_server(true).await;
    // The app token still creates, over REST and gRPC.
    let a = create(&server).await;
    let b = create(&server).await;
    let mut sessions =
        proto::session_service_client::SessionServiceClient::new(server.channel().await);
    let over_grpc = sessions
        .create_session(with_bearer(
            session_request(vec![tool("echo", "")]),
            Some(APP_TOKEN),
        ))
        .await
        .expect("the app token creates over gRPC")
        .into_inner();

    assert_eq!(
        app_side(&server, &a.id, Some(&a.session_token)).await,
        OPENED
    );
    assert_eq!(app_side(&server, &a.id, Some(APP_TOKEN)).await, REFUSED);
    assert_eq!(
        app_side(&server, &a.id, Some(&b.session_token)).await,
        REFUSED
    );
    assert_eq!(
        app_side(
            &server,
            &over_grpc.session_id,
            Some(&over_grpc.session_token)
        )
        .await,
        OPENED
    );
    assert_eq!(
        app_side(&server, &over_grpc.session_id, Some(APP_TOKEN)).await,
        REFUSED
    );

    for by_header in [false, true] {
        let status = |token| mcp_status(&server, &a.id, token, by_header);
        assert_eq!(status(Some(&a.mcp_token)).await, StatusCode::OK);
        assert_eq!(status(Some(OPENCLAW_TOKEN)).await, StatusCode::UNAUTHORIZED);
        assert_eq!(status(Some(&b.mcp_token)).await, StatusCode::UNAUTHORIZED);
    }

    assert_eq!(
        rest_delete(&server, &a.id, Some(APP_TOKEN)).await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        grpc_delete(server.channel().await, &b.id, Some(APP_TOKEN)).await,
        Code::Unauthenticated
    );
    assert!(server.hub.session_exists(&a.id).await.expect("lookup"));
    assert!(server.hub.session_exists(&b.id).await.expect("lookup"));
    assert_eq!(
        rest_delete(&server, &a.id, Some(&a.session_token)).await,
        StatusCode::OK
    );
    assert_eq!(
        grpc_delete(server.channel().await, &b.id, Some(&b.session_token)).await,
        Code::Ok
    );
    assert!(!server.hub.session_exists(&a.id).await.expect("lookup"));
    assert!(!server.hub.session_exists(&b.id).await.expect("lookup"));
}

#[tokio::test]
async fn session_tokens_carry_a_call_end_to_end() {
    // Not only accepted at the door: a bridge opened with the session token
    // serves a call made with the MCP token, every global power off.
    let server = start_server(true).await;
    let created = create(&server).await;
    let mut bridge = grpc_attach(
        server.channel().await,
        &created.id,
        Some(&created.session_token),
    )
    .await
    .expect("attached");
    let call = async {
        mcp_post(
            &created.mcp_url,
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "echo_text", "arguments": {"text": "hi"}}}),
        )
        .bearer_auth(&created.mcp_token)
        .send()
        .await
        .json()
    };
    let (reply, invoke) = no_hang(async { tokio::join!(call, bridge.echo_one()) }).await;
    assert_eq!(invoke.tool_name, "echo_text");
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"text": "hi"}),
        "{reply}"
    );
}

#[tokio::test]
async fn a_sessions_mcp_token_opens_its_resources_and_prompts_on_both_bridges() {
    for kind in BridgeKind::BOTH {
        for required in [false, true] {
            resources_and_prompts_by_token(kind, required).await;
        }
    }
}

/// `resources/read` and `prompts/get` take the same tokens as `tools/call`:
/// the session's MCP token, the global one unless session tokens are
/// required, never another session's or the app's side.
async fn resources_and_prompts_by_token(kind: BridgeKind, required: bool) {
    let server = start_server(required).await;
    let mut declaring = body();
    declaring["resources"] = json!([{"uri": "notes:///1", "name": "one"}]);
    declaring["prompts"] = json!([{"name": "greet"}]);
    let a = {
        let session = server.rest().register(&declaring).await;
        Created {
            session_token: session.session_token.expect("session_token"),
            mcp_token: session.mcp_token.expect("mcp_token"),
            id: session.id,
            bridge_url: session.bridge_url,
            mcp_url: session.mcp_url,
        }
    };
    let b = create(&server).await;
    let app = RequestBridge::attach_with(kind, &server.http_url(), &a.id, &a.session_token).await;
    let served = app.serve(|request| match request.method.as_str() {
        "resources/read" => Ok(json!({"contents": [{"uri": "notes:///1", "text": "note one"}]})),
        "prompts/get" => Ok(json!({"messages": [{"role": "user",
            "content": {"type": "text", "text": "hello"}}]})),
        _ => Err((-32601, "not served".to_owned(), Value::Null)),
    });
    let requests = [
        (
            json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                   "params": {"uri": "notes:///1"}}),
            "/result/contents/0/text",
            "note one",
        ),
        (
            json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
                   "params": {"name": "greet"}}),
            "/result/messages/0/content/text",
            "hello",
        ),
    ];
    let global = if required {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    let mut answered = 0;
    for (request, pointer, expected) in &requests {
        let what = format!(
            "{} (required: {required}) {}",
            kind.name(),
            request["method"]
        );
        for (token, status) in [
            (Some(a.mcp_token.as_str()), StatusCode::OK),
            (Some(OPENCLAW_TOKEN), global),
            (Some(b.mcp_token.as_str()), StatusCode::UNAUTHORIZED),
            (Some(a.session_token.as_str()), StatusCode::UNAUTHORIZED),
            (Some(APP_TOKEN), StatusCode::UNAUTHORIZED),
            (None, StatusCode::UNAUTHORIZED),
        ] {
            let reply = no_hang(
                Rest::default()
                    .token_opt(token)
                    .mcp(&a.mcp_url, request)
                    .send(),
            )
            .await;
            assert_eq!(
                reply.status(),
                status,
                "{what} with {token:?}: {}",
                reply.text()
            );
            if status == StatusCode::OK {
                answered += 1;
                assert_eq!(
                    reply.json().pointer(pointer),
                    Some(&json!(expected)),
                    "{what}: {}",
                    reply.text()
                );
            } else {
                assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{what}");
            }
        }
    }
    // Only the requests let in reached the app.
    drop(server);
    let seen = no_hang(served).await.expect("the app task");
    assert_eq!(seen.len(), answered, "{}: {seen:?}", kind.name());
}

/// Collects every log line the server writes while the test runs.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    /// Captures this thread's logs (the server's, on a current-thread
    /// runtime) until the guard drops: everything of ours down to TRACE,
    /// other crates from INFO.
    pub fn install(&self) -> tracing::subscriber::DefaultGuard {
        // Whether a log line is wanted at all is decided once per line, for
        // every thread, from the subscribers there are: with none but this
        // thread's, a line another test's thread reached first could stay
        // "never" for this one. A global subscriber that wants every line
        // (and writes none) keeps each line's fate to the thread's own.
        static GLOBAL: std::sync::Once = std::sync::Once::new();
        GLOBAL.call_once(|| {
            let _ = tracing::subscriber::set_global_default(tracing_subscriber::registry());
        });
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "info,openclaw_proxy_core=trace,openclaw_proxy_edge=trace",
            ))
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    pub fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

// A current-thread runtime: the server's tasks run on this thread, so the
// subscriber set for it sees all of their logs.
#[tokio::test(flavor = "current_thread")]
async fn logs_show_no_token_at_any_level_and_no_full_session_id_at_info_or_above() {
    let logs = CapturedLogs::default();
    let _guard = logs.install();

    let server = TestServer::builder()
        // A call the app never answers ends quickly (and is logged).
        .tool_timeout(Duration::from_millis(300))
        .start()
        .await;
    let created = create(&server).await;
    let id = created.id.clone();
    let mut request = created
        .bridge_url
        .as_str()
        .into_client_request()
        .expect("request");
    let value = format!("Bearer {}", created.session_token)
        .parse()
        .expect("header");
    request.headers_mut().insert("authorization", value);
    let (mut socket, _) = tokio_tungstenite::connect_async(request)
        .await
        .expect("bridge");
    server
        .wait_for_session(&id, "the bridge attached", |session| {
            session.bridge_connected
        })
        .await;

    // A call the app answers, one it leaves to time out, and frames the
    // proxy warns about: a result nobody waits for, a broken one, garbage.
    let call = |text: &'static str| {
        mcp_post(
            &created.mcp_url,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "echo_text", "arguments": {"text": text}}}),
        )
        .bearer_auth(&created.mcp_token)
        .send()
    };
    let answered = async {
        let reply = call("hi").await.json();
        assert_eq!(reply["result"]["isError"], json!(false), "{reply}");
        let reply = call("ignored").await.json();
        assert_eq!(reply["result"]["isError"], json!(true), "{reply}");
    };
    let app = async {
        let mut invocations = 0;
        while let Some(Ok(frame)) = socket.next().await {
            let Message::Text(text) = frame else { continue };
            let frame: Value = serde_json::from_str(text.as_str()).expect("JSON frame");
            if frame["type"] != "invoke_tool" {
                continue;
            }
            invocations += 1;
            if invocations == 1 {
                let result = json!({"type": "invoke_result", "request_id": frame["request_id"],
                                    "ok": true, "content": frame["arguments"]});
                socket
                    .send(Message::Text(result.to_string().into()))
                    .await
                    .expect("send");
            } else {
                return socket;
            }
        }
        panic!("the bridge ended");
    };
    let (mut socket, ()) = no_hang(async { tokio::join!(app, answered) }).await;
    for frame in [
        json!({"type": "invoke_result", "request_id": format!("{id}:99"), "ok": true}),
        json!({"type": "invoke_result", "request_id": format!("{id}:2"), "ok": "yes"}),
        json!({"type": "nonsense", "request_id": format!("{id}:3")}),
    ] {
        socket
            .send(Message::Text(frame.to_string().into()))
            .await
            .expect("send");
    }
    socket
        .send(Message::Text("not json".into()))
        .await
        .expect("send");
    // The error frames answering them arrive after the warnings were logged.
    let mut errors = 0;
    while errors < 4 {
        match no_hang(socket.next()).await {
            Some(Ok(Message::Text(text))) if text.as_str().contains("\"error\"") => errors += 1,
            Some(Ok(_)) => {}
            other => panic!("the bridge ended: {other:?}"),
        }
    }
    assert_eq!(
        rest_delete(&server, &id, Some(&created.session_token)).await,
        StatusCode::OK
    );
    let _ = socket.close(None).await;
    drop(server);

    let lines = logs.lines();
    for expected in [
        "event=\"session_created\"",
        "event=\"tool_call\"",
        "tool call timed out",
        "result for no waiting call ignored",
        "malformed result",
        "malformed bridge frame",
    ] {
        assert!(
            lines.iter().any(|line| line.contains(expected)),
            "{expected:?} was logged: {lines:#?}"
        );
    }
    for line in &lines {
        for secret in [
            created.session_token.as_str(),
            created.mcp_token.as_str(),
            APP_TOKEN,
            OPENCLAW_TOKEN,
        ] {
            assert!(!line.contains(secret), "a token in the logs: {line}");
        }
        let level = line.split_whitespace().next().unwrap_or_default();
        if matches!(level, "INFO" | "WARN" | "ERROR") {
            assert!(!line.contains(&id), "a full session id at {level}: {line}");
        }
    }
}

/// Sends raw bytes over a fresh connection and returns the response head
/// (status line and headers) as soon as it has arrived, whatever the server
/// still expects to read.
async fn raw_response_head(server: &TestServer, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    stream.write_all(request).await.expect("write");
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = no_hang(stream.read(&mut buffer)).await.expect("read");
        assert!(read > 0, "connection closed before a response: {head:?}");
        head.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

#[tokio::test]
async fn a_wrong_token_is_refused_before_the_body_is_read() {
    let server = TestServer::start().await;
    let created = create(&server).await;
    // Each request announces 4 MiB and sends none of it: a server that read
    // the body first would wait for it forever (and the test would hang).
    let announce = |method: &str, path: &str, token: &str| {
        format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: 4194304\r\n\r\n"
        )
    };
    let requests = [
        announce("POST", "/v1/chat/sessions", "wrong"),
        announce("POST", &format!("/v1/mcp/{}", created.id), "wrong"),
        announce("POST", "/v1/mcp", &created.session_token).replace(
            "\r\n\r\n",
            &format!("\r\nMCP-Session-Id: {}\r\n\r\n", created.id),
        ),
    ];
    for request in requests {
        let head = raw_response_head(&server, request.as_bytes()).await;
        assert!(head.starts_with("HTTP/1.1 401"), "{request}\n{head}");
    }

    // The same with the whole 4 MiB sent: the body limit here is 1 MiB, so a
    // server that read it first would answer 413, not 401.
    let big = vec![b' '; 4 * 1024 * 1024];
    let response = server
        .rest()
        .token("wrong")
        .create_session_raw(big.clone())
        .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let response = mcp_post(&created.mcp_url, &json!({}))
        .bearer_auth(&created.session_token)
        .body(big)
        .send()
        .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // With the right token the same body is read, and refused for its size.
    let response = server
        .rest()
        .create_session_raw(vec![b' '; 4 * 1024 * 1024])
        .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

/// The `grpc-status` of a raw gRPC call whose message is not protobuf.
async fn grpc_status_of_garbage(server: &TestServer, method: &str, token: &str) -> String {
    use http_body_util::BodyExt;
    let mut sender = openclaw_proxy_tests::h2c(server.addr).await;
    // One length-prefixed message of bytes no protobuf decoder accepts.
    let mut frame = vec![0u8, 0, 0, 0, 8];
    frame.extend_from_slice(&[0xff; 8]);
    let request = hyper::Request::post(format!("http://{}{method}", server.addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(http_body_util::Full::new(bytes::Bytes::from(frame)))
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    if let Some(status) = response.headers().get("grpc-status") {
        return status.to_str().unwrap_or_default().to_owned();
    }
    let collected = response.into_body().collect().await.expect("body");
    collected
        .trailers()
        .and_then(|trailers| trailers.get("grpc-status"))
        .and_then(|status| status.to_str().ok())
        .unwrap_or("none")
        .to_owned()
}

#[tokio::test]
async fn grpc_refuses_a_wrong_token_before_decoding_the_message() {
    let server = start_server(true).await;
    const UNAUTHENTICATED: &str = "16";
    const INVALID_ARGUMENT: &str = "3";
    for method in [
        "/openclaw.proxy.v1.SessionService/CreateSession",
        "/openclaw.proxy.v1.SessionService/GetSession",
        "/openclaw.proxy.v1.SessionService/DeleteSession",
        "/openclaw.proxy.v1.BridgeService/Attach",
    ] {
        // Undecodable bytes with a wrong token: refused for the token, so
        // the bytes were never decoded.
        assert_eq!(
            grpc_status_of_garbage(&server, method, "wrong").await,
            UNAUTHENTICATED,
            "{method}"
        );
    }
    // With session tokens required, the app token cannot reach a session's
    // RPCs either, so its message is not decoded.
    assert_eq!(
        grpc_status_of_garbage(
            &server,
            "/openclaw.proxy.v1.SessionService/GetSession",
            APP_TOKEN
        )
        .await,
        UNAUTHENTICATED
    );
    // The same bytes with a token that passes are decoded, and fail there:
    // the sender's mistake, so INVALID_ARGUMENT (not tonic's bare INTERNAL).
    assert_eq!(
        grpc_status_of_garbage(
            &server,
            "/openclaw.proxy.v1.SessionService/CreateSession",
            APP_TOKEN
        )
        .await,
        INVALID_ARGUMENT
    );
}

#[tokio::test]
async fn the_host_and_origin_guard_covers_every_route_and_the_websocket_upgrade() {
    let server = TestServer::start().await;
    let created = create(&server).await;
    let client = Rest::new(server.http_url());
    let session_path = format!("/v1/chat/sessions/{}", created.id);
    let routes: Vec<(Method, String, String)> = vec![
        (Method::POST, "/v1/chat/sessions".into(), APP_TOKEN.into()),
        (
            Method::GET,
            session_path.clone(),
            created.session_token.clone(),
        ),
        (
            Method::DELETE,
            session_path.clone(),
            created.session_token.clone(),
        ),
        (
            Method::POST,
            created.mcp_url.clone(),
            created.mcp_token.clone(),
        ),
        (Method::POST, "/v1/mcp".into(), created.mcp_token.clone()),
    ];
    for (method, url, token) in &routes {
        for (header, value) in [("origin", "https://evil.example"), ("host", "evil.example")] {
            let response = client
                .token(token)
                .request(method.clone(), url)
                .header("content-type", "application/json")
                .header("mcp-session-id", &created.id)
                .header(header, value)
                .body(body().to_string())
                .send()
                .await;
            assert_eq!(
                response.status(),
                StatusCode::FORBIDDEN,
                "{method} {url} {header}"
            );
        }
    }
    assert!(
        server
            .hub
            .session_exists(&created.id)
            .await
            .expect("lookup")
    );

    // A browser's WebSocket from a foreign page: 403, never upgraded, even
    // with a valid token; from a loopback page it is upgraded.
    assert_eq!(
        ws_open(
            &server,
            &created.id,
            Some(&created.session_token),
            Some("https://evil.example")
        )
        .await,
        WsOutcome::Refused(403)
    );
    assert_eq!(
        ws_open(
            &server,
            &created.id,
            Some(&created.session_token),
            Some("http://localhost:3000")
        )
        .await,
        WsOutcome::Attached
    );

    // Health probes answer whatever the Host.
    let response = client
        .get("/health")
        .header("host", "10.1.2.3:8000")
        .send()
        .await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn creating_a_session_needs_a_json_content_type() {
    let server = TestServer::start().await;
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut request = server
            .rest()
            .post("/v1/chat/sessions")
            .body(body().to_string());
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let response = request.send().await;
        assert_eq!(
            response.status(),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "{content_type:?}"
        );
        let reply = response.json();
        assert_eq!(reply["error"]["code"], "unsupported_media_type");
    }
    assert_eq!(server.hub.session_count(), 0);
    let response = server
        .rest()
        .post("/v1/chat/sessions")
        .header("content-type", "application/json; charset=utf-8")
        .body(body().to_string())
        .send()
        .await;
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn grpc_from_a_foreign_host_is_refused_too() {
    let server = TestServer::start().await;
    // The client connects to the server but names another host, as a
    // request relayed by a rebinding page would.
    let channel = tonic::transport::Endpoint::from_shared(server.http_url())
        .expect("URI")
        .origin("http://evil.example:8000".parse().expect("origin"))
        .connect()
        .await
        .expect("connect");
    let status = proto::session_service_client::SessionServiceClient::new(channel)
        .create_session(with_bearer(
            session_request(vec![tool("echo", "")]),
            Some(APP_TOKEN),
        ))
        .await
        .expect_err("refused");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("OPENCLAW_PROXY_ALLOWED_HOSTS"),
        "{status:?}"
    );
    assert_eq!(server.hub.session_count(), 0);
}
