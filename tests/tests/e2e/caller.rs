//! The verified caller reaches the app: every invocation (`invoke_tool`,
//! `mcp_request`; gRPC `InvokeTool`, `McpRequest`) says which credential
//! opened the MCP request and, for an OAuth access token, its issuer,
//! subject, client and scopes, never the token. Real server, a real test
//! issuer, the JSON bridge and the Rust app crate.

use std::time::Duration;

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{App, CallContext, CallerKind, Tool, ToolError};
use openclaw_proxy_edge::oauth::OAuthSettings;
use openclaw_proxy_tests::*;
use serde::Deserialize;
use serde_json::{Value, json};

async fn oauth_server(issuer: &TestIssuer) -> TestServer {
    TestServer::builder()
        .oauth(OAuthSettings::new(issuer.url.clone()))
        .start()
        .await
}

fn tools_call(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "echo_text", "arguments": {"text": "hi"}}})
}

/// Sends `body` to the session's MCP URL with `token`, answers the frame of
/// `kind` the app receives with `answer`, and returns that frame.
async fn one_frame(
    app: &mut WsApp,
    session: &TestSession,
    token: &str,
    body: Value,
    kind: &str,
    answer: impl Fn(&Value) -> Value,
) -> Value {
    let request = Rest::default()
        .mcp(&session.mcp_url, &body)
        .bearer_auth(token);
    let pending = tokio::spawn(request.send());
    let frame = loop {
        let frame = no_hang(app.next_json()).await.expect("a frame");
        if frame["type"] == kind {
            break frame;
        }
    };
    app.send_json(answer(&frame)).await;
    let reply = no_hang(pending).await.expect("the request task");
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    assert!(
        !frame.to_string().contains(token),
        "the token reached the app: {frame}"
    );
    frame
}

#[tokio::test]
async fn every_invocation_on_the_json_bridge_says_who_called() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let mut body = legacy_session_body();
    body["owner"] = json!({"subject": "alice"});
    body["resources"] = json!([{"uri": "notes:///1", "name": "one"}]);
    let session = server.rest().register(&body).await;
    let session_token = session.session_token.clone().expect("session_token");
    let mut app = WsApp::connect(&session.bridge_url, Some(&session_token))
        .await
        .expect("bridge");
    let alice = issuer.token("alice", &format!("{}/v1/mcp", server.http_url()));
    let invoke_result = |frame: &Value| {
        json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true,
               "content": {"text": "hi"}})
    };
    let frame = one_frame(
        &mut app,
        &session,
        &alice,
        tools_call(1),
        "invoke_tool",
        invoke_result,
    )
    .await;
    assert_eq!(
        frame["caller"],
        json!({"kind": "oauth", "issuer": issuer.url, "subject": "alice",
               "client_id": "test-client", "scopes": ["mcp", "profile"]})
    );
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                      "params": {"uri": "notes:///1"}});
    let mcp_result = |frame: &Value| {
        json!({"type": "mcp_result", "request_id": frame["request_id"],
               "result": {"contents": [{"uri": "notes:///1", "text": "one"}]}})
    };
    let frame = one_frame(&mut app, &session, &alice, read, "mcp_request", mcp_result).await;
    assert_eq!(frame["caller"]["kind"], "oauth");
    assert_eq!(frame["caller"]["subject"], "alice");
    let mcp_token = session.mcp_token.clone().expect("mcp_token");
    for (token, kind) in [
        (mcp_token.as_str(), "session_token"),
        (OPENCLAW_TOKEN, "global_token"),
    ] {
        let frame = one_frame(
            &mut app,
            &session,
            token,
            tools_call(3),
            "invoke_tool",
            invoke_result,
        )
        .await;
        assert_eq!(frame["caller"], json!({"kind": kind}), "{token}");
    }
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct Nothing {}

