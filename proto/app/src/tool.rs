//! Declaring a tool: its name, description and argument schema as the agent
//! sees them, and the async handler that runs it.
//!
//! Handlers are typed (arguments deserialised with serde, results
//! serialised), so an app never touches JSON text; the type erasure to
//! `serde_json::Value` happens once, here, where the bridge needs it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use openclaw_proxy_proto::CallerKind;
use openclaw_proxy_proto::tools::{ClientCapability, MAX_CONFIRM_MESSAGE_CHARS, TaskSupport};

use crate::call::CallContext;
use crate::error::{AppError, with_causes};

/// A tool's failure, shown to the agent as the text of an `isError` result.
///
/// Any error converts into it with `?`, its message being the error and its
/// sources joined by `": "`. Write the message for the agent: what went
/// wrong and, when possible, what to try instead.
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message the agent will see.
    pub fn message(&self) -> &str {
        &self.message
    }
}

// Not `std::error::Error` on purpose: that keeps the blanket `From` below
// coherent, as anyhow does.
impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self {
            message: with_causes(&error),
        }
    }
}

impl fmt::Debug for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ToolError").field(&self.message).finish()
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Handler = dyn Fn(Value, CallContext) -> BoxFuture<Result<Value, ToolError>> + Send + Sync;

/// One tool the app offers: what the agent sees, and the code that runs it.
#[derive(Clone)]
pub struct Tool {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) input_schema: Value,
    pub(crate) path: String,
    pub(crate) requires_client: Vec<ClientCapability>,
    /// `Some` when every call is confirmed by the user first: the question,
    /// empty for the proxy's own wording.
    pub(crate) confirm: Option<String>,
    /// The tool's own time limit in whole seconds; 0 for the server's.
    pub(crate) timeout_seconds: u32,
    pub(crate) task_support: TaskSupport,
    pub(crate) requires_scopes: Vec<String>,
    pub(crate) requires_caller_kinds: Vec<CallerKind>,
    pub(crate) handler: Arc<Handler>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("input_schema", &self.input_schema)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool whose argument schema is derived from `A` with `schemars`.
    ///
    /// `A` must describe a JSON object (a struct with named fields); the
    /// handler receives the arguments deserialised into it. Arguments that do
    /// not fit become an `isError` result naming the offending field, and
    /// the handler is not called.
    pub fn new<A, R, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Self
    where
        A: JsonSchema + DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(A, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    {
        let schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
        Self::with_schema(name, description, schema, handler)
    }

    /// A tool with a JSON Schema written by hand (a JSON object schema);
    /// `A` may be `serde_json::Value` to take the arguments as they come.
    pub fn with_schema<A, R, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: F,
    ) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        R: Serialize + Send + 'static,
        F: Fn(A, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    {
        let name = name.into();
        let tool_name = name.clone();
        let handler = move |arguments: Value, context: CallContext| -> BoxFuture<_> {
            let arguments = serde_path_to_error::deserialize::<_, A>(arguments).map_err(|error| {
                let path = error.path().to_string();
                let at = if path == "." {
                    String::new()
                } else {
                    format!(" at `{path}`")
                };
                ToolError::new(format!(
                    "Invalid arguments for `{tool_name}`{at}: {}",
                    error.inner()
                ))
            });
            match arguments {
                Err(error) => Box::pin(std::future::ready(Err(error))),
                Ok(arguments) => {
                    let running = handler(arguments, context);
                    Box::pin(async move {
                        let result = running.await?;
                        serde_json::to_value(result).map_err(|error| {
                            ToolError::new(format!("The tool's result is not valid JSON: {error}"))
                        })
                    })
                }
            }
        };
        Self {
            name,
            description: description.into(),
            input_schema,
            path: String::new(),
            requires_client: Vec::new(),
            confirm: None,
            timeout_seconds: 0,
            task_support: TaskSupport::Forbidden,
            requires_scopes: Vec::new(),
            requires_caller_kinds: Vec::new(),
            handler: Arc::new(handler),
        }
    }

    /// Sets the informational path of the tool inside the app (shown by
    /// `GetSession`, not interpreted by the proxy).
    #[must_use]
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Declares a client capability every call of the tool needs (because
    /// the tool asks the client during the call, say). The proxy refuses a
    /// 2026-07-28 call from a client that did not declare it, with the
    /// specification's `-32021`, before the tool runs.
    #[must_use]
    pub fn requires_client(mut self, capability: ClientCapability) -> Self {
        if !self.requires_client.contains(&capability) {
            self.requires_client.push(capability);
        }
        self
    }

    /// Makes the proxy ask the MCP client's user before every call (a form
    /// naming the tool and showing its arguments); a declined or cancelled
    /// call ends with an error result and never reaches the app.
    #[must_use]
    pub fn confirm(self) -> Self {
        self.confirm_with("")
    }

    /// [`Tool::confirm`], asking `question` before the proxy's own line
    /// (at most 1,000 characters).
    #[must_use]
    pub fn confirm_with(mut self, question: impl Into<String>) -> Self {
        self.confirm = Some(question.into());
        self
    }

    /// Gives a slow tool its own time limit instead of the server's
    /// (`OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS`), in whole seconds, rounded
    /// up; the server caps it at `OPENCLAW_PROXY_MAX_TOOL_TIMEOUT_SECONDS`.
    #[must_use]
    pub fn timeout(mut self, limit: std::time::Duration) -> Self {
        let whole = limit.as_secs() + u64::from(limit.subsec_nanos() > 0);
        self.timeout_seconds = u32::try_from(whole).unwrap_or(u32::MAX).max(1);
        self
    }

    /// Whether MCP clients may call the tool as a task (MCP's
    /// `execution.taskSupport`; [`TaskSupport::Forbidden`] unless set): the
    /// proxy answers such a client at once with a task it polls, runs the
    /// call here as usual ([`crate::CallContext::task_id`] names the task),
    /// and keeps the result for the client. Declare
    /// [`TaskSupport::Optional`] for a slow tool that clients without task
    /// support should still reach.
    #[must_use]
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }

    /// Declares an OAuth scope every caller needs. The proxy lists the tool
    /// only to callers whose verified access token grants every declared
    /// scope, and refuses a call from any other (naming the scope) before
    /// the tool runs; a caller without an OAuth token has no scopes.
    #[must_use]
    pub fn requires_scope(mut self, scope: impl Into<String>) -> Self {
        let scope = scope.into();
        if !self.requires_scopes.contains(&scope) {
            self.requires_scopes.push(scope);
        }
        self
    }

    /// Admits callers of `kind` (an OAuth token, the session's own token,
    /// the proxy's global token, or none). Once a kind is declared, only
    /// callers of a declared kind see the tool and may call it.
    #[must_use]
    pub fn requires_caller_kind(mut self, kind: CallerKind) -> Self {
        if !self.requires_caller_kinds.contains(&kind) {
            self.requires_caller_kinds.push(kind);
        }
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON Schema of the tool's arguments.
    pub fn input_schema(&self) -> &Value {
        &self.input_schema
    }

    /// Refuses here what the proxy would refuse at registration, with a
    /// message that points at the declaration rather than at an RPC status.
    pub(crate) fn check(&self) -> Result<(), AppError> {
        let invalid = |reason: &str| AppError::InvalidTool {
            name: self.name.clone(),
            reason: reason.to_owned(),
        };
        if let Some(question) = &self.confirm
            && question.chars().count() > MAX_CONFIRM_MESSAGE_CHARS
        {
            return Err(invalid(
                "the confirmation question is longer than 1,000 characters; shorten it",
            ));
        }
        let Value::Object(schema) = &self.input_schema else {
            return Err(invalid(
                "the input schema must be a JSON object schema; derive it from a struct \
                 with named fields, or pass one with Tool::with_schema",
            ));
        };
        match schema.get("type") {
            None => Ok(()),
            Some(Value::String(kind)) if kind == "object" => Ok(()),
            Some(_) => Err(invalid(
                "the input schema's \"type\" must be \"object\": tool arguments are a JSON \
                 object; wrap other values in a struct with named fields",
            )),
        }
    }

    pub(crate) fn definition(&self) -> openclaw_proxy_proto::v1::ToolDefinition {
        openclaw_proxy_proto::v1::ToolDefinition {
            name: self.name.clone(),
            description: self.description.clone(),
            input_schema_json: self.input_schema.to_string(),
            path: self.path.clone(),
            timeout_seconds: self.timeout_seconds,
            confirm: self
                .confirm
                .as_ref()
                .map(|message| openclaw_proxy_proto::v1::ConfirmCalls {
                    message: message.clone(),
                }),
            requires: (!self.requires_client.is_empty()
                || !self.requires_scopes.is_empty()
                || !self.requires_caller_kinds.is_empty())
            .then(|| openclaw_proxy_proto::v1::ToolRequirements {
                client_capabilities: self
                    .requires_client
                    .iter()
                    .map(|capability| capability.as_str().to_owned())
                    .collect(),
                scopes: self.requires_scopes.clone(),
                caller_kinds: self
                    .requires_caller_kinds
                    .iter()
                    .map(|kind| kind.as_str().to_owned())
                    .collect(),
            }),
            execution: self.task_support.allows_task().then(|| {
                openclaw_proxy_proto::v1::ToolExecution {
                    task_support: openclaw_proxy_proto::v1::TaskSupport::from(self.task_support)
                        .into(),
                }
            }),
        }
    }
}

/// Whether `name` follows MCP's tool name rules (1 to 128 characters from
/// `A-Z a-z 0-9 _ - .`), which prompt names follow too.
pub(crate) fn is_valid_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the room could not be read")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_becomes_its_message_with_its_causes() {
        let error = ToolError::from(Outer(std::io::Error::other("disk full")));
        assert_eq!(error.message(), "the room could not be read: disk full");
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Post {
        room: String,
        text: String,
    }

    fn noop<A>(_: A, _: CallContext) -> std::future::Ready<Result<(), ToolError>> {
        std::future::ready(Ok(()))
    }

    #[test]
    fn a_derived_schema_is_an_object_schema_with_the_fields() {
        let tool = Tool::new("post", "Post a message.", noop::<Post>);
        tool.check().expect("a struct gives an object schema");
        let schema = tool.input_schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["room"]["type"], "string");
        assert_eq!(schema["required"], json!(["room", "text"]));
    }

    #[test]
    fn a_schema_that_is_not_an_object_schema_is_refused_with_the_tool_name() {
        let scalar = Tool::with_schema("count", "", json!({"type": "integer"}), noop::<Value>);
        let message = scalar.check().expect_err("not an object").to_string();
        assert!(
            message.contains("count") && message.contains("\"object\""),
            "{message}"
        );
        let derived = Tool::new("plain", "", noop::<String>);
        assert!(
            derived.check().is_err(),
            "a String argument is not an object"
        );
    }
}
