//! The log at the default level (`RUST_LOG` unset), as an operator of a busy
//! server reads it: an MCP client that initializes is one line with its name
//! and version, a tool call is its audit line, and rmcp writes nothing.

use openclaw_proxy_tests::*;
use serde_json::json;

/// The lines one initialize and one call add, beside the server's start and
/// the session's and bridge's own audit events.
#[tokio::test]
async fn one_initialize_and_one_call_write_two_lines_at_the_default_level() {
    // Empty is unset: the default filter.
    let proxy = TestServer::builder().env("RUST_LOG", "").spawn().await;
    let session = proxy
        .rest()
        .token(APP_TOKEN)
        .register(&legacy_session_body())
        .await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let app = serve_app(app, echo);
    let client = mcp_connect(&proxy.url(), &session.id, Route::Path).await;
    let result = no_hang(client.call_tool(call("echo_text", json!({"text": "hi"}))))
        .await
        .expect("call");
    assert_eq!(result.is_error, Some(false));
    drop(client);
    app.abort();
    let lines = proxy.stop().await;

    let lifecycle = ["session_created", "bridge_attached", "bridge_ended"];
    let added: Vec<&String> = lines
        .iter()
        .filter(|line| !line.contains("listening"))
        .filter(|line| {
            !lifecycle
                .iter()
                .any(|event| line.contains(&format!("audit: event=\"{event}\"")))
        })
        .filter(|line| !line.contains("shutting down") && !line.contains("stopped"))
        .collect();
    assert_eq!(added.len(), 2, "{added:#?}");
    let initialized = added[0];
    assert!(
        initialized.contains(" INFO ")
            && initialized.contains("MCP client initialized")
            && initialized.contains("client_name=\"")
            && initialized.contains("client_version=\""),
        "{initialized}"
    );
    assert!(
        !initialized.contains("capabilities"),
        "no capability structure: {initialized}"
    );
    assert!(
        added[1].contains("audit: event=\"tool_call\"") && added[1].contains("tool=\"echo_text\""),
        "{}",
        added[1]
    );
    assert!(
        lines.iter().all(|line| !line.contains("rmcp")),
        "{lines:#?}"
    );
}
