//! The limits both modes share: the stdin line limit and the HTTP client's
//! timeouts and answer size. One flag set, flattened into each mode's
//! arguments, so `openclaw-proxy-stdio --max-line-bytes N` and
//! `openclaw-proxy-stdio gateway --max-line-bytes N` (and the same
//! environment variables) mean the same thing.

use std::time::Duration;

const MIB: u64 = 1024 * 1024;

/// Flags and environment variables of the limits.
#[derive(Clone, Debug, clap::Args)]
pub struct LimitArgs {
    /// Longest stdin line (one JSON-RPC message) in bytes; a longer line gets a parse error and is skipped. The server's default body limit.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_STDIO_MAX_LINE_BYTES",
        default_value_t = 4 * MIB,
        value_parser = clap::value_parser!(u64).range(1024..=1024 * MIB)
    )]
    pub max_line_bytes: u64,
    /// Largest HTTP answer read, in bytes (an SSE stream counts whole); a larger one fails that request with a JSON-RPC error.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_STDIO_MAX_RESPONSE_BYTES",
        default_value_t = 16 * MIB,
        value_parser = clap::value_parser!(u64).range(1024..=1024 * MIB)
    )]
    pub max_response_bytes: u64,
    /// Seconds to open an HTTP connection.
    #[arg(
        long,
        env = "OPENCLAW_PROXY_STDIO_CONNECT_TIMEOUT_SECONDS",
        default_value_t = 10,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    pub connect_timeout_seconds: u64,
    /// Seconds for one HTTP request, answer included; keep it above the server's tool timeout (OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS, 120).
    #[arg(
        long,
        env = "OPENCLAW_PROXY_STDIO_REQUEST_TIMEOUT_SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub request_timeout_seconds: u64,
}

impl Default for LimitArgs {
    fn default() -> Self {
        Self {
            max_line_bytes: 4 * MIB,
            max_response_bytes: 16 * MIB,
            connect_timeout_seconds: 10,
            request_timeout_seconds: 300,
        }
    }
}

/// The resolved limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Longest stdin line, in bytes.
    pub max_line_bytes: usize,
    /// Largest HTTP answer, in bytes.
    pub max_response_bytes: usize,
    /// Time to open an HTTP connection.
    pub connect_timeout: Duration,
    /// Time for one HTTP request, answer included.
    pub request_timeout: Duration,
}

impl LimitArgs {
    /// The limits these arguments set (the ranges are checked by clap).
    pub fn resolve(&self) -> Limits {
        let bytes = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        Limits {
            max_line_bytes: bytes(self.max_line_bytes),
            max_response_bytes: bytes(self.max_response_bytes),
            connect_timeout: Duration::from_secs(self.connect_timeout_seconds),
            request_timeout: Duration::from_secs(self.request_timeout_seconds),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        LimitArgs::default().resolve()
    }
}
