//! What the HTTP edge runs with, derived once from the settings: the
//! listener's TLS, the URLs it hands out, the `Host`/`Origin` rules, and
//! what one connection or one legacy SSE stream may hold. Kept apart from
//! the settings themselves ([`super::ServerConfig`]), which say how each
//! is spelled on the command line and in the environment.

use std::time::Duration;

use openclaw_proxy_core::limits::AddressRange;

use super::ServerConfig;
use crate::oauth::OAuthSettings;

/// The HTTP edge's share of the settings.
#[derive(Clone, Debug, Default)]
pub struct EdgeConfig {
    /// Certificate and key files when the port serves TLS.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Public base URL for `bridge_url` and `mcp_url`, without a trailing slash.
    pub public_url: Option<String>,
    /// Extra allowed `Host` values for `/v1/mcp`.
    pub allowed_hosts: Vec<String>,
    /// Allowed browser `Origin` values for `/v1/mcp`.
    pub allowed_origins: Vec<String>,
    /// Largest accepted HTTP request body, in bytes.
    pub max_body_bytes: usize,
    /// Concurrent HTTP/2 streams per connection (gRPC bridges of one app
    /// connection); `None` for [`DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS`].
    pub http2_max_concurrent_streams: Option<u32>,
    /// How long the server keeps serving, not ready, after the shutdown
    /// signal before it closes the port and ends the bridges.
    pub shutdown_delay: Duration,
    /// Connection-level limits and timeouts.
    pub connections: ConnectionLimits,
    /// OAuth access tokens on the MCP endpoints, when an issuer is set.
    pub oauth: Option<OAuthSettings>,
    /// What the legacy SSE transport's streams may hold.
    pub legacy: LegacyLimits,
    /// How large a request head may be before the routes see it.
    pub head: HeadLimits,
    /// What `subscriptions/listen` streams may hold.
    pub listen: ListenLimits,
    /// The operator's policy, when a file is configured (loaded by
    /// [`ServerConfig::policy`]).
    pub policy: Option<std::sync::Arc<crate::policy::Live>>,
    /// What 2026-07-28 calls waiting for their clients may hold.
    pub parked: ParkedLimits,
}

/// What the 2026-07-28 calls waiting for their clients' answers (parked
/// between rounds) may hold on one node: each keeps the app's requests
/// until its client retries or the client-request timeout ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParkedLimits {
    /// Calls parked at once.
    pub calls: usize,
    /// Bytes of the app's requests they keep, over all sessions.
    pub bytes: usize,
    /// Bytes of the app's requests one session's parked calls keep.
    pub bytes_per_session: usize,
}

impl Default for ParkedLimits {
    fn default() -> Self {
        Self {
            calls: 10_000,
            bytes: 512 * 1024 * 1024,
            bytes_per_session: 16 * 1024 * 1024,
        }
    }
}

/// What the `subscriptions/listen` streams of one session may hold: each
/// keeps the resource URIs it listens to for as long as it is open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenLimits {
    /// Listen streams one session may have open at once.
    pub streams_per_session: usize,
    /// Bytes of resource URIs one stream may listen to.
    pub uri_bytes: usize,
}

impl Default for ListenLimits {
    fn default() -> Self {
        Self {
            streams_per_session: 16,
            uri_bytes: 64 * 1024,
        }
    }
}

/// How large a request head may be: its target, and its header fields in
/// bytes and in number. Over them a request is refused before any route
/// (`414`, `431`, or `RESOURCE_EXHAUSTED` to gRPC) by [`crate::http::head`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadLimits {
    /// Bytes of the request target (its path and query, and its scheme and
    /// host when the request names them, as HTTP/2 requests always do).
    pub max_target_bytes: usize,
    /// Bytes of the header fields' names and values together.
    pub max_header_bytes: usize,
    /// Header fields, a repeated name counting once per value.
    pub max_headers: usize,
}

impl HeadLimits {
    /// The longest request target HTTP/1 allows at all: hyper refuses a
    /// longer one itself (its bodiless `414`), so no limit may be higher.
    pub const TARGET_CEILING: usize = u16::MAX as usize - 1;
}

impl Default for HeadLimits {
    fn default() -> Self {
        Self {
            max_target_bytes: 8 * 1024,
            max_header_bytes: 64 * 1024,
            max_headers: 50,
        }
    }
}

/// What the legacy SSE transport's streams may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LegacyLimits {
    /// Bytes one stream may hold unread.
    pub queue_bytes: usize,
    /// Streams one client (an OAuth subject, else an address) may hold.
    pub streams_per_client: usize,
    /// Streams the server holds in all; when all are taken, a client
    /// holding fewer than the largest holder takes one of that holder's.
    pub max_streams: usize,
}

impl Default for LegacyLimits {
    fn default() -> Self {
        Self {
            queue_bytes: 4 * 1024 * 1024,
            streams_per_client: 32,
            max_streams: 1024,
        }
    }
}

