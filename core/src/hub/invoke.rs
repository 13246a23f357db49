//! Invocation: a tool call sent to the session's bridge, here (one
//! [`round_trip`](super::round_trip), within the tool's timeout and the
//! session's call limit) or on another process through the
//! [`RemoteDelivery`](crate::delivery::RemoteDelivery); counted in the
//! metrics and the audit log however it ends.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};
use tracing::Instrument;

use super::round_trip::round_trip_span;
use super::{Hub, HubError, Local};
use crate::audit;
use crate::bridge::Bridge;
use crate::call::CallContext;
use crate::caller::OAuthIdentity;
use crate::delivery::{Asked, FromReply, RemoteCall};
use crate::directory::SessionRecord;
use crate::escape::Outside;
use crate::metrics::{Answered, CallOutcome, Metrics, Transport};
use crate::outcome::{InvokeError, ToolOutcome};
use crate::proto::{self, proxy_message};
use crate::trace;

impl Hub {
    /// Sends a tool call with these arguments to the session's app, with no
    /// context, and waits for its answer (see [`Hub::invoke_json`]).
    pub async fn invoke(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<ToolOutcome, InvokeError> {
        // Serializing a map of JSON values cannot fail; `{}` would only show a bug.
        let arguments_json = serde_json::to_string(arguments).unwrap_or_else(|_| "{}".into());
        self.invoke_json(
            session_id,
            tool_name,
            arguments_json,
            CallContext::default(),
        )
        .await
    }

    /// Sends a tool call to the session's app and waits for its answer, with
    /// the request's context for the app and, when `context.progress` is set,
    /// the app's progress reports for this call, every one queued before the
    /// answer is returned. The arguments are the JSON text of an object,
    /// passed to the app exactly as given (the caller checked that it is an
    /// object): no number is rewritten on the way.
    ///
    /// A caller that stops waiting (drops the future) cancels the call: the
    /// app is told to stop working on it.
    pub async fn invoke_json(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
    ) -> Result<ToolOutcome, InvokeError> {
        let span = trace::span(|| {
            tracing::info_span!(
                "invoke_tool",
                session = Outside::session(session_id).field(),
                tool = Outside::new(tool_name).field(),
                outcome = tracing::field::Empty,
            )
        });
        // Counts the call and writes its audit event however it ends; a
        // caller that stops waiting drops it unfinished: `cancelled`.
        let mut counted = CallCounted::new(
            &self.inner.metrics,
            session_id,
            None,
            tool_name,
            context.origin,
            context.caller.identity.clone(),
        );
        let outcome = self
            .invoke_routed(session_id, tool_name, arguments_json, context, &mut counted)
            .instrument(span.clone())
            .await;
        let label = counted.finish(&outcome);
        span.record("outcome", label.as_str());
        outcome
    }

    async fn invoke_routed(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
        counted: &mut CallCounted<'_>,
    ) -> Result<ToolOutcome, InvokeError> {
        let record = self.record_for_call(session_id).await?;
        let (context, confirmation) = crate::admit::admit(&record, tool_name, context)?;
        let gated = confirmation.is_some();
        // Boxed, holding the call's arguments and context while it waits
        // (only a pointer is held across the wait here): the gate is no
        // part of the future of calls that have none. It runs where the
        // bridge is: a call for a bridge elsewhere is asked about there. A
        // single node asks even without a bridge (there is no elsewhere),
        // so a client that cannot be asked hears that first.
        // A call without a gate (nearly every one) looks its bridge up once.
        let (arguments_json, context, found) = match confirmation {
            None => (arguments_json, context, self.inner.local_bridge(&record.id)),
            Some(message) => {
                let bridge_here = self.inner.local_bridge(&record.id).is_some()
                    || self.inner.remote.connected().is_none();
                let (arguments_json, context) = if bridge_here {
                    let gate = self.gate(&record, tool_name, message, arguments_json, context);
                    match gate.await {
                        Ok(passed) => passed,
                        Err(stopped) => return Ok(stopped),
                    }
                } else {
                    (arguments_json, context)
                };
                // Again: the bridge may have come or gone while the user
                // was asked.
                (arguments_json, context, self.inner.local_bridge(&record.id))
            }
        };
        if let Some(found) = found {
            counted.transport = found.1.origin().transport;
            return self
                .invoke_local(&record, Some(found), tool_name, arguments_json, context)
                .await;
        }
        // Asked about again where the bridge went, should it have moved
        // while this node asked.
        let call = RemoteCall {
            session_id: &record.id,
            asked: Asked::Tool {
                tool: tool_name,
                arguments_json,
                gated,
            },
            context,
            timeout: self.tool_timeout(&record, tool_name),
        };
        self.deliver_elsewhere(call, tool_name, counted).await
    }

    /// Hands a call for a bridge attached elsewhere to the
    /// [`RemoteDelivery`](crate::delivery::RemoteDelivery), counted as going
    /// over NATS in cluster mode; `what` (the tool or the method) names its
    /// span.
    pub(super) async fn deliver_elsewhere<A: FromReply + Answered>(
        &self,
        call: RemoteCall<'_>,
        what: &str,
        counted: &mut CallCounted<'_>,
    ) -> Result<A, InvokeError> {
        self.inner.directory.touch(call.session_id);
        if self.inner.remote.connected().is_some() {
            counted.transport = Transport::Nats;
            self.inner.metrics.call_forwarded();
        }
        let span = round_trip_span(call.session_id, what, Transport::Nats);
        let outcome = self
            .inner
            .remote
            .deliver(call)
            .instrument(span.clone())
            .await
            .and_then(A::from_reply);
        span.record("outcome", CallOutcome::of(&outcome).as_str());
        outcome
    }

    /// Sends a call that arrived from another node to the bridge attached
    /// here; never forwards it again. `arguments_json` is a JSON object.
    /// `gate`: the confirmation gate is this node's to run (else the
    /// calling node, of a release before, ran it); `gated`: the calling
    /// node saw the call as one to confirm (its tool, or its policy, asks).
    pub async fn invoke_here(
        &self,
        session_id: &str,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
        (gate, gated): (bool, bool),
    ) -> Result<ToolOutcome, InvokeError> {
        let record = self.record_for_call(session_id).await?;
        // Asked here whenever this node's copy of the tool asks (even of a
        // call its caller saw as ungated: the definition changed meanwhile),
        // with the tool's own question; a call only the calling node's
        // policy gates is asked with the proxy's wording.
        let asked = gate
            .then(|| {
                record
                    .confirmation(tool_name)
                    .or_else(|| gated.then(|| "".into()))
            })
            .flatten();
        let (arguments_json, context) = match asked {
            Some(message) => {
                let gate = self.gate(&record, tool_name, message, arguments_json, context);
                match gate.await {
                    Ok(passed) => passed,
                    Err(stopped) => return Ok(stopped),
                }
            }
            _ => (arguments_json, context),
        };
        self.invoke_local(&record, None, tool_name, arguments_json, context)
            .await
    }

    /// The session a call is for, or the call's error.
    pub(super) async fn record_for_call(
        &self,
        session_id: &str,
    ) -> Result<std::sync::Arc<SessionRecord>, InvokeError> {
        match self.record(session_id).await {
            Ok(record) => Ok(record),
            Err(HubError::Unavailable(error)) => Err(InvokeError::Unavailable(error.0)),
            Err(_) => Err(InvokeError::UnknownSession(session_id.to_owned())),
        }
    }

    /// The limit of one call of `tool_name`: the tool's own, capped by the
    /// server's maximum, or the server's default.
    fn tool_timeout(&self, record: &SessionRecord, tool_name: &str) -> Duration {
        let config = &self.inner.config;
        match record.tool(tool_name).map(|tool| tool.timeout_seconds) {
            Some(seconds) if seconds > 0 => {
                Duration::from_secs(u64::from(seconds)).min(config.max_tool_timeout)
            }
            _ => config.tool_timeout,
        }
    }

    async fn invoke_local(
        &self,
        record: &SessionRecord,
        found: Option<(Arc<Local>, Arc<Bridge>)>,
        tool_name: &str,
        arguments_json: String,
        context: CallContext,
    ) -> Result<ToolOutcome, InvokeError> {
        let timeout = self.tool_timeout(record, tool_name);
        let CallContext {
            meta_json,
            client,
            caller,
            progress,
            trace_parent,
            origin: _,
            confirm: _,
            task_id,
        } = context;
        let (prepared, message) = self.prepare(
            record,
            found,
            tool_name,
            timeout,
            &trace_parent,
            |request_id, trace_parent| {
                proxy_message::Kind::Invoke(proto::InvokeTool {
                    session_id: record.id.to_string(),
                    request_id: request_id.to_owned(),
                    tool_name: tool_name.to_owned(),
                    arguments_json,
                    meta_json,
                    client: Some(client),
                    trace_parent,
                    caller: Some(caller.to_proto()),
                    task_id,
                })
            },
        )?;
        drop(trace_parent);
        self.round_trip(&prepared, message, |bridge, request_id| {
            bridge.register(request_id, tool_name, progress)
        })
        .await
    }
}

/// Counts one call in the metrics and writes its audit event when
/// dropped: with its outcome once [`CallCounted::finish`] saw it, else as
/// cancelled (the caller stopped waiting).
pub(super) struct CallCounted<'a> {
    metrics: &'a Metrics,
    started: tokio::time::Instant,
    session_id: &'a str,
    /// The MCP method of a request the app answers; `None` for a tool call.
    method: Option<&'a str>,
    /// The tool called, or what the request names (a URI, a prompt).
    target: &'a str,
    client: Option<std::net::SocketAddr>,
    /// What the OAuth access token that opened the call said, if one did.
    caller: Option<Arc<OAuthIdentity>>,
    /// How the call reached the app; the caller's transport until then.
    pub transport: Transport,
    finished: bool,
}

