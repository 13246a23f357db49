//! Multi round-trip calls (MCP 2026-07-28): when the app asks the client
//! something during a call, the call is answered with an `input_required`
//! result carrying the app's requests (`inputRequests`, keyed by the app's
//! own ids) and a sealed `requestState`; the client calls again with its
//! answers (`inputResponses`) and that state, and the same app call goes on.
//! The app sees one call, whatever the client's revision. The same rounds
//! serve the other requests the revision lets a server answer this way, a
//! `prompts/get` or a `resources/read` whose app asks the client something
//! while it makes its answer.
//!
//! Between rounds the call waits here, parked: its task keeps running (the
//! app is waiting for answers) and the call's events are kept. A parked
//! call is resumed once; one left parked past the client-request timeout is
//! dropped, which cancels it. Answers the client gives before they are
//! asked for (`inputResponses` on a first call) are kept for the call and
//! answer the app's requests with those keys at once; keys nobody asks for
//! are ignored. A request still unanswered after a retry is asked again.
//!
//! The app's requests are gathered for a moment before the result goes out,
//! so that requests the app sends together reach the client in one result:
//! until the app has sent nothing more for [`QUIET`], and never longer than
//! [`GATHER`] after the first. Requests sent together (`join!` of several
//! asks, frames written back to back) arrive microseconds apart, so a short
//! quiet time catches them; one that comes later is not lost, only asked in
//! the next round. Every round of a call that asks pays the quiet time once,
//! which is nothing beside a person's answer but is most of the round when a
//! client answers by itself (`roots/list`, a scripted client):
//! `docs/performance.md` has the figures.
//!
//! Which node holds a parked call: the one that answered it, whichever node
//! holds the app's bridge (the answers it is given go to the bridge's node
//! from there, as a POSTed answer does). Its `requestState` names that node
//! (every node seals and opens states with the one configured key), so a
//! retry that reaches another node of the cluster is sent there over NATS
//! ([`Hub::resume_elsewhere`]) and resumed as if it had arrived there
//! ([`ResumeHere`]); the node it reached relays the answer. A retry is
//! forwarded at most once.
//!
//! What parked calls may hold is bounded, per session and per node, in
//! number and in bytes of the app's requests they keep
//! ([`crate::config::ParkedLimits`]): an app may ask a megabyte per request,
//! and 512 calls asking four each held two gigabytes for as long as their
//! clients liked. Within the node's bounds no session takes the whole pool:
//! when it is full (in calls or in bytes), a session holding less than the
//! largest holder still parks its call, and that holder's oldest parked call
//! is dropped (cancelled); a session holding as much as anyone is refused,
//! naming the setting. A parked call whose task ended meanwhile (its bridge
//! went away, its app answered) gives its requests' bytes back at once; its
//! answer waits for the retry.
//!
//! A retry whose `requestState` resumes nothing (tampered, expired, another
//! session's or another request's, its call no longer waiting) is answered
//! with `-32602` and counted once, on the node that refused it, as
//! `openclaw_proxy_client_requests_total{method="other",outcome="bad_state"}`.
//!
//! This file holds the parked calls and a call's rounds; `resume.rs` the
//! retries that travel between nodes to reach their call, `wire.rs` the
//! `input_required` result a round answers with.

mod resume;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use openclaw_proxy_core::Hub;
use openclaw_proxy_core::asking::ClientAsk;
use openclaw_proxy_core::bridge::ClientAnswer;
use openclaw_proxy_core::hub::client_request_id;
use openclaw_proxy_core::progress::{CallEvent, ProgressReceiver};
use openclaw_proxy_core::request_state::{RequestState, StateError, StateKey};
use rmcp::model::{ErrorCode, ProgressToken, RequestId};
use serde_json::value::RawValue;
use tokio::time::Instant;

use crate::config::ParkedLimits;
use crate::http::mcp::transport::answer::{
    AbortOnDrop, Answer, event_message, json_response, sse_response,
};
use crate::http::sse;
use wire::{input_requests, input_required};

pub use resume::ResumeHere;

/// The app's requests are gathered until it has sent nothing for this long.
const QUIET: Duration = Duration::from_millis(5);

/// The longest the app's requests are gathered after the first, however
/// busy the call (a stream of progress reports, say).
const GATHER: Duration = Duration::from_millis(20);

/// How often parked calls are looked at for tasks that ended.
const SWEEP: Duration = Duration::from_secs(1);

