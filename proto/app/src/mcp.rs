//! MCP requests other than `tools/call` (`resources/read`, `prompts/get`,
//! `completion/complete`): the proxy sends each as one generic `McpRequest`
//! with the client's params, and the app answers with one `McpResult`
//! holding the MCP result object or a JSON-RPC error.
//!
//! This module routes a request to the handler it names (by exact URI, then
//! by template; by prompt name), checks the params first so that handlers
//! see only well-formed questions about their own declarations, and turns
//! whatever the handler does (returns, fails, panics) into exactly one
//! answer. It runs like a tool call: concurrently, within the same limits,
//! cancelled by the proxy's `CancelTool`.

use std::collections::BTreeMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use openclaw_proxy_proto::v1::{self as proto, AppMessage, McpRequest, McpResult, app_message};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::call::{self, CallContext, InFlight, Origin, Scope};
use crate::completion::{Completion, CompletionOutput, CompletionRef, CompletionRequest};
use crate::declarations::Declarations;
use crate::resource::ReadRequest;

/// The revision from which the specification (SEP-2164) names "invalid
/// params" rather than -32002 for a resource that does not exist.
const INVALID_PARAMS_FOR_UNKNOWN_RESOURCES_FROM: &str = "2026-07-28";

/// A failed MCP request, as the client receives it: a JSON-RPC error code,
/// a message, and optional data.
///
/// Any error converts into it with `?` as an internal error (-32603), its
/// message being the error and its sources joined by `": "`; the
/// constructors make the codes MCP gives a meaning.
#[derive(Clone, PartialEq)]
pub struct McpError {
    code: i32,
    message: String,
    data: Option<Value>,
}

impl McpError {
    /// "Resource not found" (MCP up to 2025-11-25).
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
    /// "Invalid params": an unknown prompt, a missing argument.
    pub const INVALID_PARAMS: i32 = -32602;
    /// "Method not found": the app does not serve this request.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// "Internal error": the app failed to answer.
    pub const INTERNAL_ERROR: i32 = -32603;

    /// An error with this code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error carrying `data` for the client.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The resource at `uri` does not exist: code -32002 with
    /// `data: {"uri": uri}`, as the specification names it. A client at
    /// revision 2026-07-28 or later receives -32602 instead, which that
    /// revision names for it (SEP-2164).
    pub fn resource_not_found(uri: impl Into<String>) -> Self {
        let uri = uri.into();
        Self::new(
            Self::RESOURCE_NOT_FOUND,
            format!("Resource not found: {uri}"),
        )
        .with_data(json!({ "uri": uri }))
    }

    /// The request's params are wrong (-32602); say how.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, message)
    }

    /// The app does not serve `method` (-32601).
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            Self::METHOD_NOT_FOUND,
            format!("This app does not serve {method}."),
        )
    }

    /// The app failed to answer (-32603); say why.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Self::INTERNAL_ERROR, message)
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The message the client will see.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The data the client will see, if any.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }

    /// The contract's form, for a client at `revision`.
    fn into_proto(self, revision: Option<&str>) -> proto::McpError {
        let modern =
            revision.is_some_and(|revision| revision >= INVALID_PARAMS_FOR_UNKNOWN_RESOURCES_FROM);
        let code = if self.code == Self::RESOURCE_NOT_FOUND && modern {
            Self::INVALID_PARAMS
        } else {
            self.code
        };
        proto::McpError {
            code,
            message: self.message,
            data_json: self.data.as_ref().map(json_text).unwrap_or_default(),
        }
    }
}

// Not `std::error::Error` on purpose: that keeps the blanket `From` below
// coherent, as with `ToolError`.
impl<E: std::error::Error> From<E> for McpError {
    fn from(error: E) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::internal(message)
    }
}

impl fmt::Debug for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpError")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("data", &self.data)
            .finish()
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (JSON-RPC error {})", self.message, self.code)
    }
}

