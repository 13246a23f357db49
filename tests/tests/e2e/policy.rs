//! The operator's policy file (`OPENCLAW_PROXY_POLICY_FILE`): what callers
//! see and what the app receives under its rules, rate limits reached and
//! recovered, a reload that hides a tool mid-session, and bad files at start
//! and at reload. Real server, the official Rust MCP SDK's client, the Rust
//! app crate over gRPC.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use openclaw_proxy_app::{App, CallContext, Serving, Tool, ToolError};
use openclaw_proxy_tests::processes::TempDir;
use openclaw_proxy_tests::*;
use rmcp::ServiceError;
use rmcp::model::ErrorCode;
use serde_json::{Value, json};

/// How often the tests' servers look at their policy files.
const POLL: Duration = Duration::from_millis(50);

/// A policy file in a folder of its own.
struct PolicyFile {
    folder: TempDir,
}

impl PolicyFile {
    fn new(text: &str) -> Self {
        let file = Self {
            folder: TempDir::new("policy").expect("a temporary folder"),
        };
        file.write(text);
        file
    }

    fn path(&self) -> PathBuf {
        self.folder.path().join("policy.toml")
    }

    /// Replaces the file's contents at once (a rename over it), as an
    /// operator's deployment would.
    fn write(&self, text: &str) {
        let next = self.folder.path().join("policy.toml.next");
        std::fs::write(&next, text).expect("write the policy");
        std::fs::rename(&next, self.path()).expect("replace the policy");
    }
}

async fn server_with(file: &Path) -> TestServer {
    TestServer::builder().policy_file(file, POLL).start().await
}

/// An app whose `post_message` answers the arguments it received and whose
/// `delete_notes` counts its calls.
async fn notes_app(server: &TestServer, deletes: &Arc<AtomicUsize>) -> Serving {
    let post = Tool::with_schema(
        "post_message",
        "Posts a message in a room.",
        json!({"type": "object",
               "properties": {"text": {"type": "string"}, "room": {"type": "string"}},
               "required": ["text", "room"]}),
        |arguments: Value, _: CallContext| async move { Ok::<_, ToolError>(arguments) },
    );
    let counter = deletes.clone();
    let delete = Tool::with_schema(
        "delete_notes",
        "Deletes every note.",
        json!({"type": "object"}),
        move |_: Value, _: CallContext| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, ToolError>(json!({"deleted": true})) }
        },
    );
    App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .tool(post)
        .tool(delete)
        .build()
        .expect("a valid app")
        .serve()
        .await
        .expect("serving")
}

async fn connect(server: &TestServer, serving: &Serving, token: &str) -> McpClient {
    mcp_connect_with_token(
        &server.http_url(),
        &serving.session().session_id,
        Some(token),
    )
    .await
    .expect("MCP client connects")
}

async fn listed(client: &McpClient) -> Vec<rmcp::model::Tool> {
    no_hang(client.list_all_tools())
        .await
        .expect("tools/list answered")
}

async fn names(client: &McpClient) -> Vec<String> {
    let mut names: Vec<String> = listed(client)
        .await
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    names
}

