//! The load generator behind `loadgen` (see `src/bin/loadgen.rs`): drives the
//! whole path (MCP over HTTP → edge → core → bridge → app → back) and
//! measures it.
//!
//! It speaks only the documented contract (REST, the WebSocket bridge, gRPC,
//! MCP over HTTP), so it can target any server that implements it. It runs
//! the app side itself, answering every call at once with its arguments, and
//! checks every answer: a fast wrong answer counts as an error.
//!
//! The MCP clients are lean on purpose (one HTTP/1.1 connection per client,
//! raw JSON-RPC, no SDK), because they share the machine with the server and
//! every cycle they spend is one the server does not get.
//!
//! They send the OpenClaw token, or with [`OAuthLoad`] an OAuth access
//! token each, signed by an issuer the load generator runs itself (the
//! tests' [`TestIssuer`]): what a signed-in MCP host sends, so the cost of
//! checking access tokens shows beside the static token's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use openclaw_proxy_core::proto::{
    self, app_message, bridge_service_client::BridgeServiceClient, proxy_message,
    session_service_client::SessionServiceClient,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_tungstenite::tungstenite::Message;
use tonic::transport::Channel;

use openclaw_proxy_app::{
    App, CallContext, Content, Elicitation, McpError, Prompt, PromptArgument, PromptMessage,
    ReadRequest, Resource, ResourceContents, Tool, ToolError,
};

use crate::grpc_app::{bridge_request, with_token};
use crate::oauth::{SigningKey, TestIssuer, unix_now};
use crate::session::TestSession;

pub use crate::app::BridgeKind;

/// What answers on the gRPC bridge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GrpcApp {
    /// A lean hand-written loop, a hundred bridges per HTTP/2 connection:
    /// the app side takes as little of the shared machine as it can, so the
    /// numbers are the server's. (When this was written, the crate variant
    /// answered 13 to 31 % fewer calls per second at concurrency 1, 16 and
    /// 64 on the two-core machine, its p50 15 to 70 % higher.)
    #[default]
    Lean,
    /// Apps written with the app crate (`openclaw_proxy_app`), each on its
    /// own connection as real native apps run: the numbers include the
    /// crate's own cost per call (a task, JSON parsed and written again, the
    /// call bookkeeping).
    Crate,
    /// Apps written with the Python package (`proto/python`), one process
    /// each (`tests/python/bench_app.py`, on the package's wheel installed
    /// under `target/tmp`): the numbers include the package's cost per call
    /// (a task, pydantic validation, JSON both ways) and Python's.
    Python,
    /// Apps written with the TypeScript package (`proto/typescript`), one
    /// Node.js process each (`tests/typescript/bench_app.ts`, in the clean
    /// project the package's tarball is installed into under `target/tmp`):
    /// the numbers include the package's cost per call (a promise, zod
    /// validation, JSON both ways) and Node's.
    Typescript,
}

/// The MCP protocol revision the load's clients speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// An `initialize` handshake first, then `MCP-Protocol-Version:
    /// 2025-11-25` on every call.
    #[default]
    #[value(name = "2025-11-25")]
    V2025_11_25,
    /// No handshake: every call carries its revision, client and
    /// capabilities in `_meta` and names its method and tool in the
    /// `Mcp-Method` and `Mcp-Name` headers.
    #[value(name = "2026-07-28")]
    V2026_07_28,
}

impl Protocol {
    /// The revision's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }
}

/// The MCP request the load's clients send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// `tools/call` of the `echo` tool; the app echoes the arguments.
    #[default]
    #[value(name = "tools/call")]
    ToolsCall,
    /// `resources/read` of the session's one resource ([`BENCH_URI`]),
    /// which the app answers over the bridge's generic `mcp_request`.
    #[value(name = "resources/read")]
    ResourcesRead,
    /// `prompts/get` of the session's one prompt ([`BENCH_PROMPT`]) with a
    /// `text` argument, which the app answers over the bridge's generic
    /// `mcp_request`, its one message holding that text.
    #[value(name = "prompts/get")]
    PromptsGet,
    /// `resources/list`, which the proxy answers from the session's
    /// declaration without asking the app.
    #[value(name = "resources/list")]
    ResourcesList,
}

impl Method {
    /// The MCP method's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ToolsCall => "tools/call",
            Self::ResourcesRead => "resources/read",
            Self::PromptsGet => "prompts/get",
            Self::ResourcesList => "resources/list",
        }
    }

    /// Whether the load's sessions must declare the bench resource and
    /// prompt: for every method but `tools/call`, whose sessions stay as
    /// they always were (one `echo` tool).
    pub fn needs_catalog(self) -> bool {
        self != Self::ToolsCall
    }
}

/// The URI of the one resource a session of a [`Method::needs_catalog`]
/// load declares.
pub const BENCH_URI: &str = "bench://doc";

/// The name of the one prompt such a session declares.
pub const BENCH_PROMPT: &str = "bench_prompt";

/// What the bench app's resource holds.
pub const BENCH_DOC_TEXT: &str = "The bench document: a short text read again and again.";

/// The id the bench app gives its one question per call (with `--elicit`).
const ELICIT_ID: &str = "q";

/// The params of the bench app's question: a form with one text field,
/// which the client fills in with the text of its own call; the app
/// answers the call with what the client answered, so a wrong or lost
/// answer shows as a wrong echo.
const ELICIT_PARAMS: &str = r#"{"mode":"form","message":"Echo what?","requestedSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}"#;

/// Where the server is and how to authenticate.
#[derive(Clone, Debug)]
pub struct Target {
    /// `http://host:port` of the server.
    pub base_url: String,
    /// The app token (REST, WebSocket, gRPC).
    pub app_token: String,
    /// The OpenClaw token (`/v1/mcp`).
    pub openclaw_token: String,
    /// Where MCP calls go when not to `base_url`: another node of the same
    /// cluster, for cross-node numbers.
    pub mcp_base_url: Option<String>,
}

impl Target {
    pub(crate) fn authority(&self) -> &str {
        authority_of(&self.base_url)
    }

    fn mcp_authority(&self) -> &str {
        authority_of(self.mcp_base_url.as_deref().unwrap_or(&self.base_url))
    }
}

fn authority_of(url: &str) -> &str {
    url.split_once("://")
        .map_or(url, |(_, rest)| rest)
        .trim_end_matches('/')
}

/// Access tokens instead of the OpenClaw token: the sessions are bound to
/// `subject`, and each MCP client signs its own token of that subject for
/// the MCP endpoint it calls, as an authorization server would issue it.
#[derive(Clone)]
pub struct OAuthLoad {
    /// The issuer's URL, the tokens' `iss`.
    pub issuer: String,
    /// The key that signs them (ES256), which the issuer publishes.
    pub key: SigningKey,
    /// Their `sub`, and the sessions' owner.
    pub subject: String,
}

impl OAuthLoad {
    /// Tokens of `subject` from `issuer`'s current key.
    pub fn new(issuer: &TestIssuer, subject: &str) -> Self {
        Self {
            issuer: issuer.url.clone(),
            key: issuer.key(),
            subject: subject.to_owned(),
        }
    }

