//! Calls to the Gateway's `POST /tools/invoke`, and the mapping of its
//! answers to MCP results. The HTTP client has the timeouts and the answer
//! limit of [`crate::http`]; every failure, an empty answer (202, 204, an
//! empty 200) included, is an MCP error result that says what happened.

use openclaw_proxy_proto::mcp::content_result;
use reqwest::StatusCode;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::http::{BodyError, ClientError};
use crate::limits::Limits;

/// The outcome of one call.
#[derive(Debug)]
pub struct Invoked {
    /// The MCP result (an error result for every failure).
    pub result: CallToolResult,
    /// The Gateway answered 404 `not_found`: it does not serve the tool over
    /// HTTP (deny list, policy, or a tool that was never built).
    pub not_found: bool,
}

/// A client of one Gateway.
#[derive(Clone, Debug)]
pub struct GatewayClient {
    http: reqwest::Client,
    url: String,
    token: String,
    limits: Limits,
}

impl GatewayClient {
    /// A client for the Gateway at `url` (no trailing slash) with `token`.
    pub fn new(url: String, token: String, limits: Limits) -> Result<Self, ClientError> {
        Ok(Self {
            http: crate::http::client(&url, &limits)?,
            url,
            token,
            limits,
        })
    }

    /// Invokes `tool`; every failure is an error result with a sentence.
    pub async fn invoke(
        &self,
        tool: &str,
        args: Map<String, Value>,
        session_key: Option<String>,
    ) -> Invoked {
        let (result, not_found) = self.call(tool, args, session_key).await;
        Invoked { result, not_found }
    }

    async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        session_key: Option<String>,
    ) -> (CallToolResult, bool) {
        match self.post(tool, args, session_key).await {
            Ok(answer) => answer.into_result(tool),
            Err(sentence) => (failure(sentence), false),
        }
    }

    /// Posts the call and reads the answer; the error is the sentence of a
    /// call that got no usable answer.
    async fn post(
        &self,
        tool: &str,
        args: Map<String, Value>,
        session_key: Option<String>,
    ) -> Result<Answer, String> {
        let mut body = json!({"tool": tool, "args": args});
        if let Some(session_key) = session_key {
            body["sessionKey"] = json!(session_key);
        }
        let endpoint = format!("{}/tools/invoke", self.url);
        let sent = self
            .http
            .post(&endpoint)
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await;
        let response = match sent {
            Ok(response) => response,
            Err(error) if error.is_timeout() && !error.is_connect() => {
                return Err(format!(
                    "The OpenClaw Gateway at {} did not answer: {}.",
                    self.url,
                    crate::http::send_failure(&error, &self.limits)
                ));
            }
            Err(error) => {
                return Err(format!(
                    "Cannot reach the OpenClaw Gateway at {}: {}. Check OPENCLAW_GATEWAY_URL and that the Gateway runs.",
                    self.url,
                    crate::http::send_failure(&error, &self.limits)
                ));
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let text = match crate::http::read_body(response, self.limits).await {
            Ok(body) => String::from_utf8_lossy(&body).into_owned(),
            Err(error @ (BodyError::TooLarge { .. } | BodyError::Timeout { .. })) => {
                return Err(format!(
                    "The OpenClaw Gateway's answer to {tool:?} was not used: {error}."
                ));
            }
            Err(error) => {
                return Err(format!(
                    "The OpenClaw Gateway's answer to {tool:?} was cut off: {error}."
                ));
            }
        };
        Ok(Answer {
            status,
            retry_after,
            text,
        })
    }
}

/// What the Gateway answered to a call.
struct Answer {
    status: StatusCode,
    retry_after: Option<String>,
    text: String,
}

impl Answer {
    /// The call's result, and whether the Gateway said the tool does not
    /// exist.
    fn into_result(self, tool: &str) -> (CallToolResult, bool) {
        let Self {
            status,
            retry_after,
            text,
        } = self;
        let parsed: Option<Envelope> = serde_json::from_str(&text).ok();
        if status.is_success() && text.trim().is_empty() {
            let text = format!(
                "The OpenClaw Gateway answered HTTP {status} with an empty body to {tool:?}; /tools/invoke answers with a JSON {{\"ok\", \"result\"}} envelope. Is OPENCLAW_GATEWAY_URL the Gateway?"
            );
            return (failure(text), false);
        }
        if status.is_success() {
            let result =
                match parsed {
                    Some(Envelope {
                        ok: Some(false),
                        error,
                        ..
                    }) => failure(error_message(error.as_ref()).unwrap_or_else(|| {
                        "The Gateway reported a failure without a message.".into()
                    })),
                    Some(Envelope {
                        result: Some(result),
                        ..
                    }) => map_result(result),
                    Some(Envelope { result: None, .. }) => CallToolResult::success(Vec::new()),
                    None => failure(format!(
                        "The Gateway answered with something that is not JSON: {}",
                        snippet(&text)
                    )),
                };
            return (result, false);
        }
        let not_found = status == StatusCode::NOT_FOUND
            && parsed
                .as_ref()
                .and_then(|envelope| envelope.error.as_ref())
                .and_then(|error| error.get("type"))
                .is_some_and(|kind| kind == "not_found");
        let message = parsed
            .as_ref()
            .and_then(|envelope| error_message(envelope.error.as_ref()))
            .unwrap_or_else(|| snippet(&text));
        let result = failure(describe_status(
            status,
            tool,
            &message,
            retry_after.as_deref(),
        ));
        (result, not_found)
    }
}

#[derive(Deserialize)]
struct Envelope {
    ok: Option<bool>,
    result: Option<Value>,
    error: Option<Value>,
}

fn error_message(error: Option<&Value>) -> Option<String> {
    match error? {
        Value::String(message) => Some(message.clone()),
        Value::Object(error) => error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| error.get("type").and_then(Value::as_str).map(str::to_owned)),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn describe_status(
    status: StatusCode,
    tool: &str,
    message: &str,
    retry_after: Option<&str>,
) -> String {
    let hint = match status.as_u16() {
        401 => "The Gateway rejected the token (401): check OPENCLAW_GATEWAY_TOKEN.".to_owned(),
        403 => "The Gateway blocked the call (403, tool_call_blocked): it needs approval or the policy denies it.".to_owned(),
        404 => format!(
            "The Gateway does not offer {tool:?} over HTTP (404): it may be on the Gateway's HTTP deny list; allow it with gateway.tools.allow."
        ),
        429 => match retry_after {
            Some(seconds) => format!("The Gateway is rate limiting calls (429): retry after {seconds} seconds (Retry-After)."),
            None => "The Gateway is rate limiting calls (429): retry later.".to_owned(),
        },
        code => format!("The Gateway answered HTTP {code}."),
    };
    if message.is_empty() {
        hint
    } else {
        format!("{message}\n{hint}")
    }
}

fn failure(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn snippet(text: &str) -> String {
    text.chars().take(500).collect()
}

/// Maps a successful Gateway `result` with the proxy's own rule
/// ([`content_result`]): its `details` when present, else its `content`
/// blocks (images included), else the result itself.
pub fn map_result(mut result: Value) -> CallToolResult {
    // One mapping of content to MCP for the proxy and this binary.
    if let Some(details) = result
        .get_mut("details")
        .map(Value::take)
        .filter(|details| !details.is_null())
    {
        return content_result(details);
    }
    if let Some(content @ Value::Array(_)) = result.get_mut("content").map(Value::take) {
        return content_result(content);
    }
    content_result(result)
}
