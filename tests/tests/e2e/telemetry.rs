//! The binary's logs and traces, observed from outside: JSON log lines with
//! audit events, and the spans of tool calls exported over OTLP to a
//! collector in this test (a tonic server implementing the OTLP trace
//! service), linked to the caller's trace and to the app's.
//!
//! These run the real binary as a child process: the log subscriber and the
//! OTLP exporter are installed once per process, from its environment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openclaw_proxy_app::{App, CallContext, Tool};
use openclaw_proxy_tests::mcp_client::ToolsCall2026;
use openclaw_proxy_tests::{
    BridgeKind, Call, RequestBridge, ServerProcess, TestServer, TestSession, WsApp, echo,
    eventually, legacy_session_body, no_hang, serve_app,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

const TOKEN: &str = "t";

/// The binary with both global tokens [`TOKEN`] and these variables.
async fn proxy(env: &[(&str, &str)]) -> ServerProcess {
    env.iter()
        .fold(
            TestServer::builder().tokens(TOKEN, TOKEN),
            |builder, (name, value)| builder.env(name, value),
        )
        .spawn()
        .await
}

/// Registers the documented session with `proxy`.
async fn create_session(proxy: &ServerProcess) -> TestSession {
    proxy
        .rest()
        .token(TOKEN)
        .register(&legacy_session_body())
        .await
}

#[tokio::test]
async fn json_log_lines_parse_and_carry_audit_events() {
    let proxy = proxy(&[("OPENCLAW_PROXY_LOG_FORMAT", "json")]).await;
    let session = create_session(&proxy).await;
    let deleted = proxy.rest().token(TOKEN).delete_session(&session.id).await;
    assert_eq!(deleted.status(), 200);

    let lines = proxy.stop().await;
    let events: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line:?}")))
        .collect();
    let audit = |name: &str| {
        events
            .iter()
            .find(|event| event["target"] == "audit" && event["event"] == name)
            .unwrap_or_else(|| panic!("no audit event {name} in {lines:#?}"))
    };
    for name in ["session_created", "session_deleted"] {
        let event = audit(name);
        assert_eq!(event["session"], session.id[..8], "{event}");
        assert_eq!(event["transport"], "rest", "{event}");
        assert!(
            event["client"]
                .as_str()
                .is_some_and(|client| client.starts_with("127.0.0.1:")),
            "{event}"
        );
    }
    let tokens = [
        session.session_token.clone().unwrap_or_default(),
        session.mcp_token.clone().unwrap_or_default(),
    ];
    for line in &lines {
        assert!(
            !line.contains(&session.id),
            "full session id logged: {line}"
        );
        for token in &tokens {
            assert!(
                token.is_empty() || !line.contains(token.as_str()),
                "token logged: {line}"
            );
        }
    }
}

/// A received span with its resource's attributes.
type Received = (HashMap<String, String>, Span);

/// Keeps every span it receives.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<Received>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut spans = self.spans.lock().unwrap_or_else(PoisonError::into_inner);
        for resource_spans in request.into_inner().resource_spans {
            let resource = attributes(
                resource_spans
                    .resource
                    .map(|resource| resource.attributes)
                    .unwrap_or_default(),
            );
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push((resource.clone(), span));
                }
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

fn attributes(
    attributes: Vec<opentelemetry_proto::tonic::common::v1::KeyValue>,
) -> HashMap<String, String> {
    attributes
        .into_iter()
        .filter_map(|pair| {
            let value = match pair.value?.value? {
                AnyValue::StringValue(text) => text,
                AnyValue::IntValue(n) => n.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                AnyValue::DoubleValue(x) => x.to_string(),
                _ => return None,
            };
            Some((pair.key, value))
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The `traceparent`s the app received, in order.
type Seen = Arc<Mutex<Vec<Option<String>>>>;

fn record(seen: &Seen, call: &Call) {
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(call.trace_parent.clone());
}

/// A new session with a legacy echo app on its WebSocket bridge that
/// records each call's `traceparent`, once the bridge is attached.
async fn recording_ws_app(
    proxy: &ServerProcess,
) -> (TestSession, Seen, tokio::task::JoinHandle<(u16, String)>) {
    let seen: Seen = Arc::default();
    let session = create_session(proxy).await;
    let app = WsApp::connect(&session.bridge_url, Some(TOKEN))
        .await
        .expect("bridge");
    let recording = seen.clone();
    let serving = serve_app(app, move |call| {
        record(&recording, call);
        echo(call)
    });
    let rest = proxy.rest().token(TOKEN);
    eventually(
        "the WebSocket bridge attaching",
        Duration::from_secs(10),
        || {
            let rest = rest.clone();
            let id = session.id.clone();
            async move { rest.get_session(&id).await.json()["bridge_connected"] == true }
        },
    )
    .await;
    (session, seen, serving)
}

/// A collector serving on this runtime, and the binary exporting to it.
async fn traced_proxy() -> (Collector, ServerProcess) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let collector_address = listener.local_addr().expect("address");
    let collector = Collector::default();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(collector.clone()))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let endpoint = format!("http://{collector_address}");
    let proxy = proxy(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ])
    .await;
    (collector, proxy)
}

