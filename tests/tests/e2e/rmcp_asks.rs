//! An app's requests to the MCP client, and the confirmation gate, on a
//! `tools/call` the edge leaves to rmcp (here: one with an unknown params
//! field; its answers carry no `openclaw-proxy-served-by: direct`). Up to
//! 2025-11-25 the request goes on the call's SSE answer with an id the
//! proxy mints and the client's POSTed response reaches the app, as on the
//! direct path; at 2026-07-28 such a call cannot go in `input_required`
//! rounds, and the app is told so at once, or told which capability the
//! client did not declare.

use openclaw_proxy_tests::listening::Open;
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

/// A `tools/call` of `tool` that only rmcp takes: an unknown params field.
fn unusual_call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": tool, "arguments": arguments, "x-extension": {"k": 1}}})
}

/// POSTs `body` as a 2025-11-25 client.
fn post(session: &TestSession, body: &Value) -> RawRequest {
    mcp_post(&session.mcp_url, body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2025-11-25")
}

/// POSTs a 2026-07-28 `tools/call` of `tool` with an unknown params field,
/// its client declaring `capabilities`.
fn post_2026(session: &TestSession, tool: &str, capabilities: Value) -> RawRequest {
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
    "name": tool, "arguments": {"n": 40}, "x-extension": {"k": 1},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "rmcp-path-test", "version": "1"},
    }}});
    mcp_post(&session.mcp_url, &body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
}

fn served_by(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("openclaw-proxy-served-by")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// The app's request `id` of the call `request_id`.
fn elicit(request_id: &Value, id: &str, message: &str) -> Value {
    json!({"type": "client_request", "request_id": request_id, "id": id,
           "method": "elicitation/create",
           "params": {"message": message,
                      "requestedSchema": {"type": "object",
                                          "properties": {"name": {"type": "string"}}}}})
}

/// The app's next frame, which must be the client's answer to `id`.
async fn client_response(app: &mut WsApp, id: &str) -> Value {
    let response = no_hang(app.next_json()).await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["id"], id, "{response}");
    response
}

#[tokio::test]
async fn an_app_that_elicits_during_an_rmcp_path_call_gets_the_clients_answers() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::attached(&server, &session).await;
    let call = unusual_call(5, "echo_text", json!({"text": "hi"}));
    // The answer's head comes with its first message: the app's request.
    let response = tokio::spawn(post(&session, &call).send_streaming());
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();
    app.send_json(elicit(&request_id, "who", "Your name?"))
        .await;
    let response = no_hang(response).await.expect("the call's answer");
    assert_eq!(response.status(), 200);
    assert_eq!(served_by(&response), None, "the call went through rmcp");
    let mut stream = SseStream::of(response);
    let asked = no_hang(stream.next())
        .await
        .unwrap_or_else(|| panic!("the request; read {:?}", stream.unread()));
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Your name?", "{asked}");
    assert!(asked["id"].is_string(), "{asked}");

    // The client's answer reaches the app.
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
                        "result": {"action": "accept", "content": {"name": "Ada"}}});
    let reply = post(&session, &answer).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let answered = client_response(&mut app, "who").await;
    assert_eq!(answered["result"]["action"], "accept", "{answered}");
    assert_eq!(answered["result"]["content"]["name"], "Ada", "{answered}");

    // So does its error: a client that cannot elicit says "method not found".
    app.send_json(elicit(&request_id, "again", "Sure?")).await;
    let asked = no_hang(stream.next()).await.expect("the second request");
    assert_eq!(asked["params"]["message"], "Sure?", "{asked}");
    let failed = json!({"jsonrpc": "2.0", "id": asked["id"],
                        "error": {"code": -32601, "message": "Method not found"}});
    let reply = post(&session, &failed).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let answered = client_response(&mut app, "again").await;
    assert_eq!(answered["error"]["code"], -32601, "{answered}");

    // The call ends with the app's result, last on the stream.
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "Ada"}),
    )
    .await;
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["id"], 5, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert_eq!(result["result"]["content"][0]["text"], "Ada", "{result}");
}

#[tokio::test]
async fn at_2026_07_28_an_rmcp_path_call_refuses_the_apps_request_naming_why() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::attached(&server, &session).await;
    for (capabilities, says) in [
        // No elicitation declared: the capability is named.
        (
            json!({"sampling": {}}),
            "did not declare the elicitation capability",
        ),
        // Declared, but this call is answered in one piece.
        (json!({"elicitation": {}}), "input_required"),
    ] {
        let call = tokio::spawn(post_2026(&session, "echo_text", capabilities.clone()).send());
        let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
        let request_id = invoke["request_id"].clone();
        app.send_json(elicit(&request_id, "who", "Your name?"))
            .await;
        let refused = client_response(&mut app, "who").await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{capabilities}: {refused}");
        app.send_json(
            json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "x"}),
        )
        .await;
        let reply = no_hang(call).await.expect("the call");
        assert_eq!(reply.status(), 200, "{}", reply.text());
        assert_eq!(reply.header("openclaw-proxy-served-by"), None);
        assert_eq!(reply.json()["result"]["isError"], false, "{}", reply.text());
    }
}

