//! How the MCP server answers a POST: one JSON-RPC message as JSON, or an
//! event stream once something must reach the client before the answer
//! (progress, the app's log records, the app's requests to the client).
//!
//! A request that the app answers runs as a future that ends with its
//! rendered [`Answer`]; while it runs, the call's events wait in the core's
//! per-call queue (`openclaw_proxy_core::progress`), which thins them under
//! a flood, and are written here in order. A call whose app never reports
//! costs no notification and is answered as plain JSON. A client that goes
//! away drops the answer, which drops the call and cancels it in the app.

use std::convert::Infallible;
use std::future::Future;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use openclaw_proxy_core::asking::{Askable, ClientAsk};
use openclaw_proxy_core::hub::client_request_id;
use openclaw_proxy_core::progress::{CallEvent, LogLevel, ProgressReceiver};
use openclaw_proxy_core::proto::{Log, ToolProgress};
use rmcp::model::{ErrorCode, ProgressToken, RequestId};
use serde::Serialize;
use serde_json::value::RawValue;
use tracing::Instrument;

use super::{MESSAGE_LIMIT, Rejected};
use crate::http::sse;

/// One JSON-RPC message answering a request, ready to write, and its HTTP
/// status.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub message: Vec<u8>,
}

#[derive(Serialize)]
struct ResultMessage<'a, R: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: R,
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    code: i32,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a RawValue>,
}

impl Answer {
    /// The result of request `id`.
    pub fn result(id: &RequestId, result: impl Serialize) -> Self {
        match serde_json::to_vec(&ResultMessage {
            jsonrpc: "2.0",
            id,
            result,
        }) {
            Ok(message) => Self {
                status: StatusCode::OK,
                message,
            },
            Err(error) => Self::error(
                Some(id),
                ErrorCode::INTERNAL_ERROR,
                &format!("the result could not be written: {error}"),
                None,
            ),
        }
    }

    /// The JSON-RPC error answering `id` (`null` when it is not known),
    /// with status 200.
    pub fn error(
        id: Option<&RequestId>,
        code: ErrorCode,
        message: &str,
        data: Option<&RawValue>,
    ) -> Self {
        let message = openclaw_proxy_core::escape::truncated_to(message, MESSAGE_LIMIT);
        let body = ErrorMessage {
            jsonrpc: "2.0",
            id,
            error: ErrorBody {
                code: code.0,
                message: &message,
                data,
            },
        };
        Self {
            status: StatusCode::OK,
            message: serde_json::to_vec(&body).unwrap_or_default(),
        }
    }

    /// The answer as one JSON response.
    pub fn into_response(self) -> Response {
        json_response(self.status, self.message)
    }
}

impl From<Rejected> for Answer {
    fn from(rejected: Rejected) -> Self {
        let mut answer = Self::error(
            rejected.id.as_ref(),
            rejected.code,
            &rejected.message,
            rejected.data.as_deref(),
        );
        answer.status = rejected.status;
        answer
    }
}

impl IntoResponse for Rejected {
    fn into_response(self) -> Response {
        Answer::from(self).into_response()
    }
}

/// A JSON response.
pub fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from(body),
    )
        .into_response()
}

/// An event stream.
pub fn sse_response(body: Body) -> Response {
    sse::response(body)
}

/// A task that is aborted when this handle is dropped: a call whose client
/// went away.
pub struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What a call's task ended with, as an answer to `id`; a task that ended
/// without one (it panicked) is an internal error.
pub fn finished(joined: Result<Answer, tokio::task::JoinError>, id: &RequestId) -> Answer {
    joined.unwrap_or_else(|error| {
        Answer::error(
            Some(id),
            ErrorCode::INTERNAL_ERROR,
            &format!("the call ended: {error}"),
            None,
        )
    })
}

/// The JSON-RPC request that asks the client what the app asks, with the
/// id its answer is routed back by ([`client_request_id`]) and the params
/// as the app wrote them.
pub fn request_message(ask: &ClientAsk) -> Vec<u8> {
    #[derive(Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: String,
        method: &'static str,
        params: &'a RawValue,
    }
    // The core queues only params that read as a JSON object.
    let params: Option<&RawValue> = serde_json::from_str(&ask.params_json).ok();
    serde_json::to_vec(&Request {
        jsonrpc: "2.0",
        id: client_request_id(&ask.request_id, &ask.id),
        method: ask.method.as_str(),
        params: params.unwrap_or(RawValue::NULL),
    })
    .unwrap_or_default()
}

