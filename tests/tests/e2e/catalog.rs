//! More than tools: a session declares resources, resource templates and
//! prompts; the proxy lists them from the declaration and sends reads,
//! prompt requests and completions over the bridge as `mcp_request`,
//! answered by the app's `mcp_result`.

use openclaw_proxy_tests::*;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
    Reference, ResourceContents,
};
use serde_json::{Value, json};

/// A registration body with one tool, two resources, a template and a
/// prompt.
fn declaring_body() -> Value {
    let mut body = legacy_session_body();
    body["resources"] = json!([
        {"uri": "notes://welcome", "name": "welcome", "title": "Welcome", "mimeType": "text/plain",
         "size": 13, "annotations": {"audience": ["user"], "priority": 0.5}},
        {"uri": "notes://logo", "name": "logo", "mime_type": "image/png"}
    ]);
    body["resourceTemplates"] = json!([
        {"uriTemplate": "notes://by-id/{id}", "name": "note", "description": "A note by id"}
    ]);
    body["prompts"] = json!([
        {"name": "summarise", "description": "Summarise a ticket",
         "arguments": [{"name": "ticket", "description": "The ticket id", "required": true}]}
    ]);
    body
}

/// Serves `mcp_request` frames as a notes app would, until the socket ends;
/// invocations are echoed.
fn serve_notes(mut app: WsApp) -> tokio::task::JoinHandle<Vec<Value>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "mcp_request" {
                continue;
            }
            seen.push(frame.clone());
            let id = frame["request_id"].clone();
            let params = &frame["params"];
            let answer = match frame["method"].as_str() {
                Some("resources/read") => match params["uri"].as_str() {
                    Some("notes://welcome") => json!({"type": "mcp_result", "request_id": id,
                        "result": {"contents": [{"uri": "notes://welcome", "mimeType": "text/plain", "text": "Hello, agent!"}]}}),
                    Some("notes://logo") => json!({"type": "mcp_result", "requestId": id,
                        "result": {"contents": [{"uri": "notes://logo", "mimeType": "image/png", "blob": "iVBORw0KGgo="}]}}),
                    Some(uri)
                        if uri.starts_with("notes://by-id/") && uri != "notes://by-id/gone" =>
                    {
                        json!({"type": "mcp_result", "request_id": id,
                        "result": {"contents": [{"uri": uri, "text": format!("note {}", &uri[14..])}]}})
                    }
                    other => json!({"type": "mcp_result", "request_id": id,
                        "error": {"code": -32002, "message": "Resource not found", "data": {"uri": other}}}),
                },
                Some("prompts/get") => json!({"type": "mcp_result", "request_id": id, "result": {
                "description": "Summarise a ticket",
                "messages": [
                    {"role": "user", "content": {"type": "text",
                        "text": format!("Summarise ticket {}", params["arguments"]["ticket"].as_str().unwrap_or("?"))}},
                    {"role": "user", "content": {"type": "resource",
                        "resource": {"uri": "notes://welcome", "mimeType": "text/plain", "text": "Hello, agent!"}}}
                ]}}),
                Some("completion/complete") => json!({"type": "mcp_result", "request_id": id,
                    "result": {"completion": {"values": ["T-1", "T-2"], "total": 2, "hasMore": false}}}),
                _ => json!({"type": "mcp_result", "request_id": id,
                    "error": {"code": -32601, "message": "not served"}}),
            };
            app.send_json(answer).await;
        }
        seen
    })
}

