//! The confirmation gate: a tool whose definition says `confirm` is called
//! only once the MCP client's user has said yes.
//!
//! An operator cannot trust every agent with a `delete_*` tool, and an app
//! should not have to write the question itself; so the proxy asks, before
//! the app ever sees the call: a form elicitation that names the tool and
//! shows its arguments, sent the way the caller's revision takes requests
//! (a request on the call's SSE stream, or an `input_required` result), as
//! if the app had asked. Only `accept` lets the call through; `decline`,
//! `cancel`, an error from the client, or no answer in time end the call
//! with an error result that says so, and the app hears nothing. A client
//! that cannot be asked (it declared no elicitation, its path carries no
//! requests, or it answers the question "method not found", which is how a
//! client up to 2025-11-25 says it cannot elicit) is refused too, unless
//! the operator lets such calls through (`allow_unconfirmed_calls`). Every
//! decision is an audit line.
//!
//! The gate runs where the call meets the app's bridge: on the node holding
//! it, whichever node the client reached (a call from another node is asked
//! about there, its question relayed to the caller's node like the app's own
//! requests). Its request is named like an app's (`{request_id}/confirm`,
//! the request id minted for the gate alone), so the client's answer finds
//! it through [`Hub::answer_client`] on every path, and on every node: an
//! answer that reaches another node goes to the bridge's, as the answers to
//! the app's requests do.
//!
//! Why there rather than on the calling node (as the first release had
//! it): the client's answer to the gate may reach any node, and on the
//! holding node it has the one route every answer takes (to the bridge's
//! node, `{prefix}.answer.{session_id}`); on the calling node it would need
//! a second route, to a node the minted id does not name, for the gate
//! alone. The question itself costs nothing more to relay: it is one more
//! request on the call's reply subject. The price is a rolling upgrade
//! from the release that asked on the calling node, whose holding node
//! would run the call unasked: a gated call crosses in wire version 3,
//! which such a node refuses, and a holding node asks about a call only
//! when its calling node did not (`cluster/wire/asks.rs`, `holder_gates`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::json;
use tokio::sync::oneshot;

use super::Hub;
use crate::asking::{AskMethod, Askable, ClientAsk};
use crate::audit;
use crate::bridge::ClientAnswer;
use crate::call::CallContext;
use crate::directory::SessionRecord;
use crate::escape::Outside;
use crate::metrics::AskOutcome;
use crate::outcome::ToolOutcome;
use crate::progress::ProgressSink;

/// JSON-RPC's "method not found": the client has no handler for the
/// question.
const METHOD_NOT_FOUND: i32 = -32601;

/// The id of the gate's request within its request id.
pub const CONFIRM_ID: &str = "confirm";

/// The most of a call's arguments the question shows, in characters.
const MAX_SHOWN_ARGUMENTS: usize = 2000;

/// The gates waiting for their client's answer, by request id.
#[derive(Default)]
pub(super) struct Gates(Mutex<HashMap<String, oneshot::Sender<ClientAnswer>>>);

impl Gates {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ClientAnswer>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `answer` to the gate waiting as `request_id`; gives it back
    /// when no gate waits there with that id.
    pub(super) fn answer(
        &self,
        request_id: &str,
        id: &str,
        answer: ClientAnswer,
    ) -> Result<Result<(), ClientAnswer>, ClientAnswer> {
        if id != CONFIRM_ID {
            return Err(answer);
        }
        match self.map().remove(request_id) {
            Some(waiting) => Ok(waiting.send(answer)),
            None => Err(answer),
        }
    }
}

/// A gate's place in [`Gates`], given up however its wait ends.
struct Waiting<'a> {
    gates: &'a Gates,
    request_id: String,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.gates.map().remove(&self.request_id);
    }
}

/// What the gate decided, as its audit line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Accepted,
    Declined,
    Cancelled,
    /// The client answered with an error, or something other than a
    /// result of `elicitation/create`.
    NotAnswered,
    /// The client did not answer within the client-request timeout.
    Expired,
    /// The client cannot be asked, and unconfirmed calls are refused.
    CannotAsk,
    /// The client cannot be asked, and unconfirmed calls are let through.
    Unconfirmed,
}

