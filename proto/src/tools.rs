//! Tool definitions and their validation.
//!
//! A session's tools are checked once, when the session is created, so that an
//! MCP client never sees a tool it cannot call: names are valid MCP tool names
//! and unique within the session, and each input schema is a JSON object
//! schema. Every error names the offending field (`tools[2].name`) so an app
//! developer can fix the request without guessing. The stdio binary applies
//! the same rules to its tool files.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

pub use crate::requirements::{CallerNeeds, Missing, RequirementError};
use crate::schema::Parsed;
pub use crate::schema::Schema;

/// A tool definition as submitted, before validation: the shape of the gRPC
/// `ToolDefinition` and of a REST tool, with the schema as JSON text (empty
/// or `null` for the default object schema).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Definition {
    /// The MCP tool name.
    pub name: String,
    /// What the tool does; may be empty.
    pub description: String,
    /// The JSON Schema of the arguments, as JSON text.
    pub input_schema_json: String,
    /// The app's informational path for the tool; may be empty.
    pub path: String,
    /// The tool's own time limit in seconds; 0 for the server's.
    pub timeout_seconds: u32,
    /// `Some` when the user must confirm each call: what they are asked
    /// (empty for the proxy's wording alone).
    pub confirm: Option<String>,
    /// The client capabilities every call needs, by name
    /// ([`ClientCapability`]).
    pub requires_client: Vec<String>,
    /// Whether calls may run as MCP tasks, by MCP's name (`forbidden`,
    /// `optional`, `required`); empty for `forbidden`.
    pub task_support: String,
    /// The OAuth scopes a caller needs, every one ([`CallerNeeds`]).
    pub requires_scopes: Vec<String>,
    /// The kinds of caller admitted, by wire name; empty for every kind.
    pub requires_caller_kinds: Vec<String>,
}

#[cfg(feature = "grpc")]
impl From<crate::v1::ToolDefinition> for Definition {
    fn from(definition: crate::v1::ToolDefinition) -> Self {
        Self {
            name: definition.name,
            description: definition.description,
            input_schema_json: definition.input_schema_json,
            path: definition.path,
            timeout_seconds: definition.timeout_seconds,
            confirm: definition.confirm.map(|confirm| confirm.message),
            requires_client: definition
                .requires
                .as_ref()
                .map(|requires| requires.client_capabilities.clone())
                .unwrap_or_default(),
            requires_scopes: definition
                .requires
                .as_ref()
                .map(|requires| requires.scopes.clone())
                .unwrap_or_default(),
            requires_caller_kinds: definition
                .requires
                .map(|requires| requires.caller_kinds)
                .unwrap_or_default(),
            task_support: definition
                .execution
                .map(
                    |execution| match crate::v1::TaskSupport::try_from(execution.task_support) {
                        Ok(known) => TaskSupport::from(known).as_str().to_owned(),
                        Err(_) => execution.task_support.to_string(),
                    },
                )
                .unwrap_or_default(),
        }
    }
}

/// Longest tool name MCP allows.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// Longest message a tool's confirmation may ask, in characters.
pub const MAX_CONFIRM_MESSAGE_CHARS: usize = 1000;

/// A validated tool of a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// The MCP tool name.
    pub name: Arc<str>,
    /// What the tool does; may be empty.
    pub description: Arc<str>,
    /// The JSON Schema of the arguments: always a JSON object, kept as its
    /// compact text ([`Schema`] says why).
    pub input_schema: Schema,
    /// The app's informational path for the tool; may be empty.
    pub path: Arc<str>,
    /// The tool's own time limit in seconds; 0 for the server's.
    pub timeout_seconds: u32,
    /// `Some` when the user must confirm each call: what they are asked
    /// (empty for the proxy's wording alone).
    pub confirm: Option<Arc<str>>,
    /// The client capabilities every call needs.
    pub requires_client: ClientNeeds,
    /// Whether calls may run as MCP tasks.
    pub task_support: TaskSupport,
    /// Who may see and call the tool.
    pub requires_caller: CallerNeeds,
}

/// Whether a tool's calls may run as MCP tasks (MCP's
/// `execution.taskSupport`); absent means [`TaskSupport::Forbidden`], as
/// the specification says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TaskSupport {
    /// Plain calls only.
    #[default]
    Forbidden,
    /// A plain call or a task.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSupport {
    /// Its MCP name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Forbidden => "forbidden",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }

    /// The value MCP names `name`; empty is [`TaskSupport::Forbidden`].
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "" | "forbidden" => Some(Self::Forbidden),
            "optional" => Some(Self::Optional),
            "required" => Some(Self::Required),
            _ => None,
        }
    }

    /// Whether a call may run as a task.
    pub fn allows_task(self) -> bool {
        self != Self::Forbidden
    }
}

