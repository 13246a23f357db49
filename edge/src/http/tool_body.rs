//! Tool definitions, and the resources, resource templates and prompts
//! declared beside them, as apps send them, in the REST body and the
//! WebSocket `update_tools` frame alike: both spellings of each field (the
//! documented snake_case and the original implementation's camelCase, or
//! MCP's own camelCase inside a declaration), each problem named by its
//! place (`tools[2]: ...`). The core then validates them.

use openclaw_proxy_core::proto;
use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use super::spelling::pick;

/// One tool of the registration body.
#[derive(Debug, Deserialize)]
pub struct ToolBody {
    name: String,
    description: Option<String>,
    input_schema: Option<Value>,
    #[serde(rename = "inputSchema")]
    input_schema_camel: Option<Value>,
    path: Option<String>,
    /// The tool's own time limit in seconds (capped by the server's maximum).
    timeout_seconds: Option<u32>,
    #[serde(rename = "timeoutSeconds")]
    timeout_seconds_camel: Option<u32>,
    /// Whether each call needs the user's confirmation: `true`, or an
    /// object naming what they are asked ([`confirm_of`]).
    confirm: Option<Value>,
    /// What the tool needs of its caller.
    requires: Option<RequiresBody>,
    /// How the tool may run (MCP's `execution`).
    execution: Option<ExecutionBody>,
}

/// A tool's `execution`: `{"taskSupport": "optional"}` as MCP writes it
/// (`task_support` too).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionBody {
    task_support: Option<String>,
    #[serde(rename = "taskSupport")]
    task_support_camel: Option<String>,
}

/// A tool's `execution` as the wire message, its `taskSupport` checked
/// here (the enum cannot carry an unknown name to the core).
fn execution_of(
    index: usize,
    execution: Option<ExecutionBody>,
) -> Result<Option<proto::ToolExecution>, ApiError> {
    let Some(execution) = execution else {
        return Ok(None);
    };
    let named = pick(
        "task_support",
        execution.task_support,
        "taskSupport",
        execution.task_support_camel,
    )
    .map_err(|problem| ApiError::InvalidBody(format!("tools[{index}].execution: {problem}")))?;
    let Some(named) = named else {
        return Ok(None);
    };
    let support = openclaw_proxy_core::tools::TaskSupport::parse(&named).ok_or_else(|| {
        ApiError::InvalidBody(
            openclaw_proxy_core::tools::ToolError::UnknownTaskSupport {
                index,
                value: named,
            }
            .to_string(),
        )
    })?;
    Ok(Some(proto::ToolExecution {
        task_support: proto::TaskSupport::from(support).into(),
    }))
}

/// A tool's `requires`: `{"client_capabilities": ["sampling", ...],
/// "scopes": ["chat:write"], "caller_kinds": ["oauth"]}` (`clientCapabilities`
/// and `callerKinds` too).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequiresBody {
    client_capabilities: Option<Vec<String>>,
    #[serde(rename = "clientCapabilities")]
    client_capabilities_camel: Option<Vec<String>>,
    scopes: Option<Vec<String>>,
    caller_kinds: Option<Vec<String>>,
    #[serde(rename = "callerKinds")]
    caller_kinds_camel: Option<Vec<String>>,
}

impl RequiresBody {
    fn into_requirements(self, index: usize) -> Result<proto::ToolRequirements, ApiError> {
        let refused =
            |problem: String| ApiError::InvalidBody(format!("tools[{index}].requires: {problem}"));
        let client_capabilities = pick(
            "client_capabilities",
            self.client_capabilities,
            "clientCapabilities",
            self.client_capabilities_camel,
        )
        .map_err(refused)?;
        let caller_kinds = pick(
            "caller_kinds",
            self.caller_kinds,
            "callerKinds",
            self.caller_kinds_camel,
        )
        .map_err(refused)?;
        Ok(proto::ToolRequirements {
            client_capabilities: client_capabilities.unwrap_or_default(),
            scopes: self.scopes.unwrap_or_default(),
            caller_kinds: caller_kinds.unwrap_or_default(),
        })
    }
}

