//! An app's requests to the MCP client during a call, on the streamable
//! endpoint, driven raw. Up to 2025-11-25 the request arrives on the call's
//! SSE answer, the client POSTs its response, and every way a wait can end
//! (answered, the client gone, the client cancelling, the app's bridge
//! gone, the session deleted) leaves nothing pending, tells both sides why
//! and is counted in `/metrics`. Responses that answer nothing waiting
//! (twice, unknown, late, another session's) and 2026-07-28 retries whose
//! `requestState` resumes nothing (another session's, tampered) are refused
//! with a JSON-RPC error that says why, counted, and the session goes on
//! serving. A URL-mode elicitation reaches a 2026-07-28 client that
//! declared `elicitation.url`, and is refused naming it for one that did
//! not.

use std::time::Duration;

use openclaw_proxy_tests::prometheus::Scrape;
use openclaw_proxy_tests::*;
use serde_json::{Value, json};

/// POSTs `body` to the session's MCP URL as a 2025-11-25 client.
fn post(session: &TestSession, body: &Value) -> RawRequest {
    mcp_post(&session.mcp_url, body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2025-11-25")
}

/// Starts a call whose app asks the client to confirm; returns the call's
/// stream, the app's request id of the call and the request the client got.
async fn asking_call(session: &TestSession, app: &mut WsApp) -> (SseStream, Value, Value) {
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo_text", "arguments": {"text": "delete"}}});
    // The answer's head comes with its first message: the app's request.
    let response = tokio::spawn(post(session, &call).send_streaming());
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();
    app.send_json(
        json!({"type": "client_request", "request_id": request_id, "id": "confirm",
        "method": "elicitation/create",
        "params": {"message": "Really?", "requestedSchema": {"type": "object", "properties": {}}}}),
    )
    .await;
    let response = no_hang(response).await.expect("the call's answer");
    assert_eq!(response.status(), 200);
    let mut stream = SseStream::of(response);
    let asked = no_hang(stream.next())
        .await
        .unwrap_or_else(|| panic!("the request; read {:?}", stream.unread()));
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    (stream, request_id, asked)
}

/// A session with a WebSocket app answered by hand.
async fn session_with_app(server: &TestServer) -> (TestSession, WsApp) {
    let session = TestSession::legacy(server).await;
    let app = WsApp::attached(server, &session).await;
    (session, app)
}

fn scrape(server: &TestServer) -> Scrape {
    Scrape::parse(&server.hub.render_metrics()).expect("metrics")
}

fn counted(server: &TestServer, outcome: &str) -> f64 {
    counted_as(server, "elicitation/create", outcome)
}

fn counted_as(server: &TestServer, method: &str, outcome: &str) -> f64 {
    scrape(server)
        .get(
            "openclaw_proxy_client_requests_total",
            &[("method", method), ("outcome", outcome)],
        )
        .unwrap_or(0.0)
}

/// The text of a JSON-RPC error, or of an error result.
fn why(message: &Value) -> String {
    let text = if message["error"].is_object() {
        &message["error"]["message"]
    } else {
        assert_eq!(message["result"]["isError"], true, "{message}");
        &message["result"]["content"][0]["text"]
    };
    text.as_str().unwrap_or_default().to_owned()
}

/// The app's next frame: an error `client_response` for its request
/// `confirm`; its message.
async fn app_told(app: &mut WsApp) -> String {
    let response = no_hang(app.next_json()).await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["id"], "confirm", "{response}");
    response["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an error: {response}"))
        .to_owned()
}

/// A plain call of `echo_text`, answered by the app: the session serves on.
async fn a_plain_call_succeeds(session: &TestSession, app: &mut WsApp) {
    let call = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": "echo_text", "arguments": {"text": "still here"}}});
    let reply = tokio::spawn(post(session, &call).send());
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    assert_eq!(invoke["type"], "invoke_tool", "{invoke}");
    app.send_json(
        json!({"type": "invoke_result", "request_id": invoke["request_id"],
                         "ok": true, "content": "still here"}),
    )
    .await;
    let reply = no_hang(reply).await.expect("the plain call");
    assert_eq!(reply.status(), 200, "{}", reply.text());
    let text = reply.text();
    assert!(
        text.contains("still here") && !text.contains("\"isError\":true"),
        "{text}"
    );
}

