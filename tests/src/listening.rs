//! MCP clients that hold a stream open and hear a session's changes on it:
//! a 2026-07-28 client's `subscriptions/listen` ([`Listener`]) and a legacy
//! HTTP+SSE client (MCP 2024-11-05, [`LegacyClient`]), both driven raw
//! (reqwest, reading the stream as it comes) against any server's base URL,
//! so the end-to-end and cluster suites share them.

use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use crate::mcp_client::sse_messages;
use crate::rest::{RawRequest, Rest, mcp_post};
use crate::server::{OPENCLAW_TOKEN, no_hang};

/// A 2026-07-28 client's `subscriptions/listen`, held open.
pub struct Listener {
    stream: reqwest::Response,
    buffer: String,
}

impl Listener {
    /// Listens on `mcp_url` (a session's MCP endpoint) for updates of these
    /// resources and for resource and prompt list changes; returns once the
    /// server acknowledged the subscription.
    pub async fn open(mcp_url: &str, resources: &[&str]) -> Self {
        let notifications = json!({"resourcesListChanged": true, "promptsListChanged": true,
                                   "resourceSubscriptions": resources});
        Self::open_as(mcp_url, OPENCLAW_TOKEN, notifications).await
    }

    /// Listens on `mcp_url` with `token` for the changes `notifications`
    /// (a `SubscriptionFilter`) names.
    pub async fn open_as(mcp_url: &str, token: &str, notifications: Value) -> Self {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let listen = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                            "params": {"_meta": meta, "notifications": notifications}});
        let stream = mcp_post(mcp_url, &listen)
            .bearer_auth(token)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .header("accept", "application/json, text/event-stream")
            .send_streaming()
            .await;
        assert_eq!(stream.status(), 200, "subscriptions/listen on {mcp_url}");
        let mut listener = Self {
            stream,
            buffer: String::new(),
        };
        listener
            .until("notifications/subscriptions/acknowledged")
            .await;
        listener
    }

    /// The next JSON-RPC message on the stream.
    pub async fn next_message(&mut self) -> Value {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(message) = sse_messages(&event).into_iter().next() {
                    return message;
                }
                continue;
            }
            let chunk = no_hang(self.stream.chunk())
                .await
                .expect("the listen stream")
                .expect("a chunk: the listen stream ended");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The messages up to and including the first of `method`.
    pub async fn until(&mut self, method: &str) -> Vec<Value> {
        let mut heard = Vec::new();
        loop {
            let message = self.next_message().await;
            let done = message["method"] == method;
            heard.push(message);
            if done {
                return heard;
            }
        }
    }
}

type Bytes = Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>;

/// A client's end of a legacy SSE stream.
pub struct LegacyClient {
    /// The endpoint the stream named, resolved against the server's URL.
    pub endpoint: String,
    token: String,
    bytes: Bytes,
    buffer: String,
}

/// How the `GET` that opens a legacy stream reaches the session.
#[derive(Clone, Copy, Debug)]
pub enum Open {
    /// `/v1/mcp/{session_id}`.
    Path,
    /// `/v1/mcp` with `MCP-Session-Id`.
    Header,
    /// `/v1/mcp/` with `MCP-Session-Id`.
    HeaderSlash,
}

/// The `GET` that opens a legacy stream on the server at `base`, without a
/// token.
pub fn open_request(base: &str, session_id: &str, open: Open) -> RawRequest {
    let client = Rest::new(base);
    let request = match open {
        Open::Path => client.get(&format!("/v1/mcp/{session_id}")),
        Open::Header => client.get("/v1/mcp").header("mcp-session-id", session_id),
        Open::HeaderSlash => client.get("/v1/mcp/").header("mcp-session-id", session_id),
    };
    request.header("accept", "text/event-stream")
}

impl LegacyClient {
    /// Opens a stream on the server at `base` with the OpenClaw token and
    /// reads its `endpoint` event.
    pub async fn open(base: &str, session_id: &str, open: Open) -> Self {
        let response = open_request(base, session_id, open)
            .bearer_auth(OPENCLAW_TOKEN)
            .send_streaming()
            .await;
        assert_eq!(response.status(), 200, "{open:?}");
        let content_type = response.headers()["content-type"].to_str().expect("text");
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        let mut client = Self {
            endpoint: String::new(),
            token: OPENCLAW_TOKEN.to_owned(),
            bytes: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        };
        let (event, data) = no_hang(client.next_event()).await.expect("endpoint event");
        assert_eq!(event, "endpoint");
        assert!(
            data.starts_with(&format!("/v1/mcp/{session_id}/messages?legacy=")),
            "{data}"
        );
        client.endpoint = format!("{base}{data}");
        client
    }

    /// The next event with data, as (event name, data); comments skipped.
    /// `None` when the stream ended.
    pub async fn next_event(&mut self) -> Option<(String, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut event, mut data) = ("message".to_owned(), Vec::new());
                for line in block.lines() {
                    if let Some(name) = line.strip_prefix("event:") {
                        event = name.trim().to_owned();
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
                    }
                }
                if !data.is_empty() {
                    return Some((event, data.join("\n")));
                }
                continue;
            }
            match self.bytes.next().await {
                Some(Ok(chunk)) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(_)) | None => return None,
            }
        }
    }

    /// The next `message` event's JSON-RPC message.
    pub async fn next_message(&mut self) -> Value {
        let (event, data) = no_hang(self.next_event())
            .await
            .expect("a message on the stream");
        assert_eq!(event, "message", "{data}");
        serde_json::from_str(&data).expect("JSON-RPC message")
    }

    /// POSTs `body` to the endpoint; the HTTP status and body text.
    pub async fn post(&self, body: &Value) -> (u16, String) {
        post_to(&self.endpoint, &self.token, body).await
    }

    /// Sends a request and returns its answer from the stream.
    pub async fn request(&mut self, body: &Value) -> Value {
        let (status, text) = self.post(body).await;
        assert_eq!(status, 202, "{text}");
        let answer = self.next_message().await;
        assert_eq!(answer["id"], body["id"], "{answer}");
        answer
    }
}

/// POSTs `body` to `url` with `token`; the HTTP status and body text.
pub async fn post_to(url: &str, token: &str, body: &Value) -> (u16, String) {
    let response = Rest::default()
        .token(token)
        .post(url)
        .json(body)
        .send()
        .await;
    (response.status().as_u16(), response.text())
}