/// A JSON-RPC notification with `params`.
pub fn notification(method: &str, params: impl Serialize) -> Vec<u8> {
    #[derive(Serialize)]
    struct Notification<'a, P> {
        jsonrpc: &'static str,
        method: &'a str,
        params: P,
    }
    serde_json::to_vec(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
    .unwrap_or_default()
}

/// The `notifications/progress` of one report, for the client's `token`.
fn progress_message(token: &ProgressToken, report: ToolProgress) -> Vec<u8> {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Params<'a> {
        progress_token: &'a ProgressToken,
        progress: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    }
    notification(
        "notifications/progress",
        Params {
            progress_token: token,
            progress: report.progress,
            total: report.total,
            message: (!report.message.is_empty()).then_some(report.message),
        },
    )
}

/// The `notifications/message` of one app log record: its level, logger
/// and data (JSON as the app wrote it; text that is not JSON as a string).
fn log_message(record: Log) -> Vec<u8> {
    #[derive(Serialize)]
    struct Params<'a> {
        level: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        logger: Option<&'a str>,
        data: &'a RawValue,
    }
    let level = LogLevel::parse(&record.level).unwrap_or(LogLevel::Info);
    let text;
    let data: &RawValue = match serde_json::from_str::<&RawValue>(&record.data_json) {
        Ok(raw) => raw,
        Err(_) => {
            text = serde_json::value::to_raw_value(&record.data_json)
                .unwrap_or_else(|_| RawValue::NULL.to_owned());
            &text
        }
    };
    notification(
        "notifications/message",
        Params {
            level: level.as_str(),
            logger: (!record.logger.is_empty()).then_some(record.logger.as_str()),
            data,
        },
    )
}

/// The message of one event of a call: `notifications/progress` for a
/// report (none when the client gave no `token`), `notifications/message`
/// for a log record, the JSON-RPC request for an app's request.
pub fn event_message(token: Option<&ProgressToken>, event: CallEvent) -> Option<Vec<u8>> {
    match event {
        CallEvent::Progress(report) => Some(progress_message(token?, report)),
        CallEvent::Log(record) => Some(log_message(record)),
        CallEvent::Ask(ask) => Some(request_message(&ask)),
    }
}

/// What the client of a call wants to hear before the answer.
pub struct Listening {
    /// Its `progressToken`, for progress reports.
    pub token: Option<ProgressToken>,
    /// The least severe log record it wants.
    pub log_level: Option<LogLevel>,
    /// Which requests of the app it can be sent.
    pub askable: Askable,
}

/// Logs a call whose reports were thinned, once per call and not per
/// report: a flood is one event.
pub fn log_thinned(session_id: &str, named: &str, thinned: u64) {
    if thinned > 0 {
        tracing::info!(
            session = openclaw_proxy_core::escape::Outside::session(session_id).field(),
            tool = openclaw_proxy_core::escape::Outside::new(named).field(),
            thinned,
            "progress thinned: the client read slower than the app reported; the latest report and the result were delivered"
        );
    }
}

/// Answers a call whose client may hear of it before the answer: JSON when
/// the answer comes first, an event stream once a notification or request
/// does. `running` starts the call, its events going to the sink it is
/// given; `named` names it in the log.
pub async fn answer_with_progress<F, Fut>(
    id: RequestId,
    session_id: std::sync::Arc<str>,
    named: String,
    running: F,
    listening: Listening,
) -> Response
where
    F: FnOnce(openclaw_proxy_core::progress::ProgressSink) -> Fut,
    Fut: Future<Output = Answer> + Send + 'static,
{
    let Listening {
        token,
        log_level,
        askable,
    } = listening;
    let (sink, mut reports) = openclaw_proxy_core::progress::call_channel(log_level, askable);
    let mut running = Box::pin(running(sink));
    let first = tokio::select! {
        biased;
        answer = &mut running => {
            let mut body = Vec::new();
            while let Some(event) = reports.try_recv_event() {
                if let Some(message) = event_message(token.as_ref(), event) {
                    sse::push_json_event(&mut body, &message);
                }
            }
            log_thinned(&session_id, &named, reports.thinned());
            if body.is_empty() {
                return answer.into_response();
            }
            sse::push_json_event(&mut body, &answer.message);
            return sse_response(Body::from(body));
        }
        Some(first) = first_notification(&mut reports, token.as_ref()) => first,
    };
    // Run on, whether or not the client reads, until the client goes away;
    // the core thins the reports a slow client leaves waiting.
    let running = AbortOnDrop(tokio::spawn(running.in_current_span()));
    let rest = Streaming {
        reports,
        running,
        token,
        id,
        session_id,
        named,
        finished: None,
    };
    let first = sse::json_event(&first);
    let first = futures_util::stream::once(std::future::ready(Ok::<_, Infallible>(first)));
    let rest = futures_util::stream::unfold(Some(rest), |rest| async move {
        let mut rest = rest?;
        match rest.next().await {
            Next::Event(event) => Some((Ok(event), Some(rest))),
            Next::Last(event) => Some((Ok(event), None)),
        }
    });
    sse_response(Body::from_stream(futures_util::StreamExt::chain(
        first, rest,
    )))
}

