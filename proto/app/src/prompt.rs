//! Declaring prompts: ready-made conversations an agent host offers its
//! user ("summarise this ticket"), with named string arguments.
//!
//! As with tools, arguments are typed: [`Prompt::new`] derives the declared
//! arguments from a struct (its doc comments become their descriptions, its
//! non-`Option` fields the required ones) and hands the handler the values
//! deserialised into it. The proxy lists prompts from the declaration; only
//! `prompts/get` reaches the app. A handler returns a typed
//! [`GetPromptResult`] (messages of any content type) or the raw result
//! object as a `serde_json::Value`.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use openclaw_proxy_proto::v1::PromptDefinition;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::call::CallContext;
use crate::content::{Content, Icon, Role, json_text};
use crate::mcp_error::McpError;
use crate::tool::BoxFuture;

/// One message of a prompt: who says it, and what.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromptMessage {
    role: Role,
    content: Content,
}

impl PromptMessage {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<Content>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }

    /// A message from the user.
    pub fn user(content: impl Into<Content>) -> Self {
        Self::new(Role::User, content)
    }

    /// A message from the assistant.
    pub fn assistant(content: impl Into<Content>) -> Self {
        Self::new(Role::Assistant, content)
    }
}

/// The result of `prompts/get`: the messages, and optionally a description.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[must_use]
pub struct GetPromptResult {
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    messages: Vec<PromptMessage>,
}

impl GetPromptResult {
    /// A result holding these messages.
    pub fn new(messages: impl IntoIterator<Item = PromptMessage>) -> Self {
        Self {
            description: None,
            messages: messages.into_iter().collect(),
        }
    }

    /// A description of this rendering of the prompt.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// What a prompt handler may return: the typed result, its messages alone,
/// or the raw result object (`{"messages": [...]}`) as JSON.
pub trait PromptOutput: Send + 'static {
    /// The `prompts/get` result object as JSON text.
    fn into_json(self) -> serde_json::Result<String>;
}

impl PromptOutput for GetPromptResult {
    fn into_json(self) -> serde_json::Result<String> {
        serde_json::to_string(&self)
    }
}

impl PromptOutput for Vec<PromptMessage> {
    fn into_json(self) -> serde_json::Result<String> {
        GetPromptResult::new(self).into_json()
    }
}

impl PromptOutput for Value {
    fn into_json(self) -> serde_json::Result<String> {
        serde_json::to_string(&self)
    }
}

/// One argument a prompt takes (always a string, as MCP has it).
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct PromptArgument {
    pub(crate) name: String,
    title: String,
    description: String,
    pub(crate) required: bool,
}

impl PromptArgument {
    /// An optional argument called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: String::new(),
            description: String::new(),
            required: false,
        }
    }

    /// A human-readable title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// What the argument is, for the user filling it in.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Whether the prompt cannot be rendered without it.
    pub fn required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

type PromptHandler =
    dyn Fn(Map<String, Value>, CallContext) -> BoxFuture<Result<String, McpError>> + Send + Sync;

/// One prompt the app offers: what the user sees, and the code that
/// renders it.
#[derive(Clone)]
pub struct Prompt {
    pub(crate) name: String,
    title: String,
    description: String,
    pub(crate) arguments: Vec<PromptArgument>,
    icons: Vec<Icon>,
    /// Why the arguments could not be derived from the handler's type.
    underived: Option<String>,
    pub(crate) handler: Arc<PromptHandler>,
}

impl fmt::Debug for Prompt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Prompt")
            .field("name", &self.name)
            .field("arguments", &self.arguments)
            .finish_non_exhaustive()
    }
}

