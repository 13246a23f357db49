//! Routing an MCP request to the handler it names (by exact URI, then by
//! template; by prompt name; to the one completion handler), after checking
//! its params, so that handlers see only well-formed questions about their
//! own declarations.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::call::CallContext;
use crate::completion::{Completion, CompletionOutput, CompletionRef, CompletionRequest};
use crate::declarations::Declarations;
use crate::mcp_error::McpError;
use crate::resource::ReadRequest;

/// The result object's JSON text, or the error for the client.
pub(super) async fn dispatch(
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
