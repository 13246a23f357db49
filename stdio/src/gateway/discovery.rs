//! Discovery: the tools the Gateway really serves, read once at start over
//! its WebSocket protocol (the same port as `/tools/invoke`).
//!
//! Why: a fixed list lies in both directions. Tools on the Gateway's HTTP
//! deny list (`sessions_send`) answer 404 on every call, tools that need a
//! provider (`pdf`, `web_search`) exist only when one is configured, and the
//! tools agents want (`sessions_list`, `memory_search`, ...) were missing.
//!
//! How: an operator connection (protocol 4, token auth; a local connection
//! keeps its scopes without device pairing), then `tools.effective` for the
//! session key (names and descriptions after the agent's tool policy; no
//! parameter schemas), or `tools.catalog` when the Gateway does not offer it
//! or has no session for the key (a fresh Gateway, or one whose agents run
//! under their own session ids), and `config.get` for `gateway.tools.allow` / `deny`, which [`super::policy`]
//! applies. Every step is bounded by one deadline; any failure is a
//! [`DiscoveryError`] whose message says why, and gateway mode then serves its
//! built-in list.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::policy::HttpToolSettings;

/// The Gateway protocol version this client speaks.
pub const PROTOCOL_VERSION: u64 = 4;

/// The largest frame accepted from the Gateway (its own limit is 25 MiB; a
/// tool inventory is a few hundred KiB).
const MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

/// One tool as the Gateway describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayTool {
    /// The tool name `/tools/invoke` takes.
    pub name: String,
    /// The Gateway's description (may be empty).
    pub description: String,
}

/// Where the tool names came from.
#[derive(Clone, Debug, PartialEq)]
pub enum Inventory {
    /// `tools.effective` for this session key: after the agent's tool policy.
    Effective(String),
    /// `tools.catalog`: every tool the Gateway knows, without policy.
    Catalog,
}

/// What discovery found, before the HTTP surface's rules are applied.
#[derive(Clone, Debug)]
pub struct Discovery {
    pub inventory: Inventory,
    pub tools: Vec<GatewayTool>,
    /// `gateway.tools`, or `None` when `config.get` could not be read.
    pub http_settings: Option<HttpToolSettings>,
    /// Sentences for stderr about what discovery had to assume.
    pub notes: Vec<String>,
}

/// Why discovery was not possible.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error(
        "discovery speaks ws:// to an http:// Gateway URL and wss:// to an https:// one; {0} is neither (set OPENCLAW_MCP_DISCOVERY=off to silence this)"
    )]
    UnsupportedUrl(String),
    #[error(
        "{0} is an https:// Gateway URL, and this build of openclaw-proxy-stdio has no TLS: build it with the default features (`cargo build --release -p openclaw-proxy-stdio`)"
    )]
    NoTls(String),
    #[error("cannot open the Gateway's WebSocket at {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("the Gateway did not complete discovery within {0} seconds")]
    Timeout(u64),
    #[error("the Gateway closed the WebSocket during discovery{0}")]
    Closed(String),
    #[error(
        "the Gateway refused the operator connection: {0} (discovery needs a local Gateway, or a paired device, and a token with operator.read)"
    )]
    Refused(String),
    #[error(
        "the Gateway speaks protocol {0}; this binary knows protocol {PROTOCOL_VERSION} (update openclaw-proxy-stdio)"
    )]
    Protocol(String),
    #[error(
        "the Gateway has no session {0:?} yet: start one (for example a chat in the Control UI) or set OPENCLAW_MCP_SESSION_KEY to an existing one"
    )]
    NoSession(String),
    #[error("the Gateway answered {method} with an error: {message}")]
    Rpc { method: String, message: String },
    /// The Gateway is still starting; retried after the delay it asks for.
    #[error("the Gateway is still starting")]
    Starting(Duration),
    #[error("the Gateway offers neither tools.effective nor tools.catalog")]
    NoToolMethods,
    #[error("the Gateway's answer to {method} is malformed: {reason}")]
    Malformed { method: String, reason: String },
}

/// The WebSocket URL of a Gateway base URL (`http://h:p/x` → `ws://h:p/x`).
pub fn websocket_url(gateway_url: &str) -> Result<String, DiscoveryError> {
    if let Some(rest) = gateway_url.strip_prefix("http://") {
        return Ok(format!("ws://{rest}"));
    }
    match gateway_url.strip_prefix("https://") {
        Some(rest) if cfg!(feature = "https") => Ok(format!("wss://{rest}")),
        Some(_) => Err(DiscoveryError::NoTls(gateway_url.to_owned())),
        None => Err(DiscoveryError::UnsupportedUrl(gateway_url.to_owned())),
    }
}

