//! MCP clients: rmcp's streamable HTTP client (the official Rust SDK), and the
//! raw JSON-RPC bodies tests send through [`crate::Rest`] for checks below the
//! SDK (status codes, headers).

use std::collections::HashMap;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::rest::{RawRequest, mcp_post};
use crate::server::OPENCLAW_TOKEN;

/// A connected rmcp client.
pub type McpClient = RunningService<RoleClient, ClientConfig>;

/// How an MCP client reaches its session.
#[derive(Clone, Debug)]
pub enum Route {
    /// `POST {base}/v1/mcp/{session_id}`.
    Path,
    /// `POST {base}/v1/mcp` with `MCP-Session-Id`.
    Header,
    /// `POST {base}/v1/mcp/` with `MCP-Session-Id`.
    HeaderSlash,
}

fn client_info(version: ProtocolVersion) -> ClientConfig {
    let mut info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("openclaw-proxy-tests", "0"),
    );
    info.protocol_version = version;
    info
}

fn transport(
    base: &str,
    session_id: &str,
    route: &Route,
    token: Option<&str>,
) -> StreamableHttpClientTransport<reqwest::Client> {
    let (uri, header) = match route {
        Route::Path => (format!("{base}/v1/mcp/{session_id}"), None),
        Route::Header => (format!("{base}/v1/mcp"), Some(session_id)),
        Route::HeaderSlash => (format!("{base}/v1/mcp/"), Some(session_id)),
    };
    // rmcp reserves Mcp-Session-Id for sessions the server mints; a static
    // header, as OpenClaw sends it, goes in through the HTTP client.
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(session_id) = header {
        headers.insert("mcp-session-id", session_id.parse().expect("header value"));
    }
    let client = crate::http_client_builder()
        .default_headers(headers)
        .build()
        .expect("reqwest client");
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(uri).custom_headers(HashMap::new());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    StreamableHttpClientTransport::with_client(client, config)
}

/// Connects with `initialize` at `version` (the default handshake).
pub async fn mcp_connect_at(
    base: &str,
    session_id: &str,
    route: Route,
    version: ProtocolVersion,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    client_info(version)
        .serve(transport(base, session_id, &route, Some(OPENCLAW_TOKEN)))
        .await
}

/// Connects with `initialize` at 2025-11-25, as OpenClaw does.
pub async fn mcp_connect(base: &str, session_id: &str, route: Route) -> McpClient {
    mcp_connect_at(base, session_id, route, ProtocolVersion::V_2025_11_25)
        .await
        .expect("MCP client connects")
}

/// Connects with `server/discover` at 2026-07-28 (no `initialize`).
pub async fn mcp_connect_stateless(base: &str, session_id: &str) -> McpClient {
    client_info(ProtocolVersion::V_2026_07_28)
        .serve_with_lifecycle(
            transport(base, session_id, &Route::Path, Some(OPENCLAW_TOKEN)),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("MCP client discovers")
}

/// Connects with an explicit token (or none).
pub async fn mcp_connect_with_token(
    base: &str,
    session_id: &str,
    token: Option<&str>,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    client_info(ProtocolVersion::V_2025_11_25)
        .serve(transport(base, session_id, &Route::Path, token))
        .await
}

/// Connects to `{base}/v1/mcp` with no session named and `token` (a
/// signed-in user's access token: their one-URL view), with `initialize`
/// at 2025-11-25 or `server/discover` at 2026-07-28.
pub async fn mcp_connect_view(
    base: &str,
    token: &str,
    version: ProtocolVersion,
) -> Result<McpClient, rmcp::service::ClientInitializeError> {
    let client = crate::http_client_builder()
        .build()
        .expect("reqwest client");
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{base}/v1/mcp"))
        .custom_headers(HashMap::new())
        .auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    if version == ProtocolVersion::V_2026_07_28 {
        client_info(version)
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
    } else {
        client_info(version).serve(transport).await
    }
}

/// The parameters of a `tools/call` of `name` with `arguments` (a JSON
/// object).
pub fn call(name: &str, arguments: Value) -> rmcp::model::CallToolRequestParams {
    let Value::Object(arguments) = arguments else {
        panic!("tool arguments must be a JSON object");
    };
    rmcp::model::CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)
}

/// The text blocks of a tool result, in order.
pub fn texts(result: &rmcp::model::CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|block| match block {
            rmcp::model::ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .collect()
}

/// A raw JSON-RPC `initialize` body at `version`.
pub fn initialize_body(id: u64, version: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-client", "version": "1.0.0"}
        }
    })
}

/// A 2026-07-28 client's `tools/call` of one tool, sent raw: the same
/// request every round of its `input_required` rounds, a retry adding its
/// answers and state.
#[derive(Clone, Debug)]
pub struct ToolsCall2026<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// Its arguments (a JSON object).
    pub arguments: Value,
    /// The client's `io.modelcontextprotocol/clientInfo`; `None` leaves it
    /// out.
    pub client_info: Option<Value>,
}

impl ToolsCall2026<'_> {
    /// The JSON-RPC request (id 9): its `_meta` names the revision, the
    /// client's `capabilities` and its info; `more` params stand beside
    /// them (a retry's `inputResponses` and `requestState`).
    pub fn body(&self, capabilities: &Value, more: &Value) -> Value {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        if let Some(info) = &self.client_info {
            meta["io.modelcontextprotocol/clientInfo"] = info.clone();
        }
        let mut params = json!({"name": self.tool, "arguments": self.arguments, "_meta": meta});
        if let (Some(params), Some(more)) = (params.as_object_mut(), more.as_object()) {
            params.extend(more.clone());
        }
        json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
    }

    /// [`ToolsCall2026::body`] POSTed to the MCP URL `mcp_url` with the
    /// OpenClaw token and the headers the revision asks for.
    pub fn post(&self, mcp_url: &str, capabilities: &Value, more: &Value) -> RawRequest {
        mcp_post(mcp_url, &self.body(capabilities, more))
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", self.tool)
    }
}

/// The text of a tool result that must be an error (`isError: true`): its
/// first content block's, or nothing.
pub fn error_text(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The client's end of an SSE answer that is still being written (a call
/// whose app asks the client something, whose result comes later): its
/// JSON-RPC messages one by one, as they arrive.
pub struct SseStream {
    bytes:
        std::pin::Pin<Box<dyn futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl SseStream {
    /// The stream of a response whose body is SSE.
    pub fn of(response: reqwest::Response) -> Self {
        Self {
            bytes: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    /// The next JSON-RPC message on the stream; `None` when it ended.
    pub async fn next(&mut self) -> Option<Value> {
        use futures_util::StreamExt;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if !data.is_empty() {
                    return serde_json::from_str(&data.join("\n")).ok();
                }
                continue;
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// What was read and not yet returned, for a failure's message.
    pub fn unread(&self) -> &str {
        &self.buffer
    }
}

/// The `data:` messages of an SSE body, in order.
pub fn sse_messages(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let data = data.join("\n");
            (!data.trim().is_empty()).then(|| serde_json::from_str(&data).expect("JSON event"))
        })
        .collect()
}
