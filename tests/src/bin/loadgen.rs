//! `loadgen`: the benchmark of the whole path. Build and run in release mode:
//!
//! ```sh
//! cargo build --release -p openclaw-proxy-edge -p openclaw-proxy-stdio -p openclaw-proxy-tests
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --bridge ws --concurrency 64
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --bridge grpc --grpc-app crate
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --bridge grpc --grpc-app python
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --bridge grpc --grpc-app typescript
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --protocol 2026-07-28 --progress
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --method resources/read
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --bridge ws --concurrency 64 --oauth
//! target/release/loadgen calls --spawn target/release/openclaw-proxy --elicit --protocol 2026-07-28
//! target/release/loadgen memory --spawn target/release/openclaw-proxy --bridge grpc --sessions 10000
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --bridges 500 --calls 2000
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run schema --sessions 200
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run h2-window --requests 500
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run legacy-sse --sessions 16
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run idle-h2 --requests 20 --wait 90
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run listen --sessions 10 --streams 20 --properties 100000
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run parked --sessions 128 --requests 4 --payload-bytes 1048576
//! target/release/loadgen abuse --spawn target/release/openclaw-proxy --run ws-fragment --bridges 200 --payload-bytes 8000000
//! target/release/loadgen sessions --spawn target/release/openclaw-proxy --sessions 100000 --connections 20
//! target/release/loadgen stdio --spawn target/release/openclaw-proxy --stdio target/release/openclaw-proxy-stdio
//! ```
//!
//! `--url` targets a server that is already running instead of `--spawn`ing
//! one (memory needs `--spawn` or `--pid`). Each run prints one JSON line.
//!
//! `--oauth` sends OAuth access tokens instead of the OpenClaw token: the
//! load generator is the issuer itself, its metadata and key set on a
//! loopback port, and starts the server (`--spawn` only) with that issuer
//! and the required scope `mcp`; each client signs its own ES256 token for
//! the MCP endpoint, and the sessions are bound to the tokens' subject.
//!
//! Cluster mode, the bridge on node A and the calls on node B (both started
//! with the same `OPENCLAW_PROXY_NATS_URL` and tokens):
//!
//! ```sh
//! target/release/loadgen calls --url http://127.0.0.1:8001 --mcp-url http://127.0.0.1:8002 --concurrency 64
//! target/release/loadgen nats-rtt --nats-url nats://127.0.0.1:4222
//! ```
//!
//! `nats-rtt` measures what a cross-node call adds at least: one NATS
//! request-reply between two processes, with no proxy.
//!
//! `cluster` does the whole cluster round by itself: it starts a
//! `nats-server` and two nodes on loopback, and alternates same-node and
//! cross-node runs at each concurrency (the cluster table of
//! `docs/performance.md`):
//!
//! ```sh
//! target/release/loadgen cluster --spawn target/release/openclaw-proxy \
//!     --nats-server target/tmp/nats-venv/bin/nats-server --rounds 6
//! ```
//!
//! `balancer` puts HAProxy with the repository's `deploy/haproxy.cfg` in
//! front of three nodes, and the same file with `balance roundrobin`, and
//! alternates runs through both: calls/s, latency and the share of calls
//! the nodes forwarded over NATS, with session affinity and without
//! (`docs/cluster.md`, "Load balancer"):
//!
//! ```sh
//! target/release/loadgen balancer --spawn target/release/openclaw-proxy \
//!     --nats-server target/tmp/nats-venv/bin/nats-server --bridge ws
//! ```

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use openclaw_proxy_tests::balancer::{self, Haproxy};
use openclaw_proxy_tests::balancer_round::BalancerRound;
use openclaw_proxy_tests::bench::{
    self, BridgeKind, GrpcApp, LoadConfig, Method, OAuthLoad, Protocol, Target,
};
use openclaw_proxy_tests::many_sessions::ManySessions;
use openclaw_proxy_tests::processes::{ClusterRound, Node};
use openclaw_proxy_tests::{TestIssuer, bounds_runs, exhaustion};