    /// Client `client`'s token for the MCP endpoint at `audience`, good
    /// for an hour past `duration`, with the scope `mcp`.
    fn token(&self, audience: &str, client: usize, duration: Duration) -> String {
        let now = unix_now();
        self.key.sign(&json!({
            "iss": self.issuer, "sub": self.subject, "aud": audience,
            "iat": now, "nbf": now, "exp": now + 3600 + duration.as_secs(),
            "client_id": "loadgen", "scope": "mcp", "jti": format!("loadgen-{client}"),
        }))
    }
}

impl std::fmt::Debug for OAuthLoad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthLoad")
            .field("issuer", &self.issuer)
            .field("kid", &self.key.kid)
            .field("subject", &self.subject)
            .finish()
    }
}

/// One load run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The server.
    pub target: Target,
    /// The app's bridge.
    pub bridge: BridgeKind,
    /// What answers on a gRPC bridge.
    pub grpc_app: GrpcApp,
    /// Concurrent MCP clients.
    pub concurrency: usize,
    /// Sessions (each with its own app bridge); clients are spread over them.
    pub sessions: usize,
    /// How long to run.
    pub duration: Duration,
    /// Stop after this many calls instead (for smoke runs).
    pub max_calls: Option<u64>,
    /// The MCP request the clients send.
    pub method: Method,
    /// The protocol revision of the MCP clients.
    pub protocol: Protocol,
    /// Whether each call asks for progress (a `progressToken`).
    pub progress: bool,
    /// How many times the app reports progress before it answers a call
    /// that asks for it; with one or more, each answer is an SSE stream,
    /// with none, plain JSON.
    pub progress_reports: u32,
    /// Whether each call carries vendor keys in `params._meta` (an agent
    /// session key, as OpenClaw sends one, and a nested vendor object),
    /// which reach the app as sent.
    pub vendor_meta: bool,
    /// OAuth access tokens instead of the OpenClaw token (the sessions
    /// bound to their subject).
    pub oauth: Option<OAuthLoad>,
    /// Each call's app asks the client one question (`elicitation/create`,
    /// a form) and answers with the client's answer; the client answers
    /// at once, the way its revision does (a POSTed response on a second
    /// connection up to 2025-11-25, a retried call at 2026-07-28).
    pub elicit: bool,
}

impl LoadConfig {
    /// The progress reports the app sends per call: none unless calls ask
    /// for progress.
    pub fn reports_per_call(&self) -> u32 {
        if self.progress {
            self.progress_reports
        } else {
            0
        }
    }

    /// What the load's apps do beside echoing.
    pub fn app_side(&self) -> AppSide<'_> {
        AppSide {
            reports: self.reports_per_call(),
            catalog: self.method.needs_catalog(),
            owner: self.oauth.as_ref().map(|oauth| oauth.subject.as_str()),
            elicit: self.elicit,
        }
    }
}

/// What the bench apps do beside answering each call with its arguments.
#[derive(Clone, Copy, Debug, Default)]
pub struct AppSide<'a> {
    /// Progress reports before each answer (to calls that ask for them).
    pub reports: u32,
    /// Each session also declares the bench resource ([`BENCH_URI`]) and
    /// prompt ([`BENCH_PROMPT`]), which its app serves.
    pub catalog: bool,
    /// Each session is bound to this OAuth subject.
    pub owner: Option<&'a str>,
    /// Each call asks the client one question first ([`LoadConfig::elicit`]).
    pub elicit: bool,
}

/// The numbers of one run, printed as one JSON line.
#[derive(Clone, Debug)]
pub struct LoadReport {
    /// Calls answered correctly.
    pub calls: u64,
    /// Calls that failed or answered wrongly.
    pub errors: u64,
    /// Wall time of the measured phase.
    pub elapsed: Duration,
    /// Latency percentiles in microseconds: p50, p90, p99, max.
    pub percentiles_us: [u64; 4],
}

impl LoadReport {
    /// The report of a run from its correct calls' latencies (µs).
    pub(crate) fn from_latencies(mut latencies: Vec<u32>, errors: u64, elapsed: Duration) -> Self {
        latencies.sort_unstable();
        let at = |q: f64| -> u64 {
            latencies
                .get(((latencies.len().max(1) as f64 - 1.0) * q).round() as usize)
                .map_or(0, |v| u64::from(*v))
        };
        Self {
            calls: latencies.len() as u64,
            errors,
            elapsed,
            percentiles_us: [at(0.50), at(0.90), at(0.99), at(1.0)],
        }
    }

    /// Correct calls per second.
    pub fn calls_per_second(&self) -> f64 {
        self.calls as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    /// `line`, a JSON object naming the benchmark, with the run's figures
    /// added, its correct exchanges counted as `counted` (`calls`,
    /// `round_trips`).
    pub(crate) fn figures_added(&self, mut line: Value, counted: &str) -> Value {
        let [p50, p90, p99, max] = self.percentiles_us;
        if let Value::Object(fields) = &mut line {
            let seconds = (self.elapsed.as_secs_f64() * 1000.0).round() / 1000.0;
            fields.insert("seconds".into(), json!(seconds));
            fields.insert(counted.into(), json!(self.calls));
            let rate = self.calls_per_second().round();
            fields.insert(format!("{counted}_per_s"), json!(rate));
            for (name, value) in [
                ("p50_us", p50),
                ("p90_us", p90),
                ("p99_us", p99),
                ("max_us", max),
            ] {
                fields.insert(name.into(), json!(value));
            }
            fields.insert("errors".into(), json!(self.errors));
        }
        line
    }
}

/// Registers `sessions` sessions with one `echo` tool and starts an app on
/// each (the lean one on gRPC); returns the session ids once every bridge
/// answers calls.
pub async fn start_apps(
    target: &Target,
    bridge: BridgeKind,
    sessions: usize,
) -> anyhow::Result<Vec<String>> {
    start_apps_with(target, bridge, GrpcApp::Lean, sessions, AppSide::default()).await
}

/// [`start_apps`] with the choice of gRPC app, and apps that do more than
/// echo (`side`).
pub async fn start_apps_with(
    target: &Target,
    bridge: BridgeKind,
    grpc_app: GrpcApp,
    sessions: usize,
    side: AppSide<'_>,
) -> anyhow::Result<Vec<String>> {
    let AppSide {
        reports,
        catalog,
        owner,
        elicit,
    } = side;
    if bridge == BridgeKind::Grpc && matches!(grpc_app, GrpcApp::Python | GrpcApp::Typescript) {
        if catalog || owner.is_some() || elicit {
            bail!("the package apps answer plain tools/call (with --progress) only");
        }
        let mut ids = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            ids.push(start_package_app(target, grpc_app, reports).await?);
        }
        return Ok(ids);
    }
    if bridge == BridgeKind::Grpc && grpc_app == GrpcApp::Crate {
        let mut ids = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            ids.push(start_crate_app(target, side).await?);
        }
        return Ok(ids);
    }
    let http = crate::http_client();
    let mut ids = Vec::with_capacity(sessions);
    let mut channel = None;
    for index in 0..sessions {
        // HTTP/2 servers cap concurrent streams per connection (hyper: 200),
        // so bridges are spread over one connection per hundred sessions.
        if bridge == BridgeKind::Grpc && index % GRPC_BRIDGES_PER_CONNECTION == 0 {
            channel = Some(
                Channel::from_shared(target.base_url.clone())?
                    .connect()
                    .await?,
            );
        }
        let id = match &channel {
            Some(channel) => {
                let id = register_grpc(channel.clone(), &target.app_token, catalog, owner).await?;
                start_grpc_app(channel.clone(), &target.app_token, &id, reports, elicit).await?;
                id
            }
            None => {
                let id = register_rest(&http, target, catalog, owner).await?;
                start_ws_app(target, &id, reports, elicit).await?;
                id
            }
        };
        ids.push(id);
    }
    Ok(ids)
}

