//! Asking the MCP client of a call while it runs: the user
//! ([`CallContext::elicit`], a form or a URL to visit), the client's model
//! ([`CallContext::sample`]) or its roots ([`CallContext::roots`]).
//!
//! Each request travels to the proxy as a `ClientRequest` with an id of its
//! own; the proxy asks the client the way the client's protocol revision
//! asks and sends its answer back as a `ClientResponse`. The handler just
//! awaits the answer. While it waits, the proxy does not count the time
//! against the call's timeout (a person may take minutes); the wait ends
//! with [`AskError::Cancelled`] when the call is cancelled, and with the
//! proxy's error when the client cannot be asked (it lacks the capability,
//! went away, or did not answer in time).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use openclaw_proxy_proto::v1::{
    AppMessage, ClientRequest, ClientResponse, app_message, client_response,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::CallContext;

/// Why a request to the client got no usable answer.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum AskError {
    /// The client answered with a JSON-RPC error, or the proxy could not ask
    /// it (the client lacks the capability, went away, or did not answer in
    /// time); `message` says which.
    #[error("the MCP client could not answer ({code}): {message}")]
    Client {
        /// The JSON-RPC error code.
        code: i32,
        /// What went wrong.
        message: String,
        /// The error's `data`, if any.
        data: Option<Value>,
    },
    /// The call was cancelled while it waited.
    #[error("the call was cancelled while it waited for the MCP client")]
    Cancelled,
    /// The bridge to the proxy went away before the answer came.
    #[error("the bridge to the proxy ended before the MCP client answered")]
    Disconnected,
    /// The client's answer is not what the method returns.
    #[error("the MCP client's answer to {method} is not its result: {problem}")]
    Unexpected {
        /// The method asked.
        method: &'static str,
        /// What did not fit.
        problem: String,
    },
}

/// What to ask the user ([`CallContext::elicit`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Elicitation {
    params: Map<String, Value>,
}

impl Elicitation {
    /// A form: `message` for the user and the JSON Schema of what to fill
    /// in (an object of flat properties: strings, numbers, booleans,
    /// enums).
    pub fn form(message: impl Into<String>, requested_schema: Value) -> Self {
        let mut params = Map::new();
        params.insert("mode".into(), json!("form"));
        params.insert("message".into(), json!(message.into()));
        params.insert("requestedSchema".into(), requested_schema);
        Self { params }
    }

    /// A URL for the user to visit (to sign in somewhere, say), named by
    /// `elicitation_id`.
    pub fn url(
        message: impl Into<String>,
        url: impl Into<String>,
        elicitation_id: impl Into<String>,
    ) -> Self {
        let mut params = Map::new();
        params.insert("mode".into(), json!("url"));
        params.insert("message".into(), json!(message.into()));
        params.insert("url".into(), json!(url.into()));
        params.insert("elicitationId".into(), json!(elicitation_id.into()));
        Self { params }
    }
}

/// The user's answer to an [`Elicitation`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// What the user filled in, when they accepted a form.
    #[serde(default)]
    pub content: Option<Map<String, Value>>,
}

/// What the user did with an [`Elicitation`].
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Accepted (and filled in the form).
    Accept,
    /// Said no.
    Decline,
    /// Dismissed it without choosing.
    Cancel,
}

/// What to ask the client's model ([`CallContext::sample`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    messages: Vec<Value>,
    max_tokens: u32,
    system_prompt: Option<String>,
}

impl Sampling {
    /// A request for at most `max_tokens` tokens.
    pub fn new(max_tokens: u32) -> Self {
        Self {
            messages: Vec::new(),
            max_tokens,
            system_prompt: None,
        }
    }

    /// Adds a user message of plain text.
    pub fn user(mut self, text: impl Into<String>) -> Self {
        self.messages
            .push(json!({"role": "user", "content": {"type": "text", "text": text.into()}}));
        self
    }

    /// The system prompt the client may use.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    fn params(self) -> Value {
        let mut params = json!({"messages": self.messages, "maxTokens": self.max_tokens});
        if let Some(prompt) = self.system_prompt {
            params["systemPrompt"] = json!(prompt);
        }
        params
    }
}

/// The client model's answer to a [`Sampling`].
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct SampleResult {
    /// Who wrote it (`assistant`).
    pub role: String,
    /// The content, as MCP content (`{"type": "text", "text": ...}`, ...).
    pub content: Value,
    /// The model that wrote it.
    #[serde(default)]
    pub model: String,
    /// Why the model stopped, when the client says.
    #[serde(rename = "stopReason", default)]
    pub stop_reason: Option<String>,
}

