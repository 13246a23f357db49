//! The server's configuration, parsed in one place: every setting is an
//! environment variable and a command-line flag (the flag wins).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use openclaw_proxy_core::config::OAuthPolicy;
use openclaw_proxy_core::limits::{AddressRange, CreateRate};
use openclaw_proxy_core::request_state::StateKey;
use openclaw_proxy_core::{BearerToken, CoreConfig, Limits};

use crate::oauth::{OAuthArgs, OAuthSettings};

mod edge;
mod tasks;

pub use tasks::TaskArgs;

pub use edge::{
    ConnectionLimits, DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS, EdgeConfig, HeadLimits, LegacyLimits,
    ListenLimits, ParkedLimits,
};

const SECONDS_PER_DAY: u64 = 24 * 60 * 60;
const SECONDS_PER_WEEK: u64 = 7 * SECONDS_PER_DAY;

/// The smallest and largest message size limit that make sense: a tool
/// definition or a call needs room, and a single message beyond 1 GiB is a
/// typo for a smaller number.
const MESSAGE_BYTES_RANGE: std::ops::RangeInclusive<usize> = 1024..=1024 * 1024 * 1024;

fn parse_message_bytes(text: &str) -> Result<usize, String> {
    let bytes: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number of bytes"))?;
    if MESSAGE_BYTES_RANGE.contains(&bytes) {
        Ok(bytes)
    } else {
        Err(format!(
            "{bytes} is outside {}..={} bytes",
            MESSAGE_BYTES_RANGE.start(),
            MESSAGE_BYTES_RANGE.end()
        ))
    }
}

/// `OPENCLAW_PROXY_SESSION_CREATE_RATE`: `None` for no limit.
#[derive(Clone, Copy, Debug)]
pub struct CreateRateSetting(pub Option<CreateRate>);

/// `0` is "no limit"; anything else is RATE or RATE/BURST.
fn parse_create_rate(text: &str) -> Result<CreateRateSetting, String> {
    if text.trim() == "0" {
        return Ok(CreateRateSetting(None));
    }
    text.parse().map(|rate| CreateRateSetting(Some(rate)))
}

fn parse_address_range(text: &str) -> Result<AddressRange, String> {
    text.parse()
}

/// `openclaw-proxy`: lets apps expose their own tools to AI agents over MCP.
#[derive(Clone, Debug, Parser)]
#[command(version, about)]
pub struct ServerConfig {
    /// The one address that serves HTTP, WebSocket and gRPC.
    #[arg(long, env = "OPENCLAW_PROXY_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,

