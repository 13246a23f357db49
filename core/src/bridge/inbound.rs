//! What the app sends on its bridge, dispatched: answers handed to the
//! calls waiting for them (a tool result or an MCP result, each only to the
//! kind of call that expects it), progress and log records queued for their
//! callers, changes returned for the bridge's owner, and a notice to the app for
//! anything it sent that could not be used.

use super::{Bridge, SessionChange, Unmatched, notice};
use crate::escape::{Outside, short_request};
use crate::metrics::DropReason;
use crate::outcome::{InvokeError, McpReply, Reply, ToolOutcome};
use crate::progress::{LogLevel, Logged};
use crate::proto::{self, app_message, mcp_result};

impl Bridge {
    /// Dispatches one well-formed message from the app; a change of its
    /// session is returned for the bridge's owner.
    pub(super) fn handle(&self, message: proto::AppMessage) -> Option<SessionChange> {
        match message.kind {
            Some(app_message::Kind::Result(result)) => {
                let request_id = result.request_id;
                match ToolOutcome::from_app(result.ok, result.content_json, result.error) {
                    Ok(outcome) => self.answered(request_id, Reply::Tool(outcome)),
                    Err(reason) => {
                        let problem = format!("content_json is not valid JSON: {reason}");
                        self.fail_malformed(request_id, true, &problem);
                    }
                }
            }
            Some(app_message::Kind::McpResult(result)) => {
                let reply = match result.outcome {
                    Some(mcp_result::Outcome::ResultJson(json)) => McpReply::result(json),
                    Some(mcp_result::Outcome::Error(error)) => {
                        McpReply::error(error.code, error.message, error.data_json)
                    }
                    None => Err("mcp_result carries neither a result nor an error".into()),
                };
                match reply {
                    Ok(reply) => self.answered(result.request_id, Reply::Mcp(reply)),
                    Err(problem) => self.fail_malformed(result.request_id, true, &problem),
                }
            }
            Some(app_message::Kind::Log(record)) => self.log(record),
            Some(app_message::Kind::ClientRequest(request)) => self.ask(request),
            Some(app_message::Kind::ResourceUpdated(updated)) => {
                return Some(SessionChange::ResourceUpdated(updated.uri));
            }
            Some(app_message::Kind::Progress(report)) => {
                let request_id = report.request_id.clone();
                if !self.progress(report) && !self.was_cancelled(&request_id) {
                    self.metrics.dropped(DropReason::UnknownRequest);
                    tracing::debug!(
                        session = Outside::session(&self.session_id).field(),
                        request = Outside::new(&request_id).field(),
                        "progress for no waiting call ignored"
                    );
                    self.notify(notice(
                        format!(
                            "no call is waiting for request id {}: progress ignored",
                            crate::escape::quoted(&request_id)
                        ),
                        request_id,
                    ));
                }
            }
            Some(app_message::Kind::Pong(_)) => {}
            Some(app_message::Kind::UpdateTools(update)) => {
                return Some(SessionChange::Declarations(Box::new(update)));
            }
            Some(app_message::Kind::Hello(_)) => self.notify(notice(
                format!(
                    "this bridge is already attached to session {}; hello is only valid as the first message",
                    self.session_id
                ),
                String::new(),
            )),
            None => self.notify(notice(
                "empty message: set one of hello, result, progress or pong".into(),
                String::new(),
            )),
        }
        None
    }

    /// Hands an answer to the call it names; tells the app when none waits
    /// for it (a cancelled call's late answer is dropped quietly).
    fn answered(&self, request_id: String, reply: Reply) {
        // The answer of a waiting call (nearly every one) formats nothing.
        let message = match self.complete(&request_id, reply) {
            Ok(()) => return,
            Err(Unmatched::WrongKind) => {
                self.metrics.dropped(DropReason::Malformed);
                format!(
                    "the call with request id {} failed: answer invoke_tool with invoke_result and mcp_request with mcp_result",
                    crate::escape::quoted(&request_id)
                )
            }
            Err(Unmatched::NoCall) if self.was_cancelled(&request_id) => {
                self.metrics.dropped(DropReason::Late);
                tracing::debug!(
                    session = Outside::session(&self.session_id).field(),
                    request = short_request(&request_id),
                    "result of a cancelled call dropped"
                );
                return;
            }
            Err(Unmatched::NoCall) => {
                self.metrics.dropped(DropReason::UnknownRequest);
                if let Some(suppressed) = self.warnings.allow() {
                    tracing::warn!(
                        session = Outside::session(&self.session_id).field(),
                        request = short_request(&request_id),
                        suppressed,
                        "result for no waiting call ignored"
                    );
                }
                format!(
                    "no call is waiting for request id {}: it already timed out, was cancelled, or never existed; the result was ignored",
                    crate::escape::quoted(&request_id)
                )
            }
        };
        self.notify(notice(message, request_id));
    }

    /// A log record of a call in flight: queued for its caller when the
    /// caller asked for its level, dropped (and counted) otherwise.
    fn log(&self, record: proto::Log) {
        let Some(level) = LogLevel::parse(&record.level) else {
            let message = format!(
                "log record for request id {} has level {}: use debug, info, notice, warning, error, critical, alert or emergency",
                crate::escape::quoted(&record.request_id),
                crate::escape::quoted(&record.level)
            );
            self.metrics.dropped(DropReason::Malformed);
            self.notify(notice(message, record.request_id));
            return;
        };
        let logged = {
            let calls = self.calls();
            match calls.waiting.get(&record.request_id) {
                Some(waiting) => waiting
                    .progress
                    .as_ref()
                    .map_or(Logged::Unwanted, |sink| sink.push_log(level, record)),
                // Late records of a finished call, or of none: not worth a
                // notice each.
                None => Logged::Unwanted,
            }
        };
        self.metrics.app_log(logged);
    }

    /// Fails the call a malformed result or progress report names, and tells
    /// the app what was wrong; the bridge stays up.
    pub(super) fn fail_malformed(&self, request_id: String, result: bool, problem: &str) {
        self.metrics.dropped(DropReason::Malformed);
        let what = if result { "result" } else { "progress report" };
        let failed = self.fail(&request_id, |tool| InvokeError::MalformedAnswer {
            tool: tool.to_owned(),
            what,
            problem: problem.to_owned(),
        });
        if let Some(suppressed) = self.warnings.allow() {
            tracing::warn!(
                session = Outside::session(&self.session_id).field(),
                request = short_request(&request_id),
                failed_call = failed,
                suppressed,
                "malformed {what} from the app"
            );
        }
        tracing::debug!(
            session = Outside::session(&self.session_id).field(),
            request = Outside::new(&request_id).field(),
            problem = Outside::within(problem, crate::escape::TEXT_LIMIT).field(),
            "malformed {what} from the app"
        );
        let message = if failed {
            format!(
                "your {what} for request id {} was malformed and the call failed: {problem}",
                crate::escape::quoted(&request_id)
            )
        } else {
            format!(
                "your {what} for request id {} was malformed, and no call is waiting for that id: {problem}",
                crate::escape::quoted(&request_id)
            )
        };
        self.notify(notice(message, request_id));
    }
}