impl Decision {
    fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Declined => "declined",
            Self::Cancelled => "cancelled",
            Self::NotAnswered => "not_answered",
            Self::Expired => "expired",
            Self::CannotAsk => "cannot_ask",
            Self::Unconfirmed => "unconfirmed",
        }
    }

    fn lets_through(self) -> bool {
        matches!(self, Self::Accepted | Self::Unconfirmed)
    }

    /// The error result of a call the gate stopped, whose caller could be
    /// asked `askable` (`None`: nothing).
    fn refusal(self, tool: &str, askable: Option<Askable>) -> String {
        let tool = crate::escape::quoted(tool);
        match self {
            Self::Declined => format!("The user declined the call of {tool}; it was not run."),
            Self::Cancelled => {
                format!("The user cancelled the confirmation of {tool}; it was not run.")
            }
            Self::NotAnswered => format!(
                "The client did not answer the confirmation of {tool} (it may not support elicitation); it was not run."
            ),
            Self::Expired => format!(
                "Nobody confirmed the call of {tool} in time (OPENCLAW_PROXY_CLIENT_REQUEST_TIMEOUT_SECONDS); it was not run."
            ),
            _ => {
                let why = match askable {
                    Some(Askable::Declared { elicitation, .. }) if elicitation.url => {
                        "it declared elicitation in URL mode only (elicitation.url), and the confirmation is a form (elicitation.form)"
                    }
                    _ => "it declared no elicitation capability",
                };
                format!(
                    "{tool} needs the user's confirmation, and this client cannot be asked ({why}); it was not run. The operator may allow such calls with OPENCLAW_PROXY_ALLOW_UNCONFIRMED_CALLS."
                )
            }
        }
    }
}

/// The gate's wait, boxed: it hands back the call's arguments and context
/// when the call may go on, else the error result that ends it.
pub(super) type Gate<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<(String, CallContext), ToolOutcome>> + Send + 'a>>;

impl Hub {
    /// The confirmation a call of `tool_name` waits for, its definition
    /// asking `message`.
    pub(super) fn gate<'a>(
        &'a self,
        record: &'a SessionRecord,
        tool_name: &'a str,
        message: std::sync::Arc<str>,
        arguments_json: String,
        context: CallContext,
    ) -> Gate<'a> {
        Box::pin(async move {
            match self
                .confirmed(record, tool_name, &message, &arguments_json, &context)
                .await
            {
                None => Ok((arguments_json, context)),
                Some(stopped) => Err(stopped),
            }
        })
    }

    /// `None` when the call may go on to the app; else the error result
    /// that ends it. `message` is the tool's confirmation question.
    async fn confirmed(
        &self,
        record: &SessionRecord,
        tool_name: &str,
        message: &str,
        arguments_json: &str,
        context: &CallContext,
    ) -> Option<ToolOutcome> {
        let decision = match context
            .progress
            .as_ref()
            .filter(|sink| can_be_asked(sink.askable()))
        {
            Some(sink) => {
                self.ask_to_confirm(record, tool_name, message, arguments_json, sink)
                    .await
            }
            None if self.inner.config.allow_unconfirmed_calls => Decision::Unconfirmed,
            None => Decision::CannotAsk,
        };
        audit::tool_confirmation(
            Outside::session(&record.id),
            context.origin,
            Outside::new(tool_name),
            decision.as_str(),
            context.caller.identity.as_deref(),
        );
        if decision.lets_through() {
            return None;
        }
        let askable = context.progress.as_ref().map(ProgressSink::askable);
        let error = decision.refusal(tool_name, askable);
        Some(ToolOutcome {
            ok: false,
            content: Box::<serde_json::value::RawValue>::default(),
            error,
        })
    }

    async fn ask_to_confirm(
        &self,
        record: &SessionRecord,
        tool_name: &str,
        message: &str,
        arguments_json: &str,
        sink: &ProgressSink,
    ) -> Decision {
        let metrics = &self.inner.metrics;
        let request_id = record.next_request_id();
        let (answered, answer) = oneshot::channel();
        self.inner.gates.map().insert(request_id.clone(), answered);
        let _waiting = Waiting {
            gates: &self.inner.gates,
            request_id: request_id.clone(),
        };
        metrics.client_request_asked();
        sink.push_ask(ClientAsk {
            request_id,
            id: CONFIRM_ID.to_owned(),
            method: AskMethod::Elicitation,
            params_json: question(tool_name, message, arguments_json),
        });
        let timeout = self.inner.config.client_request_timeout;
        let (decision, outcome) = match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(ClientAnswer::Result(result))) => (decision_of(&result), AskOutcome::Answered),
            // "Method not found": a client that cannot elicit (up to
            // 2025-11-25 nothing says so before it is asked), as one that
            // declared no capability.
            Ok(Ok(ClientAnswer::Error {
                code: METHOD_NOT_FOUND,
                ..
            })) => {
                let decision = if self.inner.config.allow_unconfirmed_calls {
                    Decision::Unconfirmed
                } else {
                    Decision::CannotAsk
                };
                (decision, AskOutcome::ClientError)
            }
            Ok(Ok(ClientAnswer::Error { .. })) => (Decision::NotAnswered, AskOutcome::ClientError),
            // The sender went with the session's gates: nothing answers now.
            Ok(Err(_)) => (Decision::NotAnswered, AskOutcome::Abandoned),
            Err(_) => (Decision::Expired, AskOutcome::Expired),
        };
        metrics.client_request_ended(Some(AskMethod::Elicitation), outcome, true);
        decision
    }
}

