//! The real server on an ephemeral loopback port, started one way: a
//! [`ServerBuilder`] starts it in the test's process ([`TestServer`]) or runs
//! the binary ([`ServerProcess`]); and bounded waiting.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use openclaw_proxy_core::config::OAuthPolicy;
use openclaw_proxy_core::proto::{GetSessionRequest, GetSessionResponse};
use openclaw_proxy_core::{BearerToken, CoreConfig, Hub, InvokeError, ToolOutcome};
use openclaw_proxy_edge::EdgeConfig;
use openclaw_proxy_edge::oauth::{JwksSource, OAuthSettings};
use openclaw_proxy_edge::tls::TlsFiles;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::http_client::channel_to;
use crate::rest::Rest;
use crate::server_process::ServerProcess;
use crate::session::{TestSession, legacy_session_body};

/// The app token test servers are configured with.
pub const APP_TOKEN: &str = "app-secret";
/// The OpenClaw token test servers are configured with.
pub const OPENCLAW_TOKEN: &str = "openclaw-secret";

/// How a test server is set up, and the one way to start it: the test
/// tokens and production timings unless told otherwise. [`start`] runs it in
/// the test's process, where the test reaches its hub and every setting;
/// [`spawn`] runs the binary, for what needs a process of its own.
///
/// The typed settings hold for both; [`core`] and [`edge`] reach any
/// setting of a server in the test's process, [`env`] any variable of the
/// binary.
///
/// [`start`]: ServerBuilder::start
/// [`spawn`]: ServerBuilder::spawn
/// [`core`]: ServerBuilder::core
/// [`edge`]: ServerBuilder::edge
/// [`env`]: ServerBuilder::env
#[derive(Clone, Debug)]
pub struct ServerBuilder {
    core: CoreConfig,
    edge: EdgeConfig,
    /// The binary's variables, in order; a later value of one wins.
    env: Vec<(String, String)>,
    /// Why only a server in the test's process can have these settings.
    in_process_only: Option<String>,
    /// Why only the binary can have these settings.
    binary_only: Option<String>,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        Self {
            core: CoreConfig::default(),
            edge: EdgeConfig {
                max_body_bytes: 1024 * 1024,
                ..EdgeConfig::default()
            },
            env: Vec::new(),
            in_process_only: None,
            binary_only: None,
        }
        .tokens(APP_TOKEN, OPENCLAW_TOKEN)
    }
}

impl ServerBuilder {
    /// The global app and OpenClaw tokens; `""` leaves that side open.
    pub fn tokens(mut self, app: &str, openclaw: &str) -> Self {
        self.core.app_token = BearerToken::new(app);
        self.core.openclaw_token = BearerToken::new(openclaw);
        self.set_env("OPENCLAW_PROXY_APP_TOKEN", app)
            .set_env("OPENCLAW_PROXY_OPENCLAW_TOKEN", openclaw)
    }

    /// Whether every route wants the session's own token, the global tokens
    /// only creating sessions.
    pub fn require_session_tokens(mut self, required: bool) -> Self {
        self.core.require_session_tokens = required;
        self.set_env(
            "OPENCLAW_PROXY_REQUIRE_SESSION_TOKENS",
            &required.to_string(),
        )
    }

