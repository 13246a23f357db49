//! An app written with one of the app packages (Python, TypeScript), run as
//! a process of its own: it prints one JSON object per line for each thing
//! it did (a session registered, a call served), which the tests read as
//! events. Each package's module says how its app is started ([`Launch`]).

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;

use crate::APP_TOKEN;

/// How an app written with a package is started.
pub trait Launch {
    /// The command that runs the app, before the proxy's arguments.
    fn command(&self) -> tokio::process::Command;
    /// The app, as panics name it ("the Python app").
    fn what(&self) -> &'static str;
}

/// The app's process and the events it printed.
pub struct PackageApp {
    /// The process, killed when dropped.
    pub child: tokio::process::Child,
    events: tokio::sync::mpsc::Receiver<Value>,
}

impl PackageApp {
    /// Starts the app against `proxy_url` with the test app token, on
    /// `bridge` ("grpc" or "websocket").
    pub fn start(app: &(impl Launch + ?Sized), proxy_url: &str, bridge: &str) -> Self {
        Self::start_with(app, proxy_url, &["--bridge", bridge])
    }

    /// [`PackageApp::start`] with these further arguments.
    pub fn start_with(app: &(impl Launch + ?Sized), proxy_url: &str, args: &[&str]) -> Self {
        let mut child = app
            .command()
            .args(["--proxy-url", proxy_url, "--app-token", APP_TOKEN])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|error| panic!("start {}: {error}", app.what()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, events) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let event = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("the app printed a line that is not JSON: {line}"));
                let _ = sender.send(event).await;
            }
        });
        Self { child, events }
    }

    /// The next event that has `key`.
    pub async fn next(&mut self, key: &str) -> Value {
        loop {
            let event = tokio::time::timeout(Duration::from_secs(60), self.events.recv())
                .await
                .unwrap_or_else(|_| panic!("the app printed no {key:?} event within 60 s"))
                .expect("the app exited");
            if event.get(key).is_some() {
                return event;
            }
        }
    }

    /// The id of the next session the app registers.
    pub async fn next_session(&mut self) -> String {
        let event = self.next("session").await;
        event["session"].as_str().expect("a session id").to_owned()
    }
}

/// Checks the test app's `which_task` (declared with task support, it
/// answers the id of the task it runs as, or "plain") on the session's own
/// URL at 2025-11-25 with the OpenClaw token: called as an MCP task, the
/// call is answered at once with its task, whose result `tasks/result`
/// waits for and which names that task; called plainly, it is "plain".
pub async fn which_task_runs_as_a_task_and_plainly(base_url: &str, session_id: &str) {
    let url = format!("{base_url}/v1/mcp/{session_id}");
    let post = |id: u64, method: &str, params: Value| {
        let (url, body) = (
            url.clone(),
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        async move {
            let reply = crate::mcp_post(&url, &body)
                .bearer_auth(crate::OPENCLAW_TOKEN)
                .header("mcp-protocol-version", "2025-11-25")
                .send()
                .await;
            assert_eq!(reply.status(), 200, "{body}: {}", reply.text());
            reply.json()
        }
    };
    let text = |reply: &Value| {
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a result with text: {reply}"))
            .to_owned()
    };
    let call = serde_json::json!({"name": "which_task", "arguments": {}});
    let mut as_task = call.clone();
    as_task["task"] = serde_json::json!({"ttl": 60_000});
    let created = post(1, "tools/call", as_task).await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a CreateTaskResult: {created}"))
        .to_owned();
    let fetched = post(2, "tasks/result", serde_json::json!({"taskId": task_id})).await;
    assert_eq!(text(&fetched), task_id, "the handler saw its task's id");
    let plain = post(3, "tools/call", call).await;
    assert_eq!(text(&plain), "plain");
}

/// `host` (an MCP client's handler) connected to the session's MCP
/// endpoint on the proxy at `base`, with the OpenClaw token.
pub async fn connect<H: rmcp::ClientHandler>(
    base: &str,
    session_id: &str,
    host: H,
) -> rmcp::service::RunningService<rmcp::RoleClient, H> {
    use rmcp::ServiceExt as _;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let url = format!("{base}/v1/mcp/{session_id}");
    let config =
        StreamableHttpClientTransportConfig::with_uri(url).auth_header(crate::OPENCLAW_TOKEN);
    let transport = StreamableHttpClientTransport::with_client(crate::http_client(), config);
    crate::no_hang(host.serve(transport))
        .await
        .expect("the host connects")
}

/// A `tools/call`; panics when the request itself fails.
pub async fn call_tool<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    name: &str,
    arguments: Value,
) -> rmcp::model::CallToolResult {
    crate::no_hang(client.call_tool(crate::call(name, arguments)))
        .await
        .unwrap_or_else(|error| panic!("tools/call {name}: {error}"))
}
