//! The TypeScript app package (`proto/typescript`), as an app developer uses
//! it: its `npm pack` tarball installed into a clean project, `tsc --noEmit`
//! (strict) and its own unit tests run there, and an app written with it
//! (`tests/typescript/package_app.ts`) run against the real server and driven
//! by rmcp, the official Rust MCP SDK, as an agent host: a call, progress, a
//! cancel, resources and a template, a prompt, an elicitation answered, the
//! client's model and roots asked, a log record, the verified caller, a tool
//! added while serving, the confirmation flag and the client requirement, a
//! new session after the proxy restarts, and calls past the app's limit.

// MCP deprecates logging from 2026-07-28 (SEP-2577); this host is at
// 2025-11-25 and asks for log records, which the package still sends.
#![allow(deprecated, reason = "rmcp marks MCP logging deprecated (SEP-2577)")]

use std::path::Path;
use std::time::Duration;

use openclaw_proxy_tests::typescript_package::{
    Host, Installed, PackageApp, call_tool, connect, typescript_app_package,
};
use openclaw_proxy_tests::*;
use rmcp::model::{
    CallToolRequest, ClientRequest, GetPromptRequestParams, LoggingLevel,
    ReadResourceRequestParams, ResourceContents, SetLevelRequestParams,
};
use rmcp::service::PeerRequestOptions;
use serde_json::{Value, json};

use crate::app_sdk::{Relay, pinging_server};

async fn installed() -> Installed {
    typescript_app_package(Path::new(env!("CARGO_TARGET_TMPDIR"))).await
}

