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
    run_conformance_with(spec_version, &["--suite", suite], "").await
}

/// Runs the suite with `selection` (`--suite …` or `--scenario …`) against
/// the fixture; its baseline is `expected-failures-{spec_version}{baseline}.yml`.
async fn run_conformance_with(
    spec_version: &str,
    selection: &[&str],
    baseline: &str,
) -> (std::process::ExitStatus, String) {
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
        .args(["server", "--url", &url, "--spec-version", spec_version])
        .args(selection)
        .arg("--expected-failures")
        .arg(dir.join(format!("expected-failures-{spec_version}{baseline}.yml")))
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

/// The tasks extension's scenarios, which the suite runs only when named.
const TASK_SCENARIOS: [&str; 10] = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

#[tokio::test]
async fn conformance_task_scenarios_2026_07_28() {
    let mut failed = Vec::new();
    for scenario in TASK_SCENARIOS {
        let (status, output) =
            run_conformance_with("2026-07-28", &["--scenario", scenario, "--force"], "-tasks")
                .await;
        println!("{output}");
        if !status.success() {
            failed.push(format!("{scenario}:\n{output}"));
        }
    }
    assert!(
        failed.is_empty(),
        "task scenarios failed:\n{}",
        failed.join("\n")
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

/// Runs `sdk-resources-client.mjs` against a session; its one JSON line.
async fn sdk_resources(
    mcp_url: &str,
    token: &str,
    uri: &str,
    prompt: &str,
    arguments: &[&str],
) -> serde_json::Value {
    let node = node().await;
    let output = tokio::process::Command::new(&node)
        .arg(node_dir().join("sdk-resources-client.mjs"))
        .args([mcp_url, token, uri, prompt])
        .args(arguments)
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
    serde_json::from_str(stdout.trim()).expect("one JSON line")
}

#[tokio::test]
async fn typescript_sdk_lists_reads_and_gets_through_a_grpc_app() {
    let server = TestServer::start().await;
    let fixture = start_fixture(&server.http_url(), APP_TOKEN)
        .await
        .expect("fixture app");
    let url = format!("{}/v1/mcp/{}", server.http_url(), fixture.session_id);
    let line = sdk_resources(
        &url,
        OPENCLAW_TOKEN,
        "test://static-text",
        "test_prompt_with_arguments",
        &["arg1=one", "arg2=two"],
    )
    .await;
    assert!(
        line["resources"]
            .as_array()
            .is_some_and(|uris| uris.iter().any(|uri| uri == "test://static-text")),
        "{line}"
    );
    assert_eq!(
        line["read"]["text"],
        "This is the content of the static text resource."
    );
    let text = line["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("one") && text.contains("two"), "{line}");
}

#[tokio::test]
async fn typescript_sdk_lists_reads_and_gets_through_a_websocket_app() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["resources"] = serde_json::json!([{"uri": "notes://welcome", "name": "welcome"}]);
    body["prompts"] = serde_json::json!([{"name": "greet", "arguments": [{"name": "who"}]}]);
    let session = server.rest().register(&body).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let served = tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "mcp_request" {
                continue;
            }
            let id = frame["request_id"].clone();
            let result = match frame["method"].as_str() {
                Some("resources/read") => serde_json::json!({"contents": [
                    {"uri": frame["params"]["uri"], "mimeType": "text/plain", "text": "Hello, agent!"}]}),
                _ => serde_json::json!({"messages": [{"role": "user", "content": {"type": "text",
                    "text": format!("Greet {}", frame["params"]["arguments"]["who"].as_str().unwrap_or("?"))}}]}),
            };
            app.send_json(
                serde_json::json!({"type": "mcp_result", "request_id": id, "result": result}),
            )
            .await;
        }
    });
    let line = sdk_resources(
        &session.mcp_url,
        OPENCLAW_TOKEN,
        "notes://welcome",
        "greet",
        &["who=Ada"],
    )
    .await;
    assert_eq!(line["resources"], serde_json::json!(["notes://welcome"]));
    assert_eq!(line["prompts"], serde_json::json!(["greet"]));
    assert_eq!(line["read"]["text"], "Hello, agent!");
    assert_eq!(line["messages"][0]["content"]["text"], "Greet Ada");
    served.abort();
}

#[tokio::test]
async fn python_sdk_lists_reads_and_gets_through_both_bridges() {
    let python = openclaw_proxy_tests::processes::mcp_python(std::path::Path::new(env!(
        "CARGO_TARGET_TMPDIR"
    )))
    .await;
    let script = node_dir()
        .parent()
        .expect("tests/")
        .join("python/sdk_resources_client.py");
    let run = |url: String,
               uri: &'static str,
               prompt: &'static str,
               arguments: &'static [&'static str]| {
        let (python, script) = (python.clone(), script.clone());
        async move {
            let output = tokio::process::Command::new(&python)
                .arg(&script)
                .args([url.as_str(), OPENCLAW_TOKEN, uri, prompt])
                .args(arguments)
                .output()
                .await
                .expect("run the Python SDK client");
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                output.status.success(),
                "client failed:\n{stdout}\n{stderr}"
            );
            serde_json::from_str::<serde_json::Value>(stdout.trim()).expect("one JSON line")
        }
    };

    // The gRPC bridge: the conformance fixture.
    let server = TestServer::start().await;
    let fixture = start_fixture(&server.http_url(), APP_TOKEN)
        .await
        .expect("fixture app");
    let url = format!("{}/v1/mcp/{}", server.http_url(), fixture.session_id);
    let line = run(
        url,
        "test://static-text",
        "test_prompt_with_arguments",
        &["arg1=one", "arg2=two"],
    )
    .await;
    assert_eq!(
        line["read"]["text"],
        "This is the content of the static text resource."
    );
    assert!(
        line["prompts"]
            .as_array()
            .is_some_and(|names| names.iter().any(|name| name == "test_simple_prompt")),
        "{line}"
    );

    // The WebSocket bridge.
    let mut body = legacy_session_body();
    body["resources"] = serde_json::json!([{"uri": "notes://welcome", "name": "welcome"}]);
    body["prompts"] = serde_json::json!([{"name": "greet", "arguments": [{"name": "who"}]}]);
    let session = server.rest().register(&body).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let served = tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "mcp_request" {
                continue;
            }
            let result = match frame["method"].as_str() {
                Some("resources/read") => serde_json::json!({"contents": [
                    {"uri": frame["params"]["uri"], "text": "Hello, agent!"}]}),
                _ => serde_json::json!({"messages": [{"role": "user", "content": {"type": "text",
                    "text": format!("Greet {}", frame["params"]["arguments"]["who"].as_str().unwrap_or("?"))}}]}),
            };
            app.send_json(serde_json::json!({"type": "mcp_result",
                "request_id": frame["request_id"], "result": result}))
                .await;
        }
    });
    let line = run(
        session.mcp_url.clone(),
        "notes://welcome",
        "greet",
        &["who=Ada"],
    )
    .await;
    assert_eq!(line["resources"], serde_json::json!(["notes://welcome"]));
    assert_eq!(line["read"]["text"], "Hello, agent!");
    assert_eq!(line["messages"][0]["content"]["text"], "Greet Ada");
    served.abort();
}
