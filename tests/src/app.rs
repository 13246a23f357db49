//! Test apps: what an app answers is one closure from [`Call`] to [`Answer`],
//! whichever bridge carries the call.
//!
//! [`serve_app`] is the one "answer every call" loop; it runs on a bridge a test
//! has already opened (a WebSocket [`WsApp`] or a gRPC [`GrpcBridge`]), so a
//! test can first do something low-level on that bridge and then let it
//! serve. [`TestApp::start`] registers a session and serves it on the bridge
//! the test names: the legacy app (REST and the JSON WebSocket bridge), or a
//! native app written with the app crate (`openclaw_proxy_app`) on gRPC.

use std::future::Future;
use std::sync::Arc;

use openclaw_proxy_app::{App, CallContext, Serving, Tool, ToolError};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tonic::Status;

use crate::grpc_app::{GrpcBridge, Received};
use crate::server::{APP_TOKEN, TestServer};
use crate::session::TestSession;
use crate::session::legacy_session_body;
use crate::ws_app::WsApp;
use openclaw_proxy_core::proto;

/// Which bridge an app uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BridgeKind {
    /// JSON over WebSocket, sessions registered over REST.
    Ws,
    /// gRPC `BridgeService.Attach`, sessions registered over gRPC.
    Grpc,
}

impl BridgeKind {
    /// Both bridges, for tests that must hold on each.
    pub const BOTH: [Self; 2] = [Self::Ws, Self::Grpc];

    /// `ws` or `grpc`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ws => "ws",
            Self::Grpc => "grpc",
        }
    }
}

/// One tool call as the app receives it.
#[derive(Clone, Debug)]
pub struct Call {
    /// The session the call belongs to.
    pub session_id: String,
    /// The proxy's id of the call (`"{session_id}:{n}"`).
    pub request_id: String,
    /// The tool called.
    pub tool_name: String,
    /// The arguments, a JSON object.
    pub arguments: Value,
    /// The W3C `traceparent` the proxy sent with the call, if any.
    pub trace_parent: Option<String>,
}

/// What the app answers.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// `ok: true` with this content (`null`: no content).
    Content(Value),
    /// `ok: false` with this error text.
    Error(String),
}

/// Answers every call with its own arguments.
pub fn echo(call: &Call) -> Answer {
    Answer::Content(call.arguments.clone())
}

/// A bridge an app can serve: the calls it delivers, the way to answer them,
/// and how it ends.
pub trait AppBridge: Send + 'static {
    /// What the bridge ended with.
    type End: Send + 'static;

    /// The next call; pings are answered and other messages skipped on the
    /// way.
    fn next_call(&mut self) -> impl Future<Output = Result<Call, Self::End>> + Send;

    /// Sends the answer to `call`.
    fn send_answer(&mut self, call: &Call, answer: Answer) -> impl Future<Output = ()> + Send;
}

/// Answers every call on `bridge` through `handler` until the bridge ends;
/// returns how it ended (a close code and reason, a gRPC status).
pub fn serve_app<B: AppBridge>(
    mut bridge: B,
    mut handler: impl FnMut(&Call) -> Answer + Send + 'static,
) -> JoinHandle<B::End> {
    tokio::spawn(async move {
        loop {
            match bridge.next_call().await {
                Ok(call) => {
                    let answer = handler(&call);
                    bridge.send_answer(&call, answer).await;
                }
                Err(end) => return end,
            }
        }
    })
}

impl WsApp {
    /// Answers every `invoke_tool` with its own arguments as content, in the
    /// original implementation's spelling (`requestId`), until the bridge
    /// closes; returns the close code.
    pub fn serve_echo(self) -> JoinHandle<(u16, String)> {
        serve_app(self, echo)
    }
}

impl GrpcBridge {
    /// Answers every call with its own arguments until the bridge ends;
    /// returns the end status.
    pub fn serve_echo(self) -> JoinHandle<Status> {
        serve_app(self, echo)
    }
}

/// The legacy app speaks the original implementation's spelling: it reads
/// `requestId` and `toolName` and answers with `requestId`.
impl AppBridge for WsApp {
    type End = (u16, String);

    async fn next_call(&mut self) -> Result<Call, Self::End> {
        loop {
            let frame = self.next_json().await?;
            if frame["type"] != "invoke_tool" {
                continue;
            }
            let text = |key: &str| {
                frame[key]
                    .as_str()
                    .unwrap_or_else(|| panic!("invoke_tool without a string {key:?}: {frame}"))
                    .to_owned()
            };
            return Ok(Call {
                session_id: text("mcpSessionId"),
                request_id: text("requestId"),
                tool_name: text("toolName"),
                arguments: frame["arguments"].clone(),
                trace_parent: frame
                    .get("traceparent")
                    .map(|value| value.as_str().expect("traceparent is text").to_owned()),
            });
        }
    }

