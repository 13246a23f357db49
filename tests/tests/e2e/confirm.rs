//! The confirmation gate: a tool registered with `confirm` is called only
//! after the MCP client's user accepted a form the proxy itself asks, in
//! each revision's way (a request on the call's SSE answer up to
//! 2025-11-25, an `input_required` round at 2026-07-28). A declined call,
//! or one whose client cannot be asked, never reaches the app: the app's
//! next invocation is of the plain tool called after it.

use openclaw_proxy_core::proto;
use openclaw_proxy_tests::prometheus::Scrape;
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments}})
}

/// POSTs `body` as a 2025-11-25 client.
fn post(session: &TestSession, body: &Value) -> RawRequest {
    mcp_post(&session.mcp_url, body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2025-11-25")
}

/// POSTs a 2026-07-28 `tools/call` of `tool` whose client declares
/// `capabilities`, with `more` params (answers, state).
async fn call_2026(session: &TestSession, tool: &str, capabilities: Value, more: Value) -> Reply {
    let call = ToolsCall2026 {
        tool,
        arguments: json!({"n": 40}),
        client_info: Some(json!({"name": "gate-test", "version": "1"})),
    };
    call.post(&session.mcp_url, &capabilities, &more)
        .send()
        .await
}

/// Answers the app's next invocation, which must be of `tool`.
async fn answer_invocation(app: &mut WsApp, tool: &str) -> Value {
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    assert_eq!(invoke["tool_name"], tool, "{invoke}");
    app.send_json(
        json!({"type": "invoke_result", "request_id": invoke["request_id"],
                         "ok": true, "content": "done"}),
    )
    .await;
    invoke
}

/// Calls `echo_text` and answers it: proves that nothing reached the app
/// before it.
async fn plain_call_comes_next(session: &TestSession, app: &mut WsApp) {
    let echo = tokio::spawn(post(session, &call(99, "echo_text", json!({"text": "x"}))).send());
    answer_invocation(app, "echo_text").await;
    let reply = no_hang(echo).await.expect("the plain call");
    assert_eq!(reply.status(), 200, "{}", reply.text());
}

/// Starts a call of `delete_files` at 2025-11-25; its SSE answer and the
/// confirmation request on it.
async fn asked_to_confirm(session: &TestSession, id: u64) -> (SseStream, Value) {
    let response = post(session, &call(id, "delete_files", json!({"n": 40})))
        .send_streaming()
        .await;
    assert_eq!(response.status(), 200);
    let mut stream = SseStream::of(response);
    let asked = no_hang(stream.next())
        .await
        .expect("the confirmation request");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    (stream, asked)
}

fn counted(server: &TestServer, outcome: &str) -> f64 {
    Scrape::parse(&server.hub.render_metrics())
        .expect("metrics")
        .get(
            "openclaw_proxy_client_requests_total",
            &[("method", "elicitation/create"), ("outcome", outcome)],
        )
        .unwrap_or(0.0)
}

#[tokio::test]
async fn the_user_confirms_before_the_app_sees_the_call_and_a_decline_never_reaches_it() {
    let server = TestServer::start().await;
    let (session, mut app) = gated_session(&server).await;

    // Accepted: the question names the tool, shows the arguments, and only
    // then does the app get the call.
    let (mut stream, asked) = asked_to_confirm(&session, 1).await;
    let message = asked["params"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(GATED_QUESTION), "{message}");
    assert!(message.contains("\"delete_files\""), "{message}");
    assert!(message.contains(r#"{"n":40}"#), "{message}");
    assert_eq!(asked["params"]["mode"], "form", "{asked}");
    let accept = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}});
    let reply = post(&session, &accept).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let invoke = answer_invocation(&mut app, "delete_files").await;
    assert_eq!(invoke["arguments"], json!({"n": 40}), "{invoke}");
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["id"], 1, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");

    // Declined, then cancelled: error results that say so, and the app's
    // next invocation is the plain call made after them.
    for (id, action, says) in [(2, "decline", "declined"), (3, "cancel", "cancelled")] {
        let (mut stream, asked) = asked_to_confirm(&session, id).await;
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": action}});
        let reply = post(&session, &answer).send().await;
        assert_eq!(reply.status(), 202, "{}", reply.text());
        let result = no_hang(stream.next()).await.expect("the result");
        assert_eq!(result["id"], id, "{result}");
        let text = error_text(&result["result"]);
        assert!(text.contains(says) && text.contains("not run"), "{text}");
        // Answered once: a second answer finds nothing waiting.
        let again = post(&session, &answer).send().await;
        assert!(again.status().is_client_error(), "{}", again.text());
        plain_call_comes_next(&session, &mut app).await;
    }
    assert_eq!(counted(&server, "answered"), 3.0);
}

