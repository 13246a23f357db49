//! Who may touch a session (issue 12): per-session tokens on every route and
//! in both modes, the Host/Origin guard on every route, `Content-Type` on
//! session creation, authentication before any body is read or any gRPC
//! message decoded, and logs without tokens or full session ids.
//!
//! The server is the real one on `127.0.0.1:0`; the clients are reqwest,
//! tokio-tungstenite, tonic and a raw hyper HTTP/2 client for what must be
//! seen below tonic (a message that is never decoded).

use base64::Engine;
use futures_util::StreamExt;
use openclaw_proxy_core::CoreConfig;
use openclaw_proxy_core::proto::{self, app_message, proxy_message};
use openclaw_proxy_tests::*;
use reqwest::StatusCode;
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

/// `POST /v1/chat/sessions` at `base` with the app token.
pub async fn create(client: &reqwest::Client, base: &str) -> Created {
    let response = client
        .post(format!("{base}/v1/chat/sessions"))
        .bearer_auth(APP_TOKEN)
        .json(&body())
        .send()
        .await
        .expect("POST /v1/chat/sessions");
    assert_eq!(response.status(), StatusCode::OK);
    let reply: Value = response.json().await.expect("JSON reply");
    let field = |name: &str| {
        reply[name]
            .as_str()
            .unwrap_or_else(|| panic!("{name} in {reply}"))
            .to_owned()
    };
    Created {
        id: field("mcpSessionId"),
        session_token: field("session_token"),
        mcp_token: field("mcp_token"),
        bridge_url: field("bridge_url"),
        mcp_url: field("mcp_url"),
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

fn with_bearer<T>(message: T, token: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().expect("metadata value");
        request.metadata_mut().insert("authorization", value);
    }
    request
}

async fn rest_get(server: &TestServer, id: &str, token: Option<&str>) -> StatusCode {
    let mut request =
        reqwest::Client::new().get(format!("{}/v1/chat/sessions/{id}", server.http_url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("GET").status()
}

async fn rest_delete(server: &TestServer, id: &str, token: Option<&str>) -> StatusCode {
    let mut request =
        reqwest::Client::new().delete(format!("{}/v1/chat/sessions/{id}", server.http_url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.expect("DELETE").status()
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
    let url = if by_header {
        format!("{}/v1/mcp", server.http_url())
    } else {
        format!("{}/v1/mcp/{id}", server.http_url())
    };
    let mut request = mcp_post(&url, &initialize_body(1, "2025-11-25"));
    if by_header {
        request = request.header("mcp-session-id", id);
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("POST MCP");
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
    TestServer::start_with(
        CoreConfig {
            require_session_tokens,
            ..core_config()
        },
        edge_config(),
    )
}

#[tokio::test]
async fn creation_returns_two_prefixed_256_bit_tokens_over_rest_and_grpc() {
    let server = TestServer::start().await;
    let client = reqwest::Client::new();
    let first = create(&client, &server.http_url()).await;
    let second = create(&client, &server.http_url()).await;
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
    let client = reqwest::Client::new();
    let a = create(&client, &server.http_url()).await;
    let b = create(&client, &server.http_url()).await;

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
    let client = reqwest::Client::new();
    // The app token still creates, over REST and gRPC.
    let a = create(&client, &server.http_url()).await;
    let b = create(&client, &server.http_url()).await;
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
    let created = create(&reqwest::Client::new(), &server.http_url()).await;
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
        .expect("tools/call")
        .json::<Value>()
        .await
        .expect("JSON")
    };
    let (reply, invoke) = no_hang(async { tokio::join!(call, bridge.echo_one()) }).await;
    assert_eq!(invoke.tool_name, "echo_text");
    assert_eq!(
        reply["result"]["structuredContent"],
        json!({"text": "hi"}),
        "{reply}"
    );
}
