//! Processes a benchmark starts: a proxy on a free loopback port, and the
//! whole cluster round (`loadgen cluster`): a `nats-server`, two nodes, and
//! same-node against cross-node runs, alternated.

use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::bench::{self, BridgeKind, GrpcApp, LoadConfig, Protocol, Target};

/// A proxy started by this process, killed when dropped.
pub struct Node {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// Its process id.
    pub pid: u32,
    /// The process, killed when dropped.
    pub child: tokio::process::Child,
}

impl Node {
    /// Starts `binary` on a free loopback port with the benchmark's
    /// settings and these extra variables; returns once it listens.
    pub async fn spawn(
        binary: &str,
        app_token: &str,
        openclaw_token: &str,
        variables: &[(&str, String)],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let child = tokio::process::Command::new(binary)
            .env("OPENCLAW_PROXY_LISTEN", format!("127.0.0.1:{port}"))
            .env("OPENCLAW_PROXY_APP_TOKEN", app_token)
            .env("OPENCLAW_PROXY_OPENCLAW_TOKEN", openclaw_token)
            // The benchmark opens sessions and calls faster than one client
            // is allowed to by default.
            .env("OPENCLAW_PROXY_SESSION_CREATE_RATE", "0")
            .env("OPENCLAW_PROXY_MAX_CALLS_PER_SESSION", "0")
            .env("OPENCLAW_PROXY_MAX_SESSIONS", "0")
            .env("RUST_LOG", "warn")
            .envs(variables.iter().map(|(name, value)| (name, value)))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {binary}"))?;
        let pid = child.id().context("no process id for the server")?;
        wait_listening(port, binary).await?;
        Ok(Self {
            url: format!("http://127.0.0.1:{port}"),
            pid,
            child,
        })
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn wait_listening(port: u16, what: &str) -> anyhow::Result<()> {
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    anyhow::bail!("{what} did not start listening on port {port}")
}

/// Same-node against cross-node calls on a cluster this starts: see
/// `loadgen cluster --help`.
pub struct ClusterRound {
    /// The openclaw-proxy binary.
    pub binary: String,
    /// The nats-server binary (2.11 or newer).
    pub nats_server: String,
    /// Rounds; each runs every concurrency, same node then cross node.
    pub rounds: u32,
    /// Length of one run.
    pub duration: Duration,
    /// Concurrencies to run.
    pub concurrency: Vec<usize>,
    /// `OPENCLAW_PROXY_WORKER_THREADS` of both nodes (0: one per CPU).
    pub node_threads: u16,
    /// `GOMAXPROCS` of nats-server (0: Go's default, one per CPU).
    pub nats_threads: u16,
    /// The app token both nodes take.
    pub app_token: String,
    /// The OpenClaw token both nodes take.
    pub openclaw_token: String,
}

impl ClusterRound {
    /// Starts the cluster, hands each run's JSON line to `line` as it ends,
    /// and returns the summary line (means and cross/same ratios). The
    /// processes are gone when it returns.
    pub async fn run(&self, line: &mut dyn FnMut(&Value)) -> anyhow::Result<Value> {
        let store = std::env::temp_dir().join(format!(
            "openclaw-proxy-bench-nats-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&store)?;
        let result = self.run_in(&store, line).await;
        // The processes were killed on the way out; nats-server may take a
        // moment to let go of its store.
        for _ in 0..50 {
            if std::fs::remove_dir_all(&store).is_ok() || !store.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        result
    }

    async fn run_in(
        &self,
        store: &std::path::Path,
        emit: &mut dyn FnMut(&Value),
    ) -> anyhow::Result<Value> {
        let port = free_port()?;
        let mut command = tokio::process::Command::new(&self.nats_server);
        command
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "-js", "-sd"])
            .arg(store)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        if self.nats_threads > 0 {
            command.env("GOMAXPROCS", self.nats_threads.to_string());
        }
        let nats = command
            .spawn()
            .with_context(|| format!("cannot start {}", self.nats_server))?;
        let nats_pid = nats.id().context("no process id for nats-server")?;
        wait_listening(port, &self.nats_server).await?;
        let variables = [
            (
                "OPENCLAW_PROXY_NATS_URL",
                format!("nats://127.0.0.1:{port}"),
            ),
            ("OPENCLAW_PROXY_NATS_PREFIX", "loadgen".to_owned()),
            (
                "OPENCLAW_PROXY_WORKER_THREADS",
                self.node_threads.to_string(),
            ),
        ];
        let spawn = || {
            Node::spawn(
                &self.binary,
                &self.app_token,
                &self.openclaw_token,
                &variables,
            )
        };
        let (a, b) = (spawn().await?, spawn().await?);
        for node in [&a, &b] {
            wait_ready(&node.url).await?;
        }
        let pids = [a.pid, b.pid, nats_pid, std::process::id()];
        // (same, cross) figures per concurrency, one entry per round.
        let mut figures: Vec<[Vec<(f64, u64)>; 2]> =
            vec![Default::default(); self.concurrency.len()];
        for round in 1..=self.rounds {
            for (index, &concurrency) in self.concurrency.iter().enumerate() {
                for (placement, cross) in [("same", false), ("cross", true)] {
                    let config = LoadConfig {
                        target: Target {
                            base_url: a.url.clone(),
                            app_token: self.app_token.clone(),
                            openclaw_token: self.openclaw_token.clone(),
                            mcp_base_url: cross.then(|| b.url.clone()),
                        },
                        bridge: BridgeKind::Ws,
                        grpc_app: GrpcApp::Lean,
                        concurrency: concurrency.max(1),
                        sessions: 1,
                        duration: self.duration,
                        max_calls: None,
                        protocol: Protocol::default(),
                        progress: false,
                        progress_reports: 0,
                        vendor_meta: false,
                    };
                    let before = cpu_of(&pids)?;
                    let report = bench::run_load(&config).await?;
                    let after = cpu_of(&pids)?;
                    let per_call = |i: usize| {
                        ((after[i] - before[i]) * 1e6 / report.calls.max(1) as f64 * 10.0).round()
                            / 10.0
                    };
                    let mut line = bench::report_json(&config, &report);
                    line["placement"] = json!(placement);
                    line["round"] = json!(round);
                    line["node_threads"] = json!(self.node_threads);
                    line["nats_threads"] = json!(self.nats_threads);
                    line["cpu_us_per_call"] = json!({
                        "bridge_node": per_call(0),
                        "calling_node": if cross { per_call(1) } else { per_call(0) },
                        "nats_server": per_call(2),
                        "loadgen": per_call(3),
                        "all": ((if cross { per_call(0) + per_call(1) } else { per_call(0) }
                            + per_call(2) + per_call(3)) * 10.0).round() / 10.0,
                    });
                    emit(&line);
                    figures[index][usize::from(cross)]
                        .push((report.calls_per_second(), report.percentiles_us[0]));
                }
            }
        }
        let mean = |values: &[(f64, u64)], pick: fn(&(f64, u64)) -> f64| {
            values.iter().map(pick).sum::<f64>() / values.len().max(1) as f64
        };
        let mut summary = serde_json::Map::new();
        for (&concurrency, [same, cross]) in self.concurrency.iter().zip(&figures) {
            let (same_rate, cross_rate) = (mean(same, |f| f.0), mean(cross, |f| f.0));
            let (same_p50, cross_p50) = (mean(same, |f| f.1 as f64), mean(cross, |f| f.1 as f64));
            summary.insert(
                format!("c{concurrency}"),
                json!({
                    "same_calls_per_s": same_rate.round(),
                    "cross_calls_per_s": cross_rate.round(),
                    "cross_over_same_calls_per_s": (cross_rate / same_rate * 1000.0).round() / 1000.0,
                    "same_p50_us": same_p50.round(),
                    "cross_p50_us": cross_p50.round(),
                    "cross_over_same_p50": (cross_p50 / same_p50 * 1000.0).round() / 1000.0,
                }),
            );
        }
        Ok(json!({
            "bench": "cluster_summary", "rounds": self.rounds,
            "seconds_per_run": self.duration.as_secs_f64(),
            "node_threads": self.node_threads, "nats_threads": self.nats_threads,
            "by_concurrency": summary,
        }))
    }
}

/// CPU seconds used so far by each process.
fn cpu_of(pids: &[u32]) -> anyhow::Result<Vec<f64>> {
    pids.iter().map(|&pid| bench::cpu_seconds(pid)).collect()
}

/// Waits until a node answers `/ready` (NATS reached, session bucket open).
async fn wait_ready(url: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    for _ in 0..1000 {
        let ready = http.get(format!("{url}/ready")).send().await;
        if ready.is_ok_and(|response| response.status().is_success()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the node at {url} never became ready (is nats-server 2.11 or newer?)")
}
