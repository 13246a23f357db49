//! The legacy HTTP+SSE transport of MCP revision 2024-11-05, which OpenClaw
//! speaks when a server `url` does not say `"transport": "streamable-http"`.
//!
//! `GET` opens a stream whose first event, `endpoint`, names the URL the
//! client POSTs its messages to; each POST is answered `202` and runs through
//! `handle_message`, the code of the streamable endpoint, after the same
//! admission (`admit`); each JSON-RPC message of the answer is
//! pushed onto the stream as a `message` event. Only this transport offers
//! `tools.listChanged` and sends `notifications/tools/list_changed`.
//! A stream is bounded ([`MAX_STREAMS_PER_SESSION`],
//! [`MAX_PENDING`], [`QUEUE`], and the settings of
//! [`crate::config::LegacyLimits`]: bytes unread, streams per client and in
//! all, a fair share each when all are taken) and
//! ends with its client, its session, the server, or a client that stops
//! reading. Routing and lifetime in full:
//! `docs/mcp.md` ("Legacy HTTP+SSE transport").
//!
//! This file holds the routes (open a stream, post a message) and the
//! handling of one message; the registry of open streams and the events a
//! client reads are `streams.rs`.

mod streams;

use std::sync::Arc;
use std::time::Duration;

use super::transport::request::PROTOCOL_VERSION as HEADER_MCP_PROTOCOL_VERSION;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use openclaw_proxy_core::escape::{self, Outside};
use openclaw_proxy_core::metrics::McpMethod;
use openclaw_proxy_core::{Caller, ClientAddr, HubError, SessionEvent, Tool};
use serde_json::Value;
use tokio::sync::OwnedSemaphorePermit;

use super::jsonrpc::Refusal;
use super::{McpState, SESSION_HEADER, admit, handle_message};
use crate::http::error::ApiError;
use crate::http::public_url::RequestHead;
use crate::http::request::{SessionIdPath, read_body};
use crate::http::sse;
use streams::{LegacyStream, outgoing};

pub use streams::LegacyStreams;

/// Open legacy streams per session: a client needs one; a few allow for
/// reconnects that overlap the old stream's end.
pub const MAX_STREAMS_PER_SESSION: usize = 8;
/// Messages of one stream in progress at once (POSTed, answer not yet
/// queued); calls are further bounded by the session's call limit.
pub const MAX_PENDING: usize = 64;
/// Events queued for one stream before a producer waits for the client.
pub const QUEUE: usize = 64;
/// How often a stream looks at its session: tools changed, session gone,
/// server shutting down.
const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// The protocol revision of this transport, sent to the MCP handling when the
/// client names none and no `initialize` on the stream negotiated one.
pub const PROTOCOL_VERSION: &str = "2024-11-05";
/// The query parameter of the endpoint that names the stream.
const STREAM_PARAM: &str = "legacy";

/// Whether a `GET` asks for a legacy stream: it accepts `text/event-stream`
/// and names no protocol revision (a streamable HTTP client always does).
fn wants_legacy_stream(headers: &HeaderMap) -> bool {
    let accepts_sse = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| {
            let essence = item.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("text/event-stream")
        });
    accepts_sse && !headers.contains_key(HEADER_MCP_PROTOCOL_VERSION)
}

/// `GET /v1/mcp/{session_id}`: a legacy stream, else 405.
pub async fn open_by_path(
    State(state): State<McpState>,
    SessionIdPath(session_id): SessionIdPath,
    request: Request,
) -> Response {
    open(state, Some(session_id), request).await
}

/// `GET /v1/mcp` and `GET /v1/mcp/` routed by `MCP-Session-Id`: a legacy
/// stream, else 405.
pub async fn open_by_header(State(state): State<McpState>, request: Request) -> Response {
    let session_id = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_owned());
    open(state, session_id, request).await
}

async fn open(state: McpState, session_id: Option<String>, request: Request) -> Response {
    if !wants_legacy_stream(request.headers()) {
        // As before this transport existed: the streamable endpoint offers
        // no server-initiated stream.
        return ApiError::method_not_allowed(request.method(), request.uri()).into_response();
    }
    let caller = match admit(&state, session_id.as_deref(), RequestHead::of(&request)).await {
        Ok(caller) => caller,
        Err(refused) => return refused,
    };
    let session_id: Arc<str> = session_id.unwrap_or_default().into();
    let client = client_of(&state, &request, &caller);
    let opened = state
        .legacy
        .open(session_id.clone(), client, state.config.legacy);
    let (stream, receiver) = match opened {
        Ok(opened) => opened,
        Err(refusal) => return refusal.into_response(),
    };
    tracing::debug!(
        session = Outside::session(&session_id).field(),
        "legacy SSE stream opened"
    );
    let url = endpoint(state.config.public_url.as_deref(), &session_id, &stream.id);
    // The tools as the stream opens: any later change is announced.
    let tools = state.hub.tools(&session_id).await.ok();
    tokio::spawn(watch(state.clone(), stream.clone(), tools));
    let events = outgoing(state.legacy.clone(), stream, receiver);
    let first = futures_util::stream::once(std::future::ready(Ok::<_, std::convert::Infallible>(
        sse::named_event("endpoint", &url),
    )));
    sse::response(Body::from_stream(futures_util::StreamExt::chain(
        first, events,
    )))
}

