//! `loadgen balancer`: what session affinity in the load balancer is worth.
//! It starts a `nats-server`, three nodes and two HAProxies on loopback:
//! one running `deploy/haproxy.cfg` as it is (hashing on the session id),
//! one running the same file with its `balance hash` lines replaced by
//! `balance roundrobin` ([`without_affinity`]), nothing else changed. Runs
//! through each alternate, round after round, every one on fresh sessions
//! whose bridges attach through the same balancer as their calls. The share
//! of calls that crossed nodes is read from the nodes' own counters
//! (`openclaw_proxy_calls_forwarded_total` over `tool_calls_total`, warm-up
//! calls included), so it is what the nodes did, not what was expected.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use openclaw_proxy_core::metrics::CallOutcome;
use serde_json::{Value, json};

use crate::balancer::{Balancer, Haproxy, repo_config, without_affinity};
use crate::bench::{self, BridgeKind, GrpcApp, LoadConfig, Method, Protocol, Target};
use crate::processes::{NatsServer, Node, wait_ready};
use crate::prometheus::Scrape;
use crate::rest::Rest;

/// Affinity against round robin through HAProxy: see `loadgen balancer
/// --help`.
pub struct BalancerRound {
    /// The openclaw-proxy binary.
    pub binary: String,
    /// The nats-server binary (2.11 or newer).
    pub nats_server: String,
    /// HAProxy.
    pub haproxy: Haproxy,
    /// Rounds; each runs both balancers.
    pub rounds: u32,
    /// Length of one run.
    pub duration: Duration,
    /// Concurrent MCP clients.
    pub concurrency: usize,
    /// Sessions (apps) per run, the clients spread over them.
    pub sessions: usize,
    /// The bridge the apps use.
    pub bridge: BridgeKind,
    /// The app token the nodes take.
    pub app_token: String,
    /// The OpenClaw token the nodes take.
    pub openclaw_token: String,
}

/// The two balancers, in the order each round runs them.
const MODES: [&str; 2] = ["affinity", "round_robin"];

impl BalancerRound {
    /// Starts everything, hands each run's JSON line to `emit` as it ends,
    /// and returns the summary line (means per balancer). The processes are
    /// gone when it returns.
    pub async fn run(&self, emit: &mut dyn FnMut(&Value)) -> anyhow::Result<Value> {
        let mut nats = NatsServer::start(Path::new(&self.nats_server), Vec::new(), 0).await?;
        let result = self.run_on(&nats, emit).await;
        nats.stop().await;
        result
    }