/// gRPC bridges opened per HTTP/2 connection.
const GRPC_BRIDGES_PER_CONNECTION: usize = 100;

const ECHO_SCHEMA: &str =
    r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#;

pub(crate) async fn register_rest(
    http: &reqwest::Client,
    target: &Target,
    catalog: bool,
    owner: Option<&str>,
) -> anyhow::Result<String> {
    let mut body = json!({
        "device_id": "loadgen", "device_name": "loadgen", "app_version": "1", "chat_id": "load",
        "tools": [{"name": "echo", "description": "Echo.", "input_schema": serde_json::from_str::<Value>(ECHO_SCHEMA)?}]
    });
    if catalog {
        body["resources"] = json!([{"uri": BENCH_URI, "name": "doc", "mimeType": "text/plain"}]);
        body["prompts"] = json!([{"name": BENCH_PROMPT, "arguments": [{"name": "text"}]}]);
    }
    if let Some(subject) = owner {
        body["owner"] = json!({"subject": subject});
    }
    let reply: Value = http
        .post(format!("{}/v1/chat/sessions", target.base_url))
        .bearer_auth(&target.app_token)
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(TestSession::from_rest_reply(&reply)?.id)
}

async fn register_grpc(
    channel: Channel,
    token: &str,
    catalog: bool,
    owner: Option<&str>,
) -> anyhow::Result<String> {
    let (resources, prompts) = if catalog {
        let resource = proto::ResourceDefinition {
            uri: BENCH_URI.into(),
            name: "doc".into(),
            mime_type: "text/plain".into(),
            ..Default::default()
        };
        let prompt = proto::PromptDefinition {
            name: BENCH_PROMPT.into(),
            arguments: vec![proto::PromptArgument {
                name: "text".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        (vec![resource], vec![prompt])
    } else {
        (Vec::new(), Vec::new())
    };
    let request = proto::CreateSessionRequest {
        metadata: Some(proto::SessionMetadata {
            device_id: "loadgen".into(),
            app_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        }),
        tools: vec![proto::ToolDefinition {
            name: "echo".into(),
            description: "Echo.".into(),
            input_schema_json: ECHO_SCHEMA.into(),
            ..Default::default()
        }],
        resources,
        prompts,
        owner: owner.map(|subject| proto::SessionOwner {
            subject: subject.into(),
            issuer: String::new(),
        }),
        ..Default::default()
    };
    Ok(SessionServiceClient::new(channel)
        .create_session(with_token(request, token))
        .await?
        .into_inner()
        .session_id)
}

#[derive(Deserialize)]
struct InvokeFrame<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(default)]
    request_id: Option<&'a str>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    /// An `mcp_request`'s method and params.
    #[serde(default)]
    method: Option<&'a str>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    /// A `client_response`'s result.
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
}

/// The part of the client's answer to the bench question the app echoes.
#[derive(Deserialize)]
struct ElicitAnswer<'a> {
    #[serde(borrow)]
    content: &'a RawValue,
}

/// The content of the client's answer to the bench question (`result`, as
/// JSON text), which the bench app answers its call with.
fn elicited_content(result: Option<&str>) -> Option<&str> {
    let answer = serde_json::from_str::<ElicitAnswer<'_>>(result?).ok()?;
    Some(answer.content.get())
}

/// The `text` argument of a `prompts/get` request, as JSON text.
#[derive(Deserialize)]
struct PromptParams<'a> {
    #[serde(borrow)]
    arguments: PromptArguments<'a>,
}

#[derive(Deserialize)]
struct PromptArguments<'a> {
    #[serde(borrow)]
    text: &'a RawValue,
}

/// The bench app's answer to an MCP request other than `tools/call`: the
/// result object as JSON text, or a JSON-RPC error's code and message (a
/// method it does not serve, a prompt without its `text` argument).
fn bench_mcp_result(method: &str, params: Option<&str>) -> Result<String, (i32, &'static str)> {
    match method {
        "resources/read" => Ok(format!(
            r#"{{"contents":[{{"uri":{},"mimeType":"text/plain","text":{}}}]}}"#,
            Value::from(BENCH_URI),
            Value::from(BENCH_DOC_TEXT)
        )),
        "prompts/get" => {
            match params.and_then(|params| serde_json::from_str::<PromptParams<'_>>(params).ok()) {
                Some(params) => Ok(format!(
                    r#"{{"messages":[{{"role":"user","content":{{"type":"text","text":{}}}}}]}}"#,
                    params.arguments.text.get()
                )),
                None => Err((-32602, "the prompt takes a text argument")),
            }
        }
        _ => Err((
            -32601,
            "the bench app serves resources/read and prompts/get only",
        )),
    }
}

/// A WebSocket app that answers every call with its arguments, after
/// `reports` progress reports; with `elicit`, it first asks the client the
/// bench question and answers with the client's answer instead.
async fn start_ws_app(
    target: &Target,
    session_id: &str,
    reports: u32,
    elicit: bool,
) -> anyhow::Result<()> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let url = format!(
        "ws://{}/v1/chat/sessions/{session_id}/bridge",
        target.authority()
    );
    let mut request = url.into_client_request()?;
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", target.app_token).parse()?,
    );
    let (socket, _) = tokio_tungstenite::connect_async(request).await?;
    let (mut sink, mut stream) = socket.split();
    tokio::spawn(async move {
        while let Some(Ok(frame)) = stream.next().await {
            let Message::Text(text) = frame else { continue };
            let Ok(frame) = serde_json::from_str::<InvokeFrame<'_>>(text.as_str()) else {
                continue;
            };
            let reply = match (frame.kind, frame.request_id) {
                ("invoke_tool", Some(request_id)) if elicit => format!(
                    r#"{{"type":"client_request","request_id":{},"id":"{ELICIT_ID}","method":"elicitation/create","params":{ELICIT_PARAMS}}}"#,
                    Value::from(request_id)
                ),
                ("client_response", Some(request_id)) => {
                    match elicited_content(frame.result.map(RawValue::get)) {
                        Some(content) => format!(
                            r#"{{"type":"invoke_result","request_id":{},"ok":true,"content":{content}}}"#,
                            Value::from(request_id)
                        ),
                        None => format!(
                            r#"{{"type":"invoke_result","request_id":{},"ok":false,"error":"the client did not answer the question"}}"#,
                            Value::from(request_id)
                        ),
                    }
                }
                ("invoke_tool", Some(request_id)) if reports > 0 => {
                    for step in 1..=reports {
                        let report = format!(
                            r#"{{"type":"progress","request_id":{},"progress":{step},"total":{reports}}}"#,
                            Value::from(request_id)
                        );
                        if sink.feed(Message::Text(report.into())).await.is_err() {
                            return;
                        }
                    }
                    format!(
                        r#"{{"type":"invoke_result","request_id":{},"ok":true,"content":{}}}"#,
                        Value::from(request_id),
                        frame.arguments.map_or("null", RawValue::get)
                    )
                }
                ("invoke_tool", Some(request_id)) => format!(
                    r#"{{"type":"invoke_result","request_id":{},"ok":true,"content":{}}}"#,
                    Value::from(request_id),
                    frame.arguments.map_or("null", RawValue::get)
                ),
                ("mcp_request", Some(request_id)) => {
                    let (key, answer) = match bench_mcp_result(
                        frame.method.unwrap_or_default(),
                        frame.params.map(RawValue::get),
                    ) {
                        Ok(result) => ("result", result),
                        Err((code, message)) => (
                            "error",
                            format!(r#"{{"code":{code},"message":{}}}"#, Value::from(message)),
                        ),
                    };
                    format!(
                        r#"{{"type":"mcp_result","request_id":{},"{key}":{answer}}}"#,
                        Value::from(request_id)
                    )
                }
                ("ping", _) => r#"{"type":"pong"}"#.to_owned(),
                _ => continue,
            };
            if sink.send(Message::Text(reply.into())).await.is_err() {
                return;
            }
        }
    });
    Ok(())
}