/// A value as JSON text; values of this crate's own types always serialise.
pub(crate) fn json_text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Runs one MCP request to completion and sends its answer on `outbound`.
pub(crate) async fn run(
    declarations: Arc<Declarations>,
    request: McpRequest,
    outbound: mpsc::Sender<AppMessage>,
    in_flight: InFlight,
    scope: Scope,
    _permit: OwnedSemaphorePermit,
) {
    let revision = request
        .client
        .as_ref()
        .map(|client| client.protocol_version.clone());
    let request_id = request.request_id.clone();
    let method = request.method.clone();
    let origin = Origin {
        session_id: request.session_id,
        request_id: request.request_id,
        method: request.method.into(),
        tool_name: String::new(),
        client: request.client,
        trace_parent: request.trace_parent,
    };
    let Some(context) = call::begin(origin, outbound.clone(), &in_flight, &scope) else {
        return;
    };
    // Dispatched inside the guarded future so that a panic anywhere in a
    // handler is caught.
    let answering =
        async move { dispatch(&declarations, &method, &request.params_json, context).await };
    let outcome = match AssertUnwindSafe(answering).catch_unwind().await {
        Ok(outcome) => outcome,
        Err(panic) => {
            let detail = call::panic_message(panic.as_ref());
            tracing::error!(%detail, "an MCP request handler panicked");
            Err(McpError::internal(format!(
                "The app failed unexpectedly while answering (its handler panicked: {detail})."
            )))
        }
    };
    in_flight.finish(&request_id);
    let answer = answer(request_id, outcome, revision.as_deref());
    // The bridge may be gone; the proxy has then failed the request already.
    let _ = outbound
        .send(AppMessage {
            kind: Some(app_message::Kind::McpResult(answer)),
        })
        .await;
}

/// The `McpResult` for a handler's outcome.
pub(crate) fn answer(
    request_id: String,
    outcome: Result<String, McpError>,
    revision: Option<&str>,
) -> McpResult {
    let outcome = match outcome {
        Ok(json) if json.starts_with('{') => proto::mcp_result::Outcome::ResultJson(json),
        Ok(json) => {
            let start: String = json.chars().take(40).collect();
            proto::mcp_result::Outcome::Error(
                McpError::internal(format!(
                    "The app's result is not a JSON object (it begins {start:?})."
                ))
                .into_proto(revision),
            )
        }
        Err(error) => proto::mcp_result::Outcome::Error(error.into_proto(revision)),
    };
    McpResult {
        request_id,
        outcome: Some(outcome),
    }
}

/// The result object's JSON text, or the error for the client.
async fn dispatch(
    declarations: &Declarations,
    method: &str,
    params_json: &str,
    call: CallContext,
) -> Result<String, McpError> {
    let served = matches!(
        method,
        "resources/read" | "prompts/get" | "completion/complete"
    );
    if !served {
        return Err(McpError::method_not_found(method));
    }
    let params = params(method, params_json)?;
    match method {
        "resources/read" => read(declarations, &params, call).await,
        "prompts/get" => get_prompt(declarations, &params, call).await,
        _ => complete(declarations, &params, call).await,
    }
}

/// The request's params object (empty when there were none).
fn params(method: &str, json: &str) -> Result<Map<String, Value>, McpError> {
    if json.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(json) {
        Ok(Value::Object(params)) => Ok(params),
        Ok(_) => Err(McpError::invalid_params(format!(
            "The params of {method} must be a JSON object."
        ))),
        Err(error) => Err(McpError::invalid_params(format!(
            "The params of {method} are not JSON: {error}"
        ))),
    }
}

/// A required string field of an object, or the error that names it.
fn string<'a>(object: &'a Map<String, Value>, field: &str, of: &str) -> Result<&'a str, McpError> {
    object
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| McpError::invalid_params(format!("{of} needs \"{field}\" (a string).")))
}

