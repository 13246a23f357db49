//! Signing in as MCP hosts do, with real parts only: a real authorization
//! server (the npm `oidc-provider`, pinned in `tests/node/package.json`) and
//! the official TypeScript SDK's OAuth client, against the real proxy and a
//! Rust app bound to the signed-in user. The SDK discovers everything from
//! the proxy's 401, registers itself, runs the authorization code flow with
//! PKCE and a resource indicator, and calls a tool with the token; the app
//! sees who it was.

use std::process::Stdio;

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{App, CallContext, CallerKind, Tool, ToolError};
use openclaw_proxy_edge::oauth::OAuthSettings;
use openclaw_proxy_tests::conformance::{ensure_node_tools, node_dir};
use openclaw_proxy_tests::*;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct Nothing {}

/// The authorization server, running until dropped.
struct Issuer {
    url: String,
    _process: Child,
    /// Its stdout stays open: a closed pipe would end it at its next line.
    _stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

async fn start_issuer(node: &std::path::Path) -> Issuer {
    let mut process = Command::new(node)
        .arg(node_dir().join("oidc-issuer.mjs"))
        .current_dir(node_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start oidc-provider");
    let stdout = process.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = no_hang(lines.next_line())
        .await
        .expect("read the issuer's line")
        .expect("the issuer printed its URL");
    let started: Value = serde_json::from_str(&line).expect("one JSON line");
    Issuer {
        url: started["issuer"].as_str().expect("issuer").to_owned(),
        _process: process,
        _stdout: lines,
    }
}

#[tokio::test]
async fn the_typescript_sdk_signs_in_at_a_real_authorization_server_and_calls_as_that_user() {
    let node = tokio::task::spawn_blocking(ensure_node_tools)
        .await
        .expect("join")
        .expect("Node.js tools installed");
    let issuer = start_issuer(&node).await;
    let mut settings = OAuthSettings::new(issuer.url.clone());
    settings.required_scopes = vec!["mcp".into()];
    let server = TestServer::builder().oauth(settings).start().await;
    let whoami = Tool::new(
        "whoami",
        "Says who called.",
        |_: Nothing, call: CallContext| async move {
            let caller = call.caller();
            Ok::<_, ToolError>(json!({
                "oauth": caller.kind == CallerKind::OAuth,
                "subject": caller.subject(),
                "issuer": caller.issuer,
                "client_id": caller.client_id,
                "scopes": caller.scopes,
            }))
        },
    );
    let serving = App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .owner("alice", "")
        .tool(whoami)
        .build()
        .expect("a valid app")
        .serve()
        .await
        .expect("serving");
    let output = no_hang(
        Command::new(&node)
            .arg(node_dir().join("oauth-client.mjs"))
            .arg(serving.session().mcp_url)
            .current_dir(node_dir())
            .output(),
    )
    .await
    .expect("run the TypeScript SDK client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client failed:\n{stdout}\n{stderr}"
    );
    let line: Value = serde_json::from_str(stdout.trim()).expect("one JSON line");
    assert_eq!(line["registered"], true, "{line}");
    assert_eq!(line["tools"], json!(["whoami"]), "{line}");
    assert_eq!(
        line["whoami"],
        json!({"oauth": true, "subject": "alice", "issuer": issuer.url,
               "client_id": line["client_id"], "scopes": ["mcp"]}),
        "{line}"
    );
    serving.shutdown().await.expect("a clean shutdown");
}