/// A tool's `confirm`: `true`/`false`/`null`, or `{"message": "..."}`.
fn confirm_of(index: usize, value: Option<Value>) -> Result<Option<proto::ConfirmCalls>, ApiError> {
    let refused = || {
        ApiError::InvalidBody(format!(
            "tools[{index}].confirm must be true, false or {{\"message\": \"what the user is asked\"}}"
        ))
    };
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(proto::ConfirmCalls::default())),
        Some(Value::Object(object)) => match object.get("message") {
            None | Some(Value::Null) => Ok(Some(proto::ConfirmCalls::default())),
            Some(Value::String(message)) => Ok(Some(proto::ConfirmCalls {
                message: message.clone(),
            })),
            Some(_) => Err(refused()),
        },
        Some(_) => Err(refused()),
    }
}

impl ToolBody {
    fn into_definition(self, index: usize) -> Result<proto::ToolDefinition, ApiError> {
        let input_schema = pick(
            "input_schema",
            self.input_schema,
            "inputSchema",
            self.input_schema_camel,
        )
        .map_err(|problem| ApiError::InvalidBody(format!("tools[{index}]: {problem}")))?;
        let timeout_seconds = pick(
            "timeout_seconds",
            self.timeout_seconds,
            "timeoutSeconds",
            self.timeout_seconds_camel,
        )
        .map_err(|problem| ApiError::InvalidBody(format!("tools[{index}]: {problem}")))?;
        let requires = match self.requires {
            None => None,
            Some(requires) => Some(requires.into_requirements(index)?),
        };
        Ok(proto::ToolDefinition {
            name: self.name,
            description: self.description.unwrap_or_default(),
            // Absent or null: the core's default object schema.
            input_schema_json: input_schema
                .map(|schema| schema.to_string())
                .unwrap_or_default(),
            path: self.path.unwrap_or_default(),
            timeout_seconds: timeout_seconds.unwrap_or_default(),
            confirm: confirm_of(index, self.confirm)?,
            requires,
            execution: execution_of(index, self.execution)?,
        })
    }
}

/// Tool definitions as apps send them (REST body, WebSocket `update_tools`
/// frame), both spellings of each field.
pub fn tool_definitions(tools: Vec<ToolBody>) -> Result<Vec<proto::ToolDefinition>, ApiError> {
    tools
        .into_iter()
        .enumerate()
        .map(|(index, tool)| tool.into_definition(index))
        .collect()
}

/// The lists a session declares beside its tools (registration body,
/// `PUT .../tools` body, WebSocket `update_tools` frame): resources,
/// resource templates and prompts, with MCP's field names inside each entry
/// (snake_case accepted as well). A list left out is `None`: at creation an
/// empty list, in an update "unchanged".
#[derive(Debug, Default, Deserialize)]
pub struct DeclarationsBody {
    resources: Option<Vec<ResourceBody>>,
    resource_templates: Option<Vec<TemplateBody>>,
    #[serde(rename = "resourceTemplates")]
    resource_templates_camel: Option<Vec<TemplateBody>>,
    prompts: Option<Vec<PromptBody>>,
}

/// The declarations of a body, as the core's messages; `None` where the
/// body left a list out.
#[derive(Debug, Default)]
pub struct Declarations {
    /// The session's documents.
    pub resources: Option<Vec<proto::ResourceDefinition>>,
    /// Its families of documents, by URI template.
    pub resource_templates: Option<Vec<proto::ResourceTemplateDefinition>>,
    /// Its ready-made prompts.
    pub prompts: Option<Vec<proto::PromptDefinition>>,
}

impl DeclarationsBody {
    /// The core's definitions, or the first problem found, naming its place.
    pub fn into_declarations(self) -> Result<Declarations, ApiError> {
        let templates = pick(
            "resource_templates",
            self.resource_templates,
            "resourceTemplates",
            self.resource_templates_camel,
        )
        .map_err(ApiError::InvalidBody)?;
        let resources = self
            .resources
            .map(|list| each(list, "resources", ResourceBody::into_definition))
            .transpose()?;
        let resource_templates = templates
            .map(|list| each(list, "resource_templates", TemplateBody::into_definition))
            .transpose()?;
        let prompts = self
            .prompts
            .map(|list| each(list, "prompts", PromptBody::into_definition))
            .transpose()?;
        Ok(Declarations {
            resources,
            resource_templates,
            prompts,
        })
    }
}

