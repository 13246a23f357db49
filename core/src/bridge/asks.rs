//! The app's requests to the MCP client of a call in flight (elicitation,
//! sampling, roots): checked and queued for the call's caller, answered with
//! the client's response, or with why the client could not be asked.
//!
//! A request is kept with its call: when the call ends (answered,
//! cancelled, timed out, its bridge gone), its outstanding requests end
//! with it and are counted as abandoned, so nothing waits for a client on
//! behalf of a call that is over. A call its caller gave up on (cancelled,
//! gone, timed out) tells the app so for each request, with an error
//! response, before the cancel. While one is outstanding the call's clock
//! is paused ([`ClientWait`]): the tool timeout measures the app's work, not
//! the time a person takes to answer.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Bridge, notice, proxy};
use crate::asking::{AskMethod, ClientAsk};
use crate::metrics::{AskOutcome, Metrics};
use crate::proto::{self, proxy_message};

/// The JSON-RPC code of a request the client cannot be sent.
const CANNOT_ASK: i32 = -32601;
/// The JSON-RPC code of a request whose params are wrong.
const INVALID_PARAMS: i32 = -32602;
/// The JSON-RPC code of a request the proxy could not complete.
const NOT_ANSWERED: i32 = -32603;

/// The largest params of one request, in bytes: what a client is sent
/// stays a size every MCP client takes, and a call's outstanding requests
/// (up to `max_client_requests_per_call`) fit in one 2026-07-28 result.
pub const MAX_PARAMS_BYTES: usize = 1024 * 1024;

/// The outstanding requests of one call.
pub(super) struct Asks {
    /// The app's id and the method of each request the client has not
    /// answered yet.
    outstanding: Vec<(Box<str>, AskMethod)>,
    /// The call's time spent waiting for its client so far.
    wait: ClientWait,
    metrics: Arc<Metrics>,
}

impl Drop for Asks {
    fn drop(&mut self) {
        for (_, method) in self.outstanding.drain(..) {
            self.metrics
                .client_request_ended(Some(method), AskOutcome::Abandoned, true);
        }
    }
}

impl Asks {
    /// The error responses telling the app that its requests still waiting
    /// end with their call (`request_id`), for `why`. They are counted as
    /// abandoned when the requests are dropped.
    pub(super) fn ended_with_call(&self, request_id: &str, why: &str) -> Vec<proto::ProxyMessage> {
        self.outstanding
            .iter()
            .map(|(id, method)| {
                let error = ClientAnswer::Error {
                    code: NOT_ANSWERED,
                    message: format!(
                        "the call ended before the MCP client answered {}: {why}",
                        method.as_str()
                    ),
                    data_json: String::new(),
                };
                response(request_id.to_owned(), (**id).to_owned(), error)
            })
            .collect()
    }
}

/// How long a call has waited for its client: the time its timeout does not
/// count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientWait {
    /// Waited and done with.
    pub paused: Duration,
    /// Waiting since then, while a request is outstanding.
    pub since: Option<Instant>,
}

impl ClientWait {
    fn pause(&mut self, now: Instant) {
        self.since.get_or_insert(now);
    }

    fn resume(&mut self, now: Instant) {
        if let Some(since) = self.since.take() {
            self.paused += now.saturating_duration_since(since);
        }
    }
}

/// What the client answered to one request.
#[derive(Debug)]
pub enum ClientAnswer {
    /// Its result object, as JSON text, as it sent it.
    Result(String),
    /// A JSON-RPC error.
    Error {
        /// The code.
        code: i32,
        /// The message.
        message: String,
        /// `data` as JSON text; empty for none.
        data_json: String,
    },
}

/// Why a client's answer reached no request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unanswerable {
    /// The call it belongs to is no longer running.
    #[error("the call this answers is no longer running")]
    NoCall,
    /// The call has no outstanding request with that id (it was answered
    /// already, or expired).
    #[error(
        "no request with this id is waiting for an answer: it was answered already, expired, or never sent"
    )]
    NotOutstanding,
    /// The app's bridge ended before the answer could be passed on.
    #[error("the app's bridge ended before the answer could be passed on")]
    BridgeEnded,
}

impl Bridge {
    /// A request of the app to the caller of one of its calls: queued for
    /// the caller, or answered at once with why it cannot be.
    pub(super) fn ask(&self, request: proto::ClientRequest) {
        let method = AskMethod::parse(&request.method);
        let refusal = match self.admit(&request, method) {
            Ok(()) => return,
            Err(refusal) => refusal,
        };
        let Some((code, message)) = refusal else {
            // No call waits for it: the app hears of that as of any
            // message for no call.
            self.notify(notice(
                format!(
                    "no call is waiting for request id {}: client_request {} ignored",
                    crate::escape::quoted(&request.request_id),
                    crate::escape::quoted(&request.id)
                ),
                request.request_id,
            ));
            return;
        };
        self.metrics
            .client_request_ended(method, AskOutcome::Refused, false);
        let error = ClientAnswer::Error {
            code,
            message,
            data_json: String::new(),
        };
        self.notify(response(request.request_id, request.id, error));
    }