/// Who opens a stream, as the per-client limit counts them: the OAuth
/// subject of its access token, else the client's address (read from
/// `X-Forwarded-For` only behind a trusted proxy, as the creation rate
/// does). Not the token: the OpenClaw token is shared by every client that
/// has it, and a session's own token by every stream of that session.
fn client_of(state: &McpState, request: &Request, caller: &Caller) -> Arc<str> {
    if let Some(identity) = &caller.identity {
        return format!(
            "OAuth subject {} of {}",
            escape::quoted(&identity.subject),
            escape::quoted(&identity.issuer)
        )
        .into();
    }
    let Some(ClientAddr(peer)) = request.extensions().get::<ClientAddr>().copied() else {
        return "an unknown address".into();
    };
    let forwarded_for = request
        .headers()
        .get("x-forwarded-for")
        .and_then(|value| value.to_str().ok());
    let address = openclaw_proxy_core::limits::client_address(
        peer.ip(),
        forwarded_for,
        &state.hub.config().limits.trusted_proxies,
    );
    format!("address {address}").into()
}

/// Watches the stream's session: `notifications/tools/list_changed` when
/// its tools change (looked at every [`WATCH_INTERVAL`], so a change made on
/// another node is seen too), `notifications/resources/updated` for a
/// resource the client subscribed to and the list changes of resources and
/// prompts as they happen on any node, and the end of the stream when the
/// session is gone or the server shuts down.
async fn watch(state: McpState, stream: Arc<LegacyStream>, mut tools: Option<Arc<[Tool]>>) {
    let hub = &state.hub;
    let mut changes = hub.watch(&stream.session_id).await.ok();
    loop {
        tokio::select! {
            () = stream.closed.cancelled() => return,
            () = tokio::time::sleep(WATCH_INTERVAL) => {}
            Some(change) = next_change(&mut changes) => {
                if let Some(notification) = change_notification(&stream, &change) {
                    let limit = hub.config().bridge_write_timeout;
                    stream.deliver(&state.legacy, &notification, limit).await;
                }
                continue;
            }
        }
        if hub.is_shutting_down() {
            state.legacy.close(&stream.id);
            return;
        }
        match hub.tools(&stream.session_id).await {
            Ok(now) => {
                let changed = tools
                    .as_ref()
                    .is_none_or(|before| !Arc::ptr_eq(before, &now) && before[..] != now[..]);
                tools = Some(now);
                if changed {
                    let notification =
                        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
                    stream
                        .deliver(
                            &state.legacy,
                            notification,
                            hub.config().bridge_write_timeout,
                        )
                        .await;
                }
            }
            Err(HubError::UnknownSession(_)) => {
                tracing::debug!("legacy SSE stream ends: its session is gone");
                state.legacy.close(&stream.id);
                return;
            }
            // A cluster backend out of reach: the session may well live on.
            Err(error) => tracing::debug!(%error, "legacy SSE stream cannot look at its session"),
        }
    }
}

/// The next change of a watched session; never, once the feed ended.
async fn next_change(
    changes: &mut Option<openclaw_proxy_core::hub::Watch>,
) -> Option<SessionEvent> {
    loop {
        let Some(feed) = changes.as_mut() else {
            return std::future::pending().await;
        };
        match feed.recv().await {
            Ok(change) => return Some(change),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => *changes = None,
        }
    }
}

/// The notification a change makes on a legacy stream: a resource update
/// only when the client subscribed to it; tool changes are the poll's.
fn change_notification(stream: &LegacyStream, change: &SessionEvent) -> Option<String> {
    match change {
        SessionEvent::ResourceUpdated(uri) if !stream.is_subscribed(uri) => return None,
        SessionEvent::ToolsChanged => return None,
        _ => {}
    }
    let notification = super::transport::answer::change_message(change, None);
    Some(String::from_utf8_lossy(&notification).into_owned())
}