/// What a call in rounds asked for: its method and what it names (the
/// tool called, the prompt got, the URI read). A retry must name the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Named {
    /// The method: one this node serves, or the one a retry forwarded from
    /// another node names (which resumes nothing unless a call of that
    /// method is parked here).
    pub(crate) method: std::borrow::Cow<'static, str>,
    pub(crate) name: String,
}

impl Named {
    /// A `tools/call` of `tool`.
    pub(crate) fn tool(tool: String) -> Self {
        Self::of(TOOLS_CALL, tool)
    }

    /// A request of `method` naming `name`.
    pub(crate) fn of(method: &'static str, name: String) -> Self {
        Self {
            method: std::borrow::Cow::Borrowed(method),
            name,
        }
    }
}

const TOOLS_CALL: &str = "tools/call";

/// What a call in rounds ended with, written as the answer to whichever
/// request finds it ended: a call is answered to the retry that resumed it,
/// not to the request that started it.
pub type Finished = Box<dyn FnOnce(&RequestId) -> Answer + Send>;

/// The answer to `id` of a call's task; a task that ended without one (it
/// panicked) is an internal error.
fn finished(joined: Result<Finished, tokio::task::JoinError>, id: &RequestId) -> Answer {
    match joined {
        Ok(finished) => finished(id),
        Err(error) => Answer::error(
            Some(id),
            ErrorCode::INTERNAL_ERROR,
            &format!("the call ended: {error}"),
            None,
        ),
    }
}

/// A call waiting for its client's answers.
pub(super) struct Parked {
    session_id: Arc<str>,
    named: Named,
    running: AbortOnDrop<Finished>,
    reports: ProgressReceiver,
    /// The app's requests the client has not answered.
    asks: Vec<ClientAsk>,
    /// Bytes of `asks`, as the bounds count them.
    bytes: usize,
    /// When it was parked, among this node's calls.
    order: u64,
    expires: Instant,
}

/// Bytes of the app's requests a parked call keeps.
fn ask_bytes(asks: &[ClientAsk]) -> usize {
    asks.iter()
        .map(|ask| ask.params_json.len() + ask.id.len() + ask.request_id.len())
        .sum()
}

/// Why a call could not be parked: a bound that names its setting.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParkRefusal {
    #[error(
        "this call's requests to its client come to {bytes} bytes; a session's waiting calls may keep {limit} (OPENCLAW_PROXY_MAX_PARKED_BYTES_PER_SESSION); answer or cancel its other calls first"
    )]
    SessionBytes { bytes: usize, limit: usize },
    #[error(
        "this server holds its limit of calls waiting for their clients ({limit} calls, OPENCLAW_PROXY_MAX_PARKED_CALLS; {bytes} bytes, OPENCLAW_PROXY_MAX_PARKED_BYTES) and this session already holds its share; try again later"
    )]
    Full { limit: usize, bytes: usize },
}

/// The calls parked on this node.
#[derive(Debug)]
pub struct Rounds {
    parked: Mutex<HashMap<u64, Parked>>,
    next: AtomicU64,
    key: StateKey,
    /// How long a parked call waits for the client's retry.
    wait: Duration,
    limits: ParkedLimits,
    /// Whether the sweep of ended calls runs.
    sweeping: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Parked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parked")
            .field("named", &self.named)
            .finish_non_exhaustive()
    }
}