    /// Records and queues the request; the refusal otherwise (`None`: no
    /// call waits for it).
    fn admit(
        &self,
        request: &proto::ClientRequest,
        method: Option<AskMethod>,
    ) -> Result<(), Option<(i32, String)>> {
        let mut calls = self.calls();
        let waiting = calls.waiting.get_mut(&request.request_id).ok_or(None)?;
        let Some(method) = method else {
            return Err(Some((
                CANNOT_ASK,
                format!(
                    "a client cannot be asked {}: the app may ask elicitation/create, sampling/createMessage or roots/list",
                    crate::escape::quoted(&request.method)
                ),
            )));
        };
        if request.params_json.len() > MAX_PARAMS_BYTES {
            return Err(Some((
                INVALID_PARAMS,
                format!(
                    "the params of {} are {} bytes: a request to the client may carry at most {MAX_PARAMS_BYTES}",
                    method.as_str(),
                    request.params_json.len()
                ),
            )));
        }
        if let Some(problem) = not_an_object(&request.params_json) {
            return Err(Some((
                INVALID_PARAMS,
                format!(
                    "the params of {} must be a JSON object: {problem}",
                    method.as_str()
                ),
            )));
        }
        let sink = waiting.progress.as_ref();
        let askable = sink.map(super::ProgressSink::askable).unwrap_or_default();
        if let Some(refusal) = askable.refusal(method, &request.params_json) {
            return Err(Some((CANNOT_ASK, refusal)));
        }
        let asks = waiting.asks.get_or_insert_with(|| {
            Box::new(Asks {
                outstanding: Vec::new(),
                wait: ClientWait::default(),
                metrics: self.metrics.clone(),
            })
        });
        if asks.outstanding.iter().any(|(id, _)| **id == *request.id) {
            return Err(Some((
                INVALID_PARAMS,
                format!(
                    "a request with id {} is already waiting for the client in this call: give each request its own id",
                    crate::escape::quoted(&request.id)
                ),
            )));
        }
        if asks.outstanding.len() >= self.max_asks_per_call {
            return Err(Some((
                NOT_ANSWERED,
                format!(
                    "this call already has {} requests waiting for the client, the most a call may have: wait for an answer first",
                    self.max_asks_per_call
                ),
            )));
        }
        asks.outstanding.push((request.id.as_str().into(), method));
        asks.wait.pause(Instant::now());
        self.metrics.client_request_asked();
        if let Some(sink) = sink {
            sink.push_ask(ClientAsk {
                request_id: request.request_id.clone(),
                id: request.id.clone(),
                method,
                params_json: request.params_json.clone(),
            });
        }
        Ok(())
    }

    /// Passes the client's answer to one of the app's requests on to the
    /// app.
    pub(crate) async fn answer_ask(
        &self,
        request_id: &str,
        id: &str,
        answer: ClientAnswer,
    ) -> Result<(), Unanswerable> {
        let method = {
            let mut calls = self.calls();
            let waiting = calls
                .waiting
                .get_mut(request_id)
                .ok_or(Unanswerable::NoCall)?;
            let asks = waiting.asks.as_mut().ok_or(Unanswerable::NotOutstanding)?;
            let at = asks
                .outstanding
                .iter()
                .position(|(outstanding, _)| **outstanding == *id)
                .ok_or(Unanswerable::NotOutstanding)?;
            let (_, method) = asks.outstanding.swap_remove(at);
            if asks.outstanding.is_empty() {
                asks.wait.resume(Instant::now());
            }
            method
        };
        let outcome = match answer {
            ClientAnswer::Result(_) => AskOutcome::Answered,
            ClientAnswer::Error { .. } => AskOutcome::ClientError,
        };
        self.metrics
            .client_request_ended(Some(method), outcome, true);
        let message = response(request_id.to_owned(), id.to_owned(), answer);
        self.send(Box::new(message))
            .await
            .map_err(|_| Unanswerable::BridgeEnded)
    }

    /// How long the call has waited for its client so far.
    pub(crate) fn client_wait(&self, request_id: &str) -> ClientWait {
        self.calls()
            .waiting
            .get(request_id)
            .and_then(|waiting| waiting.asks.as_ref())
            .map(|asks| asks.wait)
            .unwrap_or_default()
    }

    /// Ends the call's outstanding requests: the client did not answer
    /// within `limit`. The app gets an error for each.
    pub(crate) fn expire_asks(&self, request_id: &str, limit: Duration) {
        let expired = {
            let mut calls = self.calls();
            let Some(asks) = calls
                .waiting
                .get_mut(request_id)
                .and_then(|waiting| waiting.asks.as_mut())
            else {
                return;
            };
            asks.wait.resume(Instant::now());
            std::mem::take(&mut asks.outstanding)
        };
        for (id, method) in expired {
            self.metrics
                .client_request_ended(Some(method), AskOutcome::Expired, true);
            let error = ClientAnswer::Error {
                code: NOT_ANSWERED,
                message: format!(
                    "the MCP client did not answer {} within {} seconds",
                    method.as_str(),
                    limit.as_secs()
                ),
                data_json: String::new(),
            };
            self.notify(response(request_id.to_owned(), id.into(), error));
        }
    }
}

/// The `ClientResponse` carrying `answer`.
fn response(request_id: String, id: String, answer: ClientAnswer) -> proto::ProxyMessage {
    let outcome = match answer {
        ClientAnswer::Result(json) => proto::client_response::Outcome::ResultJson(json),
        ClientAnswer::Error {
            code,
            message,
            data_json,
        } => proto::client_response::Outcome::Error(proto::McpError {
            code,
            message,
            data_json,
        }),
    };
    proxy(proxy_message::Kind::ClientResponse(proto::ClientResponse {
        request_id,
        id,
        outcome: Some(outcome),
    }))
}

/// What keeps `params_json` from being one JSON object, if anything. The
/// text is passed to the client as written, so it is checked whole here
/// (without building a tree of it): a client must never receive params it
/// cannot read.
fn not_an_object(params_json: &str) -> Option<String> {
    if !params_json.trim_start().starts_with('{') {
        return Some("the text does not start with `{`".to_owned());
    }
    serde_json::from_str::<serde::de::IgnoredAny>(params_json)
        .err()
        .map(|error| error.to_string())
}
