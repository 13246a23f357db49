//! More exhaustion runs of `loadgen abuse`, one per bound of what a client
//! holds without using it (docs/security.md, "Exhaustion measured"). Like
//! [`crate::exhaustion`], each reports numbers, never a pass or a fail:
//!
//! - `idle-h2`: HTTP/2 connections that answer pings and open no stream,
//!   and one with a reflection stream that sends nothing, taking every
//!   connection slot; whether the server gives the slots back;
//! - `listen`: `subscriptions/listen` streams naming megabytes of URIs;
//! - `parked`: 2026-07-28 calls whose app asks four large questions, never
//!   answered, then the apps go away;
//! - `ws-fragment`: WebSocket bridges that send all of a large message but
//!   its last fragment and answer pings.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::bench::{Target, peak_kib, resident_kib};

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// A session declaring a resource template (`notes:///{id}`) and the
/// `echo_text` tool, over REST; its id, MCP URL and bridge URL.
async fn session(http: &reqwest::Client, target: &Target) -> anyhow::Result<crate::TestSession> {
    let mut body = crate::legacy_session_body();
    body["resourceTemplates"] = json!([{"uriTemplate": "notes:///{id}", "name": "note"}]);
    let reply = http
        .post(format!("{}/v1/chat/sessions", target.base_url))
        .bearer_auth(&target.app_token)
        .json(&body)
        .send()
        .await?;
    let status = reply.status();
    let reply: Value = reply.json().await?;
    anyhow::ensure!(status.is_success(), "session creation: {status} {reply}");
    crate::TestSession::from_rest_reply(&reply)
}

async fn ready_status(target: &Target) -> u16 {
    crate::http_client()
        .get(format!("{}/ready", target.base_url))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .map_or(0, |reply| reply.status().as_u16())
}

/// `connections` HTTP/2 connections that open no stream (one of them a
/// reflection stream without a message) against a server whose every
/// connection slot they take; how many the server closed within `wait`, and
/// whether `/ready` answers after.
pub async fn idle_h2(
    target: &Target,
    pid: u32,
    connections: usize,
    wait: Duration,
) -> anyhow::Result<Value> {
    let before = resident_kib(pid)?;
    let mut drivers = Vec::new();
    // Kept: a client whose handles are all gone closes its connection.
    let mut senders = Vec::new();
    let mut reflection = None;
    for n in 0..connections {
        let tcp = tokio::net::TcpStream::connect(target.authority()).await?;
        let (sender, connection) = h2::client::handshake(tcp).await?;
        drivers.push(tokio::spawn(connection));
        if n == 0 {
            let mut sender = sender.ready().await?;
            let request = axum::http::Request::post(format!(
                "http://{}/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                target.authority()
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())?;
            reflection = Some(sender.send_request(request, false)?);
            senders.push(sender);
        } else {
            senders.push(sender);
        }
    }
    let ready_while_held = ready_status(target).await;
    let opened = Instant::now();
    let all = futures_util::future::join_all(
        drivers
            .iter_mut()
            .map(|driver| async { tokio::time::timeout(wait, driver).await.is_ok() }),
    )
    .await;
    let closed = all.iter().filter(|closed| **closed).count();
    let closed_within = opened.elapsed().as_secs();
    let ready_after = ready_status(target).await;
    let after = resident_kib(pid)?;
    drop((senders, reflection));
    Ok(json!({
        "bench": "exhaustion_idle_h2", "connections": connections,
        "ready_while_held": ready_while_held,
        "closed_by_server": closed, "closed_within_s": closed_within,
        "ready_after": ready_after,
        "rss_before_mib": mib(before), "rss_after_mib": mib(after),
    }))
}

/// `sessions` sessions, each with `streams` `subscriptions/listen` streams
/// naming `uris` URIs of about 34 bytes each (half of them served by the
/// session's template, half of no declaration), held open and unread.
pub async fn listen_flood(
    target: &Target,
    pid: u32,
    (sessions, streams, uris): (usize, usize, usize),
    wait: Duration,
) -> anyhow::Result<Value> {
    let http = crate::http_client();
    let mut ids = Vec::new();
    for _ in 0..sessions {
        ids.push(session(&http, target).await?);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = resident_kib(pid)?;
    let named: Vec<String> = (0..uris)
        .map(|n| {
            if n % 2 == 0 {
                format!("notes:///{n:024}")
            } else {
                format!("other:///{n:024}")
            }
        })
        .collect();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "abuse", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                      "params": {"_meta": meta, "notifications": {"resourceSubscriptions": named}}})
    .to_string();
    let request_bytes = body.len();
    let (mut open, mut refused) = (Vec::new(), 0);
    for session in &ids {
        for _ in 0..streams {
            let mut reply = http
                .post(&session.mcp_url)
                .bearer_auth(&target.openclaw_token)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "subscriptions/listen")
                .body(body.clone())
                .send()
                .await?;
            let streamed = reply
                .headers()
                .get("content-type")
                .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
            if streamed {
                // The acknowledgement, then nothing more is read.
                let _ = reply.chunk().await;
                open.push(reply);
            } else {
                refused += 1;
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = resident_kib(pid)?;
    let peak = peak_kib(pid)?;
    let opened = open.len();
    drop(open);
    tokio::time::sleep(wait).await;
    let after = resident_kib(pid)?;
    Ok(json!({
        "bench": "exhaustion_listen", "sessions": sessions, "streams_per_session": streams,
        "uris_per_stream": uris, "request_bytes": request_bytes,
        "streams_opened": opened, "streams_refused": refused,
        "rss_before_mib": mib(before), "rss_held_mib": mib(held), "rss_peak_mib": mib(peak),
        "after_s": wait.as_secs(), "rss_after_mib": mib(after),
    }))
}

/// `sessions` sessions whose WebSocket app asks four `elicitation/create`
/// of `ask_bytes` each in every call; `calls` 2026-07-28 calls per session
/// that get their `input_required` and are never retried. Then the apps go
/// away; memory `wait` later.
pub async fn parked_asks(
    target: &Target,
    pid: u32,
    (sessions, calls, ask_bytes): (usize, usize, usize),
    wait: Duration,
) -> anyhow::Result<Value> {
    let http = crate::http_client();
    let before = resident_kib(pid)?;
    let message = "x".repeat(ask_bytes);
    let mut apps = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..sessions {
        let session = session(&http, target).await?;
        let mut app = crate::WsApp::connect(&session.bridge_url, Some(&target.app_token))
            .await
            .context("the app's bridge")?;
        let message = message.clone();
        apps.push(tokio::spawn(async move {
            while let Ok(frame) = app.next_json().await {
                if frame["type"] != "invoke_tool" {
                    continue;
                }
                for n in 0..4 {
                    app.send_json(json!({"type": "client_request",
                        "request_id": frame["request_id"], "id": format!("ask{n}"),
                        "method": "elicitation/create",
                        "params": {"message": message,
                                   "requestedSchema": {"type": "object", "properties": {}}}}))
                        .await;
                }
            }
        }));
        ids.push(session);
    }
    let call = crate::ToolsCall2026 {
        tool: "echo_text",
        arguments: json!({"text": "ask"}),
        client_info: None,
    };
    let body = call
        .body(&json!({"elicitation": {}}), &json!({}))
        .to_string();
    let started = Instant::now();
    let outcomes: Vec<&'static str> = futures_util::stream::iter(
        ids.iter()
            .flat_map(|session| std::iter::repeat_n(session.mcp_url.clone(), calls)),
    )
    .map(|url| {
        let (http, token, body) = (http.clone(), target.openclaw_token.clone(), body.clone());
        async move {
            let Ok(reply) = http
                .post(url)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "echo_text")
                .body(body)
                .send()
                .await
            else {
                return "failed";
            };
            match reply.text().await {
                Ok(text) if text.contains("input_required") => "parked",
                Ok(_) => "refused",
                Err(_) => "failed",
            }
        }
    })
    .buffer_unordered(32)
    .collect()
    .await;
    let took = started.elapsed().as_secs();
    let count = |outcome: &str| outcomes.iter().filter(|o| **o == outcome).count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = resident_kib(pid)?;
    let peak = peak_kib(pid)?;
    for app in apps {
        app.abort();
    }
    tokio::time::sleep(wait).await;
    let after = resident_kib(pid)?;
    Ok(json!({
        "bench": "exhaustion_parked", "sessions": sessions, "calls_per_session": calls,
        "ask_bytes": ask_bytes, "asks_per_call": 4, "took_s": took,
        "parked": count("parked"), "refused": count("refused"), "failed": count("failed"),
        "rss_before_mib": mib(before), "rss_held_mib": mib(held), "rss_peak_mib": mib(peak),
        "after_apps_gone_s": wait.as_secs(), "rss_after_mib": mib(after),
    }))
}