/// A gRPC app written with the app crate that answers every call with its
/// arguments (after `reports` progress reports; with `elicit`, with the
/// client's answer to the bench question, asked with `ctx.elicit`), and with
/// `catalog` also serves the bench resource and prompt; it registers its
/// own session and serves until the runtime ends.
async fn start_crate_app(target: &Target, side: AppSide<'_>) -> anyhow::Result<String> {
    let AppSide {
        reports,
        catalog,
        owner,
        elicit,
    } = side;
    let question: Value = serde_json::from_str(ELICIT_PARAMS)?;
    let echo = move |arguments: Value, call: CallContext| {
        let question = question.clone();
        async move {
            for step in 1..=reports {
                call.progress(f64::from(step), Some(f64::from(reports)), "")
                    .await;
            }
            if !elicit {
                return Ok::<_, ToolError>(arguments);
            }
            let form = Elicitation::form(
                question["message"].as_str().unwrap_or_default(),
                question["requestedSchema"].clone(),
            );
            let answer = call
                .elicit(form)
                .await
                .map_err(|error| ToolError::new(error.to_string()))?;
            Ok(Value::Object(answer.content.unwrap_or_default()))
        }
    };
    let mut builder = App::builder(target.base_url.clone())
        .app_token(target.app_token.clone())
        .device_id("loadgen")
        .app_version(env!("CARGO_PKG_VERSION"))
        // Never answer "busy": the load decides the concurrency.
        .max_concurrent_calls(4096)
        .tool(Tool::with_schema(
            "echo",
            "Echo.",
            serde_json::from_str(ECHO_SCHEMA)?,
            echo,
        ));
    if let Some(subject) = owner {
        builder = builder.owner(subject, "");
    }
    if catalog {
        let read = |_: ReadRequest, _: CallContext| async {
            Ok::<_, McpError>(
                ResourceContents::text(BENCH_URI, BENCH_DOC_TEXT).mime_type("text/plain"),
            )
        };
        let get = |arguments: HashMap<String, String>, _: CallContext| async move {
            let text = arguments.get("text").cloned().unwrap_or_default();
            Ok::<_, McpError>(vec![PromptMessage::user(Content::text(text))])
        };
        builder = builder
            .resource(Resource::new(BENCH_URI, "doc", read).mime_type("text/plain"))
            .prompt(Prompt::with_arguments(
                BENCH_PROMPT,
                "",
                [PromptArgument::new("text")],
                get,
            ));
    }
    let serving = builder.build()?.serve().await?;
    let id = serving.session().session_id;
    tokio::spawn(async move {
        let mut serving = serving;
        // Pending while it serves; dropping `serving` stops it.
        let _ = serving.closed().await;
    });
    Ok(id)
}

/// The package apps started by this process. Each stops when its stdin
/// closes: when this process exits, whichever way.
static PACKAGE_APPS: std::sync::Mutex<Vec<tokio::process::Child>> =
    std::sync::Mutex::new(Vec::new());

/// Starts one app written with a package ([`GrpcApp::Python`] or
/// [`GrpcApp::Typescript`]); returns its session id.
async fn start_package_app(target: &Target, app: GrpcApp, reports: u32) -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt as _;
    // Where the tests keep their installed packages (`CARGO_TARGET_TMPDIR`
    // with the default target directory).
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = manifest.join("../target/tmp");
    let (mut command, what) = match app {
        GrpcApp::Python => {
            let python = crate::python_package::python_app_package(&dir).await;
            let mut command = tokio::process::Command::new(python);
            command.arg(manifest.join("python/bench_app.py"));
            (command, "the Python app")
        }
        GrpcApp::Typescript => {
            let installed = crate::typescript_package::typescript_app_package(&dir).await;
            let mut command = tokio::process::Command::new(&installed.node);
            command.arg("bench_app.ts").current_dir(&installed.project);
            (command, "the TypeScript app")
        }
        GrpcApp::Lean | GrpcApp::Crate => bail!("{app:?} is not written with a package"),
    };
    let mut child = command
        .args([
            "--proxy-url",
            &target.base_url,
            "--app-token",
            &target.app_token,
        ])
        .args(["--reports", &reports.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {what}"))?;
    let stdout = child
        .stdout
        .take()
        .with_context(|| format!("no stdout from {what}"))?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let id = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .with_context(|| format!("{what} printed no session id within 60 s"))??
        .with_context(|| format!("{what} exited before registering"))?;
    PACKAGE_APPS
        .lock()
        .map_err(|_| anyhow::anyhow!("the package apps' list is poisoned"))?
        .push(child);
    Ok(id.trim().to_owned())
}

/// A gRPC app that answers every call with its arguments: the lean loop
/// (see [`GrpcApp::Lean`]). It does not parse the arguments, runs no task
/// per call and shares a connection with 99 other bridges, which the app
/// crate (one connection per app, a task and a JSON round trip per call)
/// does not, so the benchmark's app side stays out of the server's way.
async fn start_grpc_app(
    channel: Channel,
    token: &str,
    session_id: &str,
    reports: u32,
    elicit: bool,
) -> anyhow::Result<()> {
    let (outbound, receiver) = mpsc::channel(1024);
    outbound
        .send(proto::AppMessage {
            kind: Some(app_message::Kind::Hello(proto::Hello {
                session_id: session_id.into(),
            })),
        })
        .await?;
    let mut inbound = BridgeServiceClient::new(channel)
        .attach(bridge_request(
            ReceiverStream::new(receiver),
            token,
            session_id,
        ))
        .await?
        .into_inner();
    match inbound.message().await? {
        Some(proto::ProxyMessage {
            kind: Some(proxy_message::Kind::Attached(_)),
        }) => {}
        other => bail!("expected attached, got {other:?}"),
    }
    tokio::spawn(async move {
        while let Ok(Some(message)) = inbound.message().await {
            let reply = match message.kind {
                Some(proxy_message::Kind::Invoke(invoke)) if elicit => {
                    app_message::Kind::ClientRequest(proto::ClientRequest {
                        request_id: invoke.request_id,
                        id: ELICIT_ID.into(),
                        method: "elicitation/create".into(),
                        params_json: ELICIT_PARAMS.into(),
                    })
                }
                Some(proxy_message::Kind::ClientResponse(response)) => {
                    let answered = match &response.outcome {
                        Some(proto::client_response::Outcome::ResultJson(result)) => {
                            elicited_content(Some(result)).map(str::to_owned)
                        }
                        _ => None,
                    };
                    app_message::Kind::Result(proto::ToolResult {
                        request_id: response.request_id,
                        ok: answered.is_some(),
                        error: match answered {
                            Some(_) => String::new(),
                            None => "the client did not answer the question".into(),
                        },
                        content_json: answered.unwrap_or_default(),
                    })
                }
                Some(proxy_message::Kind::Invoke(invoke)) => {
                    for step in 1..=reports {
                        let report = app_message::Kind::Progress(proto::ToolProgress {
                            request_id: invoke.request_id.clone(),
                            progress: f64::from(step),
                            total: Some(f64::from(reports)),
                            message: String::new(),
                        });
                        let report = proto::AppMessage { kind: Some(report) };
                        if outbound.send(report).await.is_err() {
                            return;
                        }
                    }
                    app_message::Kind::Result(proto::ToolResult {
                        request_id: invoke.request_id,
                        ok: true,
                        content_json: invoke.arguments_json,
                        error: String::new(),
                    })
                }
                Some(proxy_message::Kind::McpRequest(request)) => {
                    let outcome =
                        match bench_mcp_result(&request.method, Some(&request.params_json)) {
                            Ok(result) => proto::mcp_result::Outcome::ResultJson(result),
                            Err((code, message)) => {
                                proto::mcp_result::Outcome::Error(proto::McpError {
                                    code,
                                    message: message.into(),
                                    data_json: String::new(),
                                })
                            }
                        };
                    app_message::Kind::McpResult(proto::McpResult {
                        request_id: request.request_id,
                        outcome: Some(outcome),
                    })
                }
                Some(proxy_message::Kind::Ping(ping)) => {
                    app_message::Kind::Pong(proto::Pong { nonce: ping.nonce })
                }
                _ => continue,
            };
            if outbound
                .send(proto::AppMessage { kind: Some(reply) })
                .await
                .is_err()
            {
                return;
            }
        }
    });
    Ok(())
}

/// One MCP client on its own HTTP/1.1 connection.
pub(crate) struct McpConnection {
    sender: http1::SendRequest<Full<Bytes>>,
    authority: String,
    path: String,
    token: String,
    method: Method,
    protocol: Protocol,
    progress: bool,
    vendor_meta: bool,
    /// Progress notifications expected before each answer.
    reports: u32,
    /// Each call is asked the bench question ([`LoadConfig::elicit`]).
    elicit: bool,
    /// The second connection, on which a 2025-11-25 client POSTs its
    /// answers while the call's stream holds the first.
    answers: Option<http1::SendRequest<Full<Bytes>>>,
}

/// The `_meta` every 2026-07-28 request carries.
const META_2026: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"loadgen","version":"1"}"#;

