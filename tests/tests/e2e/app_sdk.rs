//! The app-side crate (`openclaw-proxy-app`) and the example apps in other
//! languages, each against the real server and called by a real MCP client.
//!
//! Network trouble is made with a TCP relay owned by this file: it can cut
//! the app's connections while leaving the proxy's side half-open (a phone
//! changing networks), and it can point at a new server (a proxy restarted at
//! the same address).

mod asking;
mod beyond_tools;
mod updates;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{App, CallContext, SessionInfo, Tool, ToolError};
use openclaw_proxy_tests::*;
use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct EchoArgs {
    text: String,
}

#[derive(Serialize)]
struct Echoed {
    echoed_text: String,
}

fn echo_tool() -> Tool {
    Tool::new(
        "echo_text",
        "Echo the text back.",
        |args: EchoArgs, _call: CallContext| async move {
            Ok::<_, ToolError>(Echoed {
                echoed_text: args.text,
            })
        },
    )
}

/// The sessions the app reported, in order.
#[derive(Clone, Default)]
struct Reported(Arc<Mutex<Vec<SessionInfo>>>);

impl Reported {
    fn all(&self) -> Vec<SessionInfo> {
        self.0.lock().map(|list| list.clone()).unwrap_or_default()
    }

    async fn wait_for(&self, count: usize) -> Vec<SessionInfo> {
        eventually(
            &format!("{count} session reports"),
            Duration::from_secs(20),
            || std::future::ready(self.all().len() >= count),
        )
        .await;
        self.all()
    }
}

/// An app on `url` with the test token, quick reconnection, these tools.
fn app(url: &str, tools: Vec<Tool>, reported: &Reported) -> openclaw_proxy_app::AppBuilder {
    let sink = reported.0.clone();
    let mut builder = App::builder(url)
        .app_token(APP_TOKEN)
        .device_id("app-sdk-test")
        .app_version("1.0.0")
        .reconnect_delays(Duration::from_millis(20), Duration::from_millis(200))
        .on_session(move |session| {
            if let Ok(mut list) = sink.lock() {
                list.push(session.clone());
            }
        });
    for tool in tools {
        builder = builder.tool(tool);
    }
    builder
}

async fn mcp_call(base: &str, session_id: &str, name: &str, arguments: Value) -> CallToolResult {
    let client = mcp_connect(base, session_id, Route::Path).await;
    let result = no_hang(client.call_tool(call(name, arguments)))
        .await
        .expect("tools/call answered");
    let _ = client.cancel().await;
    result
}

fn assert_echoed(result: &CallToolResult, text: &str) {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        result.structured_content,
        Some(json!({"echoed_text": text})),
        "{result:?}"
    );
}