    /// Bearer token for session REST, the WebSocket bridge and gRPC (empty: no authentication).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_APP_TOKEN",
        default_value = "",
        hide_env_values = true
    )]
    pub app_token: String,

    /// Bearer token for the MCP endpoint /v1/mcp (empty: no authentication).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OPENCLAW_TOKEN",
        default_value = "",
        hide_env_values = true
    )]
    pub openclaw_token: String,

    /// When true, the global tokens open no session: the app token only creates sessions and every per-session operation needs that session's own session_token / mcp_token.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_REQUIRE_SESSION_TOKENS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub require_session_tokens: bool,

    /// Serve a non-loopback listen address even with an empty app or OpenClaw token (otherwise the server refuses to start).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub allow_unauthenticated: bool,

    /// The operator's policy: a TOML file of ordered rules over callers, sessions and tools (docs/security.md, "Policy"); validated at start, reloaded when it changes.
    #[arg(long, env = "OPENCLAW_PROXY_POLICY_FILE")]
    pub policy_file: Option<std::path::PathBuf>,

    /// How often the policy file is looked at for changes, in milliseconds.
    #[arg(long, env = "OPENCLAW_PROXY_POLICY_POLL_MS", default_value_t = 2000)]
    pub policy_poll_ms: u64,

    /// PEM certificate chain: with --tls-key-file, the one port serves HTTPS, WSS and gRPC over TLS (reloaded when the files change).
    #[arg(long, env = "OPENCLAW_PROXY_TLS_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<std::path::PathBuf>,

    /// PEM private key of --tls-cert-file.
    #[arg(long, env = "OPENCLAW_PROXY_TLS_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<std::path::PathBuf>,

    /// Idle lifetime of a session without a bridge, in seconds.
    #[arg(long, env = "OPENCLAW_PROXY_SESSION_TTL_SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=SECONDS_PER_WEEK))]
    pub session_ttl_seconds: u64,

    /// Limit of one tool call, in seconds.
    #[arg(long, env = "OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS", default_value_t = 120,
          value_parser = clap::value_parser!(u64).range(1..=SECONDS_PER_DAY))]
    pub tool_timeout_seconds: u64,

    /// Concurrent HTTP/2 streams per connection (each gRPC bridge is one).
    #[arg(long, env = "OPENCLAW_PROXY_HTTP2_MAX_CONCURRENT_STREAMS",
          default_value_t = DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub http2_max_concurrent_streams: u32,

    /// Seconds a gRPC bridge may take to send its `hello` after opening.
    #[arg(long, env = "OPENCLAW_PROXY_HELLO_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub hello_timeout_seconds: u64,

    /// Seconds an app's request to an MCP client (elicitation, sampling, roots) may wait for its answer; the call's own timeout is paused meanwhile.
    #[arg(long, env = "OPENCLAW_PROXY_CLIENT_REQUEST_TIMEOUT_SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=SECONDS_PER_DAY))]
    pub client_request_timeout_seconds: u64,

    /// Secret that seals the requestState of 2026-07-28 input_required results; the same on every node of a cluster (default: random per process).
    #[arg(long, env = "OPENCLAW_PROXY_REQUEST_STATE_KEY", hide_env_values = true)]
    pub request_state_key: Option<String>,

    /// Let calls of tools that need the user's confirmation through unconfirmed when the MCP client cannot be asked (it declared no elicitation); by default they are refused.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_ALLOW_UNCONFIRMED_CALLS",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub allow_unconfirmed_calls: bool,

    /// Requests to its MCP client that one call may have waiting at once.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_CLIENT_REQUESTS_PER_CALL", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_client_requests_per_call: u64,

    /// The longest limit a tool may ask for with its own timeout_seconds, in seconds.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_TOOL_TIMEOUT_SECONDS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..=SECONDS_PER_DAY))]
    pub max_tool_timeout_seconds: u64,

    /// Seconds between pings on an attached bridge; a bridge silent for three intervals is dropped.
    #[arg(long, env = "OPENCLAW_PROXY_PING_INTERVAL_SECONDS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub ping_interval_seconds: u64,

    /// Seconds a bridge may leave the proxy's messages unread before it is dropped (its calls fail at once).
    #[arg(long, env = "OPENCLAW_PROXY_BRIDGE_WRITE_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub bridge_write_timeout_seconds: u64,

    /// Seconds a client may take to send a whole request header (and to send anything at all, or finish a TLS handshake); an idle HTTP/1.1 keep-alive connection is closed after as long.
    #[arg(long, env = "OPENCLAW_PROXY_HEADER_READ_TIMEOUT_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_read_timeout_seconds: u64,

    /// Seconds a client may take to send a whole request body, counted from the end of its header (408, or DEADLINE_EXCEEDED to gRPC, then the connection closes); bridge streams are exempt.
    #[arg(long, env = "OPENCLAW_PROXY_BODY_READ_TIMEOUT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_read_timeout_seconds: u64,

    /// Seconds between HTTP/2 keep-alive pings; a connection whose peer does not answer one within as long is closed.
    #[arg(long, env = "OPENCLAW_PROXY_HTTP2_KEEPALIVE_SECONDS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub http2_keepalive_seconds: u64,

    /// Seconds a connection may have no request open (an HTTP/2 connection with no stream, say), and a reflection stream send no message, before it is closed (0: never).
    #[arg(long, env = "OPENCLAW_PROXY_CONNECTION_IDLE_TIMEOUT_SECONDS", default_value_t = edge::DEFAULT_CONNECTION_IDLE_TIMEOUT_SECONDS,
          value_parser = clap::value_parser!(u64).range(0..=SECONDS_PER_DAY))]
    pub connection_idle_timeout_seconds: u64,

    /// Seconds an answer may wait on a client that reads none of it (an HTTP/2 stream with no window, a full socket) before its connection is closed.
    #[arg(long, env = "OPENCLAW_PROXY_RESPONSE_WRITE_TIMEOUT_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub response_write_timeout_seconds: u64,

    /// Bytes of answers one connection may hold unsent (rendered, not yet taken by its client); past it, an answer that waits on its client for a second closes the connection (0: no limit).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_UNSENT_BYTES_PER_CONNECTION", default_value_t = edge::DEFAULT_MAX_UNSENT_BYTES_PER_CONNECTION)]
    pub max_unsent_bytes_per_connection: usize,

    /// Bytes of answers the server may hold unsent over every connection; past it, a connection with an answer waiting on its client for a second is closed (0: no limit).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_UNSENT_BYTES", default_value_t = edge::DEFAULT_MAX_UNSENT_BYTES)]
    pub max_unsent_bytes: usize,

    /// Bytes a legacy SSE stream may hold unread (queued events and answers waiting for room); past it the stream is closed and its pending requests are answered with an error.
    #[arg(long, env = "OPENCLAW_PROXY_LEGACY_SSE_QUEUE_BYTES", default_value_t = LegacyLimits::default().queue_bytes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    pub legacy_sse_queue_bytes: usize,

    /// Legacy SSE streams one client may hold open at once (an OAuth subject, else a client address).
    #[arg(long, env = "OPENCLAW_PROXY_LEGACY_SSE_STREAMS_PER_CLIENT", default_value_t = LegacyLimits::default().streams_per_client,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub legacy_sse_streams_per_client: usize,

    /// Legacy SSE streams the server holds in all; when every one is taken, a client holding fewer streams than the largest holder still gets one, and that holder's oldest is closed.
    #[arg(long, env = "OPENCLAW_PROXY_LEGACY_SSE_MAX_STREAMS", default_value_t = LegacyLimits::default().max_streams,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65536))]
    pub legacy_sse_max_streams: usize,

    /// 2026-07-28 calls this node holds waiting for their clients' answers; when all are taken, a session holding fewer than the largest holder still parks one (that holder's oldest is dropped), else the call's requests are refused naming this setting.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_PARKED_CALLS", default_value_t = ParkedLimits::default().calls,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_parked_calls: usize,

    /// Bytes of the app's requests to their clients that the calls waiting on this node keep, over all sessions; when full, room is made as for OPENCLAW_PROXY_MAX_PARKED_CALLS.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_PARKED_BYTES", default_value_t = ParkedLimits::default().bytes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    pub max_parked_bytes: usize,

    /// Bytes of the app's requests to their clients that one session's waiting calls keep; a call past it is refused naming this setting.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_PARKED_BYTES_PER_SESSION", default_value_t = ParkedLimits::default().bytes_per_session,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..))]
    pub max_parked_bytes_per_session: usize,

    /// `subscriptions/listen` streams one session may have open at once; one more is refused naming this setting.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_LISTEN_STREAMS_PER_SESSION", default_value_t = ListenLimits::default().streams_per_session,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub max_listen_streams_per_session: usize,

    /// Bytes of resource URIs one `subscriptions/listen` stream may listen to; more is refused naming this setting.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_LISTEN_URI_BYTES", default_value_t = ListenLimits::default().uri_bytes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=16 * 1024 * 1024))]
    pub max_listen_uri_bytes: usize,

    /// Longest request target (path and query; with scheme and host when the request names them), in bytes: longer is refused 414 before any route (1 KiB to 65534, what HTTP/1 allows at all).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES", default_value_t = HeadLimits::default().max_target_bytes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=HeadLimits::TARGET_CEILING as u64))]
    pub max_request_target_bytes: usize,

    /// Bytes of a request's header fields (names and values together): more is refused 431 before any route (1 KiB to 1 MiB).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_HEADER_BYTES", default_value_t = HeadLimits::default().max_header_bytes,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=1024 * 1024))]
    pub max_header_bytes: usize,

    /// Header fields in one request: more are refused 431 before any route (16 to 1000).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_HEADERS", default_value_t = HeadLimits::default().max_headers,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(16..=1000))]
    pub max_headers: usize,

    /// Live sessions one node holds (0: no limit).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_SESSIONS", default_value_t = 100_000)]
    pub max_sessions: usize,

    /// Tools in one session (0: no limit).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION",
        default_value_t = 512
    )]
    pub max_tools_per_session: usize,

    /// Bytes of one session's tool definitions together: names, descriptions, schemas, paths (0: no limit).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_TOOL_DEFINITION_BYTES", default_value_t = 1024 * 1024)]
    pub max_tool_definition_bytes: usize,

    /// Bytes of every tool set this node holds together (a set shared by sessions counts once; 0: no limit).
    #[arg(long, env = "OPENCLAW_PROXY_MAX_TOTAL_TOOL_DEFINITION_BYTES",
          default_value_t = openclaw_proxy_core::limits::DEFAULT_MAX_TOTAL_TOOL_DEFINITION_BYTES)]
    pub max_total_tool_definition_bytes: usize,

    /// Tool calls in flight on one session (0: no limit).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_MAX_CALLS_PER_SESSION",
        default_value_t = 256
    )]
    pub max_calls_per_session: u32,

    /// Open client connections (0: no limit); more are answered 429 / RESOURCE_EXHAUSTED and closed.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_CONNECTIONS", default_value_t = 50_000)]
    pub max_connections: usize,

    /// Session creations per client address: RATE per second, or RATE/BURST (0: no limit).
    #[arg(long, env = "OPENCLAW_PROXY_SESSION_CREATE_RATE", default_value = "100/1000",
          value_parser = parse_create_rate)]
    pub session_create_rate: CreateRateSetting,

    /// Reverse proxies (addresses or CIDR blocks, comma-separated) whose X-Forwarded-For names the client.
    #[arg(long, env = "OPENCLAW_PROXY_TRUSTED_PROXIES", value_delimiter = ',',
          value_parser = parse_address_range)]
    pub trusted_proxies: Vec<AddressRange>,

    /// Public base URL (scheme://host[:port][/prefix]) for bridge_url and mcp_url behind a reverse proxy.
    // The help text is the doc comment, brackets and all.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, env = "OPENCLAW_PROXY_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Extra allowed Host values for /v1/mcp, comma-separated (loopback is always allowed).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_ALLOWED_HOSTS",
        value_delimiter = ',',
        default_value = ""
    )]
    pub allowed_hosts: Vec<String>,

    /// Allowed browser Origins for /v1/mcp, comma-separated (loopback origins are always allowed).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_ALLOWED_ORIGINS",
        value_delimiter = ',',
        default_value = ""
    )]
    pub allowed_origins: Vec<String>,

    /// Largest message anywhere, in bytes: REST and MCP bodies, WebSocket messages and frames, gRPC messages both ways.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024,
          value_parser = parse_message_bytes)]
    pub max_body_bytes: usize,

    /// Also serve GET /metrics on this address, without a token (for a Prometheus on an internal network).
    #[arg(long, env = "OPENCLAW_PROXY_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Seconds between the shutdown signal and closing the port, during which /ready answers 503 and everything else is served as before (for load balancers to stop routing here).
    #[arg(long, env = "OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS", default_value_t = 0,
          value_parser = clap::value_parser!(u64).range(0..=300))]
    pub shutdown_delay_seconds: u64,

    /// Threads that run the server (0: one per CPU the process may use). Fewer suit a node that shares its cores with other busy processes.
    #[arg(long, env = "OPENCLAW_PROXY_WORKER_THREADS", default_value_t = 0,
          value_parser = clap::value_parser!(u16).range(0..=1024))]
    pub worker_threads: u16,

    /// Log lines on stderr as `text` or `json` (one JSON object per line).
    #[arg(long, env = "OPENCLAW_PROXY_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Cluster mode: NATS server URLs, comma-separated (empty: one node, in memory).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_NATS_URL",
        value_delimiter = ',',
        default_value = ""
    )]
    pub nats_url: Vec<String>,

    /// Prefix of the NATS subjects and the KV bucket, so deployments can share a NATS.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_NATS_PREFIX",
        default_value = "openclaw_proxy"
    )]
    pub nats_prefix: String,

    /// NATS user (with OPENCLAW_PROXY_NATS_PASSWORD).
    #[arg(long, env = "OPENCLAW_PROXY_NATS_USER")]
    pub nats_user: Option<String>,

    /// NATS password.
    #[arg(long, env = "OPENCLAW_PROXY_NATS_PASSWORD", hide_env_values = true)]
    pub nats_password: Option<String>,

    /// NATS token.
    #[arg(long, env = "OPENCLAW_PROXY_NATS_TOKEN", hide_env_values = true)]
    pub nats_token: Option<String>,

    /// NATS credentials file (.creds: JWT and NKey seed).
    #[arg(long, env = "OPENCLAW_PROXY_NATS_CREDS_FILE")]
    pub nats_creds_file: Option<std::path::PathBuf>,

    /// CA certificate (PEM) to verify the NATS servers with; makes TLS required.
    #[arg(long, env = "OPENCLAW_PROXY_NATS_TLS_CA_FILE")]
    pub nats_tls_ca_file: Option<std::path::PathBuf>,

    /// Replicas of the session KV bucket (3 on a 3-node NATS cluster).
    #[arg(long, env = "OPENCLAW_PROXY_NATS_KV_REPLICAS", default_value_t = 1,
          value_parser = clap::value_parser!(u8).range(1..=5))]
    pub nats_kv_replicas: u8,

    /// Instead of serving: GET this http:// URL (such as http://127.0.0.1:8000/ready) and exit 0 if it answers 200, 1 otherwise; a container health check needs no shell or curl.
    #[arg(long, value_name = "URL")]
    pub probe: Option<String>,

    /// OAuth access tokens on the MCP endpoints (`OPENCLAW_PROXY_OAUTH_*`).
    #[command(flatten)]
    pub oauth: OAuthArgs,

    #[command(flatten)]
    pub tasks: TaskArgs,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line, the event's fields at the top level.
    Json,
}