#[tokio::test]
async fn at_2026_07_28_the_confirmation_is_an_input_required_round() {
    let server = TestServer::start().await;
    let (session, mut app) = gated_session(&server).await;
    let elicits = json!({"elicitation": {}});

    let first = call_2026(&session, "delete_files", elicits.clone(), json!({})).await;
    assert_eq!(first.status(), 200, "{}", first.text());
    let result = first.json()["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{result}");
    let request = &result["inputRequests"]["confirm"];
    assert_eq!(request["method"], "elicitation/create", "{result}");
    assert!(
        request["params"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("\"delete_files\"")),
        "{result}"
    );
    let state = result["requestState"].as_str().expect("requestState");

    // The retry with the user's yes: the app gets the call, once.
    let retry = json!({"inputResponses": {"confirm": {"action": "accept"}},
                       "requestState": state});
    let answered = tokio::spawn({
        let session = session.clone();
        async move { call_2026(&session, "delete_files", json!({"elicitation": {}}), retry).await }
    });
    answer_invocation(&mut app, "delete_files").await;
    let answered = no_hang(answered).await.expect("the retried call");
    assert_eq!(answered.status(), 200, "{}", answered.text());
    assert_eq!(
        answered.json()["result"]["isError"],
        false,
        "{}",
        answered.text()
    );

    // A decline in the retry: an error result, and the app never hears.
    let first = call_2026(&session, "delete_files", elicits.clone(), json!({})).await;
    let state = first.json()["result"]["requestState"]
        .as_str()
        .map(str::to_owned)
        .expect("requestState");
    let retry = json!({"inputResponses": {"confirm": {"action": "decline"}},
                       "requestState": state});
    let declined = call_2026(&session, "delete_files", elicits, retry).await;
    let text = error_text(&declined.json()["result"]);
    assert!(text.contains("declined"), "{text}");
    plain_call_comes_next(&session, &mut app).await;
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_is_refused_unless_the_operator_lets_it_through() {
    let server = TestServer::start().await;
    let (session, mut app) = gated_session(&server).await;
    let refused = call_2026(&session, "delete_files", json!({}), json!({})).await;
    assert_eq!(refused.status(), 200, "{}", refused.text());
    let text = error_text(&refused.json()["result"]);
    assert!(
        text.contains("cannot be asked") && text.contains("OPENCLAW_PROXY_ALLOW_UNCONFIRMED_CALLS"),
        "{text}"
    );
    plain_call_comes_next(&session, &mut app).await;

    // The same over a gRPC registration: the field is the definition's.
    let grpc = TestSession::register_grpc(
        &server,
        vec![proto::ToolDefinition {
            name: "wipe".into(),
            confirm: Some(proto::ConfirmCalls::default()),
            ..Default::default()
        }],
    )
    .await;
    let refused = call_2026(&grpc, "wipe", json!({}), json!({})).await;
    assert!(
        error_text(&refused.json()["result"]).contains("cannot be asked"),
        "{}",
        refused.text()
    );

    let lenient = TestServer::builder()
        .core(|core| core.allow_unconfirmed_calls = true)
        .start()
        .await;
    let (session, mut app) = gated_session(&lenient).await;
    let through = tokio::spawn({
        let session = session.clone();
        async move { call_2026(&session, "delete_files", json!({}), json!({})).await }
    });
    answer_invocation(&mut app, "delete_files").await;
    let through = no_hang(through).await.expect("the call");
    assert_eq!(
        through.json()["result"]["isError"],
        false,
        "{}",
        through.text()
    );
}

/// A client up to 2025-11-25 without an elicitation handler (the pinned
/// OpenClaw's, say) answers the gate's question "method not found": it
/// cannot be asked, and the operator's setting decides, as for a client that
/// declared no capability. Any other error from the client is a refusal.
#[tokio::test]
async fn a_client_that_answers_method_not_found_cannot_be_asked_and_the_setting_decides() {
    let cannot_elicit = |asked: &Value| {
        json!({"jsonrpc": "2.0", "id": asked["id"],
               "error": {"code": -32601, "message": "Method not found"}})
    };
    let server = TestServer::start().await;
    let (session, mut app) = gated_session(&server).await;
    let (mut stream, asked) = asked_to_confirm(&session, 1).await;
    let reply = post(&session, &cannot_elicit(&asked)).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let result = no_hang(stream.next()).await.expect("the result");
    let text = error_text(&result["result"]);
    assert!(
        text.contains("cannot be asked") && text.contains("OPENCLAW_PROXY_ALLOW_UNCONFIRMED_CALLS"),
        "{text}"
    );
    // Another error is the client's refusal, not an inability.
    let (mut stream, asked) = asked_to_confirm(&session, 2).await;
    let failed = json!({"jsonrpc": "2.0", "id": asked["id"],
                        "error": {"code": -32603, "message": "the user closed the dialog"}});
    post(&session, &failed).send().await;
    let text = error_text(&no_hang(stream.next()).await.expect("the result")["result"]);
    assert!(!text.contains("cannot be asked"), "{text}");
    plain_call_comes_next(&session, &mut app).await;
    assert_eq!(counted(&server, "client_error"), 2.0);

    let lenient = TestServer::builder()
        .core(|core| core.allow_unconfirmed_calls = true)
        .start()
        .await;
    let (session, mut app) = gated_session(&lenient).await;
    let (mut stream, asked) = asked_to_confirm(&session, 3).await;
    post(&session, &cannot_elicit(&asked)).send().await;
    let invoke = answer_invocation(&mut app, "delete_files").await;
    assert_eq!(invoke["arguments"], json!({"n": 40}), "{invoke}");
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["result"]["isError"], false, "{result}");
}

