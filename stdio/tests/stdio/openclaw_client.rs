//! OpenClaw's own MCP client against the edge: the pinned `openclaw` package's
//! bundle-MCP runtime (the code that turns a configured `mcp.servers` entry
//! into the tools an OpenClaw agent sees) connects to a real session served
//! by the conformance fixture app on the gRPC bridge. No Gateway and no model
//! are needed: `tests/node/openclaw-bundle-mcp.mjs` imports the runtime and
//! runs the agent tools it makes.
//!
//! What it pins: OpenClaw gives its agents, beside each MCP tool, the
//! utility tools `<server>__resources_list`, `__resources_read`,
//! `__prompts_list` and `__prompts_get` for a server that offers resources
//! and prompts, and those reach the app through the proxy.

use openclaw_proxy_tests::conformance::start_fixture;
use openclaw_proxy_tests::prometheus::Scrape;
use openclaw_proxy_tests::{OPENCLAW_TOKEN, TestServer, no_hang};
use serde_json::Value;

use crate::real_gateway::ensure_gateway_installed;

/// Runs OpenClaw's bundle-MCP runtime against the fixture's session on
/// `server` (`extra`: a tool to call and its arguments as JSON); its
/// report.
async fn bundle_mcp_report(server: &TestServer, name: &str, extra: &[&str]) -> Value {
    let (node, _) = tokio::task::spawn_blocking(ensure_gateway_installed)
        .await
        .expect("join")
        .expect("the pinned OpenClaw installed");
    let fixture = start_fixture(&server.http_url(), openclaw_proxy_tests::APP_TOKEN)
        .await
        .expect("fixture app");
    let url = format!("{}/v1/mcp/{}", server.http_url(), fixture.session_id);
    // An isolated home: OpenClaw reads and writes its state there.
    let dir = std::env::temp_dir().join(format!(
        "openclaw-proxy-stdio-openclaw-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["home", "state", "workspace", "tmp"] {
        std::fs::create_dir_all(dir.join(sub)).expect("mkdir");
    }
    let node_bin = node.parent().expect("bin dir").display().to_string();
    let script = crate::real_gateway::node_dir().join("openclaw-bundle-mcp.mjs");
    let output = no_hang(
        tokio::process::Command::new(&node)
            .arg(&script)
            .args([&url, OPENCLAW_TOKEN])
            .arg(dir.join("workspace"))
            .args(["test://static-text", "test_simple_prompt"])
            .args(extra)
            .env_clear()
            .env("PATH", format!("{node_bin}:/usr/bin:/bin"))
            .env("HOME", dir.join("home"))
            .env("OPENCLAW_HOME", dir.join("home"))
            .env("OPENCLAW_STATE_DIR", dir.join("state"))
            .env("TMPDIR", dir.join("tmp"))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("run OpenClaw's bundle-MCP runtime");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let report: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no JSON report in:\n{stdout}\n{stderr}"));
    let _ = std::fs::remove_dir_all(&dir);
    drop(fixture);
    report
}

#[tokio::test]
async fn openclaw_agents_get_the_sessions_resources_and_prompts_as_tools() {
    let server = TestServer::start().await;
    let report = bundle_mcp_report(&server, "client", &[]).await;
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .expect("tool names")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for utility in [
        "notes__resources_list",
        "notes__resources_read",
        "notes__prompts_list",
        "notes__prompts_get",
        "notes__test_simple_text",
    ] {
        assert!(tools.contains(&utility), "{utility} missing from {tools:?}");
    }
    let text = |key: &str| report[key].to_string();
    assert!(text("resources").contains("test://static-text"), "{report}");
    assert!(
        text("read").contains("This is the content of the static text resource."),
        "{report}"
    );
    assert!(text("prompts").contains("test_simple_prompt"), "{report}");
    assert!(
        text("prompt").contains("This is a simple prompt for testing."),
        "{report}"
    );
}

/// The pinned OpenClaw declares no elicitation capability and sets no
/// handler for it: when a tool asks the user, its MCP client (the
/// TypeScript SDK) answers the proxy's `elicitation/create` with "method
/// not found", which reaches the app as the answer to its `ctx.elicit`.
/// The agent then sees whatever the app makes of that: here, the fixture's
/// error result naming it. Nothing hangs and nothing stays pending.
#[tokio::test]
async fn an_openclaw_agent_calling_a_tool_that_asks_the_user_gets_the_apps_answer_to_method_not_found()
 {
    let server = TestServer::start().await;
    let report = bundle_mcp_report(
        &server,
        "elicit",
        &["test_elicitation", r#"{"message":"Which calendar?"}"#],
    )
    .await;
    let called = &report["called"];
    let text = called["content"].to_string();
    assert!(
        text.contains("the MCP client could not answer (-32601)"),
        "{report}"
    );
    let metrics = Scrape::parse(&server.rest().metrics().await.text()).expect("Prometheus text");
    let asked = |outcome: &str| {
        metrics.value(
            "openclaw_proxy_client_requests_total",
            &[("method", "elicitation/create"), ("outcome", outcome)],
        )
    };
    assert_eq!(asked("client_error"), 1.0, "{report}");
    assert_eq!(
        metrics.value("openclaw_proxy_client_requests_pending", &[]),
        0.0
    );
}