async fn read(
    declarations: &Declarations,
    params: &Map<String, Value>,
    call: CallContext,
) -> Result<String, McpError> {
    let uri = string(params, "uri", "resources/read")?;
    if let Some(resource) = declarations.resource(uri) {
        let request = ReadRequest::new(uri.to_owned(), BTreeMap::new());
        return (resource.handler)(request, call).await;
    }
    if let Some((template, variables)) = declarations.template_for(uri) {
        let request = ReadRequest::new(uri.to_owned(), variables);
        return (template.handler)(request, call).await;
    }
    Err(McpError::resource_not_found(uri))
}

async fn get_prompt(
    declarations: &Declarations,
    params: &Map<String, Value>,
    call: CallContext,
) -> Result<String, McpError> {
    let name = string(params, "name", "prompts/get")?;
    let prompt = declarations.prompt(name).ok_or_else(|| {
        McpError::invalid_params(format!("This app has no prompt named `{name}`."))
            .with_data(json!({ "name": name }))
    })?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => {
            return Err(McpError::invalid_params(
                "The arguments of prompts/get must be a JSON object of strings.",
            ));
        }
    };
    let missing: Vec<&str> = prompt
        .arguments
        .iter()
        .filter(|argument| argument.required && !arguments.contains_key(&argument.name))
        .map(|argument| argument.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(McpError::invalid_params(format!(
            "The prompt `{name}` needs the argument{} `{}`.",
            if missing.len() == 1 { "" } else { "s" },
            missing.join("`, `")
        )));
    }
    (prompt.handler)(arguments, call).await
}

