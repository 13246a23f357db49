//! What a tool needs of its caller, declared by the app
//! (`requires.scopes`, `requires.caller_kinds`): a caller that lacks it
//! does not see the tool and is refused a call with invalid params naming
//! what it lacks, before the app sees anything. Real server, a real test
//! issuer, the official Rust MCP SDK's client, the Rust app crate (gRPC)
//! and the REST body.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{App, CallContext, CallerKind, Tool, ToolError};
use openclaw_proxy_edge::oauth::OAuthSettings;
use openclaw_proxy_tests::*;
use rmcp::ServiceError;
use rmcp::model::ErrorCode;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct Nothing {}

/// A tool that counts its calls and answers its own name.
fn counted(name: &'static str, calls: &Arc<AtomicUsize>) -> Tool {
    let calls = calls.clone();
    Tool::new(name, "Counts.", move |_: Nothing, _: CallContext| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, ToolError>(json!({"ran": name})) }
    })
}

/// A token of `subject` granting `scope` (space-separated).
fn token_with_scope(issuer: &TestIssuer, subject: &str, audience: &str, scope: &str) -> String {
    let mut claims = issuer.claims(subject, audience);
    claims["scope"] = json!(scope);
    issuer.key().sign(&claims)
}

async fn tool_names(client: &McpClient) -> Vec<String> {
    let tools = no_hang(client.list_all_tools())
        .await
        .expect("tools/list answered");
    let mut names: Vec<String> = tools.iter().map(|tool| tool.name.to_string()).collect();
    names.sort();
    names
}

/// The JSON-RPC error of a refused call.
async fn refusal(client: &McpClient, name: &str) -> rmcp::ErrorData {
    match no_hang(client.call_tool(call(name, json!({})))).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error for {name}, got {other:?}"),
    }
}

#[tokio::test]
async fn callers_with_different_scopes_see_different_lists_and_get_different_answers() {
    let issuer = TestIssuer::start().await;
    let server = TestServer::builder()
        .oauth(OAuthSettings::new(issuer.url.clone()))
        .start()
        .await;
    let calls = Arc::new(AtomicUsize::new(0));
    // An access token opens only its subject's sessions: two tokens of
    // alice's, one granting more than the other.
    let serving = App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .owner("alice", "")
        .tool(counted("read_notes", &calls))
        .tool(counted("delete_notes", &calls).requires_scope("notes:admin"))
        .tool(counted("whoami", &calls).requires_caller_kind(CallerKind::OAuth))
        .build()
        .expect("a valid app")
        .serve()
        .await
        .expect("serving");
    let session = serving.session();
    let audience = format!("{}/v1/mcp", server.http_url());
    let admin = token_with_scope(&issuer, "alice", &audience, "mcp notes:admin");
    let reader = token_with_scope(&issuer, "alice", &audience, "mcp");
    let connect = |token: String| {
        let (base, id) = (server.http_url(), session.session_id.clone());
        async move {
            mcp_connect_with_token(&base, &id, Some(&token))
                .await
                .expect("MCP client connects")
        }
    };

    let alice = connect(admin).await;
    assert_eq!(
        tool_names(&alice).await,
        ["delete_notes", "read_notes", "whoami"]
    );
    let result = no_hang(alice.call_tool(call("delete_notes", json!({}))))
        .await
        .expect("alice may delete");
    assert_eq!(
        result.structured_content,
        Some(json!({"ran": "delete_notes"}))
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    let bob = connect(reader).await;
    assert_eq!(tool_names(&bob).await, ["read_notes", "whoami"]);
    let refused = refusal(&bob, "delete_notes").await;
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert!(
        refused.message.contains("\"notes:admin\""),
        "the refusal names the missing scope: {}",
        refused.message
    );
    // An unknown tool's refusal offers only what this caller may see.
    let unknown = refusal(&bob, "rename_notes").await;
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert!(
        unknown.message.contains("read_notes") && !unknown.message.contains("delete_notes"),
        "{}",
        unknown.message
    );
    no_hang(bob.call_tool(call("read_notes", json!({}))))
        .await
        .expect("bob may read");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the refused call never ran"
    );

    // The global token is no OAuth caller and grants no scope.
    let global = connect(OPENCLAW_TOKEN.to_owned()).await;
    assert_eq!(tool_names(&global).await, ["read_notes"]);
    let refused = refusal(&global, "whoami").await;
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert!(
        refused.message.contains("oauth") && refused.message.contains("global_token"),
        "{}",
        refused.message
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    for client in [alice, bob, global] {
        let _ = client.cancel().await;
    }
    serving.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn rest_takes_requirements_in_both_spellings_and_refuses_a_bad_one_by_name() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["tools"] = json!([
        {"name": "a", "requires": {"scopes": ["notes:admin"], "caller_kinds": ["oauth"]}},
        {"name": "b", "requires": {"callerKinds": ["session_token", "global_token"]}},
    ]);
    let session = server.rest().register(&body).await;
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;
    assert_eq!(tool_names(&client).await, ["b"]);
    // PUT .../tools carries them too.
    let update = json!({"tools": [
        {"name": "c", "requires": {"callerKinds": ["session_token"]}},
        {"name": "d", "requires": {"caller_kinds": ["global_token"], "scopes": []}},
    ]});
    let reply = server.rest().put_tools(&session.id, &update).await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    assert_eq!(tool_names(&client).await, ["d"]);
    let _ = client.cancel().await;

    for (requires, field) in [
        (json!({"scopes": ["two words"]}), "requires.scopes"),
        (json!({"caller_kinds": ["robot"]}), "requires.caller_kinds"),
        (
            json!({"caller_kinds": ["oauth"], "callerKinds": ["none"]}),
            "caller_kinds",
        ),
        (json!({"roles": ["admin"]}), "roles"),
    ] {
        let mut bad = legacy_session_body();
        bad["tools"] = json!([{"name": "a", "requires": requires}]);
        let reply = server.rest().create_session(&bad).await;
        assert_eq!(reply.status(), StatusCode::BAD_REQUEST, "{}", reply.text());
        let text: Value = reply.json();
        assert!(
            text.to_string().contains(field),
            "the refusal names {field}: {text}"
        );
    }
}