/// A streaming call after its first notification.
struct Streaming {
    reports: ProgressReceiver,
    running: AbortOnDrop<Answer>,
    token: Option<ProgressToken>,
    id: RequestId,
    session_id: std::sync::Arc<str>,
    named: String,
    /// The answer, once the call's task has ended.
    finished: Option<Answer>,
}

enum Next {
    Event(Bytes),
    Last(Bytes),
}

impl Streaming {
    fn event(&self, event: CallEvent) -> Option<Bytes> {
        event_message(self.token.as_ref(), event).map(|message| sse::json_event(&message))
    }

    /// The next event: a notification, a keep-alive comment after
    /// [`sse::KEEP_ALIVE`] without one, or the answer, last (after every
    /// report that came before it).
    async fn next(&mut self) -> Next {
        let keep_alive = || Next::Event(sse::KEEP_ALIVE_COMMENT);
        if self.finished.is_none() {
            tokio::select! {
                biased;
                event = self.reports.recv_event() => {
                    if let Some(event) = event {
                        return Next::Event(self.event(event).unwrap_or_default());
                    }
                    // No report can come any more: the answer is next.
                }
                joined = &mut self.running.0 => {
                    self.finished = Some(finished(joined, &self.id));
                }
                () = tokio::time::sleep(sse::KEEP_ALIVE) => return keep_alive(),
            }
        }
        while let Some(event) = self.reports.try_recv_event() {
            if let Some(event) = self.event(event) {
                return Next::Event(event);
            }
        }
        let answer = match self.finished.take() {
            Some(answer) => answer,
            None => tokio::select! {
                joined = &mut self.running.0 => finished(joined, &self.id),
                () = tokio::time::sleep(sse::KEEP_ALIVE) => return keep_alive(),
            },
        };
        log_thinned(&self.session_id, &self.named, self.reports.thinned());
        Next::Last(sse::json_event(&answer.message))
    }
}

/// The first notification of a call: the first event that makes one (a
/// report without a token makes none); `None` once no event can come.
async fn first_notification(
    reports: &mut ProgressReceiver,
    token: Option<&ProgressToken>,
) -> Option<Vec<u8>> {
    loop {
        if let Some(message) = event_message(token, reports.recv_event().await?) {
            return Some(message);
        }
    }
}

/// The JSON-RPC notification of a change in a session, for every transport
/// that carries changes; on a `subscriptions/listen` stream its `_meta`
/// names the `subscription` (the listen request's id).
pub fn change_message(
    change: &openclaw_proxy_core::SessionEvent,
    subscription: Option<&RequestId>,
) -> Vec<u8> {
    use openclaw_proxy_core::SessionEvent;
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
        meta: Option<SubscriptionMeta<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        uri: Option<&'a str>,
    }
    let (method, uri) = match change {
        SessionEvent::ResourceUpdated(uri) => ("notifications/resources/updated", Some(&**uri)),
        SessionEvent::ToolsChanged => ("notifications/tools/list_changed", None),
        SessionEvent::ResourcesChanged => ("notifications/resources/list_changed", None),
        SessionEvent::PromptsChanged => ("notifications/prompts/list_changed", None),
    };
    let meta = subscription.map(|id| SubscriptionMeta { id });
    if meta.is_none() && uri.is_none() {
        #[derive(Serialize)]
        struct Bare<'a> {
            jsonrpc: &'static str,
            method: &'a str,
        }
        return serde_json::to_vec(&Bare {
            jsonrpc: "2.0",
            method,
        })
        .unwrap_or_default();
    }
    notification(method, Params { meta, uri })
}

/// The `_meta` that ties a notification to its `subscriptions/listen`.
#[derive(Serialize)]
pub struct SubscriptionMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
    pub id: &'a RequestId,
}
