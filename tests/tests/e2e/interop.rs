//! Clients and test suites we did not write: the official MCP conformance
//! suite and the TypeScript SDK that OpenClaw uses, run against the edge with
//! the conformance fixture app on the gRPC bridge. The Node.js tools are
//! pinned in `tests/node/package.json` and installed on first use.

use std::path::PathBuf;

use openclaw_proxy_tests::conformance::{ensure_node_tools, node_dir, start_fixture};
use openclaw_proxy_tests::*;

async fn node() -> PathBuf {
    tokio::task::spawn_blocking(ensure_node_tools)
        .await
        .expect("join")
        .expect("Node.js tools installed")
}

/// Runs the suite's server scenarios for one spec version; returns its exit
/// status and output.
async fn run_conformance(spec_version: &str, suite: &str) -> (std::process::ExitStatus, String) {
    let node = node().await;
    // The suite sends no Authorization header: the MCP token is off here
    // (authentication has its own tests).
    let server = TestServer::builder().tokens("", "").start().await;
    let fixture = start_fixture(&server.http_url(), "")
        .await
        .expect("fixture app");
    let url = format!("{}/v1/mcp/{}", server.http_url(), fixture.session_id);
    let dir = node_dir();
    let results = std::env::temp_dir().join(format!(
        "openclaw-conformance-{spec_version}-{}",
        std::process::id()
    ));
    let output = tokio::process::Command::new(&node)
        .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args([
            "server",
            "--url",
            &url,
            "--spec-version",
            spec_version,
            "--suite",
            suite,
        ])
        .arg("--expected-failures")
        .arg(dir.join(format!("expected-failures-{spec_version}.yml")))
        .arg("--output-dir")
        .arg(&results)
        .env("NO_COLOR", "1")
        .output()
        .await
        .expect("run the conformance suite");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status, text)
}

#[tokio::test]
async fn conformance_suite_2025_11_25() {
    let (status, output) = run_conformance("2025-11-25", "active").await;
    println!("{output}");
    assert!(
        status.success(),
        "conformance suite failed for 2025-11-25:\n{output}"
    );
}

#[tokio::test]
async fn conformance_suite_2026_07_28() {
    let (status, output) = run_conformance("2026-07-28", "all").await;
    println!("{output}");
    assert!(
        status.success(),
        "conformance suite failed for 2026-07-28:\n{output}"
    );
}

#[tokio::test]
async fn typescript_sdk_client_configured_as_openclaw_does() {
    let node = node().await;
    let server = TestServer::start().await;
    let fixture = start_fixture(&server.http_url(), APP_TOKEN)
        .await
        .expect("fixture app");
    let output = tokio::process::Command::new(&node)
        .arg(node_dir().join("openclaw-client.mjs"))
        .arg(format!("{}/v1/mcp", server.http_url()))
        .arg(OPENCLAW_TOKEN)
        .arg(&fixture.session_id)
        .current_dir(node_dir())
        .output()
        .await
        .expect("run the TypeScript SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client failed:\n{stdout}\n{stderr}"
    );
    let line: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(line["ok"], true);
    assert_eq!(line["progress"], serde_json::json!([0, 50, 100]));
}