/// Reads the Gateway's tools for `session_key`, within `deadline`.
pub async fn discover(
    gateway_url: &str,
    token: &str,
    session_key: &str,
    deadline: Duration,
) -> Result<Discovery, DiscoveryError> {
    let url = websocket_url(gateway_url)?;
    tokio::time::timeout(deadline, discover_at(&url, token, session_key))
        .await
        .unwrap_or(Err(DiscoveryError::Timeout(deadline.as_secs())))
}

async fn discover_at(
    url: &str,
    token: &str,
    session_key: &str,
) -> Result<Discovery, DiscoveryError> {
    // A Gateway still starting its sidecars refuses connections for a
    // moment and says when to retry; the caller's deadline bounds the loop.
    let (mut rpc, hello) = loop {
        let mut rpc = Rpc::connect(url).await?;
        match rpc.handshake(token).await {
            Ok(hello) => break (rpc, hello),
            Err(DiscoveryError::Starting(wait)) => {
                rpc.close().await;
                tokio::time::sleep(wait).await;
            }
            Err(other) => return Err(other),
        }
    };
    let mut notes = Vec::new();

    let offers = |method: &str| {
        hello
            .methods
            .as_ref()
            .is_none_or(|methods| methods.iter().any(|m| m == method))
    };
    // `tools.effective` answers for one session; a Gateway whose agents run
    // under their own session ids (ACP agents, `openclaw agent
    // --session-id`), or that has run none yet, has no session for the key,
    // and then `tools.catalog`, which needs none, still says what it serves.
    let effective = if offers("tools.effective") {
        match rpc
            .request("tools.effective", json!({"sessionKey": session_key}))
            .await
        {
            Ok(payload) => Some(payload),
            Err(DiscoveryError::Rpc { message, .. }) if message.contains("unknown session") => {
                if !offers("tools.catalog") {
                    return Err(DiscoveryError::NoSession(session_key.to_owned()));
                }
                notes.push(format!(
                    "the Gateway has no session {session_key:?}: listing its whole catalog (tools.catalog), without an agent's tool policy; set OPENCLAW_MCP_SESSION_KEY to an existing session for its own list"
                ));
                None
            }
            Err(other) => return Err(other),
        }
    } else {
        notes.push(
            "the Gateway does not offer tools.effective: listing its whole catalog, without its tool policy".to_owned(),
        );
        None
    };
    let (inventory, tools) = match effective {
        Some(payload) => (
            Inventory::Effective(session_key.to_owned()),
            parse_tools("tools.effective", payload)?,
        ),
        None if offers("tools.catalog") => {
            let payload = rpc.request("tools.catalog", json!({})).await?;
            (Inventory::Catalog, parse_tools("tools.catalog", payload)?)
        }
        None => return Err(DiscoveryError::NoToolMethods),
    };

    let http_settings = if hello.scopes.iter().any(|s| s == "operator.admin") {
        match rpc.request("config.get", json!({})).await {
            Ok(payload) => Some(http_settings(&payload)),
            Err(error) => {
                notes.push(format!(
                    "cannot read gateway.tools ({error}): assuming the default HTTP deny list"
                ));
                None
            }
        }
    } else {
        notes.push("the token has no operator.admin scope, which config.get needs: assuming the default HTTP deny list without gateway.tools.allow/deny".to_owned());
        None
    };

    rpc.close().await;
    Ok(Discovery {
        inventory,
        tools,
        http_settings,
        notes,
    })
}

/// What `hello-ok` tells about the connection.
struct Hello {
    scopes: Vec<String>,
    /// The methods the Gateway offers, when it says.
    methods: Option<Vec<String>>,
}

struct Rpc {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
}

impl Rpc {
    async fn connect(url: &str) -> Result<Self, DiscoveryError> {
        let config = WebSocketConfig::default().max_message_size(Some(MAX_FRAME_BYTES));
        let (socket, _) = tokio_tungstenite::connect_async_with_config(url, Some(config), true)
            .await
            .map_err(|error| DiscoveryError::Connect {
                url: url.to_owned(),
                reason: match error {
                    tungstenite::Error::Http(response) => format!(
                        "it answered HTTP {} instead of a WebSocket (is this an OpenClaw Gateway?)",
                        response.status()
                    ),
                    tungstenite::Error::Io(error) => error.to_string(),
                    other => other.to_string(),
                },
            })?;
        Ok(Self { socket, next_id: 0 })
    }

