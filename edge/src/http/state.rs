//! The state every HTTP handler shares: the hub, the edge's settings and the
//! `Host`/`Origin` policy. The MCP handlers add their own on top
//! ([`super::mcp::McpState`]); nothing here knows a protocol.

use std::sync::Arc;

use openclaw_proxy_core::Hub;

use super::guard::HostGuard;
use crate::config::EdgeConfig;

/// Shared state of the HTTP handlers: one pointer, because axum clones a
/// handler's state for every request (a profile showed the clones and drops
/// of six separate `Arc`s at 2 % of the server's time).
#[derive(Clone)]
pub struct EdgeState(Arc<EdgeShared>);

impl EdgeState {
    /// The state over `hub` with `config`.
    pub fn new(hub: Hub, config: EdgeConfig) -> Self {
        Self(Arc::new(EdgeShared {
            guard: HostGuard::new(&config),
            hub,
            config,
        }))
    }
}

impl std::ops::Deref for EdgeState {
    type Target = EdgeShared;

    fn deref(&self) -> &EdgeShared {
        &self.0
    }
}

/// What [`EdgeState`] points to.
pub struct EdgeShared {
    /// The core every route operates on.
    pub hub: Hub,
    /// The edge's settings.
    pub config: EdgeConfig,
    /// The Host/Origin policy of the MCP endpoint.
    pub guard: HostGuard,
}
