//! Smoke runs of the load generator, so the benchmark cannot rot. They assert
//! correctness (every answer checked, counts exact), never speed.

use std::time::Duration;

use openclaw_proxy_tests::bench::{self, BridgeKind, LoadConfig, Target};
use openclaw_proxy_tests::*;

fn target(server: &TestServer) -> Target {
    Target {
        base_url: server.http_url(),
        app_token: APP_TOKEN.into(),
        openclaw_token: OPENCLAW_TOKEN.into(),
    }
}

#[tokio::test]
async fn load_generator_smoke_run_on_both_bridges() {
    for bridge in [BridgeKind::Ws, BridgeKind::Grpc] {
        let server = TestServer::start().await;
        let config = LoadConfig {
            target: target(&server),
            bridge,
            concurrency: 4,
            sessions: 2,
            duration: Duration::from_secs(120),
            max_calls: Some(300),
        };
        let report = bench::run_load(&config).await.expect("load run");
        assert_eq!(report.errors, 0, "{bridge:?}");
        assert_eq!(report.calls, 300, "{bridge:?}");
        let line = bench::report_json(&config, &report);
        assert_eq!(line["calls"], 300);
        assert!(line["p50_us"].as_u64().expect("p50") <= line["max_us"].as_u64().expect("max"));
        assert_eq!(server.hub.session_count(), 2);
    }
}

#[tokio::test]
async fn wrong_answers_count_as_errors() {
    // An app that answers with something else than the echo: every call is
    // an error, however fast.
    let server = TestServer::start().await;
    let reply = create_session_rest(
        &server,
        &serde_json::json!({
            "device_id": "d", "device_name": "d", "app_version": "1", "chat_id": "c",
            "tools": [{"name": "echo"}]
        }),
    )
    .await;
    let id = reply["mcpSessionId"].as_str().expect("id").to_owned();
    let mut app = WsApp::connect(reply["bridge_url"].as_str().expect("url"), Some(APP_TOKEN))
        .await
        .expect("bridge");
    tokio::spawn(async move {
        // The warm-up call is echoed; every later one gets a wrong answer.
        let mut answered = 0;
        while let Ok(frame) = app.next_json().await {
            answered += 1;
            let content = if answered == 1 {
                frame["arguments"].clone()
            } else {
                serde_json::json!({"text": "wrong"})
            };
            app.send_json(serde_json::json!({"type": "invoke_result", "request_id": frame["request_id"], "ok": true, "content": content}))
                .await;
        }
    });
    let config = LoadConfig {
        target: target(&server),
        bridge: BridgeKind::Ws,
        concurrency: 1,
        sessions: 1,
        duration: Duration::from_secs(120),
        max_calls: Some(20),
    };
    let report = bench::drive_calls(&config, &[id]).await.expect("run");
    assert_eq!(report.calls, 0);
    assert_eq!(report.errors, 20);
}

#[tokio::test]
async fn memory_measurement_smoke_run() {
    let server = TestServer::start().await;
    let line = bench::measure_memory(
        &target(&server),
        BridgeKind::Ws,
        std::process::id(),
        20,
        Duration::from_millis(10),
    )
    .await
    .expect("memory run");
    assert_eq!(line["sessions"], 20);
    assert_eq!(line["probe_errors"], 0);
    assert!(line["rss_after_kib"].as_u64().expect("rss") > 0);
}