    /// How long a call waits for the app.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.core.tool_timeout = timeout;
        self.set_seconds("OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS", timeout)
    }

    /// How long a session without a bridge lives. (The binary derives its
    /// sweep interval from it; a server in the test's process keeps its
    /// own, set through [`ServerBuilder::core`].)
    pub fn session_ttl(mut self, ttl: Duration) -> Self {
        self.core.session_ttl = ttl;
        self.set_seconds("OPENCLAW_PROXY_SESSION_TTL_SECONDS", ttl)
    }

    /// OAuth access tokens on the MCP side, checked with `settings` (for a
    /// server in the test's process and the binary alike).
    pub fn oauth(mut self, settings: OAuthSettings) -> Self {
        self.core.oauth = Some(OAuthPolicy {
            issuer: settings.issuer.clone(),
            only: settings.only,
        });
        let algorithms: Vec<String> = settings
            .algorithms
            .iter()
            .map(|alg| format!("{alg:?}"))
            .collect();
        let mut env = vec![
            ("OPENCLAW_PROXY_OAUTH_ISSUER", settings.issuer.clone()),
            ("OPENCLAW_PROXY_OAUTH_ALGORITHMS", algorithms.join(",")),
            (
                "OPENCLAW_PROXY_OAUTH_REQUIRED_SCOPES",
                settings.required_scopes.join(","),
            ),
            (
                "OPENCLAW_PROXY_OAUTH_LEEWAY_SECONDS",
                settings.leeway.as_secs().to_string(),
            ),
            (
                "OPENCLAW_PROXY_OAUTH_SUBJECT_CLAIM",
                settings.subject_claim.clone(),
            ),
            ("OPENCLAW_PROXY_OAUTH_ONLY", settings.only.to_string()),
            (
                "OPENCLAW_PROXY_OAUTH_JWKS_REFRESH_SECONDS",
                settings.jwks_refresh_min.as_secs().to_string(),
            ),
        ];
        match &settings.jwks {
            JwksSource::Discover => {}
            JwksSource::Url(url) => env.push(("OPENCLAW_PROXY_OAUTH_JWKS_URL", url.clone())),
            JwksSource::File(path) => {
                env.push(("OPENCLAW_PROXY_OAUTH_JWKS_FILE", path.display().to_string()))
            }
        }
        if let Some(audience) = &settings.audience {
            env.push(("OPENCLAW_PROXY_OAUTH_AUDIENCE", audience.clone()));
        }
        self.edge.oauth = Some(settings);
        for (name, value) in env {
            self = self.set_env(name, &value);
        }
        self
    }

    /// The operator's policy file at `path` (it must compile), looked at
    /// for changes every `poll`.
    pub fn policy_file(mut self, path: &std::path::Path, poll: Duration) -> Self {
        let live =
            openclaw_proxy_edge::policy::Live::load(path, poll).expect("a valid policy file");
        self.edge.policy = Some(std::sync::Arc::new(live));
        self.set_env("OPENCLAW_PROXY_POLICY_FILE", &path.display().to_string())
            .set_env(
                "OPENCLAW_PROXY_POLICY_POLL_MS",
                &poll.as_millis().to_string(),
            )
    }

    /// Serves TLS on the port with these files.
    pub fn tls(self, files: TlsFiles) -> Self {
        self.edge(|edge| edge.tls = Some(files))
    }

    /// Cluster mode (the binary): sessions in the NATS at `url`, under
    /// `prefix`.
    pub fn nats(self, url: &str, prefix: &str) -> Self {
        self.env("OPENCLAW_PROXY_NATS_URL", url)
            .env("OPENCLAW_PROXY_NATS_PREFIX", prefix)
    }

    /// Any other core setting (limits, timings) of a server in the test's
    /// process.
    pub fn core(mut self, change: impl FnOnce(&mut CoreConfig)) -> Self {
        change(&mut self.core);
        self.in_process_only = Some("core()".into());
        self
    }

    /// Any other edge setting (URLs, hosts, connection limits) of a server
    /// in the test's process.
    pub fn edge(mut self, change: impl FnOnce(&mut EdgeConfig)) -> Self {
        change(&mut self.edge);
        self.in_process_only = Some("edge()".into());
        self
    }

    /// Any variable of the binary (`OPENCLAW_PROXY_…`, `RUST_LOG`, `OTEL_…`).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.binary_only = Some(format!("env({name})"));
        self.set_env(name, value)
    }

    fn set_env(mut self, name: &str, value: &str) -> Self {
        self.env.retain(|(set, _)| set != name);
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A duration the binary takes in whole seconds.
    fn set_seconds(self, name: &str, duration: Duration) -> Self {
        let mut builder = self.set_env(name, &duration.as_secs().to_string());
        if duration.subsec_nanos() > 0 {
            builder.in_process_only = Some(format!("{name} of {duration:?}"));
        }
        builder
    }

    /// Starts the server in the test's process on `127.0.0.1:0`.
    pub async fn start(self) -> TestServer {
        if let Some(setting) = &self.binary_only {
            panic!("{setting} is a setting of the binary: spawn() it");
        }
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

    /// Runs the binary on `127.0.0.1:0` and waits until it listens.
    pub async fn spawn(self) -> ServerProcess {
        self.try_spawn().await.expect("the server starts")
    }

    /// [`ServerBuilder::spawn`], or `Err` with the binary's log when it
    /// exits before it listens.
    pub async fn try_spawn(self) -> Result<ServerProcess, String> {
        if let Some(setting) = &self.in_process_only {
            panic!("{setting} is a setting of a server in the test's process: start() it");
        }
        ServerProcess::spawn(&self.env).await
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
        channel_to(self.http_url()).await
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

impl TestServer {
    /// A client of this server carrying the app token.
    pub fn rest(&self) -> Rest {
        Rest::new(self.http_url()).token(APP_TOKEN)
    }
}

impl TestSession {
    /// Registers a session over REST with `body`; the registration must
    /// succeed.
    pub async fn register(server: &TestServer, body: &serde_json::Value) -> Self {
        server.rest().register(body).await
    }

    /// Registers the documented body with one `echo_text` tool over REST.
    pub async fn legacy(server: &TestServer) -> Self {
        Self::register(server, &legacy_session_body()).await
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