    /// Waits for `connect.challenge`, connects as an operator, checks the
    /// protocol version and the scopes granted.
    async fn handshake(&mut self, token: &str) -> Result<Hello, DiscoveryError> {
        loop {
            let frame = self.next_frame().await?;
            if frame["type"] == "event" && frame["event"] == "connect.challenge" {
                break;
            }
        }
        let params = json!({
            "minProtocol": PROTOCOL_VERSION,
            "maxProtocol": PROTOCOL_VERSION,
            "client": {
                "id": "cli",
                "mode": "cli",
                "version": env!("CARGO_PKG_VERSION"),
                "platform": std::env::consts::OS,
            },
            "role": "operator",
            "scopes": ["operator.read", "operator.admin"],
            "caps": [],
            "userAgent": concat!("openclaw-proxy-stdio/", env!("CARGO_PKG_VERSION")),
            "auth": {"token": token},
        });
        let payload = self
            .request("connect", params)
            .await
            .map_err(|error| match error {
                DiscoveryError::Rpc { message, .. }
                    if message.to_ascii_lowercase().contains("protocol") =>
                {
                    DiscoveryError::Protocol(format!("other than {PROTOCOL_VERSION} ({message})"))
                }
                DiscoveryError::Rpc { message, .. } => DiscoveryError::Refused(message),
                other => other,
            })?;
        match payload.get("protocol").and_then(Value::as_u64) {
            Some(PROTOCOL_VERSION) => {}
            other => {
                return Err(DiscoveryError::Protocol(
                    other.map_or_else(|| "unknown".to_owned(), |v| v.to_string()),
                ));
            }
        }
        let strings = |value: Option<&Value>| -> Option<Vec<String>> {
            value.and_then(Value::as_array).map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
        };
        let scopes = strings(payload.pointer("/auth/scopes")).unwrap_or_default();
        if !scopes
            .iter()
            .any(|s| s == "operator.read" || s == "operator.admin")
        {
            return Err(DiscoveryError::Refused(format!(
                "it granted the scopes [{}] but tools.effective needs operator.read",
                scopes.join(", ")
            )));
        }
        Ok(Hello {
            scopes,
            methods: strings(payload.pointer("/features/methods")),
        })
    }

    /// Sends one request and waits for its answer, skipping events.
    async fn request(&mut self, method: &str, params: Value) -> Result<Value, DiscoveryError> {
        self.next_id += 1;
        let id = self.next_id.to_string();
        let frame = json!({"type": "req", "id": id, "method": method, "params": params});
        self.socket
            .send(Message::text(frame.to_string()))
            .await
            .map_err(|error| DiscoveryError::Closed(format!(": {error}")))?;
        loop {
            let frame = self.next_frame().await?;
            if frame["type"] != "res" || frame["id"] != id.as_str() {
                continue;
            }
            if frame["ok"] == true {
                return Ok(frame.get("payload").cloned().unwrap_or(Value::Null));
            }
            let error = &frame["error"];
            if let Some(wait) = startup_retry(error) {
                return Err(DiscoveryError::Starting(wait));
            }
            let message = error["message"]
                .as_str()
                .or_else(|| error["code"].as_str())
                .unwrap_or("no message")
                .to_owned();
            return Err(DiscoveryError::Rpc {
                method: method.to_owned(),
                message,
            });
        }
    }

    /// The next JSON text frame; pings are answered by the socket itself.
    async fn next_frame(&mut self) -> Result<Value, DiscoveryError> {
        loop {
            match self.socket.next().await {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) {
                        return Ok(frame);
                    }
                }
                Some(Ok(Message::Close(Some(close)))) if u16::from(close.code) == 1013 => {
                    return Err(DiscoveryError::Starting(Duration::from_millis(500)));
                }
                Some(Ok(Message::Close(close))) => {
                    return Err(DiscoveryError::Closed(
                        close
                            .map(|close| format!(" ({} {})", u16::from(close.code), close.reason))
                            .unwrap_or_default(),
                    ));
                }
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(DiscoveryError::Closed(format!(": {error}"))),
                None => return Err(DiscoveryError::Closed(String::new())),
            }
        }
    }

    async fn close(mut self) {
        let _ = self.socket.close(None).await;
    }
}

/// The delay a "still starting" error asks for (`UNAVAILABLE`, retryable,
/// `details.reason: startup-sidecars`), kept between 100 ms and 2 s as the
/// Gateway's own client does.
fn startup_retry(error: &Value) -> Option<Duration> {
    let starting = error["code"] == "UNAVAILABLE"
        && error["retryable"] == true
        && error.pointer("/details/reason") == Some(&json!("startup-sidecars"));
    let wait = error["retryAfterMs"]
        .as_u64()
        .unwrap_or(500)
        .clamp(100, 2000);
    starting.then(|| Duration::from_millis(wait))
}

#[derive(Deserialize)]
struct Groups {
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    #[serde(default)]
    tools: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    id: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, rename = "fullDescription")]
    full_description: Option<String>,
    #[serde(default, rename = "rawDescription")]
    raw_description: Option<String>,
    #[serde(default)]
    source: Option<String>,
}

