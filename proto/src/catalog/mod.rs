//! What a session serves besides tools: resources (documents the agent can
//! read), resource templates (families of documents by URI template) and
//! prompts. The proxy lists them from the declaration and forwards reads and
//! prompt requests to the app, so a declaration is checked once, when it
//! arrives, as tools are: every entry names what MCP requires, keys are
//! unique within the session, embedded JSON (`annotations`, `icons`) has the
//! shape MCP gives it, and each error names its place (`resources[2].uri`).

use std::sync::Arc;

use serde_json::Value;

use crate::escape::quoted;
use crate::tools::{MAX_TOOL_NAME_LEN, is_valid_tool_name};

mod render;
#[cfg(feature = "grpc")]
mod wire;

/// Longest URI or URI template accepted, in bytes.
pub const MAX_URI_LEN: usize = 2048;

/// Longest resource name accepted, in bytes (prompt names follow the tool
/// name rules).
pub const MAX_NAME_LEN: usize = 256;

/// A validated resource (MCP `Resource`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Resource {
    /// The resource's URI, unique within the session.
    pub uri: Box<str>,
    /// Its name (required by MCP).
    pub name: Box<str>,
    /// A human-readable title; empty for none.
    pub title: Box<str>,
    /// What it holds; empty for none.
    pub description: Box<str>,
    /// Its MIME type; empty for none.
    pub mime_type: Box<str>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
    /// MCP `annotations`, as compact JSON text of an object; empty for none.
    pub annotations_json: Box<str>,
    /// MCP `icons`, as compact JSON text of an array; empty for none.
    pub icons_json: Box<str>,
}

/// A validated resource template (MCP `ResourceTemplate`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ResourceTemplate {
    /// The RFC 6570 URI template, unique within the session.
    pub uri_template: Box<str>,
    /// Its name (required by MCP).
    pub name: Box<str>,
    /// A human-readable title; empty for none.
    pub title: Box<str>,
    /// What its resources hold; empty for none.
    pub description: Box<str>,
    /// The MIME type of its resources; empty for none.
    pub mime_type: Box<str>,
    /// MCP `annotations`, as compact JSON text of an object; empty for none.
    pub annotations_json: Box<str>,
    /// MCP `icons`, as compact JSON text of an array; empty for none.
    pub icons_json: Box<str>,
}

/// A validated prompt (MCP `Prompt`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Prompt {
    /// Its name, unique within the session (the tool name rules).
    pub name: Box<str>,
    /// A human-readable title; empty for none.
    pub title: Box<str>,
    /// What it is for; empty for none.
    pub description: Box<str>,
    /// The arguments it takes, names unique.
    pub arguments: Box<[PromptArgument]>,
    /// MCP `icons`, as compact JSON text of an array; empty for none.
    pub icons_json: Box<str>,
}

/// One argument of a prompt.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PromptArgument {
    /// Its name.
    pub name: Box<str>,
    /// A human-readable title; empty for none.
    pub title: Box<str>,
    /// What it is; empty for none.
    pub description: Box<str>,
    /// Whether the prompt needs it.
    pub required: bool,
}

/// Everything a session serves besides tools, shared whole: replaced by an
/// update, never changed in place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// The session's resources.
    pub resources: Arc<[Resource]>,
    /// Its resource templates.
    pub resource_templates: Arc<[ResourceTemplate]>,
    /// Its prompts.
    pub prompts: Arc<[Prompt]>,
}

impl Catalog {
    /// Whether the session serves nothing but tools.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.resource_templates.is_empty() && self.prompts.is_empty()
    }

    /// The resource with this URI.
    pub fn resource(&self, uri: &str) -> Option<&Resource> {
        self.resources.iter().find(|resource| &*resource.uri == uri)
    }

    /// Whether a read of `uri` is one of the session's: a resource it
    /// declares, or an expansion of one of its templates
    /// ([`crate::uri_template`]).
    pub fn serves(&self, uri: &str) -> bool {
        self.resource(uri).is_some()
            || self
                .resource_templates
                .iter()
                .any(|template| crate::uri_template::matches(&template.uri_template, uri))
    }

    /// The prompt of this name.
    pub fn prompt(&self, name: &str) -> Option<&Prompt> {
        self.prompts.iter().find(|prompt| &*prompt.name == name)
    }
}

