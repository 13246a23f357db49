//! The WebSocket bridge: `WS /v1/chat/sessions/{session_id}/bridge`.
//!
//! This is the JSON rendering of the gRPC `BridgeService.Attach` stream, for
//! apps written against the original proxy:
//!
//! | gRPC message          | WebSocket frame                                         |
//! |-----------------------|---------------------------------------------------------|
//! | `InvokeTool`          | `{"type":"invoke_tool", mcpSessionId, request_id, requestId, tool_name, toolName, arguments, traceparent?}` |
//! | `Ping`                | `{"type":"ping","nonce":n}` plus a WebSocket ping frame |
//! | `ErrorNotice`         | `{"type":"error","message":..., "request_id":...}`      |
//! | `ToolResult`          | `{"type":"invoke_result", request_id or requestId, ok, content, error}` |
//! | `ToolProgress`        | `{"type":"progress", request_id or requestId, progress, total?, message?}` |
//! | `Pong`                | `{"type":"pong"}` (a WebSocket pong frame counts too)   |
//!
//! Both key spellings are sent and either is accepted. When `ok` is missing it
//! is taken as "no `error` given". A foreign `Origin` or `Host` gets 403 before
//! any upgrade ([`super::guard`]); the token (the session's own
//! `session_token`, or the app token unless session tokens are required) is
//! checked from the handshake's headers before the upgrade too, but, as in the
//! original, the connection is then upgraded and the refusals are close
//! codes: `4401` invalid token, `4404` unknown session (and a
//! deleted one), `4409` replaced by a newer bridge, `4408` silent for several
//! ping intervals (or not reading for `OPENCLAW_PROXY_BRIDGE_WRITE_TIMEOUT_SECONDS`), `1001` proxy shutting down. A malformed or unexpected
//! frame is answered with an error frame and the bridge stays up.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use openclaw_proxy_core::metrics::{DropReason, Metrics, Surface};
use openclaw_proxy_core::proto::{self, app_message, proxy_message};
use openclaw_proxy_core::{
    BridgeEnd, BridgeStream, ClientAddr, HubError, Inbound, Origin, Transport,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::error::ApiError;
use super::rest::{ToolBody, tool_definitions};
use super::spelling::pick;
use super::{EdgeState, SessionIdPath, check_session_token};

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

/// The close reason of a bridge that sent a message over the size limit.
const TOO_BIG_REASON: &str = "a message was larger than OPENCLAW_PROXY_MAX_BODY_BYTES";

/// Initial read buffer of a bridge socket.
const READ_BUFFER_BYTES: usize = 1024;

/// How many of the edge's own replies (error frames, pongs) may wait.
const LOCAL_CAPACITY: usize = 16;

/// `GET /v1/chat/sessions/{session_id}/bridge` with a WebSocket upgrade.
pub async fn bridge(
    State(state): State<EdgeState>,
    SessionIdPath(session_id): SessionIdPath,
    headers: HeaderMap,
    client: Option<Extension<ClientAddr>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(WebSocketUpgradeRejection::InvalidWebSocketVersionHeader(_)) => {
            return ApiError::WebSocketVersion.into_response();
        }
        Err(rejection) => return ApiError::NotWebSocket(rejection.body_text()).into_response(),
    };
    // Decided from the headers before the upgrade; refusals are still close
    // codes after it, as the original protocol has them.
    let admitted = check_session_token(&state, &session_id, Surface::Websocket, &headers).await;
    upgrade
        // One size limit for every surface (OPENCLAW_PROXY_MAX_BODY_BYTES),
        // for whole messages and for single frames alike.
        .max_message_size(state.config.max_body_bytes)
        .max_frame_size(state.config.max_body_bytes)
        // tungstenite reserves 128 KiB per socket for reading by default; with
        // thousands of mostly idle bridges that dominates memory. Frames of
        // any size still arrive: the buffer grows while one is read.
        .read_buffer_size(READ_BUFFER_BYTES)
        .write_buffer_size(0)
        .on_upgrade(move |socket| async move {
            match admitted {
                Ok(()) => {
                    let origin =
                        Origin::new(Transport::Websocket, client.map(|Extension(addr)| addr.0));
                    run_bridge(state, session_id, origin, socket).await;
                }
                Err(ApiError::Hub(error)) => close_refused(socket, error).await,
                Err(_) => close(socket, CLOSE_INVALID_TOKEN, "invalid app token").await,
            }
        })
}