/// [`META_2026`] of a client that can be asked questions.
const META_2026_ELICITING: &str = r#""io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}},"io.modelcontextprotocol/clientInfo":{"name":"loadgen","version":"1"}"#;

/// An HTTP/1.1 connection to `authority`.
async fn connect_http1(authority: &str) -> anyhow::Result<http1::SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(authority).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

impl McpConnection {
    /// Client number `client`'s connection to `session_id`.
    pub(crate) async fn open(
        config: &LoadConfig,
        session_id: &str,
        client: usize,
    ) -> anyhow::Result<Self> {
        let target = &config.target;
        let token = match &config.oauth {
            Some(oauth) => {
                let audience = format!("http://{}/v1/mcp", target.mcp_authority());
                oauth.token(&audience, client, config.duration)
            }
            None => target.openclaw_token.clone(),
        };
        let sender = connect_http1(target.mcp_authority()).await?;
        let answers = if config.elicit && config.protocol == Protocol::V2025_11_25 {
            Some(connect_http1(target.mcp_authority()).await?)
        } else {
            None
        };
        Ok(Self {
            sender,
            elicit: config.elicit,
            answers,
            authority: target.mcp_authority().to_owned(),
            path: format!("/v1/mcp/{session_id}"),
            token: format!("Bearer {token}"),
            method: config.method,
            protocol: config.protocol,
            progress: config.progress,
            vendor_meta: config.vendor_meta,
            reports: config.reports_per_call(),
        })
    }

    /// Sends the next requests to session `session_id` instead (on the
    /// same connection).
    pub(crate) fn set_session(&mut self, session_id: &str) {
        self.path.clear();
        self.path.push_str("/v1/mcp/");
        self.path.push_str(session_id);
    }

    /// Posts one JSON-RPC message; at 2026-07-28, `method` and `name` (the
    /// tool called, the URI read, the prompt got) are its `Mcp-Method` and
    /// `Mcp-Name` headers.
    async fn post(
        &mut self,
        body: String,
        method: Option<&str>,
        name: Option<&str>,
    ) -> anyhow::Result<(u16, Bytes)> {
        let response = self.send(body, method, name).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// [`Self::post`], the answer's body left to read as it comes.
    async fn send(
        &mut self,
        body: String,
        method: Option<&str>,
        name: Option<&str>,
    ) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
        let request = self.request(body, method, name)?;
        self.sender.ready().await?;
        Ok(self.sender.send_request(request).await?)
    }

