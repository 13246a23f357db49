//! Smoke runs of the load generator, so the benchmark cannot rot. They assert
//! correctness (every answer checked, counts exact), never speed.

use std::path::Path;
use std::time::Duration;

use openclaw_proxy_tests::bench::{self, GrpcApp, LoadConfig, Method, Protocol, Target};
use openclaw_proxy_tests::processes;
use openclaw_proxy_tests::*;

fn target(server: &TestServer) -> Target {
    Target {
        base_url: server.http_url(),
        app_token: APP_TOKEN.into(),
        openclaw_token: OPENCLAW_TOKEN.into(),
        mcp_base_url: None,
    }
}

#[tokio::test]
async fn load_generator_smoke_run_on_both_bridges() {
    for (bridge, grpc_app) in [
        (BridgeKind::Ws, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Crate),
        (BridgeKind::Grpc, GrpcApp::Python),
    ] {
        let server = TestServer::start().await;
        let config = LoadConfig {
            target: target(&server),
            bridge,
            grpc_app,
            concurrency: 4,
            sessions: 2,
            duration: Duration::from_secs(120),
            max_calls: Some(300),
            method: Method::ToolsCall,
            protocol: Protocol::default(),
            progress: false,
            progress_reports: 0,
            vendor_meta: false,
            oauth: None,
            elicit: false,
        };
        let report = bench::run_load(&config).await.expect("load run");
        assert_eq!(report.errors, 0, "{bridge:?} {grpc_app:?}");
        assert_eq!(report.calls, 300, "{bridge:?} {grpc_app:?}");
        let line = bench::report_json(&config, &report);
        assert_eq!(line["calls"], 300);
        assert!(line["p50_us"].as_u64().expect("p50") <= line["max_us"].as_u64().expect("max"));
        assert_eq!(server.hub.session_count(), 2);
    }
}

#[tokio::test]
async fn load_generator_smoke_run_at_2026_07_28_and_with_progress() {
    // Every answer is checked: the echo, and with --progress the app's
    // notifications before it on the SSE stream (none: a JSON answer).
    for (bridge, grpc_app) in [
        (BridgeKind::Ws, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Crate),
    ] {
        for (protocol, progress, progress_reports, vendor_meta) in [
            (Protocol::V2026_07_28, false, 0, false),
            (Protocol::V2025_11_25, true, 1, false),
            (Protocol::V2026_07_28, true, 1, true),
            (Protocol::V2025_11_25, true, 0, false),
            (Protocol::V2025_11_25, true, 3, false),
            (Protocol::V2025_11_25, false, 0, true),
        ] {
            let server = TestServer::start().await;
            let config = LoadConfig {
                target: target(&server),
                bridge,
                grpc_app,
                concurrency: 4,
                sessions: 2,
                duration: Duration::from_secs(120),
                max_calls: Some(100),
                method: Method::ToolsCall,
                protocol,
                progress,
                progress_reports,
                vendor_meta,
                oauth: None,
                elicit: false,
            };
            let report = bench::run_load(&config).await.expect("load run");
            let case = format!(
                "{bridge:?} {grpc_app:?} {protocol:?} progress={progress} reports={progress_reports} meta={vendor_meta}"
            );
            assert_eq!(report.errors, 0, "{case}");
            assert_eq!(report.calls, 100, "{case}");
            let line = bench::report_json(&config, &report);
            assert_eq!(line["protocol"], protocol.name(), "{case}");
            assert_eq!(line["progress"], progress, "{case}");
            assert_eq!(line["progress_reports"], progress_reports, "{case}");
            assert_eq!(line["vendor_meta"], vendor_meta, "{case}");
        }
    }
}

#[tokio::test]
async fn load_generator_smoke_run_where_every_call_asks_the_client() {
    // Every call's app asks the client one question and answers with the
    // client's answer (the call's own text), so an answer that went astray
    // is a wrong echo; the server counts one answered question per call.
    for (bridge, grpc_app) in [
        (BridgeKind::Ws, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Crate),
    ] {
        for protocol in [Protocol::V2025_11_25, Protocol::V2026_07_28] {
            let server = TestServer::start().await;
            let config = LoadConfig {
                target: target(&server),
                bridge,
                grpc_app,
                concurrency: 4,
                sessions: 2,
                duration: Duration::from_secs(120),
                max_calls: Some(100),
                method: Method::ToolsCall,
                protocol,
                progress: false,
                progress_reports: 0,
                vendor_meta: false,
                oauth: None,
                elicit: true,
            };
            let report = bench::run_load(&config).await.expect("load run");
            let case = format!("{bridge:?} {grpc_app:?} {protocol:?}");
            assert_eq!(report.errors, 0, "{case}");
            assert_eq!(report.calls, 100, "{case}");
            assert_eq!(bench::report_json(&config, &report)["elicit"], true);
            let scrape = prometheus::Scrape::parse(&server.rest().metrics().await.text())
                .expect("Prometheus text");
            let answered = scrape.value(
                "openclaw_proxy_client_requests_total",
                &[("method", "elicitation/create"), ("outcome", "answered")],
            );
            // The run's calls and each client's warm-up call.
            assert!(answered >= 104.0, "{case}: {answered} answered");
            assert_eq!(
                scrape.value("openclaw_proxy_client_requests_pending", &[]),
                0.0,
                "{case}"
            );
        }
    }
}