impl SampleResult {
    /// The text, when the content is text.
    pub fn text(&self) -> Option<&str> {
        self.content.get("text").and_then(Value::as_str)
    }
}

/// One of the client's roots ([`CallContext::roots`]).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Root {
    /// Its URI (`file:///...`).
    pub uri: String,
    /// Its name, if the client gives one.
    #[serde(default)]
    pub name: Option<String>,
}

type Answer = Result<String, AskError>;

/// The waiting requests: by the call's request id and the request's id.
type Pending = HashMap<(String, String), oneshot::Sender<Answer>>;

/// The app's requests waiting for the client's answer, by call and id.
#[derive(Clone, Default)]
pub(crate) struct Asks {
    pending: Arc<Mutex<Pending>>,
    next_id: Arc<AtomicU64>,
}

impl std::fmt::Debug for Asks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Asks").finish_non_exhaustive()
    }
}

impl Asks {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), oneshot::Sender<Answer>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands the proxy's `ClientResponse` to the request waiting for it.
    pub(crate) fn answer(&self, response: ClientResponse) {
        let Some(waiting) = self.lock().remove(&(response.request_id, response.id)) else {
            // Its call ended meanwhile.
            return;
        };
        let answer = match response.outcome {
            Some(client_response::Outcome::ResultJson(json)) => Ok(json),
            Some(client_response::Outcome::Error(error)) => Err(AskError::Client {
                code: error.code,
                data: serde_json::from_str(&error.data_json).ok(),
                message: error.message,
            }),
            None => Err(AskError::Client {
                code: -32603,
                message: "the proxy's answer carried no outcome".into(),
                data: None,
            }),
        };
        let _ = waiting.send(answer);
    }
}

/// Removes a request from [`Asks`] however its wait ends.
struct Registered<'a> {
    asks: &'a Asks,
    key: (String, String),
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.asks.lock().remove(&self.key);
    }
}

impl CallContext {
    /// Asks the user through the MCP client: a form to fill in, or a URL to
    /// visit. Waits for the answer (the call's timeout is paused meanwhile).
    pub async fn elicit(&self, elicitation: Elicitation) -> Result<ElicitResult, AskError> {
        self.ask_typed("elicitation/create", Value::Object(elicitation.params))
            .await
    }

    /// Asks the client's model for a message.
    pub async fn sample(&self, sampling: Sampling) -> Result<SampleResult, AskError> {
        self.ask_typed("sampling/createMessage", sampling.params())
            .await
    }

    /// Asks the client for its roots.
    pub async fn roots(&self) -> Result<Vec<Root>, AskError> {
        #[derive(Deserialize)]
        struct Roots {
            roots: Vec<Root>,
        }
        let roots: Roots = self.ask_typed("roots/list", json!({})).await?;
        Ok(roots.roots)
    }

    async fn ask_typed<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<T, AskError> {
        let answer = self.ask(method, params).await?;
        serde_json::from_str(&answer).map_err(|error| AskError::Unexpected {
            method,
            problem: error.to_string(),
        })
    }

    /// Sends any request to the client (`method` and its params, an
    /// object) and returns its result as JSON text.
    pub async fn ask(&self, method: &str, params: Value) -> Result<String, AskError> {
        let id = self
            .asks()
            .next_id
            .fetch_add(1, Ordering::Relaxed)
            .to_string();
        self.ask_keyed(id, method, params).await
    }

    /// As [`Self::ask`], with the request's id chosen by the app (unique
    /// among the call's outstanding requests). Clients at MCP 2026-07-28
    /// see it as the key of the request in an `input_required` result, and
    /// may answer a key before it is asked (a retried call carrying
    /// `inputResponses`): a stable key lets such an answer be used.
    pub async fn ask_keyed(
        &self,
        id: impl Into<String>,
        method: &str,
        params: Value,
    ) -> Result<String, AskError> {
        let asks = self.asks();
        let id = id.into();
        let key = (self.request_id().to_owned(), id.clone());
        let (sender, answer) = oneshot::channel();
        asks.lock().insert(key.clone(), sender);
        let _registered = Registered { asks, key };
        let request = ClientRequest {
            request_id: self.request_id().to_owned(),
            id,
            method: method.to_owned(),
            params_json: params.to_string(),
        };
        let message = AppMessage {
            kind: Some(app_message::Kind::ClientRequest(request)),
        };
        if self.outbound().send(message).await.is_err() {
            return Err(AskError::Disconnected);
        }
        tokio::select! {
            () = self.cancelled() => Err(AskError::Cancelled),
            answer = answer => answer.unwrap_or(Err(AskError::Disconnected)),
        }
    }
}
