//! Tool definitions as apps send them, in the REST body and the WebSocket
//! `update_tools` frame alike: both spellings of each field (the documented
//! snake_case and the original implementation's camelCase), each problem
//! named by its place (`tools[2]: ...`). The core then validates the tools.

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
        Ok(proto::ToolDefinition {
            name: self.name,
            description: self.description.unwrap_or_default(),
            // Absent or null: the core's default object schema.
            input_schema_json: input_schema
                .map(|schema| schema.to_string())
                .unwrap_or_default(),
            path: self.path.unwrap_or_default(),
            timeout_seconds: timeout_seconds.unwrap_or_default(),
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