#[tokio::test]
async fn spans_of_a_call_reach_an_otlp_collector_linked_from_the_caller_to_the_app() {
    let (collector, proxy) = traced_proxy().await;
    let base = proxy.url();
    let rest = proxy.rest().token(TOKEN);

    // A legacy app on the WebSocket bridge.
    let (ws_session, ws_seen, _ws_app) = recording_ws_app(&proxy).await;
    // Another, called at 2026-07-28 by a client that declares it can be
    // asked: such a call may be parked between rounds, so its work runs in
    // a task of its own.
    let (parked_session, parked_seen, _parked_app) = recording_ws_app(&proxy).await;

    // A native app on gRPC, written with the app crate.
    let grpc_seen: Seen = Arc::default();
    let seen = grpc_seen.clone();
    let tool = Tool::with_schema(
        "echo_text",
        "Echo.",
        json!({"type": "object"}),
        move |arguments: Value, context: CallContext| {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(context.trace_parent().map(str::to_owned));
            std::future::ready(Ok::<_, openclaw_proxy_app::ToolError>(arguments))
        },
    );
    let serving = App::builder(base.clone())
        .app_token(TOKEN)
        .device_id("device-1")
        .app_version("1.0.0")
        .tool(tool)
        .build()
        .expect("app")
        .serve()
        .await
        .expect("serving");
    let grpc_session = serving.session().session_id.clone();

    // One call per bridge, each from its own caller trace.
    let callers = [
        (
            ws_session.id.clone(),
            "00-11111111111111111111111111111111-1111111111111111-01",
            ws_seen,
        ),
        (
            grpc_session,
            "00-22222222222222222222222222222222-2222222222222222-01",
            grpc_seen,
        ),
        (
            parked_session.id.clone(),
            "00-33333333333333333333333333333333-3333333333333333-01",
            parked_seen,
        ),
    ];
    for (session_id, caller, _) in &callers {
        let path = format!("/v1/mcp/{session_id}");
        let request = if *session_id == parked_session.id {
            let call = ToolsCall2026 {
                tool: "echo_text",
                arguments: json!({"text": "hi"}),
                client_info: None,
            };
            rest.mcp(&path, &call.body(&json!({"elicitation": {}}), &json!({})))
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "echo_text")
        } else {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                              "params": {"name": "echo_text", "arguments": {"text": "hi"}}});
            rest.mcp(&path, &body)
        };
        let response = no_hang(request.header("traceparent", *caller).send()).await;
        assert_eq!(response.status(), 200);
    }
    drop(serving);
    // Shutting down flushes the spans still buffered; the collector answers
    // on this runtime meanwhile.
    let lines = proxy.stop().await;

    let spans = collector
        .spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for (session_id, caller, seen) in &callers {
        let mut fields = caller.split('-').skip(1);
        let (trace_id, caller_span) = (
            fields.next().unwrap_or_default(),
            fields.next().unwrap_or_default(),
        );
        let of_trace: Vec<&Received> = spans
            .iter()
            .filter(|(_, span)| hex(&span.trace_id) == trace_id)
            .collect();
        let named = |name: &str| {
            of_trace
                .iter()
                .find(|(_, span)| span.name == name)
                .unwrap_or_else(|| {
                    panic!("no span {name} in trace {trace_id}: {spans:#?}\n{lines:#?}")
                })
        };
        let (resource, request) = named("mcp_request");
        let (_, invocation) = named("invoke_tool");
        let (_, round_trip) = named("bridge_round_trip");
        assert_eq!(
            resource.get("service.name").map(String::as_str),
            Some("openclaw-proxy")
        );
        assert_eq!(
            hex(&request.parent_span_id),
            *caller_span,
            "the caller's span is the parent"
        );
        assert_eq!(invocation.parent_span_id, request.span_id);
        assert_eq!(round_trip.parent_span_id, invocation.span_id);
        for span in [request, invocation, round_trip] {
            let attributes = attributes(span.attributes.clone());
            assert_eq!(
                attributes.get("session").map(String::as_str),
                Some(&session_id[..8])
            );
            assert_eq!(
                attributes.get("tool").map(String::as_str),
                Some("echo_text")
            );
        }
        for span in [invocation, round_trip] {
            let attributes = attributes(span.attributes.clone());
            assert_eq!(
                attributes.get("outcome").map(String::as_str),
                Some("ok"),
                "{span:?}"
            );
        }
        // The app was told to make the proxy's round trip span its parent.
        let expected = format!("00-{trace_id}-{}-01", hex(&round_trip.span_id));
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert_eq!(seen, vec![Some(expected)]);
    }
}