async fn nothing_pending(server: &TestServer, after: &str) {
    eventually(
        &format!("no request pending after {after}"),
        Duration::from_secs(10),
        || async move { scrape(server).value("openclaw_proxy_client_requests_pending", &[]) == 0.0 },
    )
    .await;
}

#[tokio::test]
async fn an_answer_reaches_the_app_and_bad_answers_are_refused_naming_why() {
    let server = TestServer::start().await;
    let (session, mut app) = session_with_app(&server).await;
    let (mut stream, request_id, asked) = asking_call(&session, &mut app).await;
    assert_eq!(
        scrape(&server).value("openclaw_proxy_client_requests_pending", &[]),
        1.0
    );

    let answer =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}});
    let reply = post(&session, &answer).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let response = no_hang(app.next_json()).await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["result"]["action"], "accept");
    nothing_pending(&server, "the answer").await;

    // Twice: nothing waits for it any more.
    let reply = post(&session, &answer).send().await;
    assert_eq!(reply.status(), 409, "{}", reply.text());
    let message = why(&reply.json());
    assert!(
        message.contains("no request with this id is waiting"),
        "{message}"
    );
    // An id the proxy never gave, and one of another session.
    for id in [
        json!("no-such-request"),
        json!(format!("{}:1/confirm", "another-session")),
    ] {
        let reply = post(&session, &json!({"jsonrpc": "2.0", "id": id, "result": {}}))
            .send()
            .await;
        assert_eq!(reply.status(), 400, "{id}: {}", reply.text());
        let message = why(&reply.json());
        assert!(
            message.contains("is not the id of a request this session's app sent"),
            "{id}: {message}"
        );
    }
    assert_eq!(counted_as(&server, "other", "unmatched"), 3.0);

    // The call goes on and ends with the app's answer.
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "done"}),
    )
    .await;
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["id"], 5, "{result}");
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert_eq!(counted(&server, "answered"), 1.0);

    // Late: the app ends its call without waiting for the client, whose
    // answer then comes for a call that is over.
    let (mut stream, request_id, asked) = asking_call(&session, &mut app).await;
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "never mind"}),
    )
    .await;
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["result"]["isError"], false, "{result}");
    nothing_pending(&server, "the call ended").await;
    let late =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {}}});
    let reply = post(&session, &late).send().await;
    assert_eq!(reply.status(), 409, "{}", reply.text());
    let message = why(&reply.json());
    assert!(
        message.contains("the call this answers is no longer running"),
        "{message}"
    );
    assert_eq!(counted_as(&server, "other", "unmatched"), 4.0);
    assert_eq!(counted(&server, "abandoned"), 1.0);
    assert_eq!(counted(&server, "answered"), 1.0);

    // None of it disturbed the session.
    a_plain_call_succeeds(&session, &mut app).await;
}

