//! One round trip over a bridge attached here: the message to the app and
//! its answer, within the call's timeout (paused while the app asks its
//! client) and the session's call limit, with the bookkeeping undone
//! however the call ends. Tool calls ([`super::invoke`]) and the requests
//! the app answers ([`super::request`]) both go this way.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::Instrument;

use super::{Hub, Local};
use crate::bridge::{Bridge, proxy};
use crate::directory::SessionRecord;
use crate::escape::{Outside, short_request};
use crate::metrics::{Answered, CallOutcome, Transport};
use crate::outcome::{BridgeEnd, InvokeError};
use crate::proto::{self, proxy_message};
use crate::trace;

impl Hub {
    /// Everything a round trip needs before its first wait: the bridge
    /// attached here (`found`, when the caller has just looked it up), the
    /// request id, the span, and the message for the app (`build` makes it
    /// from the request id and the `traceparent` the round trip hands on).
    pub(super) fn prepare<'a>(
        &self,
        record: &'a SessionRecord,
        found: Option<(Arc<Local>, Arc<Bridge>)>,
        what: &'a str,
        timeout: Duration,
        trace_parent: &str,
        build: impl FnOnce(&str, String) -> proxy_message::Kind,
    ) -> Result<(Prepared<'a>, Box<proto::ProxyMessage>), InvokeError> {
        let Some((local, bridge)) = found.or_else(|| self.inner.local_bridge(&record.id)) else {
            return Err(InvokeError::NotConnected);
        };
        if bridge.end_reason().is_some() {
            // Ended and about to be detached: for a call from another node,
            // the bridge is elsewhere now.
            return Err(InvokeError::NotConnected);
        }
        let request_id = record.next_request_id();
        let span = round_trip_span(&record.id, what, bridge.origin().transport);
        let kind = build(&request_id, trace::hand_on(&span, trace_parent));
        let message = self.bounded_message(kind, what)?;
        let prepared = Prepared {
            record,
            what,
            timeout,
            local,
            bridge,
            request_id,
            span,
        };
        Ok((prepared, message))
    }

    /// One message to the session's bridge attached here and the app's
    /// answer to it (`register` says where it goes), within the timeout and
    /// the session's call limit; the app is told to stop when the caller
    /// gives up or the time is up.
    pub(super) async fn round_trip<A, R>(
        &self,
        prepared: &Prepared<'_>,
        message: Box<proto::ProxyMessage>,
        register: R,
    ) -> Result<A, InvokeError>
    where
        A: Answered,
        R: FnOnce(&Bridge, &str) -> Result<oneshot::Receiver<Result<A, InvokeError>>, BridgeEnd>,
    {
        let Prepared {
            record,
            what,
            timeout,
            ref local,
            ref bridge,
            ref request_id,
            ref span,
        } = *prepared;
        self.inner.directory.touch(&record.id);
        // From here on the guard undoes the bookkeeping however the call ends,
        // including when the caller stops waiting.
        let limit = self.inner.config.limits.max_calls_per_session;
        let mut call = CallInFlight::start(self, &record.id, local, bridge, request_id, limit)?;
        let answer = register(bridge, request_id).map_err(InvokeError::BridgeEnded)?;
        // Pinned here and lent: moved into `within_time`, it would be laid
        // out twice in this future's state.
        let work = std::pin::pin!(async {
            bridge
                .send(message)
                .await
                .map_err(InvokeError::BridgeEnded)?;
            answer
                .await
                .unwrap_or(Err(InvokeError::BridgeEnded(BridgeEnd::Disconnected)))
        });
        let outcome = async {
            // Inline, not a function of its own: this future is part of
            // every call's, so it stays small.
            // The first look is at the call's deadline or the client-request
            // timeout, whichever comes first ([`Hub::next_deadline`]).
            let started = Instant::now();
            let mut deadline = started + timeout.min(self.inner.config.client_request_timeout);
            let mut work = work;
            loop {
                if let Ok(outcome) = tokio::time::timeout_at(deadline, work.as_mut()).await {
                    return outcome;
                }
                match self.next_deadline(bridge, request_id, started, timeout) {
                    Some(next) => deadline = next,
                    None => return Err(InvokeError::Timeout(timeout)),
                }
            }
        }
        .instrument(span.clone())
        .await;
        span.record("outcome", CallOutcome::of(&outcome).as_str());
        if let Err(InvokeError::Timeout(limit)) = &outcome {
            call.cancel_reason =
                Some(format!("the call timed out after {} seconds", limit.as_secs_f64()).into());
            tracing::warn!(
                session = Outside::session(&record.id).field(),
                request = short_request(request_id),
                tool = Outside::new(what).field(),
                "tool call timed out"
            );
        } else {
            call.cancel_reason = None;
        }
        drop(call);
        outcome
    }

    /// When a call that started at `started` with `timeout` must be looked
    /// at again, its deadline having passed; `None` when its time is up.
    /// The time it waits for its client does not count: while the app's
    /// request to the client is outstanding the clock is paused, and a
    /// request that waits longer than the client-request timeout is ended
    /// (the app gets an error) and the clock goes on.
    ///
    /// That timeout holds on its own, however much of the call's time is
    /// left: a call not waiting for its client is looked at again at least
    /// once per client-request timeout, so a request that begins between
    /// two looks is seen before its own time is up (its end is then the
    /// next look). No signal from the bridge is needed, and a call costs
    /// one look per client-request timeout (600 s by default).
    fn next_deadline(
        &self,
        bridge: &Bridge,
        request_id: &str,
        started: Instant,
        timeout: Duration,
    ) -> Option<Instant> {
        let now = Instant::now();
        let ask_limit = self.inner.config.client_request_timeout;
        let wait = bridge.client_wait(request_id);
        match wait.since {
            Some(since) if now >= since + ask_limit => {
                bridge.expire_asks(request_id, ask_limit);
                Some(now)
            }
            // Waiting for the client: wake when its time is up, or when the
            // call's would be if the client answered now (then look again).
            Some(since) => {
                let worked = since
                    .saturating_duration_since(started)
                    .saturating_sub(wait.paused);
                let left = timeout.saturating_sub(worked).max(LOOK_AGAIN_AT_LEAST);
                Some((since + ask_limit).min(now + left))
            }
            None => Some(started + timeout + wait.paused)
                .filter(|deadline| now < *deadline)
                .map(|deadline| deadline.min(now + ask_limit)),
        }
    }

    /// A message for the app, boxed at once, as the bridge's queue carries
    /// it: the call's future then holds a pointer, not the message, across
    /// its awaits. A message too large for the bridge fails this call only;
    /// the bridge stays up.
    fn bounded_message(
        &self,
        kind: proxy_message::Kind,
        what: &str,
    ) -> Result<Box<proto::ProxyMessage>, InvokeError> {
        let message = Box::new(proxy(kind));
        let limit = self.inner.config.max_message_bytes;
        let bytes = prost::Message::encoded_len(&*message);
        if limit > 0 && bytes > limit {
            return Err(InvokeError::TooLarge {
                tool: what.to_owned(),
                bytes,
                limit,
            });
        }
        Ok(message)
    }
}

