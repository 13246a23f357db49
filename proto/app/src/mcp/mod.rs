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
mod tests;