#[tokio::test]
async fn every_way_a_wait_ends_leaves_nothing_pending() {
    let server = TestServer::start().await;

    // The client goes away: the call and its request end; the app hears
    // why for its request, then the cancel.
    let (session, mut app) = session_with_app(&server).await;
    let (stream, _, _) = asking_call(&session, &mut app).await;
    drop(stream);
    let told = app_told(&mut app).await;
    assert!(
        told.contains("the call ended before the MCP client answered elicitation/create")
            && told.contains("went away"),
        "{told}"
    );
    let cancel = no_hang(app.next_json()).await.expect("cancel_tool");
    assert_eq!(cancel["type"], "cancel_tool", "{cancel}");
    nothing_pending(&server, "the client went away").await;

    // The client cancels the call while the app's request waits for it:
    // the wait ends at once, the app hears why, then the cancel; the client
    // is told its request was cancelled.
    let (mut stream, request_id, _) = asking_call(&session, &mut app).await;
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "the user gave up"}});
    let reply = post(&session, &cancelled).send().await;
    assert_eq!(reply.status(), 202, "{}", reply.text());
    let told = app_told(&mut app).await;
    assert!(
        told.contains("the call ended before the MCP client answered elicitation/create")
            && told.contains("cancelled"),
        "{told}"
    );
    let cancel = no_hang(app.next_json()).await.expect("cancel_tool");
    assert_eq!(cancel["type"], "cancel_tool", "{cancel}");
    assert_eq!(cancel["request_id"], request_id, "{cancel}");
    let end = no_hang(stream.next()).await.expect("the call's end");
    assert!(why(&end).contains("cancelled by the client"), "{end}");
    nothing_pending(&server, "the client cancelled").await;
    a_plain_call_succeeds(&session, &mut app).await;

    // The app's bridge ends: the client hears the call failed, and why.
    let (mut stream, _, _) = asking_call(&session, &mut app).await;
    drop(app);
    let result = no_hang(stream.next()).await.expect("the call's end");
    let message = why(&result);
    assert!(message.contains("bridge disconnected"), "{message}");
    nothing_pending(&server, "the bridge ended").await;

    // The session is deleted: the client hears so, and the app's bridge
    // closes saying so.
    let (session, mut app) = session_with_app(&server).await;
    let (mut stream, _, _) = asking_call(&session, &mut app).await;
    let deleted = server.rest().delete_session(&session.id).await;
    assert!(deleted.status().is_success(), "{}", deleted.text());
    let result = no_hang(stream.next()).await.expect("the call's end");
    let message = why(&result);
    assert!(message.contains("session was deleted"), "{message}");
    let (_, reason) = no_hang(app.closed()).await;
    assert!(reason.contains("the session was deleted"), "{reason}");
    nothing_pending(&server, "the session was deleted").await;

    assert_eq!(counted(&server, "abandoned"), 4.0);
    assert_eq!(counted(&server, "answered"), 0.0);
}

/// POSTs a 2026-07-28 `tools/call` of `echo_text` to `session`, its client
/// declaring `capabilities`, with `more` params (answers, state).
fn call_2026(session: &TestSession, capabilities: &Value, more: Value) -> RawRequest {
    let call = ToolsCall2026 {
        tool: "echo_text",
        arguments: json!({"text": "ask"}),
        client_info: None,
    };
    call.post(&session.mcp_url, capabilities, &more)
}

/// Starts a 2026-07-28 call whose app asks `params` of an
/// `elicitation/create` under the key `confirm`; the call's request id and
/// the answer: an `input_required` result, or the app's refusal, which it
/// gets at once.
async fn asking_call_2026(
    session: &TestSession,
    app: &mut WsApp,
    capabilities: &Value,
    params: Value,
) -> (Value, tokio::task::JoinHandle<Reply>) {
    let call = tokio::spawn(call_2026(session, capabilities, json!({})).send());
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();
    app.send_json(
        json!({"type": "client_request", "request_id": request_id, "id": "confirm",
                         "method": "elicitation/create", "params": params}),
    )
    .await;
    (request_id, call)
}

