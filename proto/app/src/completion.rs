//! Argument completion (`completion/complete`): while a user fills in a
//! prompt's argument or a resource template's variable, the client asks for
//! suggestions for what they have typed so far.
//!
//! One handler serves the whole app ([`AppBuilder::completion`]); the crate
//! checks first that the prompt or template asked about is declared and has
//! that argument, so the handler only ever sees questions about its own
//! declarations. Without a handler, every question is answered with no
//! suggestions, which MCP allows.
//!
//! [`AppBuilder::completion`]: crate::AppBuilder::completion

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::call::CallContext;
use crate::mcp_error::McpError;
use crate::tool::BoxFuture;

/// The most values one answer may hold (MCP's limit).
pub const MAX_COMPLETION_VALUES: usize = 100;

/// What is being completed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionRef {
    /// An argument of the prompt with this name.
    Prompt(String),
    /// A variable of the resource template with this URI template.
    ResourceTemplate(String),
}

/// One `completion/complete` question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompletionRequest {
    pub(crate) reference: CompletionRef,
    pub(crate) argument: String,
    pub(crate) value: String,
    pub(crate) context: BTreeMap<String, String>,
}

impl CompletionRequest {
    /// The prompt or template whose argument is being filled in.
    pub fn reference(&self) -> &CompletionRef {
        &self.reference
    }

    /// The argument's (or template variable's) name.
    pub fn argument(&self) -> &str {
        &self.argument
    }

    /// What the user has typed so far.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The values of the other arguments already filled in, when the client
    /// sent them.
    pub fn context(&self) -> &BTreeMap<String, String> {
        &self.context
    }
}

/// Suggestions for one argument, best first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[must_use]
pub struct Completion {
    values: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    total: Option<u32>,
    #[serde(rename = "hasMore", skip_serializing_if = "Option::is_none")]
    has_more: Option<bool>,
}

impl Completion {
    /// These suggestions. More than [`MAX_COMPLETION_VALUES`] are cut to
    /// that many, with `total` set to how many there were and `hasMore`.
    pub fn new(values: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        let mut completion = Self::default();
        if values.len() > MAX_COMPLETION_VALUES {
            completion.total = u32::try_from(values.len()).ok();
            completion.has_more = Some(true);
            values.truncate(MAX_COMPLETION_VALUES);
        }
        completion.values = values;
        completion
    }

    /// No suggestions.
    pub fn empty() -> Self {
        Self::default()
    }

    /// How many suggestions there are in all (they may be more than given).
    pub fn total(mut self, total: u32) -> Self {
        self.total = Some(total);
        self
    }

    /// Whether there are more suggestions than given.
    pub fn has_more(mut self, has_more: bool) -> Self {
        self.has_more = Some(has_more);
        self
    }
}

/// What a completion handler may return: the typed suggestions, a list of
/// values, or the raw result object (`{"completion": {...}}`) as JSON.
pub trait CompletionOutput: Send + 'static {
    /// The `completion/complete` result object as JSON text.
    fn into_json(self) -> serde_json::Result<String>;
}

impl CompletionOutput for Completion {
    fn into_json(self) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct Result {
            completion: Completion,
        }
        serde_json::to_string(&Result { completion: self })
    }
}

impl CompletionOutput for Vec<String> {
    fn into_json(self) -> serde_json::Result<String> {
        Completion::new(self).into_json()
    }
}

impl CompletionOutput for Value {
    fn into_json(self) -> serde_json::Result<String> {
        serde_json::to_string(&self)
    }
}

pub(crate) type CompletionHandler =
    dyn Fn(CompletionRequest, CallContext) -> BoxFuture<Result<String, McpError>> + Send + Sync;

pub(crate) fn boxed<R, F, Fut>(handler: F) -> Arc<CompletionHandler>
where
    R: CompletionOutput,
    F: Fn(CompletionRequest, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, McpError>> + Send + 'static,
{
    Arc::new(
        move |request: CompletionRequest, call: CallContext| -> BoxFuture<_> {
            let completing = handler(request, call);
            Box::pin(async move {
                let output = completing.await?;
                output.into_json().map_err(|error| {
                    McpError::internal(format!("The completion is not valid JSON: {error}"))
                })
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_has_the_mcp_shape() {
        let json = Completion::new(["paris", "park"])
            .total(150)
            .has_more(true)
            .into_json()
            .expect("json");
        assert_eq!(
            json,
            r#"{"completion":{"values":["paris","park"],"total":150,"hasMore":true}}"#
        );
        assert_eq!(
            Completion::empty().into_json().expect("json"),
            r#"{"completion":{"values":[]}}"#
        );
    }

    #[test]
    fn more_than_a_hundred_values_are_cut_and_say_so() {
        let many: Vec<String> = (0..250).map(|n| n.to_string()).collect();
        let json: Value = serde_json::from_str(&many.into_json().expect("json")).expect("parse");
        let completion = &json["completion"];
        assert_eq!(completion["values"].as_array().map(Vec::len), Some(100));
        assert_eq!(completion["values"][0], "0");
        assert_eq!(completion["total"], 250);
        assert_eq!(completion["hasMore"], true);
    }
}
