//! The WebSocket bridge: `WS /v1/chat/sessions/{session_id}/bridge`.
//!
//! This is the JSON rendering of the gRPC `BridgeService.Attach` stream, for
//! apps written against the original proxy:
//!
//! | gRPC message          | WebSocket frame                                         |
//! |-----------------------|---------------------------------------------------------|
//! | `InvokeTool`          | `{"type":"invoke_tool", mcpSessionId, request_id, requestId, tool_name, toolName, arguments, traceparent?, task_id?}` |
//! | `Ping`                | `{"type":"ping","nonce":n}` plus a WebSocket ping frame |
//! | `ErrorNotice`         | `{"type":"error","message":..., "request_id":...}`      |
//! | `ToolResult`          | `{"type":"invoke_result", request_id or requestId, ok, content, error}` |
//! | `ToolProgress`        | `{"type":"progress", request_id or requestId, progress, total?, message?}` |
//! | `Pong`                | `{"type":"pong"}` (a WebSocket pong frame counts too)   |
//!
//! Both key spellings are sent and either is accepted. When `ok` is missing it
//! is taken as "no `error` given". A foreign `Origin` or `Host` gets 403 before
//! any upgrade ([`crate::http::guard`]); the token (the session's own
//! `session_token`, or the app token unless session tokens are required) is
//! checked from the handshake's headers before the upgrade too, but, as in the
//! original, the connection is then upgraded and the refusals are close
//! codes: `4401` invalid token, `4404` unknown session (and a
//! deleted one), `4409` replaced by a newer bridge, `4408` silent for several
//! ping intervals (or not reading for `OPENCLAW_PROXY_BRIDGE_WRITE_TIMEOUT_SECONDS`), `1001` proxy shutting down. A malformed or unexpected
//! frame is answered with an error frame and the bridge stays up.
//!
//! The handshake is checked by axum's `WebSocketUpgrade` (its refusals), but
//! the socket is tokio-tungstenite's over the upgraded connection read
//! through [`fragments::Fragments`], so that a fragmented message the app
//! leaves unfinished is seen (axum's socket has no place for the reader).

use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Extension, FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use openclaw_proxy_core::metrics::Surface;
use openclaw_proxy_core::proto;
use openclaw_proxy_core::{BridgeEnd, BridgeStream, ClientAddr, ErrorKind, Origin, Transport};
use tokio_tungstenite::WebSocketStream;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tungstenite::{Message, Utf8Bytes};

use crate::http::error::ApiError;
use crate::http::request::{SessionIdPath, check_session_token};
use crate::http::state::EdgeState;
use frame::render;

mod app_side;
pub mod fragments;
pub mod frame;
mod salvage;

use app_side::{AppFrames, Shared};

#[doc(hidden)]
pub use frame::parse_app_frame;

/// Close code: the app token is invalid.
pub const CLOSE_INVALID_TOKEN: u16 = 4401;
/// Close code: the session does not exist (or was deleted).
pub const CLOSE_UNKNOWN_SESSION: u16 = 4404;
/// Close code: the app stopped answering pings, or stopped reading.
pub const CLOSE_UNRESPONSIVE: u16 = 4408;
/// Close code: a newer bridge replaced this one.
pub const CLOSE_REPLACED: u16 = 4409;
/// Close code: the proxy is going away.
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// Close code: a message was over the size limit (RFC 6455 "message too big").
pub const CLOSE_TOO_BIG: u16 = 1009;

/// Close code: the app broke the WebSocket protocol (an unmasked frame,
/// reserved bits or opcodes, bad fragmentation).
pub const CLOSE_PROTOCOL_ERROR: u16 = 1002;
/// Close code: a text frame was not UTF-8.
pub const CLOSE_INVALID_DATA: u16 = 1007;

/// The close reason of a bridge that sent a message over the size limit.
const TOO_BIG_REASON: &str = "a message was larger than OPENCLAW_PROXY_MAX_BODY_BYTES";

/// The close code and reason of a socket error of the app's, or `None` for
/// a connection that merely broke (no close frame can reach it anyway).
/// Told by tungstenite's error variant.
fn violation_of(error: &tungstenite::Error) -> Option<(u16, String)> {
    use tungstenite::error::{Error, ProtocolError};
    match error {
        Error::Capacity(_) => Some((CLOSE_TOO_BIG, TOO_BIG_REASON.to_owned())),
        Error::Utf8(_) => Some((
            CLOSE_INVALID_DATA,
            "a text frame was not valid UTF-8".to_owned(),
        )),
        // The app went away without a close frame: nothing to tell it.
        Error::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
        Error::Protocol(violation) => {
            Some((CLOSE_PROTOCOL_ERROR, format!("protocol error: {violation}")))
        }
        _ => None,
    }
}