#[derive(Parser)]
#[command(about = "Throughput, latency and memory of openclaw-proxy's whole path")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// MCP tools/call (or another request, `--method`) throughput and
    /// latency with N concurrent clients.
    Calls {
        #[command(flatten)]
        server: ServerArgs,
        #[arg(long, value_enum, default_value = "ws")]
        bridge: BridgeKind,
        /// What answers on the gRPC bridge: the lean loop, or apps written
        /// with the openclaw-proxy-app crate, the Python package or the
        /// TypeScript package.
        #[arg(long, value_enum, default_value = "lean")]
        grpc_app: GrpcApp,
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        #[arg(long, default_value_t = 1)]
        sessions: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 10)]
        duration: u64,
        /// The MCP request to send instead of tools/call: resources/read and
        /// prompts/get travel over the bridge to the app, resources/list is
        /// answered by the proxy. The sessions then also declare one
        /// resource and one prompt.
        #[arg(long, value_enum, default_value = "tools/call")]
        method: Method,
        /// The MCP protocol revision the clients speak: 2025-11-25 (an
        /// `initialize` first) or 2026-07-28 (per-request `_meta` and the
        /// `Mcp-Method`/`Mcp-Name` headers).
        #[arg(long, value_enum, default_value = "2025-11-25")]
        protocol: Protocol,
        /// Each call asks for progress (a `progressToken` in `_meta`). The
        /// app answers at once, so the answer is plain JSON, unless
        /// `--progress-reports` makes it report first.
        #[arg(long)]
        progress: bool,
        /// Progress reports the app sends per call with `--progress` before
        /// it answers; with one or more, every answer is an SSE stream.
        #[arg(long, default_value_t = 0)]
        progress_reports: u32,
        /// Each call carries vendor keys in `_meta` (an agent session key, as
        /// OpenClaw sends one, and a nested vendor object).
        #[arg(long)]
        meta: bool,
        /// OAuth access tokens instead of the OpenClaw token, from an issuer
        /// the load generator runs on loopback (needs --spawn).
        #[arg(long)]
        oauth: bool,
        /// The app asks the client one question per call (a form
        /// elicitation) and answers with the client's answer, which the
        /// client gives at once: on a second connection up to 2025-11-25,
        /// in a retried call at 2026-07-28.
        #[arg(long)]
        elicit: bool,
    },
    /// Resident memory while bridges that stopped reading are sent large
    /// calls, and after they are gone.
    Abuse {
        #[command(flatten)]
        server: ServerArgs,
        /// Bridges that stop reading.
        #[arg(long, default_value_t = 500)]
        bridges: usize,
        /// Calls sent to them.
        #[arg(long, default_value_t = 2000)]
        calls: usize,
        /// Bytes of each call's argument.
        #[arg(long, default_value_t = 200 * 1024)]
        payload_bytes: usize,
        /// Which abuse: bridges that stop reading (`calls`), or one of the
        /// exhaustion runs (`schema`, `h2-window`, `legacy-sse`, `idle-h2`,
        /// `listen`, `parked`, `ws-fragment`).
        #[arg(long, value_enum, default_value = "calls")]
        run: AbuseRun,
        /// Sessions (schema, legacy-sse).
        #[arg(long, default_value_t = 200)]
        sessions: usize,
        /// Properties of each session's tool schema, about 28 bytes each
        /// (34,000: about 1 MB, the default limit of a session's tools).
        #[arg(long, default_value_t = 34_000)]
        properties: usize,
        /// HTTP/2 requests on the one connection (h2-window).
        #[arg(long, default_value_t = 500)]
        requests: usize,
        /// Streams per session (legacy-sse).
        #[arg(long, default_value_t = 8)]
        streams: usize,
        /// `tools/list` posts per stream (legacy-sse).
        #[arg(long, default_value_t = 70)]
        posts: usize,
        /// Seconds to wait for the server to close the stalled connection
        /// (h2-window), or before the last readings (legacy-sse).
        #[arg(long, default_value_t = 60)]
        wait: u64,
    },
    /// Resident memory per session holding a bridge.
    Memory {
        #[command(flatten)]
        server: ServerArgs,
        #[arg(long, value_enum, default_value = "ws")]
        bridge: BridgeKind,
        #[arg(long, default_value_t = 10_000)]
        sessions: usize,
    },
    /// Many live sessions on one node: registers `--sessions` sessions,
    /// attaches a gRPC bridge to each over at most `--connections` HTTP/2
    /// connections, lets them idle, then calls `echo` in random sessions.
    /// Reports the server's resident memory, the time to register and to
    /// attach, its CPU while the sessions idle, and the calls' latency.
    Sessions {
        #[command(flatten)]
        server: ServerArgs,
        #[arg(long, default_value_t = 100_000)]
        sessions: usize,
        /// HTTP/2 connections the bridges share (a spawned server allows
        /// sessions/connections streams on each).
        #[arg(long, default_value_t = 20)]
        connections: usize,
        /// Registrations in flight at once.
        #[arg(long, default_value_t = 8)]
        registrars: usize,
        /// Seconds the sessions idle before the calls.
        #[arg(long, default_value_t = 60)]
        idle: u64,
        /// Concurrent MCP clients, each calling a random session each time.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Seconds of calls.
        #[arg(long, default_value_t = 10)]
        duration: u64,
    },
    /// The floor under a cross-node call: one NATS request-reply between
    /// two processes (this one and a child echoing), with no proxy at all.
    /// A cross-node call makes this round trip once, on top of everything a
    /// same-node call does.
    NatsRtt {
        /// The NATS server, e.g. nats://127.0.0.1:4222.
        #[arg(long)]
        nats_url: String,
        #[arg(long, default_value_t = 5)]
        duration: u64,
    },
    /// Cluster mode on this machine: starts a `nats-server` and two nodes
    /// (A and B), puts the bridge on A, and runs MCP calls on A (same node)
    /// and on B (cross node) at each concurrency, alternated, round after
    /// round. One JSON line per run, with each process's CPU time per call,
    /// then a summary line of means and cross/same ratios.
    Cluster {
        /// The openclaw-proxy binary.
        #[arg(long)]
        spawn: String,
        /// The nats-server binary (2.11 or newer).
        #[arg(long)]
        nats_server: String,
        #[arg(long, default_value_t = 4)]
        rounds: u32,
        /// Seconds per run.
        #[arg(long, default_value_t = 5)]
        duration: u64,
        /// Concurrencies to run, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "1,64")]
        concurrency: Vec<usize>,
        /// OPENCLAW_PROXY_WORKER_THREADS of both nodes (0: one per CPU).
        #[arg(long, default_value_t = 0)]
        node_threads: u16,
        /// GOMAXPROCS of nats-server (0: Go's default, one per CPU).
        #[arg(long, default_value_t = 0)]
        nats_threads: u16,
        /// Beside each plain run, runs where the app asks the client one
        /// question per call (`calls --elicit`), at 2025-11-25 and at
        /// 2026-07-28.
        #[arg(long)]
        elicit: bool,
        #[command(flatten)]
        tokens: Tokens,
    },
    /// Session affinity in the load balancer: starts a `nats-server`, three
    /// nodes and HAProxy twice, with `deploy/haproxy.cfg` as it is (hashing
    /// on the session id) and with its `balance` lines made `roundrobin`,
    /// and alternates runs through each. One JSON line per run (calls/s,
    /// latency, the share of calls the nodes forwarded over NATS), then a
    /// summary line of means per balancer.
    Balancer {
        /// The openclaw-proxy binary.
        #[arg(long)]
        spawn: String,
        /// The nats-server binary (2.11 or newer).
        #[arg(long)]
        nats_server: String,
        /// The haproxy binary (2.6 or newer); by default the one on `PATH`,
        /// else Debian's package unpacked under target/tmp/haproxy-deb, as
        /// the tests install it.
        #[arg(long)]
        haproxy: Option<String>,
        #[arg(long, value_enum, default_value = "ws")]
        bridge: BridgeKind,
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        /// Seconds per run.
        #[arg(long, default_value_t = 5)]
        duration: u64,
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Sessions (apps) per run; the clients are spread over them.
        #[arg(long, default_value_t = 32)]
        sessions: usize,
        #[command(flatten)]
        tokens: Tokens,
    },
    /// The echoing side of `nats-rtt` (started by it).
    #[command(hide = true)]
    NatsEcho {
        #[arg(long)]
        nats_url: String,
        #[arg(long)]
        subject: String,
    },
    /// Calls through the stdio relay, one client.
    Stdio {
        #[command(flatten)]
        server: ServerArgs,
        /// The openclaw-proxy-stdio binary.
        #[arg(long)]
        stdio: String,
        #[arg(long, default_value_t = 10)]
        duration: u64,
    },
}

