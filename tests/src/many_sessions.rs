//! `loadgen sessions`: many live sessions on one node. Registers the
//! sessions over REST, attaches a gRPC bridge to each over a few HTTP/2
//! connections (the bridges multiplexed as streams), lets them idle, then
//! calls tools in random sessions; one JSON line with the server's resident
//! memory, the time to register and to attach, its CPU while the sessions
//! idle, and the calls' latency.
//!
//! The app side speaks gRPC on raw HTTP/2 streams (the `h2` crate, as hyper
//! and tonic use it) rather than through tonic's client: tonic keeps an
//! 8 KiB encode and an 8 KiB decode buffer per stream and hyper runs a task
//! per streamed request body, which for 100,000 bridges would take more of
//! the shared machine than the server's share of them. Here a connection is
//! one task, whatever its bridges: it opens their streams, sends each
//! `hello`, and answers every call (with its arguments) and every ping on
//! any of them.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::stream::{FuturesUnordered, SelectAll, Stream, StreamExt};
use openclaw_proxy_core::proto::{self, app_message, proxy_message};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tonic_prost::prost::Message as _;

use crate::bench::{
    self, BridgeKind, GrpcApp, LoadConfig, LoadReport, McpConnection, Method, Protocol, Target,
};

/// One run of `loadgen sessions`.
#[derive(Clone, Debug)]
pub struct ManySessions {
    /// The server.
    pub target: Target,
    /// Its process id, for its memory and CPU time.
    pub pid: u32,
    /// Sessions to open, each with a gRPC bridge.
    pub sessions: usize,
    /// HTTP/2 connections the bridges share.
    pub connections: usize,
    /// Registrations in flight at once (each on its keep-alive connection).
    pub registrars: usize,
    /// How long the sessions idle before the calls.
    pub idle: Duration,
    /// Concurrent MCP clients calling random sessions.
    pub concurrency: usize,
    /// How long they call.
    pub duration: Duration,
}

/// The streams a connection opens before their bridges are attached: a
/// bound on the hellos the server has to answer at once, well inside its
/// hello timeout.
const ATTACHING_PER_CONNECTION: usize = 512;

/// The path of the bridge's gRPC method.
const ATTACH_PATH: &str = "/openclaw.proxy.v1.BridgeService/Attach";

/// What the bridges' connections have seen, summed over all of them.
#[derive(Default)]
struct Counters {
    attached: AtomicU64,
    refused: AtomicU64,
    ended: AtomicU64,
    calls: AtomicU64,
    pings: AtomicU64,
}

