//! One URL for a signed-in user: `POST /v1/mcp` with an access token and
//! no session named serves every live session the token's subject owns, as
//! one MCP server (`{name}__{tool}`), and nothing of anyone else's. Real
//! server, a real test issuer, apps written with the Rust app crate on the
//! gRPC bridge, the official Rust SDK's MCP client and raw requests for
//! what lies below it (status codes, streams).

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{
    App, AppBuilder, CallContext, GetPromptResult, McpError, Prompt, PromptMessage, ReadRequest,
    Resource, ResourceContents, ResourceTemplate, Serving, Tool, ToolError,
};
use openclaw_proxy_edge::oauth::OAuthSettings;
use openclaw_proxy_tests::*;
use rmcp::model::{GetPromptRequestParams, ProtocolVersion, ReadResourceRequestParams};
use serde::Deserialize;
use serde_json::{Value, json};

async fn oauth_server(issuer: &TestIssuer) -> TestServer {
    let mut settings = OAuthSettings::new(issuer.url.clone());
    settings.required_scopes = vec!["mcp".into()];
    TestServer::builder().oauth(settings).start().await
}

/// An app of `owner` on `device` with one tool, `whereami`, that reports
/// progress and answers who it is and who called.
fn device_app(server: &TestServer, owner: &str, app: &str, device: &str) -> AppBuilder {
    let label = format!("{owner}:{app}:{device}");
    let whereami = Tool::with_schema(
        "whereami",
        "Says which app on which device answered, and who called.",
        json!({"type": "object"}),
        move |_: Value, call: CallContext| {
            let label = label.clone();
            async move {
                call.progress(1.0, Some(2.0), "half way").await;
                Ok::<_, ToolError>(json!({
                    "app": label,
                    "subject": call.caller().subject(),
                    "tool": call.tool_name(),
                }))
            }
        },
    );
    App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .owner(owner, "")
        .device_id(format!("{device}-id"))
        .device_name(device)
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

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct GreetArgs {
    /// Whom to greet.
    who: String,
}

/// The user's one URL.
fn view_url(server: &TestServer) -> String {
    format!("{}/v1/mcp", server.http_url())
}

async fn tool_names(client: &McpClient) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|tool| tool.name.to_string())
        .collect();
    names.sort();
    names
}

async fn call_view(client: &McpClient, name: &str) -> Result<Value, String> {
    client
        .call_tool(call(name, json!({})))
        .await
        .map(|result| result.structured_content.unwrap_or(Value::Null))
        .map_err(|error| error.to_string())
}