#[tokio::test]
async fn resources_and_prompts_are_listed_read_and_fetched_through_a_websocket_app() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;

    // GET shows the declaration.
    let shown = server.rest().get_session(&session.id).await.json();
    assert_eq!(shown["resources"][0]["uri"], "notes://welcome", "{shown}");
    assert_eq!(shown["resources"][1]["mimeType"], "image/png", "{shown}");
    assert_eq!(
        shown["resource_templates"][0]["uriTemplate"],
        "notes://by-id/{id}"
    );
    assert_eq!(shown["prompts"][0]["arguments"][0]["required"], true);

    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let served = serve_notes(app);
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;

    // Lists come from the declaration.
    let resources = client.list_resources(None).await.expect("resources/list");
    let uris: Vec<&str> = resources.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["notes://welcome", "notes://logo"]);
    assert_eq!(resources.resources[0].title.as_deref(), Some("Welcome"));
    let templates = client
        .list_resource_templates(None)
        .await
        .expect("resources/templates/list");
    assert_eq!(
        templates.resource_templates[0].uri_template,
        "notes://by-id/{id}"
    );
    let prompts = client.list_prompts(None).await.expect("prompts/list");
    assert_eq!(prompts.prompts[0].name, "summarise");

    // Reads travel to the app: text, blob, through a template.
    let read = client
        .read_resource(ReadResourceRequestParams::new("notes://welcome"))
        .await
        .expect("read text");
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "Hello, agent!"),
        other => panic!("expected text, got {other:?}"),
    }
    let read = client
        .read_resource(ReadResourceRequestParams::new("notes://logo"))
        .await
        .expect("read blob");
    match &read.contents[0] {
        ResourceContents::BlobResourceContents { blob, .. } => assert_eq!(blob, "iVBORw0KGgo="),
        other => panic!("expected a blob, got {other:?}"),
    }
    let read = client
        .read_resource(ReadResourceRequestParams::new("notes://by-id/42"))
        .await
        .expect("read through the template");
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => assert_eq!(text, "note 42"),
        other => panic!("expected text, got {other:?}"),
    }

    // A URI the session does not serve is the resource-not-found error,
    // carrying the URI, from the proxy; one the app does not have, from
    // the app.
    for missing in ["notes://missing", "notes://by-id/gone"] {
        let error = client
            .read_resource(ReadResourceRequestParams::new(missing))
            .await
            .expect_err("not found");
        let text = format!("{error:?}");
        assert!(text.contains("-32002") && text.contains(missing), "{text}");
    }

    // A prompt, with its argument, and an embedded resource intact.
    let mut arguments = serde_json::Map::new();
    arguments.insert("ticket".into(), json!("T-7"));
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("summarise").with_arguments(arguments))
        .await
        .expect("prompts/get");
    let messages = serde_json::to_value(&prompt.messages).expect("messages");
    assert_eq!(
        messages[0]["content"]["text"], "Summarise ticket T-7",
        "{messages}"
    );
    assert_eq!(
        messages[1]["content"]["resource"]["uri"], "notes://welcome",
        "{messages}"
    );

    // A prompt the session does not declare never reaches the app.
    let error = client
        .get_prompt(GetPromptRequestParams::new("nonexistent"))
        .await
        .expect_err("unknown prompt");
    assert!(format!("{error:?}").contains("summarise"), "{error:?}");

    // Completion.
    let completed = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("summarise"),
            ArgumentInfo::new("ticket", "T"),
        ))
        .await
        .expect("completion/complete");
    assert_eq!(completed.completion.values, ["T-1", "T-2"]);

    client.cancel().await.expect("close");
    drop(served);

    // Counted by method and outcome, as tool calls are.
    let metrics = server.rest().metrics().await.text();
    let count = |method: &str, outcome: &str| {
        metrics
            .lines()
            .find(|line| {
                line.starts_with("openclaw_proxy_app_requests_total")
                    && line.contains(&format!("method=\"{method}\""))
                    && line.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
    };
    assert_eq!(count("resources/read", "ok"), Some(3.0), "{metrics}");
    // The note the app does not have was answered by the app with an
    // error; the URI outside the declarations and the unknown prompt never
    // reached it.
    assert_eq!(
        count("resources/read", "tool_error"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(count("resources/read", "rejected"), Some(1.0), "{metrics}");
    assert_eq!(count("prompts/get", "ok"), Some(1.0), "{metrics}");
    assert_eq!(count("prompts/get", "rejected"), Some(1.0), "{metrics}");
    assert_eq!(count("completion/complete", "ok"), Some(1.0), "{metrics}");
}

#[tokio::test]
async fn app_requests_share_the_sessions_call_limit() {
    for kind in BridgeKind::BOTH {
        app_requests_share_the_call_limit_on(kind).await;
    }
}

async fn app_requests_share_the_call_limit_on(kind: BridgeKind) {
    let server = TestServer::builder()
        .core(|core| core.limits.max_calls_per_session = 1)
        .start()
        .await;
    let session = server.rest().register(&declaring_body()).await;
    let mut app = RequestBridge::attach(kind, &server.http_url(), &session.id).await;
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;
    // The app holds the first read unanswered; a second request is refused.
    let first = tokio::spawn({
        let peer = client.peer().clone();
        async move {
            peer.read_resource(ReadResourceRequestParams::new("notes://welcome"))
                .await
        }
    });
    let held = no_hang(app.next_request()).await.expect("mcp_request");
    assert_eq!(held.method, "resources/read", "{}: {held:?}", kind.name());
    let refused = no_hang(client.get_prompt(GetPromptRequestParams::new("summarise")))
        .await
        .expect_err("over the limit");
    assert!(
        format!("{refused:?}").contains("OPENCLAW_PROXY_MAX_CALLS_PER_SESSION"),
        "{}: {refused:?}",
        kind.name()
    );
    let text_of = json!({"contents": [{"uri": "notes://welcome", "text": "hi"}]});
    app.answer(&held.request_id, Ok(text_of)).await;
    let read = no_hang(first).await.expect("join").expect("the held read");
    match &read.contents[..] {
        [ResourceContents::TextResourceContents { text, .. }] => assert_eq!(text, "hi"),
        other => panic!("{}: expected one text, got {other:?}", kind.name()),
    }
    // Once the read is answered, a prompt fits again.
    let prompt = tokio::spawn({
        let peer = client.peer().clone();
        async move {
            peer.get_prompt(GetPromptRequestParams::new("summarise"))
                .await
        }
    });
    let asked = no_hang(app.next_request()).await.expect("prompts/get");
    assert_eq!(asked.method, "prompts/get");
    let messages =
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "go"}}]});
    app.answer(&asked.request_id, Ok(messages)).await;
    no_hang(prompt)
        .await
        .expect("join")
        .expect("the prompt after the read");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn at_2026_07_28_a_missing_resource_is_invalid_params_and_lists_carry_caching_hints() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let _served = serve_notes(app);
    let post = |body: Value| {
        let mut request = mcp_post(&session.mcp_url, &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", body["method"].as_str().unwrap_or_default());
        if let Some(uri) = body["params"]["uri"].as_str() {
            request = request.header("mcp-name", uri);
        }
        request.send()
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let listed: Value = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list",
                                     "params": {"_meta": meta}}),
    )
    .await
    .json();
    assert_eq!(listed["result"]["cacheScope"], "private", "{listed}");
    assert!(listed["result"]["ttlMs"].as_u64().is_some(), "{listed}");
    let missing: Value = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read",
                                      "params": {"uri": "notes://missing", "_meta": meta}}),
    )
    .await
    .json();
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert_eq!(
        missing["error"]["data"]["uri"], "notes://missing",
        "{missing}"
    );
}

