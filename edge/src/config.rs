//! The server's configuration, parsed in one place: every setting is an
//! environment variable and a command-line flag (the flag wins).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use openclaw_proxy_core::{BearerToken, CoreConfig};

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

    /// Idle lifetime of a session without a bridge, in seconds.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_SESSION_TTL_SECONDS",
        default_value_t = 300
    )]
    pub session_ttl_seconds: u64,

    /// Limit of one tool call, in seconds.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS",
        default_value_t = 120
    )]
    pub tool_timeout_seconds: u64,

    /// Seconds between pings on an attached bridge; a bridge silent for three intervals is dropped.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_PING_INTERVAL_SECONDS",
        default_value_t = 20
    )]
    pub ping_interval_seconds: u64,

    /// Public base URL (scheme://host[:port][/prefix]) for bridge_url and mcp_url behind a reverse proxy.
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

    /// Largest accepted HTTP request body, in bytes.
    #[arg(long, env = "OPENCLAW_PROXY_MAX_BODY_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_body_bytes: usize,
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
            session_ttl: Duration::from_secs(self.session_ttl_seconds),
            tool_timeout: Duration::from_secs(self.tool_timeout_seconds),
            ping_interval: Duration::from_secs(self.ping_interval_seconds.max(1)),
            ..CoreConfig::default()
        }
    }
}

/// The HTTP edge's share of the settings.
#[derive(Clone, Debug, Default)]
pub struct EdgeConfig {
    /// Bearer token for `/v1/mcp`.
    pub openclaw_token: BearerToken,
    /// Public base URL for `bridge_url` and `mcp_url`, without a trailing slash.
    pub public_url: Option<String>,
    /// Extra allowed `Host` values for `/v1/mcp`.
    pub allowed_hosts: Vec<String>,
    /// Allowed browser `Origin` values for `/v1/mcp`.
    pub allowed_origins: Vec<String>,
    /// Largest accepted HTTP request body, in bytes.
    pub max_body_bytes: usize,
}

impl ServerConfig {
    /// The HTTP edge's share of the settings.
    pub fn edge(&self) -> EdgeConfig {
        let list = |values: &[String]| -> Vec<String> {
            values
                .iter()
                .map(|value| value.trim().to_owned())
                .filter(|value| !value.is_empty())
                .collect()
        };
        EdgeConfig {
            openclaw_token: BearerToken::new(self.openclaw_token.clone()),
            public_url: self
                .public_url
                .as_deref()
                .map(|url| url.trim().trim_end_matches('/').to_owned())
                .filter(|url| !url.is_empty()),
            allowed_hosts: list(&self.allowed_hosts),
            allowed_origins: list(&self.allowed_origins),
            max_body_bytes: self.max_body_bytes,
        }
    }
}