#[tokio::test]
async fn two_users_each_see_their_own_sessions_under_one_url() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let greet = Prompt::new(
        "greet",
        "Greets someone.",
        |args: GreetArgs, _: CallContext| async move {
            Ok::<_, McpError>(GetPromptResult::new([PromptMessage::user(format!(
                "Hello, {}!",
                args.who
            ))]))
        },
    );
    let today = Resource::new(
        "notes:///today",
        "today",
        |read: ReadRequest, _: CallContext| async move {
            Ok::<_, McpError>(ResourceContents::text(read.uri(), "today's notes"))
        },
    );
    let message = ResourceTemplate::new(
        "mail:///{id}",
        "message",
        |read: ReadRequest, _: CallContext| async move {
            let id = read.variable("id").unwrap_or_default().to_owned();
            Ok::<_, McpError>(ResourceContents::text(read.uri(), format!("mail {id}")))
        },
    );
    let _alices_notes = serve(
        device_app(&server, "alice", "notes", "laptop")
            .name("notes")
            .prompt(greet)
            .resource(today),
    )
    .await;
    let _alices_mail = serve(
        device_app(&server, "alice", "mail", "laptop")
            .name("mail")
            .resource_template(message),
    )
    .await;
    let _bobs_notes = serve(device_app(&server, "bob", "notes", "pc").name("notes")).await;
    // A session bound to no one is in no view.
    let _nobodys = server.rest().register(&legacy_session_body()).await;

    let base = server.http_url();
    let alice_token = issuer.token("alice", &view_url(&server));
    let bob_token = issuer.token("bob", &view_url(&server));
    let alice = mcp_connect_view(&base, &alice_token, ProtocolVersion::V_2025_11_25)
        .await
        .expect("alice's view");
    let bob = mcp_connect_view(&base, &bob_token, ProtocolVersion::V_2026_07_28)
        .await
        .expect("bob's view");

    assert_eq!(
        tool_names(&alice).await,
        ["mail__whereami", "notes__whereami"]
    );
    assert_eq!(tool_names(&bob).await, ["notes__whereami"]);
    let answered = call_view(&alice, "notes__whereami").await.expect("a call");
    assert_eq!(
        answered,
        json!({"app": "alice:notes:laptop", "subject": "alice", "tool": "whereami"})
    );
    let answered = call_view(&alice, "mail__whereami").await.expect("a call");
    assert_eq!(answered["app"], "alice:mail:laptop");
    let answered = call_view(&bob, "notes__whereami").await.expect("a call");
    assert_eq!(
        answered,
        json!({"app": "bob:notes:pc", "subject": "bob", "tool": "whereami"})
    );
    // Another user's tool is unknown here, and its error tells nothing of it.
    let refused = call_view(&bob, "mail__whereami")
        .await
        .expect_err("not bob's");
    assert!(refused.contains("none of your sessions"), "{refused}");
    assert!(!refused.contains("alice"), "{refused}");

    let prompts = alice.list_all_prompts().await.expect("prompts/list");
    let names: Vec<&str> = prompts.iter().map(|prompt| &*prompt.name).collect();
    assert_eq!(names, ["notes__greet"]);
    assert!(
        bob.list_all_prompts()
            .await
            .expect("bob's prompts")
            .is_empty()
    );
    let mut arguments = serde_json::Map::new();
    arguments.insert("who".into(), json!("Bob"));
    let got = alice
        .get_prompt(GetPromptRequestParams::new("notes__greet").with_arguments(arguments))
        .await
        .expect("prompts/get");
    assert!(
        serde_json::to_string(&got.messages)
            .expect("json")
            .contains("Hello, Bob!"),
        "{got:?}"
    );

    let resources = alice.list_all_resources().await.expect("resources/list");
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["notes:///today"]);
    let templates = alice
        .list_all_resource_templates()
        .await
        .expect("resources/templates/list");
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(templates, ["mail:///{id}"]);
    for (uri, text) in [("notes:///today", "today's notes"), ("mail:///7", "mail 7")] {
        let read = alice
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .expect("resources/read");
        assert!(
            serde_json::to_string(&read.contents)
                .expect("json")
                .contains(text),
            "{uri}: {read:?}"
        );
    }
    let refused = bob
        .read_resource(ReadResourceRequestParams::new("mail:///7"))
        .await
        .expect_err("not bob's");
    assert!(!refused.to_string().contains("alice"), "{refused}");
}

#[tokio::test]
async fn a_call_through_the_view_streams_its_progress() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let _notes = serve(device_app(&server, "alice", "notes", "laptop").name("notes")).await;
    let token = issuer.token("alice", &view_url(&server));
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                      "params": {"name": "notes__whereami", "arguments": {},
                                 "_meta": {"progressToken": "p-1"}}});
    let reply = mcp_post(&view_url(&server), &body)
        .bearer_auth(&token)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    let messages = sse_messages(&reply.text());
    let progress = messages
        .iter()
        .find(|message| message["method"] == "notifications/progress")
        .unwrap_or_else(|| panic!("no progress in {messages:?}"));
    assert_eq!(progress["params"]["progressToken"], "p-1");
    assert_eq!(progress["params"]["message"], "half way");
    let last = messages.last().expect("a result");
    assert_eq!(last["id"], 5);
    assert_eq!(
        last["result"]["structuredContent"]["app"],
        "alice:notes:laptop"
    );
}

#[tokio::test]
async fn only_an_access_token_for_the_endpoint_opens_a_view() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let notes = serve(device_app(&server, "alice", "notes", "laptop").name("notes")).await;
    let session = notes.session();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let mcp_token = session.mcp_token.clone().expect("mcp_token");
    for (case, token) in [
        ("the OpenClaw token", OPENCLAW_TOKEN.to_owned()),
        ("the session's own token", mcp_token),
    ] {
        let reply = mcp_post(&view_url(&server), &list)
            .bearer_auth(&token)
            .send()
            .await;
        assert_eq!(
            reply.status(),
            StatusCode::BAD_REQUEST,
            "{case}: {}",
            reply.text()
        );
        assert!(reply.text().contains("session"), "{case}: {}", reply.text());
    }
    // A token for one session's own URL opens that session, not the view.
    let scoped = issuer.token("alice", &session.mcp_url);
    let reply = mcp_post(&view_url(&server), &list)
        .bearer_auth(&scoped)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::UNAUTHORIZED, "{}", reply.text());
    let reply = mcp_post(&session.mcp_url, &list)
        .bearer_auth(&scoped)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    // A user with no sessions has an empty view, not an error.
    let carol = issuer.token("carol", &view_url(&server));
    let reply = mcp_post(&view_url(&server), &list)
        .bearer_auth(&carol)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["result"]["tools"], json!([]));
}