/// Closes a bridge the hub refused, with the code that says why.
async fn close_refused(socket: WebSocket, error: HubError) {
    let code = match error {
        HubError::ShuttingDown | HubError::Unavailable(_) => CLOSE_GOING_AWAY,
        HubError::Unauthenticated(_) => CLOSE_INVALID_TOKEN,
        _ => CLOSE_UNKNOWN_SESSION,
    };
    close(socket, code, &error.to_string()).await;
}

async fn close(mut socket: WebSocket, code: u16, reason: &str) {
    let _ = socket
        .send(Message::Close(Some(close_frame(code, reason))))
        .await;
}

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
        code,
        reason: Utf8Bytes::from(&reason[..end]),
    }
}

async fn run_bridge(state: EdgeState, session_id: String, origin: Origin, socket: WebSocket) {
    let (mut sink, stream) = socket.split();
    // Boxed, like the core's queue: an idle channel then costs pointers.
    let (to_app, local) = mpsc::channel::<Box<Message>>(LOCAL_CAPACITY);
    let too_big = Arc::new(AtomicBool::new(false));
    let hello = proto::Hello {
        session_id: session_id.clone(),
    };
    // The core reads the socket itself (no reader task, no queue between):
    // each frame is parsed where the core consumes it.
    let inbound = app_messages(stream, to_app, state.hub.metrics().clone(), too_big.clone());
    match state.hub.attach_from(hello, inbound, origin).await {
        Ok(outbound) => {
            let write_timeout = state.config.connections.write_timeout;
            write_frames(sink, outbound, local, write_timeout, too_big).await;
        }
        Err(error) => {
            let code = match error {
                openclaw_proxy_core::HubError::ShuttingDown
                | openclaw_proxy_core::HubError::Unavailable(_) => CLOSE_GOING_AWAY,
                _ => CLOSE_UNKNOWN_SESSION,
            };
            let frame = close_frame(code, &error.to_string());
            let _ = sink.send(Message::Close(Some(frame))).await;
        }
    }
}

/// Forwards the core's messages as JSON frames, interleaved with the edge's
/// own answers (error frames, pongs); closes with the bridge's end reason.
async fn write_frames(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut outbound: BridgeStream,
    mut local: mpsc::Receiver<Box<Message>>,
    write_timeout: std::time::Duration,
    too_big: Arc<AtomicBool>,
) {
    loop {
        let frames: Vec<Message> = tokio::select! {
            item = outbound.next() => match item {
                Some(Ok(message)) => render(message),
                Some(Err(end)) => {
                    let (code, reason) = if end == BridgeEnd::Disconnected && too_big.load(Ordering::Relaxed) {
                        (CLOSE_TOO_BIG, TOO_BIG_REASON)
                    } else {
                        close_code(end)
                    };
                    // When the app closed first, tungstenite has queued the
                    // echo of its close frame and refuses a second one;
                    // closing the sink flushes that echo either way.
                    let _ = sink.send(Message::Close(Some(CloseFrame { code, reason: Utf8Bytes::from(reason) }))).await;
                    let _ = sink.close().await;
                    return;
                }
                None => return,
            },
            Some(frame) = local.recv() => vec![*frame],
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
                    return;
                }
            }
        }
    }
}

fn close_code(end: BridgeEnd) -> (u16, &'static str) {
    let code = match end {
        BridgeEnd::Replaced => CLOSE_REPLACED,
        BridgeEnd::SessionDeleted => CLOSE_UNKNOWN_SESSION,
        BridgeEnd::Unresponsive | BridgeEnd::Stalled => CLOSE_UNRESPONSIVE,
        BridgeEnd::ShuttingDown => CLOSE_GOING_AWAY,
        BridgeEnd::Disconnected => 1000,
    };
    (code, end.reason_for_app())
}