/// Why a declaration was refused. Each message names the field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CatalogError {
    #[error("{list}[{index}].{field} is empty: MCP requires it")]
    Missing {
        list: &'static str,
        index: usize,
        field: &'static str,
    },
    #[error(
        "{list}[{index}].{field} {} is not a URI: it needs a scheme (\"notes:\", \"file://\", ...) and no spaces or control characters, at most {MAX_URI_LEN} bytes",
        quoted(.value)
    )]
    NotUri {
        list: &'static str,
        index: usize,
        field: &'static str,
        value: String,
    },
    #[error(
        "{list}[{index}].{field} is used by {list}[{first}] already: it must be unique within a session"
    )]
    Duplicate {
        list: &'static str,
        index: usize,
        field: &'static str,
        first: usize,
    },
    #[error("{list}[{index}].name is longer than {MAX_NAME_LEN} bytes")]
    NameTooLong { list: &'static str, index: usize },
    #[error(
        "prompts[{index}].name {} is not a valid prompt name: use 1 to {MAX_TOOL_NAME_LEN} characters from A-Z a-z 0-9 _ - .",
        quoted(.name)
    )]
    InvalidPromptName { index: usize, name: String },
    #[error("prompts[{index}].arguments[{argument}].name is empty: every argument needs a name")]
    EmptyArgumentName { index: usize, argument: usize },
    #[error("prompts[{index}].arguments[{argument}].name {} is used by arguments[{first}] already", quoted(.name))]
    DuplicateArgument {
        index: usize,
        argument: usize,
        first: usize,
        name: String,
    },
    #[error("{list}[{index}].mimeType {} is not a MIME type (type/subtype)", quoted(.value))]
    NotMimeType {
        list: &'static str,
        index: usize,
        value: String,
    },
    #[error("{list}[{index}].{field} {problem}")]
    BadJson {
        list: &'static str,
        index: usize,
        field: &'static str,
        problem: String,
    },
}