    async fn send_answer(&mut self, call: &Call, answer: Answer) {
        let mut frame = json!({
            "type": "invoke_result",
            "mcpSessionId": call.session_id,
            "requestId": call.request_id,
        });
        match answer {
            Answer::Content(content) => {
                frame["ok"] = json!(true);
                frame["content"] = content;
            }
            Answer::Error(error) => {
                frame["ok"] = json!(false);
                frame["error"] = json!(error);
            }
        }
        self.send_json(frame).await;
    }
}

impl AppBridge for GrpcBridge {
    type End = Status;

    async fn next_call(&mut self) -> Result<Call, Self::End> {
        loop {
            match self.next().await {
                Received::Invoke(invoke) => {
                    let invoke = *invoke;
                    return Ok(Call {
                        arguments: serde_json::from_str(&invoke.arguments_json)
                            .expect("the proxy sends arguments as JSON text"),
                        session_id: invoke.session_id,
                        request_id: invoke.request_id,
                        tool_name: invoke.tool_name,
                        trace_parent: (!invoke.trace_parent.is_empty())
                            .then_some(invoke.trace_parent),
                    });
                }
                Received::Notice(_) | Received::Cancel(_) | Received::Request(_) => {}
                Received::Ended(status) => return Err(status),
            }
        }
    }

    async fn send_answer(&mut self, call: &Call, answer: Answer) {
        match answer {
            // No content travels as empty text, as the app crate sends it.
            Answer::Content(Value::Null) => {
                GrpcBridge::answer(self, &call.request_id, true, "", "").await;
            }
            Answer::Content(content) => {
                GrpcBridge::answer(self, &call.request_id, true, &content.to_string(), "").await;
            }
            Answer::Error(error) => {
                GrpcBridge::answer(self, &call.request_id, false, "", &error).await;
            }
        }
    }
}

/// A session and the app serving it, until dropped.
pub struct TestApp {
    /// The session the app registered.
    pub session: TestSession,
    running: Running,
}

enum Running {
    Ws(JoinHandle<(u16, String)>),
    Grpc(
        #[expect(
            dead_code,
            reason = "held so that the app serves; dropping it stops the app"
        )]
        Serving,
    ),
}

impl TestApp {
    /// Registers a session offering `tools` (the REST form: a JSON array of
    /// `{name, description?, input_schema?, path?}`) with the sample metadata,
    /// and answers its calls through `handler` on `bridge`. Returns once the
    /// bridge is attached.
    pub async fn start(
        server: &TestServer,
        bridge: BridgeKind,
        tools: Value,
        handler: impl Fn(&Call) -> Answer + Send + Sync + 'static,
    ) -> Self {
        match bridge {
            BridgeKind::Ws => {
                let mut body = legacy_session_body();
                body["tools"] = tools;
                let session = TestSession::register(server, &body).await;
                let app = WsApp::connect(&session.bridge_url, Some(APP_TOKEN))
                    .await
                    .expect("WebSocket bridge");
                let task = serve_app(app, handler);
                server
                    .wait_for_session(&session.id, "the bridge attaching", |session| {
                        session.bridge_connected
                    })
                    .await;
                Self {
                    session,
                    running: Running::Ws(task),
                }
            }
            BridgeKind::Grpc => {
                let handler: Arc<dyn Fn(&Call) -> Answer + Send + Sync> = Arc::new(handler);
                let mut app = App::builder(server.http_url())
                    .app_token(APP_TOKEN)
                    .device_id("device-1")
                    .device_name("desktop")
                    .app_version("1.0.0")
                    .chat_id("chat-1");
                for tool in tools.as_array().expect("tools is a JSON array") {
                    app = app.tool(crate_tool(tool, handler.clone()));
                }
                let serving = app
                    .build()
                    .expect("valid app")
                    .serve()
                    .await
                    .expect("the app serves");
                let info = serving.session();
                let mut session = TestSession::at(server.addr, info.session_id, None, None);
                session.mcp_token = info.mcp_token;
                Self {
                    session,
                    running: Running::Grpc(serving),
                }
            }
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Dropping `Serving` stops the gRPC app by itself.
        if let Running::Ws(task) = &self.running {
            task.abort();
        }
    }
}

/// One tool of the REST form, answered by `handler` through the app crate.
fn crate_tool(tool: &Value, handler: Arc<dyn Fn(&Call) -> Answer + Send + Sync>) -> Tool {
    let name = tool["name"].as_str().expect("tool name");
    let description = tool["description"].as_str().unwrap_or_default();
    let schema = tool
        .get("input_schema")
        .or_else(|| tool.get("inputSchema"))
        .cloned()
        .unwrap_or_else(|| json!({}));
    let run = move |arguments: Value, context: CallContext| {
        let call = Call {
            session_id: context.session_id().to_owned(),
            request_id: context.request_id().to_owned(),
            tool_name: context.tool_name().to_owned(),
            arguments,
            trace_parent: context.trace_parent().map(str::to_owned),
        };
        let answer = match handler(&call) {
            Answer::Content(content) => Ok(content),
            Answer::Error(error) => Err(ToolError::new(error)),
        };
        std::future::ready(answer)
    };
    let defined = Tool::with_schema(name, description, schema, run);
    match tool["path"].as_str() {
        Some(path) => defined.path(path),
        None => defined,
    }
}

/// An MCP request (`resources/read`, `prompts/get`, ...) as the app
/// receives it, on either bridge.
#[derive(Clone, Debug)]
pub struct AppRequest {
    /// The proxy's id of the request, to echo in the answer.
    pub request_id: String,
    /// The MCP method.
    pub method: String,
    /// The request's params, a JSON object.
    pub params: Value,
    /// The W3C `traceparent` the proxy sent with the request, if any.
    pub trace_parent: Option<String>,
}

/// A JSON-RPC error an app answers a request with: code, message, data.
pub type RequestError = (i32, String, Value);

/// The app's end of either bridge, receiving MCP requests and answering
/// them by hand (tool calls and other frames are skipped; pings answered).
pub enum RequestBridge {
    /// The JSON WebSocket bridge (both boxed: a WebSocket client that can
    /// speak TLS is much larger than a gRPC one).
    Ws(Box<WsApp>),
    /// The gRPC bridge.
    Grpc(Box<GrpcBridge>),
}

impl RequestBridge {
    /// Attaches a bridge of `kind` to `session_id` on the server at `base`
    /// (`http://host:port`) with the app token.
    pub async fn attach(kind: BridgeKind, base: &str, session_id: &str) -> Self {
        Self::attach_with(kind, base, session_id, APP_TOKEN).await
    }