/// The JSON frames for one core message.
fn render(message: proto::ProxyMessage) -> Vec<Message> {
    let Some(kind) = message.kind else {
        return Vec::new();
    };
    let text = match kind {
        // The legacy protocol has no attach confirmation: the upgrade is it.
        proxy_message::Kind::Attached(_) => return Vec::new(),
        proxy_message::Kind::Invoke(invoke) => {
            return match invoke_frame(&invoke) {
                Ok(text) => vec![Message::Text(text.into())],
                Err(error) => {
                    tracing::error!(%error, "an invocation could not be rendered as JSON");
                    Vec::new()
                }
            };
        }
        proxy_message::Kind::ToolsUpdated(updated) => {
            json!({"type": "tools_updated", "tools": updated.tools})
        }
        proxy_message::Kind::Cancel(cancel) => json!({
            "type": "cancel_tool",
            "request_id": cancel.request_id,
            "requestId": cancel.request_id,
            "reason": cancel.reason,
        }),
        proxy_message::Kind::Ping(ping) => {
            let frame = json!({"type": "ping", "nonce": ping.nonce}).to_string();
            return vec![
                Message::Ping(axum::body::Bytes::from_static(b"openclaw-proxy")),
                Message::Text(frame.into()),
            ];
        }
        proxy_message::Kind::Error(notice) => error_frame(&notice.message, &notice.request_id),
    };
    vec![Message::Text(text.to_string().into())]
}

/// `invoke_tool`, serialized straight from the invocation (the call's hot
/// path: no intermediate JSON tree). `_meta` and `client` are left out when
/// there is nothing to say.
fn invoke_frame(invoke: &proto::InvokeTool) -> Result<String, serde_json::Error> {
    #[derive(Serialize)]
    struct Client<'a> {
        name: &'a str,
        version: &'a str,
        #[serde(rename = "protocolVersion")]
        protocol_version: &'a str,
    }
    #[derive(Serialize)]
    struct Frame<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(rename = "mcpSessionId")]
        session_id: &'a str,
        request_id: &'a str,
        #[serde(rename = "requestId")]
        request_id_camel: &'a str,
        tool_name: &'a str,
        #[serde(rename = "toolName")]
        tool_name_camel: &'a str,
        arguments: &'a RawValue,
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<&'a RawValue>,
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<Client<'a>>,
        #[serde(skip_serializing_if = "str::is_empty")]
        traceparent: &'a str,
    }
    // The core always sends a JSON object as arguments, and JSON as `_meta`.
    let arguments: &RawValue = serde_json::from_str(&invoke.arguments_json)?;
    let meta: Option<&RawValue> = if invoke.meta_json.is_empty() {
        None
    } else {
        Some(serde_json::from_str(&invoke.meta_json)?)
    };
    let client = invoke
        .client
        .as_ref()
        .filter(|client| {
            !(client.name.is_empty()
                && client.version.is_empty()
                && client.protocol_version.is_empty())
        })
        .map(|client| Client {
            name: &client.name,
            version: &client.version,
            protocol_version: &client.protocol_version,
        });
    serde_json::to_string(&Frame {
        kind: "invoke_tool",
        session_id: &invoke.session_id,
        request_id: &invoke.request_id,
        request_id_camel: &invoke.request_id,
        tool_name: &invoke.tool_name,
        tool_name_camel: &invoke.tool_name,
        arguments,
        meta,
        client,
        traceparent: &invoke.trace_parent,
    })
}

fn error_frame(message: &str, request_id: &str) -> Value {
    let mut frame = json!({"type": "error", "message": message});
    if !request_id.is_empty() {
        frame["request_id"] = json!(request_id);
        frame["requestId"] = json!(request_id);
    }
    frame
}

/// An app frame, before its type is known. Every field is kept raw and
/// typed one by one, so that a frame with one bad field still names the call
/// it answers (and that call fails at once instead of waiting for its
/// timeout). Both spellings of the request id are read.
#[derive(Deserialize)]
struct AppFrame<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_id: Option<&'a RawValue>,
    #[serde(rename = "requestId", borrow, default)]
    request_id_camel: Option<&'a RawValue>,
    #[serde(borrow, default)]
    ok: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    progress: Option<&'a RawValue>,
    #[serde(borrow, default)]
    total: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
}

/// Types one raw field; the error says what the field must be.
fn typed<'a, T: Deserialize<'a>>(
    raw: Option<&'a RawValue>,
    name: &str,
    expected: &str,
) -> Result<Option<T>, String> {
    raw.map(|raw| {
        serde_json::from_str(raw.get())
            .map_err(|_| format!("\"{name}\" must be {expected}, not {}", truncate(raw.get())))
    })
    .transpose()
}