    fn request(
        &self,
        body: String,
        method: Option<&str>,
        name: Option<&str>,
    ) -> anyhow::Result<hyper::Request<Full<Bytes>>> {
        let mut request = hyper::Request::post(&self.path)
            .header("host", &self.authority)
            .header("authorization", &self.token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", self.protocol.name());
        if let (Protocol::V2026_07_28, Some(method)) = (self.protocol, method) {
            request = request.header("mcp-method", method);
            if let Some(name) = name {
                request = request.header("mcp-name", name);
            }
        }
        Ok(request.body(Full::new(Bytes::from(body)))?)
    }

    /// One request of the load's method; true when the answer is exactly
    /// the one expected. `text` is what a `tools/call` echoes and a
    /// `prompts/get` renders.
    async fn call(&mut self, id: u64, text: &str) -> bool {
        match self.method {
            Method::ToolsCall => self.echo_call(id, text).await,
            method => self.catalog_request(method, id, text).await,
        }
    }

    /// The `,"_meta":{...}` a request's params end with, empty when it
    /// carries none.
    fn meta(&self, id: u64) -> String {
        let mut keys = Vec::new();
        if self.progress {
            keys.push(format!(r#""progressToken":{id}"#));
        }
        if self.vendor_meta {
            keys.push(format!(
                r#""openclaw/sessionKey":"agent:main:loadgen","example.com/request":{{"n":{id},"tags":["a","b"]}}"#
            ));
        }
        if self.protocol == Protocol::V2026_07_28 {
            keys.push(if self.elicit {
                META_2026_ELICITING.to_owned()
            } else {
                META_2026.to_owned()
            });
        }
        if keys.is_empty() {
            String::new()
        } else {
            format!(r#","_meta":{{{}}}"#, keys.join(","))
        }
    }

    /// One `tools/call`; true when the echo came back exactly (after the
    /// app's progress notifications, when the call asks for progress).
    pub(crate) async fn echo_call(&mut self, id: u64, text: &str) -> bool {
        if self.elicit {
            return match self.protocol {
                Protocol::V2025_11_25 => self.asked_call_on_a_stream(id, text).await,
                Protocol::V2026_07_28 => self.asked_call_in_rounds(id, text).await,
            }
            .unwrap_or(false);
        }
        let meta = self.meta(id);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":{}}}{meta}}}}}"#,
            Value::from(text)
        );
        let Ok((200, body)) = self.post(body, Some("tools/call"), Some("echo")).await else {
            return false;
        };
        let is_reply = |reply: &Value| {
            reply["id"] == id && reply["result"]["structuredContent"]["text"] == text
        };
        if self.reports == 0 {
            return serde_json::from_slice::<Value>(&body).is_ok_and(|reply| is_reply(&reply));
        }
        // The SSE answer: the progress notifications, then the result.
        let Ok(body) = std::str::from_utf8(&body) else {
            return false;
        };
        let messages: Vec<Value> = body
            .split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect();
        let Some((reply, notifications)) = messages.split_last() else {
            return false;
        };
        notifications.len() == self.reports as usize
            && notifications.iter().all(|progress| {
                progress["method"] == "notifications/progress"
                    && progress["params"]["progressToken"] == id
            })
            && is_reply(reply)
    }

    /// The `tools/call` of `text`, asked the bench question, up to
    /// 2025-11-25: the question comes on the call's SSE stream, the answer
    /// (the text) is POSTed on the second connection, and the stream ends
    /// with the result.
    async fn asked_call_on_a_stream(&mut self, id: u64, text: &str) -> anyhow::Result<bool> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":{}}}{}}}}}"#,
            Value::from(text),
            self.meta(id)
        );
        let response = self.send(body, Some("tools/call"), Some("echo")).await?;
        if response.status() != 200 {
            return Ok(false);
        }
        let mut stream = SseMessages::of(response.into_body());
        let Some(asked) = stream.next().await else {
            return Ok(false);
        };
        if asked["method"] != "elicitation/create" {
            return Ok(false);
        }
        let answer = format!(
            r#"{{"jsonrpc":"2.0","id":{},"result":{{"action":"accept","content":{{"text":{}}}}}}}"#,
            asked["id"],
            Value::from(text)
        );
        let request = self.request(answer, None, None)?;
        let Some(answers) = self.answers.as_mut() else {
            bail!("no connection for answers");
        };
        answers.ready().await?;
        let posted = answers.send_request(request).await?;
        let status = posted.status();
        posted.into_body().collect().await?;
        if status != 202 {
            return Ok(false);
        }
        let Some(reply) = stream.next().await else {
            return Ok(false);
        };
        Ok(reply["id"] == id && reply["result"]["structuredContent"]["text"] == text)
    }

    /// The `tools/call` of `text`, asked the bench question, at
    /// 2026-07-28: an `input_required` result, then the same call again
    /// with the answer (the text) and the `requestState`.
    async fn asked_call_in_rounds(&mut self, id: u64, text: &str) -> anyhow::Result<bool> {
        let meta = self.meta(id);
        let call = |more: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":{}}}{more}{meta}}}}}"#,
                Value::from(text)
            )
        };
        let (200, first) = self
            .post(call(""), Some("tools/call"), Some("echo"))
            .await?
        else {
            return Ok(false);
        };
        let first: Value = serde_json::from_slice(&first)?;
        let round = &first["result"];
        // The one request, under the key the app gave it.
        let asked = round["inputRequests"]
            .as_object()
            .and_then(|requests| requests.iter().next());
        let (Some(state), "input_required", Some((key, request))) = (
            round["requestState"].as_str(),
            round["resultType"].as_str().unwrap_or_default(),
            asked,
        ) else {
            return Ok(false);
        };
        if request["method"] != "elicitation/create" {
            return Ok(false);
        }
        let more = format!(
            r#","requestState":{},"inputResponses":{{{}:{{"action":"accept","content":{{"text":{}}}}}}}"#,
            Value::from(state),
            Value::from(key.as_str()),
            Value::from(text)
        );
        let (200, reply) = self
            .post(call(&more), Some("tools/call"), Some("echo"))
            .await?
        else {
            return Ok(false);
        };
        let reply: Value = serde_json::from_slice(&reply)?;
        Ok(reply["id"] == id && reply["result"]["structuredContent"]["text"] == text)
    }

    /// One `resources/read`, `prompts/get` or `resources/list`; true when
    /// the answer is the bench resource's contents, the prompt rendered
    /// with `text`, or the list holding the bench resource. (The app
    /// answers at once, so the answer is JSON, never a stream.)
    async fn catalog_request(&mut self, method: Method, id: u64, text: &str) -> bool {
        let meta = self.meta(id);
        let (params, name) = match method {
            Method::ResourcesRead => (
                format!(r#""uri":{}{meta}"#, Value::from(BENCH_URI)),
                Some(BENCH_URI),
            ),
            Method::PromptsGet => (
                format!(
                    r#""name":{},"arguments":{{"text":{}}}{meta}"#,
                    Value::from(BENCH_PROMPT),
                    Value::from(text)
                ),
                Some(BENCH_PROMPT),
            ),
            _ => (meta.trim_start_matches(',').to_owned(), None),
        };
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{}","params":{{{params}}}}}"#,
            method.name()
        );
        let Ok((200, body)) = self.post(body, Some(method.name()), name).await else {
            return false;
        };
        let Ok(reply) = serde_json::from_slice::<Value>(&body) else {
            return false;
        };
        let result = &reply["result"];
        reply["id"] == id
            && match method {
                Method::ResourcesRead => {
                    result["contents"][0]["uri"] == BENCH_URI
                        && result["contents"][0]["text"] == BENCH_DOC_TEXT
                }
                Method::PromptsGet => result["messages"][0]["content"]["text"] == text,
                _ => result["resources"][0]["uri"] == BENCH_URI,
            }
    }
}

/// The JSON-RPC messages of an SSE answer, read as they come.
struct SseMessages {
    body: hyper::body::Incoming,
    buffer: Vec<u8>,
}

impl SseMessages {
    fn of(body: hyper::body::Incoming) -> Self {
        Self {
            body,
            buffer: Vec::new(),
        }
    }

    /// The next event's message; none when the stream ends first (or
    /// breaks).
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\n\n") {
                let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
                let message = std::str::from_utf8(&event).ok().and_then(|event| {
                    event
                        .lines()
                        .find_map(|line| line.strip_prefix("data:"))
                        .and_then(|data| serde_json::from_str(data.trim_start()).ok())
                });
                match message {
                    Some(message) => return Some(message),
                    // A comment, or an event without data (the priming one).
                    None => continue,
                }
            }
            let frame = self.body.frame().await?.ok()?;
            if let Ok(data) = frame.into_data() {
                self.buffer.extend_from_slice(&data);
            }
        }
    }
}