impl ServerConfig {
    /// The cluster settings, when `OPENCLAW_PROXY_NATS_URL` turns cluster
    /// mode on.
    pub fn cluster(&self) -> Option<openclaw_proxy_core::cluster::ClusterSettings> {
        use openclaw_proxy_core::cluster::{ClusterSettings, NatsAuth};
        let servers: Vec<String> = self
            .nats_url
            .iter()
            .map(|url| url.trim().to_owned())
            .filter(|url| !url.is_empty())
            .collect();
        if servers.is_empty() {
            return None;
        }
        let auth = match (
            &self.nats_creds_file,
            &self.nats_token,
            &self.nats_user,
            &self.nats_password,
        ) {
            (Some(path), _, _, _) => NatsAuth::CredsFile(path.clone()),
            (None, Some(token), _, _) => NatsAuth::Token(token.clone()),
            (None, None, Some(user), password) => NatsAuth::UserPassword {
                user: user.clone(),
                password: password.clone().unwrap_or_default(),
            },
            _ => NatsAuth::None,
        };
        Some(ClusterSettings {
            servers,
            prefix: self.nats_prefix.clone(),
            auth,
            tls_ca_file: self.nats_tls_ca_file.clone(),
            kv_replicas: usize::from(self.nats_kv_replicas),
        })
    }
}