/// The abuse `loadgen abuse` runs.
#[derive(Clone, Copy, clap::ValueEnum)]
enum AbuseRun {
    /// Bridges that stop reading while large calls are sent to them.
    Calls,
    /// Sessions with large unique tool schemas, created then deleted.
    Schema,
    /// One HTTP/2 connection with a receive window of 0 asking for large
    /// `tools/list` answers.
    H2Window,
    /// Legacy SSE streams that are never read, sent large answers.
    LegacySse,
    /// HTTP/2 connections that open no stream (one a silent reflection
    /// stream), as many as the connection limit (`--requests`).
    IdleH2,
    /// `subscriptions/listen` streams naming many URIs (`--sessions`,
    /// `--streams`, `--properties` URIs each).
    Listen,
    /// 2026-07-28 calls whose app asks four large questions, never answered
    /// (`--sessions`, `--requests` calls each, `--payload-bytes` per ask).
    Parked,
    /// WebSocket bridges holding an unfinished fragmented message of
    /// `--payload-bytes` (`--bridges`).
    WsFragment,
}

#[derive(Args)]
struct ServerArgs {
    /// A running server's base URL.
    #[arg(long, conflicts_with = "spawn")]
    url: Option<String>,
    /// Start this openclaw-proxy binary on a free loopback port.
    #[arg(long)]
    spawn: Option<String>,
    /// The running server's process id (for memory with --url).
    #[arg(long)]
    pid: Option<u32>,
    /// Send the MCP calls to this node instead (cluster mode: the bridge on
    /// one node, the calls on another).
    #[arg(long)]
    mcp_url: Option<String>,
    #[command(flatten)]
    tokens: Tokens,
}

