//! Changes an app crate app makes while it serves (`Serving::update`,
//! `Serving::resource_updated`), through the real server: an update the
//! proxy takes, one it refuses (the app keeps what it had), and one made
//! while the bridge is down, which reaches the proxy when it is back.

use std::time::Duration;

use openclaw_proxy_app::{AppError, CallContext, Tool, ToolError, Update};
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

use super::{Relay, Reported, app, assert_echoed, echo_tool, mcp_call};

fn shout_tool() -> Tool {
    Tool::with_schema(
        "shout",
        "Shout the text back.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        |args: Value, _: CallContext| async move {
            let text = args["text"].as_str().unwrap_or_default().to_uppercase();
            Ok::<_, ToolError>(json!({ "shouted": text }))
        },
    )
}

/// The session's tool names, as an MCP client lists them.
async fn tool_names(base: &str, session_id: &str) -> Vec<String> {
    let client = mcp_connect(base, session_id, Route::Path).await;
    let tools = no_hang(client.list_all_tools()).await.expect("tools/list");
    let _ = client.cancel().await;
    tools.iter().map(|tool| tool.name.to_string()).collect()
}

#[tokio::test]
async fn an_update_the_proxy_takes_is_served_and_one_it_refuses_changes_nothing() {
    let server = TestServer::start().await;
    let serving = app(&server.http_url(), vec![echo_tool()], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;

    no_hang(serving.update(Update::new().tools([echo_tool(), shout_tool()])))
        .await
        .expect("the proxy takes the new tools");
    assert_eq!(
        tool_names(&server.http_url(), &session_id).await,
        ["echo_text", "shout"]
    );
    let shouted = mcp_call(
        &server.http_url(),
        &session_id,
        "shout",
        json!({"text": "hi"}),
    )
    .await;
    assert_eq!(shouted.structured_content, Some(json!({"shouted": "HI"})));

    // A name the proxy refuses (the crate leaves tool names to it).
    let bad = Tool::with_schema(
        "two words",
        "",
        json!({"type": "object"}),
        |_: Value, _: CallContext| async { Ok::<_, ToolError>(Value::Null) },
    );
    let refused = no_hang(serving.update(Update::new().tools([bad])))
        .await
        .expect_err("the proxy refuses the name");
    assert!(
        matches!(&refused, AppError::UpdateRefused(reason) if reason.contains("two words")),
        "{refused}"
    );
    assert_eq!(
        tool_names(&server.http_url(), &session_id).await,
        ["echo_text", "shout"],
        "the session kept its tools"
    );
    let shouted = mcp_call(
        &server.http_url(),
        &session_id,
        "shout",
        json!({"text": "still"}),
    )
    .await;
    assert_eq!(
        shouted.structured_content,
        Some(json!({"shouted": "STILL"})),
        "the app kept its handlers"
    );
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn a_change_made_while_the_bridge_is_down_reaches_the_proxy_when_it_is_back() {
    let server = TestServer::start().await;
    let relay = Relay::start(server.addr).await;
    // Slow reconnection, so that the bridge stays down while the app
    // changes its tools.
    let serving = app(&relay.url(), vec![echo_tool()], &Reported::default())
        .reconnect_delays(Duration::from_millis(500), Duration::from_millis(500))
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;
    no_hang(serving.resource_updated("notes:///7"))
        .await
        .expect("an attached bridge carries resource_updated");

    relay.cut();
    eventually(
        "the app noticing that its bridge is down",
        Duration::from_secs(20),
        || async {
            matches!(
                serving.resource_updated("notes:///7").await,
                Err(AppError::NotAttached)
            )
        },
    )
    .await;
    no_hang(serving.update(Update::new().tools([echo_tool(), shout_tool()])))
        .await
        .expect("an update while detached is kept for the next bridge");

    let base = server.http_url();
    eventually(
        "the new tool listed after the app attached again",
        Duration::from_secs(30),
        || {
            let (base, session_id) = (base.clone(), session_id.clone());
            async move { tool_names(&base, &session_id).await.len() == 2 }
        },
    )
    .await;
    assert_eq!(serving.session().session_id, session_id, "same session");
    assert_echoed(
        &mcp_call(&base, &session_id, "echo_text", json!({"text": "back"})).await,
        "back",
    );
    no_hang(serving.shutdown()).await.expect("shutdown");
}