/// The endpoint URL of a stream: a path on the origin the client reached,
/// under the public URL's path when it has one.
fn endpoint(public_url: Option<&str>, session_id: &str, stream_id: &str) -> String {
    let prefix = public_url
        .and_then(|url| url.split_once("://"))
        .and_then(|(_, rest)| rest.find('/').map(|slash| &rest[slash..]))
        .unwrap_or_default()
        .trim_end_matches('/');
    format!(
        "{prefix}/v1/mcp/{}/messages?{STREAM_PARAM}={stream_id}",
        percent_encode(session_id)
    )
}

/// `text` as one URL path segment: unreserved characters kept, every other
/// byte escaped.
fn percent_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The stream id of an endpoint request's query, if it names one.
fn stream_param(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == STREAM_PARAM)
        .map(|(_, value)| value)
}

/// `POST /v1/mcp/{session_id}/messages?legacy={stream id}`: one message of
/// a legacy stream, `202` at once, its answer on the stream.
pub async fn post_message(
    State(state): State<McpState>,
    SessionIdPath(session_id): SessionIdPath,
    request: Request,
) -> Response {
    let response = accept_message(&state, session_id, request).await;
    if response.status() != StatusCode::ACCEPTED {
        state
            .hub
            .metrics()
            .mcp_request(McpMethod::Unread, response.status().as_u16());
    }
    response
}

async fn accept_message(state: &McpState, session_id: String, mut request: Request) -> Response {
    match admit(state, Some(&session_id), RequestHead::of(&request)).await {
        Ok(caller) => request.extensions_mut().insert(caller),
        Err(refused) => return refused,
    };
    let stream_id = stream_param(request.uri().query()).unwrap_or_default();
    let Some(stream) = state.legacy.get(stream_id, &session_id) else {
        return Refusal::StreamNotOpen {
            stream_id: stream_id.to_owned(),
            session_id,
        }
        .into_response();
    };
    let json_body = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"));
    if !json_body {
        return Refusal::NotJsonContentType.into_response();
    }
    let Ok(permit) = stream.pending.clone().try_acquire_owned() else {
        return Refusal::StreamBusy { limit: MAX_PENDING }.into_response();
    };
    let peer = request.extensions().get::<ClientAddr>().map(|addr| addr.0);
    let (mut parts, body) = request.into_parts();
    let bytes = match read_body(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    // Nothing else can be answered here: the rest has an id to answer on
    // the stream.
    if let Err(error) = serde_json::from_slice::<&serde_json::value::RawValue>(&bytes) {
        return Refusal::NotJson(error).into_response();
    }
    // The head the streamable endpoint expects of a client; the revision
    // is the one the client names, else the one its stream negotiated.
    let headers = &mut parts.headers;
    headers.insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    if let Some((uri, subscribe)) = subscription(&bytes) {
        stream.subscribe(uri, subscribe);
    }
    let initialize = is_initialize(&bytes);
    let pending = request_id(&bytes).map(|id| stream.pending_request(id));
    if !initialize && !headers.contains_key(HEADER_MCP_PROTOCOL_VERSION) {
        let version = stream
            .protocol_version()
            .and_then(|version| HeaderValue::from_str(&version).ok())
            .unwrap_or(HeaderValue::from_static(PROTOCOL_VERSION));
        headers.insert(HEADER_MCP_PROTOCOL_VERSION, version);
    }
    tokio::spawn(relay(
        state.clone(),
        stream,
        Message {
            parts,
            bytes,
            peer,
            initialize,
            pending,
        },
        permit,
    ));
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

/// The URI of a `resources/subscribe` (`true`) or `resources/unsubscribe`
/// request; `None` for anything else.
fn subscription(body: &[u8]) -> Option<(String, bool)> {
    #[derive(serde::Deserialize)]
    struct Params {
        uri: String,
    }
    #[derive(serde::Deserialize)]
    struct Request {
        method: String,
        params: Params,
    }
    let request: Request = serde_json::from_slice(body).ok()?;
    match request.method.as_str() {
        "resources/subscribe" => Some((request.params.uri, true)),
        "resources/unsubscribe" => Some((request.params.uri, false)),
        _ => None,
    }
}

/// The JSON-RPC id of a request (`None` for a notification or an answer),
/// to answer it with an error if its stream is closed first.
fn request_id(body: &[u8]) -> Option<Box<serde_json::value::RawValue>> {
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(borrow)]
        method: Option<&'a serde_json::value::RawValue>,
        id: Option<Box<serde_json::value::RawValue>>,
    }
    let request: Request<'_> = serde_json::from_slice(body).ok()?;
    request.method?;
    request.id.filter(|id| id.get() != "null")
}

/// Whether `body` is an `initialize` request.
fn is_initialize(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Method<'_>>(body).is_ok_and(|request| request.method == "initialize")
}

