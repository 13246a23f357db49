//! Observability: `/metrics` after known traffic (exact counts, read with a
//! Prometheus text parser), the metrics listener, readiness during
//! shutdown, and the `traceparent` an app receives on either bridge. The
//! OTLP export itself is tested against the binary (`telemetry.rs`),
//! because the exporter is installed once per process.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use openclaw_proxy_tests::prometheus::Scrape;
use openclaw_proxy_tests::*;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

async fn scrape(url: &str, token: Option<&str>) -> (u16, String) {
    let response = Rest::default().token_opt(token).get(url).send().await;
    (response.status().as_u16(), response.text())
}

async fn call(client: &McpClient, tool: &str) -> rmcp::model::CallToolResult {
    let mut request = CallToolRequestParams::new(tool.to_owned());
    request.arguments = json!({"text": "hi"}).as_object().cloned();
    no_hang(client.call_tool(request))
        .await
        .expect("tools/call")
}

#[tokio::test]
async fn metrics_count_every_outcome_of_known_traffic_exactly() {
    let server = TestServer::builder()
        .tool_timeout(Duration::from_secs(1))
        .start()
        .await;
    let app = TestApp::start(
        &server,
        BridgeKind::Ws,
        json!([{"name": "echo"}, {"name": "fail"}]),
        |call| match call.tool_name.as_str() {
            "fail" => Answer::Error("nope".into()),
            _ => echo(call),
        },
    )
    .await;
    // A bridge that never answers: its call times out.
    let silent = TestSession::legacy(&server).await;
    let _silent_app = WsApp::connect(&silent.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    server
        .wait_for_session(&silent.id, "the silent bridge attaching", |session| {
            session.bridge_connected
        })
        .await;
    // No bridge at all.
    let orphan = TestSession::legacy(&server).await;

    let base = server.http_url();
    let client = mcp_connect(&base, &app.session.id, Route::Path).await;
    assert_eq!(call(&client, "echo").await.is_error, Some(false));
    assert_eq!(call(&client, "echo").await.is_error, Some(false));
    assert_eq!(call(&client, "fail").await.is_error, Some(true));
    let silent_client = mcp_connect(&base, &silent.id, Route::Path).await;
    assert_eq!(call(&silent_client, "echo_text").await.is_error, Some(true));
    let orphan_client = mcp_connect(&base, &orphan.id, Route::Path).await;
    assert_eq!(call(&orphan_client, "echo_text").await.is_error, Some(true));
    // A wrong token: refused before the body is read.
    let refused = mcp_post(
        &orphan.mcp_url,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .bearer_auth("wrong")
    .send()
    .await;
    assert_eq!(refused.status(), 401);

    let url = format!("{base}/metrics");
    let (status, _) = scrape(&url, None).await;
    assert_eq!(status, 401, "the main port's /metrics takes the app token");
    let (status, text) = scrape(&url, Some(APP_TOKEN)).await;
    assert_eq!(status, 200);
    let scrape = Scrape::parse(&text).expect("Prometheus text");

    let calls =
        |outcome: &str| scrape.value("openclaw_proxy_tool_calls_total", &[("outcome", outcome)]);
    assert_eq!(calls("ok"), 2.0);
    assert_eq!(calls("tool_error"), 1.0);
    assert_eq!(calls("timeout"), 1.0);
    assert_eq!(calls("no_bridge"), 1.0);
    for outcome in ["bridge_lost", "cancelled", "rejected"] {
        assert_eq!(calls(outcome), 0.0, "{outcome}");
    }
    let count = scrape.value("openclaw_proxy_tool_call_duration_seconds_count", &[]);
    assert_eq!(count, 5.0);
    assert_eq!(
        scrape.value(
            "openclaw_proxy_tool_call_duration_seconds_bucket",
            &[("le", "+Inf")]
        ),
        5.0
    );
    // The timeout took a second; the others answered at once, but how fast
    // is not asserted, only that the timed-out call is above 0.5 s.
    assert_eq!(
        count
            - scrape.value(
                "openclaw_proxy_tool_call_duration_seconds_bucket",
                &[("le", "0.5")]
            ),
        1.0
    );
    assert_eq!(scrape.value("openclaw_proxy_sessions", &[]), 3.0);
    assert_eq!(
        scrape.value("openclaw_proxy_bridges", &[("transport", "websocket")]),
        2.0
    );
    assert_eq!(
        scrape.value("openclaw_proxy_bridges", &[("transport", "grpc")]),
        0.0
    );
    let mcp = |method: &str, status: &str| {
        scrape.value(
            "openclaw_proxy_mcp_requests_total",
            &[("method", method), ("status", status)],
        )
    };
    assert_eq!(mcp("tools/call", "200"), 5.0);
    assert_eq!(mcp("initialize", "200"), 3.0);
    assert_eq!(mcp("unread", "401"), 1.0);
    let failures = |surface: &str| {
        scrape.value(
            "openclaw_proxy_auth_failures_total",
            &[("surface", surface)],
        )
    };
    assert_eq!(failures("mcp"), 1.0);
    assert_eq!(failures("metrics"), 1.0);
    assert_eq!(failures("rest"), 0.0);
    assert!(
        scrape.get("openclaw_proxy_nats_connected", &[]).is_none(),
        "no NATS gauge on a single node"
    );
}

#[tokio::test]
async fn the_metrics_listener_serves_without_a_token_and_counts_grpc_bridges() {
    let server = TestServer::start().await;
    let _app = TestApp::start(&server, BridgeKind::Grpc, json!([{"name": "echo"}]), echo).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let stop = tokio_util::sync::CancellationToken::new();
    let served = tokio::spawn(openclaw_proxy_edge::serve_metrics(
        listener,
        server.hub.clone(),
        stop.clone().cancelled_owned(),
    ));

    let (status, text) = scrape(&format!("http://{address}/metrics"), None).await;
    assert_eq!(status, 200);
    let scrape = Scrape::parse(&text).expect("Prometheus text");
    assert_eq!(
        scrape.value("openclaw_proxy_bridges", &[("transport", "grpc")]),
        1.0
    );
    assert_eq!(scrape.value("openclaw_proxy_sessions", &[]), 1.0);
    let (status, _) = scrape_status(&format!("http://{address}/v1/mcp")).await;
    assert_eq!(status, 404, "the metrics listener serves nothing else");

    stop.cancel();
    no_hang(served).await.expect("join").expect("served");
}

async fn scrape_status(url: &str) -> (u16, String) {
    scrape(url, None).await
}

#[tokio::test]
async fn readiness_flips_to_503_on_shutdown_while_the_server_still_answers() {
    let server = TestServer::builder()
        .edge(|edge| edge.shutdown_delay = Duration::from_secs(30))
        .start()
        .await;
    let app = TestApp::start(&server, BridgeKind::Ws, json!([{"name": "echo"}]), echo).await;
    let base = server.http_url();
    let http = Rest::new(base.clone());
    let ready = |http: Rest| async move { http.ready().await.status().as_u16() };
    assert_eq!(ready(http.clone()).await, 200);

    // Shutdown begins; the server keeps answering for the delay.
    let stopping = tokio::spawn(server.shutdown());
    eventually("/ready turning 503", Duration::from_secs(10), || {
        let http = http.clone();
        async move { ready(http).await == 503 }
    })
    .await;
    let health = http.health().await;
    assert_eq!(health.status(), 200, "still alive while not ready");
    let client = mcp_connect(&base, &app.session.id, Route::Path).await;
    let result = call(&client, "echo").await;
    assert_eq!(
        result.is_error,
        Some(false),
        "calls still served: {result:?}"
    );
    stopping.abort();
}

/// The `traceparent` each call delivered to the app, in order.
type Seen = Arc<Mutex<Vec<Option<String>>>>;

async fn traced_app(server: &TestServer, bridge: BridgeKind) -> (TestApp, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let app = TestApp::start(server, bridge, json!([{"name": "echo"}]), move |call| {
        record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(call.trace_parent.clone());
        echo(call)
    })
    .await;
    (app, seen)
}

fn call_body(meta: Option<Value>) -> Value {
    let mut params = json!({"name": "echo", "arguments": {"text": "hi"}});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})
}