#[tokio::test]
async fn at_2026_07_28_the_apps_answers_keep_their_text_and_get_the_revisions_hints() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let _served = serve_notes(app);
    let ask = |method: &'static str, params: Value| {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let mut params = params;
        params["_meta"] = meta;
        let name = params["uri"]
            .as_str()
            .or(params["name"].as_str())
            .map(str::to_owned);
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
        let body = body.to_string();
        let mut request = Rest::default()
            .mcp_raw(&session.mcp_url, body)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", &name);
        }
        async move {
            let response = request.send().await;
            let status = response.status().as_u16();
            let text = response.text();
            let answer = match serde_json::from_str::<Value>(&text) {
                Ok(answer) => answer,
                Err(_) => sse_messages(&text).pop().unwrap_or_default(),
            };
            (status, text, answer)
        }
    };
    let requests = [
        ("resources/read", json!({"uri": "notes://welcome"})),
        ("resources/read", json!({"uri": "notes://by-id/7"})),
        ("resources/read", json!({"uri": "notes://missing"})),
        (
            "prompts/get",
            json!({"name": "summarise", "arguments": {"ticket": "T-1"}}),
        ),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "summarise"},
                                       "argument": {"name": "ticket", "value": "T"}}),
        ),
    ];
    for (method, params) in requests {
        let (status, text, answer) = ask(method, params.clone()).await;
        assert_eq!(status, 200, "{method} {params}: {text}");
        if params["uri"] == "notes://missing" {
            assert_eq!(answer["error"]["code"], -32602, "{text}");
            assert_eq!(answer["error"]["data"]["uri"], "notes://missing", "{text}");
        } else {
            assert_eq!(
                answer["result"]["resultType"], "complete",
                "{method} {params}: {text}"
            );
        }
    }
    // The app's text is kept as written; the hints 2026-07-28 asks for follow
    // it.
    let (_, text, read) = ask("resources/read", json!({"uri": "notes://welcome"})).await;
    assert_eq!(
        text,
        r#"{"jsonrpc":"2.0","id":9,"result":{"contents":[{"mimeType":"text/plain","text":"Hello, agent!","uri":"notes://welcome"}],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}"#,
        "{read}"
    );
}

