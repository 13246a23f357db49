//! How a tool's result becomes an MCP `tools/call` result, and a tool an MCP
//! `tools/list` entry: one rule for the proxy's MCP endpoint and the stdio
//! binary's Gateway tools.

use serde::Deserialize;
use serde_json::Value;

use rmcp::model::{CallToolResult, ContentBlock};

use crate::tools::Tool;

/// The MCP result of a tool that answered `ok` with `content`, or failed with
/// `error`:
/// an object becomes `structuredContent` plus one text block with its JSON;
/// a string becomes one text block; an array of MCP content blocks passes
/// through; `null` is no content; anything else is one text block with its
/// JSON. A failure is an error result carrying the error text.
pub fn tool_result(ok: bool, content: Value, error: String) -> CallToolResult {
    if !ok {
        let text = if error.is_empty() {
            "The tool failed without saying why.".to_owned()
        } else {
            error
        };
        return CallToolResult::error(vec![ContentBlock::text(text)]);
    }
    content_result(content)
}

/// The successful MCP result carrying `content`, mapped as in [`tool_result`].
pub fn content_result(content: Value) -> CallToolResult {
    match content {
        Value::Object(object) => {
            let structured = Value::Object(object);
            let mut result =
                CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
            result.structured_content = Some(structured);
            result
        }
        Value::String(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Value::Null => CallToolResult::success(Vec::new()),
        array @ Value::Array(_) => match Vec::<ContentBlock>::deserialize(&array) {
            Ok(blocks) => CallToolResult::success(blocks),
            Err(_) => CallToolResult::success(vec![ContentBlock::text(array.to_string())]),
        },
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}

/// The `tools/list` entry of a tool: no description when it has none.
pub fn list_entry(tool: &Tool) -> rmcp::model::Tool {
    let description = (!tool.description.is_empty()).then(|| tool.description.to_string().into());
    rmcp::model::Tool::new_with_raw(
        tool.name.to_string(),
        description,
        tool.input_schema.clone(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn content_maps_by_its_kind() {
        let object = content_result(json!({"a": 1}));
        assert_eq!(object.structured_content, Some(json!({"a": 1})));
        assert_eq!(object.content.len(), 1);
        assert!(content_result(Value::Null).content.is_empty());
        let blocks = content_result(json!([{"type": "text", "text": "hi"}]));
        assert_eq!(blocks.content.len(), 1);
        assert!(blocks.structured_content.is_none());
        let numbers = content_result(json!([1, 2]));
        assert_eq!(
            numbers.content.len(),
            1,
            "not content blocks: one text block"
        );
    }

    #[test]
    fn failures_carry_the_error_text() {
        let failed = tool_result(false, Value::Null, "chat is read-only".into());
        assert_eq!(failed.is_error, Some(true));
        let unexplained = tool_result(false, Value::Null, String::new());
        assert_eq!(unexplained.is_error, Some(true));
        assert_eq!(unexplained.content.len(), 1);
    }
}