#[cfg(feature = "grpc")]
impl From<crate::v1::TaskSupport> for TaskSupport {
    fn from(wire: crate::v1::TaskSupport) -> Self {
        match wire {
            crate::v1::TaskSupport::Forbidden => Self::Forbidden,
            crate::v1::TaskSupport::Optional => Self::Optional,
            crate::v1::TaskSupport::Required => Self::Required,
        }
    }
}

#[cfg(feature = "grpc")]
impl From<TaskSupport> for crate::v1::TaskSupport {
    fn from(support: TaskSupport) -> Self {
        match support {
            TaskSupport::Forbidden => Self::Forbidden,
            TaskSupport::Optional => Self::Optional,
            TaskSupport::Required => Self::Required,
        }
    }
}

/// A client capability a tool may need of its caller: what the app may ask
/// the client during a call (MCP's client capabilities, by the names a
/// `ClientCapabilities` object gives them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientCapability {
    /// `elicitation` in form mode (what `elicitation: {}` declares).
    Elicitation,
    /// `elicitation` in URL mode (`elicitation.url`).
    ElicitationUrl,
    /// `sampling`.
    Sampling,
    /// `roots`.
    Roots,
}

impl ClientCapability {
    /// Every capability, in the order they are reported.
    pub const ALL: [Self; 4] = [
        Self::Elicitation,
        Self::ElicitationUrl,
        Self::Sampling,
        Self::Roots,
    ];

    /// Its name in a tool definition.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::ElicitationUrl => "elicitation.url",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }

    /// The capability a tool definition names, if it is one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|known| known.as_str() == name)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The set of client capabilities a tool needs: one byte per tool, since a
/// node holds every session's tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientNeeds(u8);

impl ClientNeeds {
    /// Nothing needed.
    pub const NONE: Self = Self(0);

    /// These needs and `capability`.
    #[must_use]
    pub fn with(self, capability: ClientCapability) -> Self {
        Self(self.0 | capability.bit())
    }

    /// Whether `capability` is needed.
    pub fn contains(self, capability: ClientCapability) -> bool {
        self.0 & capability.bit() != 0
    }

    /// Whether nothing is needed.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Their names, as a tool definition gives them.
    pub fn names(self) -> Vec<String> {
        self.iter()
            .map(|capability| capability.as_str().to_owned())
            .collect()
    }

    /// The capabilities needed, in [`ClientCapability::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = ClientCapability> {
        ClientCapability::ALL
            .into_iter()
            .filter(move |capability| self.contains(*capability))
    }
}

#[cfg(feature = "grpc")]
impl Tool {
    /// Renders the tool back into its wire definition.
    pub fn to_proto(&self) -> crate::v1::ToolDefinition {
        crate::v1::ToolDefinition {
            name: self.name.to_string(),
            description: self.description.to_string(),
            input_schema_json: self.input_schema.as_str().to_owned(),
            path: self.path.to_string(),
            timeout_seconds: self.timeout_seconds,
            confirm: self
                .confirm
                .as_ref()
                .map(|message| crate::v1::ConfirmCalls {
                    message: message.to_string(),
                }),
            requires: (!self.requires_client.is_empty() || !self.requires_caller.is_empty()).then(
                || crate::v1::ToolRequirements {
                    client_capabilities: self.requires_client.names(),
                    scopes: self.requires_caller.scope_names(),
                    caller_kinds: self.requires_caller.kind_names(),
                },
            ),
            execution: self
                .task_support
                .allows_task()
                .then(|| crate::v1::ToolExecution {
                    task_support: crate::v1::TaskSupport::from(self.task_support).into(),
                }),
        }
    }
}