#[tokio::test]
async fn a_declaration_with_a_problem_is_refused_naming_its_field() {
    let server = TestServer::start().await;
    let cases = [
        (
            json!([{"uri": "no scheme", "name": "x"}]),
            "resources",
            "resources[0].uri",
        ),
        (
            json!([{"uri": "a:1", "name": "x"}, {"uri": "a:1", "name": "y"}]),
            "resources",
            "resources[1].uri",
        ),
        (json!([{"uri": "a:1"}]), "resources", "resources[0].name"),
        (json!([{"name": "bad name"}]), "prompts", "prompts[0].name"),
        (
            json!([{"uriTemplate": "t:{x}", "name": "t", "icons": [{}]}]),
            "resource_templates",
            "resource_templates[0].icons",
        ),
    ];
    for (list, key, field) in cases {
        let mut body = legacy_session_body();
        body[key] = list;
        let reply = server.rest().create_session(&body).await;
        assert_eq!(reply.status(), 400, "{field}");
        let text = reply.text();
        assert!(text.contains(field), "{field}: {text}");
    }
}

#[tokio::test]
async fn an_update_replaces_the_lists_it_carries_and_keeps_the_others() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;
    let updated = server
        .rest()
        .put_tools(&session.id, &json!({"tools": [], "prompts": []}))
        .await
        .json();
    assert_eq!(updated["prompts"], 0, "{updated}");
    assert_eq!(updated["resources"], 2, "{updated}");
    assert_eq!(updated["resource_templates"], 1, "{updated}");

    // Over the bridge too: an update_tools frame with resources.
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    app.send_json(json!({"type": "update_tools", "tools": [],
                         "resources": [{"uri": "notes://only", "name": "only"}]}))
        .await;
    let answer = loop {
        let frame = app.next_json().await.expect("tools_updated");
        if frame["type"] == "tools_updated" {
            break frame;
        }
    };
    assert_eq!(answer["resources"], 1, "{answer}");
    assert_eq!(answer["resource_templates"], 1, "{answer}");
    let client = mcp_connect(&server.http_url(), &session.id, Route::Path).await;
    let resources = client.list_resources(None).await.expect("resources/list");
    assert_eq!(resources.resources[0].uri, "notes://only");
    client.cancel().await.expect("close");
}