async fn complete(
    declarations: &Declarations,
    params: &Map<String, Value>,
    call: CallContext,
) -> Result<String, McpError> {
    let of = "completion/complete";
    let reference = params
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| McpError::invalid_params(format!("{of} needs \"ref\" (an object).")))?;
    let argument = params
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| McpError::invalid_params(format!("{of} needs \"argument\" (an object).")))?;
    let argument_name = string(argument, "name", "The argument of completion/complete")?;
    let value = string(argument, "value", "The argument of completion/complete")?;
    let reference = match string(reference, "type", "The ref of completion/complete")? {
        "ref/prompt" => {
            let name = string(reference, "name", "A ref/prompt")?;
            let prompt = declarations.prompt(name).ok_or_else(|| {
                McpError::invalid_params(format!("This app has no prompt named `{name}`."))
            })?;
            if prompt.argument(argument_name).is_none() {
                return Err(McpError::invalid_params(format!(
                    "The prompt `{name}` has no argument `{argument_name}`."
                )));
            }
            CompletionRef::Prompt(name.to_owned())
        }
        "ref/resource" => {
            let uri = string(reference, "uri", "A ref/resource")?;
            let template = declarations.template(uri).ok_or_else(|| {
                McpError::invalid_params(format!("This app has no resource template `{uri}`."))
            })?;
            if !template.has_variable(argument_name) {
                return Err(McpError::invalid_params(format!(
                    "The resource template `{uri}` has no variable `{argument_name}`."
                )));
            }
            CompletionRef::ResourceTemplate(uri.to_owned())
        }
        other => {
            return Err(McpError::invalid_params(format!(
                "Unknown ref type {other:?}: expected \"ref/prompt\" or \"ref/resource\"."
            )));
        }
    };
    let context = params
        .get("context")
        .and_then(|context| context.get("arguments"))
        .and_then(Value::as_object)
        .map(|arguments| {
            arguments
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let request = CompletionRequest {
        reference,
        argument: argument_name.to_owned(),
        value: value.to_owned(),
        context,
    };
    match declarations.completion() {
        Some(handler) => handler(request, call).await,
        None => Completion::empty()
            .into_json()
            .map_err(|error| McpError::internal(error.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openclaw_proxy_proto::v1::CallerInfo;
    use serde_json::json;
    use tokio::sync::Semaphore;

    use super::*;
    use crate::completion;
    use crate::content::{Content, ResourceContents};
    use crate::prompt::{GetPromptResult, Prompt, PromptMessage};
    use crate::resource::{Resource, ResourceTemplate};
    use crate::{LogLevel, McpError};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct TwoArguments {
        /// First test argument
        arg1: String,
        /// Second test argument
        arg2: String,
    }

    fn declarations() -> Declarations {
        let text = Resource::new(
            "test://static-text",
            "static-text",
            |read: ReadRequest, _| async move {
                Ok::<_, McpError>(
                    ResourceContents::text(read.uri(), "static").mime_type("text/plain"),
                )
            },
        );
        let binary = Resource::new(
            "test://static-binary",
            "static-binary",
            |read: ReadRequest, _| async move {
                Ok::<_, McpError>(ResourceContents::blob_bytes(read.uri(), [1, 2, 3]))
            },
        );
        let raw = Resource::new("test://raw", "raw", |_, _| async {
            Ok::<_, McpError>(
                json!({"contents": [{"uri": "test://raw", "text": "9007199254740993"}]}),
            )
        });
        let not_an_object = Resource::new("test://scalar", "scalar", |_, _| async {
            Ok::<_, McpError>(json!(["not", "an", "object"]))
        });
        let panics = Resource::new("test://panic", "panic", |_, _| async {
            if true {
                panic!("disk on fire");
            }
            Ok::<_, McpError>(json!({}))
        });
        let logs = Resource::new(
            "test://logs",
            "logs",
            |read: ReadRequest, call: CallContext| async move {
                call.log(LogLevel::Info, "reader", json!({"reading": read.uri()}))
                    .await;
                Ok::<_, McpError>(ResourceContents::text(read.uri(), "logged"))
            },
        );
        let slow = Resource::new("test://slow", "slow", |_, call: CallContext| async move {
            call.cancelled().await;
            Ok::<_, McpError>(ResourceContents::text(
                "test://slow",
                format!("{:?}", call.cancel_reason()),
            ))
        });
        let template = ResourceTemplate::new(
            "test://template/{id}/data",
            "template",
            |read: ReadRequest, _| async move {
                let id = read.variable("id").unwrap_or_default();
                Ok::<_, McpError>(ResourceContents::text(
                    read.uri(),
                    format!("Data for ID: {id}"),
                ))
            },
        );
        let prompt = Prompt::new(
            "test_prompt_with_arguments",
            "With arguments.",
            |args: TwoArguments, _| async move {
                Ok::<_, McpError>(GetPromptResult::new([PromptMessage::user(Content::text(
                    format!(
                        "Prompt with arguments: arg1='{}', arg2='{}'",
                        args.arg1, args.arg2
                    ),
                ))]))
            },
        );
        Declarations::new(
            Vec::new(),
            vec![text, binary, raw, not_an_object, panics, logs, slow],
            vec![template],
            vec![prompt],
            None,
        )
        .expect("valid declarations")
    }

    struct Answered {
        result: Option<Value>,
        error: Option<proto::McpError>,
        logs: Vec<proto::Log>,
    }

    async fn ask_with(
        declarations: Declarations,
        method: &str,
        params: Value,
        revision: &str,
    ) -> Answered {
        let (outbound, mut inbound) = mpsc::channel(16);
        let request = McpRequest {
            session_id: "s".into(),
            request_id: "s:1".into(),
            method: method.into(),
            params_json: params.to_string(),
            client: Some(CallerInfo {
                name: "test".into(),
                version: "1".into(),
                protocol_version: revision.into(),
            }),
            trace_parent: String::new(),
        };
        let permit = Arc::new(Semaphore::new(1))
            .acquire_owned()
            .await
            .expect("a permit");
        run(
            Arc::new(declarations),
            request,
            outbound,
            InFlight::default(),
            Scope::default(),
            permit,
        )
        .await;
        let mut answered = Answered {
            result: None,
            error: None,
            logs: Vec::new(),
        };
        while let Ok(message) = inbound.try_recv() {
            match message.kind {
                Some(app_message::Kind::Log(log)) => answered.logs.push(log),
                Some(app_message::Kind::McpResult(result)) => {
                    assert_eq!(result.request_id, "s:1");
                    match result.outcome {
                        Some(proto::mcp_result::Outcome::ResultJson(json)) => {
                            answered.result =
                                Some(serde_json::from_str(&json).expect("result JSON"));
                        }
                        Some(proto::mcp_result::Outcome::Error(error)) => {
                            answered.error = Some(error)
                        }
                        None => panic!("an answer without an outcome"),
                    }
                }
                other => panic!("unexpected message {other:?}"),
            }
        }
        answered
    }

    async fn ask(method: &str, params: Value) -> Answered {
        ask_with(declarations(), method, params, "2025-11-25").await
    }

    fn error(answered: &Answered) -> &proto::McpError {
        answered.error.as_ref().expect("an error answer")
    }

    #[tokio::test]
    async fn a_resource_is_read_by_its_exact_uri_as_text_or_blob() {
        let text = ask("resources/read", json!({"uri": "test://static-text"})).await;
        assert_eq!(
            text.result,
            Some(
                json!({"contents": [{"uri": "test://static-text", "mimeType": "text/plain", "text": "static"}]})
            )
        );
        let binary = ask("resources/read", json!({"uri": "test://static-binary"})).await;
        assert_eq!(
            binary.result,
            Some(json!({"contents": [{"uri": "test://static-binary", "blob": "AQID"}]}))
        );
    }

    #[tokio::test]
    async fn a_uri_that_fits_a_template_reaches_its_handler_with_the_variables() {
        let read = ask("resources/read", json!({"uri": "test://template/123/data"})).await;
        assert_eq!(
            read.result,
            Some(
                json!({"contents": [{"uri": "test://template/123/data", "text": "Data for ID: 123"}]})
            )
        );
    }

    #[tokio::test]
    async fn an_unknown_uri_is_resource_not_found_carrying_the_uri_with_the_revisions_code() {
        let uri = "test://nonexistent";
        let old = ask("resources/read", json!({"uri": uri})).await;
        assert_eq!(error(&old).code, -32002);
        assert!(error(&old).message.contains(uri), "{:?}", old.error);
        assert_eq!(
            serde_json::from_str::<Value>(&error(&old).data_json).expect("data"),
            json!({"uri": uri})
        );
        let new = ask_with(
            declarations(),
            "resources/read",
            json!({"uri": uri}),
            "2026-07-28",
        )
        .await;
        assert_eq!(error(&new).code, -32602, "SEP-2164");
        assert_eq!(
            serde_json::from_str::<Value>(&error(&new).data_json).expect("data"),
            json!({"uri": uri})
        );
    }

    #[tokio::test]
    async fn a_raw_json_result_passes_and_one_that_is_not_an_object_is_an_internal_error() {
        let raw = ask("resources/read", json!({"uri": "test://raw"})).await;
        assert_eq!(
            raw.result.expect("result")["contents"][0]["text"],
            "9007199254740993"
        );
        let scalar = ask("resources/read", json!({"uri": "test://scalar"})).await;
        assert_eq!(error(&scalar).code, -32603);
        assert!(error(&scalar).message.contains("not a JSON object"));
    }

    #[tokio::test]
    async fn a_panicking_handler_is_an_internal_error_naming_the_panic() {
        let answered = ask("resources/read", json!({"uri": "test://panic"})).await;
        assert_eq!(error(&answered).code, -32603);
        assert!(error(&answered).message.contains("disk on fire"));
    }

    #[tokio::test]
    async fn a_handler_logs_for_its_request_before_the_answer() {
        let answered = ask("resources/read", json!({"uri": "test://logs"})).await;
        assert!(answered.result.is_some());
        let [log] = answered.logs.as_slice() else {
            panic!("one log record, got {:?}", answered.logs);
        };
        assert_eq!(
            (
                log.request_id.as_str(),
                log.level.as_str(),
                log.logger.as_str()
            ),
            ("s:1", "info", "reader")
        );
        assert_eq!(log.data_json, r#"{"reading":"test://logs"}"#);
    }

    #[tokio::test]
    async fn a_prompt_is_rendered_with_its_arguments() {
        let answered = ask(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
        )
        .await;
        assert_eq!(
            answered.result,
            Some(
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Prompt with arguments: arg1='hello', arg2='world'"}}]})
            )
        );
    }

    #[tokio::test]
    async fn an_unknown_prompt_or_a_missing_argument_is_invalid_params_naming_it() {
        let unknown = ask("prompts/get", json!({"name": "nope"})).await;
        assert_eq!(error(&unknown).code, -32602);
        assert!(error(&unknown).message.contains("`nope`"));
        let missing = ask(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}),
        )
        .await;
        assert_eq!(error(&missing).code, -32602);
        assert!(
            error(&missing).message.contains("`arg2`"),
            "{:?}",
            missing.error
        );
        let wrong_type = ask(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x", "arg2": 7}}),
        )
        .await;
        assert_eq!(error(&wrong_type).code, -32602);
        assert!(
            error(&wrong_type).message.contains("arg2"),
            "{:?}",
            wrong_type.error
        );
    }

    #[tokio::test]
    async fn other_methods_and_bad_params_are_refused_with_their_codes() {
        let other = ask("resources/subscribe", json!({"uri": "test://static-text"})).await;
        assert_eq!(error(&other).code, -32601);
        assert!(error(&other).message.contains("resources/subscribe"));
        let no_uri = ask("resources/read", json!({})).await;
        assert_eq!(error(&no_uri).code, -32602);
        assert!(error(&no_uri).message.contains("\"uri\""));
    }

    #[tokio::test]
    async fn completion_checks_the_reference_then_asks_the_handler() {
        let completing = |request: CompletionRequest, _: CallContext| async move {
            let prefix = request.value().to_owned();
            Ok::<_, McpError>(crate::Completion::new(
                ["paris", "park", "party", "rome"]
                    .into_iter()
                    .filter(move |city| city.starts_with(&prefix)),
            ))
        };
        let mut declared = declarations();
        declared.set_completion(Some(completion::boxed(completing)));
        let answered = ask_with(
            declared,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
            "2025-11-25",
        )
        .await;
        assert_eq!(
            answered.result,
            Some(json!({"completion": {"values": ["paris", "park", "party"]}}))
        );

        let without_handler = ask(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"}, "argument": {"name": "id", "value": "1"}}),
        )
        .await;
        assert_eq!(
            without_handler.result,
            Some(json!({"completion": {"values": []}}))
        );

        let unknown_argument = ask(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg9", "value": ""}}),
        )
        .await;
        assert_eq!(error(&unknown_argument).code, -32602);
        let unknown_template = ask(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "test://other/{id}"}, "argument": {"name": "id", "value": ""}}),
        )
        .await;
        assert_eq!(error(&unknown_template).code, -32602);
    }

    #[tokio::test]
    async fn a_cancelled_request_sees_why_and_still_answers() {
        let in_flight = InFlight::default();
        let (outbound, mut inbound) = mpsc::channel(16);
        let request = McpRequest {
            session_id: "s".into(),
            request_id: "s:7".into(),
            method: "resources/read".into(),
            params_json: json!({"uri": "test://slow"}).to_string(),
            ..McpRequest::default()
        };
        let permit = Arc::new(Semaphore::new(1))
            .acquire_owned()
            .await
            .expect("permit");
        let running = tokio::spawn(run(
            Arc::new(declarations()),
            request,
            outbound,
            in_flight.clone(),
            Scope::default(),
            permit,
        ));
        let cancelled = async {
            while !in_flight.cancel("s:7", crate::CancelReason::Proxy("gone".into())) {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), cancelled)
            .await
            .expect("registered");
        running.await.expect("join");
        let Some(AppMessage {
            kind: Some(app_message::Kind::McpResult(result)),
        }) = inbound.recv().await
        else {
            panic!("an answer");
        };
        let Some(proto::mcp_result::Outcome::ResultJson(json)) = result.outcome else {
            panic!("a result");
        };
        assert!(json.contains("Proxy(\\\"gone\\\")"), "{json}");
    }
}
