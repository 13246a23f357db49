//! Tool definitions of gateway mode, as data.
//!
//! Built-in tools and custom tools share one format, the one of OpenClaw's
//! `registerTool()`: `{name, description, parameters}` with a JSON Schema
//! `parameters`, one per file or several as `{"tools": [...]}`. The built-ins
//! live in `builtin_tools.json`, compiled into the binary: they are the list
//! served when discovery is off or impossible, and the schemas given to the
//! discovered tools we know ([`assemble`]).

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::discovery::GatewayTool;

/// The argument every tool gets for Gateway session routing.
pub const SESSION_KEY: &str = "sessionKey";

/// One tool of the Gateway, as exposed over MCP.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDef {
    /// The Gateway's tool name, also the MCP tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// The JSON Schema of the arguments.
    pub parameters: Map<String, Value>,
}

impl ToolDef {
    /// A tool whose parameters we do not know: any object is accepted and
    /// forwarded as it is.
    pub fn permissive(name: String, description: String) -> Self {
        let mut parameters = Map::new();
        parameters.insert("type".into(), json!("object"));
        parameters.insert("additionalProperties".into(), json!(true));
        Self {
            name,
            description,
            parameters,
        }
    }

    /// Whether the tool's own schema declares `sessionKey`, so it stays an
    /// argument instead of routing the call.
    pub fn declares_session_key(&self) -> bool {
        self.parameters
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| properties.contains_key(SESSION_KEY))
    }

    /// The schema shown to MCP clients: the tool's own, plus an optional
    /// `sessionKey` unless it declares one itself.
    pub fn exposed_schema(&self) -> Map<String, Value> {
        let mut schema = self.parameters.clone();
        if self.declares_session_key() {
            return schema;
        }
        let properties = schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(properties) = properties {
            properties.insert(
                SESSION_KEY.into(),
                json!({"type": "string", "description": "OpenClaw session key the call runs in (optional)."}),
            );
        }
        schema
    }
}

/// The tools to serve, and sentences for stderr about what was left out.
///
/// The base is the Gateway's tools when discovery worked (our schema for a
/// tool we know, with the Gateway's description when it gives one; a
/// permissive schema otherwise), else the built-ins. `selection`
/// (`OPENCLAW_MCP_TOOLS`) narrows the base, in its own order; a selected name
/// missing from a discovered base is left out with a note, one missing from
/// the built-ins is served with a permissive schema (the Gateway may serve it;
/// a 404 drops it at its first call). Custom tools come last and replace a
/// base tool of the same name.
pub fn assemble(
    builtins: &[ToolDef],
    discovered: Option<&[GatewayTool]>,
    selection: Option<&[String]>,
    custom: &[ToolDef],
) -> (Vec<ToolDef>, Vec<String>) {
    let known = |name: &str| builtins.iter().find(|tool| tool.name == name);
    let mut notes = Vec::new();
    let base: Vec<ToolDef> = match discovered {
        Some(tools) => tools
            .iter()
            .filter(|tool| {
                let valid = is_valid_name(&tool.name);
                if !valid {
                    notes.push(format!(
                        "the Gateway's tool {:?} has no valid MCP tool name: left out",
                        tool.name
                    ));
                }
                valid
            })
            .map(|tool| match known(&tool.name) {
                Some(ours) => ToolDef {
                    description: if tool.description.trim().is_empty() {
                        ours.description.clone()
                    } else {
                        tool.description.clone()
                    },
                    ..ours.clone()
                },
                None => ToolDef::permissive(tool.name.clone(), tool.description.clone()),
            })
            .collect(),
        None => builtins.to_vec(),
    };
    let mut tools: Vec<ToolDef> = match selection {
        None => base,
        Some(names) => names
            .iter()
            .filter_map(|name| match base.iter().find(|tool| &tool.name == name) {
                Some(tool) => Some(tool.clone()),
                None if discovered.is_some() => {
                    notes.push(format!(
                        "OPENCLAW_MCP_TOOLS names {name:?}, which the Gateway does not serve over HTTP: left out"
                    ));
                    None
                }
                None => Some(ToolDef::permissive(name.clone(), String::new())),
            })
            .collect(),
    };
    for tool in custom {
        match tools.iter_mut().find(|existing| existing.name == tool.name) {
            Some(existing) => *existing = tool.clone(),
            None => tools.push(tool.clone()),
        }
    }
    (tools, notes)
}