    /// [`RequestBridge::attach`] with `token` (the app token or the
    /// session's own).
    pub async fn attach_with(kind: BridgeKind, base: &str, session_id: &str, token: &str) -> Self {
        match kind {
            BridgeKind::Ws => {
                let authority = base.trim_start_matches("http://");
                let url = format!("ws://{authority}/v1/chat/sessions/{session_id}/bridge");
                Self::Ws(Box::new(
                    WsApp::connect(&url, Some(token))
                        .await
                        .expect("WebSocket bridge"),
                ))
            }
            BridgeKind::Grpc => Self::Grpc(Box::new(
                GrpcBridge::open(
                    crate::http_client::channel_to(base.to_owned()).await,
                    token,
                    session_id,
                )
                .await
                .expect("gRPC bridge"),
            )),
        }
    }

    /// The next MCP request; `None` once the bridge ended.
    pub async fn next_request(&mut self) -> Option<AppRequest> {
        match self {
            Self::Ws(app) => loop {
                let frame = app.next_json().await.ok()?;
                if frame["type"] != "mcp_request" {
                    continue;
                }
                let text = |key: &str| {
                    frame[key]
                        .as_str()
                        .unwrap_or_else(|| panic!("mcp_request without a string {key:?}: {frame}"))
                        .to_owned()
                };
                return Some(AppRequest {
                    request_id: text("request_id"),
                    method: text("method"),
                    params: frame["params"].clone(),
                    trace_parent: frame["traceparent"].as_str().map(str::to_owned),
                });
            },
            Self::Grpc(bridge) => loop {
                match bridge.next().await {
                    Received::Request(request) => {
                        return Some(AppRequest {
                            params: serde_json::from_str(&request.params_json)
                                .expect("the proxy sends params as JSON text"),
                            request_id: request.request_id,
                            method: request.method,
                            trace_parent: (!request.trace_parent.is_empty())
                                .then_some(request.trace_parent),
                        });
                    }
                    Received::Ended(_) => return None,
                    Received::Invoke(_) | Received::Notice(_) | Received::Cancel(_) => {}
                }
            },
        }
    }

    /// Answers the request `request_id` with a result or a JSON-RPC error.
    pub async fn answer(&mut self, request_id: &str, outcome: Result<Value, RequestError>) {
        match self {
            Self::Ws(app) => {
                let mut frame = json!({"type": "mcp_result", "request_id": request_id});
                match outcome {
                    Ok(result) => frame["result"] = result,
                    Err((code, message, data)) => {
                        frame["error"] = json!({"code": code, "message": message});
                        if !data.is_null() {
                            frame["error"]["data"] = data;
                        }
                    }
                }
                app.send_json(frame).await;
            }
            Self::Grpc(bridge) => {
                let outcome =
                    outcome
                        .map(|result| result.to_string())
                        .map_err(|(code, message, data)| proto::McpError {
                            code,
                            message,
                            data_json: if data.is_null() {
                                String::new()
                            } else {
                                data.to_string()
                            },
                        });
                bridge.answer_request(request_id, outcome).await;
            }
        }
    }

    /// Answers every request through `handler` until the bridge ends;
    /// returns the requests seen.
    pub fn serve(
        mut self,
        mut handler: impl FnMut(&AppRequest) -> Result<Value, RequestError> + Send + 'static,
    ) -> JoinHandle<Vec<AppRequest>> {
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(request) = self.next_request().await {
                let outcome = handler(&request);
                self.answer(&request.request_id, outcome).await;
                seen.push(request);
            }
            seen
        })
    }
}