/// The `requestState` of an `input_required` answer.
fn state_of(reply: &Reply) -> String {
    assert_eq!(reply.status(), 200, "{}", reply.text());
    let message = reply.json();
    assert_eq!(
        message["result"]["resultType"], "input_required",
        "{message}"
    );
    message["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("requestState: {message}"))
        .to_owned()
}

fn url_elicitation() -> Value {
    json!({"mode": "url", "message": "Sign in to your calendar",
           "url": "https://calendar.example.com/sign-in", "elicitationId": "sign-in-1"})
}

#[tokio::test]
async fn another_sessions_request_state_is_refused_and_counted_and_both_sessions_serve_on() {
    let server = TestServer::start().await;
    let (x, mut x_app) = session_with_app(&server).await;
    let (y, mut y_app) = session_with_app(&server).await;
    let elicits = json!({"elicitation": {}});
    let form =
        json!({"message": "Really?", "requestedSchema": {"type": "object", "properties": {}}});
    let (request_id, call) = asking_call_2026(&x, &mut x_app, &elicits, form).await;
    let state = state_of(&no_hang(call).await.expect("the first round"));

    // X's state replayed on Y: refused as a bad state, naming why.
    let replay =
        json!({"inputResponses": {"confirm": {"action": "accept"}}, "requestState": state});
    let refused = call_2026(&y, &elicits, replay.clone()).send().await;
    assert_eq!(refused.status(), 200, "{}", refused.text());
    let refused = refused.json();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        why(&refused).contains("requestState belongs to another session"),
        "{refused}"
    );
    // A tampered one too.
    let tampered = json!({"inputResponses": {}, "requestState": format!("{state}x")});
    let refused = call_2026(&y, &elicits, tampered).send().await.json();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(counted_as(&server, "other", "bad_state"), 2.0);

    // X's call still waits for its own retry, which resumes it.
    let retry = tokio::spawn(call_2026(&x, &elicits, replay).send());
    let response = no_hang(x_app.next_json()).await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["result"]["action"], "accept", "{response}");
    x_app
        .send_json(json!({"type": "invoke_result", "request_id": request_id,
                          "ok": true, "content": "done"}))
        .await;
    let done = no_hang(retry).await.expect("the retry");
    assert_eq!(done.json()["result"]["isError"], false, "{}", done.text());
    nothing_pending(&server, "the retry").await;
    assert_eq!(counted(&server, "answered"), 1.0);
    // And Y serves on.
    a_plain_call_succeeds(&y, &mut y_app).await;
}

#[tokio::test]
async fn a_url_elicitation_needs_a_client_that_declared_url_mode() {
    let server = TestServer::start().await;
    let (session, mut app) = session_with_app(&server).await;

    // Declared: the request reaches the client, its answer the app.
    let both = json!({"elicitation": {"form": {}, "url": {}}});
    let (request_id, call) = asking_call_2026(&session, &mut app, &both, url_elicitation()).await;
    let first = no_hang(call).await.expect("the first round");
    let state = state_of(&first);
    let asked = &first.json()["result"]["inputRequests"]["confirm"];
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"], url_elicitation(), "{asked}");
    let retry = json!({"inputResponses": {"confirm": {"action": "accept"}}, "requestState": state});
    let retried = tokio::spawn(call_2026(&session, &both, retry).send());
    let response = no_hang(app.next_json()).await.expect("client_response");
    assert_eq!(response["result"]["action"], "accept", "{response}");
    app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                         "ok": true, "content": "signed in"}))
        .await;
    let done = no_hang(retried).await.expect("the retry");
    assert_eq!(done.json()["result"]["isError"], false, "{}", done.text());

    // `elicitation: {}` is form mode only: the app is refused at once,
    // naming the missing capability, and the call goes on.
    let form_only = json!({"elicitation": {}});
    let (request_id, call) =
        asking_call_2026(&session, &mut app, &form_only, url_elicitation()).await;
    let response = no_hang(app.next_json()).await.expect("client_response");
    assert_eq!(response["type"], "client_response", "{response}");
    assert_eq!(response["error"]["code"], -32601, "{response}");
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("did not declare the elicitation.url capability"),
        "{response}"
    );
    app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                         "ok": true, "content": "asked nothing"}))
        .await;
    let done = no_hang(call).await.expect("the call");
    let done = done.json();
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_ne!(done["result"]["resultType"], "input_required", "{done}");
    assert_eq!(counted(&server, "refused"), 1.0);
    assert_eq!(counted(&server, "answered"), 1.0);
    nothing_pending(&server, "both calls").await;
}