impl<'a> CallCounted<'a> {
    pub(super) fn new(
        metrics: &'a Metrics,
        session_id: &'a str,
        method: Option<&'a str>,
        target: &'a str,
        origin: audit::Origin,
        caller: Option<Arc<OAuthIdentity>>,
    ) -> Self {
        Self {
            metrics,
            started: tokio::time::Instant::now(),
            session_id,
            method,
            target,
            client: origin.client,
            caller,
            transport: origin.transport,
            finished: false,
        }
    }

    pub(super) fn finish<A: Answered>(&mut self, outcome: &Result<A, InvokeError>) -> CallOutcome {
        self.finished = true;
        let label = CallOutcome::of(outcome);
        self.record(label);
        label
    }

    fn record(&self, outcome: CallOutcome) {
        let ended = audit::Ended {
            outcome,
            duration: self.started.elapsed(),
            client: self.client,
            transport: self.transport,
            caller: self.caller.as_deref(),
        };
        let (session, target) = (Outside::session(self.session_id), Outside::new(self.target));
        match self.method {
            None => {
                self.metrics.tool_call(outcome, ended.duration);
                audit::tool_call(session, target, ended);
            }
            Some(method) => {
                self.metrics
                    .app_request(crate::metrics::McpMethod::of(method), outcome);
                audit::app_request(session, Outside::new(method), target, ended);
            }
        }
    }
}

