//! The real server on an ephemeral loopback port, started one way (a
//! [`ServerBuilder`]), and bounded waiting.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use openclaw_proxy_core::proto::{GetSessionRequest, GetSessionResponse};
use openclaw_proxy_core::{BearerToken, CoreConfig, Hub, InvokeError, ToolOutcome};
use openclaw_proxy_edge::EdgeConfig;
use openclaw_proxy_edge::tls::TlsFiles;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// The app token test servers are configured with.
pub const APP_TOKEN: &str = "app-secret";
/// The OpenClaw token test servers are configured with.
pub const OPENCLAW_TOKEN: &str = "openclaw-secret";

/// How a test server is set up, and the one way to start it: the test
/// tokens and production timings unless told otherwise.
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    core: CoreConfig,
    edge: EdgeConfig,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        Self {
            core: CoreConfig::default(),
            edge: EdgeConfig {
                max_body_bytes: 1024 * 1024,
                ..EdgeConfig::default()
            },
        }
        .tokens(APP_TOKEN, OPENCLAW_TOKEN)
    }
}

impl ServerBuilder {
    /// The global app and OpenClaw tokens; `""` leaves that side open.
    pub fn tokens(self, app: &str, openclaw: &str) -> Self {
        self.core(|core| {
            core.app_token = BearerToken::new(app);
            core.openclaw_token = BearerToken::new(openclaw);
        })
    }

    /// Whether every route wants the session's own token, the global tokens
    /// only creating sessions.
    pub fn require_session_tokens(self, required: bool) -> Self {
        self.core(|core| core.require_session_tokens = required)
    }

    /// How long a call waits for the app.
    pub fn tool_timeout(self, timeout: Duration) -> Self {
        self.core(|core| core.tool_timeout = timeout)
    }

    /// Serves TLS on the port with these files.
    pub fn tls(self, files: TlsFiles) -> Self {
        self.edge(|edge| edge.tls = Some(files))
    }

    /// Any other core setting (limits, timings).
    pub fn core(mut self, change: impl FnOnce(&mut CoreConfig)) -> Self {
        change(&mut self.core);
        self
    }

    /// Any other edge setting (URLs, hosts, connection limits).
    pub fn edge(mut self, change: impl FnOnce(&mut EdgeConfig)) -> Self {
        change(&mut self.edge);
        self
    }

    /// Starts the server on `127.0.0.1:0`.
    pub async fn start(self) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let hub = Hub::new(self.core);
        let stop = CancellationToken::new();
        let task = tokio::spawn(openclaw_proxy_edge::serve(
            listener,
            hub.clone(),
            self.edge,
            stop.clone().cancelled_owned(),
        ));
        TestServer {
            addr,
            hub,
            stop,
            task: Some(task),
        }
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
    /// The settings of a server: the test tokens and production timings
    /// until changed.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// Starts a server with the test tokens and production timings.
    pub async fn start() -> Self {
        Self::builder().start().await
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

    /// Starts a call through the core's invocation API and returns at once;
    /// `arguments` must be a JSON object.
    pub fn spawn_invoke(
        &self,
        session_id: &str,
        tool: &str,
        arguments: serde_json::Value,
    ) -> JoinHandle<Result<ToolOutcome, InvokeError>> {
        let hub = self.hub.clone();
        let (session_id, tool) = (session_id.to_owned(), tool.to_owned());
        let serde_json::Value::Object(arguments) = arguments else {
            panic!("tool arguments must be a JSON object");
        };
        tokio::spawn(async move { hub.invoke(&session_id, &tool, &arguments).await })
    }

    /// Waits (bounded poll) until the live session satisfies `condition`.
    pub async fn wait_for_session(
        &self,
        session_id: &str,
        what: &str,
        condition: impl Fn(&GetSessionResponse) -> bool,
    ) {
        let request = GetSessionRequest {
            session_id: session_id.to_owned(),
        };
        eventually(what, Duration::from_secs(10), || async {
            self.hub
                .get_session(request.clone())
                .await
                .is_ok_and(|session| condition(&session))
        })
        .await;
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