/// A raw JSON value, cut short for an error message; the whitespace raw
/// JSON may hold between tokens (CR, LF, tab) is escaped.
fn truncate(raw: &str) -> Cow<'_, str> {
    openclaw_proxy_core::escape::truncated_to(raw, 64)
}

/// The app's frames as core messages, until it closes: results, progress
/// and pongs pass on; bad frames are answered with error frames through
/// `to_app` and skipped.
fn app_messages(
    stream: futures_util::stream::SplitStream<WebSocket>,
    to_app: mpsc::Sender<Box<Message>>,
    metrics: Arc<Metrics>,
    too_big: Arc<AtomicBool>,
) -> impl futures_util::Stream<Item = Inbound> + Send + 'static {
    // One malformed frame after another is one app's mistake, not news:
    // the app hears of each, the log of a few per minute.
    let warnings = openclaw_proxy_core::log_budget::LogBudget::default();
    stream
        .take_while(move |frame| {
            let open = match frame {
                Ok(Message::Close(_)) => false,
                Ok(_) => true,
                Err(error) => {
                    // tungstenite's capacity error: a message or a frame
                    // over OPENCLAW_PROXY_MAX_BODY_BYTES.
                    if error.to_string().contains("too long") {
                        too_big.store(true, Ordering::Relaxed);
                    }
                    tracing::debug!(%error, "bridge socket error");
                    false
                }
            };
            std::future::ready(open)
        })
        .filter_map(move |frame| {
            let message = match frame {
                Ok(Message::Text(text)) => match parse_frame(text.as_str()) {
                    Ok(Parsed::ToCore(inbound)) => Some(inbound),
                    Ok(Parsed::Ping) => {
                        reply(&to_app, json!({"type": "pong"}));
                        Some(pong())
                    }
                    Err(problem) => {
                        metrics.dropped(DropReason::Malformed);
                        // The problem may quote the frame, which may hold
                        // ids: in full only below INFO.
                        if let Some(suppressed) = warnings.allow() {
                            tracing::warn!(
                                suppressed,
                                "malformed bridge frame; the app got an error frame"
                            );
                        }
                        tracing::debug!(%problem, "malformed bridge frame");
                        reply(&to_app, error_frame(&problem, ""));
                        None
                    }
                },
                Ok(Message::Binary(_)) => {
                    metrics.dropped(DropReason::Malformed);
                    let problem =
                        "binary frames are not part of the bridge protocol: send JSON text frames";
                    reply(&to_app, error_frame(problem, ""));
                    None
                }
                // Any frame from the app is a sign of life.
                Ok(Message::Pong(_) | Message::Ping(_)) => Some(pong()),
                Ok(Message::Close(_)) | Err(_) => None,
            };
            std::future::ready(message)
        })
}

/// Queues a frame for the app; dropped if the app is not reading.
fn reply(to_app: &mpsc::Sender<Box<Message>>, frame: Value) {
    if to_app.try_send(text_frame(frame)).is_err() {
        tracing::debug!("bridge reply dropped: the app is not reading");
    }
}

fn text_frame(frame: Value) -> Box<Message> {
    Box::new(Message::Text(frame.to_string().into()))
}

fn pong() -> Inbound {
    Inbound::Message(proto::AppMessage {
        kind: Some(app_message::Kind::Pong(proto::Pong { nonce: 0 })),
    })
}

enum Parsed {
    ToCore(Inbound),
    Ping,
}

/// One text frame from an app, parsed as the bridge parses it: the core
/// message it becomes (`None` for a JSON `ping`, which the edge answers
/// itself), or the message of the error frame the app gets. For the
/// property tests and fuzz targets.
#[doc(hidden)]
pub fn parse_app_frame(text: &str) -> Result<Option<Inbound>, String> {
    match parse_frame(text)? {
        Parsed::ToCore(inbound) => Ok(Some(inbound)),
        Parsed::Ping => Ok(None),
    }
}