/// What one client connection may hold, and for how long.
#[derive(Clone, Debug)]
pub struct ConnectionLimits {
    /// Open connections at once; 0 for no limit.
    pub max_connections: usize,
    /// Time to send a whole request header, the first bytes of a
    /// connection, or finish a TLS handshake; also the idle limit of an
    /// HTTP/1.1 keep-alive connection.
    pub header_read_timeout: Duration,
    /// Time to send a whole request body once its header is in; the
    /// request streams of bridges (gRPC `Attach`, reflection) are exempt.
    pub body_read_timeout: Duration,
    /// Interval (and answer limit) of HTTP/2 keep-alive pings.
    pub http2_keepalive: Duration,
    /// How long a connection may have no request open, and a reflection
    /// stream send nothing, before it is closed ([`crate::idle`]); zero
    /// for never.
    pub idle_timeout: Duration,
    /// How long a WebSocket frame may take to be written to the app.
    pub write_timeout: Duration,
    /// How long an answer may wait on a client that reads none of it
    /// before its connection is closed ([`crate::stall`]).
    pub response_write_timeout: Duration,
    /// Bytes of answers one connection may hold unsent before one that
    /// waits on its client closes it at once ([`crate::stall`]); 0 for no
    /// limit.
    pub max_unsent_bytes_per_connection: usize,
    /// The same over every connection of the server.
    pub max_unsent_bytes: usize,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<AddressRange>,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 50_000,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            http2_keepalive: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(DEFAULT_CONNECTION_IDLE_TIMEOUT_SECONDS),
            write_timeout: Duration::from_secs(10),
            response_write_timeout: Duration::from_secs(30),
            max_unsent_bytes_per_connection: DEFAULT_MAX_UNSENT_BYTES_PER_CONNECTION,
            max_unsent_bytes: DEFAULT_MAX_UNSENT_BYTES,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Bytes of answers one connection may hold unsent unless configured: far
/// more than a client that reads holds at once, a sixteenth of what 500
/// answers of a megabyte were.
pub const DEFAULT_MAX_UNSENT_BYTES_PER_CONNECTION: usize = 64 * 1024 * 1024;

/// Bytes of answers the server may hold unsent over every connection unless
/// configured.
pub const DEFAULT_MAX_UNSENT_BYTES: usize = 1024 * 1024 * 1024;

/// Seconds a connection may have nothing open before it is closed, unless
/// configured: longer than a client's pause between requests, short enough
/// that connections nobody uses give their slots back.
pub const DEFAULT_CONNECTION_IDLE_TIMEOUT_SECONDS: u64 = 60;

/// Streams per HTTP/2 connection unless configured: enough for a backend
/// app to multiplex a thousand session bridges on one connection (hyper's
/// own default is 200), few enough that one connection cannot hold an
/// unbounded number of answers (each stream may hold one).
pub const DEFAULT_HTTP2_MAX_CONCURRENT_STREAMS: u32 = 1024;

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
            tls: match (&self.tls_cert_file, &self.tls_key_file) {
                (Some(cert), Some(key)) => Some(crate::tls::TlsFiles::new(cert, key)),
                _ => None,
            },
            public_url: self
                .public_url
                .as_deref()
                .map(|url| url.trim().trim_end_matches('/').to_owned())
                .filter(|url| !url.is_empty()),
            allowed_hosts: list(&self.allowed_hosts),
            allowed_origins: list(&self.allowed_origins),
            max_body_bytes: self.max_body_bytes,
            http2_max_concurrent_streams: Some(self.http2_max_concurrent_streams),
            shutdown_delay: Duration::from_secs(self.shutdown_delay_seconds),
            connections: ConnectionLimits {
                max_connections: self.max_connections,
                header_read_timeout: Duration::from_secs(self.header_read_timeout_seconds),
                body_read_timeout: Duration::from_secs(self.body_read_timeout_seconds),
                http2_keepalive: Duration::from_secs(self.http2_keepalive_seconds),
                idle_timeout: Duration::from_secs(self.connection_idle_timeout_seconds),
                write_timeout: Duration::from_secs(self.bridge_write_timeout_seconds),
                response_write_timeout: Duration::from_secs(self.response_write_timeout_seconds),
                max_unsent_bytes_per_connection: self.max_unsent_bytes_per_connection,
                max_unsent_bytes: self.max_unsent_bytes,
                trusted_proxies: self.trusted_proxies.clone(),
            },
            oauth: self.oauth_settings(),
            legacy: LegacyLimits {
                queue_bytes: self.legacy_sse_queue_bytes,
                streams_per_client: self.legacy_sse_streams_per_client,
                max_streams: self.legacy_sse_max_streams,
            },
            parked: ParkedLimits {
                calls: self.max_parked_calls,
                bytes: self.max_parked_bytes,
                bytes_per_session: self.max_parked_bytes_per_session,
            },
            listen: ListenLimits {
                streams_per_session: self.max_listen_streams_per_session,
                uri_bytes: self.max_listen_uri_bytes,
            },
            head: HeadLimits {
                max_target_bytes: self.max_request_target_bytes,
                max_header_bytes: self.max_header_bytes,
                max_headers: self.max_headers,
            },
            policy: None,
        }
    }
}
