//! A native app: session management and the bridge over gRPC, with the
//! generated tonic client.

use std::net::SocketAddr;

use openclaw_proxy_core::proto::{
    self, app_message, bridge_service_client::BridgeServiceClient, proxy_message,
    session_service_client::SessionServiceClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Status, Streaming};

use crate::server::{APP_TOKEN, TestServer};
use crate::session::TestSession;

/// Adds `authorization: Bearer <token>` to a request.
pub fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii token");
    request.metadata_mut().insert("authorization", value);
    request
}

/// A bridge's `Attach` request: the token, and the session id as
/// `mcp-session-id` metadata, which a load balancer can hash on (the
/// session's `hello` is in the body, which it cannot read). An id that
/// cannot be metadata (a test's malformed one) is left out.
pub fn bridge_request<T>(message: T, token: &str, session_id: &str) -> Request<T> {
    let mut request = with_token(message, token);
    if let Ok(value) = MetadataValue::try_from(session_id) {
        request.metadata_mut().insert("mcp-session-id", value);
    }
    request
}

/// A tool definition with a schema given as JSON text.
pub fn tool(name: &str, schema: &str) -> proto::ToolDefinition {
    proto::ToolDefinition {
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema_json: schema.into(),
        path: format!("/tools/{name}"),
        ..Default::default()
    }
}

/// A session request with the given tools and sample metadata.
pub fn session_request(tools: Vec<proto::ToolDefinition>) -> proto::CreateSessionRequest {
    proto::CreateSessionRequest {
        metadata: Some(proto::SessionMetadata {
            device_id: "device-1".into(),
            device_name: "desktop".into(),
            app_version: "1.0.0".into(),
            chat_id: "chat-1".into(),
        }),
        tools,
        ..Default::default()
    }
}

/// A session client carrying the test app token (made by
/// [`TestServer::sessions`](crate::TestServer::sessions)).
pub struct Sessions {
    client: SessionServiceClient<Channel>,
    addr: SocketAddr,
}

impl Sessions {
    /// A session client on `channel` to the server at `addr`.
    pub fn new(addr: SocketAddr, channel: Channel) -> Self {
        Self {
            client: SessionServiceClient::new(channel),
            addr,
        }
    }

    /// Creates a session with the given tools and the sample metadata.
    pub async fn create(
        &mut self,
        tools: Vec<proto::ToolDefinition>,
    ) -> Result<TestSession, Status> {
        let created = self
            .client
            .create_session(with_token(session_request(tools), APP_TOKEN))
            .await?
            .into_inner();
        let minted = |token: String| (!token.is_empty()).then_some(token);
        Ok(TestSession::at(
            self.addr,
            created.session_id,
            minted(created.session_token),
            minted(created.mcp_token),
        ))
    }

    /// Describes a session.
    pub async fn get(&mut self, session_id: &str) -> Result<proto::GetSessionResponse, Status> {
        let request = proto::GetSessionRequest {
            session_id: session_id.into(),
        };
        Ok(self
            .client
            .get_session(with_token(request, APP_TOKEN))
            .await?
            .into_inner())
    }

    /// Deletes a session; returns whether it existed.
    pub async fn delete(&mut self, session_id: &str) -> Result<bool, Status> {
        let request = proto::DeleteSessionRequest {
            session_id: session_id.into(),
        };
        Ok(self
            .client
            .delete_session(with_token(request, APP_TOKEN))
            .await?
            .into_inner()
            .existed)
    }
}

/// A native app's end of the gRPC bridge.
pub struct GrpcBridge {
    outbound: mpsc::Sender<proto::AppMessage>,
    inbound: Streaming<proto::ProxyMessage>,
}

/// What the proxy sent next, with pings answered on the way.
#[derive(Debug)]
pub enum Received {
    /// A tool call (boxed: it is many times the size of the others).
    Invoke(Box<proto::InvokeTool>),
    /// An MCP request the app answers (`resources/read`, `prompts/get`,
    /// ...), with an `McpResult`.
    Request(Box<proto::McpRequest>),
    /// An error notice.
    Notice(proto::ErrorNotice),
    /// A call the app should stop working on.
    Cancel(proto::CancelTool),
    /// The stream ended with this status.
    Ended(Status),
}

impl GrpcBridge {
    /// Opens the bridge of `session_id` with `token` and waits for `attached`.
    pub async fn open(channel: Channel, token: &str, session_id: &str) -> Result<Self, Status> {
        Self::open_as(channel, token, session_id, true).await
    }

    /// [`GrpcBridge::open`] without the `mcp-session-id` metadata, as an app
    /// that names its session only in `hello`: a load balancer cannot tell
    /// which session the stream is for.
    pub async fn open_unrouted(
        channel: Channel,
        token: &str,
        session_id: &str,
    ) -> Result<Self, Status> {
        Self::open_as(channel, token, session_id, false).await
    }