impl ServerConfig {
    /// The policy of `OPENCLAW_PROXY_POLICY_FILE`, compiled; a file that
    /// does not compile stops the server before it listens.
    pub fn policy(
        &self,
    ) -> Result<Option<std::sync::Arc<crate::policy::Live>>, crate::policy::PolicyError> {
        self.policy_file
            .as_deref()
            .map(|path| {
                let poll = Duration::from_millis(self.policy_poll_ms);
                crate::policy::Live::load(path, poll).map(std::sync::Arc::new)
            })
            .transpose()
    }
}

impl ServerConfig {
    /// The defaults, as if started with no flags and no environment.
    pub fn defaults() -> Self {
        Self::parse_from(["openclaw-proxy"])
    }

    /// The core's share of the settings.
    pub fn core(&self) -> CoreConfig {
        CoreConfig {
            app_token: BearerToken::new(self.app_token.clone()),
            openclaw_token: BearerToken::new(self.openclaw_token.clone()),
            require_session_tokens: self.require_session_tokens,
            session_ttl: Duration::from_secs(self.session_ttl_seconds),
            tool_timeout: Duration::from_secs(self.tool_timeout_seconds),
            max_tool_timeout: Duration::from_secs(self.max_tool_timeout_seconds),
            hello_timeout: Duration::from_secs(self.hello_timeout_seconds),
            ping_interval: Duration::from_secs(self.ping_interval_seconds.max(1)),
            bridge_write_timeout: Duration::from_secs(self.bridge_write_timeout_seconds),
            max_message_bytes: self.max_body_bytes,
            client_request_timeout: Duration::from_secs(self.client_request_timeout_seconds),
            allow_unconfirmed_calls: self.allow_unconfirmed_calls,
            request_state_key: self
                .request_state_key
                .as_deref()
                .map(str::trim)
                .filter(|key| !key.is_empty())
                .map_or_else(StateKey::random, |key| StateKey::new(key.as_bytes())),
            max_client_requests_per_call: usize::try_from(self.max_client_requests_per_call)
                .unwrap_or(usize::MAX),
            limits: Limits {
                max_sessions: self.max_sessions,
                max_tools_per_session: self.max_tools_per_session,
                max_tool_definition_bytes: self.max_tool_definition_bytes,
                max_total_tool_definition_bytes: self.max_total_tool_definition_bytes,
                max_calls_per_session: self.max_calls_per_session,
                session_create_rate: self.session_create_rate.0,
                trusted_proxies: self.trusted_proxies.clone(),
            },
            // Short TTLs are swept often enough to hold them.
            sweep_interval: Duration::from_secs((self.session_ttl_seconds / 4).clamp(1, 15)),
            oauth: self.oauth_settings().map(|oauth| OAuthPolicy {
                issuer: oauth.issuer,
                only: oauth.only,
            }),
            tasks: self.tasks.settings(),
            ..CoreConfig::default()
        }
    }
}