/// One message posted to a stream, as [`relay`] handles it.
struct Message {
    parts: Parts,
    bytes: Bytes,
    peer: Option<std::net::SocketAddr>,
    initialize: bool,
    /// The number its request id was noted by, for a request.
    pending: Option<u64>,
}

/// Handles one message and pushes its answer onto the stream; abandoned
/// (its call cancelled) when the stream ends first.
async fn relay(
    state: McpState,
    stream: Arc<LegacyStream>,
    message: Message,
    _permit: OwnedSemaphorePermit,
) {
    let closed = stream.closed.clone();
    let work = async {
        let mut method = McpMethod::Unread;
        let response = handle_message(
            &state,
            stream.session_id.clone(),
            message.parts,
            message.bytes,
            message.peer,
            &mut method,
        )
        .await;
        state
            .hub
            .metrics()
            .mcp_request(method, response.status().as_u16());
        forward(&state, &stream, response, message.initialize).await;
        // Answered, unless the stream was closed first (the answer was not
        // queued then: the stream's last event answers it).
        if let Some(number) = message.pending
            && !stream.closed.is_cancelled()
        {
            stream.answered(number);
        }
    };
    tokio::select! {
        () = closed.cancelled() => {}
        () = work => {}
    }
}

/// Pushes every JSON-RPC message of an MCP answer onto the stream, each as
/// soon as it is there (progress before the result).
async fn forward(state: &McpState, stream: &LegacyStream, response: Response, initialize: bool) {
    let write_timeout = state.hub.config().bridge_write_timeout;
    let deliver = |message: String| async move {
        let message = if initialize {
            offer_list_changed(&message).unwrap_or(message)
        } else {
            message
        };
        stream.deliver(&state.legacy, &message, write_timeout).await;
    };
    if !sse::is_event_stream(&response) {
        match axum::body::to_bytes(response.into_body(), usize::MAX).await {
            Ok(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                if initialize {
                    remember_version(stream, &text);
                }
                deliver(text).await;
            }
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "MCP answer for a legacy stream not read"),
        }
        return;
    }
    let mut messages = std::pin::pin!(sse::data_of(response.into_body()));
    while let Some(message) = messages.next().await {
        match message {
            Ok(message) => {
                if initialize {
                    remember_version(stream, &message);
                }
                deliver(message).await;
            }
            Err(error) => {
                tracing::debug!(%error, "MCP answer for a legacy stream broke off");
                return;
            }
        }
    }
}

/// Notes the revision an `initialize` answer negotiated.
fn remember_version(stream: &LegacyStream, answer: &str) {
    let version = serde_json::from_str::<Value>(answer)
        .ok()
        .and_then(|answer| {
            answer["result"]["protocolVersion"]
                .as_str()
                .map(str::to_owned)
        });
    if let Some(version) = version {
        stream.set_protocol_version(version);
    }
}

/// The `initialize` answer with `capabilities.tools.listChanged: true`:
/// this stream sends that notification. `None` for anything else.
fn offer_list_changed(answer: &str) -> Option<String> {
    let mut answer: Value = serde_json::from_str(answer).ok()?;
    let tools = answer
        .get_mut("result")?
        .get_mut("capabilities")?
        .get_mut("tools")?
        .as_object_mut()?;
    tools.insert("listChanged".to_owned(), Value::Bool(true));
    serde_json::to_string(&answer).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_paths_under_the_public_url() {
        assert_eq!(
            endpoint(None, "abc-1", "s1"),
            "/v1/mcp/abc-1/messages?legacy=s1"
        );
        assert_eq!(
            endpoint(Some("https://proxy.example.com/base/"), "a b/é", "s1"),
            "/base/v1/mcp/a%20b%2F%C3%A9/messages?legacy=s1"
        );
        assert_eq!(
            endpoint(Some("https://proxy.example.com"), "x", "s"),
            "/v1/mcp/x/messages?legacy=s"
        );
    }

    #[test]
    fn legacy_streams_are_asked_for_without_a_revision() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        assert!(wants_legacy_stream(&headers));
        headers.insert(
            HEADER_MCP_PROTOCOL_VERSION,
            HeaderValue::from_static("2025-11-25"),
        );
        assert!(!wants_legacy_stream(&headers));
        assert!(!wants_legacy_stream(&HeaderMap::new()));
    }

    #[test]
    fn stream_ids_come_from_the_query() {
        assert_eq!(stream_param(Some("x=1&legacy=abc")), Some("abc"));
        assert_eq!(stream_param(Some("legacyx=1")), None);
        assert_eq!(stream_param(None), None);
    }
}
