//! One client for the proxy's HTTP surface: the session routes typed
//! (`POST /v1/chat/sessions` answers a [`TestSession`]), health, readiness
//! and metrics, raw JSON-RPC to `/v1/mcp`, and any request at all, hostile
//! bodies and headers included, through [`Rest::request`]. Every answer is a
//! [`Reply`]: the status, the headers and the whole body, read once.
//!
//! A test starts from [`TestServer::rest`](crate::TestServer::rest) (the app token) or
//! [`Rest::new`] (a base URL and no token) and swaps the token per request
//! with [`Rest::token`] or [`RawRequest::bearer_auth`].

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
pub use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::session::TestSession;

/// A client of one server, with the bearer token it sends (if any).
#[derive(Clone, Debug)]
pub struct Rest {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Default for Rest {
    /// A client of no server in particular, for whole URLs, that sends no
    /// token.
    fn default() -> Self {
        Self::new("")
    }
}

impl Rest {
    /// A client of the server at `base` (`http://127.0.0.1:PORT`) that
    /// sends no token.
    pub fn new(base: impl Into<String>) -> Self {
        Self {
            http: crate::http_client(),
            base: base.into(),
            token: None,
        }
    }

    /// The same client sending `token`.
    pub fn token(&self, token: &str) -> Self {
        self.token_opt(Some(token))
    }

    /// The same client sending `token`, or none.
    pub fn token_opt(&self, token: Option<&str>) -> Self {
        Self {
            token: token.map(str::to_owned),
            ..self.clone()
        }
    }

    /// `POST /v1/chat/sessions` with a JSON `body`.
    pub async fn create_session(&self, body: &Value) -> Reply {
        self.post("/v1/chat/sessions").json(body).send().await
    }

    /// `POST /v1/chat/sessions` with `body` as it is, labelled JSON.
    pub async fn create_session_raw(&self, body: impl Into<Bytes>) -> Reply {
        self.post("/v1/chat/sessions")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
    }

    /// Registers a session with `body`; the registration must succeed.
    pub async fn register(&self, body: &Value) -> TestSession {
        let reply = self.create_session(body).await;
        assert_eq!(reply.status(), 200, "create session: {}", reply.text());
        TestSession::from_rest_reply(&reply.json()).expect("the documented registration reply")
    }

    /// `GET /v1/chat/sessions/{id}`.
    pub async fn get_session(&self, id: &str) -> Reply {
        self.get(&format!("/v1/chat/sessions/{id}")).send().await
    }

    /// `DELETE /v1/chat/sessions/{id}`.
    pub async fn delete_session(&self, id: &str) -> Reply {
        self.delete(&format!("/v1/chat/sessions/{id}")).send().await
    }

    /// `PUT /v1/chat/sessions/{id}/tools` with a JSON `body`
    /// (`{"tools": [...]}`).
    pub async fn put_tools(&self, id: &str, body: &Value) -> Reply {
        self.request(Method::PUT, &format!("/v1/chat/sessions/{id}/tools"))
            .json(body)
            .send()
            .await
    }

    /// `GET /health`.
    pub async fn health(&self) -> Reply {
        self.get("/health").send().await
    }

    /// `GET /ready`.
    pub async fn ready(&self) -> Reply {
        self.get("/ready").send().await
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> Reply {
        self.get("/metrics").send().await
    }

    /// A JSON-RPC `POST` to an MCP path or URL with the headers a
    /// streamable HTTP client sends (`Accept` both ways, JSON body).
    pub fn mcp(&self, path_or_url: &str, body: &Value) -> RawRequest {
        self.mcp_raw(path_or_url, body.to_string())
    }

    /// [`Rest::mcp`] with `body` sent byte for byte.
    pub fn mcp_raw(&self, path_or_url: &str, body: impl Into<Bytes>) -> RawRequest {
        self.post(path_or_url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
    }

    /// `GET` of a path (`/health`) or a whole URL.
    pub fn get(&self, path_or_url: &str) -> RawRequest {
        self.request(Method::GET, path_or_url)
    }

    /// `POST` of a path or a whole URL.
    pub fn post(&self, path_or_url: &str) -> RawRequest {
        self.request(Method::POST, path_or_url)
    }

    /// `DELETE` of a path or a whole URL.
    pub fn delete(&self, path_or_url: &str) -> RawRequest {
        self.request(Method::DELETE, path_or_url)
    }

    /// Any request to a path of this server (`/v1/…`) or a whole URL
    /// (`http://…`), with this client's token.
    pub fn request(&self, method: Method, path_or_url: &str) -> RawRequest {
        let url = if path_or_url.starts_with("http://") || path_or_url.starts_with("https://") {
            path_or_url.to_owned()
        } else {
            format!("{}{path_or_url}", self.base)
        };
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token {
            headers.insert("authorization", bearer(token));
        }
        RawRequest {
            http: self.http.clone(),
            method,
            url,
            headers,
            body: None,
            timeout: None,
        }
    }
}

/// A raw `POST` of `body` to the MCP URL `url` with no token: [`Rest::mcp`]
/// for a test that holds only the URL.
pub fn mcp_post(url: &str, body: &Value) -> RawRequest {
    Rest::default().mcp(url, body)
}

fn bearer(token: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("Bearer {token}")).expect("a token fit for a header")
}

/// A request being put together; a header set twice keeps the last value.
#[derive(Debug)]
pub struct RawRequest {
    http: reqwest::Client,
    method: Method,
    url: String,
    headers: HeaderMap,
    body: Option<Bytes>,
    timeout: Option<Duration>,
}

impl RawRequest {
    /// Sets a header; the value may be any bytes a header can carry.
    pub fn header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("a header name");
        let value = HeaderValue::from_bytes(value.as_ref()).expect("a header value");
        self.headers.insert(name, value);
        self
    }

    /// Sends `token` instead of the client's.
    pub fn bearer_auth(mut self, token: &str) -> Self {
        self.headers.insert("authorization", bearer(token));
        self
    }

    /// Sends no `Authorization` header.
    pub fn no_auth(mut self) -> Self {
        self.headers.remove("authorization");
        self
    }

    /// `body` as JSON, with `Content-Type: application/json`.
    pub fn json(self, body: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(body.to_string())
    }

    /// `body` as it is.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Gives up after `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    fn build(self) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(self.method, self.url)
            .headers(self.headers);
        if let Some(body) = self.body {
            request = request.body(body);
        }
        if let Some(timeout) = self.timeout {
            request = request.timeout(timeout);
        }
        request
    }

    /// Sends the request and reads the whole answer; panics when no answer
    /// comes.
    pub async fn send(self) -> Reply {
        let what = format!("{} {}", self.method, self.url);
        self.try_send()
            .await
            .unwrap_or_else(|error| panic!("{what}: {error}"))
    }

    /// Sends the request and reads the whole answer, or says why there is
    /// none.
    pub async fn try_send(self) -> Result<Reply, reqwest::Error> {
        let response = self.build().send().await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// Sends the request and hands back the answer unread, for a body that
    /// streams (SSE); panics when no answer comes.
    pub async fn send_streaming(self) -> reqwest::Response {
        let what = format!("{} {}", self.method, self.url);
        self.build()
            .send()
            .await
            .unwrap_or_else(|error| panic!("{what}: {error}"))
    }
}

/// A whole answer: status, headers and body.
#[derive(Clone, Debug)]
pub struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Reply {
    /// The status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The headers.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// One header as text, if present and readable.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)?.to_str().ok()
    }

    /// The body's bytes.
    pub fn bytes(&self) -> &Bytes {
        &self.body
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON; panics, showing it, when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {}", self.text()))
    }
}