#[tokio::test]
async fn the_same_app_on_two_devices_gets_two_names_that_outlive_each_other() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let laptop = serve(device_app(&server, "alice", "notes", "laptop").name("notes")).await;
    let phone = serve(device_app(&server, "alice", "notes", "phone").name("notes")).await;
    let described = server
        .rest()
        .get_session(&phone.session().session_id)
        .await
        .json();
    assert_eq!(described["name"], "notes_2");
    let token = issuer.token("alice", &view_url(&server));
    let alice = mcp_connect_view(&server.http_url(), &token, ProtocolVersion::V_2025_11_25)
        .await
        .expect("alice's view");
    assert_eq!(
        tool_names(&alice).await,
        ["notes_2__whereami", "notes__whereami"]
    );
    let answered = call_view(&alice, "notes_2__whereami")
        .await
        .expect("a call");
    assert_eq!(answered["app"], "alice:notes:phone");
    let answered = call_view(&alice, "notes__whereami").await.expect("a call");
    assert_eq!(answered["app"], "alice:notes:laptop");
    laptop.shutdown().await.expect("the laptop's app stops");
    // The phone keeps its name; the laptop's tools are gone, and a call of
    // one is refused rather than given to the phone.
    assert_eq!(tool_names(&alice).await, ["notes_2__whereami"]);
    let refused = call_view(&alice, "notes__whereami")
        .await
        .expect_err("the laptop's session ended");
    assert!(refused.contains("none of your sessions"), "{refused}");
    let answered = call_view(&alice, "notes_2__whereami")
        .await
        .expect("a call");
    assert_eq!(answered["app"], "alice:notes:phone");
    phone.shutdown().await.expect("the phone's app stops");
}

/// A raw 2026-07-28 request of `method` to the view.
async fn request_2026(server: &TestServer, token: &str, method: &str) -> Value {
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": method, "params": {"_meta": meta}});
    let reply = mcp_post(&view_url(server), &body)
        .bearer_auth(token)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .send()
        .await;
    assert_eq!(reply.status(), StatusCode::OK, "{}", reply.text());
    reply.json()
}

#[tokio::test]
async fn a_listening_client_hears_the_users_apps_join_and_leave() {
    let issuer = TestIssuer::start().await;
    let server = oauth_server(&issuer).await;
    let _notes = serve(device_app(&server, "alice", "notes", "laptop").name("notes")).await;
    let token = issuer.token("alice", &view_url(&server));
    let listed = request_2026(&server, &token, "tools/list").await;
    assert_eq!(listed["result"]["tools"][0]["name"], "notes__whereami");
    let ttl = listed["result"]["ttlMs"].as_u64().expect("ttlMs");
    assert!(ttl <= 5_000, "a view's list stays fresh {ttl} ms");
    let mut listener = Listener::open_as(
        &view_url(&server),
        &token,
        json!({"toolsListChanged": true, "promptsListChanged": true}),
    )
    .await;
    // Another user's app does not change this view; the user's own does.
    let _bobs = serve(device_app(&server, "bob", "notes", "pc").name("notes")).await;
    let mail = serve(device_app(&server, "alice", "mail", "laptop").name("mail")).await;
    let heard = listener.until("notifications/tools/list_changed").await;
    assert_eq!(heard.len(), 1, "only the tools changed: {heard:?}");
    let listed = request_2026(&server, &token, "tools/list").await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["mail__whereami", "notes__whereami"]);
    mail.shutdown().await.expect("the mail app stops");
    listener.until("notifications/tools/list_changed").await;
    let listed = request_2026(&server, &token, "tools/list").await;
    assert_eq!(listed["result"]["tools"].as_array().map(Vec::len), Some(1));
}
