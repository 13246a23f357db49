//! The exhaustion runs of `loadgen abuse`: what one client can make the
//! server hold, and whether it is given back. Each run reports the server's
//! resident memory before, at its peak and after, as numbers (never a
//! pass/fail): the tables in `docs/security.md` come from here.
//!
//! - `schema`: sessions whose tool schemas are as large as a session may
//!   hold, each unique (no sharing between sessions), created and deleted;
//! - `h2-window`: one HTTP/2 connection that opens every stream it may with
//!   a receive window of 0, each asking for a large `tools/list`, and
//!   answers pings but never reads;
//! - `legacy-sse`: legacy SSE streams whose clients read the `endpoint`
//!   event and then nothing, sent large `tools/list` answers.

use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::bench::{Target, peak_kib, resident_kib};

/// A schema of `properties` string properties, about 28 bytes each, made
/// unique by `salt`.
pub fn wide_schema(properties: usize, salt: usize) -> String {
    let mut schema = String::with_capacity(properties * 28 + 64);
    schema.push_str(r#"{"type":"object","properties":{"#);
    for n in 0..properties {
        if n > 0 {
            schema.push(',');
        }
        schema.push_str(&format!(r#""p{n}":{{"type":"string"}}"#));
    }
    schema.push_str(&format!(r#"}},"$comment":"{salt}"}}"#));
    schema
}

/// Creates one session over REST whose one tool has `schema`; its id.
async fn create_session(
    http: &reqwest::Client,
    target: &Target,
    schema: &str,
) -> anyhow::Result<String> {
    let body = format!(
        r#"{{"device_id":"abuse","app_version":"1","tools":[{{"name":"wide","input_schema":{schema}}}]}}"#
    );
    let reply = http
        .post(format!("{}/v1/chat/sessions", target.base_url))
        .bearer_auth(&target.app_token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    let status = reply.status();
    let text = reply.text().await?;
    anyhow::ensure!(status.is_success(), "session creation: {status} {text}");
    let reply: Value = serde_json::from_str(&text)?;
    Ok(crate::TestSession::from_rest_reply(&reply)?.id)
}

async fn delete_session(http: &reqwest::Client, target: &Target, id: &str) -> anyhow::Result<()> {
    http.delete(format!("{}/v1/chat/sessions/{id}", target.base_url))
        .bearer_auth(&target.app_token)
        .send()
        .await?
        .error_for_status()?;
    Ok(())
}

/// A little ordinary traffic: the allocator gives freed memory back as its
/// threads run.
async fn ordinary_traffic(target: &Target) {
    let probe = crate::http_client();
    for _ in 0..2000 {
        let _ = probe
            .get(format!("{}/health", target.base_url))
            .send()
            .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}

fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// `sessions` sessions, each with one tool whose schema has `properties`
/// properties (unique per session), created 8 at a time and then deleted.
/// Reports the resident memory per byte of schema while they live, and
/// what is left after they are deleted.
pub async fn schema_amplification(
    target: &Target,
    pid: u32,
    sessions: usize,
    properties: usize,
) -> anyhow::Result<Value> {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = resident_kib(pid)?;
    let http = crate::http_client();
    let started = Instant::now();
    let created: Vec<anyhow::Result<(String, usize)>> = futures_util::stream::iter(0..sessions)
        .map(|n| {
            let (http, target) = (http.clone(), target.clone());
            async move {
                let schema = wide_schema(properties, n);
                let id = create_session(&http, &target, &schema).await?;
                Ok((id, schema.len()))
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let mut ids = Vec::new();
    let mut refused = Vec::new();
    let mut schema_bytes = 0_usize;
    for outcome in created {
        match outcome {
            Ok((id, bytes)) => {
                ids.push(id);
                schema_bytes += bytes;
            }
            Err(error) => refused.push(error.to_string()),
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let live = resident_kib(pid)?;
    let peak = peak_kib(pid)?;
    for id in &ids {
        delete_session(&http, target, id).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = resident_kib(pid)?;
    ordinary_traffic(target).await;
    let after_traffic = resident_kib(pid)?;
    let per_byte = (live.saturating_sub(before) * 1024) as f64 / schema_bytes.max(1) as f64;
    refused.truncate(1);
    Ok(json!({
        "bench": "exhaustion_schema", "sessions": ids.len(), "properties": properties,
        "schema_bytes": schema_bytes, "seconds": (seconds * 10.0).round() / 10.0,
        "refused_first": refused.first(),
        "rss_before_mib": mib(before), "rss_live_mib": mib(live), "rss_peak_mib": mib(peak),
        "rss_after_delete_mib": mib(after), "rss_after_traffic_mib": mib(after_traffic),
        "resident_bytes_per_schema_byte": (per_byte * 100.0).round() / 100.0,
    }))
}

/// The JSON-RPC `tools/list` body.
const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

/// One HTTP/2 connection with a receive window of 0 that asks `requests`
/// times for the `tools/list` of a session holding a schema of
/// `properties` properties, then reads nothing but keeps answering pings.
/// Reports how many streams the server took at once, its memory, and
/// whether (and when) it closed the connection.
pub async fn h2_window_flood(
    target: &Target,
    pid: u32,
    requests: usize,
    properties: usize,
    wait: Duration,
) -> anyhow::Result<Value> {
    let http = crate::http_client();
    let session = create_session(&http, target, &wide_schema(properties, 0)).await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = resident_kib(pid)?;
    let tcp = tokio::net::TcpStream::connect(mcp_authority(target)).await?;
    let (sender, connection) = h2::client::Builder::new()
        .initial_window_size(0)
        .max_concurrent_reset_streams(requests)
        .handshake::<_, bytes::Bytes>(tcp)
        .await?;
    let opened = Instant::now();
    let driver = tokio::spawn(connection);
    let uri = format!("http://{}/v1/mcp/{session}", mcp_authority(target));
    let mut responses = Vec::new();
    let mut sender = sender;
    for _ in 0..requests {
        // The server's stream limit: a stream that does not open within a
        // second is one past it.
        let Ok(Ok(ready)) = tokio::time::timeout(Duration::from_secs(1), sender.ready()).await
        else {
            break;
        };
        sender = ready;
        let request = h2_request(&uri, &target.openclaw_token)?;
        let (response, mut body) = sender.send_request(request, false)?;
        body.send_data(bytes::Bytes::from_static(TOOLS_LIST.as_bytes()), true)?;
        responses.push(response);
    }
    let streams = responses.len();
    let answered = futures_util::future::join_all(
        responses
            .into_iter()
            .map(|response| tokio::time::timeout(Duration::from_secs(5), response)),
    )
    .await;
    let headers = answered.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    let refused = answered
        .iter()
        .filter(|r| matches!(r, Ok(Err(e)) if e.reason() == Some(h2::Reason::REFUSED_STREAM)))
        .count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let held = resident_kib(pid)?;
    let peak = peak_kib(pid)?;
    let closed = tokio::time::timeout(wait, driver).await.is_ok();
    let closed_after = opened.elapsed().as_secs();
    drop(answered);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = resident_kib(pid)?;
    ordinary_traffic(target).await;
    let after_traffic = resident_kib(pid)?;
    delete_session(&http, target, &session).await?;
    Ok(json!({
        "bench": "exhaustion_h2_window", "requests": requests, "properties": properties,
        "streams_opened": streams, "answer_heads": headers, "refused_streams": refused,
        "connection_closed_by_server": closed,
        "closed_within_s": closed.then_some(closed_after),
        "rss_before_mib": mib(before), "rss_held_mib": mib(held), "rss_peak_mib": mib(peak),
        "rss_after_mib": mib(after), "rss_after_traffic_mib": mib(after_traffic),
    }))
}

fn mcp_authority(target: &Target) -> String {
    let url = target.mcp_base_url.as_deref().unwrap_or(&target.base_url);
    url.split_once("://")
        .map_or(url, |(_, rest)| rest)
        .trim_end_matches('/')
        .to_owned()
}

fn h2_request(uri: &str, token: &str) -> anyhow::Result<axum::http::Request<()>> {
    Ok(axum::http::Request::post(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(())?)
}

/// `sessions` sessions with a schema of `properties` properties, `streams`
/// legacy SSE streams on each that read their `endpoint` event and then
/// nothing, and `posts` `tools/list` messages posted to every stream.
/// Reports how many streams and posts the server took, its memory while
/// they are unread, and `wait` after the client let go of them (a server
/// writing to a full socket sees the client go only when its write
/// timeout closes the connection).
pub async fn legacy_sse_unread(
    target: &Target,
    pid: u32,
    shape: (usize, usize, usize),
    properties: usize,
    wait: Duration,
) -> anyhow::Result<Value> {
    let (sessions, streams, posts) = shape;
    let http = crate::http_client();
    let mut ids = Vec::new();
    for n in 0..sessions {
        ids.push(create_session(&http, target, &wide_schema(properties, n)).await?);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = resident_kib(pid)?;
    let mut open = Vec::new();
    let mut refused_streams = 0;
    for id in &ids {
        for _ in 0..streams {
            match open_legacy(&http, target, id).await {
                Ok(stream) => open.push(stream),
                Err(_) => refused_streams += 1,
            }
        }
    }
    let endpoints: Vec<String> = open.iter().map(|(endpoint, _)| endpoint.clone()).collect();
    let statuses: Vec<u16> = futures_util::stream::iter(
        endpoints
            .iter()
            .flat_map(|endpoint| std::iter::repeat_n(endpoint.clone(), posts)),
    )
    .map(|endpoint| {
        let (http, token) = (http.clone(), target.openclaw_token.clone());
        async move {
            http.post(endpoint)
                .bearer_auth(token)
                .header("content-type", "application/json")
                .body(TOOLS_LIST)
                .send()
                .await
                .map_or(0, |reply| reply.status().as_u16())
        }
    })
    .buffer_unordered(32)
    .collect()
    .await;
    let accepted = statuses.iter().filter(|s| **s == 202).count();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held = resident_kib(pid)?;
    let peak = peak_kib(pid)?;
    drop(open);
    for id in &ids {
        delete_session(&http, target, id).await?;
    }
    tokio::time::sleep(wait).await;
    let after = resident_kib(pid)?;
    ordinary_traffic(target).await;
    let after_traffic = resident_kib(pid)?;
    Ok(json!({
        "bench": "exhaustion_legacy_sse", "sessions": sessions, "streams_per_session": streams,
        "posts_per_stream": posts, "properties": properties,
        "streams_opened": endpoints.len(), "streams_refused": refused_streams,
        "posts_accepted": accepted, "posts_refused": statuses.len() - accepted,
        "rss_before_mib": mib(before), "rss_held_mib": mib(held), "rss_peak_mib": mib(peak),
        "after_s": wait.as_secs(),
        "rss_after_mib": mib(after), "rss_after_traffic_mib": mib(after_traffic),
    }))
}

/// Opens a legacy stream and reads up to its `endpoint` event: the
/// endpoint's URL and the open response, never read again.
async fn open_legacy(
    http: &reqwest::Client,
    target: &Target,
    session: &str,
) -> anyhow::Result<(String, reqwest::Response)> {
    let mut response = http
        .get(format!("{}/v1/mcp/{session}", target.base_url))
        .bearer_auth(&target.openclaw_token)
        .header("accept", "text/event-stream")
        .send()
        .await?
        .error_for_status()?;
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await??
            .context("the stream ended before its endpoint event")?;
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let path = text
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .context("no endpoint event")?;
    Ok((format!("{}{path}", target.base_url), response))
}