impl Rounds {
    /// No parked call yet; states sealed with `key`; a call waits `wait`
    /// for its client's retry; at most `limits` are held.
    pub fn new(key: StateKey, wait: Duration, limits: ParkedLimits) -> Self {
        Self {
            parked: Mutex::default(),
            next: AtomicU64::new(1),
            key,
            wait,
            limits,
            sweeping: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Starts, once, the sweep that gives back the bytes of parked calls
    /// whose task ended (their bridge went away): they would otherwise keep
    /// them until their client's retry or the wait's end.
    fn sweep(self: &Arc<Self>) {
        if self.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let rounds = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SWEEP).await;
                let Some(rounds) = rounds.upgrade() else {
                    return;
                };
                let now = Instant::now();
                let mut calls = rounds.lock();
                calls.retain(|_, call| call.expires > now);
                for call in calls.values_mut() {
                    if call.bytes > 0 && call.running.0.is_finished() {
                        call.asks = Vec::new();
                        call.bytes = 0;
                    }
                }
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Parked>> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Parks a call; its sealed state. Calls whose wait is over are dropped
    /// (which cancels them) on the way.
    fn park(&self, mut parked: Parked, node: Option<&str>) -> Result<String, ParkRefusal> {
        let limits = self.limits;
        if parked.bytes > limits.bytes_per_session {
            return Err(ParkRefusal::SessionBytes {
                bytes: parked.bytes,
                limit: limits.bytes_per_session,
            });
        }
        let now = Instant::now();
        let mut calls = self.lock();
        calls.retain(|_, call| call.expires > now);
        let (mut of_session, mut session_bytes, mut all_bytes) = (0, 0, 0);
        for call in calls.values() {
            all_bytes += call.bytes;
            if call.session_id == parked.session_id {
                of_session += 1;
                session_bytes += call.bytes;
            }
        }
        if session_bytes + parked.bytes > limits.bytes_per_session {
            return Err(ParkRefusal::SessionBytes {
                bytes: session_bytes + parked.bytes,
                limit: limits.bytes_per_session,
            });
        }
        // Full in calls or in bytes: room is made from the largest holder
        // (by the measure that is full), when it holds more than this
        // session will.
        while calls.len() >= limits.calls || all_bytes + parked.bytes > limits.bytes {
            let by_bytes = calls.len() < limits.calls;
            let (held, adding) = if by_bytes {
                (session_bytes, parked.bytes)
            } else {
                (of_session, 1)
            };
            let Some(evicted) = largest_holder_oldest(&calls, by_bytes, held + adding) else {
                return Err(ParkRefusal::Full {
                    limit: limits.calls,
                    bytes: limits.bytes,
                });
            };
            if let Some(dropped) = calls.remove(&evicted) {
                tracing::debug!(
                    "a waiting call was dropped to make room for another session's (OPENCLAW_PROXY_MAX_PARKED_CALLS, OPENCLAW_PROXY_MAX_PARKED_BYTES)"
                );
                all_bytes -= dropped.bytes;
            }
        }
        let call = self.next.fetch_add(1, Ordering::Relaxed);
        parked.order = call;
        let state = RequestState {
            session_id: parked.session_id.to_string(),
            call,
            node: node.unwrap_or_default().to_owned(),
            expires_unix: unix_now() + self.wait.as_secs(),
        };
        calls.insert(call, parked);
        Ok(self.key.seal(&state))
    }

    /// Takes the call a retry names, checking that it is this session's and
    /// asks for the same (method, tool, prompt or URI); or names the node
    /// (not `here`) it is parked on.
    fn resume(
        &self,
        state: &str,
        session_id: &str,
        named: &Named,
        here: Option<&str>,
    ) -> Result<Found, String> {
        let state = self
            .key
            .open(state, unix_now())
            .map_err(|error: StateError| error.to_string())?;
        if state.session_id != session_id {
            return Err("requestState belongs to another session".into());
        }
        if !state.node.is_empty() && Some(state.node.as_str()) != here {
            return Ok(Found::Elsewhere(state.node));
        }
        let mut calls = self.lock();
        match calls.get(&state.call) {
            Some(parked) if parked.named != *named => Err(format!(
                "requestState belongs to another request ({} of {}); retry that with it",
                parked.named.method,
                openclaw_proxy_core::escape::quoted(&parked.named.name)
            )),
            Some(_) => calls
                .remove(&state.call)
                .map(Found::Here)
                .ok_or_else(|| "the call is gone".to_owned()),
            None => Err(NO_CALL.into()),
        }
    }
}

/// The call to drop so that a session that will hold `will_hold` (calls,
/// or bytes when `by_bytes`) gets room: the oldest of the session holding
/// the most, when that is more than `will_hold`; `None` when the newcomer
/// would hold as much as anyone.
fn largest_holder_oldest(
    calls: &HashMap<u64, Parked>,
    by_bytes: bool,
    will_hold: usize,
) -> Option<u64> {
    let mut holdings: HashMap<&str, usize> = HashMap::new();
    for call in calls.values() {
        *holdings.entry(&call.session_id).or_default() += if by_bytes { call.bytes } else { 1 };
    }
    let (largest, most) = holdings.into_iter().max_by_key(|(_, held)| *held)?;
    if most <= will_hold {
        return None;
    }
    calls
        .iter()
        .filter(|(_, call)| &*call.session_id == largest && (!by_bytes || call.bytes > 0))
        .min_by_key(|(_, call)| call.order)
        .map(|(key, _)| *key)
}

/// Why a retry whose call is not waiting cannot resume it.
const NO_CALL: &str = "no call waits for this requestState: it was resumed already, it ended, or the server it waited on is gone; send the request again without it";

/// Where the call a retry names is parked.
enum Found {
    /// Here: taken.
    Here(Parked),
    /// On this node of the cluster.
    Elsewhere(String),
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// What a round needs to answer the call and reach its app. Owned: once a
/// notification has gone out, the round goes on inside the answer's stream.
pub(crate) struct Round {
    pub(crate) hub: Hub,
    pub(crate) rounds: Arc<Rounds>,
    pub(crate) session_id: Arc<str>,
    pub(crate) named: Named,
    pub(crate) id: RequestId,
    pub(crate) token: Option<ProgressToken>,
    /// The client's answers not used yet, by key.
    pub(crate) answers: HashMap<String, Box<RawValue>>,
}

/// The client's answers in a retried call's `inputResponses` (an object of
/// results by key); anything else gives none.
pub(crate) fn answers_of(input_responses: Option<&RawValue>) -> HashMap<String, Box<RawValue>> {
    input_responses
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default()
}

/// The JSON-RPC error answering a retry that cannot resume its call.
fn refused(id: &RequestId, message: &str) -> Response {
    error_response(id, ErrorCode::INVALID_PARAMS, message, StatusCode::OK)
}

/// An error with `code` as the JSON-RPC answer to `id`, with `status`.
fn error_response(id: &RequestId, code: ErrorCode, message: &str, status: StatusCode) -> Response {
    let mut answer = Answer::error(Some(id), code, message, None);
    answer.status = status;
    answer.into_response()
}

impl Round {
    /// A retried call: the parked call its state names goes on with the
    /// client's answers, here or on the node it is parked on.
    pub(crate) async fn resume(self, state: &str) -> Response {
        let here = self.hub.node_id();
        match self
            .rounds
            .resume(state, &self.session_id, &self.named, here)
        {
            Ok(Found::Here(parked)) => self.resume_parked(parked).await,
            Ok(Found::Elsewhere(node)) => self.resume_on(&node, state).await,
            Err(message) => self.bad_state(&message),
        }
    }

    /// The refusal of a retry whose `requestState` resumes nothing,
    /// counted (`outcome="bad_state"`) on the node that refused it.
    fn bad_state(&self, message: &str) -> Response {
        self.hub.metrics().request_state_refused();
        refused(&self.id, message)
    }

    /// The parked call goes on with the client's answers.
    async fn resume_parked(mut self, parked: Parked) -> Response {
        let Parked {
            running,
            reports,
            asks,
            ..
        } = parked;
        let mut waiting = Vec::new();
        for ask in asks {
            if !self.answered(&ask).await {
                waiting.push(ask);
            }
        }
        self.run(Going {
            running,
            reports,
            waiting,
        })
        .await
    }

    /// A call's rounds from its start: `running` is the call's task,
    /// `reports` its events.
    pub(crate) async fn start(
        self,
        running: AbortOnDrop<Finished>,
        reports: ProgressReceiver,
    ) -> Response {
        self.run(Going {
            running,
            reports,
            waiting: Vec::new(),
        })
        .await
    }

    /// Answers `ask` from the client's answers given ahead, if it gave one
    /// for its key; whether it did.
    async fn answered(&mut self, ask: &ClientAsk) -> bool {
        let Some(answer) = self.answers.remove(&ask.id) else {
            return false;
        };
        if !answer.get().starts_with('{') {
            // Not a result: the request is asked again.
            return false;
        }
        let minted = client_request_id(&ask.request_id, &ask.id);
        let answer = ClientAnswer::Result(answer.get().to_owned());
        // A call that ended meanwhile needs no answer.
        let _ = self
            .hub
            .answer_client(&self.session_id, &minted, answer)
            .await;
        true
    }

    /// Runs the call until it ends or asks what the client has not
    /// answered. The answer is JSON when that comes first; once a
    /// notification (progress, a log record) comes first it is an event
    /// stream, each notification sent as it comes and the answer last, so
    /// nothing of a long call waits in memory for its end (the core thins
    /// what a slow reader leaves waiting, as at 2025-11-25).
    async fn run(mut self, going: Going) -> Response {
        let (first, going) = match self.next(going).await {
            Next::Answer(answered) => return answered.into_response(),
            Next::Notes(first, going) => (first, going),
        };
        let first = futures_util::stream::once(std::future::ready(first));
        let rest = futures_util::stream::unfold(Some((self, going)), |state| async move {
            let (mut round, going) = state?;
            Some(match round.next(going).await {
                Next::Notes(notes, going) => (notes, Some((round, going))),
                Next::Answer(Answered {
                    mut notes, message, ..
                }) => {
                    sse::push_json_event(&mut notes, &message);
                    (notes, None)
                }
            })
        });
        let events =
            futures_util::StreamExt::map(futures_util::StreamExt::chain(first, rest), |bytes| {
                Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(bytes))
            });
        sse_response(Body::from_stream(events))
    }

    /// What the call comes to next: notifications for its client, or its
    /// answer (its result, or `input_required` once it is parked).
    async fn next(&mut self, mut going: Going) -> Next {
        let mut notes = Vec::new();
        loop {
            if !going.waiting.is_empty() {
                self.gather(&mut going, &mut notes).await;
                if !going.waiting.is_empty() {
                    let (message, status) = self.ask(going);
                    return Next::Answer(Answered {
                        notes,
                        message,
                        status,
                    });
                }
            }
            if !notes.is_empty() {
                return Next::Notes(notes, going);
            }
            tokio::select! {
                joined = &mut going.running.0 => {
                    while let Some(event) = going.reports.try_recv_event() {
                        self.note(event, &mut notes);
                    }
                    return Next::Answer(Answered::of(finished(joined, &self.id), notes));
                }
                event = going.reports.recv_event() => match event {
                    Some(CallEvent::Ask(ask)) => {
                        if !self.answered(&ask).await {
                            going.waiting.push(ask);
                        }
                    }
                    Some(event) => self.note(event, &mut notes),
                    None => {
                        let outcome = finished((&mut going.running.0).await, &self.id);
                        return Next::Answer(Answered::of(outcome, notes));
                    }
                },
            }
        }
    }

    /// More of the app's requests, each within [`QUIET`] of the one before
    /// and all within [`GATHER`] of now.
    async fn gather(&mut self, going: &mut Going, notes: &mut Vec<u8>) {
        let until = Instant::now() + GATHER;
        loop {
            if Instant::now() >= until {
                return;
            }
            let quiet = (Instant::now() + QUIET).min(until);
            let Ok(Some(event)) = tokio::time::timeout_at(quiet, going.reports.recv_event()).await
            else {
                return;
            };
            match event {
                CallEvent::Ask(ask) => {
                    if !self.answered(&ask).await {
                        going.waiting.push(ask);
                    }
                }
                event => self.note(event, notes),
            }
        }
    }

    fn note(&self, event: CallEvent, notes: &mut Vec<u8>) {
        if let Some(message) = event_message(self.token.as_ref(), event) {
            sse::push_json_event(notes, &message);
        }
    }

    /// Parks the call; the answer with its requests (or the refusal when
    /// this node holds too many).
    fn ask(&self, going: Going) -> (Vec<u8>, StatusCode) {
        let Going {
            running,
            reports,
            waiting,
        } = going;
        let requests = input_requests(&waiting);
        let parked = Parked {
            session_id: self.session_id.clone(),
            named: self.named.clone(),
            running,
            reports,
            bytes: ask_bytes(&waiting),
            asks: waiting,
            order: 0,
            expires: Instant::now() + self.rounds.wait,
        };
        self.rounds.sweep();
        match self.rounds.park(parked, self.hub.node_id()) {
            Ok(state) => (input_required(&self.id, &requests, &state), StatusCode::OK),
            Err(refused) => {
                let refusal = Answer::error(
                    Some(&self.id),
                    ErrorCode::INVALID_PARAMS,
                    &refused.to_string(),
                    None,
                );
                (refusal.message, refusal.status)
            }
        }
    }
}

/// A call of a round, between its events.
struct Going {
    running: AbortOnDrop<Finished>,
    reports: ProgressReceiver,
    /// The app's requests the client has not answered.
    waiting: Vec<ClientAsk>,
}

/// What a call's rounds come to next.
enum Next {
    /// Notifications for the client (SSE events); the call goes on.
    Notes(Vec<u8>, Going),
    /// The answer.
    Answer(Answered),
}

/// A round's answer and the notifications that came just before it.
struct Answered {
    notes: Vec<u8>,
    message: Vec<u8>,
    status: StatusCode,
}

impl Answered {
    fn of(answer: Answer, notes: Vec<u8>) -> Self {
        Self {
            notes,
            message: answer.message,
            status: answer.status,
        }
    }

    /// JSON, or an event stream when notifications came with it.
    fn into_response(self) -> Response {
        let Self {
            mut notes,
            message,
            status,
        } = self;
        if notes.is_empty() {
            return json_response(status, message);
        }
        sse::push_json_event(&mut notes, &message);
        sse_response(Body::from(notes))
    }
}