#[tokio::test]
async fn a_confirm_that_is_neither_a_flag_nor_a_message_is_refused_naming_the_field() {
    let server = TestServer::start().await;
    for (confirm, says) in [
        (json!("yes"), "tools[1].confirm must be true, false or"),
        (
            json!({"message": 5}),
            "tools[1].confirm must be true, false or",
        ),
        (
            json!({"message": "x".repeat(1001)}),
            "tools[1].confirm.message has 1001 characters",
        ),
    ] {
        let mut body = legacy_session_body();
        body["tools"]
            .as_array_mut()
            .expect("tools")
            .push(json!({"name": "delete_files", "confirm": confirm}));
        let reply = server.rest().create_session(&body).await;
        assert_eq!(reply.status(), 400, "{}", reply.text());
        assert!(reply.text().contains(says), "{}", reply.text());
    }
}

#[tokio::test]
async fn each_decision_is_an_audit_line() {
    let mut process = TestServer::builder().env("RUST_LOG", "info").spawn().await;
    let mut body = legacy_session_body();
    body["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "delete_files", "confirm": true}));
    let session = process.rest().token(APP_TOKEN).register(&body).await;
    let refused = call_2026(&session, "delete_files", json!({}), json!({})).await;
    assert!(
        error_text(&refused.json()["result"]).contains("cannot be asked"),
        "{}",
        refused.text()
    );
    let line = process
        .find(|line| line.contains("tool_confirmation").then(|| line.to_owned()))
        .await;
    for field in [
        "decision=\"cannot_ask\"",
        "tool=\"delete_files\"",
        "subject=\"-\"",
    ] {
        assert!(line.contains(field), "{field} in {line}");
    }
}

#[tokio::test]
async fn a_tool_that_needs_client_capabilities_refuses_a_2026_call_whose_client_lacks_them() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["tools"] = json!([body["tools"][0], {"name": "summarise",
        "requires": {"clientCapabilities": ["sampling", "elicitation.url"]}}]);
    let session = TestSession::register(&server, &body).await;
    let mut app = WsApp::attached(&server, &session).await;
    let call = ToolsCall2026 {
        tool: "summarise",
        arguments: json!({}),
        client_info: None,
    };

    // Neither declared, then one of the two: refused before the app sees
    // anything, naming what is missing as a ClientCapabilities object.
    for (declared, missing, named) in [
        (
            json!({}),
            json!({"elicitation": {"url": {}}, "sampling": {}}),
            "elicitation.url, sampling",
        ),
        (
            json!({"sampling": {}, "elicitation": {}}),
            json!({"elicitation": {"url": {}}}),
            "elicitation.url",
        ),
    ] {
        let refused = call
            .post(&session.mcp_url, &declared, &json!({}))
            .send()
            .await;
        assert_eq!(refused.status(), 400, "{declared}: {}", refused.text());
        let refused = refused.json();
        assert_eq!(refused["id"], 9, "{refused}");
        assert_eq!(refused["error"]["code"], -32021, "{refused}");
        assert_eq!(
            refused["error"]["data"]["requiredCapabilities"], missing,
            "{refused}"
        );
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("summarise") && message.ends_with(named),
            "{refused}"
        );
    }

    plain_call_comes_next(&session, &mut app).await;

    // Both declared: the call reaches the app and its answer comes back.
    let declared = json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}});
    let reply = tokio::spawn(call.post(&session.mcp_url, &declared, &json!({})).send());
    answer_invocation(&mut app, "summarise").await;
    let reply = no_hang(reply).await.expect("the call");
    assert_eq!(reply.status(), 200, "{}", reply.text());
    assert!(reply.text().contains("done"), "{}", reply.text());

    // Before 2026-07-28 the capabilities are not known per request: the
    // call goes through.
    let old = tokio::spawn(post(&session, &call_of("summarise")).send());
    answer_invocation(&mut app, "summarise").await;
    let old = no_hang(old).await.expect("the 2025-11-25 call");
    assert_eq!(old.status(), 200, "{}", old.text());
    assert!(!old.text().contains("-32021"), "{}", old.text());

    // A capability no client has is refused at registration, by name, on
    // the REST surface and in a tool update alike.
    let mut unknown = legacy_session_body();
    unknown["tools"][0]["requires"] = json!({"client_capabilities": ["telepathy"]});
    let unknown_tools = json!({"tools": unknown["tools"]});
    let refused = server.rest().create_session(&unknown).await;
    assert_eq!(refused.status(), 400, "{}", refused.text());
    assert!(
        refused
            .text()
            .contains("tools[0].requires.client_capabilities")
            && refused.text().contains("telepathy"),
        "{}",
        refused.text()
    );
    let refused = server.rest().put_tools(&session.id, &unknown_tools).await;
    assert_eq!(refused.status(), 400, "{}", refused.text());
    assert!(refused.text().contains("telepathy"), "{}", refused.text());
}

fn call_of(tool: &str) -> Value {
    call(31, tool, json!({}))
}