impl Prompt {
    /// A prompt whose arguments are the fields of `A`, a struct with named
    /// fields of string type (`String`, or `Option<String>` for an optional
    /// argument); its doc comments become the arguments' descriptions.
    pub fn new<A, R, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        A: JsonSchema + DeserializeOwned + Send + 'static,
        R: PromptOutput,
        F: Fn(A, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, McpError>> + Send + 'static,
    {
        let schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
        let (arguments, underived) = match arguments_of(&schema) {
            Ok(arguments) => (arguments, None),
            Err(reason) => (Vec::new(), Some(reason)),
        };
        let mut prompt = Self::with_arguments(name, description, arguments, handler);
        prompt.underived = underived;
        prompt
    }

    /// A prompt with its arguments declared by hand; the handler receives
    /// them deserialised into `A` (`serde_json::Value` or a
    /// `HashMap<String, String>` takes them as they come).
    pub fn with_arguments<A, R, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        arguments: impl IntoIterator<Item = PromptArgument>,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        R: PromptOutput,
        F: Fn(A, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, McpError>> + Send + 'static,
    {
        let name = name.into();
        let prompt_name = name.clone();
        let handler = move |arguments: Map<String, Value>, call: CallContext| -> BoxFuture<_> {
            let arguments = serde_path_to_error::deserialize::<_, A>(Value::Object(arguments))
                .map_err(|error| {
                    let path = error.path().to_string();
                    let at = if path == "." {
                        String::new()
                    } else {
                        format!(" at `{path}`")
                    };
                    McpError::invalid_params(format!(
                        "Invalid arguments for the prompt `{prompt_name}`{at}: {}",
                        error.inner()
                    ))
                });
            match arguments {
                Err(error) => Box::pin(std::future::ready(Err(error))),
                Ok(arguments) => {
                    let rendering = handler(arguments, call);
                    Box::pin(async move {
                        let output = rendering.await?;
                        output.into_json().map_err(|error| {
                            McpError::internal(format!(
                                "The prompt's result is not valid JSON: {error}"
                            ))
                        })
                    })
                }
            }
        };
        Self {
            name,
            title: String::new(),
            description: description.into(),
            arguments: arguments.into_iter().collect(),
            icons: Vec::new(),
            underived: None,
            handler: Arc::new(handler),
        }
    }

    /// A human-readable title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Icons for it.
    #[must_use]
    pub fn icons(mut self, icons: impl IntoIterator<Item = Icon>) -> Self {
        self.icons = icons.into_iter().collect();
        self
    }

    /// The prompt's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The arguments it takes.
    pub fn arguments(&self) -> &[PromptArgument] {
        &self.arguments
    }

    pub(crate) fn argument(&self, name: &str) -> Option<&PromptArgument> {
        self.arguments.iter().find(|argument| argument.name == name)
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        if let Some(reason) = &self.underived {
            return Err(reason.clone());
        }
        if !crate::tool::is_valid_name(&self.name) {
            return Err(
                "the name must be 1 to 128 characters from A-Z a-z 0-9 _ - . (as a tool name)"
                    .to_owned(),
            );
        }
        for (index, argument) in self.arguments.iter().enumerate() {
            if argument.name.is_empty() {
                return Err(format!("argument {index} has an empty name"));
            }
            if self.arguments[..index]
                .iter()
                .any(|earlier| earlier.name == argument.name)
            {
                return Err(format!(
                    "the argument {:?} is declared twice",
                    argument.name
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn definition(&self) -> PromptDefinition {
        PromptDefinition {
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            arguments: self
                .arguments
                .iter()
                .map(|argument| openclaw_proxy_proto::v1::PromptArgument {
                    name: argument.name.clone(),
                    title: argument.title.clone(),
                    description: argument.description.clone(),
                    required: argument.required,
                })
                .collect(),
            icons_json: if self.icons.is_empty() {
                String::new()
            } else {
                json_text(&self.icons)
            },
        }
    }
}

/// The arguments a struct's JSON Schema describes: each property, required
/// when the schema says so, described by its `description`.
fn arguments_of(schema: &Value) -> Result<Vec<PromptArgument>, String> {
    let not_a_struct = || {
        "the arguments type must be a struct with named string fields \
         (or declare them with Prompt::with_arguments)"
            .to_owned()
    };
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(not_a_struct());
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        // A struct without fields: a prompt without arguments.
        return Ok(Vec::new());
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    Ok(properties
        .iter()
        .map(|(name, property)| {
            let text = |key: &str| property.get(key).and_then(Value::as_str).unwrap_or("");
            PromptArgument::new(name.clone())
                .title(text("title"))
                .description(text("description"))
                .required(required.contains(&name.as_str()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::content::ResourceContents;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Summarise {
        /// The ticket to summarise.
        ticket: String,
        /// How long the summary may be.
        length: Option<String>,
    }

    async fn render(args: Summarise, _: CallContext) -> Result<GetPromptResult, McpError> {
        Ok(GetPromptResult::new([PromptMessage::user(args.ticket)]))
    }

    #[test]
    fn arguments_are_derived_from_the_struct_with_their_docs() {
        let prompt = Prompt::new("summarise", "Summarise a ticket.", render);
        prompt.check().expect("a struct with string fields");
        let definition = prompt.definition();
        let arguments: Vec<_> = definition
            .arguments
            .iter()
            .map(|argument| {
                (
                    argument.name.as_str(),
                    argument.description.as_str(),
                    argument.required,
                )
            })
            .collect();
        assert_eq!(
            arguments,
            [
                ("length", "How long the summary may be.", false),
                ("ticket", "The ticket to summarise.", true),
            ]
        );
    }

    #[test]
    fn a_type_that_is_not_a_struct_or_a_bad_name_is_reported() {
        let scalar = Prompt::new("p", "", |_: String, _: CallContext| async {
            Ok::<_, McpError>(Vec::<PromptMessage>::new())
        });
        assert!(scalar.check().expect_err("not a struct").contains("struct"));
        let spaced =
            Prompt::with_arguments("two words", "", [], |_: Value, _: CallContext| async {
                Ok::<_, McpError>(Vec::<PromptMessage>::new())
            });
        assert!(spaced.check().expect_err("bad name").contains("1 to 128"));
        let twice = Prompt::with_arguments(
            "p",
            "",
            [PromptArgument::new("a"), PromptArgument::new("a")],
            |_: Value, _: CallContext| async { Ok::<_, McpError>(Vec::<PromptMessage>::new()) },
        );
        assert!(twice.check().expect_err("twice").contains("twice"));
    }

    #[test]
    fn a_result_has_the_mcp_shape_with_every_content_type() {
        let result = GetPromptResult::new([
            PromptMessage::user(Content::resource(
                ResourceContents::text("test://x", "embedded").mime_type("text/plain"),
            )),
            PromptMessage::user("Please process the embedded resource above."),
            PromptMessage::assistant(Content::image("iVBO", "image/png")),
        ])
        .description("A test prompt");
        let json: Value = serde_json::from_str(&result.into_json().expect("json")).expect("parse");
        assert_eq!(
            json,
            json!({
                "description": "A test prompt",
                "messages": [
                    {"role": "user", "content": {"type": "resource", "resource": {"uri": "test://x", "mimeType": "text/plain", "text": "embedded"}}},
                    {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
                    {"role": "assistant", "content": {"type": "image", "data": "iVBO", "mimeType": "image/png"}}
                ]
            })
        );
    }
}
