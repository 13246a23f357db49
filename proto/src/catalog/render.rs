//! Declarations as the MCP objects the lists carry (`Resource`,
//! `ResourceTemplate`, `Prompt`): optional text left out when empty, the
//! embedded JSON (`annotations`, `icons`) as it was validated.

use serde_json::{Map, Value};

use super::{Prompt, Resource, ResourceTemplate};

/// Inserts `key: text` when `text` is not empty.
fn text_field(object: &mut Map<String, Value>, key: &str, text: &str) {
    if !text.is_empty() {
        object.insert(key.into(), Value::String(text.into()));
    }
}

/// Inserts `key: <json>` when the (validated) JSON text is not empty.
fn json_field(object: &mut Map<String, Value>, key: &str, json: &str) {
    if let Ok(value) = serde_json::from_str::<Value>(json) {
        object.insert(key.into(), value);
    }
}

impl Resource {
    /// The MCP `Resource` object, as `resources/list` lists it.
    pub fn to_mcp(&self) -> Value {
        let mut object = Map::new();
        object.insert("uri".into(), Value::String(self.uri.to_string()));
        object.insert("name".into(), Value::String(self.name.to_string()));
        text_field(&mut object, "title", &self.title);
        text_field(&mut object, "description", &self.description);
        text_field(&mut object, "mimeType", &self.mime_type);
        if let Some(size) = self.size {
            object.insert("size".into(), Value::from(size));
        }
        json_field(&mut object, "annotations", &self.annotations_json);
        json_field(&mut object, "icons", &self.icons_json);
        Value::Object(object)
    }
}

impl ResourceTemplate {
    /// The MCP `ResourceTemplate` object, as `resources/templates/list`
    /// lists it.
    pub fn to_mcp(&self) -> Value {
        let mut object = Map::new();
        object.insert(
            "uriTemplate".into(),
            Value::String(self.uri_template.to_string()),
        );
        object.insert("name".into(), Value::String(self.name.to_string()));
        text_field(&mut object, "title", &self.title);
        text_field(&mut object, "description", &self.description);
        text_field(&mut object, "mimeType", &self.mime_type);
        json_field(&mut object, "annotations", &self.annotations_json);
        json_field(&mut object, "icons", &self.icons_json);
        Value::Object(object)
    }
}

impl Prompt {
    /// The MCP `Prompt` object, as `prompts/list` lists it.
    pub fn to_mcp(&self) -> Value {
        let mut object = Map::new();
        object.insert("name".into(), Value::String(self.name.to_string()));
        text_field(&mut object, "title", &self.title);
        text_field(&mut object, "description", &self.description);
        if !self.arguments.is_empty() {
            let arguments = self
                .arguments
                .iter()
                .map(|argument| {
                    let mut object = Map::new();
                    object.insert("name".into(), Value::String(argument.name.to_string()));
                    text_field(&mut object, "title", &argument.title);
                    text_field(&mut object, "description", &argument.description);
                    object.insert("required".into(), Value::Bool(argument.required));
                    Value::Object(object)
                })
                .collect();
            object.insert("arguments".into(), Value::Array(arguments));
        }
        json_field(&mut object, "icons", &self.icons_json);
        Value::Object(object)
    }
}