/// At 2026-07-28 a request's `_meta` level decides which of its app's log
/// records reach the client, on the answer's event stream: for a tool call,
/// a read and a prompt alike (the last two on the direct path).
#[tokio::test]
async fn a_websocket_apps_log_records_reach_the_client_at_its_level_and_are_counted() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let app_task = tokio::spawn(async move {
        while let Ok(frame) = app.next_json().await {
            let id = frame["request_id"].clone();
            let answer = match (frame["type"].as_str(), frame["method"].as_str()) {
                (Some("invoke_tool"), _) => {
                    json!({"type": "invoke_result", "request_id": id, "ok": true, "content": "done"})
                }
                (Some("mcp_request"), Some("resources/read")) => {
                    json!({"type": "mcp_result", "request_id": id, "result": {"contents": [
                        {"uri": frame["params"]["uri"], "text": "Hello, agent!"}]}})
                }
                (Some("mcp_request"), Some("prompts/get")) => {
                    json!({"type": "mcp_result", "request_id": id, "result": {"messages": [
                        {"role": "user", "content": {"type": "text", "text": "Summarise"}}]}})
                }
                _ => continue,
            };
            for (level, data) in [
                ("debug", json!("too detailed")),
                ("warning", json!({"disk": "low"})),
            ] {
                app.send_json(json!({"type": "log", "request_id": id, "level": level,
                                     "logger": "echo", "data": data}))
                    .await;
            }
            app.send_json(json!({"type": "log", "request_id": id, "level": "loud", "data": 1}))
                .await;
            app.send_json(answer).await;
        }
    });
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                      "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/logLevel": "info"});
    let requests = [
        (
            "tools/call",
            "echo_text",
            json!({"name": "echo_text", "arguments": {"text": "x"}}),
        ),
        (
            "resources/read",
            "notes://welcome",
            json!({"uri": "notes://welcome"}),
        ),
        (
            "prompts/get",
            "summarise",
            json!({"name": "summarise", "arguments": {"ticket": "T-1"}}),
        ),
    ];
    for (id, (method, name, mut params)) in (1..).zip(requests) {
        params["_meta"] = meta.clone();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = mcp_post(&session.mcp_url, &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method)
            .header("mcp-name", name)
            .header("accept", "application/json, text/event-stream")
            .send()
            .await;
        let messages = sse_messages(&reply.text());
        let logs: Vec<&Value> = messages
            .iter()
            .filter(|message| message["method"] == "notifications/message")
            .collect();
        assert_eq!(
            logs.len(),
            1,
            "{method}: only the warning is at info or above: {messages:?}"
        );
        assert_eq!(logs[0]["params"]["level"], "warning", "{method}");
        assert_eq!(logs[0]["params"]["logger"], "echo", "{method}");
        assert_eq!(
            logs[0]["params"]["data"],
            json!({"disk": "low"}),
            "{method}"
        );
        let answer = messages.last().expect("the answer");
        assert_eq!(
            answer["id"], id,
            "{method}: the answer comes last: {messages:?}"
        );
        assert!(answer["result"].is_object(), "{method}: {answer}");
    }

    let metrics = server.rest().metrics().await.text();
    let count = |outcome: &str| {
        metrics
            .lines()
            .find(|line| {
                line.starts_with("openclaw_proxy_app_log_records_total")
                    && line.contains(&format!("outcome=\"{outcome}\""))
            })
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse::<f64>().ok())
    };
    assert_eq!(count("forwarded"), Some(3.0), "{metrics}");
    assert_eq!(count("unwanted"), Some(3.0), "{metrics}");
    app_task.abort();
}

#[tokio::test]
async fn a_listening_2026_client_hears_of_updated_resources_and_changed_lists() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let mut listener = Listener::open(&session.mcp_url, &["notes://welcome"]).await;

    // The app says a resource nobody watches changed, then a subscribed one.
    app.send_json(json!({"type": "resource_updated", "uri": "notes://logo"}))
        .await;
    app.send_json(json!({"type": "resource_updated", "uri": "notes://welcome"}))
        .await;
    let heard = listener.until("notifications/resources/updated").await;
    let updates: Vec<&Value> = heard
        .iter()
        .filter(|message| message["method"] == "notifications/resources/updated")
        .collect();
    assert_eq!(updates.len(), 1, "{heard:?}");
    assert_eq!(updates[0]["params"]["uri"], "notes://welcome");

    // An update changes the prompts but not the resources.
    let reply = server
        .rest()
        .put_tools(&session.id, &json!({"tools": [], "prompts": []}))
        .await;
    assert_eq!(reply.status(), 200);
    let heard = listener.until("notifications/prompts/list_changed").await;
    assert!(
        !heard
            .iter()
            .any(|message| message["method"] == "notifications/resources/list_changed"),
        "the resources did not change: {heard:?}"
    );
}

