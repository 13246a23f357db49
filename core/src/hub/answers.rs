//! Answers of MCP clients to the app's requests (elicitation, sampling,
//! roots), on their way back to the app. A client answers on a request of
//! its own, which may arrive long after the call's stream was opened; it
//! names the request by the id the proxy gave it, which carries the call's
//! request id and the app's id (`{request_id}/{id}`).
//!
//! The answer may reach any node of a cluster. It goes where the app's
//! bridge is: on the node that holds it, to the bridge (or to the
//! confirmation gate, which runs there too, `confirm.rs`); on any other,
//! through the [`RemoteDelivery`](crate::delivery::RemoteDelivery) to the
//! node that holds it, which says what became of it.

use super::{Hub, HubError};
use crate::bridge::{ClientAnswer, Unanswerable};
use crate::delivery::Unrouted;

/// Why a client's answer was not passed on to the app.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// The session is unknown or gone.
    #[error(transparent)]
    Session(#[from] HubError),
    /// The id is not one the proxy gave a request of this session.
    #[error("{0:?} is not the id of a request this session's app sent to the client")]
    ForeignId(String),
    /// The request it answers is no longer waiting.
    #[error(transparent)]
    Unanswerable(#[from] Unanswerable),
    /// No node holds the app's bridge.
    #[error(
        "the app's bridge is not attached to any proxy node; the call this answers ended with it"
    )]
    NotHere,
    /// The node holding the app's bridge could not be reached.
    #[error("the answer could not reach the proxy node holding the app's bridge: {0}")]
    Unavailable(String),
}

/// The id the proxy gives the client for the app's request `id` in the
/// call `request_id`.
pub fn client_request_id(request_id: &str, id: &str) -> String {
    format!("{request_id}/{id}")
}

/// The call's request id and the app's id in an id made by
/// [`client_request_id`] for a request of `session_id`, if it is one.
pub fn parse_client_request_id<'a>(
    session_id: &str,
    minted: &'a str,
) -> Option<(&'a str, &'a str)> {
    let (request_id, id) = minted.split_once('/')?;
    let (session, counter) = request_id.rsplit_once(':')?;
    (session == session_id && !counter.is_empty() && counter.bytes().all(|b| b.is_ascii_digit()))
        .then_some((request_id, id))
}

impl AnswerError {
    /// Whether the answer matched no waiting request (the client's doing:
    /// an id never given, given another session, answered already, or
    /// answering a request or call that ended), rather than failing on its
    /// way to the app.
    pub fn matched_nothing(&self) -> bool {
        match self {
            Self::Session(error) => matches!(error, HubError::UnknownSession(_)),
            Self::ForeignId(_)
            | Self::Unanswerable(Unanswerable::NoCall | Unanswerable::NotOutstanding)
            | Self::NotHere => true,
            Self::Unanswerable(Unanswerable::BridgeEnded) | Self::Unavailable(_) => false,
        }
    }
}

impl Hub {
    /// Passes an MCP client's answer to the app's request it names (an id
    /// made by [`client_request_id`]) on to the app. An answer that matches
    /// no waiting request is counted (`outcome="unmatched"`) on the node
    /// that received it.
    pub async fn answer_client(
        &self,
        session_id: &str,
        minted_id: &str,
        answer: ClientAnswer,
    ) -> Result<(), AnswerError> {
        let passed = self.pass_answer(session_id, minted_id, answer).await;
        if let Err(error) = &passed
            && error.matched_nothing()
        {
            self.inner.metrics.client_answer_unmatched();
        }
        passed
    }

    async fn pass_answer(
        &self,
        session_id: &str,
        minted_id: &str,
        answer: ClientAnswer,
    ) -> Result<(), AnswerError> {
        let record = self.record(session_id).await?;
        let (request_id, id) = parse_client_request_id(&record.id, minted_id).ok_or_else(|| {
            AnswerError::ForeignId(crate::escape::truncated(minted_id).into_owned())
        })?;
        let answer = match self
            .answer_locally(&record.id, request_id, id, answer)
            .await
        {
            Ok(passed) => return Ok(passed?),
            Err(answer) => answer,
        };
        // Held elsewhere: the gate and the app's requests wait there.
        match self
            .inner
            .remote
            .answer_client(&record.id, request_id, id, answer)
            .await
        {
            Ok(passed) => Ok(passed?),
            Err(Unrouted::NoHolder) => Err(AnswerError::NotHere),
            Err(Unrouted::Unavailable(why)) => Err(AnswerError::Unavailable(why)),
        }
    }

    /// Passes an answer to request `id` of the call `request_id` on to the
    /// confirmation gate or the bridge attached here, never further: for an
    /// answer another node received.
    pub async fn answer_client_here(
        &self,
        session_id: &str,
        request_id: &str,
        id: &str,
        answer: ClientAnswer,
    ) -> Result<(), Unanswerable> {
        self.answer_locally(session_id, request_id, id, answer)
            .await
            .unwrap_or(Err(Unanswerable::BridgeEnded))
    }