/// Why a tool definition was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ToolError {
    #[error("tools[{index}].name is empty: every tool needs a name")]
    EmptyName { index: usize },
    #[error(
        "tools[{index}].name {} is not a valid MCP tool name: use 1 to {MAX_TOOL_NAME_LEN} characters from A-Z a-z 0-9 _ - .",
        crate::escape::quoted(.name)
    )]
    InvalidName { index: usize, name: String },
    #[error(
        "tools[{index}].name {name:?} is used by tools[{first}] already: tool names must be unique within a session"
    )]
    DuplicateName {
        index: usize,
        first: usize,
        name: String,
    },
    #[error("tools[{index}].input_schema is not valid JSON: {reason}")]
    SchemaNotJson { index: usize, reason: String },
    #[error("tools[{index}].input_schema must be a JSON object (a JSON Schema), not {found}")]
    SchemaNotObject { index: usize, found: &'static str },
    #[error(
        "tools[{index}].input_schema must describe an object: its \"type\" is {}, expected \"object\"",
        crate::escape::truncated(.found)
    )]
    SchemaTypeNotObject { index: usize, found: String },
    #[error(
        "tools[{index}].confirm.message has {chars} characters: at most {MAX_CONFIRM_MESSAGE_CHARS} are shown to the user"
    )]
    ConfirmMessageTooLong { index: usize, chars: usize },
    #[error(
        "tools[{index}].requires.client_capabilities names {}: the capabilities a tool may need are \"elicitation\", \"elicitation.url\", \"sampling\" and \"roots\"",
        crate::escape::quoted(.name)
    )]
    UnknownClientCapability { index: usize, name: String },
    #[error(
        "tools[{index}].execution.taskSupport is {}: use \"forbidden\" (plain calls only, the default), \"optional\" or \"required\"",
        crate::escape::quoted(.value)
    )]
    UnknownTaskSupport { index: usize, value: String },
    #[error("tools[{index}].{problem}")]
    Requirement {
        index: usize,
        problem: RequirementError,
    },
}

/// Whether `name` is a valid MCP tool name.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Validates a session's tool definitions, normalising empty schemas to
/// `{"type":"object"}`.
pub fn validate_tools(definitions: Vec<Definition>) -> Result<Vec<Tool>, ToolError> {
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(definitions.len());
    let mut tools = Vec::with_capacity(definitions.len());
    for (index, definition) in definitions.into_iter().enumerate() {
        let name = definition.name;
        if name.is_empty() {
            return Err(ToolError::EmptyName { index });
        }
        if !is_valid_tool_name(&name) {
            return Err(ToolError::InvalidName { index, name });
        }
        if let Some(&first) = seen.get(&name) {
            return Err(ToolError::DuplicateName { index, first, name });
        }
        seen.insert(name.clone(), index);
        let input_schema = parse_schema(index, &definition.input_schema_json)?;
        if let Some(message) = &definition.confirm {
            let chars = message.chars().count();
            if chars > MAX_CONFIRM_MESSAGE_CHARS {
                return Err(ToolError::ConfirmMessageTooLong { index, chars });
            }
        }
        let mut requires_client = ClientNeeds::NONE;
        for name in definition.requires_client {
            let capability = ClientCapability::parse(&name)
                .ok_or(ToolError::UnknownClientCapability { index, name })?;
            requires_client = requires_client.with(capability);
        }
        let task_support =
            TaskSupport::parse(&definition.task_support).ok_or(ToolError::UnknownTaskSupport {
                index,
                value: definition.task_support,
            })?;
        let requires_caller = CallerNeeds::parse(
            &definition.requires_scopes,
            &definition.requires_caller_kinds,
        )
        .map_err(|problem| ToolError::Requirement { index, problem })?;
        tools.push(Tool {
            name: name.into(),
            description: definition.description.into(),
            input_schema,
            path: definition.path.into(),
            timeout_seconds: definition.timeout_seconds,
            confirm: definition.confirm.map(Into::into),
            requires_client,
            task_support,
            requires_caller,
        });
    }
    Ok(tools)
}

/// Checks one tool's schema: empty text or `null` is the default object
/// schema; anything else must be a JSON object whose `type`, if given, is
/// `"object"`. The text is read once, without building a tree.
pub fn parse_schema(index: usize, json: &str) -> Result<Schema, ToolError> {
    if json.trim().is_empty() {
        return Ok(Schema::object());
    }
    let parsed = crate::schema::parse(json).map_err(|error| ToolError::SchemaNotJson {
        index,
        reason: error.to_string(),
    })?;
    match parsed {
        Parsed::Object(Ok(schema)) => Ok(schema),
        Parsed::Object(Err(found)) => Err(ToolError::SchemaTypeNotObject { index, found }),
        Parsed::Null => Ok(Schema::object()),
        Parsed::Other(found) => Err(ToolError::SchemaNotObject { index, found }),
    }
}