#[tokio::test]
async fn the_app_receives_the_callers_traceparent_on_either_bridge() {
    const FROM_HEADER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const FROM_META: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    let server = TestServer::start().await;
    for bridge in BridgeKind::BOTH {
        let (app, seen) = traced_app(&server, bridge).await;
        let url = &app.session.mcp_url;
        let post = |body: Value| mcp_post(url, &body).bearer_auth(OPENCLAW_TOKEN);
        for request in [
            post(call_body(None)).header("traceparent", FROM_HEADER),
            // `_meta` wins over the header: it is the request's own.
            post(call_body(Some(json!({"traceparent": FROM_META}))))
                .header("traceparent", FROM_HEADER),
            post(call_body(None)),
            post(call_body(None)).header("traceparent", "not-a-traceparent"),
        ] {
            let response = no_hang(request.send()).await;
            assert_eq!(response.status(), 200, "{}", bridge.name());
        }
        let seen = seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert_eq!(
            seen,
            vec![
                Some(FROM_HEADER.to_owned()),
                Some(FROM_META.to_owned()),
                None,
                None
            ],
            "{} bridge",
            bridge.name()
        );
    }
}

#[tokio::test]
async fn lost_cancelled_and_rejected_calls_are_counted_exactly() {
    let server = TestServer::builder()
        .core(|core| core.limits.max_calls_per_session = 1)
        .start()
        .await;
    let session = TestSession::register_grpc(&server, vec![tool("echo_text", "")]).await;
    let outcomes = || {
        let scrape = Scrape::parse(&server.hub.render_metrics()).expect("Prometheus text");
        ["ok", "bridge_lost", "cancelled", "rejected"]
            .map(|outcome| scrape.value("openclaw_proxy_tool_calls_total", &[("outcome", outcome)]))
    };

    // Rejected: a tool the session does not have, and a call over the
    // session's limit while one is in flight.
    let mut app = GrpcBridge::open(server.channel().await, APP_TOKEN, &session.id)
        .await
        .expect("bridge");
    let unknown = server.spawn_invoke(&session.id, "no_such_tool", json!({}));
    assert!(no_hang(unknown).await.expect("join").is_err());
    let held = server.spawn_invoke(&session.id, "echo_text", json!({}));
    no_hang(app.next_invoke()).await;
    let over = server.spawn_invoke(&session.id, "echo_text", json!({}));
    assert!(no_hang(over).await.expect("join").is_err());

    // Cancelled: the caller stops waiting, and the app is told.
    held.abort();
    assert!(matches!(no_hang(app.next()).await, Received::Cancel(_)));
    let cancelled = || async { outcomes()[2] == 1.0 };
    eventually(
        "the abandoned call counted",
        Duration::from_secs(10),
        cancelled,
    )
    .await;

    // Bridge lost: the app goes away mid-call.
    let lost = server.spawn_invoke(&session.id, "echo_text", json!({}));
    no_hang(app.next_invoke()).await;
    drop(app);
    let error = no_hang(lost).await.expect("join").expect_err("lost");
    assert!(
        matches!(error, openclaw_proxy_core::InvokeError::BridgeEnded(_)),
        "{error}"
    );
    assert_eq!(outcomes(), [0.0, 1.0, 1.0, 2.0]);
}