/// Whether `value` looks like a URI (or URI template): a scheme, then no
/// whitespace or control characters, within [`MAX_URI_LEN`].
pub fn is_uri(value: &str) -> bool {
    let Some((scheme, _)) = value.split_once(':') else {
        return false;
    };
    value.len() <= MAX_URI_LEN
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        && !value.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn is_mime_type(value: &str) -> bool {
    let token = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence
        .split_once('/')
        .is_some_and(|(kind, sub)| token(kind) && token(sub))
        && value.len() <= 255
        && !value.chars().any(char::is_control)
}

/// The place of an entry, for its errors.
#[derive(Clone, Copy)]
struct Place {
    list: &'static str,
    index: usize,
}

impl Place {
    fn missing(self, field: &'static str) -> CatalogError {
        CatalogError::Missing {
            list: self.list,
            index: self.index,
            field,
        }
    }

    fn bad_json(self, field: &'static str, problem: impl Into<String>) -> CatalogError {
        CatalogError::BadJson {
            list: self.list,
            index: self.index,
            field,
            problem: problem.into(),
        }
    }

    fn uri(self, field: &'static str, value: String) -> Result<Box<str>, CatalogError> {
        if value.is_empty() {
            return Err(self.missing(field));
        }
        if !is_uri(&value) {
            return Err(CatalogError::NotUri {
                list: self.list,
                index: self.index,
                field,
                value,
            });
        }
        Ok(value.into())
    }

    fn name(self, value: String) -> Result<Box<str>, CatalogError> {
        if value.trim().is_empty() {
            return Err(self.missing("name"));
        }
        if value.len() > MAX_NAME_LEN {
            return Err(CatalogError::NameTooLong {
                list: self.list,
                index: self.index,
            });
        }
        Ok(value.into())
    }

    fn mime_type(self, value: String) -> Result<Box<str>, CatalogError> {
        if !value.is_empty() && !is_mime_type(&value) {
            return Err(CatalogError::NotMimeType {
                list: self.list,
                index: self.index,
                value,
            });
        }
        Ok(value.into())
    }

    /// MCP `annotations`: an object whose `audience` is an array of
    /// "user"/"assistant", `priority` a number from 0 to 1 and
    /// `lastModified` a string, each optional.
    fn annotations(self, json: &str) -> Result<Box<str>, CatalogError> {
        let Some(value) = self.json(json, "annotations")? else {
            return Ok("".into());
        };
        let Value::Object(object) = &value else {
            return Err(self.bad_json("annotations", "must be a JSON object"));
        };
        if let Some(audience) = object.get("audience") {
            let roles = audience.as_array().filter(|roles| {
                roles
                    .iter()
                    .all(|role| matches!(role.as_str(), Some("user" | "assistant")))
            });
            if roles.is_none() {
                return Err(self.bad_json(
                    "annotations",
                    "audience must be an array of \"user\" and \"assistant\"",
                ));
            }
        }
        if let Some(priority) = object.get("priority")
            && !priority
                .as_f64()
                .is_some_and(|priority| (0.0..=1.0).contains(&priority))
        {
            return Err(self.bad_json("annotations", "priority must be a number from 0 to 1"));
        }
        if object
            .get("lastModified")
            .is_some_and(|value| !value.is_string())
        {
            return Err(self.bad_json(
                "annotations",
                "lastModified must be an ISO 8601 timestamp string",
            ));
        }
        Ok(value.to_string().into())
    }

    /// MCP `icons`: an array of objects, each with a non-empty `src`.
    fn icons(self, json: &str) -> Result<Box<str>, CatalogError> {
        let Some(value) = self.json(json, "icons")? else {
            return Ok("".into());
        };
        let icons = value
            .as_array()
            .ok_or_else(|| self.bad_json("icons", "must be a JSON array of icon objects"))?;
        for (n, icon) in icons.iter().enumerate() {
            let src = icon
                .as_object()
                .and_then(|icon| icon.get("src"))
                .and_then(Value::as_str);
            if src.is_none_or(str::is_empty) {
                return Err(self.bad_json(
                    "icons",
                    format!("[{n}] must be an object with a non-empty \"src\""),
                ));
            }
        }
        Ok(value.to_string().into())
    }

    /// Embedded JSON text: `None` when empty or `null`.
    fn json(self, json: &str, field: &'static str) -> Result<Option<Value>, CatalogError> {
        if json.trim().is_empty() {
            return Ok(None);
        }
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Null) => Ok(None),
            Ok(value) => Ok(Some(value)),
            Err(error) => Err(self.bad_json(field, format!("is not valid JSON: {error}"))),
        }
    }
}

/// Checks that each key is used once in its list.
fn unique<'a>(
    list: &'static str,
    field: &'static str,
    keys: impl Iterator<Item = &'a str>,
) -> Result<(), CatalogError> {
    let mut seen = std::collections::HashMap::new();
    for (index, key) in keys.enumerate() {
        if let Some(&first) = seen.get(key) {
            return Err(CatalogError::Duplicate {
                list,
                index,
                field,
                first,
            });
        }
        seen.insert(key, index);
    }
    Ok(())
}

/// A resource as submitted (the shape of the gRPC `ResourceDefinition`).
#[derive(Clone, Debug, Default)]
pub struct ResourceDefinition {
    pub uri: String,
    pub name: String,
    pub title: String,
    pub description: String,
    pub mime_type: String,
    pub size: Option<u64>,
    pub annotations_json: String,
    pub icons_json: String,
}

/// A resource template as submitted.
#[derive(Clone, Debug, Default)]
pub struct TemplateDefinition {
    pub uri_template: String,
    pub name: String,
    pub title: String,
    pub description: String,
    pub mime_type: String,
    pub annotations_json: String,
    pub icons_json: String,
}