/// A TCP relay in front of a server: cuts connections on demand and can be
/// pointed at another server.
pub(crate) struct Relay {
    addr: SocketAddr,
    upstream: watch::Sender<SocketAddr>,
    cuts: watch::Sender<u64>,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    pub(crate) async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind relay");
        let addr = listener.local_addr().expect("relay addr");
        let (upstream, upstream_rx) = watch::channel(upstream);
        let (cuts, cuts_rx) = watch::channel(0u64);
        let accepted = Arc::new(AtomicUsize::new(0));
        let counter = accepted.clone();
        // Upstream sockets of cut connections stay open here: to the proxy
        // the old connection looks alive, as a half-open one does.
        let parked: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let target = *upstream_rx.borrow();
                let mut cut = cuts_rx.clone();
                cut.mark_unchanged();
                let parked = parked.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {
                            if let Ok(mut parked) = parked.lock() {
                                parked.push(outbound);
                            }
                        }
                    }
                });
            }
        });
        Self {
            addr,
            upstream,
            cuts,
            accepted,
            task,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every connection's app side, leaving the proxy side open.
    pub(crate) fn cut(&self) {
        self.cuts.send_modify(|generation| *generation += 1);
    }

    pub(crate) fn point_at(&self, upstream: SocketAddr) {
        self.upstream.send_replace(upstream);
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn an_app_serves_a_call_reports_its_session_and_shutdown_deletes_it() {
    let server = TestServer::start().await;
    let reported = Reported::default();
    let serving = app(&server.http_url(), vec![echo_tool()], &reported)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session = serving.session();
    assert_eq!(reported.all(), vec![session.clone()]);
    assert_eq!(
        session.mcp_url,
        format!("{}/v1/mcp/{}", server.http_url(), session.session_id)
    );

    let result = mcp_call(
        &server.http_url(),
        &session.session_id,
        "echo_text",
        json!({"text": "hello"}),
    )
    .await;
    assert_echoed(&result, "hello");

    // The session's own MCP token opens its MCP endpoint.
    let token = session
        .mcp_token
        .clone()
        .expect("the proxy mints an MCP token");
    let client = mcp_connect_with_token(&server.http_url(), &session.session_id, Some(&token))
        .await
        .expect("connect with the session's MCP token");
    let result = no_hang(client.call_tool(call("echo_text", json!({"text": "mine"}))))
        .await
        .expect("tools/call answered");
    assert_echoed(&result, "mine");
    let _ = client.cancel().await;

    no_hang(serving.shutdown()).await.expect("shutdown");
    let request = openclaw_proxy_core::proto::GetSessionRequest {
        session_id: session.session_id.clone(),
    };
    assert!(
        server.hub.get_session(request).await.is_err(),
        "the session outlived shutdown()"
    );
}

#[tokio::test]
async fn an_app_works_where_the_proxy_requires_session_tokens() {
    // The app token only creates sessions here: attaching, reconnecting and
    // deleting go on the session's own token.
    let server = TestServer::builder()
        .require_session_tokens(true)
        .start()
        .await;
    let relay = Relay::start(server.addr).await;
    let serving = app(&relay.url(), vec![echo_tool()], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session = serving.session();
    let token = session.mcp_token.clone().expect("MCP token");
    let before = relay.accepted();
    relay.cut();
    eventually("the app reconnecting", Duration::from_secs(20), || {
        std::future::ready(relay.accepted() > before)
    })
    .await;
    server
        .wait_for_session(&session.session_id, "the bridge back", |described| {
            described.bridge_connected
        })
        .await;
    let client = mcp_connect_with_token(&server.http_url(), &session.session_id, Some(&token))
        .await
        .expect("connect with the session's MCP token");
    let answered = Arc::new(Mutex::new(None));
    eventually(
        "a call answered after the takeover",
        Duration::from_secs(30),
        || {
            let answered = answered.clone();
            let request = client.call_tool(call("echo_text", json!({"text": "scoped"})));
            async move {
                let Ok(result) = request.await else {
                    return false;
                };
                let ok = result.is_error != Some(true);
                if ok && let Ok(mut slot) = answered.lock() {
                    *slot = Some(result);
                }
                ok
            }
        },
    )
    .await;
    let result = answered
        .lock()
        .ok()
        .and_then(|slot| slot.clone())
        .expect("answer");
    assert_echoed(&result, "scoped");
    let _ = client.cancel().await;
    no_hang(serving.shutdown())
        .await
        .expect("shutdown on the session token");
    assert!(
        server
            .hub
            .get_session(openclaw_proxy_core::proto::GetSessionRequest {
                session_id: session.session_id.clone(),
            })
            .await
            .is_err(),
        "the session outlived shutdown()"
    );
}

#[tokio::test]
async fn a_wrong_token_or_bad_tool_is_refused_at_serve_with_a_reason() {
    let server = TestServer::start().await;
    let error = serve_error(
        App::builder(server.http_url())
            .app_token("wrong")
            .tool(echo_tool()),
    )
    .await;
    assert!(error.contains("app token"), "{error}");

    let error = App::builder(server.http_url())
        .tool(Tool::with_schema(
            "scalar",
            "",
            json!({"type": "string"}),
            |_: Value, _| async { Ok::<_, ToolError>(()) },
        ))
        .build()
        .expect_err("a non-object schema is refused")
        .to_string();
    assert!(
        error.contains("scalar") && error.contains("object"),
        "{error}"
    );
}

async fn serve_error(builder: openclaw_proxy_app::AppBuilder) -> String {
    match builder.build().expect("valid app").serve().await {
        Ok(_) => panic!("serve() should have failed"),
        Err(error) => error.to_string(),
    }
}

#[tokio::test]
async fn a_proxy_that_accepts_but_never_answers_fails_serve_instead_of_hanging() {
    // Accepts connections and holds them without a byte of HTTP/2.
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let holder = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let error = serve_error(App::builder(url).tool(echo_tool())).await;
    assert!(error.contains("did not answer"), "{error}");
    holder.abort();
}

#[tokio::test]
async fn after_a_network_drop_the_app_reconnects_and_takes_its_session_back() {
    let server = TestServer::start().await;
    let relay = Relay::start(server.addr).await;
    let reported = Reported::default();
    let serving = app(&relay.url(), vec![echo_tool()], &reported)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;
    assert_echoed(
        &mcp_call(
            &server.http_url(),
            &session_id,
            "echo_text",
            json!({"text": "before"}),
        )
        .await,
        "before",
    );

    let before = relay.accepted();
    relay.cut();
    // The proxy still holds the old, half-open bridge; the app's new one
    // takes it over. Calls routed to the old one fail at the takeover, so
    // poll until a call comes back answered.
    eventually(
        "the app reconnecting through a new connection",
        Duration::from_secs(20),
        || std::future::ready(relay.accepted() > before),
    )
    .await;
    let base = server.http_url();
    let answered = Arc::new(Mutex::new(None));
    eventually(
        "a call answered after the takeover",
        Duration::from_secs(30),
        || {
            let (base, session_id, answered) = (base.clone(), session_id.clone(), answered.clone());
            async move {
                let result =
                    mcp_call(&base, &session_id, "echo_text", json!({"text": "after"})).await;
                let ok = result.is_error != Some(true);
                if ok && let Ok(mut slot) = answered.lock() {
                    *slot = Some(result);
                }
                ok
            }
        },
    )
    .await;
    let result = answered
        .lock()
        .ok()
        .and_then(|slot| slot.clone())
        .expect("answer");
    assert_echoed(&result, "after");
    assert_eq!(serving.session().session_id, session_id, "same session");
    assert_eq!(reported.all().len(), 1, "no new session was created");
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn after_the_proxy_restarts_the_app_creates_a_new_session_and_reports_it() {
    let first = TestServer::start().await;
    let relay = Relay::start(first.addr).await;
    let reported = Reported::default();
    let serving = app(&relay.url(), vec![echo_tool()], &reported)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let old = serving.session();

    no_hang(first.shutdown()).await.expect("first server stops");
    // The restarted proxy, at the same address (the relay's), knows nothing
    // of the old session.
    let second = TestServer::start().await;
    relay.point_at(second.addr);
    relay.cut();

    let reports = reported.wait_for(2).await;
    let new = reports[1].clone();
    assert_ne!(new.session_id, old.session_id);
    assert_eq!(serving.session(), new);
    second
        .wait_for_session(&new.session_id, "the new session's bridge", |session| {
            session.bridge_connected
        })
        .await;
    assert_echoed(
        &mcp_call(
            &second.http_url(),
            &new.session_id,
            "echo_text",
            json!({"text": "again"}),
        )
        .await,
        "again",
    );
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct Nothing {}

#[tokio::test]
async fn a_slow_call_does_not_hold_back_a_fast_one() {
    let server = TestServer::start().await;
    let started = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let (on_start, on_release) = (started.clone(), release.clone());
    let slow = Tool::new("slow", "Waits until released.", move |_: Nothing, _| {
        let (on_start, on_release) = (on_start.clone(), on_release.clone());
        async move {
            let released = on_release.notified();
            on_start.notify_one();
            released.await;
            Ok::<_, ToolError>("released")
        }
    });
    let serving = app(
        &server.http_url(),
        vec![echo_tool(), slow],
        &Reported::default(),
    )
    .build()
    .expect("valid app")
    .serve()
    .await
    .expect("serving");
    let session_id = serving.session().session_id;

    let base = server.http_url();
    let id = session_id.clone();
    let slow_call = tokio::spawn(async move { mcp_call(&base, &id, "slow", json!({})).await });
    no_hang(started.notified()).await;
    assert_echoed(
        &mcp_call(
            &server.http_url(),
            &session_id,
            "echo_text",
            json!({"text": "fast"}),
        )
        .await,
        "fast",
    );
    assert!(
        !slow_call.is_finished(),
        "the slow call ended before it was released"
    );
    release.notify_one();
    let slow_result = no_hang(slow_call).await.expect("join");
    assert_eq!(texts(&slow_result), vec!["released".to_owned()]);
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn calls_beyond_the_limit_wait_their_turn_and_past_the_queue_are_answered_busy() {
    let server = TestServer::start().await;
    let started = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (count, opened) = (started.clone(), gate.clone());
    let gated = Tool::new("gated", "Waits for the gate.", move |_: Nothing, _| {
        let (count, opened) = (count.clone(), opened.clone());
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            let _pass = opened.acquire().await;
            Ok::<_, ToolError>("through")
        }
    });
    // One call runs, one waits, a third is turned away.
    let serving = app(&server.http_url(), vec![gated], &Reported::default())
        .max_concurrent_calls(1)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;
    let first = server.spawn_invoke(&session_id, "gated", json!({}));
    eventually("the first call running", Duration::from_secs(10), || {
        std::future::ready(started.load(Ordering::SeqCst) == 1)
    })
    .await;
    let second = server.spawn_invoke(&session_id, "gated", json!({}));
    server
        .wait_for_session(&session_id, "the second call reaching the app", |session| {
            session.calls_in_flight == 2
        })
        .await;
    let third = mcp_call(&server.http_url(), &session_id, "gated", json!({})).await;
    assert_eq!(third.is_error, Some(true));
    assert!(texts(&third).join(" ").contains("busy"), "{third:?}");
    assert_eq!(
        started.load(Ordering::SeqCst),
        1,
        "the waiting call started early"
    );

    gate.add_permits(2);
    for call in [first, second] {
        let outcome = no_hang(call).await.expect("join").expect("answered");
        assert!(outcome.ok, "{outcome:?}");
    }
    assert_eq!(started.load(Ordering::SeqCst), 2);
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn handler_errors_and_panics_become_error_results_and_the_app_keeps_serving() {
    let server = TestServer::start().await;
    let fails = Tool::new("fails", "Always fails.", |_: Nothing, _| async {
        Err::<(), _>(ToolError::new("The room is archived; pick another room."))
    });
    let panics = Tool::new("panics", "Always panics.", |_: Nothing, _| async {
        if true {
            panic!("index out of bounds");
        }
        Ok::<(), ToolError>(())
    });
    let serving = app(
        &server.http_url(),
        vec![echo_tool(), fails, panics],
        &Reported::default(),
    )
    .build()
    .expect("valid app")
    .serve()
    .await
    .expect("serving");
    let base = server.http_url();
    let session_id = serving.session().session_id;

    let failed = mcp_call(&base, &session_id, "fails", json!({})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(
        texts(&failed),
        vec!["The room is archived; pick another room.".to_owned()]
    );

    let panicked = mcp_call(&base, &session_id, "panics", json!({})).await;
    assert_eq!(panicked.is_error, Some(true));
    let text = texts(&panicked).join(" ");
    assert!(
        text.contains("panicked") && text.contains("index out of bounds"),
        "{text}"
    );

    let refused = mcp_call(&base, &session_id, "echo_text", json!({"text": 7})).await;
    assert_eq!(refused.is_error, Some(true));
    let text = texts(&refused).join(" ");
    assert!(
        text.contains("Invalid arguments") && text.contains("text"),
        "{text}"
    );

    assert_echoed(
        &mcp_call(
            &base,
            &session_id,
            "echo_text",
            json!({"text": "still here"}),
        )
        .await,
        "still here",
    );
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn progress_reported_by_a_handler_reaches_the_mcp_client_before_the_result() {
    let server = TestServer::start().await;
    let steps = Tool::new(
        "steps",
        "Three steps.",
        |_: Nothing, call: CallContext| async move {
            for step in 1..=3 {
                call.progress(f64::from(step), Some(3.0), format!("step {step}"))
                    .await;
            }
            Ok::<_, ToolError>("done")
        },
    );
    let serving = app(&server.http_url(), vec![steps], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session = serving.session();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "steps", "arguments": {}, "_meta": {"progressToken": "t"}
    }});
    let response = no_hang(
        mcp_post(&session.mcp_url, &body)
            .bearer_auth(OPENCLAW_TOKEN)
            .send(),
    )
    .await;
    let messages = sse_messages(&response.text());
    assert_eq!(messages.len(), 4, "{messages:?}");
    for (index, message) in messages[..3].iter().enumerate() {
        assert_eq!(message["method"], "notifications/progress", "{message}");
        assert_eq!(message["params"]["progressToken"], "t");
        assert_eq!(message["params"]["progress"], json!(index as f64 + 1.0));
        assert_eq!(message["params"]["total"], json!(3.0));
        assert_eq!(message["params"]["message"], format!("step {}", index + 1));
    }
    assert_eq!(messages[3]["result"]["content"][0]["text"], "done");
    no_hang(serving.shutdown()).await.expect("shutdown");
}

type Seen = Arc<Mutex<Option<openclaw_proxy_app::CancelReason>>>;

/// A tool that signals when it starts, waits until cancelled, and records
/// why.
fn waits_until_cancelled() -> (Tool, Arc<Notify>, Seen) {
    let started = Arc::new(Notify::new());
    let seen: Seen = Arc::default();
    let (on_start, record) = (started.clone(), seen.clone());
    let tool = Tool::new(
        "waits",
        "Waits until cancelled.",
        move |_: Nothing, call: CallContext| {
            let (on_start, record) = (on_start.clone(), record.clone());
            async move {
                on_start.notify_one();
                call.cancelled().await;
                if let Ok(mut slot) = record.lock() {
                    *slot = call.cancel_reason();
                }
                Ok::<_, ToolError>(())
            }
        },
    );
    (tool, started, seen)
}

async fn cancellation_seen(seen: &Seen) -> Option<openclaw_proxy_app::CancelReason> {
    eventually(
        "the handler seeing its cancellation",
        Duration::from_secs(20),
        || std::future::ready(seen.lock().map(|slot| slot.is_some()).unwrap_or(false)),
    )
    .await;
    seen.lock().ok().and_then(|slot| slot.clone())
}

#[tokio::test]
async fn bridge_loss_cancels_the_calls_it_delivered() {
    let server = TestServer::start().await;
    let relay = Relay::start(server.addr).await;
    let (waits, started, seen) = waits_until_cancelled();
    let serving = app(&relay.url(), vec![waits], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;
    let call = server.spawn_invoke(&session_id, "waits", json!({}));
    no_hang(started.notified()).await;
    relay.cut();
    assert_eq!(
        cancellation_seen(&seen).await,
        Some(openclaw_proxy_app::CancelReason::BridgeLost)
    );
    drop(call);
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn a_call_the_proxy_cancels_is_cancelled_in_the_handler() {
    let server = TestServer::start().await;
    let (waits, started, seen) = waits_until_cancelled();
    let serving = app(&server.http_url(), vec![waits], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;
    // The caller stops waiting: the proxy sends CancelTool.
    let call = server.spawn_invoke(&session_id, "waits", json!({}));
    no_hang(started.notified()).await;
    call.abort();
    assert!(
        matches!(
            cancellation_seen(&seen).await,
            Some(openclaw_proxy_app::CancelReason::Proxy(_))
        ),
        "the handler sees the proxy's cancel"
    );
    no_hang(serving.shutdown()).await.expect("shutdown");
}

#[tokio::test]
async fn shutdown_cancels_the_running_calls() {
    let server = TestServer::start().await;
    let (waits, started, seen) = waits_until_cancelled();
    let serving = app(&server.http_url(), vec![waits], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let call = server.spawn_invoke(&serving.session().session_id, "waits", json!({}));
    no_hang(started.notified()).await;
    no_hang(serving.shutdown()).await.expect("shutdown");
    assert_eq!(
        cancellation_seen(&seen).await,
        Some(openclaw_proxy_app::CancelReason::Shutdown)
    );
    let outcome = no_hang(call).await.expect("join");
    assert!(
        !outcome.is_ok_and(|outcome| outcome.ok),
        "a call cut short by shutdown did not fail"
    );
}

/// A TLS front for a server, as a reverse proxy terminating `https://`
/// would be: a certificate for 127.0.0.1 from a CA made for the test, ALPN
/// `h2`, and plain TCP to the server behind.
struct TlsFront {
    addr: SocketAddr,
    ca_pem: String,
    handshakes: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl TlsFront {
    async fn start(upstream: SocketAddr) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        use tokio_rustls::rustls;

        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let key = KeyPair::generate().expect("server key");
        let certificate = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .expect("server params")
            .signed_by(&key, &ca)
            .expect("server certificate");
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![certificate.der().clone()], key)
            .expect("TLS server config");
        config.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));

        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind TLS front");
        let addr = listener.local_addr().expect("TLS front addr");
        let handshakes = Arc::new(AtomicUsize::new(0));
        let counter = handshakes.clone();
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (acceptor, counter) = (acceptor.clone(), counter.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(inbound).await else {
                        return;
                    };
                    counter.fetch_add(1, Ordering::SeqCst);
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            addr,
            ca_pem: ca.pem(),
            handshakes,
            task,
        }
    }

    fn url(&self) -> String {
        format!("https://{}", self.addr)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test]
async fn an_app_reaches_an_https_proxy_and_verifies_its_certificate() {
    let server = TestServer::start().await;
    let front = TlsFront::start(server.addr).await;

    // Without the CA, the proxy's certificate is refused.
    let untrusted = app(&front.url(), vec![echo_tool()], &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await;
    assert!(untrusted.is_err(), "an unknown certificate was accepted");

    let serving = app(&front.url(), vec![echo_tool()], &Reported::default())
        .tls_ca_certificate(front.ca_pem.clone())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving over TLS");
    assert!(front.handshakes.load(Ordering::SeqCst) > 0);
    let session = serving.session();
    assert!(session.mcp_url.starts_with(&front.url()), "{session:?}");
    assert_echoed(
        &mcp_call(
            &server.http_url(),
            &session.session_id,
            "echo_text",
            json!({"text": "sealed"}),
        )
        .await,
        "sealed",
    );
    no_hang(serving.shutdown())
        .await
        .expect("shutdown over TLS");
}

/// An example app started as a child process; its stdout carries one
/// session id per line.
struct ExampleApp {
    child: tokio::process::Child,
    lines: tokio::sync::mpsc::Receiver<String>,
}

impl ExampleApp {
    fn start(mut command: tokio::process::Command) -> Self {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start the example app");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, lines) = tokio::sync::mpsc::channel(16);
        // Reads on, so the child never blocks on a full pipe.
        tokio::spawn(async move {
            let mut reader = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                let _ = sender.send(line.trim().to_owned()).await;
            }
        });
        Self { child, lines }
    }

    /// The next session id the example prints.
    async fn next_session_id(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(600), self.lines.recv())
            .await
            .expect("the example printed a session id (a first build may take minutes)")
            .expect("the example exited before printing a session id")
    }
}

/// A server that pings every 100 ms and drops a bridge silent for 300 ms,
/// so an example that does not answer pings loses its bridge.
pub(crate) async fn pinging_server() -> TestServer {
    TestServer::builder()
        .core(|core| {
            core.ping_interval = Duration::from_millis(100);
            core.missed_pings_allowed = 3;
        })
        .start()
        .await
}

/// Waits for the session's bridge, then calls `echo_text` through MCP.
async fn echo_through(server: &TestServer, session_id: &str, text: &str) {
    server
        .wait_for_session(session_id, "the example's bridge", |session| {
            session.bridge_connected
        })
        .await;
    assert_echoed(
        &mcp_call(
            &server.http_url(),
            session_id,
            "echo_text",
            json!({"text": text}),
        )
        .await,
        text,
    );
}

/// What every example's `echo://readme` holds.
const EXAMPLE_README: &str = "This app echoes text back: call echo_text with {\"text\": ...}.";

/// The session an example registered shows its resource and its prompt,
/// and an MCP client reads the one and gets the other through the bridge.
async fn readme_and_prompt_through(server: &TestServer, session_id: &str) {
    let shown = server
        .sessions()
        .await
        .get(session_id)
        .await
        .expect("GetSession");
    let uris: Vec<&str> = shown.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(uris, ["echo://readme"], "{shown:?}");
    let prompts: Vec<&str> = shown.prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(prompts, ["echo_prompt"], "{shown:?}");

    let client = mcp_connect(&server.http_url(), session_id, Route::Path).await;
    let listed = no_hang(client.list_resources(None))
        .await
        .expect("resources/list");
    assert_eq!(listed.resources.len(), 1, "{listed:?}");
    assert_eq!(listed.resources[0].uri, "echo://readme");
    let read =
        no_hang(client.read_resource(rmcp::model::ReadResourceRequestParams::new("echo://readme")))
            .await
            .expect("resources/read");
    match &read.contents[..] {
        [rmcp::model::ResourceContents::TextResourceContents { uri, text, .. }] => {
            assert_eq!(uri, "echo://readme");
            assert_eq!(text, EXAMPLE_README);
        }
        other => panic!("expected one text, got {other:?}"),
    }
    let mut arguments = serde_json::Map::new();
    arguments.insert("text".into(), json!("hello"));
    let prompt = no_hang(client.get_prompt(
        rmcp::model::GetPromptRequestParams::new("echo_prompt").with_arguments(arguments),
    ))
    .await
    .expect("prompts/get");
    let messages = serde_json::to_value(&prompt.messages).expect("messages");
    assert_eq!(
        messages,
        json!([{"role": "user", "content": {"type": "text",
            "text": "Use the echo_text tool to echo this text: hello"}}])
    );
    let _ = client.cancel().await;
}

/// Whether an example has `confirm_echo`, the tool that asks the user first.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asks {
    Yes,
    No,
}

/// Runs an example against a proxy behind a relay: it answers an MCP call,
/// serves its resource and prompt (and asks the user, if it `asks`), then
/// the proxy restarts at the same address, and the example registers a new
/// session, prints its id and answers again.
async fn check_example(mut command: tokio::process::Command, asks: Asks) {
    let first = pinging_server().await;
    let relay = Relay::start(first.addr).await;
    command.args(["--proxy-url", &relay.url(), "--app-token", APP_TOKEN]);
    let mut example = ExampleApp::start(command);
    let old = example.next_session_id().await;
    echo_through(&first, &old, "one").await;
    readme_and_prompt_through(&first, &old).await;
    if asks == Asks::Yes {
        asking::confirm_echo_through(&first, &old).await;
    }

    no_hang(first.shutdown()).await.expect("first server stops");
    let second = pinging_server().await;
    relay.point_at(second.addr);
    relay.cut();
    let new = example.next_session_id().await;
    assert_ne!(new, old, "a new session after the restart");
    echo_through(&second, &new, "two").await;

    let _ = example.child.start_kill();
    let _ = example.child.wait().await;
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/examples")
}

#[tokio::test]
async fn the_rust_echo_app_example_answers_and_survives_a_proxy_restart() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = tokio::process::Command::new(cargo);
    command
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args([
            "run",
            "--quiet",
            "-p",
            "openclaw-proxy-app",
            "--example",
            "echo_app",
            "--",
        ]);
    check_example(command, Asks::No).await;
}

#[tokio::test]
async fn the_python_example_answers_asks_the_user_and_survives_a_proxy_restart() {
    // The example is written with the Python app package; it runs on the
    // package's wheel as tests/e2e/python_app.rs installs it.
    let python = openclaw_proxy_tests::python_package::python_app_package(Path::new(env!(
        "CARGO_TARGET_TMPDIR"
    )))
    .await;
    let mut command = tokio::process::Command::new(python);
    command.arg(examples_dir().join("python/echo_app.py"));
    check_example(command, Asks::Yes).await;
}

#[tokio::test]
async fn the_typescript_example_answers_asks_the_user_and_survives_a_proxy_restart() {
    // The example is written with the TypeScript app package; it runs on the
    // package's tarball as tests/e2e/typescript_app.rs installs it.
    let installed = openclaw_proxy_tests::typescript_package::typescript_app_package(Path::new(
        env!("CARGO_TARGET_TMPDIR"),
    ))
    .await;
    let mut command = tokio::process::Command::new(&installed.node);
    command.current_dir(&installed.project).arg("echo_app.ts");
    check_example(command, Asks::Yes).await;
}