/// Initial read buffer of a bridge socket.
const READ_BUFFER_BYTES: usize = 1024;

/// The app's socket: tokio-tungstenite over the upgraded connection, its
/// bytes read through [`fragments::Fragments`].
type Socket = WebSocketStream<fragments::Fragments<TokioIo<hyper::upgrade::Upgraded>, Shared>>;

/// `GET /v1/chat/sessions/{session_id}/bridge` with a WebSocket upgrade.
pub async fn bridge(
    State(state): State<EdgeState>,
    SessionIdPath(session_id): SessionIdPath,
    client: Option<Extension<ClientAddr>>,
    request: Request,
) -> Response {
    let (mut parts, _body) = request.into_parts();
    // The upgrade is taken here; axum's extractor, given a copy of it,
    // checks the handshake and answers its refusals.
    let on_upgrade = parts.extensions.get::<hyper::upgrade::OnUpgrade>().cloned();
    let checked = WebSocketUpgrade::from_request_parts(&mut parts, &()).await;
    let (key, on_upgrade) = match (checked, on_upgrade) {
        (Ok(_), Some(on_upgrade)) => match parts.headers.get(header::SEC_WEBSOCKET_KEY) {
            Some(key) => (key.clone(), on_upgrade),
            None => {
                return ApiError::NotWebSocket("`Sec-WebSocket-Key` header missing".into())
                    .into_response();
            }
        },
        (Err(WebSocketUpgradeRejection::InvalidWebSocketVersionHeader(_)), _) => {
            return ApiError::WebSocketVersion.into_response();
        }
        (Err(rejection), _) => {
            return ApiError::NotWebSocket(rejection.body_text()).into_response();
        }
        (Ok(_), None) => {
            return ApiError::NotWebSocket(
                "WebSocket request couldn't be upgraded since no upgrade state was present".into(),
            )
            .into_response();
        }
    };
    let headers: &HeaderMap = &parts.headers;
    // Decided from the headers before the upgrade; refusals are still close
    // codes after it, as the original protocol has them.
    let admitted = check_session_token(&state, &session_id, Surface::Websocket, headers).await;
    let mut config = WebSocketConfig::default();
    // One size limit for every surface (OPENCLAW_PROXY_MAX_BODY_BYTES),
    // for whole messages and for single frames alike.
    config.max_message_size = Some(state.config.max_body_bytes);
    config.max_frame_size = Some(state.config.max_body_bytes);
    // tungstenite reserves 128 KiB per socket for reading by default; with
    // thousands of mostly idle bridges that dominates memory. Frames of
    // any size still arrive: the buffer grows while one is read.
    config.read_buffer_size = READ_BUFFER_BYTES;
    config.write_buffer_size = 0;
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(error) => {
                tracing::debug!(%error, "WebSocket upgrade failed");
                return;
            }
        };
        let shared = Arc::new(Shared::default());
        let io = fragments::Fragments::new(TokioIo::new(upgraded), shared.clone());
        let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        let refusal = match admitted {
            Ok(_) => None,
            Err(ApiError::Hub(error)) => Some((close_code(error.kind()), error.to_string())),
            Err(_) => Some((CLOSE_INVALID_TOKEN, "invalid app token".to_owned())),
        };
        // Split before the bridge's future is made: it then holds the
        // halves, not the socket beside them.
        let (sink, stream) = socket.split();
        match refusal {
            None => {
                let origin =
                    Origin::new(Transport::Websocket, client.map(|Extension(addr)| addr.0));
                // A task of its own, as small as it can be, for as long as
                // the bridge lives; the upgrade's task (which keeps room for
                // the handshake) ends now.
                tokio::spawn(run_bridge(
                    state,
                    session_id,
                    origin,
                    (sink, stream),
                    shared,
                ));
            }
            Some((code, reason)) => close(sink, code, reason).await,
        }
    });
    switching_protocols(key.as_bytes())
}

/// The `101` that accepts a WebSocket handshake with this key.
fn switching_protocols(key: &[u8]) -> Response {
    let accept = tungstenite::handshake::derive_accept_key(key);
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// The close code of each kind of refusal, on the upgrade and at attach:
/// the one table. A request the original protocol has no code for (invalid,
/// over a limit) closes as an unknown session, as it always has.
fn close_code(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::NotFound | ErrorKind::Invalid | ErrorKind::Exhausted { .. } => {
            CLOSE_UNKNOWN_SESSION
        }
        ErrorKind::Unauthenticated => CLOSE_INVALID_TOKEN,
        ErrorKind::Unavailable => CLOSE_GOING_AWAY,
    }
}