#[tokio::test]
async fn a_gated_tool_on_the_rmcp_path_asks_for_confirmation_first() {
    let server = TestServer::start().await;
    let (session, mut app) = gated_session(&server).await;
    for (id, action) in [(1, "accept"), (2, "decline")] {
        let response = post(
            &session,
            &unusual_call(id, "delete_files", json!({"n": 40})),
        )
        .send_streaming()
        .await;
        assert_eq!(response.status(), 200);
        assert_eq!(served_by(&response), None, "the call went through rmcp");
        let mut stream = SseStream::of(response);
        let asked = no_hang(stream.next())
            .await
            .unwrap_or_else(|| panic!("the confirmation request; read {:?}", stream.unread()));
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        let message = asked["params"]["message"].as_str().unwrap_or_default();
        assert!(message.starts_with(GATED_QUESTION), "{message}");
        assert!(message.contains("\"delete_files\""), "{message}");
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": action}});
        let reply = post(&session, &answer).send().await;
        assert_eq!(reply.status(), 202, "{}", reply.text());
        if action == "accept" {
            let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
            assert_eq!(invoke["tool_name"], "delete_files", "{invoke}");
            app.send_json(
                json!({"type": "invoke_result", "request_id": invoke["request_id"],
                                 "ok": true, "content": "deleted"}),
            )
            .await;
        }
        let result = no_hang(stream.next()).await.expect("the result");
        assert_eq!(result["id"], id, "{result}");
        if action == "accept" {
            assert_eq!(result["result"]["isError"], false, "{result}");
        } else {
            let text = error_text(&result["result"]);
            assert!(
                text.contains("declined") && text.contains("not run"),
                "{text}"
            );
        }
    }

    // At 2026-07-28 the question cannot be asked on this path: the call is
    // refused, saying why, and the app never sees it.
    let refused = post_2026(&session, "delete_files", json!({"elicitation": {}}))
        .send()
        .await;
    assert_eq!(refused.status(), 200, "{}", refused.text());
    let text = error_text(&refused.json()["result"]);
    assert!(
        text.contains("cannot be asked")
            && text.contains("input_required")
            && text.contains("OPENCLAW_PROXY_ALLOW_UNCONFIRMED_CALLS"),
        "{text}"
    );
    let echo = tokio::spawn(
        post(
            &session,
            &unusual_call(7, "echo_text", json!({"text": "x"})),
        )
        .send(),
    );
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    assert_eq!(
        invoke["tool_name"], "echo_text",
        "nothing came before: {invoke}"
    );
    app.send_json(
        json!({"type": "invoke_result", "request_id": invoke["request_id"],
                         "ok": true, "content": "x"}),
    )
    .await;
    let reply = no_hang(echo).await.expect("the plain call");
    assert_eq!(reply.status(), 200, "{}", reply.text());
}

/// A `prompts/get` left to rmcp (a `_meta` key given twice) whose app asks
/// the client's roots: the request goes on the answer's stream, the answer
/// reaches the app, and the prompt comes last.
#[tokio::test]
async fn a_prompt_on_the_rmcp_path_asks_too() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["prompts"] = json!([{"name": "summarise", "description": "Summarise a ticket"}]);
    let session = TestSession::register(&server, &body).await;
    let mut app = WsApp::attached(&server, &session).await;
    let request = json!({"jsonrpc": "2.0", "id": 3, "method": "prompts/get",
                         "params": {"name": "summarise"}});
    let response = tokio::spawn(
        Rest::default()
            .mcp_raw(&session.mcp_url, with_a_meta_key_twice(&request))
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2025-11-25")
            .send_streaming(),
    );
    let asked_for = no_hang(app.next_json()).await.expect("mcp_request");
    assert_eq!(asked_for["method"], "prompts/get", "{asked_for}");
    let request_id = asked_for["request_id"].clone();
    app.send_json(
        json!({"type": "client_request", "request_id": request_id, "id": "roots",
                         "method": "roots/list", "params": {}}),
    )
    .await;
    let response = no_hang(response).await.expect("the answer");
    assert_eq!(response.status(), 200);
    assert_eq!(served_by(&response), None, "the request went through rmcp");
    let mut stream = SseStream::of(response);
    let asked = no_hang(stream.next())
        .await
        .unwrap_or_else(|| panic!("the request; read {:?}", stream.unread()));
    assert_eq!(asked["method"], "roots/list", "{asked}");
    let answer = json!({"jsonrpc": "2.0", "id": asked["id"],
                        "result": {"roots": [{"uri": "file:///work", "name": "work"}]}});
    let reply = post(&session, &answer).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let answered = client_response(&mut app, "roots").await;
    assert_eq!(
        answered["result"]["roots"][0]["uri"], "file:///work",
        "{answered}"
    );
    app.send_json(
        json!({"type": "mcp_result", "request_id": request_id, "result": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "work"}}]}}),
    )
    .await;
    let result = no_hang(stream.next()).await.expect("the prompt");
    assert_eq!(result["id"], 3, "{result}");
    assert_eq!(
        result["result"]["messages"][0]["content"]["text"], "work",
        "{result}"
    );
}

/// The same over the legacy HTTP+SSE transport: the request left to rmcp
/// is answered on the client's stream, the app's request with it.
#[tokio::test]
async fn over_the_legacy_transport_the_request_goes_on_the_clients_stream() {
    let server = TestServer::start().await;
    let session = TestSession::legacy(&server).await;
    let mut app = WsApp::attached(&server, &session).await;
    let mut client = LegacyClient::open(&server.http_url(), &session.id, Open::Path).await;
    client.request(&initialize_body(1, "2024-11-05")).await;
    let (status, _) = client
        .post(&unusual_call(2, "echo_text", json!({"text": "hi"})))
        .await;
    assert_eq!(status, 202);
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();
    app.send_json(elicit(&request_id, "who", "Your name?"))
        .await;
    let asked = no_hang(client.next_message()).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let (status, text) = client
        .post(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "decline"}}))
        .await;
    assert_eq!(status, 202, "{text}");
    let answered = client_response(&mut app, "who").await;
    assert_eq!(answered["result"]["action"], "decline", "{answered}");
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "-"}),
    )
    .await;
    let result = no_hang(client.next_message()).await;
    assert_eq!(result["id"], 2, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");
}
