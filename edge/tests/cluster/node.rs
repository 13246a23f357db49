//! A real `openclaw-proxy` node: the binary, started as a child process on a
//! free loopback port in cluster mode, so a test can `kill -9` it.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use openclaw_proxy_tests::{APP_TOKEN, OPENCLAW_TOKEN};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running node, killed when dropped.
pub struct Node {
    pub addr: SocketAddr,
    child: Child,
}

/// Settings a test varies.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    pub nats_url: String,
    pub prefix: String,
    pub session_ttl_seconds: u64,
    pub tool_timeout_seconds: u64,
}

impl Node {
    /// Starts a node and waits until it listens.
    pub async fn start(settings: &NodeSettings) -> Self {
        Self::start_with(settings, &[]).await.expect("node starts")
    }

    /// Starts a node with extra environment; `Err` with its stderr when it
    /// exits before listening.
    pub async fn start_with(
        settings: &NodeSettings,
        extra_env: &[(&str, &str)],
    ) -> Result<Self, String> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_openclaw-proxy"));
        command
            .env_clear()
            .env("OPENCLAW_PROXY_LISTEN", "127.0.0.1:0")
            .env("OPENCLAW_PROXY_APP_TOKEN", APP_TOKEN)
            .env("OPENCLAW_PROXY_OPENCLAW_TOKEN", OPENCLAW_TOKEN)
            .env("OPENCLAW_PROXY_NATS_URL", &settings.nats_url)
            .env("OPENCLAW_PROXY_NATS_PREFIX", &settings.prefix)
            .env(
                "OPENCLAW_PROXY_SESSION_TTL_SECONDS",
                settings.session_ttl_seconds.to_string(),
            )
            .env(
                "OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS",
                settings.tool_timeout_seconds.to_string(),
            )
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (name, value) in extra_env {
            command.env(name, value);
        }
        let mut child = command.spawn().map_err(|error| error.to_string())?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let mut seen = String::new();
        let addr = loop {
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .map_err(|_| format!("the node said nothing for 30 s:\n{seen}"))?
                .map_err(|error| error.to_string())?;
            let Some(line) = line else {
                let _ = child.wait().await;
                return Err(seen);
            };
            seen.push_str(&line);
            seen.push('\n');
            if line.contains("openclaw-proxy listening")
                && let Some(addr) = line
                    .split("address=")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .and_then(|addr| addr.parse().ok())
            {
                break addr;
            }
        };
        // Keep draining stderr so the node never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self { addr, child })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `kill -9`.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// The status of `GET path`.
    pub async fn status_of(&self, path: &str) -> u16 {
        match reqwest::get(format!("{}{path}", self.url())).await {
            Ok(response) => response.status().as_u16(),
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
        panic!("node {} never answered /ready with {status}", self.addr);
    }
}