impl ServerConfig {
    /// The OAuth settings, when an issuer is set and they are usable (the
    /// binary stops on unusable ones before it builds anything:
    /// [`OAuthArgs::settings`]).
    pub(super) fn oauth_settings(&self) -> Option<OAuthSettings> {
        self.oauth.settings().ok().flatten()
    }

    /// The exposure rule (docs/security.md, "No open server by accident"): a server reachable
    /// from the network never runs without tokens by accident. `Ok` carries
    /// the warning to log when a token is empty.
    pub fn exposure(&self) -> Result<Option<String>, ExposureError> {
        let empty: Vec<&'static str> = [
            ("OPENCLAW_PROXY_APP_TOKEN", &self.app_token),
            ("OPENCLAW_PROXY_OPENCLAW_TOKEN", &self.openclaw_token),
        ]
        .into_iter()
        .filter(|(_, token)| token.trim().is_empty())
        // With OAuth on, an empty OpenClaw token opens nothing.
        .filter(|(name, _)| {
            *name != "OPENCLAW_PROXY_OPENCLAW_TOKEN" || self.oauth_settings().is_none()
        })
        .map(|(name, _)| name)
        .collect();
        if empty.is_empty() {
            return Ok(None);
        }
        let empty = empty.join(" and ");
        if !self.listen.ip().is_loopback() && !self.allow_unauthenticated {
            return Err(ExposureError {
                listen: self.listen,
                empty,
            });
        }
        Ok(Some(format!(
            "{empty} empty: those endpoints accept anyone on {}; set them outside local development",
            self.listen
        )))
    }
}