fn parse_frame(text: &str) -> Result<Parsed, String> {
    // serde would read a JSON array positionally into the struct's fields.
    if !text.trim_start().starts_with('{') {
        return Err(format!(
            "frame is not a JSON object of the bridge protocol: it starts with {:?}",
            truncate(text.trim_start())
        ));
    }
    let frame: AppFrame<'_> = serde_json::from_str(text)
        .map_err(|error| format!("frame is not a JSON object of the bridge protocol: {error}"))?;
    let kind: Cow<'_, str> = typed(frame.kind, "type", "a string")?.ok_or_else(|| {
        "frame has no \"type\": expected \"invoke_result\", \"progress\", \"update_tools\" or \"pong\"".to_owned()
    })?;
    let request_id = || -> Result<Option<String>, String> {
        let snake: Option<Cow<'_, str>> = typed(frame.request_id, "request_id", "a string")?;
        let camel: Option<Cow<'_, str>> = typed(frame.request_id_camel, "requestId", "a string")?;
        Ok(pick("request_id", snake, "requestId", camel)?.map(Cow::into_owned))
    };
    match kind.as_ref() {
        "invoke_result" => {
            let request_id = request_id()?.ok_or_else(|| {
                "invoke_result has no \"request_id\" (or \"requestId\")".to_owned()
            })?;
            Ok(Parsed::ToCore(
                match result_of(&frame, request_id.clone()) {
                    Ok(result) => Inbound::Message(proto::AppMessage {
                        kind: Some(app_message::Kind::Result(result)),
                    }),
                    Err(problem) => Inbound::Malformed {
                        request_id,
                        result: true,
                        problem,
                    },
                },
            ))
        }
        "progress" => {
            let request_id = request_id()?
                .ok_or_else(|| "progress has no \"request_id\" (or \"requestId\")".to_owned())?;
            Ok(Parsed::ToCore(
                match progress_of(&frame, request_id.clone()) {
                    Ok(report) => Inbound::Message(proto::AppMessage {
                        kind: Some(app_message::Kind::Progress(report)),
                    }),
                    Err(problem) => Inbound::Malformed {
                        request_id,
                        result: false,
                        problem,
                    },
                },
            ))
        }
        "update_tools" => {
            let tools = frame
                .tools
                .ok_or_else(|| "update_tools has no \"tools\" array".to_owned())?;
            let tools: Vec<ToolBody> = serde_json::from_str(tools.get()).map_err(|error| {
                // serde quotes a wrongly typed string in full.
                let error = error.to_string();
                let error = openclaw_proxy_core::escape::truncated_to(&error, 256);
                format!("update_tools \"tools\" is not a tool array: {error}")
            })?;
            let tools = tool_definitions(tools).map_err(|error| error.to_string())?;
            Ok(Parsed::ToCore(Inbound::Message(proto::AppMessage {
                kind: Some(app_message::Kind::UpdateTools(proto::UpdateTools { tools })),
            })))
        }
        "pong" => Ok(Parsed::ToCore(pong())),
        "ping" => Ok(Parsed::Ping),
        other => Err(format!(
            "unknown frame type {:?}: expected \"invoke_result\", \"progress\", \"update_tools\" or \"pong\"",
            truncate(other)
        )),
    }
}

/// The result an `invoke_result` frame carries. When `ok` is missing it is
/// taken as "no `error` given"; a non-string `error` is passed on as its JSON.
fn result_of(frame: &AppFrame<'_>, request_id: String) -> Result<proto::ToolResult, String> {
    let error = match frame.error {
        None => None,
        Some(raw) => match serde_json::from_str::<Cow<'_, str>>(raw.get()) {
            Ok(text) => Some(text.into_owned()),
            Err(_) => Some(raw.get().to_owned()),
        },
    };
    let ok = typed(frame.ok, "ok", "a boolean")?.unwrap_or(error.is_none());
    Ok(proto::ToolResult {
        request_id,
        ok,
        content_json: frame
            .content
            .map(|raw| raw.get().to_owned())
            .unwrap_or_default(),
        error: error.unwrap_or_default(),
    })
}

/// The report a `progress` frame carries.
fn progress_of(frame: &AppFrame<'_>, request_id: String) -> Result<proto::ToolProgress, String> {
    let progress = typed(frame.progress, "progress", "a number")?
        .ok_or_else(|| "progress has no numeric \"progress\"".to_owned())?;
    let message: Option<Cow<'_, str>> = typed(frame.message, "message", "a string")?;
    Ok(proto::ToolProgress {
        request_id,
        progress,
        total: typed(frame.total, "total", "a number")?,
        message: message.map(Cow::into_owned).unwrap_or_default(),
    })
}