#[tokio::test]
async fn spans_of_resources_read_and_prompts_get_reach_the_collector_on_both_bridges() {
    let (collector, proxy) = traced_proxy().await;
    let rest = proxy.rest().token(TOKEN);
    let mut body = legacy_session_body();
    body["resources"] = json!([{"uri": "notes:///1", "name": "one"}]);
    body["prompts"] = json!([{"name": "greet"}]);
    let mut served = Vec::new();
    let mut asked = Vec::new();
    for (n, kind) in BridgeKind::BOTH.into_iter().enumerate() {
        let session = rest.register(&body).await;
        let app = RequestBridge::attach_with(kind, &proxy.url(), &session.id, TOKEN).await;
        served.push(app.serve(|request| match request.method.as_str() {
            "resources/read" => Ok(json!({"contents": [{"uri": "notes:///1", "text": "one"}]})),
            _ => Ok(json!({"messages": [{"role": "user",
                "content": {"type": "text", "text": "hello"}}]})),
        }));
        let id = session.id.clone();
        eventually("the bridge attaching", Duration::from_secs(10), || {
            let rest = rest.clone();
            let id = id.clone();
            async move { rest.get_session(&id).await.json()["bridge_connected"] == true }
        })
        .await;
        for (m, (method, params)) in [
            ("resources/read", json!({"uri": "notes:///1"})),
            ("prompts/get", json!({"name": "greet"})),
        ]
        .into_iter()
        .enumerate()
        {
            let digit = char::from(b'3' + u8::try_from(2 * n + m).expect("small"));
            let trace_id = digit.to_string().repeat(32);
            let caller_span = digit.to_string().repeat(16);
            let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
            let response = no_hang(
                rest.mcp(&format!("/v1/mcp/{}", session.id), &request)
                    .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
                    .send(),
            )
            .await;
            assert_eq!(response.status(), 200, "{}", response.text());
            assert!(
                response.json().get("result").is_some(),
                "{}",
                response.text()
            );
            asked.push((kind, session.id.clone(), method, trace_id, caller_span));
        }
    }
    let lines = proxy.stop().await;
    let mut seen = Vec::new();
    for app in served {
        seen.extend(no_hang(app).await.expect("the app task"));
    }

    let spans = collector
        .spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    for (kind, session_id, method, trace_id, caller_span) in &asked {
        let what = format!("{method} on {}", kind.name());
        let named = |name: &str| {
            spans
                .iter()
                .map(|(_, span)| span)
                .find(|span| hex(&span.trace_id) == *trace_id && span.name == name)
                .unwrap_or_else(|| {
                    panic!("{what}: no span {name} in trace {trace_id}: {spans:#?}\n{lines:#?}")
                })
        };
        let (request, app_request, round_trip) = (
            named("mcp_request"),
            named("app_request"),
            named("bridge_round_trip"),
        );
        assert_eq!(
            hex(&request.parent_span_id),
            *caller_span,
            "{what}: the caller's span is the parent"
        );
        assert_eq!(app_request.parent_span_id, request.span_id, "{what}");
        assert_eq!(round_trip.parent_span_id, app_request.span_id, "{what}");
        let attribute = |span: &Span, key: &str| attributes(span.attributes.clone()).remove(key);
        assert_eq!(
            attribute(request, "mcp.method.name").as_deref(),
            Some(*method),
            "{what}"
        );
        assert_eq!(
            attribute(app_request, "method").as_deref(),
            Some(*method),
            "{what}"
        );
        for span in [request, app_request, round_trip] {
            assert_eq!(
                attribute(span, "session").as_deref(),
                Some(&session_id[..8]),
                "{what}: {span:?}"
            );
        }
        for span in [app_request, round_trip] {
            assert_eq!(
                attribute(span, "outcome").as_deref(),
                Some("ok"),
                "{what}: {span:?}"
            );
        }
        let transport = match kind {
            BridgeKind::Ws => "websocket",
            BridgeKind::Grpc => "grpc",
        };
        assert_eq!(
            attribute(round_trip, "transport").as_deref(),
            Some(transport),
            "{what}"
        );
        // The app was told to make the proxy's round trip span its parent.
        let expected = format!("00-{trace_id}-{}-01", hex(&round_trip.span_id));
        assert!(
            seen.iter()
                .any(|request| request.trace_parent.as_deref() == Some(expected.as_str())),
            "{what}: no request carried {expected}: {seen:#?}"
        );
    }
}

#[tokio::test]
async fn a_flood_of_malformed_frames_is_answered_in_full_and_logged_a_few_times() {
    const FRAMES: usize = 200;
    let proxy = proxy(&[("OPENCLAW_PROXY_LOG_FORMAT", "json")]).await;
    let session = create_session(&proxy).await;
    let mut app = WsApp::connect(&session.bridge_url, Some(TOKEN))
        .await
        .expect("bridge");
    // Every frame is answered.
    for n in 0..FRAMES {
        app.send(tokio_tungstenite::tungstenite::Message::Text(
            format!("not json {n}").into(),
        ))
        .await;
        let frame = no_hang(app.next_json()).await.expect("an error frame");
        assert_eq!(frame["type"], "error", "{frame}");
    }
    let lines = proxy.stop().await;
    let warnings: Vec<Value> = lines
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["level"] == "WARN"
                && event["message"]
                    .as_str()
                    .is_some_and(|message| message.contains("malformed bridge frame"))
        })
        .collect();
    assert_eq!(
        warnings.len(),
        openclaw_proxy_core::log_budget::LINES_PER_WINDOW as usize,
        "{warnings:#?}"
    );
}