/// A short English name of a JSON value's kind, for error messages.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, schema: &str) -> Definition {
        Definition {
            name: name.into(),
            input_schema_json: schema.into(),
            ..Default::default()
        }
    }

    #[test]
    fn tool_names_follow_mcp_rules() {
        assert!(is_valid_tool_name("echo_text"));
        assert!(is_valid_tool_name("chat.read-v2"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name("slash/name"));
        assert!(!is_valid_tool_name("ünïcode"));
        assert!(is_valid_tool_name(&"a".repeat(128)));
        assert!(!is_valid_tool_name(&"a".repeat(129)));
    }

    #[test]
    fn empty_schema_becomes_object_schema() {
        let tools = validate_tools(vec![def("a", ""), def("b", "null")]).expect("valid");
        for tool in &tools {
            assert_eq!(tool.input_schema.as_str(), r#"{"type":"object"}"#);
            assert_eq!(
                tool.input_schema.to_object().get("type"),
                Some(&Value::from("object"))
            );
        }
    }

    #[test]
    fn errors_name_the_field() {
        let error = validate_tools(vec![def("a", ""), def("a", "")]).expect_err("duplicate");
        assert_eq!(
            error,
            ToolError::DuplicateName {
                index: 1,
                first: 0,
                name: "a".into()
            }
        );
        assert!(error.to_string().starts_with("tools[1].name"));

        let error = validate_tools(vec![def("a", "[1]")]).expect_err("array");
        assert!(
            error
                .to_string()
                .starts_with("tools[0].input_schema must be a JSON object")
        );

        let error = validate_tools(vec![def("a", r#"{"type":"string"}"#)]).expect_err("string");
        assert!(error.to_string().contains("\"string\""), "{error}");

        let error = validate_tools(vec![def("a", "{")]).expect_err("broken json");
        assert!(
            error
                .to_string()
                .starts_with("tools[0].input_schema is not valid JSON")
        );
    }

    #[test]
    fn task_support_is_forbidden_unless_declared_and_unknown_values_are_refused() {
        let mut optional = def("slow", "");
        optional.task_support = "optional".into();
        let mut required = def("slower", "");
        required.task_support = "required".into();
        let mut forbidden = def("quick", "");
        forbidden.task_support = "forbidden".into();
        let tools =
            validate_tools(vec![def("plain", ""), optional, required, forbidden]).expect("valid");
        let support: Vec<_> = tools.iter().map(|tool| tool.task_support).collect();
        assert_eq!(
            support,
            [
                TaskSupport::Forbidden,
                TaskSupport::Optional,
                TaskSupport::Required,
                TaskSupport::Forbidden
            ]
        );
        assert!(tools[0].to_proto().execution.is_none());
        let wire = tools[2].to_proto();
        assert_eq!(
            Definition::from(wire).task_support,
            "required",
            "the wire form reads back as declared"
        );

        let mut unknown = def("odd", "");
        unknown.task_support = "sometimes".into();
        let error = validate_tools(vec![def("a", ""), unknown]).expect_err("unknown");
        assert_eq!(
            error,
            ToolError::UnknownTaskSupport {
                index: 1,
                value: "sometimes".into()
            }
        );
        assert!(
            error
                .to_string()
                .starts_with("tools[1].execution.taskSupport is \"sometimes\""),
            "{error}"
        );
        let out_of_range = crate::v1::ToolDefinition {
            name: "b".into(),
            execution: Some(crate::v1::ToolExecution { task_support: 7 }),
            ..Default::default()
        };
        assert!(validate_tools(vec![out_of_range.into()]).is_err());
    }

    #[test]
    fn a_tool_names_the_client_capabilities_it_needs_and_nothing_else() {
        let mut wanting = def("ask", "");
        wanting.requires_client = vec!["sampling".into(), "elicitation.url".into()];
        let tools = validate_tools(vec![wanting]).expect("valid");
        let needs: Vec<_> = tools[0].requires_client.iter().collect();
        assert_eq!(
            needs,
            [ClientCapability::ElicitationUrl, ClientCapability::Sampling]
        );
        assert!(!tools[0].requires_client.contains(ClientCapability::Roots));

        let mut unknown = def("ask", "");
        unknown.requires_client = vec!["telepathy".into()];
        let error = validate_tools(vec![def("plain", ""), unknown]).expect_err("refused");
        assert_eq!(
            error,
            ToolError::UnknownClientCapability {
                index: 1,
                name: "telepathy".into()
            }
        );
        assert!(
            error
                .to_string()
                .contains("tools[1].requires.client_capabilities")
        );
    }
}