#[tokio::test]
async fn load_generator_smoke_run_of_resources_and_prompts() {
    // Every answer is checked: the resource's contents, the prompt rendered
    // with each request's own text, the list holding the resource.
    for (bridge, grpc_app) in [
        (BridgeKind::Ws, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Crate),
    ] {
        for method in [
            Method::ResourcesRead,
            Method::PromptsGet,
            Method::ResourcesList,
        ] {
            for (protocol, progress, vendor_meta) in [
                (Protocol::V2025_11_25, false, false),
                (Protocol::V2026_07_28, true, true),
            ] {
                let server = TestServer::start().await;
                let config = LoadConfig {
                    target: target(&server),
                    bridge,
                    grpc_app,
                    concurrency: 4,
                    sessions: 2,
                    duration: Duration::from_secs(120),
                    max_calls: Some(100),
                    method,
                    protocol,
                    progress,
                    progress_reports: 0,
                    vendor_meta,
                    oauth: None,
                    elicit: false,
                };
                let report = bench::run_load(&config).await.expect("load run");
                let case = format!("{bridge:?} {grpc_app:?} {method:?} {protocol:?}");
                assert_eq!(report.errors, 0, "{case}");
                assert_eq!(report.calls, 100, "{case}");
                let line = bench::report_json(&config, &report);
                assert_eq!(line["bench"], "mcp_request", "{case}");
                assert_eq!(line["method"], method.name(), "{case}");
            }
        }
    }
}

#[tokio::test]
async fn wrong_answers_count_as_errors() {
    // An app that answers with something else than the echo: every call is
    // an error, however fast.
    let server = TestServer::start().await;
    let session = TestSession::register(
        &server,
        &serde_json::json!({
            "device_id": "d", "device_name": "d", "app_version": "1", "chat_id": "c",
            "tools": [{"name": "echo"}]
        }),
    )
    .await;
    let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
        .await
        .expect("bridge");
    // The warm-up call is echoed; every later one gets a wrong answer.
    let mut answered = 0;
    let _app = serve_app(app, move |call| {
        answered += 1;
        if answered == 1 {
            echo(call)
        } else {
            Answer::Content(serde_json::json!({"text": "wrong"}))
        }
    });
    let config = LoadConfig {
        target: target(&server),
        bridge: BridgeKind::Ws,
        grpc_app: GrpcApp::Lean,
        concurrency: 1,
        sessions: 1,
        duration: Duration::from_secs(120),
        max_calls: Some(20),
        method: Method::ToolsCall,
        protocol: Protocol::default(),
        progress: false,
        progress_reports: 0,
        vendor_meta: false,
        oauth: None,
        elicit: false,
    };
    let report = bench::drive_calls(&config, &[session.id])
        .await
        .expect("run");
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

#[test]
fn a_process_cpu_time_is_read_from_proc_and_grows_with_work() {
    let pid = std::process::id();
    let before = bench::cpu_seconds(pid).expect("cpu time");
    // Work until the kernel's 10 ms ticks show it (bounded: 5 s of wall time).
    let started = std::time::Instant::now();
    let mut spin = 0u64;
    while bench::cpu_seconds(pid).expect("cpu time") < before + 0.05
        && started.elapsed() < Duration::from_secs(5)
    {
        for n in 0..100_000u64 {
            spin = std::hint::black_box(spin.wrapping_add(n));
        }
    }
    let after = bench::cpu_seconds(pid).expect("cpu time");
    assert!(after >= before + 0.05, "{before} s then {after} s");
    assert!(bench::cpu_seconds(u32::MAX).is_err(), "no such process");
}

#[tokio::test]
async fn nats_round_trip_smoke_run_through_a_real_nats_server() {
    // Two processes (this test and the loadgen child that echoes) and a real
    // nats-server: every round trip is checked (the payload comes back).
    let binary = processes::nats_server_binary(Path::new(env!("CARGO_TARGET_TMPDIR"))).await;
    let nats = processes::NatsServer::start(&binary, Vec::new(), 0)
        .await
        .expect("start nats-server");
    let line = bench::nats_round_trips(
        &nats.url(),
        Duration::from_millis(500),
        Path::new(env!("CARGO_BIN_EXE_loadgen")),
    )
    .await
    .expect("round trips");
    assert_eq!(line["bench"], "nats_request_reply");
    assert_eq!(line["errors"], 0, "{line}");
    assert!(
        line["round_trips"].as_u64().is_some_and(|n| n > 0),
        "{line}"
    );
    assert!(line["p50_us"].as_u64() <= line["max_us"].as_u64(), "{line}");
}

#[tokio::test]
async fn load_generator_smoke_run_with_oauth_access_tokens() {
    // OAuth only: the OpenClaw token opens nothing, so every correct call
    // was opened by a client's own access token.
    let issuer = TestIssuer::start().await;
    let mut settings = openclaw_proxy_edge::oauth::OAuthSettings::new(issuer.url.clone());
    settings.required_scopes = vec!["mcp".into()];
    settings.only = true;
    for (bridge, grpc_app) in [
        (BridgeKind::Ws, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Lean),
        (BridgeKind::Grpc, GrpcApp::Crate),
    ] {
        let server = TestServer::builder().oauth(settings.clone()).start().await;
        let config = LoadConfig {
            target: target(&server),
            bridge,
            grpc_app,
            concurrency: 4,
            sessions: 2,
            duration: Duration::from_secs(120),
            max_calls: Some(300),
            method: Method::ToolsCall,
            protocol: Protocol::default(),
            progress: false,
            progress_reports: 0,
            vendor_meta: false,
            oauth: Some(bench::OAuthLoad::new(&issuer, "loadgen-user")),
            elicit: false,
        };
        let report = bench::run_load(&config).await.expect("load run");
        assert_eq!(report.errors, 0, "{bridge:?} {grpc_app:?}");
        assert_eq!(report.calls, 300, "{bridge:?} {grpc_app:?}");
        let line = bench::report_json(&config, &report);
        assert_eq!(line["credential"], "oauth");
    }
}