/// A prompt as submitted.
#[derive(Clone, Debug, Default)]
pub struct PromptDefinition {
    pub name: String,
    pub title: String,
    pub description: String,
    /// Each argument: name, title, description, required.
    pub arguments: Vec<(String, String, String, bool)>,
    pub icons_json: String,
}

/// Validates a session's resources.
pub fn validate_resources(
    definitions: Vec<ResourceDefinition>,
) -> Result<Arc<[Resource]>, CatalogError> {
    let resources = definitions
        .into_iter()
        .enumerate()
        .map(|(index, definition)| {
            let place = Place {
                list: "resources",
                index,
            };
            Ok(Resource {
                uri: place.uri("uri", definition.uri)?,
                name: place.name(definition.name)?,
                title: definition.title.into(),
                description: definition.description.into(),
                mime_type: place.mime_type(definition.mime_type)?,
                size: definition.size,
                annotations_json: place.annotations(&definition.annotations_json)?,
                icons_json: place.icons(&definition.icons_json)?,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    unique(
        "resources",
        "uri",
        resources.iter().map(|resource| &*resource.uri),
    )?;
    Ok(resources.into())
}

/// Validates a session's resource templates.
pub fn validate_templates(
    definitions: Vec<TemplateDefinition>,
) -> Result<Arc<[ResourceTemplate]>, CatalogError> {
    let templates = definitions
        .into_iter()
        .enumerate()
        .map(|(index, definition)| {
            let place = Place {
                list: "resource_templates",
                index,
            };
            Ok(ResourceTemplate {
                uri_template: place.uri("uriTemplate", definition.uri_template)?,
                name: place.name(definition.name)?,
                title: definition.title.into(),
                description: definition.description.into(),
                mime_type: place.mime_type(definition.mime_type)?,
                annotations_json: place.annotations(&definition.annotations_json)?,
                icons_json: place.icons(&definition.icons_json)?,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    unique(
        "resource_templates",
        "uriTemplate",
        templates.iter().map(|template| &*template.uri_template),
    )?;
    Ok(templates.into())
}

/// Validates a session's prompts.
pub fn validate_prompts(definitions: Vec<PromptDefinition>) -> Result<Arc<[Prompt]>, CatalogError> {
    let prompts = definitions
        .into_iter()
        .enumerate()
        .map(|(index, definition)| {
            let place = Place {
                list: "prompts",
                index,
            };
            if definition.name.is_empty() {
                return Err(place.missing("name"));
            }
            if !is_valid_tool_name(&definition.name) {
                return Err(CatalogError::InvalidPromptName {
                    index,
                    name: definition.name,
                });
            }
            let mut names = std::collections::HashMap::new();
            let mut arguments = Vec::with_capacity(definition.arguments.len());
            for (argument, (name, title, description, required)) in
                definition.arguments.into_iter().enumerate()
            {
                if name.trim().is_empty() {
                    return Err(CatalogError::EmptyArgumentName { index, argument });
                }
                if let Some(&first) = names.get(&name) {
                    return Err(CatalogError::DuplicateArgument {
                        index,
                        argument,
                        first,
                        name,
                    });
                }
                names.insert(name.clone(), argument);
                arguments.push(PromptArgument {
                    name: name.into(),
                    title: title.into(),
                    description: description.into(),
                    required,
                });
            }
            Ok(Prompt {
                name: definition.name.into(),
                title: definition.title.into(),
                description: definition.description.into(),
                arguments: arguments.into(),
                icons_json: place.icons(&definition.icons_json)?,
            })
        })
        .collect::<Result<Vec<_>, CatalogError>>()?;
    unique(
        "prompts",
        "name",
        prompts.iter().map(|prompt| &*prompt.name),
    )?;
    Ok(prompts.into())
}

#[cfg(feature = "grpc")]
pub use wire::{
    prompts as validate_wire_prompts, resources as validate_wire_resources,
    templates as validate_wire_templates,
};

#[cfg(test)]
mod tests;