    /// The answer passed to the gate or the bridge here; given back when
    /// neither is here.
    async fn answer_locally(
        &self,
        session_id: &str,
        request_id: &str,
        id: &str,
        answer: ClientAnswer,
    ) -> Result<Result<(), Unanswerable>, ClientAnswer> {
        // A confirmation the proxy asked for itself waits on the node that
        // holds the bridge, as the app's own requests do.
        let answer = match self.inner.gates.answer(request_id, id, answer) {
            Ok(Ok(())) => return Ok(Ok(())),
            Ok(Err(_)) => return Ok(Err(Unanswerable::NoCall)),
            Err(answer) => answer,
        };
        let Some((_, bridge)) = self.inner.local_bridge(session_id) else {
            return Err(answer);
        };
        self.inner.directory.touch(session_id);
        Ok(bridge.answer_ask(request_id, id, answer).await)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::{App, config, hub, session, spawn_call};
    use super::*;
    use crate::asking::Askable;
    use crate::call::CallContext;
    use crate::outcome::InvokeError;
    use crate::progress::{CallEvent, ProgressReceiver, call_channel};
    use crate::proto::client_response::Outcome;

    /// A call of `echo` whose caller can be asked anything; its events.
    fn asking_call(
        hub: &Hub,
        session_id: &str,
    ) -> (
        tokio::task::JoinHandle<Result<crate::ToolOutcome, InvokeError>>,
        ProgressReceiver,
    ) {
        let (sink, events) = call_channel(None, Askable::Any);
        let (hub, session_id) = (hub.clone(), session_id.to_owned());
        let call = tokio::spawn(async move {
            let context = CallContext {
                progress: Some(sink),
                ..CallContext::default()
            };
            hub.invoke_json(&session_id, "echo", "{}".into(), context)
                .await
        });
        (call, events)
    }

    fn pending(hub: &Hub) -> String {
        let text = hub.metrics().render(0, None);
        text.lines()
            .find(|line| line.starts_with("openclaw_proxy_client_requests_pending "))
            .unwrap_or_default()
            .to_owned()
    }

    /// The count of answers that matched no waiting request.
    fn unmatched(hub: &Hub) -> String {
        let text = hub.metrics().render(0, None);
        text.lines()
            .find(|line| line.contains(r#"outcome="unmatched""#))
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_question_pauses_the_calls_clock_and_its_answer_reaches_the_app() {
        let hub = hub();
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let (call, mut events) = asking_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.ask(&invoke.request_id, "q/1", "elicitation/create")
            .await;
        let Some(CallEvent::Ask(ask)) = events.recv_event().await else {
            panic!("the caller is asked");
        };
        assert_eq!(
            (ask.id.as_str(), ask.method.as_str()),
            ("q/1", "elicitation/create")
        );
        assert_eq!(pending(&hub), "openclaw_proxy_client_requests_pending 1");
        // Far past the tool's timeout: the clock is paused while the user
        // thinks.
        tokio::time::advance(hub.config().tool_timeout * 5).await;
        tokio::task::yield_now().await;
        assert!(
            !call.is_finished(),
            "a call waiting for its client does not time out"
        );
        let minted = client_request_id(&ask.request_id, &ask.id);
        let answer = ClientAnswer::Result(r#"{"action":"accept","n":1e400}"#.into());
        hub.answer_client(&id, &minted, answer)
            .await
            .expect("passed on");
        let response = app.next_client_response().await;
        assert_eq!(
            (response.request_id.as_str(), response.id.as_str()),
            (invoke.request_id.as_str(), "q/1")
        );
        assert_eq!(
            response.outcome,
            Some(Outcome::ResultJson(
                r#"{"action":"accept","n":1e400}"#.into()
            ))
        );
        // Twice, from another session, or made up: refused, naming why.
        let again = ClientAnswer::Result("{}".into());
        let twice = hub.answer_client(&id, &minted, again).await;
        assert!(
            matches!(
                twice,
                Err(AnswerError::Unanswerable(Unanswerable::NotOutstanding))
            ),
            "{twice:?}"
        );
        let other = session(&hub).await;
        let foreign = hub
            .answer_client(&other, &minted, ClientAnswer::Result("{}".into()))
            .await;
        assert!(
            matches!(foreign, Err(AnswerError::ForeignId(_))),
            "{foreign:?}"
        );
        assert_eq!(pending(&hub), "openclaw_proxy_client_requests_pending 0");
        assert_eq!(
            unmatched(&hub),
            r#"openclaw_proxy_client_requests_total{method="other",outcome="unmatched"} 2"#
        );
        // The clock runs again: the rest of the call's time, then it is up.
        tokio::time::advance(hub.config().tool_timeout).await;
        let error = call.await.expect("join").expect_err("timed out");
        assert!(matches!(error, InvokeError::Timeout(_)), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_unanswered_question_expires_and_refusals_say_why() {
        let hub = Hub::new(crate::CoreConfig {
            client_request_timeout: Duration::from_secs(30),
            max_client_requests_per_call: 2,
            ..config()
        });
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let (call, _events) = asking_call(&hub, &id);
        let invoke = app.next_invoke().await;
        let request_id = invoke.request_id.as_str();
        app.ask(request_id, "a", "sampling/createMessage").await;
        app.ask(request_id, "a", "roots/list").await;
        app.ask(request_id, "b", "tools/call").await;
        app.ask(request_id, "b", "roots/list").await;
        app.ask(request_id, "c", "roots/list").await;
        let mut refusals = Vec::new();
        for _ in 0..3 {
            let response = app.next_client_response().await;
            let Some(Outcome::Error(error)) = response.outcome else {
                panic!("refused: {response:?}");
            };
            refusals.push((response.id, error.message));
        }
        assert!(refusals[0].1.contains("already waiting"), "{refusals:?}");
        assert!(
            refusals[1]
                .1
                .contains("elicitation/create, sampling/createMessage or roots/list"),
            "{refusals:?}"
        );
        assert!(
            refusals[2].1.contains("already has 2 requests"),
            "{refusals:?}"
        );
        // Nobody answers: both requests end after the client-request timeout.
        tokio::time::advance(Duration::from_secs(30)).await;
        for _ in 0..2 {
            let response = app.next_client_response().await;
            let Some(Outcome::Error(error)) = response.outcome else {
                panic!("expired: {response:?}");
            };
            assert!(
                error.message.contains("did not answer"),
                "{}",
                error.message
            );
        }
        assert_eq!(pending(&hub), "openclaw_proxy_client_requests_pending 0");
        app.answer(request_id, serde_json::json!("done")).await;
        assert!(
            call.await.expect("join").is_ok(),
            "the call goes on and ends"
        );

        // A caller that cannot be asked: the app hears so at once.
        let call = spawn_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.ask(&invoke.request_id, "x", "elicitation/create").await;
        let response = app.next_client_response().await;
        let Some(Outcome::Error(error)) = response.outcome else {
            panic!("refused: {response:?}");
        };
        assert!(
            error.message.contains("cannot be sent elicitation/create"),
            "{}",
            error.message
        );
        app.answer(&invoke.request_id, serde_json::json!(1)).await;
        assert!(call.await.expect("join").is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_its_caller_gives_up_on_ends_its_questions_telling_the_app() {
        let hub = hub();
        let id = session(&hub).await;
        let mut app = App::attach(&hub, &id).await;
        let (call, mut events) = asking_call(&hub, &id);
        let invoke = app.next_invoke().await;
        app.ask(&invoke.request_id, "q/1", "roots/list").await;
        let Some(CallEvent::Ask(ask)) = events.recv_event().await else {
            panic!("the caller is asked");
        };
        assert_eq!(pending(&hub), "openclaw_proxy_client_requests_pending 1");
        // The caller stops waiting (its client cancelled or went away).
        call.abort();
        let _ = call.await;
        let response = app.next_client_response().await;
        assert_eq!(
            (response.request_id.as_str(), response.id.as_str()),
            (invoke.request_id.as_str(), "q/1")
        );
        let Some(Outcome::Error(error)) = response.outcome else {
            panic!("an error: {response:?}");
        };
        assert!(
            error
                .message
                .contains("the call ended before the MCP client answered roots/list")
                && error.message.contains("cancelled the call or went away"),
            "{}",
            error.message
        );
        let Ok(crate::proto::proxy_message::Kind::Cancel(cancel)) = app.next().await else {
            panic!("the call is cancelled after its question");
        };
        assert_eq!(cancel.request_id, invoke.request_id);
        assert_eq!(pending(&hub), "openclaw_proxy_client_requests_pending 0");
        // Its answer now comes too late: refused and counted.
        let minted = client_request_id(&ask.request_id, &ask.id);
        let late = hub
            .answer_client(&id, &minted, ClientAnswer::Result("{}".into()))
            .await;
        assert!(
            matches!(late, Err(AnswerError::Unanswerable(Unanswerable::NoCall))),
            "{late:?}"
        );
        assert_eq!(
            unmatched(&hub),
            r#"openclaw_proxy_client_requests_total{method="other",outcome="unmatched"} 1"#
        );
    }

    #[test]
    fn minted_ids_name_their_call_and_session() {
        let minted = client_request_id("s-1:42", "ask/1");
        assert_eq!(
            parse_client_request_id("s-1", &minted),
            Some(("s-1:42", "ask/1"))
        );
        assert_eq!(parse_client_request_id("s-2", &minted), None);
        assert_eq!(parse_client_request_id("s-1", "s-1:x/ask"), None);
        assert_eq!(parse_client_request_id("s-1", "plain"), None);
    }
}
