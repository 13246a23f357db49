//! How a tool's result becomes an MCP `tools/call` result, and a tool an MCP
//! `tools/list` entry: one rule for the proxy's MCP endpoint and the stdio
//! binary's Gateway tools.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

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

/// A tool result whose structured content is still the app's exact JSON
/// text: a transport that writes JSON itself sends it unchanged (every
/// number as the app wrote it); others take [`RawToolResult::into_result`].
#[derive(Debug)]
pub struct RawToolResult {
    /// The result, without `structuredContent`.
    pub result: CallToolResult,
    /// `structuredContent`, exactly as the app sent it.
    pub structured: Option<Box<RawValue>>,
}

impl RawToolResult {
    /// The result with `structuredContent` as a JSON tree. A number no tree
    /// can hold (`1e400`) leaves it out; the text block still carries it.
    pub fn into_result(self) -> CallToolResult {
        let mut result = self.result;
        result.structured_content = self
            .structured
            .and_then(|raw| serde_json::from_str(raw.get()).ok());
        result
    }
}

/// [`tool_result`] for content kept as the app's JSON text. Objects, numbers
/// and booleans keep their exact text in the text block (and an object in
/// `structuredContent`); strings, `null` and arrays are mapped as in
/// [`content_result`].
pub fn tool_result_raw(ok: bool, content: Box<RawValue>, error: String) -> RawToolResult {
    let text = content.get();
    let exact = |text: &str| CallToolResult::success(vec![ContentBlock::text(text.to_owned())]);
    let (result, structured) = match text.as_bytes().first() {
        _ if !ok => (tool_result(false, Value::Null, error), None),
        Some(b'{') => (exact(text), Some(content)),
        Some(b'"' | b'[' | b'n') => match serde_json::from_str::<Value>(text) {
            Ok(value) => (content_result(value), None),
            // An array holding a number no tree can hold.
            Err(_) => (exact(text), None),
        },
        _ => (exact(text), None),
    };
    RawToolResult { result, structured }
}

/// The `tools/list` entry of a tool: no description when it has none.
/// The schema's tree is built here, for this answer only: the tool keeps
/// its text ([`crate::schema`] says why).
pub fn list_entry(tool: &Tool) -> rmcp::model::Tool {
    let description = (!tool.description.is_empty()).then(|| tool.description.to_string().into());
    rmcp::model::Tool::new_with_raw(
        tool.name.to_string(),
        description,
        std::sync::Arc::new(tool.input_schema.to_object()),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn raw_content_keeps_every_number_as_the_app_wrote_it() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).expect("JSON");
        let text = r#"{"big": 123456789012345678901234567890, "huge": 1e400, "d": 0.1000000000000000055511151231257827}"#;
        let result = tool_result_raw(true, raw(text), String::new());
        assert_eq!(result.structured.as_deref().map(RawValue::get), Some(text));
        assert_eq!(
            result.result.content[0].as_text().map(|t| t.text.as_str()),
            Some(text)
        );
        // A tree cannot hold 1e400: the tree form leaves structuredContent out.
        assert_eq!(result.into_result().structured_content, None);
        let number = tool_result_raw(true, raw("1.7976931348623155e+308"), String::new());
        assert_eq!(
            number.result.content[0].as_text().map(|t| t.text.as_str()),
            Some("1.7976931348623155e+308")
        );
        let string = tool_result_raw(true, raw(r#""plain""#), String::new()).result;
        assert_eq!(
            string.content[0].as_text().map(|t| t.text.as_str()),
            Some("plain")
        );
        assert!(
            tool_result_raw(true, raw("null"), String::new())
                .result
                .content
                .is_empty()
        );
        let failed = tool_result_raw(false, raw("null"), "broke".into()).result;
        assert_eq!(failed.is_error, Some(true));
    }

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
