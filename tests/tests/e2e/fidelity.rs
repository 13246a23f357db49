//! JSON fidelity: whatever JSON a client sends as arguments reaches the app
//! unchanged, and whatever the app answers reaches the client unchanged,
//! numbers included (beyond 64 bits, `1e400`, every digit of a double), on
//! both bridges. Property-based: proptest writes the documents.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::Deserialize;
use serde_json::value::RawValue;

use openclaw_proxy_tests::*;

/// A JSON number as text, from ordinary to beyond what any tree holds.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:e}")),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        "-?[1-9][0-9]{19,40}",
        "-?[1-9](\\.[0-9]{1,30})?[eE][+-]?[1-9][0-9]{2,4}",
        "-?0\\.[0-9]{17,40}",
        Just("1.7976931348623155e+308".to_owned()),
        Just("-0.0".to_owned()),
    ]
}

/// Any JSON value as compact text, nested a few levels.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        number(),
        any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
        Just("true".to_owned()),
        Just("null".to_owned()),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6)
                .prop_map(|items| format!("[{}]", items.join(","))),
            object(inner),
        ]
    })
}

/// A JSON object as compact text, with distinct keys.
fn object(values: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop::collection::btree_map("[a-z_]{1,8}", values, 0..6).prop_map(|members| {
        let members: Vec<String> = members
            .into_iter()
            .map(|(key, value)| {
                format!(
                    "{}:{value}",
                    serde_json::to_string(&key).unwrap_or_default()
                )
            })
            .collect();
        format!("{{{}}}", members.join(","))
    })
}

/// Answers every call with its arguments, byte for byte, over gRPC.
async fn grpc_echo(mut app: GrpcBridge) {
    while let Received::Invoke(invoke) = app.next().await {
        app.answer(&invoke.request_id, true, &invoke.arguments_json, "")
            .await;
    }
}

/// Answers every call with its arguments, byte for byte, over WebSocket.
async fn ws_echo(mut app: WsApp) {
    #[derive(Deserialize)]
    struct Invoke<'a> {
        request_id: String,
        #[serde(borrow)]
        arguments: &'a RawValue,
    }
    while let Some(text) = app.next_text().await {
        let Ok(invoke) = serde_json::from_str::<Invoke>(&text) else {
            continue;
        };
        let id = serde_json::to_string(&invoke.request_id).unwrap_or_default();
        let answer = format!(
            r#"{{"type":"invoke_result","request_id":{id},"ok":true,"content":{}}}"#,
            invoke.arguments.get()
        );
        app.send(tokio_tungstenite::tungstenite::Message::Text(answer.into()))
            .await;
    }
}

#[derive(Deserialize)]
struct Response {
    result: ToolResult,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolResult {
    content: Vec<TextBlock>,
    structured_content: Box<RawValue>,
}

#[derive(Deserialize)]
struct TextBlock {
    text: String,
}

/// The body of a `tools/call` of `echo_text` with `arguments` (JSON text).
fn call_body(arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo_text","arguments":{arguments}}}}}"#
    )
}

/// Posts a raw `tools/call`; the raw response body.
async fn post_call(mcp_url: &str, body: String) -> (StatusCode, String) {
    let response = Rest::default()
        .token(OPENCLAW_TOKEN)
        .mcp_raw(mcp_url, body)
        .send()
        .await;
    (response.status(), response.text())
}

#[test]
fn every_number_crosses_both_bridges_unchanged() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (server, urls) = runtime.block_on(async {
        let server = TestServer::start().await;
        let grpc = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
        let app = GrpcBridge::open(server.channel().await, APP_TOKEN, &grpc.id)
            .await
            .expect("gRPC bridge");
        tokio::spawn(grpc_echo(app));
        let ws = TestSession::legacy(&server).await;
        let app = WsApp::connect(&ws.bridge_url, Some(APP_TOKEN))
            .await
            .expect("WebSocket bridge");
        tokio::spawn(ws_echo(app));
        for session in [&grpc, &ws] {
            server
                .wait_for_session(&session.id, "the bridge attaching", |session| {
                    session.bridge_connected
                })
                .await;
        }
        (server, [grpc.mcp_url, ws.mcp_url])
    });
    let mut runner = TestRunner::new(Config {
        cases: 300,
        ..Config::default()
    });
    let outcome = runner.run(&object(value()), |arguments| {
        for url in &urls {
            let (status, body) = runtime.block_on(no_hang(post_call(url, call_body(&arguments))));
            prop_assert_eq!(status, 200, "{}", body);
            let response: Response = serde_json::from_str(&body)
                .map_err(|error| TestCaseError::fail(format!("{error}: {body}")))?;
            prop_assert_eq!(response.result.structured_content.get(), arguments.as_str());
            prop_assert_eq!(response.result.content.len(), 1);
            prop_assert_eq!(response.result.content[0].text.as_str(), arguments.as_str());
        }
        Ok(())
    });
    drop(server);
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

#[tokio::test]
async fn nesting_beyond_the_limit_is_refused_with_a_clear_error() {
    let server = TestServer::start().await;
    let app = TestApp::start(
        &server,
        BridgeKind::Grpc,
        serde_json::json!([{"name": "echo_text"}]),
        echo,
    )
    .await;
    // 128 levels in all is the limit (serde_json's, applied on every path);
    // the call itself takes three.
    let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
    let (status, body) = no_hang(post_call(&app.session.mcp_url, call_body(&deep))).await;
    let error: serde_json::Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    // Invalid params, naming the limit.
    let code = error["error"]["code"].as_i64();
    assert!(matches!(code, Some(-32700 | -32602)), "{status} {body}");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("nested deeper than 128"), "{message}");
    // Within the limit, the same shape goes through.
    let fine = format!("{{\"a\":{}1{}}}", "[".repeat(100), "]".repeat(100));
    let (status, body) = no_hang(post_call(&app.session.mcp_url, call_body(&fine))).await;
    assert_eq!(status, 200, "{body}");
}