#[tokio::test]
async fn a_read_comes_back_as_the_app_wrote_it_every_number_intact() {
    let server = TestServer::start().await;
    let session = server.rest().register(&declaring_body()).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let exact = r#"{"contents":[{"uri":"notes://welcome","text":"hi"}],"_meta":{"big":123456789012345678901234567890,"huge":1e400,"precise":0.1000000000000000055511151231257827}}"#;
    let answered = tokio::spawn(async move {
        let frame = app.next_json().await.expect("mcp_request");
        assert_eq!(frame["params"]["extra"], json!({"kept": true}), "{frame}");
        let id = frame["request_id"].as_str().expect("request id").to_owned();
        let text = format!(r#"{{"type":"mcp_result","request_id":"{id}","result":{exact}}}"#);
        app.send(tokio_tungstenite::tungstenite::Message::Text(text.into()))
            .await;
        app
    });
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read",
                      "params": {"uri": "notes://welcome", "extra": {"kept": true}}});
    let reply = mcp_post(&session.mcp_url, &body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2025-11-25")
        .header("accept", "application/json, text/event-stream")
        .send()
        .await;
    assert_eq!(reply.status(), 200);
    assert_eq!(
        reply.text(),
        format!(r#"{{"jsonrpc":"2.0","id":5,"result":{exact}}}"#)
    );
    let _app = answered.await.expect("join");
}

/// A read is matched against the session's resources and its templates'
/// expansions (RFC 6570): one outside them all is refused by the proxy
/// with the not-found error of the caller's revision and never reaches the
/// app, however many templates the session has.
#[tokio::test]
async fn a_read_outside_the_declarations_never_reaches_the_app() {
    let server = TestServer::start().await;
    let mut body = legacy_session_body();
    body["resources"] = json!([
        {"uri": "notes:///7", "name": "seven"},
        {"uri": "files:///logo.png", "name": "logo"}
    ]);
    body["resourceTemplates"] = json!([
        {"uriTemplate": "notes:///{id}", "name": "note"},
        {"uriTemplate": "docs://{+path}", "name": "doc"},
        {"uriTemplate": "search://items{?q,limit}", "name": "search"}
    ]);
    let session = server.rest().register(&body).await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    let served = serve_any(app);
    let read = |uri: &str, revision: &str| {
        let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read",
                              "params": {"uri": uri}});
        let mut request = if revision == "2026-07-28" {
            body["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}});
            mcp_post(&session.mcp_url, &body)
                .header("mcp-method", "resources/read")
                .header("mcp-name", uri)
        } else {
            mcp_post(&session.mcp_url, &body)
        };
        request = request
            .bearer_auth(OPENCLAW_TOKEN)
            .header("mcp-protocol-version", revision);
        request.send()
    };
    let outside = [
        "other:///x",
        "notes:///a/b",
        "notes:///7?x",
        "files:///other.png",
        "docs:/x",
        "search://items#q",
    ];
    for uri in outside {
        for (revision, code) in [("2025-11-25", -32002), ("2026-07-28", -32602)] {
            let reply = read(uri, revision).await.json();
            assert_eq!(reply["error"]["code"], code, "{uri} at {revision}: {reply}");
            assert_eq!(reply["error"]["data"]["uri"], uri, "{uri}: {reply}");
        }
    }
    let inside = [
        "notes:///7",
        "notes:///9",
        "files:///logo.png",
        "docs://guide/intro.md",
        "search://items?q=cat&limit=5",
    ];
    for uri in inside {
        let reply = read(uri, "2025-11-25").await.json();
        assert_eq!(reply["result"]["contents"][0]["uri"], uri, "{uri}: {reply}");
    }
    server.rest().delete_session(&session.id).await;
    let seen = no_hang(served).await.expect("the app");
    let read: Vec<&str> = seen
        .iter()
        .filter_map(|frame| frame["params"]["uri"].as_str())
        .collect();
    assert_eq!(read, inside, "what reached the app");
}

/// Serves every `mcp_request` read with contents naming its URI, until the
/// socket ends; the frames seen.
fn serve_any(mut app: WsApp) -> tokio::task::JoinHandle<Vec<Value>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(frame) = app.next_json().await {
            if frame["type"] != "mcp_request" {
                continue;
            }
            let uri = frame["params"]["uri"].clone();
            app.send_json(
                json!({"type": "mcp_result", "request_id": frame["request_id"],
                "result": {"contents": [{"uri": uri, "text": "here"}]}}),
            )
            .await;
            seen.push(frame);
        }
        seen
    })
}
