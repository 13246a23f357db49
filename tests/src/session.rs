//! A registered session, typed: its id, its two URLs and, when the proxy
//! mints them, its own tokens. Registered over REST (the documented body,
//! [`legacy_session_body`]; [`TestSession::register`] in `server`) or over
//! gRPC (`SessionService.CreateSession`; [`TestSession::register_grpc`] in
//! `grpc_app`), the test gets the same shape. A plain value, below the
//! server and the clients that make one.

use std::net::SocketAddr;

use anyhow::Context;
use serde_json::{Value, json};

/// A session as the app that registered it knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestSession {
    /// The session id (`mcpSessionId`, the `MCP-Session-Id` value).
    pub id: String,
    /// `ws://…/v1/chat/sessions/{id}/bridge`.
    pub bridge_url: String,
    /// `http://…/v1/mcp/{id}`.
    pub mcp_url: String,
    /// The session's own app-side token (`ocps_…`), when the reply carries one.
    pub session_token: Option<String>,
    /// The session's own MCP token (`ocpm_…`), when the reply carries one.
    pub mcp_token: Option<String>,
}

impl TestSession {
    /// Reads the REST reply `{"mcpSessionId", "bridge_url", "mcp_url"}`, and
    /// `session_token` / `mcp_token` when present; an error names the field
    /// that is missing or not a string.
    pub fn from_rest_reply(reply: &Value) -> anyhow::Result<Self> {
        let field = |name: &str| {
            reply[name]
                .as_str()
                .map(str::to_owned)
                .with_context(|| format!("no string {name:?} in the registration reply {reply}"))
        };
        let token = |name: &str| reply[name].as_str().map(str::to_owned);
        Ok(Self {
            id: field("mcpSessionId")?,
            bridge_url: field("bridge_url")?,
            mcp_url: field("mcp_url")?,
            session_token: token("session_token"),
            mcp_token: token("mcp_token"),
        })
    }

    /// A session created over gRPC on the server at `addr`, with the URLs the server's
    /// REST reply would carry for it (no public URL configured).
    pub(crate) fn at(
        addr: SocketAddr,
        id: String,
        session_token: Option<String>,
        mcp_token: Option<String>,
    ) -> Self {
        Self {
            bridge_url: format!("ws://{addr}/v1/chat/sessions/{id}/bridge"),
            mcp_url: format!("http://{addr}/v1/mcp/{id}"),
            id,
            session_token,
            mcp_token,
        }
    }
}

/// The documented registration body with one `echo_text` tool.
pub fn legacy_session_body() -> Value {
    json!({
        "device_id": "device-1",
        "device_name": "desktop",
        "app_version": "1.0.0",
        "chat_id": "chat-1",
        "tools": [{
            "name": "echo_text",
            "path": "/tools/echo_text",
            "description": "Echo text.",
            "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}
        }]
    })
}