impl ServerConfig {
    /// The OAuth audience rule (docs/security.md, "Whom an access token is
    /// for"): the resource a token must name never comes from a request's
    /// headers, so with OAuth on and neither `OPENCLAW_PROXY_PUBLIC_URL`
    /// nor `OPENCLAW_PROXY_OAUTH_AUDIENCE` set, the server names itself by
    /// its listen address, which only a loopback address makes a name its
    /// clients also use.
    pub fn oauth_audience_rule(&self) -> Result<(), OAuthAudienceError> {
        let Some(oauth) = self.oauth_settings() else {
            return Ok(());
        };
        let public = self
            .public_url
            .as_deref()
            .is_some_and(|url| !url.trim().is_empty());
        if oauth.audience.is_some() || public || self.listen.ip().is_loopback() {
            return Ok(());
        }
        Err(OAuthAudienceError {
            listen: self.listen,
        })
    }
}

/// OAuth on a non-loopback listen address with no public URL and no
/// audience.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to check OAuth access tokens on {listen} (not loopback) without OPENCLAW_PROXY_PUBLIC_URL or OPENCLAW_PROXY_OAUTH_AUDIENCE: a token's audience must name this server, and a request's Host or X-Forwarded-* headers cannot be trusted to; set OPENCLAW_PROXY_PUBLIC_URL to the URL clients use (the audience is then {{public URL}}/v1/mcp), or OPENCLAW_PROXY_OAUTH_AUDIENCE to the audience your authorization server puts in tokens"
)]
pub struct OAuthAudienceError {
    listen: SocketAddr,
}