/// `bridges` WebSocket bridges that each send all of a `message_bytes`
/// text message but its last fragment, then answer pings; how many the
/// server closed within `wait`, with which codes, and its memory.
pub async fn ws_fragment(
    target: &Target,
    pid: u32,
    bridges: usize,
    message_bytes: usize,
    wait: Duration,
) -> anyhow::Result<Value> {
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    let http = crate::http_client();
    let before = resident_kib(pid)?;
    let mut apps = Vec::new();
    for _ in 0..bridges {
        let session = session(&http, target).await?;
        let mut app = crate::WsApp::connect(&session.bridge_url, Some(&target.app_token))
            .await
            .context("the app's bridge")?;
        let mut payload = b"{\"type\":\"pong\",\"padding\":\"".to_vec();
        payload.resize(message_bytes, b'x');
        app.send(Message::Frame(Frame::message(
            payload,
            OpCode::Data(Data::Text),
            false,
        )))
        .await;
        apps.push(tokio::spawn(async move {
            loop {
                match app.next_event().await {
                    crate::WsEvent::Closed(code, _) => return Some(code),
                    crate::WsEvent::Ended => return None,
                    _ => {}
                }
            }
        }));
    }
    let opened = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = resident_kib(pid)?;
    let peak = peak_kib(pid)?;
    let ends = futures_util::future::join_all(apps.into_iter().map(|app| async move {
        tokio::time::timeout(wait, app)
            .await
            .ok()
            .and_then(Result::ok)
    }))
    .await;
    let closed_within = opened.elapsed().as_secs();
    let closed_4408 = ends.iter().filter(|end| **end == Some(Some(4408))).count();
    let ended = ends.iter().filter(|end| end.is_some()).count();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = resident_kib(pid)?;
    Ok(json!({
        "bench": "exhaustion_ws_fragment", "bridges": bridges, "message_bytes": message_bytes,
        "ended_by_server": ended, "closed_4408": closed_4408, "closed_within_s": closed_within,
        "rss_before_mib": mib(before), "rss_held_mib": mib(held), "rss_peak_mib": mib(peak),
        "rss_after_mib": mib(after),
    }))
}