/// Runs MCP clients against sessions whose apps are already started.
pub async fn drive_calls(
    config: &LoadConfig,
    session_ids: &[String],
) -> anyhow::Result<LoadReport> {
    if session_ids.is_empty() {
        bail!("no sessions to call");
    }
    if config.method != Method::ToolsCall && config.reports_per_call() > 0 {
        bail!("the app reports progress on tools/call only");
    }
    if config.elicit && (config.method != Method::ToolsCall || config.reports_per_call() > 0) {
        bail!("the app asks its question on tools/call without progress reports only");
    }
    let mut connections = Vec::with_capacity(config.concurrency);
    for worker in 0..config.concurrency {
        let session = &session_ids[worker % session_ids.len()];
        let mut connection = McpConnection::open(config, session, worker).await?;
        // Warm up: the bridge may still be attaching; OpenClaw also
        // initializes first at revisions that have the handshake.
        if config.protocol == Protocol::V2025_11_25 {
            let capabilities = if config.elicit {
                json!({"elicitation": {"form": {}}})
            } else {
                json!({})
            };
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "loadgen", "version": "1"}}});
            connection.post(init.to_string(), None, None).await?;
        }
        let mut ready = false;
        for _ in 0..200 {
            if connection.call(0, "warm-up").await {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if !ready {
            bail!("session {session} does not answer calls");
        }
        connections.push(connection);
    }
    let issued = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + config.duration;
    let max_calls = config.max_calls.unwrap_or(u64::MAX);
    let mut workers = tokio::task::JoinSet::new();
    for (worker, mut connection) in connections.into_iter().enumerate() {
        let issued = issued.clone();
        workers.spawn(async move {
            let mut latencies: Vec<u32> = Vec::with_capacity(1 << 16);
            let mut errors = 0_u64;
            let mut n = 0_u64;
            while Instant::now() < deadline && issued.fetch_add(1, Ordering::Relaxed) < max_calls {
                n += 1;
                let text = format!("w{worker}-{n}");
                let begun = Instant::now();
                let ok = connection.call(n, &text).await;
                let micros = u32::try_from(begun.elapsed().as_micros()).unwrap_or(u32::MAX);
                if ok {
                    latencies.push(micros);
                } else {
                    errors += 1;
                }
            }
            (latencies, errors)
        });
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    while let Some(joined) = workers.join_next().await {
        let (mut worker_latencies, worker_errors) = joined?;
        latencies.append(&mut worker_latencies);
        errors += worker_errors;
    }
    let elapsed = started.elapsed();
    Ok(LoadReport::from_latencies(latencies, errors, elapsed))
}

/// Registers sessions, starts their apps and drives calls.
pub async fn run_load(config: &LoadConfig) -> anyhow::Result<LoadReport> {
    let sessions = start_apps_with(
        &config.target,
        config.bridge,
        config.grpc_app,
        config.sessions.max(1),
        config.app_side(),
    )
    .await?;
    drive_calls(config, &sessions).await
}

/// The report as one JSON line.
pub fn report_json(config: &LoadConfig, report: &LoadReport) -> Value {
    let line = json!({
        "bench": match config.method {
            Method::ToolsCall => "mcp_tools_call",
            _ => "mcp_request",
        },
        "method": config.method.name(),
        "bridge": config.bridge.name(),
        "app": match (config.bridge, config.grpc_app) {
            (BridgeKind::Ws, _) | (BridgeKind::Grpc, GrpcApp::Lean) => "lean",
            (BridgeKind::Grpc, GrpcApp::Crate) => "crate",
            (BridgeKind::Grpc, GrpcApp::Python) => "python",
            (BridgeKind::Grpc, GrpcApp::Typescript) => "typescript",
        },
        "protocol": config.protocol.name(),
        "progress": config.progress,
        "progress_reports": config.reports_per_call(),
        "vendor_meta": config.vendor_meta,
        "elicit": config.elicit,
        "credential": if config.oauth.is_some() { "oauth" } else { "openclaw_token" },
        "concurrency": config.concurrency,
        "sessions": config.sessions,
    });
    report.figures_added(line, "calls")
}

/// Resident memory of a process, in KiB (Linux `/proc`).
pub fn resident_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, "VmRSS")
}

/// CPU time a process has used, user and system, in seconds (Linux
/// `/proc/{pid}/stat`, whose clock ticks are `USER_HZ`, 100 a second).
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name, in parentheses, may hold spaces: fields count from
    // after it (state is field 3, utime 14, stime 15).
    let (_, fields) = stat
        .rsplit_once(')')
        .context("no command name in /proc stat")?;
    let ticks: Vec<u64> = fields
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("no utime/stime in /proc stat")?;
    anyhow::ensure!(ticks.len() == 2, "no utime/stime in /proc stat");
    Ok((ticks[0] + ticks[1]) as f64 / 100.0)
}

/// A KiB figure of `/proc/{pid}/status`.
fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .with_context(|| format!("no {field} in /proc status"))
}

/// Measures the server's resident memory before and after `sessions`
/// sessions each get a bridge, and per bridged session.
pub async fn measure_memory(
    target: &Target,
    bridge: BridgeKind,
    server_pid: u32,
    sessions: usize,
    settle_time: Duration,
) -> anyhow::Result<Value> {
    // Let the allocator and the server's tasks settle before each reading.
    let settle = || tokio::time::sleep(settle_time);
    settle().await;
    let before = resident_kib(server_pid)?;
    let ids = start_apps(target, bridge, sessions).await?;
    // Prove the bridges work: one call through the last session.
    let probe = LoadConfig {
        target: target.clone(),
        bridge,
        grpc_app: GrpcApp::Lean,
        concurrency: 1,
        sessions: 1,
        duration: Duration::from_secs(60),
        max_calls: Some(1),
        method: Method::ToolsCall,
        protocol: Protocol::default(),
        progress: false,
        progress_reports: 0,
        vendor_meta: false,
        oauth: None,
        elicit: false,
    };
    let report = drive_calls(&probe, &ids[ids.len().saturating_sub(1)..]).await?;
    settle().await;
    let after = resident_kib(server_pid)?;
    Ok(json!({
        "bench": "memory_per_bridged_session",
        "bridge": bridge.name(),
        "sessions": ids.len(),
        "rss_before_kib": before,
        "rss_after_kib": after,
        "bytes_per_session": ((after.saturating_sub(before)) * 1024) / (ids.len().max(1) as u64),
        "probe_errors": report.errors,
    }))
}

/// Calls through the stdio relay: one client, one call at a time, through
/// the `openclaw-proxy-stdio` binary at `stdio_bin` bound to `session_id`.
pub async fn run_stdio(
    stdio_bin: &str,
    target: &Target,
    session_id: &str,
    duration: Duration,
    max_calls: Option<u64>,
) -> anyhow::Result<LoadReport> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = tokio::process::Command::new(stdio_bin)
        .env_clear()
        .env("OPENCLAW_PROXY_SERVER_URL", &target.base_url)
        .env("OPENCLAW_PROXY_OPENCLAW_TOKEN", &target.openclaw_token)
        .env("OPENCLAW_PROXY_SESSION_ID", session_id)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {stdio_bin}"))?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "loadgen", "version": "1"}}});
    stdin.write_all(format!("{init}\n").as_bytes()).await?;
    lines.next_line().await?.context("no initialize reply")?;
    let started = Instant::now();
    let deadline = started + duration;
    let max_calls = max_calls.unwrap_or(u64::MAX);
    let (mut latencies, mut errors, mut n) = (Vec::new(), 0_u64, 0_u64);
    while Instant::now() < deadline && n < max_calls {
        n += 1;
        let text = format!("stdio-{n}");
        let line = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{n},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":{}}}}}}}\n",
            Value::from(text.as_str())
        );
        let begun = Instant::now();
        stdin.write_all(line.as_bytes()).await?;
        let reply = lines.next_line().await?.context("relay closed stdout")?;
        let micros = u32::try_from(begun.elapsed().as_micros()).unwrap_or(u32::MAX);
        let ok = serde_json::from_str::<Value>(&reply).is_ok_and(|reply| {
            reply["id"] == n && reply["result"]["structuredContent"]["text"] == text
        });
        if ok {
            latencies.push(micros);
        } else {
            errors += 1;
        }
    }
    let elapsed = started.elapsed();
    drop(stdin);
    let _ = child.wait().await;
    Ok(LoadReport::from_latencies(latencies, errors, elapsed))
}