/// Whether the gate's question (a form) can reach a client that can be
/// asked this.
fn can_be_asked(askable: Askable) -> bool {
    askable
        .refusal(AskMethod::Elicitation, r#"{"mode":"form"}"#)
        .is_none()
}

/// The params of the gate's `elicitation/create`: the operator's message,
/// then the tool and its arguments (cut at [`MAX_SHOWN_ARGUMENTS`]), and a
/// form with nothing to fill in: the answer is the action.
fn question(tool_name: &str, message: &str, arguments_json: &str) -> String {
    let shown = crate::escape::truncated_to(arguments_json, MAX_SHOWN_ARGUMENTS);
    let mut text = String::new();
    if !message.trim().is_empty() {
        text.push_str(message.trim());
        text.push_str("\n\n");
    }
    text.push_str(&format!(
        "Allow the tool {} to run with these arguments?\n{shown}",
        crate::escape::quoted(tool_name)
    ));
    json!({
        "mode": "form",
        "message": text,
        "requestedSchema": {"type": "object", "properties": {}},
    })
    .to_string()
}

/// The decision in an `elicitation/create` result (`action`).
fn decision_of(result_json: &str) -> Decision {
    let result: serde_json::Value = serde_json::from_str(result_json).unwrap_or_default();
    match result.get("action").and_then(serde_json::Value::as_str) {
        Some("accept") => Decision::Accepted,
        Some("decline") => Decision::Declined,
        Some("cancel") => Decision::Cancelled,
        _ => Decision::NotAnswered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_accept_lets_a_call_through() {
        assert_eq!(decision_of(r#"{"action":"accept"}"#), Decision::Accepted);
        assert_eq!(
            decision_of(r#"{"action":"accept","content":{}}"#),
            Decision::Accepted
        );
        assert_eq!(decision_of(r#"{"action":"decline"}"#), Decision::Declined);
        assert_eq!(decision_of(r#"{"action":"cancel"}"#), Decision::Cancelled);
        for other in [
            r#"{"action":"ACCEPT"}"#,
            "{}",
            "[]",
            "not json",
            r#"{"action":1}"#,
        ] {
            assert_eq!(decision_of(other), Decision::NotAnswered, "{other}");
            assert!(!decision_of(other).lets_through());
        }
    }

    #[test]
    fn a_client_that_cannot_be_asked_is_told_why() {
        use crate::asking::Elicitation;
        let declared = |elicitation| Askable::Declared {
            elicitation,
            sampling: false,
            roots: false,
        };
        let url_only = declared(Elicitation::declared(false, true));
        assert!(!can_be_asked(url_only));
        let refusal = Decision::CannotAsk.refusal("delete_files", Some(url_only));
        assert!(refusal.contains("URL mode only"), "{refusal}");
        let refusal =
            Decision::CannotAsk.refusal("delete_files", Some(declared(Elicitation::NONE)));
        assert!(refusal.contains("no elicitation capability"), "{refusal}");
    }

    #[test]
    fn the_question_names_the_tool_and_shows_bounded_arguments() {
        let params: serde_json::Value =
            serde_json::from_str(&question("delete_files", "Really?", r#"{"n":40}"#))
                .unwrap_or_default();
        let text = params["message"].as_str().unwrap_or_default();
        assert!(text.starts_with("Really?"), "{text}");
        assert!(text.contains("\"delete_files\""), "{text}");
        assert!(text.contains(r#"{"n":40}"#), "{text}");
        assert_eq!(params["mode"], "form");
        assert_eq!(params["requestedSchema"]["type"], "object");

        let huge = format!(r#"{{"x":"{}"}}"#, "y".repeat(100_000));
        let params: serde_json::Value =
            serde_json::from_str(&question("t", "", &huge)).unwrap_or_default();
        let text = params["message"].as_str().unwrap_or_default();
        let chars = text.chars().count();
        assert!(chars < MAX_SHOWN_ARGUMENTS + 200, "{chars} characters");
        assert!(text.ends_with('…'), "the cut is shown");
    }
}