async fn close(mut sink: Sink, code: u16, reason: String) {
    let _ = sink
        .send(Message::Close(Some(close_frame(code, &reason))))
        .await;
}

/// The writing half of a bridge's socket.
type Sink = futures_util::stream::SplitSink<Socket, Message>;

/// Longest close reason a close frame carries (RFC 6455: 125 bytes of
/// payload, two of them the code).
const MAX_CLOSE_REASON_BYTES: usize = 123;

/// A close frame, its reason cut at a character boundary to what a close
/// frame may carry (a longer one is a protocol error the app would see
/// instead of the code).
fn close_frame(code: u16, reason: &str) -> CloseFrame {
    let mut end = reason.len().min(MAX_CLOSE_REASON_BYTES);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    CloseFrame {
        code: CloseCode::from(code),
        reason: Utf8Bytes::from(&reason[..end]),
    }
}

async fn run_bridge(
    state: EdgeState,
    session_id: String,
    origin: Origin,
    (mut sink, stream): (Sink, futures_util::stream::SplitStream<Socket>),
    shared: Arc<Shared>,
) {
    let hello = proto::Hello { session_id };
    // The core reads the socket itself (no reader task, no queue between):
    // each frame is parsed where the core consumes it.
    let inbound = AppFrames::new(
        stream,
        shared.clone(),
        state.hub.metrics().clone(),
        state.config.max_body_bytes,
    );
    // Boxed: attaching is brief, the task that awaits it lives as long as
    // the bridge and would otherwise keep room for it.
    // The core's driver (reading the socket) runs in a task of its own,
    // this one writes. Both in one task (joined) saved about 60 bytes per
    // bridge and cost a lone call some 35 µs of p50 and 30 µs of server
    // CPU, every round (docs/performance.md, "A lone call").
    let attached = Box::pin(state.hub.attach(hello, inbound, origin)).await;
    match attached {
        Ok(outbound) => {
            let write_timeout = state.config.connections.write_timeout;
            // The writer owns the stream: when it stops, the bridge ends
            // at once, as it would for a dropped transport. The driver
            // runs to its end (it gives the app a moment to close).
            write_frames(&mut sink, outbound, &shared, write_timeout).await;
        }
        Err(error) => {
            let frame = close_frame(close_code(error.kind()), &error.to_string());
            let _ = sink.send(Message::Close(Some(frame))).await;
        }
    }
}

/// Forwards the core's messages as JSON frames, interleaved with the edge's
/// own answers (error frames, pongs); closes with the bridge's end reason.
async fn write_frames(
    sink: &mut Sink,
    mut outbound: BridgeStream,
    shared: &Shared,
    write_timeout: std::time::Duration,
) {
    loop {
        let frames: Vec<Message> = tokio::select! {
            item = outbound.next() => match item {
                Some(Ok(message)) => render(*message),
                Some(Err(end)) => {
                    let frame = match shared.violation() {
                        Some((code, reason)) if end == BridgeEnd::Disconnected => close_frame(*code, reason),
                        _ => {
                            let (code, reason) = end_close(end);
                            close_frame(code, &reason)
                        }
                    };
                    // When the app closed first, tungstenite has queued the
                    // echo of its close frame and refuses a second one;
                    // closing the sink flushes that echo either way.
                    let _ = sink.send(Message::Close(Some(frame))).await;
                    let _ = sink.close().await;
                    return;
                }
                None => return,
            },
            () = shared.replies_queued() => shared.take_replies(),
        };
        for frame in frames {
            // An app that stops reading fills its TCP window and the write
            // never finishes: drop the socket (the bridge then ends, its
            // calls fail at once) rather than hold it and its queue.
            match tokio::time::timeout(write_timeout, sink.send(frame)).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    tracing::warn!("a WebSocket bridge stopped reading; dropping it");
                    // Its callers learn that the app stopped reading, not
                    // that it disconnected.
                    outbound.end(BridgeEnd::Stalled);
                    return;
                }
            }
        }
    }
}

/// The close code and reason of a bridge that ended.
fn end_close(end: BridgeEnd) -> (u16, std::borrow::Cow<'static, str>) {
    let code = match end {
        BridgeEnd::Replaced => CLOSE_REPLACED,
        BridgeEnd::SessionDeleted => CLOSE_UNKNOWN_SESSION,
        BridgeEnd::Unresponsive | BridgeEnd::Stalled => CLOSE_UNRESPONSIVE,
        BridgeEnd::ShuttingDown => CLOSE_GOING_AWAY,
        BridgeEnd::Disconnected => 1000,
        BridgeEnd::TooLarge { .. } => CLOSE_TOO_BIG,
    };
    (code, end.reason_for_app())
}