/// An app that floods its client with requests, or sends one too large to
/// pass on: each extra request is answered at once with why, the call and
/// the bridge go on, and `/metrics` counts the refusals.
#[tokio::test]
async fn a_flood_of_requests_and_oversized_params_are_refused_each_with_why() {
    // Messages as large as the default allows (4 MiB): a request's params
    // have a bound of their own below that.
    let server = TestServer::builder()
        .edge(|edge| edge.max_body_bytes = 4 * 1024 * 1024)
        .core(|core| core.max_message_bytes = 4 * 1024 * 1024)
        .start()
        .await;
    let (session, mut app) = session_with_app(&server).await;
    // The first request is asked (it is on the stream); four may wait.
    let (mut stream, request_id, _) = asking_call(&session, &mut app).await;
    let ask = |id: String, params: Value| {
        json!({"type": "client_request", "request_id": request_id, "id": id,
               "method": "elicitation/create", "params": params})
    };
    let small =
        json!({"message": "more?", "requestedSchema": {"type": "object", "properties": {}}});
    for n in 0..40 {
        app.send_json(ask(format!("flood-{n}"), small.clone()))
            .await;
    }
    let huge = json!({"message": "x".repeat(1024 * 1024)});
    app.send_json(ask("huge".into(), huge)).await;

    // Three more are asked; the other 37 and the huge one are refused.
    let mut refused = Vec::new();
    while refused.len() < 38 {
        let frame = no_hang(app.next_json()).await.expect("client_response");
        assert_eq!(frame["type"], "client_response", "{frame}");
        assert!(frame["error"]["message"].is_string(), "{frame}");
        refused.push(frame);
    }
    let limit = refused
        .iter()
        .filter(|frame| {
            frame["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("most a call may have"))
        })
        .count();
    assert_eq!(limit, 37, "{refused:?}");
    let huge = refused
        .iter()
        .find(|frame| frame["id"] == "huge")
        .expect("huge");
    assert_eq!(huge["error"]["code"], -32602, "{huge}");
    assert!(
        huge["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("at most 1048576")),
        "{huge}"
    );
    for n in 0..3 {
        let asked = no_hang(stream.next()).await.expect("an asked request");
        assert_eq!(asked["method"], "elicitation/create", "{n}: {asked}");
    }
    assert_eq!(counted(&server, "refused"), 38.0);
    assert_eq!(
        scrape(&server).value("openclaw_proxy_client_requests_pending", &[]),
        4.0
    );

    // The call still ends with the app's answer, and the bridge serves on.
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "done"}),
    )
    .await;
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["result"]["isError"], false, "{result}");
    nothing_pending(&server, "the call ended").await;
    let (mut stream, request_id, _) = asking_call(&session, &mut app).await;
    app.send_json(
        json!({"type": "invoke_result", "request_id": request_id, "ok": true, "content": "again"}),
    )
    .await;
    let result = no_hang(stream.next()).await.expect("the next result");
    assert_eq!(result["result"]["isError"], false, "{result}");
}