    async fn run_on(
        &self,
        nats: &NatsServer,
        emit: &mut dyn FnMut(&Value),
    ) -> anyhow::Result<Value> {
        let variables = [
            ("OPENCLAW_PROXY_NATS_URL", nats.url()),
            ("OPENCLAW_PROXY_NATS_PREFIX", "loadgen".to_owned()),
        ];
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let node = Node::spawn(
                &self.binary,
                &self.app_token,
                &self.openclaw_token,
                &variables,
            )
            .await?;
            wait_ready(&node.url).await?;
            nodes.push(node);
        }
        let addresses: Vec<_> = nodes
            .iter()
            .map(|node| node.url.trim_start_matches("http://").parse())
            .collect::<Result<_, _>>()
            .context("a node's address")?;
        let config = repo_config();
        let text = std::fs::read_to_string(&config)
            .with_context(|| format!("cannot read {}", config.display()))?;
        let balancers = [
            Balancer::start(&self.haproxy, &config, &addresses).await?,
            Balancer::start_with_text(&self.haproxy, &without_affinity(&text)?, &addresses).await?,
        ];
        let mut pids: Vec<u32> = nodes.iter().map(|node| node.pid).collect();
        pids.push(nats.pid().context("no process id for nats-server")?);
        let mut figures: [Vec<[f64; 4]>; 2] = Default::default();
        for round in 1..=self.rounds {
            for (index, balancer) in balancers.iter().enumerate() {
                let mut all = pids.clone();
                all.push(balancer.pid().context("no process id for haproxy")?);
                let (mut line, numbers) = self.one_run(balancer, &nodes, &all).await?;
                line["balancer"] = json!(MODES[index]);
                line["round"] = json!(round);
                emit(&line);
                figures[index].push(numbers);
            }
        }
        Ok(self.summary(&figures))
    }

    /// One run through `balancer`: its JSON line, and (calls/s, p50, p99,
    /// forwarded share).
    async fn one_run(
        &self,
        balancer: &Balancer,
        nodes: &[Node],
        pids: &[u32],
    ) -> anyhow::Result<(Value, [f64; 4])> {
        let config = LoadConfig {
            target: Target {
                base_url: balancer.url(),
                app_token: self.app_token.clone(),
                openclaw_token: self.openclaw_token.clone(),
                mcp_base_url: None,
            },
            bridge: self.bridge,
            grpc_app: GrpcApp::Lean,
            concurrency: self.concurrency.max(1),
            sessions: self.sessions.max(1),
            duration: self.duration,
            max_calls: None,
            method: Method::ToolsCall,
            protocol: Protocol::default(),
            progress: false,
            progress_reports: 0,
            vendor_meta: false,
            oauth: None,
            elicit: false,
        };
        let before = self.counted(nodes).await?;
        let cpu_before = cpu_of(pids)?;
        let report = bench::run_load(&config).await?;
        let cpu_after = cpu_of(pids)?;
        let after = self.counted(nodes).await?;
        let forwarded = after[0] - before[0];
        let calls = after[1] - before[1];
        let share = forwarded / calls.max(1.0);
        let cpu: f64 = cpu_after.iter().zip(&cpu_before).map(|(a, b)| a - b).sum();
        let mut line = bench::report_json(&config, &report);
        line["bench"] = json!("balancer");
        line["forwarded_calls"] = json!(forwarded);
        line["calls_counted_by_nodes"] = json!(calls);
        line["forwarded_share"] = json!((share * 1000.0).round() / 1000.0);
        line["cpu_us_per_call"] =
            json!((cpu * 1e6 / report.calls.max(1) as f64 * 10.0).round() / 10.0);
        let [p50, _, p99, _] = report.percentiles_us;
        Ok((
            line,
            [report.calls_per_second(), p50 as f64, p99 as f64, share],
        ))
    }

    /// (calls forwarded, tool calls) summed over the nodes, each read from
    /// the node itself.
    async fn counted(&self, nodes: &[Node]) -> anyhow::Result<[f64; 2]> {
        let mut sums = [0.0; 2];
        for node in nodes {
            let reply = Rest::new(&node.url)
                .token(&self.app_token)
                .get("/metrics")
                .try_send()
                .await?;
            let scrape = Scrape::parse(&reply.text())?;
            sums[0] += scrape
                .get("openclaw_proxy_calls_forwarded_total", &[])
                .context("no openclaw_proxy_calls_forwarded_total (a node before it?)")?;
            for outcome in CallOutcome::ALL {
                sums[1] += scrape
                    .get(
                        "openclaw_proxy_tool_calls_total",
                        &[("outcome", outcome.as_str())],
                    )
                    .unwrap_or(0.0);
            }
        }
        Ok(sums)
    }

    fn summary(&self, figures: &[Vec<[f64; 4]>; 2]) -> Value {
        let mean = |values: &[[f64; 4]], at: usize| {
            values.iter().map(|value| value[at]).sum::<f64>() / values.len().max(1) as f64
        };
        let mut by_balancer = serde_json::Map::new();
        for (mode, values) in MODES.iter().zip(figures) {
            by_balancer.insert(
                (*mode).to_owned(),
                json!({
                    "calls_per_s": mean(values, 0).round(),
                    "p50_us": mean(values, 1).round(),
                    "p99_us": mean(values, 2).round(),
                    "forwarded_share": (mean(values, 3) * 1000.0).round() / 1000.0,
                }),
            );
        }
        let ratio = mean(&figures[0], 0) / mean(&figures[1], 0).max(f64::EPSILON);
        json!({
            "bench": "balancer_summary", "rounds": self.rounds,
            "seconds_per_run": self.duration.as_secs_f64(),
            "bridge": self.bridge.name(), "concurrency": self.concurrency,
            "sessions": self.sessions, "by_balancer": by_balancer,
            "affinity_over_round_robin_calls_per_s": (ratio * 1000.0).round() / 1000.0,
        })
    }
}

/// CPU seconds used so far by each process.
fn cpu_of(pids: &[u32]) -> anyhow::Result<Vec<f64>> {
    pids.iter().map(|&pid| bench::cpu_seconds(pid)).collect()
}