impl Declarations {
    /// The bridge's update message: `tools` and these lists (each `None`
    /// leaves the session's list as it is).
    pub fn into_update(self, tools: Vec<proto::ToolDefinition>) -> proto::UpdateTools {
        proto::UpdateTools {
            tools,
            resources: self
                .resources
                .map(|resources| proto::ResourceList { resources }),
            resource_templates: self
                .resource_templates
                .map(|resource_templates| proto::ResourceTemplateList { resource_templates }),
            prompts: self.prompts.map(|prompts| proto::PromptList { prompts }),
        }
    }
}

/// Converts each entry of a list, naming the entry (`resources[2]: ...`)
/// in the error.
fn each<B, D>(
    list: Vec<B>,
    field: &str,
    convert: fn(B) -> Result<D, String>,
) -> Result<Vec<D>, ApiError> {
    list.into_iter()
        .enumerate()
        .map(|(index, body)| {
            convert(body)
                .map_err(|problem| ApiError::InvalidBody(format!("{field}[{index}]: {problem}")))
        })
        .collect()
}

/// A JSON value as the text the contract carries; absent or `null` is empty.
fn json_text(value: Option<Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(value) => value.to_string(),
    }
}

/// One resource (MCP `Resource`).
#[derive(Debug, Deserialize, PartialEq)]
pub struct ResourceBody {
    uri: Option<String>,
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    #[serde(rename = "mimeType")]
    mime_type: Option<String>,
    #[serde(rename = "mime_type")]
    mime_type_snake: Option<String>,
    size: Option<u64>,
    annotations: Option<Value>,
    icons: Option<Value>,
}

impl ResourceBody {
    fn into_definition(self) -> Result<proto::ResourceDefinition, String> {
        let mime_type = pick(
            "mime_type",
            self.mime_type_snake,
            "mimeType",
            self.mime_type,
        )?;
        Ok(proto::ResourceDefinition {
            uri: self.uri.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            title: self.title.unwrap_or_default(),
            description: self.description.unwrap_or_default(),
            mime_type: mime_type.unwrap_or_default(),
            size: self.size,
            annotations_json: json_text(self.annotations),
            icons_json: json_text(self.icons),
        })
    }
}

/// One resource template (MCP `ResourceTemplate`).
#[derive(Debug, Deserialize, PartialEq)]
pub struct TemplateBody {
    #[serde(rename = "uriTemplate")]
    uri_template: Option<String>,
    #[serde(rename = "uri_template")]
    uri_template_snake: Option<String>,
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    #[serde(rename = "mimeType")]
    mime_type: Option<String>,
    #[serde(rename = "mime_type")]
    mime_type_snake: Option<String>,
    annotations: Option<Value>,
    icons: Option<Value>,
}

impl TemplateBody {
    fn into_definition(self) -> Result<proto::ResourceTemplateDefinition, String> {
        let uri_template = pick(
            "uri_template",
            self.uri_template_snake,
            "uriTemplate",
            self.uri_template,
        )?;
        let mime_type = pick(
            "mime_type",
            self.mime_type_snake,
            "mimeType",
            self.mime_type,
        )?;
        Ok(proto::ResourceTemplateDefinition {
            uri_template: uri_template.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            title: self.title.unwrap_or_default(),
            description: self.description.unwrap_or_default(),
            mime_type: mime_type.unwrap_or_default(),
            annotations_json: json_text(self.annotations),
            icons_json: json_text(self.icons),
        })
    }
}

/// One prompt (MCP `Prompt`).
#[derive(Debug, Deserialize, PartialEq)]
pub struct PromptBody {
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    arguments: Option<Vec<PromptArgumentBody>>,
    icons: Option<Value>,
}

/// One argument of a prompt.
#[derive(Debug, Deserialize, PartialEq)]
pub struct PromptArgumentBody {
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    required: Option<bool>,
}

impl PromptBody {
    fn into_definition(self) -> Result<proto::PromptDefinition, String> {
        Ok(proto::PromptDefinition {
            name: self.name.unwrap_or_default(),
            title: self.title.unwrap_or_default(),
            description: self.description.unwrap_or_default(),
            arguments: self
                .arguments
                .unwrap_or_default()
                .into_iter()
                .map(|argument| proto::PromptArgument {
                    name: argument.name.unwrap_or_default(),
                    title: argument.title.unwrap_or_default(),
                    description: argument.description.unwrap_or_default(),
                    required: argument.required.unwrap_or_default(),
                })
                .collect(),
            icons_json: json_text(self.icons),
        })
    }
}