#[tokio::test]
async fn a_grpc_apps_request_whose_params_are_not_json_is_refused_to_the_app_and_the_call_goes_on()
{
    use openclaw_proxy_core::proto::{self, app_message, proxy_message};

    let server = TestServer::start().await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("the bridge");
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo_text", "arguments": {"text": "hi"}}});
    let reply = tokio::spawn(post(&session, &call).send());
    let invoke = no_hang(app.next_invoke()).await;

    // Cut JSON, JSON that does not end where the object does, and a
    // control character: each refused to the app as invalid params.
    for (id, params_json) in [
        ("cut", r#"{"a":"#),
        ("trailing", r#"{"message": "x"} {"#),
        ("control", "{\"message\": \"a\u{1}b\"}"),
    ] {
        app.send(app_message::Kind::ClientRequest(proto::ClientRequest {
            request_id: invoke.request_id.clone(),
            id: id.into(),
            method: "elicitation/create".into(),
            params_json: params_json.into(),
        }))
        .await;
        let refused = loop {
            match no_hang(app.raw_message()).await {
                Ok(Some(proxy_message::Kind::ClientResponse(response))) => break response,
                Ok(Some(proxy_message::Kind::Ping(ping))) => app.pong(ping.nonce).await,
                other => panic!("expected the refusal of {id}, got {other:?}"),
            }
        };
        assert_eq!(refused.id, id, "{refused:?}");
        let Some(proto::client_response::Outcome::Error(error)) = refused.outcome else {
            panic!("{id}: expected an error, got {refused:?}");
        };
        assert_eq!(error.code, -32602, "{id}: {error:?}");
        assert!(
            error.message.contains("must be a JSON object"),
            "{id}: {error:?}"
        );
    }

    // The call itself is untouched and ends with the app's answer.
    app.answer(
        &invoke.request_id,
        true,
        r#"[{"type":"text","text":"done"}]"#,
        "",
    )
    .await;
    let reply = no_hang(reply).await.expect("the call's answer");
    assert_eq!(reply.status(), 200, "{}", reply.text());
    assert!(reply.text().contains("done"), "{}", reply.text());
}

#[tokio::test]
async fn a_2026_call_in_rounds_streams_its_notifications_as_they_come_not_at_its_end() {
    let server = TestServer::start().await;
    let (session, mut app) = session_with_app(&server).await;
    // The client can be asked something, so the call goes in rounds.
    let capabilities = json!({"elicitation": {}});
    let more = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/logLevel": "info",
        "progressToken": "p-1"}});
    let response = tokio::spawn(call_2026(&session, &capabilities, more).send_streaming());
    let invoke = no_hang(app.next_json()).await.expect("invoke_tool");
    let request_id = invoke["request_id"].clone();
    app.send_json(json!({"type": "progress", "request_id": request_id,
                         "progress": 1, "total": 3, "message": "one"}))
        .await;
    // The answer's head and its first notification come while the app is
    // still working: nothing waits for the call's end.
    let response = no_hang(response).await.expect("the answer's head");
    assert_eq!(response.status(), 200);
    let mut stream = SseStream::of(response);
    let first = no_hang(stream.next())
        .await
        .expect("the first notification");
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["progressToken"], "p-1", "{first}");
    app.send_json(
        json!({"type": "log", "request_id": request_id, "level": "info",
                         "data": "two"}),
    )
    .await;
    let second = no_hang(stream.next()).await.expect("the log record");
    assert_eq!(second["method"], "notifications/message", "{second}");
    app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                         "ok": true, "content": "three"}))
        .await;
    let last = no_hang(stream.next()).await.expect("the result");
    assert_eq!(last["id"], 9, "{last}");
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    assert!(last.to_string().contains("three"), "{last}");
    assert!(no_hang(stream.next()).await.is_none(), "the stream ends");
}

/// `OPENCLAW_PROXY_CLIENT_REQUEST_TIMEOUT_SECONDS` bounds a request to the
/// client on its own, however long the call's tool timeout: at both
/// revisions a request the client never answers ends at it, the app is told
/// so, and the call goes on to the app's answer.
#[tokio::test]
async fn an_unanswered_request_ends_at_the_client_request_timeout_not_the_tools() {
    let server = TestServer::builder()
        .tool_timeout(Duration::from_secs(600))
        .core(|core| core.client_request_timeout = Duration::from_secs(1))
        .start()
        .await;
    let (session, mut app) = session_with_app(&server).await;
    let not_answered = "the MCP client did not answer elicitation/create within 1 seconds";

    // 2025-11-25: the request is on the call's stream, and nobody answers.
    let (mut stream, request_id, _) = asking_call(&session, &mut app).await;
    let told = app_told(&mut app).await;
    assert!(told.contains(not_answered), "{told}");
    app.send_json(json!({"type": "invoke_result", "request_id": request_id,
                         "ok": true, "content": "asked in vain"}))
        .await;
    let result = no_hang(stream.next()).await.expect("the result");
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert_eq!(counted(&server, "expired"), 1.0);

    // 2026-07-28: the client gets its input_required result and never
    // calls again.
    let elicits = json!({"elicitation": {}});
    let form =
        json!({"message": "Really?", "requestedSchema": {"type": "object", "properties": {}}});
    let (_, call) = asking_call_2026(&session, &mut app, &elicits, form).await;
    state_of(&no_hang(call).await.expect("the first round"));
    let told = app_told(&mut app).await;
    assert!(told.contains(not_answered), "{told}");
    assert_eq!(counted(&server, "expired"), 2.0);
    nothing_pending(&server, "both requests expired").await;
}