/// Why a tool file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ToolFileError {
    #[error("{path}: cannot read the file: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("{path}: not valid JSON: {reason}")]
    NotJson { path: String, reason: String },
    #[error("{path}: {reason}")]
    Invalid { path: String, reason: String },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ToolFile {
    Many { tools: Vec<Value> },
    One(Value),
}

/// The built-in tools, compiled in from `builtin_tools.json`.
pub fn builtin_tools() -> Vec<ToolDef> {
    // The file is part of the binary and checked by a unit test, so a parse
    // failure here cannot come from outside the process.
    parse_tools("builtin_tools.json", include_str!("builtin_tools.json")).unwrap_or_default()
}

/// Reads a custom tool file.
pub fn load_tool_file(path: &Path) -> Result<Vec<ToolDef>, ToolFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| ToolFileError::Unreadable {
        path: shown.clone(),
        reason: error.to_string(),
    })?;
    parse_tools(&shown, &text)
}

/// Parses one tool file's text; `path` names it in errors.
pub fn parse_tools(path: &str, text: &str) -> Result<Vec<ToolDef>, ToolFileError> {
    let invalid = |reason: String| ToolFileError::Invalid {
        path: path.to_owned(),
        reason,
    };
    let file: ToolFile = serde_json::from_str(text).map_err(|error| ToolFileError::NotJson {
        path: path.to_owned(),
        reason: error.to_string(),
    })?;
    let (entries, many) = match file {
        ToolFile::Many { tools } => (tools, true),
        ToolFile::One(tool) => (vec![tool], false),
    };
    if many && entries.is_empty() {
        return Err(invalid("\"tools\" is empty".into()));
    }
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            let at = if many {
                format!("tools[{index}]")
            } else {
                "the tool".to_owned()
            };
            parse_tool(entry).map_err(|reason| invalid(format!("{at}: {reason}")))
        })
        .collect()
}

fn parse_tool(entry: Value) -> Result<ToolDef, String> {
    let Value::Object(mut entry) = entry else {
        return Err("expected an object {name, description, parameters}".into());
    };
    let name = match entry.remove("name") {
        Some(Value::String(name)) if is_valid_name(&name) => name,
        Some(Value::String(name)) => {
            return Err(format!(
                "name {name:?} is not a valid tool name (1 to 128 of A-Z a-z 0-9 _ - .)"
            ));
        }
        Some(_) => return Err("\"name\" must be a string".into()),
        None => return Err("\"name\" is missing".into()),
    };
    let description = match entry.remove("description") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(description)) => description,
        Some(_) => return Err(format!("{name}: \"description\" must be a string")),
    };
    let parameters = match entry.remove("parameters") {
        None | Some(Value::Null) => {
            let mut schema = Map::new();
            schema.insert("type".into(), json!("object"));
            schema
        }
        Some(Value::Object(schema)) => {
            if let Some(kind) = schema.get("type")
                && kind != "object"
            {
                return Err(format!(
                    "{name}: \"parameters\" must be an object schema, its type is {kind}"
                ));
            }
            schema
        }
        Some(_) => {
            return Err(format!(
                "{name}: \"parameters\" must be a JSON Schema object"
            ));
        }
    };
    Ok(ToolDef {
        name,
        description,
        parameters,
    })
}