/// Runs the project's Node.js with `args` in the clean project; panics with
/// its output unless it succeeds.
async fn check(installed: &Installed, args: &[&str]) {
    let output = tokio::process::Command::new(&installed.node)
        .args(args)
        .current_dir(&installed.project)
        .output()
        .await
        .expect("run node");
    assert!(
        output.status.success(),
        "{args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test]
async fn the_package_passes_tsc_strict_and_its_unit_tests_installed_from_its_tarball() {
    let installed = installed().await;
    // The unit tests, the test app, the example and the README's opening app
    // import the installed package by name:
    // its types, its generated code and its dist/ as npm delivers them.
    check(
        &installed,
        &["node_modules/typescript/bin/tsc", "--noEmit", "-p", "."],
    )
    .await;
    check(
        &installed,
        &["--test", "--test-timeout=60000", "test/*.test.ts"],
    )
    .await;
}

#[tokio::test]
async fn the_package_version_is_the_proxy_version_and_its_tarball_carries_the_generated_contract() {
    let installed = installed().await;
    let package = installed.project.join("node_modules/openclaw-proxy-app");
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(package.join("package.json")).expect("the installed package.json"),
    )
    .expect("package.json is JSON");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(manifest["engines"]["node"], ">=22");
    for shipped in [
        "dist/index.js",
        "dist/index.d.ts",
        "dist/generated/descriptor.js",
        "dist/generated/openclaw/proxy/v1/ProxyMessage.d.ts",
        "README.md",
    ] {
        assert!(
            package.join(shipped).is_file(),
            "the tarball lacks {shipped}"
        );
    }
    // Nothing compiles a .proto at start: none is shipped.
    let mut stack = vec![package.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read the package").flatten() {
            let path = entry.path();
            assert!(
                path.extension().is_none_or(|ext| ext != "proto"),
                "{path:?} is shipped"
            );
            if path.is_dir() && entry.file_name() != "node_modules" {
                stack.push(path);
            }
        }
    }
    let output = tokio::process::Command::new(&installed.node)
        .args([
            "--input-type=module",
            "-e",
            "import { version } from 'openclaw-proxy-app'; console.log(version)",
        ])
        .current_dir(&installed.project)
        .output()
        .await
        .expect("run node");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        env!("CARGO_PKG_VERSION"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The release step up to the publish itself: `npm publish --dry-run` builds
/// the package from its sources again and accepts what it would upload.
#[tokio::test]
async fn the_package_release_step_runs_up_to_the_publish() {
    let installed = installed().await;
    let status = tokio::task::spawn_blocking(move || {
        openclaw_proxy_tests::typescript_package::npm(&installed.node, &installed.staged)
            .args(["publish", "--dry-run"])
            .status()
    })
    .await
    .expect("join")
    .expect("run npm publish --dry-run");
    assert!(status.success(), "npm publish --dry-run: {status}");
}

async fn bridged(server: &TestServer, session_id: &str) {
    server
        .wait_for_session(session_id, "the TypeScript app's bridge", |session| {
            session.bridge_connected
        })
        .await;
}

#[tokio::test]
async fn an_app_written_with_the_typescript_package_serves_an_mcp_client_and_survives_a_restart() {
    serves_and_survives_a_restart("grpc").await;
}

#[tokio::test]
async fn the_same_typescript_app_on_the_websocket_bridge_does_the_same() {
    serves_and_survives_a_restart("websocket").await;
}

/// The app on `bridge` ("grpc", or "websocket": REST registration and the
/// JSON bridge) serves everything it declares to an MCP host, and after the
/// proxy restarts it registers anew and serves again.
async fn serves_and_survives_a_restart(bridge: &str) {
    let installed = installed().await;
    let first = pinging_server().await;
    let relay = Relay::start(first.addr).await;
    let mut app = PackageApp::start(&installed, &relay.url(), bridge);
    let old = app.next_session().await;
    bridged(&first, &old).await;
    let host = Host::default();
    let client = connect(&first.http_url(), &old, host.clone()).await;

    // A call: an object result is structured content.
    let echoed = call_tool(&client, "echo_text", json!({"text": "hi"})).await;
    assert_eq!(
        echoed.structured_content,
        Some(json!({"echoed_text": "hi"}))
    );
    // Arguments that do not fit the zod schema, a handler that throws and
    // one that throws a ToolError are error results that say why.
    let refused = call_tool(&client, "echo_text", json!({"text": 3})).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(
        texts(&refused)[0].starts_with("the arguments do not fit the schema: text: "),
        "{refused:?}"
    );
    let failed = call_tool(&client, "fail", json!({"reason": "boom"})).await;
    assert_eq!(failed.is_error, Some(true), "{failed:?}");
    assert_eq!(texts(&failed), ["RangeError: boom"]);
    let told = call_tool(&client, "fail", json!({"reason": "tool"})).await;
    assert_eq!(texts(&told), ["the tool refused"]);

    // Progress: three reports, in order, before the result.
    let done = call_tool(&client, "steps", json!({"count": 3})).await;
    assert_eq!(texts(&done), ["done"]);
    eventually("three progress reports", Duration::from_secs(10), || {
        std::future::ready(host.progress.lock().map(|p| p.len() >= 3).unwrap_or(false))
    })
    .await;
    let progress = host.progress.lock().map(|p| p.clone()).unwrap_or_default();
    let steps: Vec<(f64, Option<f64>, Option<String>)> = progress
        .iter()
        .map(|p| (p.progress, p.total, p.message.clone()))
        .collect();
    assert_eq!(
        steps,
        [1.0, 2.0, 3.0].map(|n| (n, Some(3.0), Some(format!("step {n}"))))
    );

    // Cancel: the client gives up on a call; its AbortSignal fires.
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(call("wait_for_cancel", json!({}))));
    let handle =
        no_hang(client.send_cancellable_request(request, PeerRequestOptions::no_options()))
            .await
            .expect("tools/call sent");
    first
        .wait_for_session(&old, "the call reaching the app", |session| {
            session.calls_in_flight == 1
        })
        .await;
    no_hang(handle.cancel(Some("the user moved on".into())))
        .await
        .expect("notifications/cancelled");
    let cancelled = app.next("cancelled").await;
    assert_eq!(cancelled["cancelled"], "wait_for_cancel", "{cancelled}");

    // Resources: the fixed one, the template, and an unknown URI.
    let index = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///index")))
        .await
        .expect("resources/read");
    assert!(
        matches!(&index.contents[..], [ResourceContents::TextResourceContents { text, .. }] if text == "welcome, plans"),
        "{index:?}"
    );
    let plans = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///plans")))
        .await
        .expect("resources/read of the template");
    assert!(
        matches!(&plans.contents[..], [ResourceContents::TextResourceContents { text, mime_type, .. }]
            if text == "# Plans" && mime_type.as_deref() == Some("text/markdown")),
        "{plans:?}"
    );
    let missing =
        no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///nope"))).await;
    let Err(rmcp::ServiceError::McpError(error)) = missing else {
        panic!("an unknown note is an error: {missing:?}");
    };
    assert_eq!(error.code.0, -32002, "{error:?}");

    // A prompt with one argument given and one left to its default.
    let mut arguments = serde_json::Map::new();
    arguments.insert("note".into(), json!("plans"));
    let prompt = no_hang(
        client.get_prompt(GetPromptRequestParams::new("summarise").with_arguments(arguments)),
    )
    .await
    .expect("prompts/get");
    assert_eq!(
        serde_json::to_value(&prompt.messages).expect("messages"),
        json!([{"role": "user", "content": {"type": "text", "text": "Summarise the note plans, brief."}}])
    );

    // An elicitation, answered by the host's user, typed by its zod form.
    let color = call_tool(&client, "ask_color", json!({})).await;
    assert_eq!(texts(&color), ["accept: teal"]);

    // The client's model and its roots, asked during a call.
    let sampled = call_tool(&client, "ask_model", json!({})).await;
    assert_eq!(texts(&sampled), ["host-model: a summary"]);
    let roots = call_tool(&client, "list_roots", json!({})).await;
    assert_eq!(texts(&roots), ["notes=file:///notes"]);

    // A log record, at the level the client asked for.
    no_hang(client.set_level(SetLevelRequestParams::new(LoggingLevel::Info)))
        .await
        .expect("logging/setLevel");
    let logged = call_tool(&client, "log_line", json!({"text": "hello"})).await;
    assert_eq!(texts(&logged), ["logged"]);
    eventually("a log record", Duration::from_secs(10), || {
        std::future::ready(host.logs.lock().map(|l| !l.is_empty()).unwrap_or(false))
    })
    .await;
    let record = host.logs.lock().map(|l| l[0].clone()).expect("a record");
    assert_eq!(record.level, LoggingLevel::Warning, "{record:?}");
    assert_eq!(record.logger.as_deref(), Some("package-app"));
    assert_eq!(record.data, json!({"said": "hello"}));

    // The verified caller: the OpenClaw token.
    let whoami = call_tool(&client, "whoami", json!({})).await;
    assert_eq!(
        whoami.structured_content,
        Some(json!({"caller": "global_token", "revision": "2025-11-25"}))
    );

    // The confirmation flag and the client requirement reached the
    // declarations.
    let shown = first.sessions().await.get(&old).await.expect("GetSession");
    let wipe = shown
        .tools
        .iter()
        .find(|t| t.name == "wipe")
        .expect("wipe declared");
    assert_eq!(
        wipe.confirm.as_ref().map(|c| c.message.as_str()),
        Some("Really wipe everything?")
    );
    let ask = shown
        .tools
        .iter()
        .find(|t| t.name == "ask_color")
        .expect("ask_color declared");
    assert_eq!(
        ask.requires.as_ref().map(|r| r.client_capabilities.clone()),
        Some(vec!["elicitation".to_owned()])
    );

    // A tool added while serving is listed and called.
    let added = call_tool(&client, "add_tool", json!({"name": "late_tool"})).await;
    assert_eq!(texts(&added), ["added late_tool"]);
    let listed = no_hang(client.list_all_tools()).await.expect("tools/list");
    assert!(listed.iter().any(|t| t.name == "late_tool"), "{listed:?}");
    let late = call_tool(&client, "late_tool", json!({})).await;
    assert_eq!(texts(&late), ["late_tool answers"]);
    let _ = client.cancel().await;

    // The proxy restarts at the same address: the app registers anew.
    no_hang(first.shutdown()).await.expect("first server stops");
    let second = pinging_server().await;
    relay.point_at(second.addr);
    relay.cut();
    let new = app.next_session().await;
    assert_ne!(new, old, "a new session after the restart");
    bridged(&second, &new).await;
    let client = connect(&second.http_url(), &new, Host::default()).await;
    let echoed = call_tool(&client, "echo_text", json!({"text": "again"})).await;
    assert_eq!(
        echoed.structured_content,
        Some(json!({"echoed_text": "again"}))
    );
    let _ = client.cancel().await;

    let _ = app.child.start_kill();
    let _ = app.child.wait().await;
}

/// Sends a `tools/call` of `wait_for_cancel` and returns its handle.
async fn waiting_call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, Host>,
) -> rmcp::service::RequestHandle<rmcp::RoleClient> {
    let request =
        ClientRequest::CallToolRequest(CallToolRequest::new(call("wait_for_cancel", json!({}))));
    no_hang(client.send_cancellable_request(request, PeerRequestOptions::no_options()))
        .await
        .expect("tools/call sent")
}