async fn refusal(client: &McpClient, name: &str, arguments: Value) -> rmcp::ErrorData {
    match no_hang(client.call_tool(call(name, arguments))).await {
        Err(ServiceError::McpError(error)) => error,
        other => panic!("expected a JSON-RPC error for {name}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_renamed_and_pinned_tool_as_the_caller_and_the_app_see_it() {
    let file = PolicyFile::new(
        r#"
[[rule]]
name = "say in the team room"
when = 'tool.name == "post_message"'
rename = "say"
description = "Says something in the team room."
pin = { room = "team" }
"#,
    );
    let server = server_with(&file.path()).await;
    let deletes = Arc::new(AtomicUsize::new(0));
    let serving = notes_app(&server, &deletes).await;
    let client = connect(&server, &serving, OPENCLAW_TOKEN).await;

    let tools = listed(&client).await;
    let say = tools
        .iter()
        .find(|tool| tool.name == "say")
        .expect("the renamed tool is listed");
    assert!(!tools.iter().any(|tool| tool.name == "post_message"));
    assert_eq!(
        say.description.as_deref(),
        Some("Says something in the team room.")
    );
    assert_eq!(
        Value::Object((*say.input_schema).clone()),
        json!({"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"]}),
        "the pinned argument is not in the schema the caller gets"
    );

    // The caller's own value of a pinned argument does not reach the app.
    let result = no_hang(client.call_tool(call("say", json!({"text": "hi", "room": "board"}))))
        .await
        .expect("the call is answered");
    assert_eq!(
        result.structured_content,
        Some(json!({"text": "hi", "room": "team"})),
        "the app received its own tool's call with the pinned room"
    );
    let unknown = refusal(&client, "post_message", json!({"text": "hi"})).await;
    assert_eq!(unknown.code, ErrorCode::INVALID_PARAMS);
    assert!(unknown.message.contains("say"), "{}", unknown.message);
    let _ = client.cancel().await;
    serving.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn a_deny_rule_hides_a_tool_from_one_kind_of_caller_only() {
    let file = PolicyFile::new(
        r#"
[[rule]]
name = "no deletes for the shared token"
when = 'caller.kind == "global_token" && tool.name.startsWith("delete_")'
decision = "deny"
"#,
    );
    let server = server_with(&file.path()).await;
    let deletes = Arc::new(AtomicUsize::new(0));
    let serving = notes_app(&server, &deletes).await;
    let shared = connect(&server, &serving, OPENCLAW_TOKEN).await;
    let own_token = serving
        .session()
        .mcp_token
        .expect("the session's MCP token");
    let own = connect(&server, &serving, &own_token).await;

    assert_eq!(names(&shared).await, ["post_message"]);
    assert_eq!(names(&own).await, ["delete_notes", "post_message"]);
    let refused = refusal(&shared, "delete_notes", json!({})).await;
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    assert!(
        refused.message.contains("unknown tool") && !refused.message.contains("delete_notes,"),
        "{}",
        refused.message
    );
    assert_eq!(deletes.load(Ordering::SeqCst), 0, "the app never saw it");
    no_hang(own.call_tool(call("delete_notes", json!({}))))
        .await
        .expect("the session's own token may delete");
    assert_eq!(deletes.load(Ordering::SeqCst), 1);
    let metrics = server.hub.metrics().render(0, None);
    assert!(
        metrics.contains(
            r#"openclaw_proxy_policy_decisions_total{rule="no deletes for the shared token",effect="deny"} 1"#
        ),
        "{metrics}"
    );
    for client in [shared, own] {
        let _ = client.cancel().await;
    }
    serving.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn a_rate_limit_is_reached_and_recovers() {
    let file = PolicyFile::new(
        r#"
[[rule]]
name = "slow deletes"
when = 'tool.name == "delete_notes"'
rate_limit = { per_second = 1.0, burst = 2 }
"#,
    );
    let server = server_with(&file.path()).await;
    let deletes = Arc::new(AtomicUsize::new(0));
    let serving = notes_app(&server, &deletes).await;
    let client = connect(&server, &serving, OPENCLAW_TOKEN).await;

    // The burst, then a refusal: calls in a row outrun two tokens refilled
    // at one a second.
    let mut refused = None;
    for _ in 0..20 {
        match no_hang(client.call_tool(call("delete_notes", json!({})))).await {
            Ok(_) => {}
            Err(ServiceError::McpError(error)) => {
                refused = Some(error);
                break;
            }
            Err(other) => panic!("expected a JSON-RPC error, got {other:?}"),
        }
    }
    let refused = refused.expect("the rate limit is reached");
    assert_eq!(refused.code, ErrorCode(-32000));
    assert!(
        refused.message.contains("slow deletes"),
        "{}",
        refused.message
    );
    let retry_after = refused
        .data
        .as_ref()
        .and_then(|data| data["retryAfterSeconds"].as_f64())
        .expect("data.retryAfterSeconds");
    assert!(retry_after > 0.0 && retry_after <= 1.0, "{retry_after}");
    let counted = deletes.load(Ordering::SeqCst);
    assert!(counted >= 2, "the burst went through: {counted}");

    // Tokens come back: a call goes through again.
    eventually(
        "a call after the limit recovered",
        Duration::from_secs(10),
        || {
            let request = client.call_tool(call("delete_notes", json!({})));
            async move { request.await.is_ok() }
        },
    )
    .await;
    assert_eq!(deletes.load(Ordering::SeqCst), counted + 1);
    let _ = client.cancel().await;
    serving.shutdown().await.expect("a clean shutdown");
}

const HIDE_DELETES: &str = r#"
[[rule]]
name = "hide deletes"
when = 'tool.name == "delete_notes"'
decision = "deny"
"#;

fn loaded_hash(metrics: &str) -> Option<String> {
    let line = metrics
        .lines()
        .find(|line| line.starts_with("openclaw_proxy_policy_loaded{") && line.ends_with(" 1"))?;
    let start = line.find("sha256=\"")? + "sha256=\"".len();
    let end = start + line[start..].find('"')?;
    Some(line[start..end].to_owned())
}

#[tokio::test]
async fn a_reload_hides_a_tool_mid_session_and_a_bad_reload_keeps_the_rules() {
    let file = PolicyFile::new("# Nothing is restricted yet.\n");
    let server = server_with(&file.path()).await;
    let deletes = Arc::new(AtomicUsize::new(0));
    let serving = notes_app(&server, &deletes).await;
    let client = connect(&server, &serving, OPENCLAW_TOKEN).await;
    assert_eq!(names(&client).await, ["delete_notes", "post_message"]);
    let metrics = || server.hub.metrics().render(0, None);
    let first_hash = loaded_hash(&metrics()).expect("the policy's hash is exposed");

    file.write(HIDE_DELETES);
    eventually(
        "the reloaded policy hides the tool",
        Duration::from_secs(10),
        || {
            let listing = client.list_all_tools();
            async move {
                listing
                    .await
                    .is_ok_and(|tools| !tools.iter().any(|tool| tool.name == "delete_notes"))
            }
        },
    )
    .await;
    let refused = refusal(&client, "delete_notes", json!({})).await;
    assert_eq!(refused.code, ErrorCode::INVALID_PARAMS);
    let second_hash = loaded_hash(&metrics()).expect("the new hash");
    assert_ne!(first_hash, second_hash);

    // A bad file is refused and the rules before it stay.
    file.write("[[rule]]\nname = \"broken\"\nwhen = 'tool.name =='\ndecision = \"deny\"\n");
    eventually("the bad reload is refused", Duration::from_secs(10), || {
        let text = metrics();
        async move { text.contains(r#"openclaw_proxy_policy_reloads_total{result="kept_old"} 1"#) }
    })
    .await;
    assert_eq!(names(&client).await, ["post_message"]);
    assert_eq!(
        loaded_hash(&metrics()).as_deref(),
        Some(second_hash.as_str())
    );
    assert_eq!(deletes.load(Ordering::SeqCst), 0);
    let _ = client.cancel().await;
    serving.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn a_bad_policy_file_refuses_to_start_naming_the_rule_and_line() {
    let file = PolicyFile::new(
        "[[rule]]\nname = \"fine\"\ndecision = \"allow\"\n\n[[rule]]\nname = \"typo\"\nwhen = 'caller.knd == \"oauth\"'\ndecision = \"deny\"\n",
    );
    let refused = TestServer::builder()
        .env(
            "OPENCLAW_PROXY_POLICY_FILE",
            &file.path().display().to_string(),
        )
        .try_spawn()
        .await
        .err()
        .expect("refused to start");
    assert!(
        refused.contains("line 7") && refused.contains("\"typo\""),
        "{refused}"
    );
    let missing = TestServer::builder()
        .env(
            "OPENCLAW_PROXY_POLICY_FILE",
            &file.folder.path().join("absent.toml").display().to_string(),
        )
        .try_spawn()
        .await
        .err()
        .expect("refused to start");
    assert!(missing.contains("absent.toml"), "{missing}");
}

#[tokio::test]
async fn a_confirm_rule_asks_the_user_before_the_app_sees_the_call() {
    let file = PolicyFile::new(
        r#"
[[rule]]
name = "confirm deletes"
when = 'tool.name == "delete_notes"'
confirm = "Really delete every note?"
"#,
    );
    let server = server_with(&file.path()).await;
    let deletes = Arc::new(AtomicUsize::new(0));
    let serving = notes_app(&server, &deletes).await;
    let mcp_url = serving.session().mcp_url;
    let post = |body: &Value| {
        mcp_post(&mcp_url, body)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2025-11-25")
    };
    for (id, action) in [(1, "decline"), (2, "accept")] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": "delete_notes", "arguments": {}}});
        let response = post(&call).send_streaming().await;
        assert_eq!(response.status(), 200);
        let mut stream = SseStream::of(response);
        let asked = no_hang(stream.next())
            .await
            .expect("the confirmation request");
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        let message = asked["params"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("Really delete every note?"),
            "{message}"
        );
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": action}});
        let reply = post(&answer).send().await;
        assert_eq!(reply.status(), 202, "{}", reply.text());
        let result = no_hang(stream.next()).await.expect("the result");
        assert_eq!(result["id"], id, "{result}");
        let expected = usize::from(action == "accept");
        assert_eq!(deletes.load(Ordering::SeqCst), expected, "{result}");
        assert_eq!(result["result"]["isError"], action != "accept", "{result}");
    }
    serving.shutdown().await.expect("a clean shutdown");
}

#[tokio::test]
async fn a_reload_tells_listening_clients_that_the_tool_list_changed() {
    let file = PolicyFile::new("# Nothing is restricted yet.\n");
    let server = server_with(&file.path()).await;
    let deletes = Arc::new(AtomicUsize::new(0));
    let serving = notes_app(&server, &deletes).await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let listen = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                        "params": {"_meta": meta, "notifications": {"toolsListChanged": true}}});
    let response = mcp_post(&serving.session().mcp_url, &listen)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .header("accept", "application/json, text/event-stream")
        .send_streaming()
        .await;
    assert_eq!(response.status(), 200);
    let mut stream = SseStream::of(response);
    let acknowledged = no_hang(stream.next()).await.expect("the acknowledgement");
    assert_eq!(
        acknowledged["method"], "notifications/subscriptions/acknowledged",
        "{acknowledged}"
    );

    file.write(HIDE_DELETES);
    let changed = no_hang(stream.next()).await.expect("a notification");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    serving.shutdown().await.expect("a clean shutdown");
}