/// While a call waits for its client, how often at most its clock is looked
/// at again (the client may answer any moment, and the call's remaining
/// time starts then).
const LOOK_AGAIN_AT_LEAST: Duration = Duration::from_secs(1);

/// A round trip, prepared: the bridge attached here and what the call's
/// bookkeeping needs.
pub(super) struct Prepared<'a> {
    record: &'a SessionRecord,
    /// The tool called or the method requested, for messages and spans.
    what: &'a str,
    timeout: Duration,
    local: Arc<Local>,
    bridge: Arc<Bridge>,
    request_id: String,
    span: tracing::Span,
}

/// The span of one bridge round trip (when traces are exported).
pub(super) fn round_trip_span(session_id: &str, tool: &str, transport: Transport) -> tracing::Span {
    trace::span(|| {
        tracing::info_span!(
            "bridge_round_trip",
            otel.kind = "client",
            session = Outside::session(session_id).field(),
            tool = Outside::new(tool).field(),
            transport = transport.as_str(),
            outcome = tracing::field::Empty,
        )
    })
}
/// Undoes a call's bookkeeping when the call ends, however it ends; a call
/// whose caller stopped waiting, or that timed out, is cancelled in the app.
struct CallInFlight<'a> {
    hub: &'a Hub,
    session_id: &'a str,
    local: &'a Local,
    bridge: &'a Bridge,
    request_id: &'a str,
    /// Why the app should stop working on the call when it ends; `None`
    /// once it was answered (or failed in a way the app knows of).
    cancel_reason: Option<std::borrow::Cow<'static, str>>,
}

impl<'a> CallInFlight<'a> {
    fn start(
        hub: &'a Hub,
        session_id: &'a str,
        local: &'a Local,
        bridge: &'a Bridge,
        request_id: &'a str,
        limit: u32,
    ) -> Result<Self, InvokeError> {
        {
            let mut state = local.state();
            if limit > 0 && state.calls_in_flight >= limit {
                return Err(InvokeError::TooManyCalls { limit });
            }
            state.calls_in_flight += 1;
        }
        Ok(Self {
            hub,
            session_id,
            local,
            bridge,
            request_id,
            cancel_reason: Some("the MCP client cancelled the call or went away".into()),
        })
    }
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        match self.cancel_reason.take() {
            Some(reason) => self.bridge.cancel(self.request_id, &reason),
            None => self.bridge.forget(self.request_id),
        }
        let idle = {
            let mut state = self.local.state();
            state.calls_in_flight = state.calls_in_flight.saturating_sub(1);
            state.bridge.is_none() && state.calls_in_flight == 0
        };
        self.hub.inner.directory.touch(self.session_id);
        if idle {
            self.hub.inner.forget_if_unused(self.session_id);
        }
    }
}