#[tokio::test]
async fn the_rust_app_crate_binds_its_session_and_sees_the_signed_in_user() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let whoami = Tool::new(
        "whoami",
        "Says who called.",
        |_: Nothing, call: CallContext| async move {
            let caller = call.caller();
            Ok::<_, ToolError>(json!({
                "oauth": caller.kind == CallerKind::OAuth,
                "subject": caller.subject(),
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
    let session = serving.session();
    let alice = issuer.token("alice", &format!("{}/v1/mcp", server.http_url()));
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "whoami", "arguments": {}}});
    let reply = Rest::default()
        .mcp(&session.mcp_url, &call)
        .bearer_auth(&alice)
        .send()
        .await;
    assert_eq!(
        reply.json()["result"]["structuredContent"],
        json!({"oauth": true, "subject": "alice", "client_id": "test-client",
               "scopes": ["mcp", "profile"]}),
        "{}",
        reply.text()
    );
    let bob = issuer.token("bob", &format!("{}/v1/mcp", server.http_url()));
    let refused = Rest::default()
        .mcp(&session.mcp_url, &call)
        .bearer_auth(&bob)
        .send()
        .await;
    assert_eq!(
        refused.status(),
        StatusCode::UNAUTHORIZED,
        "{}",
        refused.text()
    );
    let mcp_token = session.mcp_token.clone().expect("mcp_token");
    let reply = Rest::default()
        .mcp(&session.mcp_url, &call)
        .bearer_auth(&mcp_token)
        .send()
        .await;
    assert_eq!(reply.json()["result"]["structuredContent"]["oauth"], false);
    serving.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn the_audit_line_of_a_call_by_an_access_token_names_its_subject_and_client() {
    let issuer = TestIssuer::start().await;
    let proxy = TestServer::builder()
        .oauth(OAuthSettings::new(issuer.url.clone()))
        .spawn()
        .await;
    let mut body = legacy_session_body();
    body["owner"] = json!({"subject": "alice"});
    body["resources"] = json!([{"uri": "notes:///1", "name": "one"}]);
    let session = proxy.rest().token(APP_TOKEN).register(&body).await;
    let session_token = session.session_token.clone().expect("session_token");
    let mut app = WsApp::connect(&session.bridge_url, Some(&session_token))
        .await
        .expect("bridge");
    // The upgrade's answer comes before the bridge is attached: a call sent
    // in between would find no bridge.
    let rest = proxy.rest().token(APP_TOKEN);
    eventually("the bridge attaching", Duration::from_secs(10), || {
        let (rest, id) = (rest.clone(), session.id.clone());
        async move { rest.get_session(&id).await.json()["bridge_connected"] == true }
    })
    .await;
    let alice = issuer.token("alice", &format!("{}/v1/mcp", proxy.url()));
    let invoke_result = |frame: &Value| {
        json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true,
               "content": {"text": "hi"}})
    };
    one_frame(
        &mut app,
        &session,
        &alice,
        tools_call(1),
        "invoke_tool",
        invoke_result,
    )
    .await;
    let read = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                      "params": {"uri": "notes:///1"}});
    let mcp_result = |frame: &Value| {
        json!({"type": "mcp_result", "request_id": frame["request_id"],
               "result": {"contents": [{"uri": "notes:///1", "text": "one"}]}})
    };
    one_frame(&mut app, &session, &alice, read, "mcp_request", mcp_result).await;
    let mcp_token = session.mcp_token.clone().expect("mcp_token");
    one_frame(
        &mut app,
        &session,
        &mcp_token,
        tools_call(3),
        "invoke_tool",
        invoke_result,
    )
    .await;
    drop(app);
    let lines = proxy.stop().await;
    let audited = |event: &str| -> Vec<&String> {
        lines
            .iter()
            .filter(|line| {
                line.contains(" audit: ") && line.contains(&format!("event=\"{event}\""))
            })
            .collect()
    };
    let calls = audited("tool_call");
    assert_eq!(calls.len(), 2, "{lines:#?}");
    for line in [calls[0], audited("app_request")[0]] {
        assert!(line.contains(" subject=\"alice\""), "{line}");
        assert!(line.contains(" client_id=\"test-client\""), "{line}");
        assert!(!line.contains(&alice), "the token in the log: {line}");
    }
    // A call opened by the session's own token names no subject.
    assert!(
        calls[1].contains(" subject=\"-\" client_id=\"-\""),
        "{}",
        calls[1]
    );
}
