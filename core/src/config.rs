//! The core's settings. The server binary fills this from its command line and
//! environment; tests build it directly with short intervals.

use std::time::Duration;

use crate::auth::BearerToken;
use crate::limits::Limits;

/// Settings of the hub and the gRPC service.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// Bearer token apps must present; empty means no authentication.
    pub app_token: BearerToken,
    /// Bearer token of the MCP endpoint; empty means no authentication.
    pub openclaw_token: BearerToken,
    /// When true, the global tokens open no session: the app token only
    /// creates sessions, and every per-session operation needs that
    /// session's own token (`docs/security.md`, "Two modes").
    pub require_session_tokens: bool,
    /// A session with no bridge and no call in flight is removed after this
    /// long without activity.
    pub session_ttl: Duration,
    /// How often expired sessions are looked for.
    pub sweep_interval: Duration,
    /// One tool call's limit, from sending it to the app to its answer.
    pub tool_timeout: Duration,
    /// The longest limit a tool may ask for with its own `timeout_seconds`.
    pub max_tool_timeout: Duration,
    /// How long a gRPC bridge may take to send its `hello`.
    pub hello_timeout: Duration,
    /// How often the proxy pings an attached bridge.
    pub ping_interval: Duration,
    /// A bridge silent for this many ping intervals is dropped.
    pub missed_pings_allowed: u32,
    /// A bridge whose app leaves the proxy's messages unread this long is
    /// dropped, and its calls fail at once.
    pub bridge_write_timeout: Duration,
    /// The largest message a bridge carries, in bytes: an invocation that
    /// would be larger fails alone, and the bridge stays up.
    pub max_message_bytes: usize,
    /// How long a request of the app to an MCP client (elicitation,
    /// sampling, roots) may wait for its answer. The call's own timeout is
    /// paused meanwhile: a person may take minutes to answer.
    pub client_request_timeout: Duration,
    /// How many requests to its client one call may have outstanding.
    pub max_client_requests_per_call: usize,
    /// Whether a call of a tool that needs the user's confirmation goes to
    /// the app unconfirmed when its client cannot be asked (instead of
    /// being refused).
    pub allow_unconfirmed_calls: bool,
    /// The key that seals the `requestState` of 2026-07-28
    /// `input_required` results; the same on every node of a cluster.
    pub request_state_key: crate::request_state::StateKey,
    /// Ceilings on sessions, tools, calls and session creation.
    pub limits: Limits,
    /// OAuth access tokens on the MCP side, when an issuer is configured.
    pub oauth: Option<OAuthPolicy>,
    /// Tool calls that run as MCP tasks.
    pub tasks: crate::tasks::TaskSettings,
}

/// What the hub's decisions need of the OAuth settings (the edge verifies
/// the tokens themselves).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthPolicy {
    /// The configured issuer: a session owner named without one is bound
    /// to it.
    pub issuer: String,
    /// When true, only access tokens open the MCP side: the OpenClaw token
    /// and the sessions' `mcp_token`s open nothing there.
    pub only: bool,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            app_token: BearerToken::default(),
            openclaw_token: BearerToken::default(),
            require_session_tokens: false,
            session_ttl: Duration::from_secs(300),
            sweep_interval: Duration::from_secs(15),
            tool_timeout: Duration::from_secs(120),
            max_tool_timeout: Duration::from_secs(3600),
            hello_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(20),
            missed_pings_allowed: 3,
            bridge_write_timeout: Duration::from_secs(10),
            max_message_bytes: 4 * 1024 * 1024,
            client_request_timeout: Duration::from_secs(600),
            max_client_requests_per_call: 4,
            allow_unconfirmed_calls: false,
            request_state_key: crate::request_state::StateKey::random(),
            limits: Limits::default(),
            oauth: None,
            tasks: crate::tasks::TaskSettings::default(),
        }
    }
}