impl ServerConfig {
    /// A warning for a cluster node without `OPENCLAW_PROXY_REQUEST_STATE_KEY`:
    /// each process then seals 2026-07-28 `requestState` with a random key
    /// of its own, so a client's retried call that another node receives is
    /// refused as tampered. `None` outside cluster mode or with a key.
    pub fn request_state_warning(&self) -> Option<&'static str> {
        let keyed = self
            .request_state_key
            .as_deref()
            .is_some_and(|key| !key.trim().is_empty());
        let clustered = self.nats_url.iter().any(|url| !url.trim().is_empty());
        (clustered && !keyed).then_some(
            "OPENCLAW_PROXY_REQUEST_STATE_KEY is not set in cluster mode: this node seals 2026-07-28 requestState with a random key of its own, so a client's retried call that reaches another node is refused; set the same key on every node",
        )
    }
}

/// A non-loopback listen address with an empty global token.
#[derive(Debug, thiserror::Error)]
#[error(
    "refusing to listen on {listen} (not loopback) with {empty} empty: anyone who can reach the port could use it; set {empty}, or listen on 127.0.0.1, or set OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED=true (--allow-unauthenticated) if that is really meant"
)]
pub struct ExposureError {
    listen: SocketAddr,
    empty: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> ServerConfig {
        let mut argv = vec!["openclaw-proxy"];
        argv.extend_from_slice(args);
        ServerConfig::parse_from(argv)
    }