    async fn open_as(
        channel: Channel,
        token: &str,
        session_id: &str,
        routed: bool,
    ) -> Result<Self, Status> {
        let (outbound, receiver) = mpsc::channel(16);
        let hello = proto::AppMessage {
            kind: Some(app_message::Kind::Hello(proto::Hello {
                session_id: session_id.into(),
            })),
        };
        outbound.send(hello).await.expect("fresh channel");
        let mut client = BridgeServiceClient::new(channel);
        let mut inbound = client
            .attach(if routed {
                bridge_request(ReceiverStream::new(receiver), token, session_id)
            } else {
                with_token(ReceiverStream::new(receiver), token)
            })
            .await?
            .into_inner();
        match inbound.message().await? {
            Some(proto::ProxyMessage {
                kind: Some(proxy_message::Kind::Attached(attached)),
            }) if attached.session_id == session_id => Ok(Self { outbound, inbound }),
            other => Err(Status::internal(format!(
                "expected attached, got {other:?}"
            ))),
        }
    }

    /// The next invocation, notice or end of stream; pings are answered.
    pub async fn next(&mut self) -> Received {
        loop {
            match self.inbound.message().await {
                Err(status) => return Received::Ended(status),
                Ok(None) => return Received::Ended(Status::ok("stream ended")),
                Ok(Some(message)) => match message.kind {
                    Some(proxy_message::Kind::Invoke(invoke)) => {
                        return Received::Invoke(Box::new(invoke));
                    }
                    Some(proxy_message::Kind::McpRequest(request)) => {
                        return Received::Request(Box::new(request));
                    }
                    Some(proxy_message::Kind::Error(notice)) => return Received::Notice(notice),
                    Some(proxy_message::Kind::Cancel(cancel)) => return Received::Cancel(cancel),
                    Some(proxy_message::Kind::Ping(ping)) => {
                        self.pong(ping.nonce).await;
                    }
                    other => panic!("unexpected message from the proxy: {other:?}"),
                },
            }
        }
    }

    /// The next message exactly as received (pings are not answered);
    /// `Ok(None)` when the stream ended cleanly.
    pub async fn raw_message(&mut self) -> Result<Option<proxy_message::Kind>, Status> {
        Ok(self
            .inbound
            .message()
            .await?
            .and_then(|message| message.kind))
    }

    /// The next invocation; panics on anything else.
    pub async fn next_invoke(&mut self) -> proto::InvokeTool {
        match self.next().await {
            Received::Invoke(invoke) => *invoke,
            other => panic!("expected an invocation, got {other:?}"),
        }
    }

    /// The next MCP request; panics on anything else.
    pub async fn next_request(&mut self) -> proto::McpRequest {
        match self.next().await {
            Received::Request(request) => *request,
            other => panic!("expected an MCP request, got {other:?}"),
        }
    }

    /// Answers an MCP request with its result (JSON text) or a JSON-RPC
    /// error.
    pub async fn answer_request(&self, request_id: &str, outcome: Result<String, proto::McpError>) {
        let outcome = match outcome {
            Ok(result_json) => proto::mcp_result::Outcome::ResultJson(result_json),
            Err(error) => proto::mcp_result::Outcome::Error(error),
        };
        self.send(app_message::Kind::McpResult(proto::McpResult {
            request_id: request_id.into(),
            outcome: Some(outcome),
        }))
        .await;
    }

    /// The status the stream ends with; panics on anything else.
    pub async fn ended(&mut self) -> Status {
        match self.next().await {
            Received::Ended(status) => status,
            other => panic!("expected the bridge to end, got {other:?}"),
        }
    }

    /// Answers a call.
    pub async fn answer(&self, request_id: &str, ok: bool, content_json: &str, error: &str) {
        self.send(app_message::Kind::Result(proto::ToolResult {
            request_id: request_id.into(),
            ok,
            content_json: content_json.into(),
            error: error.into(),
        }))
        .await;
    }

    /// Answers a ping.
    pub async fn pong(&self, nonce: u64) {
        self.send(app_message::Kind::Pong(proto::Pong { nonce }))
            .await;
    }

    /// Sends any message.
    pub async fn send(&self, kind: app_message::Kind) {
        // The proxy may already have ended the stream; tests observe that
        // through `next`, so a failed send is not an error here.
        let _ = self
            .outbound
            .send(proto::AppMessage { kind: Some(kind) })
            .await;
    }

    /// A handle that sends on this bridge from another task, while this one
    /// reads.
    pub fn sender(&self) -> AppSender {
        AppSender(self.outbound.clone())
    }
}

/// Sends on a [`GrpcBridge`] from another task.
#[derive(Clone, Debug)]
pub struct AppSender(mpsc::Sender<proto::AppMessage>);

impl AppSender {
    /// Sends a message; `false` once the bridge's stream is gone.
    pub async fn send(&self, kind: app_message::Kind) -> bool {
        self.0
            .send(proto::AppMessage { kind: Some(kind) })
            .await
            .is_ok()
    }
}

impl TestSession {
    /// Registers a session over gRPC with `tools` and the sample metadata;
    /// the registration must succeed.
    pub async fn register_grpc(server: &TestServer, tools: Vec<proto::ToolDefinition>) -> Self {
        server
            .sessions()
            .await
            .create(tools)
            .await
            .expect("CreateSession")
    }
}

impl TestServer {
    /// A gRPC session client on this server, carrying the test app token.
    pub async fn sessions(&self) -> Sessions {
        Sessions::new(self.addr, self.channel().await)
    }
}