impl Drop for CallCounted<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.record(CallOutcome::Cancelled);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::{App, config, hub, session, spawn_call};
    use super::*;
    use crate::config::CoreConfig;

    #[tokio::test]
    async fn a_calls_future_stays_small() {
        // Every path's call embeds this future, and futures are moved (a
        // streaming call's is boxed): each kilobyte here is copied per call.
        // It was 2.4 KB while the invocation went by value through it, 1.96
        // KB before the verified caller and the paused clock of calls that
        // ask their client, 2.3 KB with them, 2.56 KB with the MCP task a
        // call runs as and the confirmation an operator's policy may ask
        // (`CallContext::task_id`, `CallContext::confirm`).
        let hub = hub();
        let call = hub.invoke_json("s", "t", String::new(), CallContext::default());
        let size = std::mem::size_of_val(&call);
        assert!(size <= 2560, "Hub::invoke_json's future is {size} bytes");
    }

    #[tokio::test(start_paused = true)]
    async fn a_timed_out_call_is_cancelled_and_its_late_result_ignored() {
        let hub = hub();
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        tokio::time::advance(hub.config().tool_timeout).await;
        let error = call.await.expect("join").expect_err("timed out");
        assert!(matches!(error, InvokeError::Timeout(_)), "{error}");
        match app.next().await {
            Ok(proxy_message::Kind::Cancel(cancel)) => {
                assert_eq!(cancel.request_id, invoke.request_id);
            }
            other => panic!("expected a cancel, got {other:?}"),
        }

        // The late result is dropped quietly; a result nobody asked for is
        // answered with a notice.
        app.answer(&invoke.request_id, json!("too late")).await;
        app.answer("made-up:1", json!("never asked")).await;
        match app.next().await {
            Ok(proxy_message::Kind::Error(notice)) => {
                assert_eq!(notice.request_id, "made-up:1");
                assert!(
                    notice.message.contains("no call is waiting"),
                    "{}",
                    notice.message
                );
            }
            other => panic!("expected a notice, got {other:?}"),
        }
        // The bridge is still up.
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.answer(&invoke.request_id, json!(1)).await;
        assert_eq!(
            call.await.expect("join").expect("answered").content_value(),
            json!(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn calls_past_the_session_limit_are_refused_and_the_rest_go_on() {
        let mut limited = config();
        limited.limits.max_calls_per_session = 2;
        let hub = Hub::new(limited);
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let (first, second) = (spawn_call(&hub, &id), spawn_call(&hub, &id));
        let (one, _two) = (app.next_invoke().await, app.next_invoke().await);
        let error = hub
            .invoke(&id, "echo", &Map::new())
            .await
            .expect_err("third");
        assert!(
            matches!(error, InvokeError::TooManyCalls { limit: 2 }),
            "{error}"
        );
        assert!(
            error
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_CALLS_PER_SESSION"),
            "{error}"
        );
        // One finishes; the next call fits again.
        app.answer(&one.request_id, json!("one")).await;
        let _ = first.await.expect("join").expect("answered");
        let third = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.answer(&invoke.request_id, json!(3)).await;
        assert_eq!(
            third
                .await
                .expect("join")
                .expect("answered")
                .content_value(),
            json!(3)
        );
        drop(second);
    }

    #[tokio::test(start_paused = true)]
    async fn an_invocation_too_large_for_the_bridge_fails_alone() {
        let hub = Hub::new(CoreConfig {
            max_message_bytes: 1024,
            ..config()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let mut big = Map::new();
        big.insert("text".into(), json!("x".repeat(2000)));
        let error = hub.invoke(&id, "echo", &big).await.expect_err("too large");
        assert!(
            matches!(error, InvokeError::TooLarge { limit: 1024, .. }),
            "{error}"
        );
        // The bridge stays up and serves the next call.
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.answer(&invoke.request_id, json!("small")).await;
        assert_eq!(
            call.await.expect("join").expect("answered").content_value(),
            json!("small")
        );
    }
}