/// The tools of a `tools.effective` / `tools.catalog` payload, in order, each
/// once.
fn parse_tools(method: &str, payload: Value) -> Result<Vec<GatewayTool>, DiscoveryError> {
    let parsed: Groups =
        serde_json::from_value(payload).map_err(|error| DiscoveryError::Malformed {
            method: method.to_owned(),
            reason: error.to_string(),
        })?;
    let mut tools: Vec<GatewayTool> = Vec::new();
    for group in parsed.groups {
        for entry in group.tools {
            // The MCP servers' tools of a session (`server__tool`) are the
            // agent's; `/tools/invoke` never reaches them.
            let from_mcp = entry.source.as_deref() == Some("mcp");
            if from_mcp || tools.iter().any(|tool| tool.name == entry.id) {
                continue;
            }
            // The catalog truncates `description` and keeps the whole text in
            // `fullDescription`; `tools.effective` gives the model-facing
            // `description` and the longer `rawDescription`.
            let description = [
                entry.full_description,
                entry.description,
                entry.raw_description,
            ]
            .into_iter()
            .flatten()
            .find(|text| !text.trim().is_empty())
            .unwrap_or_default();
            tools.push(GatewayTool {
                name: entry.id,
                description,
            });
        }
    }
    Ok(tools)
}

/// `gateway.tools.allow` / `deny` of a `config.get` payload (the resolved
/// runtime configuration, else the parsed file).
fn http_settings(payload: &Value) -> HttpToolSettings {
    let tools = ["/config", "/runtimeConfig", "/resolved", "/parsed"]
        .iter()
        .find_map(|root| payload.pointer(&format!("{root}/gateway/tools")));
    let list = |key: &str| -> Vec<String> {
        tools
            .and_then(|tools| tools.get(key))
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    HttpToolSettings {
        allow: list("allow"),
        deny: list("deny"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn websocket_url_follows_the_gateway_url() {
        assert_eq!(
            websocket_url("http://127.0.0.1:18789").expect("http"),
            "ws://127.0.0.1:18789"
        );
        #[cfg(feature = "https")]
        assert_eq!(
            websocket_url("https://gw.example/base").expect("https"),
            "wss://gw.example/base"
        );
        #[cfg(not(feature = "https"))]
        assert!(matches!(
            websocket_url("https://gw.example"),
            Err(DiscoveryError::NoTls(_))
        ));
        assert!(matches!(
            websocket_url("ftp://gw.example"),
            Err(DiscoveryError::UnsupportedUrl(_))
        ));
    }

    #[test]
    fn tools_keep_order_prefer_full_descriptions_and_skip_mcp() {
        let payload = json!({"groups": [
            {"id": "core", "tools": [
                {"id": "a", "description": "short a", "rawDescription": "long a"},
                {"id": "b", "description": ""}
            ]},
            {"id": "plugin:memory-core", "tools": [
                {"id": "c", "description": "trunc...", "fullDescription": "full c"},
                {"id": "a", "description": "again"}
            ]},
            {"id": "mcp", "source": "mcp", "tools": [
                {"id": "rooms__list", "description": "x", "source": "mcp"}
            ]}
        ]});
        let tools = parse_tools("tools.catalog", payload).expect("valid");
        assert_eq!(
            tools,
            [
                GatewayTool {
                    name: "a".into(),
                    description: "short a".into()
                },
                GatewayTool {
                    name: "b".into(),
                    description: String::new()
                },
                GatewayTool {
                    name: "c".into(),
                    description: "full c".into()
                },
            ]
        );
        assert!(parse_tools("tools.effective", json!({"groups": 3})).is_err());
    }

    #[test]
    fn startup_errors_ask_for_a_bounded_retry() {
        let starting = json!({"code": "UNAVAILABLE", "message": "starting", "retryable": true,
            "retryAfterMs": 60000, "details": {"reason": "startup-sidecars"}});
        assert_eq!(startup_retry(&starting), Some(Duration::from_secs(2)));
        let other = json!({"code": "UNAVAILABLE", "message": "no", "retryable": false});
        assert_eq!(startup_retry(&other), None);
    }

    #[test]
    fn http_settings_come_from_the_resolved_config() {
        let payload = json!({
            "parsed": {"gateway": {"tools": {"allow": ["ignored"]}}},
            "config": {"gateway": {"tools": {"allow": ["sessions_send"], "deny": ["browser", 3]}}}
        });
        assert_eq!(
            http_settings(&payload),
            HttpToolSettings {
                allow: vec!["sessions_send".into()],
                deny: vec!["browser".into()],
            }
        );
        assert_eq!(http_settings(&json!({})), HttpToolSettings::default());
    }
}