/// The tokens the server takes (and a spawned one is given).
#[derive(Args)]
struct Tokens {
    #[arg(long, env = "OPENCLAW_PROXY_APP_TOKEN", default_value = "bench-app")]
    app_token: String,
    #[arg(
        long,
        env = "OPENCLAW_PROXY_OPENCLAW_TOKEN",
        default_value = "bench-openclaw"
    )]
    openclaw_token: String,
}

struct Server {
    target: Target,
    pid: Option<u32>,
    _child: Option<tokio::process::Child>,
}

/// The server of `args`; a spawned one gets these extra variables.
async fn server(args: &ServerArgs, variables: &[(&str, String)]) -> anyhow::Result<Server> {
    let target = |base_url: String| Target {
        base_url,
        app_token: args.tokens.app_token.clone(),
        openclaw_token: args.tokens.openclaw_token.clone(),
        mcp_base_url: args.mcp_url.clone(),
    };
    if let Some(binary) = &args.spawn {
        let node = Node::spawn(
            binary,
            &args.tokens.app_token,
            &args.tokens.openclaw_token,
            variables,
        )
        .await?;
        return Ok(Server {
            target: target(node.url.clone()),
            pid: Some(node.pid),
            _child: Some(node.child),
        });
    }
    let base_url = args
        .url
        .clone()
        .unwrap_or_else(|| "http://127.0.0.1:8000".into());
    Ok(Server {
        target: target(base_url),
        pid: args.pid,
        _child: None,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Calls {
            server: args,
            bridge,
            grpc_app,
            concurrency,
            sessions,
            duration,
            method,
            protocol,
            progress,
            progress_reports,
            meta,
            oauth,
            elicit,
        } => {
            // The issuer serves until the run ends.
            let issuer = match oauth {
                true if args.spawn.is_none() => {
                    anyhow::bail!("--oauth needs --spawn: the server must trust loadgen's issuer")
                }
                true => Some(TestIssuer::start().await),
                false => None,
            };
            let variables: Vec<(&str, String)> = issuer
                .iter()
                .flat_map(|issuer| {
                    [
                        ("OPENCLAW_PROXY_OAUTH_ISSUER", issuer.url.clone()),
                        ("OPENCLAW_PROXY_OAUTH_REQUIRED_SCOPES", "mcp".to_owned()),
                    ]
                })
                .collect();
            let server = server(&args, &variables).await?;
            let config = LoadConfig {
                target: server.target.clone(),
                bridge,
                grpc_app,
                concurrency: concurrency.max(1),
                sessions: sessions.max(1),
                duration: Duration::from_secs(duration),
                max_calls: None,
                method,
                protocol,
                progress,
                progress_reports,
                vendor_meta: meta,
                oauth: issuer
                    .as_ref()
                    .map(|issuer| OAuthLoad::new(issuer, "loadgen-user")),
                elicit,
            };
            let cpu_before = server.pid.map(bench::cpu_seconds).transpose()?;
            let report = bench::run_load(&config).await?;
            let mut line = bench::report_json(&config, &report);
            // The server's CPU time per correct call (setup and warm-up
            // included, well under 1 % of a run), when its pid is known.
            if let (Some(pid), Some(before)) = (server.pid, cpu_before)
                && report.calls > 0
            {
                let used = bench::cpu_seconds(pid)? - before;
                line["server_cpu_us_per_call"] =
                    serde_json::json!((used * 1e6 / report.calls as f64).round());
            }
            println!("{line}");
        }
        Command::NatsRtt { nats_url, duration } => {
            let this = std::env::current_exe()?;
            let report =
                bench::nats_round_trips(&nats_url, Duration::from_secs(duration), &this).await?;
            println!("{report}");
        }
        Command::Cluster {
            spawn,
            nats_server,
            rounds,
            duration,
            concurrency,
            node_threads,
            nats_threads,
            elicit,
            tokens,
        } => {
            let cluster = ClusterRound {
                elicit,
                binary: spawn,
                nats_server,
                rounds,
                duration: Duration::from_secs(duration),
                concurrency,
                node_threads,
                nats_threads,
                app_token: tokens.app_token,
                openclaw_token: tokens.openclaw_token,
            };
            let summary = cluster.run(&mut |line| println!("{line}")).await?;
            println!("{summary}");
        }
        Command::Balancer {
            spawn,
            nats_server,
            haproxy,
            bridge,
            rounds,
            duration,
            concurrency,
            sessions,
            tokens,
        } => {
            let haproxy = match haproxy {
                Some(program) => Haproxy::at(program.into()),
                None => balancer::haproxy(std::path::Path::new("target/tmp"))
                    .await
                    .map_err(anyhow::Error::msg)?,
            };
            let round = BalancerRound {
                binary: spawn,
                nats_server,
                haproxy,
                rounds,
                duration: Duration::from_secs(duration),
                concurrency,
                sessions,
                bridge,
                app_token: tokens.app_token,
                openclaw_token: tokens.openclaw_token,
            };
            round.haproxy.version().await.map_err(anyhow::Error::msg)?;
            let summary = round.run(&mut |line| println!("{line}")).await?;
            println!("{summary}");
        }
        Command::NatsEcho { nats_url, subject } => bench::nats_echo(&nats_url, &subject).await?,
        Command::Abuse {
            server: args,
            bridges,
            calls,
            payload_bytes,
            run,
            sessions,
            properties,
            requests,
            streams,
            posts,
            wait,
        } => {
            // The idle run takes every connection slot of a spawned server;
            // the fragment run pings every second.
            let variables: Vec<(&str, String)> = match run {
                AbuseRun::IdleH2 => vec![("OPENCLAW_PROXY_MAX_CONNECTIONS", requests.to_string())],
                AbuseRun::WsFragment => vec![("OPENCLAW_PROXY_PING_INTERVAL_SECONDS", "1".into())],
                _ => Vec::new(),
            };
            let server = server(&args, &variables).await?;
            let pid = server.pid.context("abuse needs --spawn or --pid")?;
            let target = &server.target;
            let report = match run {
                AbuseRun::Calls => {
                    bench::measure_abuse(target, pid, bridges, calls, payload_bytes).await?
                }
                AbuseRun::Schema => {
                    exhaustion::schema_amplification(target, pid, sessions, properties).await?
                }
                AbuseRun::H2Window => {
                    let wait = Duration::from_secs(wait);
                    exhaustion::h2_window_flood(target, pid, requests, properties, wait).await?
                }
                AbuseRun::LegacySse => {
                    let (shape, wait) = ((sessions, streams, posts), Duration::from_secs(wait));
                    exhaustion::legacy_sse_unread(target, pid, shape, properties, wait).await?
                }
                AbuseRun::IdleH2 => {
                    bounds_runs::idle_h2(target, pid, requests, Duration::from_secs(wait)).await?
                }
                AbuseRun::Listen => {
                    let shape = (sessions, streams, properties);
                    bounds_runs::listen_flood(target, pid, shape, Duration::from_secs(wait)).await?
                }
                AbuseRun::Parked => {
                    let shape = (sessions, requests, payload_bytes);
                    bounds_runs::parked_asks(target, pid, shape, Duration::from_secs(wait)).await?
                }
                AbuseRun::WsFragment => {
                    let wait = Duration::from_secs(wait);
                    bounds_runs::ws_fragment(target, pid, bridges, payload_bytes, wait).await?
                }
            };
            println!("{report}");
        }
        Command::Memory {
            server: args,
            bridge,
            sessions,
        } => {
            let server = server(&args, &[]).await?;
            let pid = server.pid.context("memory needs --spawn or --pid")?;
            println!(
                "{}",
                bench::measure_memory(
                    &server.target,
                    bridge,
                    pid,
                    sessions,
                    Duration::from_millis(1500)
                )
                .await?
            );
        }
        Command::Sessions {
            server: args,
            sessions,
            connections,
            registrars,
            idle,
            concurrency,
            duration,
        } => {
            let connections = connections.max(1);
            // Each connection carries sessions/connections bridge streams,
            // and a stream or two more (the HTTP/2 default is a bound
            // against hostile clients, not one app's connection).
            let streams = sessions.div_ceil(connections) + 16;
            let server = server(
                &args,
                &[(
                    "OPENCLAW_PROXY_HTTP2_MAX_CONCURRENT_STREAMS",
                    streams.to_string(),
                )],
            )
            .await?;
            let run = ManySessions {
                target: server.target.clone(),
                pid: server.pid.context("sessions needs --spawn or --pid")?,
                sessions: sessions.max(1),
                connections,
                registrars,
                idle: Duration::from_secs(idle),
                concurrency: concurrency.max(1),
                duration: Duration::from_secs(duration),
            };
            println!("{}", run.run().await?);
        }
        Command::Stdio {
            server: args,
            stdio,
            duration,
        } => {
            let server = server(&args, &[]).await?;
            let sessions = bench::start_apps(&server.target, BridgeKind::Ws, 1).await?;
            let report = bench::run_stdio(
                &stdio,
                &server.target,
                &sessions[0],
                Duration::from_secs(duration),
                None,
            )
            .await?;
            let [p50, p90, p99, max] = report.percentiles_us;
            println!(
                "{}",
                serde_json::json!({
                    "bench": "stdio_relay", "bridge": "ws", "concurrency": 1,
                    "calls": report.calls, "calls_per_s": report.calls_per_second().round(),
                    "p50_us": p50, "p90_us": p90, "p99_us": p99, "max_us": max, "errors": report.errors,
                })
            );
        }
    }
    Ok(())
}
