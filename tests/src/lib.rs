//! Shared helpers of the end-to-end tests: the real server on `127.0.0.1:0`,
//! a native app speaking gRPC, and bounded polling.
//!
//! Nothing here imitates our own components: the server is the real one
//! (`openclaw_proxy_edge::serve`), and the app talks to it through a real
//! socket with the generated tonic client.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use openclaw_proxy_core::proto::{
    self, app_message, bridge_service_client::BridgeServiceClient, proxy_message,
    session_service_client::SessionServiceClient,
};
use openclaw_proxy_core::{BearerToken, CoreConfig, Hub};
use openclaw_proxy_edge::EdgeConfig;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;
use tonic::{Request, Status, Streaming};

/// The app token test servers are configured with.
pub const APP_TOKEN: &str = "app-secret";
/// The OpenClaw token test servers are configured with.
pub const OPENCLAW_TOKEN: &str = "openclaw-secret";

/// A core configuration with the test tokens and the production timings.
pub fn core_config() -> CoreConfig {
    CoreConfig {
        app_token: BearerToken::new(APP_TOKEN),
        ..CoreConfig::default()
    }
}

/// An edge configuration with the test token.
pub fn edge_config() -> EdgeConfig {
    EdgeConfig {
        openclaw_token: BearerToken::new(OPENCLAW_TOKEN),
        max_body_bytes: 1024 * 1024,
        ..EdgeConfig::default()
    }
}

/// The real server, serving on an ephemeral loopback port until dropped.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its core, for the in-process invocation API.
    pub hub: Hub,
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), openclaw_proxy_edge::ServeError>>>,
}

impl TestServer {
    /// Starts a server with the test tokens and production timings.
    pub async fn start() -> Self {
        Self::start_with(core_config(), edge_config()).await
    }

    /// Starts a server with the given settings.
    pub async fn start_with(core: CoreConfig, edge: EdgeConfig) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let hub = Hub::new(core);
        let stop = CancellationToken::new();
        let task = tokio::spawn(openclaw_proxy_edge::serve(
            listener,
            hub.clone(),
            edge,
            stop.clone().cancelled_owned(),
        ));
        Self {
            addr,
            hub,
            stop,
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn http_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A gRPC channel to the server.
    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.http_url())
            .expect("valid uri")
            .connect()
            .await
            .expect("connect to test server")
    }

    /// Triggers graceful shutdown and waits for the server to stop.
    pub async fn shutdown(mut self) -> Result<(), openclaw_proxy_edge::ServeError> {
        self.stop.cancel();
        match self.task.take() {
            Some(task) => task.await.expect("server task"),
            None => Ok(()),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Adds `authorization: Bearer <token>` to a request.
pub fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().expect("ascii token");
    request.metadata_mut().insert("authorization", value);
    request
}

/// A tool definition with a schema given as JSON text.
pub fn tool(name: &str, schema: &str) -> proto::ToolDefinition {
    proto::ToolDefinition {
        name: name.into(),
        description: format!("The {name} tool."),
        input_schema_json: schema.into(),
        path: format!("/tools/{name}"),
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
    }
}

/// A session client carrying the test app token.
pub struct Sessions {
    client: SessionServiceClient<Channel>,
}

impl Sessions {
    /// A session client on `channel`.
    pub fn new(channel: Channel) -> Self {
        Self {
            client: SessionServiceClient::new(channel),
        }
    }

    /// Creates a session with the given tools.
    pub async fn create(&mut self, tools: Vec<proto::ToolDefinition>) -> Result<String, Status> {
        let response = self
            .client
            .create_session(with_token(session_request(tools), APP_TOKEN))
            .await?;
        Ok(response.into_inner().session_id)
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
    /// A tool call.
    Invoke(proto::InvokeTool),
    /// An error notice.
    Notice(proto::ErrorNotice),
    /// The stream ended with this status.
    Ended(Status),
}

impl GrpcBridge {
    /// Opens the bridge of `session_id` with `token` and waits for `attached`.
    pub async fn open(channel: Channel, token: &str, session_id: &str) -> Result<Self, Status> {
        let (outbound, receiver) = mpsc::channel(16);
        let hello = proto::AppMessage {
            kind: Some(app_message::Kind::Hello(proto::Hello {
                session_id: session_id.into(),
            })),
        };
        outbound.send(hello).await.expect("fresh channel");
        let mut client = BridgeServiceClient::new(channel);
        let mut inbound = client
            .attach(with_token(ReceiverStream::new(receiver), token))
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
                    Some(proxy_message::Kind::Invoke(invoke)) => return Received::Invoke(invoke),
                    Some(proxy_message::Kind::Error(notice)) => return Received::Notice(notice),
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
            Received::Invoke(invoke) => invoke,
            other => panic!("expected an invocation, got {other:?}"),
        }
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

    /// Answers every call with its own arguments (`content_json` =
    /// `arguments_json`) until the bridge ends; returns the end status.
    pub fn serve_echo(mut self) -> JoinHandle<Status> {
        tokio::spawn(async move {
            loop {
                match self.next().await {
                    Received::Invoke(invoke) => {
                        self.answer(&invoke.request_id, true, &invoke.arguments_json, "")
                            .await;
                    }
                    Received::Notice(_) => {}
                    Received::Ended(status) => return status,
                }
            }
        })
    }
}

/// Polls `condition` every 10 ms until it holds; panics after `limit`.
/// For eventual conditions only: it asserts what happens, never how fast.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let give_up = tokio::time::Instant::now() + limit;
    loop {
        if condition().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Awaits `future`, failing the test instead of hanging forever if it never
/// completes (a guard against deadlocks, not a timing assertion).
pub async fn no_hang<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .expect("operation hung for 30 s")
}