/// The proxy's own rule for MCP tool names, shared through the contract crate.
pub(crate) fn is_valid_name(name: &str) -> bool {
    openclaw_proxy_proto::tools::is_valid_tool_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_have_the_gateway_parameter_names() {
        let tools = parse_tools("builtin", include_str!("builtin_tools.json")).expect("valid");
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "web_search",
                "web_fetch",
                "browser",
                "pdf",
                "message",
                "canvas",
                "sessions_send",
                "sessions_list",
                "sessions_history",
                "session_status",
                "sessions_search",
                "agents_list",
                "memory_search",
                "memory_get"
            ]
        );
        let required = |name: &str| {
            tools
                .iter()
                .find(|tool| tool.name == name)
                .expect("tool")
                .parameters["required"]
                .clone()
        };
        assert_eq!(required("web_search"), json!(["query"]));
        assert_eq!(required("web_fetch"), json!(["url"]));
        assert_eq!(required("sessions_send"), json!(["message"]));
        for tool in &tools {
            assert_eq!(
                tool.parameters["additionalProperties"],
                json!(true),
                "{}",
                tool.name
            );
        }
    }

    #[test]
    fn session_key_is_added_unless_declared() {
        let tools = builtin_tools();
        let search = tools
            .iter()
            .find(|tool| tool.name == "web_search")
            .expect("tool");
        assert!(!search.declares_session_key());
        assert!(search.exposed_schema()["properties"][SESSION_KEY].is_object());
        let send = tools
            .iter()
            .find(|tool| tool.name == "sessions_send")
            .expect("tool");
        assert!(send.declares_session_key());
        assert_eq!(send.exposed_schema(), send.parameters);
    }

    #[test]
    fn assembly_uses_known_schemas_selection_and_overrides() {
        let builtins = builtin_tools();
        let discovered = [
            GatewayTool {
                name: "web_fetch".into(),
                description: "Fetch URL.".into(),
            },
            GatewayTool {
                name: "talk_voice".into(),
                description: "Change the voice.".into(),
            },
            GatewayTool {
                name: "bad name".into(),
                description: String::new(),
            },
        ];
        let (tools, notes) = assemble(&builtins, Some(&discovered), None, &[]);
        let fetch = &tools[0];
        assert_eq!(fetch.description, "Fetch URL.");
        assert_eq!(fetch.parameters["required"], json!(["url"]));
        assert_eq!(
            tools[1],
            ToolDef::permissive("talk_voice".into(), "Change the voice.".into())
        );
        assert_eq!(tools.len(), 2);
        assert!(notes[0].contains("\"bad name\""), "{notes:?}");

        let selection = ["talk_voice".to_owned(), "pdf".to_owned()];
        let custom = ToolDef::permissive("talk_voice".into(), "Mine.".into());
        let (tools, notes) = assemble(
            &builtins,
            Some(&discovered),
            Some(&selection),
            std::slice::from_ref(&custom),
        );
        assert_eq!(tools, std::slice::from_ref(&custom));
        assert!(notes[1].contains("\"pdf\""), "{notes:?}");

        // Without discovery a selected name that is not built in is served.
        let (tools, notes) = assemble(&builtins, None, Some(&selection), &[]);
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names, ["talk_voice", "pdf"]);
        assert_eq!(tools[1], builtins[3]);
        assert!(notes.is_empty());
    }

    #[test]
    fn malformed_files_name_the_problem() {
        let error = parse_tools("a.json", "{").expect_err("broken");
        assert!(error.to_string().starts_with("a.json: not valid JSON"));
        let error =
            parse_tools("b.json", r#"{"tools":[{"description":"x"}]}"#).expect_err("no name");
        assert_eq!(error.to_string(), "b.json: tools[0]: \"name\" is missing");
        let error = parse_tools("c.json", r#"{"name":"x","parameters":[]}"#).expect_err("array");
        assert!(error.to_string().contains("must be a JSON Schema object"));
        let error = parse_tools("d.json", r#"{"name":"bad name"}"#).expect_err("bad name");
        assert!(error.to_string().contains("not a valid tool name"));
    }
}