/// With one call running and one waiting, the next is answered at once that
/// the app is busy; the waiting one runs when the running one ends.
#[tokio::test]
async fn past_its_running_and_waiting_calls_a_call_is_answered_busy_at_once() {
    let installed = installed().await;
    let server = TestServer::start().await;
    let mut app = PackageApp::start_with(
        &installed,
        &server.http_url(),
        &["--max-concurrent-calls", "1"],
    );
    let session_id = app.next_session().await;
    bridged(&server, &session_id).await;
    let client = connect(&server.http_url(), &session_id, Host::default()).await;

    let running = waiting_call(&client).await;
    let waiting = waiting_call(&client).await;
    server
        .wait_for_session(&session_id, "two calls at the app", |session| {
            session.calls_in_flight == 2
        })
        .await;
    let busy = call_tool(&client, "echo_text", json!({"text": "more"})).await;
    assert_eq!(busy.is_error, Some(true), "{busy:?}");
    assert_eq!(
        texts(&busy),
        [
            "The app is busy: it is already running 1 calls and has as many waiting. Try again shortly."
        ]
    );

    // The running call ends; the waiting one starts, and ends when cancelled.
    no_hang(running.cancel(Some("done".into())))
        .await
        .expect("notifications/cancelled");
    // Only a call whose handler runs can say it was cancelled.
    let first = app.next("cancelled").await;
    assert_eq!(first["cancelled"], "wait_for_cancel", "{first}");
    server
        .wait_for_session(&session_id, "the waiting call running", |session| {
            session.calls_in_flight == 1
        })
        .await;
    no_hang(waiting.cancel(Some("also done".into())))
        .await
        .expect("notifications/cancelled");
    let second = app.next("cancelled").await;
    assert_eq!(second["cancelled"], "wait_for_cancel", "{second}");
    let _ = client.cancel().await;
    let _ = app.child.start_kill();
    let _ = app.child.wait().await;
}

#[tokio::test]
async fn an_app_with_a_wrong_token_stops_at_start_and_says_what_to_fix() {
    let installed = installed().await;
    let server = TestServer::start().await;
    let output = tokio::process::Command::new(&installed.node)
        .arg("package_app.ts")
        .args([
            "--proxy-url",
            &server.http_url(),
            "--app-token",
            "not-the-token",
        ])
        .current_dir(&installed.project)
        .stdin(std::process::Stdio::null())
        .output();
    let output = no_hang(output).await.expect("run the TypeScript app");
    assert!(!output.status.success(), "the app kept serving");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("AppError: the proxy refused the token; check appToken"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no session was reported");
}

/// A tool declared with task support runs as an MCP task when the client
/// asks for one, its handler told the task's id, and as a plain call when
/// the client does not.
#[tokio::test]
async fn a_tool_with_task_support_runs_as_a_task_and_is_told_its_id() {
    let server = TestServer::start().await;
    let mut app = PackageApp::start(&installed().await, &server.http_url(), "grpc");
    let session_id = app.next_session().await;
    bridged(&server, &session_id).await;
    openclaw_proxy_tests::package_app::which_task_runs_as_a_task_and_plainly(
        &server.http_url(),
        &session_id,
    )
    .await;
}
