//! Helpers: the real `openclaw-proxy-stdio` binary as a child process, spoken
//! to line by line (raw JSON-RPC) or through rmcp's child-process client.

use std::process::{ExitStatus, Stdio};

use openclaw_proxy_tests::no_hang;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_openclaw-proxy-stdio");

/// A command for the binary with an empty environment plus `env`: it must run
/// on just the variables OpenClaw passes to stdio servers.
pub fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BINARY);
    command
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .kill_on_drop(true);
    command
}

/// The binary with a stdout nobody reads (closed at once) and stderr
/// captured: what a client that stopped reading leaves behind.
pub struct DeafChild {
    pub child: Child,
    pub stdin: ChildStdin,
}

impl DeafChild {
    /// Starts the binary and closes the reading end of its stdout.
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn openclaw-proxy-stdio");
        drop(child.stdout.take());
        let stdin = child.stdin.take().expect("stdin");
        Self { child, stdin }
    }

    /// Writes one message (ignoring a closed pipe: the process may be gone).
    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        let _ = self.stdin.write_all(line.as_bytes()).await;
        let _ = self.stdin.flush().await;
    }

    /// Waits for the process to end on its own, stdin still open; returns
    /// its status and stderr.
    pub async fn exit(mut self) -> (ExitStatus, String) {
        let status = no_hang(self.child.wait()).await.expect("wait");
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            use tokio::io::AsyncReadExt;
            let _ = no_hang(pipe.read_to_string(&mut stderr)).await;
        }
        drop(self.stdin);
        (status, stderr)
    }
}

/// The binary driven with raw JSON-RPC lines.
pub struct RawChild {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl RawChild {
    /// Starts the binary with piped stdio.
    pub fn spawn(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn openclaw-proxy-stdio");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Writes one message.
    pub async fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Writes one raw line.
    pub async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Writes one raw line given as bytes (they need not be UTF-8).
    pub async fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut bytes = line.to_vec();
        bytes.push(b'\n');
        stdin.write_all(&bytes).await.expect("write stdin");
        stdin.flush().await.expect("flush stdin");
    }

    /// Reads the next stdout line, which must be one JSON-RPC message.
    pub async fn recv(&mut self) -> Value {
        let line = no_hang(self.stdout.next_line())
            .await
            .expect("read stdout")
            .expect("stdout open");
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("stdout carried a non-JSON line {line:?}: {error}"));
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        message
    }

    /// Reads the next stdout line as it is (for numbers `Value` cannot hold).
    pub async fn recv_line(&mut self) -> String {
        no_hang(self.stdout.next_line())
            .await
            .expect("read stdout")
            .expect("stdout open")
    }

    /// Closes stdin and waits for the process; stdout must hold nothing more
    /// than JSON-RPC messages, which are returned.
    pub async fn finish(mut self) -> (ExitStatus, Vec<Value>) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Some(line) = no_hang(self.stdout.next_line()).await.expect("read") {
            rest.push(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("non-JSON line {line:?}: {e}")),
            );
        }
        let status = no_hang(self.child.wait()).await.expect("wait");
        (status, rest)
    }
}

/// The binary's stderr when gateway mode starts against the Gateway with
/// `env` (stdin closed, so it stops right after discovery).
pub async fn startup_stderr(env: &[(&str, &str)]) -> String {
    let output = no_hang(command(&["gateway"], env).stdin(Stdio::null()).output())
        .await
        .expect("run");
    assert!(output.stdout.is_empty(), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}