impl Counters {
    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// The bridges' connections; their tasks end when this is dropped.
struct Bridges {
    counters: Arc<Counters>,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl Drop for Bridges {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl ManySessions {
    /// Runs it: one JSON line.
    pub async fn run(&self) -> anyhow::Result<Value> {
        let pid = self.pid;
        let settle = || tokio::time::sleep(Duration::from_millis(1500));
        settle().await;
        let rss_start = bench::resident_kib(pid)?;

        let started = Instant::now();
        let ids = self.register().await?;
        let register_seconds = started.elapsed().as_secs_f64();
        settle().await;
        let rss_registered = bench::resident_kib(pid)?;

        let started = Instant::now();
        let bridges = self.attach(&ids).await?;
        let attach_seconds = started.elapsed().as_secs_f64();
        settle().await;
        let rss_attached = bench::resident_kib(pid)?;

        // Idle: the server only pings the bridges and sweeps.
        let (cpu_before, own_before) = (bench::cpu_seconds(pid)?, own_cpu()?);
        let pings_before = Counters::get(&bridges.counters.pings);
        tokio::time::sleep(self.idle).await;
        let idle_cpu = bench::cpu_seconds(pid)? - cpu_before;
        let own_idle_cpu = own_cpu()? - own_before;
        let pings = Counters::get(&bridges.counters.pings) - pings_before;
        let ended_idle = Counters::get(&bridges.counters.ended);

        let cpu_before = bench::cpu_seconds(pid)?;
        let report = self.call_random(&ids).await?;
        let calls_cpu = bench::cpu_seconds(pid)? - cpu_before;
        let rss_end = bench::resident_kib(pid)?;
        let counters = &bridges.counters;
        let idle_seconds = self.idle.as_secs_f64().max(f64::EPSILON);
        let per_session = |from: u64, to: u64| to.saturating_sub(from) * 1024 / ids.len() as u64;
        let round = |value: f64, places: i32| {
            let scale = 10_f64.powi(places);
            (value * scale).round() / scale
        };
        let line = json!({
            "bench": "many_sessions",
            "bridge": "grpc",
            "sessions": ids.len(),
            "connections": self.connections,
            "register_seconds": round(register_seconds, 2),
            "registrations_per_s": (ids.len() as f64 / register_seconds).round(),
            "attach_seconds": round(attach_seconds, 2),
            "attaches_per_s": (ids.len() as f64 / attach_seconds).round(),
            "rss_start_kib": rss_start,
            "rss_registered_kib": rss_registered,
            "rss_attached_kib": rss_attached,
            "rss_end_kib": rss_end,
            "bytes_per_registered_session": per_session(rss_start, rss_registered),
            "bytes_per_bridged_session": per_session(rss_start, rss_attached),
            "idle_seconds": round(idle_seconds, 1),
            "idle_server_cpu_percent": round(idle_cpu * 100.0 / idle_seconds, 2),
            "idle_server_cpu_us_per_session_per_s":
                round(idle_cpu * 1e6 / idle_seconds / ids.len() as f64, 3),
            "idle_pings_answered": pings,
            "idle_loadgen_cpu_percent": round(own_idle_cpu * 100.0 / idle_seconds, 2),
            "bridges_ended_while_idle": ended_idle,
            "concurrency": self.concurrency,
            "server_cpu_us_per_call": if report.calls > 0 {
                json!((calls_cpu * 1e6 / report.calls as f64).round())
            } else {
                Value::Null
            },
            "calls_answered_by_bridges": Counters::get(&counters.calls),
            "bridges_ended": Counters::get(&counters.ended),
            "loadgen_rss_kib": bench::resident_kib(std::process::id())?,
        });
        Ok(report.figures_added(line, "calls"))
    }

    /// Registers the sessions over REST, `registrars` at a time; their ids.
    async fn register(&self) -> anyhow::Result<Vec<String>> {
        let http = crate::http_client_builder()
            .pool_max_idle_per_host(self.registrars)
            .build()?;
        let target = &self.target;
        let registered: Vec<anyhow::Result<String>> = futures_util::stream::iter(0..self.sessions)
            .map(|_| bench::register_rest(&http, target, false, None))
            .buffer_unordered(self.registrars.max(1))
            .collect()
            .await;
        registered.into_iter().collect()
    }

    /// Attaches a bridge to each session, the sessions dealt out over the
    /// connections in turn; returns once every bridge is attached.
    async fn attach(&self, ids: &[String]) -> anyhow::Result<Bridges> {
        let counters = Arc::new(Counters::default());
        let connections = self.connections.clamp(1, ids.len().max(1));
        let mut tasks = Vec::with_capacity(connections);
        for connection in 0..connections {
            let mine: Vec<String> = ids
                .iter()
                .skip(connection)
                .step_by(connections)
                .cloned()
                .collect();
            let app = LeanConnection {
                authority: self.target.authority().to_owned(),
                bearer: format!("Bearer {}", self.target.app_token),
                counters: counters.clone(),
            };
            tasks.push(tokio::spawn(app.serve(mine)));
        }
        let bridges = Bridges { counters, tasks };
        let total = ids.len() as u64;
        let deadline = Instant::now() + Duration::from_secs(60) + Duration::from_millis(total);
        loop {
            let counters = &bridges.counters;
            let (attached, refused) = (
                Counters::get(&counters.attached),
                Counters::get(&counters.refused),
            );
            if refused > 0 {
                bail!("{refused} bridges were refused ({attached} attached)");
            }
            if attached == total {
                return Ok(bridges);
            }
            if bridges.tasks.iter().any(JoinHandle::is_finished) {
                bail!("a bridge connection ended while attaching ({attached} attached)");
            }
            if Instant::now() > deadline {
                bail!("only {attached} of {total} bridges attached in time");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `concurrency` clients calling `echo` in random sessions for
    /// `duration`, after a short warm-up.
    async fn call_random(&self, ids: &[String]) -> anyhow::Result<LoadReport> {
        let config = LoadConfig {
            target: self.target.clone(),
            bridge: BridgeKind::Grpc,
            grpc_app: GrpcApp::Lean,
            concurrency: self.concurrency,
            sessions: ids.len(),
            duration: self.duration,
            max_calls: None,
            method: Method::ToolsCall,
            protocol: Protocol::V2025_11_25,
            progress: false,
            progress_reports: 0,
            vendor_meta: false,
            oauth: None,
            elicit: false,
        };
        let ids: Arc<[String]> = ids.into();
        let mut clients = Vec::with_capacity(self.concurrency);
        for client in 0..self.concurrency.max(1) {
            let mut connection = McpConnection::open(&config, &ids[0], client).await?;
            let mut random = Random::new(client as u64);
            for n in 0..200 {
                connection.set_session(&ids[random.below(ids.len())]);
                if !connection.echo_call(n, "warm-up").await {
                    bail!("a warm-up call failed");
                }
            }
            clients.push((connection, random));
        }
        let started = Instant::now();
        let deadline = started + self.duration;
        let mut workers = tokio::task::JoinSet::new();
        for (client, (mut connection, mut random)) in clients.into_iter().enumerate() {
            let ids = ids.clone();
            workers.spawn(async move {
                let (mut latencies, mut errors) = (Vec::with_capacity(1 << 16), 0_u64);
                let mut n = 0_u64;
                while Instant::now() < deadline {
                    n += 1;
                    connection.set_session(&ids[random.below(ids.len())]);
                    let text = format!("c{client}-{n}");
                    let begun = Instant::now();
                    if connection.echo_call(n, &text).await {
                        latencies
                            .push(u32::try_from(begun.elapsed().as_micros()).unwrap_or(u32::MAX));
                    } else {
                        errors += 1;
                    }
                }
                (latencies, errors)
            });
        }
        let (mut latencies, mut errors) = (Vec::new(), 0);
        while let Some(joined) = workers.join_next().await {
            let (mut more, more_errors) = joined?;
            latencies.append(&mut more);
            errors += more_errors;
        }
        Ok(LoadReport::from_latencies(
            latencies,
            errors,
            started.elapsed(),
        ))
    }
}

/// This process's CPU time, in seconds.
fn own_cpu() -> anyhow::Result<f64> {
    bench::cpu_seconds(std::process::id())
}

/// xorshift64*: which session each call goes to.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Self {
        Self(0x9E37_79B9_7F4A_7C15 ^ (seed.wrapping_add(1)).wrapping_mul(0xBF58_476D_1CE4_E5B9))
    }

    fn below(&mut self, bound: usize) -> usize {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize % bound.max(1)
    }
}

/// One HTTP/2 connection of the lean app: all its bridges on one task.
struct LeanConnection {
    authority: String,
    bearer: String,
    counters: Arc<Counters>,
}

/// A bridge's answers from the server, as they arrive: `(bridge, chunk)`,
/// then `(bridge, None)` once when its stream ends.
struct Inbound {
    bridge: usize,
    body: Option<h2::RecvStream>,
}

impl Stream for Inbound {
    type Item = (usize, Option<Bytes>);

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let bridge = self.bridge;
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        match body.poll_data(cx) {
            Poll::Ready(Some(Ok(data))) => {
                // Read at once: the window opens again at once.
                let _ = body.flow_control().release_capacity(data.len());
                Poll::Ready(Some((bridge, Some(data))))
            }
            Poll::Ready(_) => {
                self.body = None;
                Poll::Ready(Some((bridge, None)))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A message framed as gRPC sends it: uncompressed, its length, itself.
fn grpc_frame(message: &proto::AppMessage) -> Bytes {
    let length = message.encoded_len();
    let mut frame = BytesMut::with_capacity(5 + length);
    frame.put_u8(0);
    frame.put_u32(u32::try_from(length).unwrap_or(u32::MAX));
    message.encode_raw(&mut frame);
    frame.freeze()
}

fn app_message(kind: app_message::Kind) -> proto::AppMessage {
    proto::AppMessage { kind: Some(kind) }
}

impl LeanConnection {
    /// Opens a bridge to each of `sessions` and answers on all of them until
    /// the connection ends (or the task is aborted).
    async fn serve(self, sessions: Vec<String>) -> anyhow::Result<()> {
        let tcp = tokio::net::TcpStream::connect(&self.authority).await?;
        tcp.set_nodelay(true)?;
        let (mut sender, connection) = h2::client::Builder::new()
            .initial_window_size(64 * 1024)
            .initial_connection_window_size(16 * 1024 * 1024)
            .handshake::<_, Bytes>(tcp)
            .await
            .context("HTTP/2 handshake")?;
        let driver = tokio::spawn(connection);
        let counters = &self.counters;
        let mut outbound: Vec<Option<h2::SendStream<Bytes>>> = Vec::with_capacity(sessions.len());
        let mut responses = FuturesUnordered::new();
        let mut inbound = SelectAll::new();
        // Messages split across DATA frames, per bridge, until whole.
        let mut partial: HashMap<usize, BytesMut> = HashMap::new();
        let mut attaching = 0_usize;
        loop {
            while outbound.len() < sessions.len() && attaching < ATTACHING_PER_CONNECTION {
                let session = &sessions[outbound.len()];
                sender = sender.ready().await.context("HTTP/2 stream")?;
                let request =
                    hyper::Request::post(format!("http://{}{ATTACH_PATH}", self.authority))
                        .header("content-type", "application/grpc")
                        .header("te", "trailers")
                        .header("authorization", &self.bearer)
                        .header("mcp-session-id", session)
                        .body(())?;
                let (response, mut send) = sender.send_request(request, false)?;
                let hello = proto::Hello {
                    session_id: session.clone(),
                };
                send.send_data(
                    grpc_frame(&app_message(app_message::Kind::Hello(hello))),
                    false,
                )?;
                let bridge = outbound.len();
                responses.push(async move { (bridge, response.await) });
                outbound.push(Some(send));
                attaching += 1;
            }
            tokio::select! {
                Some((bridge, response)) = responses.next(), if !responses.is_empty() => {
                    let accepted = response.as_ref().is_ok_and(|response| {
                        response.status() == 200 && !response.headers().contains_key("grpc-status")
                    });
                    match response {
                        Ok(response) if accepted => inbound.push(Inbound {
                            bridge,
                            body: Some(response.into_body()),
                        }),
                        _ => {
                            counters.refused.fetch_add(1, Ordering::Relaxed);
                            outbound[bridge] = None;
                            attaching -= 1;
                        }
                    }
                }
                Some((bridge, chunk)) = inbound.next(), if !inbound.is_empty() => {
                    let Some(chunk) = chunk else {
                        counters.ended.fetch_add(1, Ordering::Relaxed);
                        outbound[bridge] = None;
                        partial.remove(&bridge);
                        continue;
                    };
                    let mut buffer = match partial.remove(&bridge) {
                        Some(mut buffer) => {
                            buffer.extend_from_slice(&chunk);
                            buffer
                        }
                        None => BytesMut::from(&chunk[..]),
                    };
                    while buffer.len() >= 5 {
                        let length = u32::from_be_bytes([buffer[1], buffer[2], buffer[3], buffer[4]]) as usize;
                        if buffer.len() < 5 + length {
                            break;
                        }
                        buffer.advance(5);
                        let message = buffer.split_to(length);
                        let Ok(message) = proto::ProxyMessage::decode(message) else {
                            continue;
                        };
                        let reply = match message.kind {
                            Some(proxy_message::Kind::Attached(_)) => {
                                counters.attached.fetch_add(1, Ordering::Relaxed);
                                attaching -= 1;
                                continue;
                            }
                            Some(proxy_message::Kind::Invoke(invoke)) => {
                                counters.calls.fetch_add(1, Ordering::Relaxed);
                                app_message::Kind::Result(proto::ToolResult {
                                    request_id: invoke.request_id,
                                    ok: true,
                                    content_json: invoke.arguments_json,
                                    error: String::new(),
                                })
                            }
                            Some(proxy_message::Kind::Ping(ping)) => {
                                counters.pings.fetch_add(1, Ordering::Relaxed);
                                app_message::Kind::Pong(proto::Pong { nonce: ping.nonce })
                            }
                            _ => continue,
                        };
                        if let Some(send) = outbound[bridge].as_mut() {
                            // Buffered by h2 when the stream's window is shut.
                            let _ = send.send_data(grpc_frame(&app_message(reply)), false);
                        }
                    }
                    if !buffer.is_empty() {
                        partial.insert(bridge, buffer);
                    }
                }
                else => break,
            }
        }
        driver.abort();
        bail!("every bridge of the connection ended")
    }
}