/// Peak resident memory of a process since it started, in KiB (`VmHWM`).
pub fn peak_kib(pid: u32) -> anyhow::Result<u64> {
    status_kib(pid, "VmHWM")
}

/// Memory under abuse: `bridges` WebSocket bridges that stop reading while
/// `calls` tool calls of `payload_bytes` each are sent to them (200 at a
/// time). Reports the server's resident memory before, its peak, and after
/// the bridges are gone, plus how the calls ended; every call must end
/// (the bridge write timeout drops the bridges, failing their calls).
pub async fn measure_abuse(
    target: &Target,
    server_pid: u32,
    bridges: usize,
    calls: usize,
    payload_bytes: usize,
) -> anyhow::Result<Value> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    const IN_FLIGHT: usize = 200;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = resident_kib(server_pid)?;
    let http = crate::http_client();
    let mut sessions = Vec::with_capacity(bridges);
    let mut sockets = Vec::with_capacity(bridges);
    for _ in 0..bridges {
        let id = register_rest(&http, target, false, None).await?;
        let url = format!("ws://{}/v1/chat/sessions/{id}/bridge", target.authority());
        let mut request = url.into_client_request()?;
        request.headers_mut().insert(
            "authorization",
            format!("Bearer {}", target.app_token).parse()?,
        );
        // Connected, then never read again.
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        sockets.push(socket);
        sessions.push(id);
    }
    let attached = resident_kib(server_pid)?;
    let text = "x".repeat(payload_bytes);
    let started = Instant::now();
    let outcomes = futures_util::stream::iter(0..calls)
        .map(|n| {
            let url = format!(
                "http://{}/v1/mcp/{}",
                target.mcp_authority(),
                sessions[n % sessions.len()]
            );
            let body = json!({
                "jsonrpc": "2.0", "id": n, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": text}}
            })
            .to_string();
            let http = http.clone();
            let token = target.openclaw_token.clone();
            async move {
                let reply = http
                    .post(url)
                    .bearer_auth(token)
                    .header("accept", "application/json, text/event-stream")
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .ok()?
                    .text()
                    .await
                    .ok()?;
                Some(reply.contains(r#""isError":true"#))
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    let failed = outcomes.iter().filter(|o| **o == Some(true)).count();
    let unanswered = outcomes.iter().filter(|o| o.is_none()).count();
    let peak = peak_kib(server_pid)?;
    // Everything let go: the bridges, and the MCP client's pooled
    // connections (the server closes idle keep-alive connections after the
    // header-read timeout, 10 s by default).
    drop(sockets);
    drop(http);
    tokio::time::sleep(Duration::from_secs(12)).await;
    let after = resident_kib(server_pid)?;
    // The allocator hands freed memory back as its threads run again: a
    // little ordinary traffic, then a last reading.
    let probe = crate::http_client();
    for round in 0..2 {
        for _ in 0..2000 {
            let _ = probe
                .get(format!("{}/health", target.base_url))
                .send()
                .await;
        }
        if round == 0 {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    let after_traffic = resident_kib(server_pid)?;
    Ok(json!({
        "bench": "memory_under_abuse", "bridges": bridges, "calls": calls,
        "payload_bytes": payload_bytes, "seconds": (seconds * 10.0).round() / 10.0,
        "calls_failed_with_an_error": failed, "calls_unanswered": unanswered,
        "rss_before_kib": before, "rss_bridges_attached_kib": attached,
        "rss_peak_kib": peak, "rss_after_kib": after,
        "rss_after_traffic_kib": after_traffic,
    }))
}

/// One NATS request-reply round trip after another, for `duration`, to an
/// echoing child process (`loadgen nats-echo`, run from the `loadgen`
/// binary at `loadgen`): the floor under every cross-node call, measured
/// without the proxy. One JSON line.
pub async fn nats_round_trips(
    nats_url: &str,
    duration: Duration,
    loadgen: &std::path::Path,
) -> anyhow::Result<Value> {
    let client = connect_nats(nats_url).await?;
    let subject = format!("loadgen.rtt.{}", std::process::id());
    let reply = format!("{subject}.reply");
    let mut replies = client.subscribe(reply.clone()).await?;
    let _echo = tokio::process::Command::new(loadgen)
        .args(["nats-echo", "--nats-url", nats_url, "--subject", &subject])
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the echoing process")?;
    let round_trip =
        async |replies: &mut async_nats::Subscriber, payload: Bytes| -> anyhow::Result<bool> {
            client
                .publish_with_reply(subject.clone(), reply.clone(), payload.clone())
                .await?;
            Ok(
                tokio::time::timeout(Duration::from_millis(100), replies.next())
                    .await
                    .is_ok_and(|message| message.is_some_and(|message| message.payload == payload)),
            )
        };
    // Until the child subscribes, NATS answers "no responders" at once, so
    // the wait is bounded in time, not in tries.
    let started = Instant::now();
    while !round_trip(&mut replies, Bytes::from_static(b"warm-up")).await? {
        if started.elapsed() > Duration::from_secs(10) {
            bail!("the echoing process did not answer on {subject} within 10 s");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Late warm-up answers are drained before measuring.
    while tokio::time::timeout(Duration::from_millis(50), replies.next())
        .await
        .is_ok()
    {}
    let payload = Bytes::from_static(br#"{"text":"hello"}"#);
    let started = Instant::now();
    let (mut latencies, mut errors) = (Vec::new(), 0u64);
    while started.elapsed() < duration {
        let sent = Instant::now();
        if round_trip(&mut replies, payload.clone()).await? {
            latencies.push(u32::try_from(sent.elapsed().as_micros()).unwrap_or(u32::MAX));
        } else {
            errors += 1;
        }
    }
    let report = LoadReport::from_latencies(latencies, errors, started.elapsed());
    Ok(report.figures_added(json!({"bench": "nats_request_reply"}), "round_trips"))
}

/// A NATS client for the round-trip benchmark.
async fn connect_nats(nats_url: &str) -> anyhow::Result<async_nats::Client> {
    async_nats::connect(nats_url)
        .await
        .with_context(|| format!("cannot connect to NATS at {nats_url}"))
}

/// The echoing side of [`nats_round_trips`]: answers every message on
/// `subject` with its payload until the parent goes away.
pub async fn nats_echo(nats_url: &str, subject: &str) -> anyhow::Result<()> {
    let client = connect_nats(nats_url).await?;
    let mut requests = client.subscribe(subject.to_owned()).await?;
    while let Some(message) = requests.next().await {
        if let Some(reply) = message.reply {
            client.publish(reply, message.payload).await?;
        }
    }
    Ok(())
}