    #[test]
    fn numeric_settings_out_of_range_stop_the_server_naming_the_setting() {
        for (flag, value) in [
            ("--ping-interval-seconds", "18446744073709551615"),
            ("--ping-interval-seconds", "0"),
            ("--session-ttl-seconds", "0"),
            ("--tool-timeout-seconds", "99999999"),
            ("--bridge-write-timeout-seconds", "0"),
            ("--header-read-timeout-seconds", "100000"),
            ("--max-body-bytes", "10"),
            ("--session-create-rate", "fast"),
            ("--trusted-proxies", "10.0.0.0/99"),
            ("--max-sessions", "many"),
            ("--worker-threads", "5000"),
            ("--max-request-target-bytes", "65535"),
            ("--max-header-bytes", "100"),
            ("--max-headers", "5000"),
        ] {
            let error = ServerConfig::try_parse_from(["openclaw-proxy", flag, value])
                .expect_err("out of range");
            assert!(error.to_string().contains(flag), "{flag} {value}: {error}");
        }
        let defaults = ServerConfig::defaults();
        assert_eq!(defaults.edge().head, HeadLimits::default());
        let limits = defaults.core().limits;
        assert_eq!(limits.max_sessions, 100_000);
        assert_eq!(limits.max_calls_per_session, 256);
        assert_eq!(
            limits.session_create_rate.map(|rate| rate.burst),
            Some(1000)
        );
        let unlimited = config(&["--session-create-rate", "0"]);
        assert!(unlimited.core().limits.session_create_rate.is_none());
    }

    #[test]
    fn a_cluster_node_without_a_request_state_key_is_warned() {
        let nats = [
            "--listen",
            "127.0.0.1:0",
            "--nats-url",
            "nats://127.0.0.1:4222",
        ];
        let warning = config(&nats).request_state_warning().expect("warned");
        assert!(
            warning.contains("OPENCLAW_PROXY_REQUEST_STATE_KEY"),
            "{warning}"
        );
        let keyed = [&nats[..], &["--request-state-key", "shared"]].concat();
        assert_eq!(config(&keyed).request_state_warning(), None);
        assert_eq!(
            config(&["--listen", "127.0.0.1:0"]).request_state_warning(),
            None
        );
    }

    #[test]
    fn oauth_away_from_loopback_needs_a_public_url_or_an_audience() {
        let issuer = ["--oauth-issuer", "https://id.example"];
        let refused = config(&[&["--listen", "0.0.0.0:8000"][..], &issuer].concat())
            .oauth_audience_rule()
            .expect_err("refused")
            .to_string();
        assert!(
            refused.contains("OPENCLAW_PROXY_PUBLIC_URL")
                && refused.contains("OPENCLAW_PROXY_OAUTH_AUDIENCE"),
            "{refused}"
        );
        for allowed in [
            &["--listen", "127.0.0.1:8000"][..],
            &["--listen", "[::1]:8000"],
            &[
                "--listen",
                "0.0.0.0:8000",
                "--public-url",
                "https://mcp.example.com",
            ],
            &["--listen", "0.0.0.0:8000", "--oauth-audience", "api://mcp"],
        ] {
            let config = config(&[allowed, &issuer[..]].concat());
            assert!(config.oauth_audience_rule().is_ok(), "{allowed:?}");
        }
        assert!(
            config(&["--listen", "0.0.0.0:8000"])
                .oauth_audience_rule()
                .is_ok(),
            "OAuth off"
        );
    }

    #[test]
    fn loopback_without_tokens_starts_with_a_warning() {
        let warning = config(&["--listen", "127.0.0.1:0"]).exposure();
        let warning = warning.expect("loopback may run open").expect("warned");
        assert!(warning.contains("OPENCLAW_PROXY_APP_TOKEN"), "{warning}");
    }

    #[test]
    fn network_without_a_token_is_refused_naming_the_variable() {
        let refused = config(&["--listen", "0.0.0.0:8000", "--app-token", "a"])
            .exposure()
            .expect_err("refused");
        let message = refused.to_string();
        assert!(
            message.contains("OPENCLAW_PROXY_OPENCLAW_TOKEN")
                && !message.contains("OPENCLAW_PROXY_APP_TOKEN ")
                && message.contains("OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED"),
            "{message}"
        );
        let allowed = config(&["--listen", "[::]:8000", "--allow-unauthenticated"]).exposure();
        assert!(allowed.expect("explicitly allowed").is_some());
        let tokens = config(&[
            "--listen",
            "0.0.0.0:8000",
            "--app-token",
            "a",
            "--openclaw-token",
            "b",
        ]);
        assert!(tokens.exposure().expect("tokens set").is_none());
    }
}
