//! The server as a process of its own: the `openclaw-proxy` binary, for what
//! a server in the test's process cannot show (a cluster node to `kill -9`,
//! settings that must stop it before it listens, its log, the OTLP exporter
//! that is installed once per process). Started by
//! [`ServerBuilder::spawn`](crate::ServerBuilder::spawn) on `127.0.0.1:0`,
//! with only the environment the builder gives it.
//!
//! Cargo builds a package's binaries only for that package's own tests, and
//! this crate is not the server's package, so the first test that needs the
//! binary runs `cargo build -p openclaw-proxy-edge --bin openclaw-proxy` in
//! this workspace (release when these tests are built in release): a no-op
//! when the binary is up to date, and never a stale binary.
//! `OPENCLAW_PROXY_BIN` names a binary to use instead.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{OnceCell, mpsc};

use crate::rest::Rest;

/// A running `openclaw-proxy` binary, killed when dropped; its log (stderr)
/// is read line by line as it comes, so it never blocks on a full pipe.
pub struct ServerProcess {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every log line read so far, in order.
    seen: Vec<String>,
}

impl ServerProcess {
    /// Starts the binary with `LISTEN=127.0.0.1:0`, an `info` log without
    /// colour and `env`, and waits until it logs where it listens; `Err`
    /// with its log when it exits first.
    pub(crate) async fn spawn(env: &[(String, String)]) -> Result<Self, String> {
        let mut command = Command::new(proxy_binary().await);
        command
            .env_clear()
            .env("OPENCLAW_PROXY_LISTEN", "127.0.0.1:0")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|error| error.to_string())?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (sender, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut stderr = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = stderr.next_line().await {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let mut process = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            child,
            lines,
            seen: Vec::new(),
        };
        match process.next_match(listening_address).await {
            Ok(addr) => {
                process.addr = addr;
                Ok(process)
            }
            Err(ended) => {
                let _ = process.child.wait().await;
                Err(ended)
            }
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next log line for which `pick` says something; panics when the
    /// log says nothing for 30 s or ends.
    pub async fn find<T>(&mut self, pick: impl FnMut(&str) -> Option<T>) -> T {
        self.next_match(pick)
            .await
            .unwrap_or_else(|seen| panic!("the server never logged the line looked for:\n{seen}"))
    }

    /// The next log line for which `pick` says something; `Err` with the
    /// log so far when it says nothing for 30 s or ends.
    async fn next_match<T>(
        &mut self,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> Result<T, String> {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.lines.recv())
                .await
                .map_err(|_| format!("the server said nothing for 30 s:\n{}", self.log()))?
                .ok_or_else(|| self.log())?;
            let picked = pick(&line);
            self.seen.push(line);
            if let Some(found) = picked {
                return Ok(found);
            }
        }
    }

    fn log(&self) -> String {
        self.seen.join("\n")
    }

    /// `kill -9`.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM, then every line the server logged until it exited, which it
    /// must do successfully.
    pub async fn stop(mut self) -> Vec<String> {
        let pid = self.child.id().expect("the server runs");
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .expect("kill");
        assert!(status.success());
        let exit = self.child.wait().await.expect("wait");
        assert!(exit.success(), "exit status {exit:?}");
        while let Some(line) = self.lines.recv().await {
            self.seen.push(line);
        }
        self.seen
    }

    /// A gRPC channel to the server.
    pub async fn channel(&self) -> tonic::transport::Channel {
        crate::http_client::channel_to(self.url()).await
    }

    /// A client of this server that sends no token.
    pub fn rest(&self) -> Rest {
        Rest::new(self.url())
    }

    /// The status of `GET path` (0 when nothing answers).
    pub async fn status_of(&self, path: &str) -> u16 {
        match self.rest().get(path).try_send().await {
            Ok(reply) => reply.status().as_u16(),
            Err(_) => 0,
        }
    }

    /// Waits (bounded) until `/ready` answers `status`.
    pub async fn wait_ready(&self, status: u16) {
        for _ in 0..1_500 {
            if self.status_of("/ready").await == status {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "the server at {} never answered /ready with {status}",
            self.addr
        );
    }
}

/// The address in the line that says the server listens, in the text log
/// (`address=…`) or the JSON one (`"address": "…"`).
fn listening_address(line: &str) -> Option<SocketAddr> {
    if !line.contains("openclaw-proxy listening") {
        return None;
    }
    match serde_json::from_str::<Value>(line) {
        Ok(event) => event["address"].as_str()?.parse().ok(),
        Err(_) => line
            .split("address=")
            .nth(1)?
            .split_whitespace()
            .next()?
            .parse()
            .ok(),
    }
}

/// The path of the `openclaw-proxy` binary, built on first use (see the
/// module's documentation).
pub async fn proxy_binary() -> PathBuf {
    static BINARY: OnceCell<PathBuf> = OnceCell::const_new();
    BINARY
        .get_or_init(|| async {
            match std::env::var_os("OPENCLAW_PROXY_BIN") {
                Some(path) => PathBuf::from(path),
                None => build_proxy_binary().await,
            }
        })
        .await
        .clone()
}

/// Builds the binary with the cargo that runs these tests; returns the
/// executable cargo reports.
async fn build_proxy_binary() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace");
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--package", "openclaw-proxy-edge"])
        .args(["--bin", "openclaw-proxy"])
        .args(["--message-format", "json-render-diagnostics"])
        .stdin(Stdio::null());
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let output = command.output().await.expect("run cargo build");
    assert!(
        output.status.success(),
        "cargo build of openclaw-proxy failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter(|message| message["target"]["name"] == "openclaw-proxy")
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the openclaw-proxy executable")
}
