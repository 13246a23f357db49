//! One URL for a signed-in user across a cluster: a user's apps attached to
//! two nodes are one MCP server on either node, a call through the view on
//! one node reaches the app whose bridge another node holds, and a client
//! listening on one node hears an app on another leave.

use std::time::Duration;

use openclaw_proxy_app::{App, AppBuilder, CallContext, Serving, Tool, ToolError};
use openclaw_proxy_tests::{
    APP_TOKEN, Listener, ServerProcess, TestIssuer, call, eventually, mcp_connect_view,
};
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

use super::{node_on, start_nats};

/// An app of `owner` named `name`, attached to the node at `url`, whose one
/// tool says which app answered and who called.
fn named_app(url: &str, owner: &str, name: &str) -> AppBuilder {
    let label = format!("{owner}:{name}");
    let whereami = Tool::with_schema(
        "whereami",
        "Says which app answered, and who called.",
        json!({"type": "object"}),
        move |_: Value, call: CallContext| {
            let label = label.clone();
            async move { Ok::<_, ToolError>(json!({"app": label, "subject": call.caller().subject()})) }
        },
    );
    App::builder(url)
        .app_token(APP_TOKEN)
        .owner(owner, "")
        .device_id(format!("{name}-device"))
        .name(name)
        .tool(whereami)
}

async fn serve(builder: AppBuilder) -> Serving {
    builder
        .build()
        .expect("a valid app")
        .serve()
        .await
        .expect("serving")
}

async fn view_tools(node: &ServerProcess, token: &str) -> Vec<String> {
    let Ok(client) = mcp_connect_view(&node.url(), token, ProtocolVersion::V_2025_11_25).await
    else {
        return Vec::new();
    };
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .map(|tools| {
            tools
                .into_iter()
                .map(|tool| tool.name.to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn a_users_apps_on_two_nodes_are_one_server_on_either() {
    let issuer = TestIssuer::start().await;
    let nats = start_nats(Vec::new()).await;
    let public = "https://mcp.example.com";
    let mut oauth = openclaw_proxy_edge::oauth::OAuthSettings::new(issuer.url.clone());
    oauth.required_scopes = vec!["mcp".into()];
    let settings = node_on(&nats, 300)
        .env("OPENCLAW_PROXY_PUBLIC_URL", public)
        .oauth(oauth);
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let node = settings.clone().spawn().await;
        node.wait_ready(200).await;
        nodes.push(node);
    }
    let alice = issuer.token("alice", &format!("{public}/v1/mcp"));
    let bob = issuer.token("bob", &format!("{public}/v1/mcp"));
    let _notes = serve(named_app(&nodes[0].url(), "alice", "notes")).await;
    let mail = serve(named_app(&nodes[1].url(), "alice", "mail")).await;
    let _bobs = serve(named_app(&nodes[1].url(), "bob", "notes")).await;
    let both = ["mail__whereami", "notes__whereami"];
    for node in &nodes {
        eventually(
            "alice's two apps in her view",
            Duration::from_secs(10),
            || async { view_tools(node, &alice).await == both },
        )
        .await;
        assert_eq!(view_tools(node, &bob).await, ["notes__whereami"]);
    }
    // From node 1, a call of the app whose bridge node 0 holds.
    let client = mcp_connect_view(&nodes[1].url(), &alice, ProtocolVersion::V_2025_11_25)
        .await
        .expect("alice's view on node 1");
    let answered = client
        .call_tool(call("notes__whereami", json!({})))
        .await
        .expect("a call across nodes");
    assert_eq!(
        answered.structured_content,
        Some(json!({"app": "alice:notes", "subject": "alice"}))
    );
    // A client listening on node 0 hears the app on node 1 leave.
    let mut listener = Listener::open_as(
        &format!("{}/v1/mcp", nodes[0].url()),
        &alice,
        json!({"toolsListChanged": true}),
    )
    .await;
    mail.shutdown().await.expect("the mail app stops");
    listener.until("notifications/tools/list_changed").await;
    assert_eq!(view_tools(&nodes[0], &alice).await, ["notes__whereami"]);
    let refused = client
        .call_tool(call("mail__whereami", json!({})))
        .await
        .expect_err("the mail app left");
    assert!(
        refused.to_string().contains("none of your sessions"),
        "{refused}"
    );
}
