//! A call's progress reports, and the app's log records for it, on their way
//! to its caller.
//!
//! An app may report progress faster than the MCP client reads it. Queuing
//! every report would let one app fill the proxy's memory; dropping the
//! newest (what a full channel does) would lose exactly the report that
//! matters. So a call keeps at most [`CAPACITY`] reports waiting, and when
//! one more comes the *oldest* waiting report gives way: the latest report
//! always arrives (before the result, which never waits here), the client
//! sees fewer steps, and the reports left out are counted.
//!
//! Log records share the queue (and its thinning) when the caller asked for
//! them, at a level ([`channel_with_logs`]); a record below that level is
//! refused at once, so no record the client does not want is ever queued.
//!
//! So do the app's requests to the caller ([`ClientAsk`]: elicitation,
//! sampling, roots), when the caller's transport can carry them
//! ([`Askable`]). A request never gives way: the app waits for its answer,
//! and their number per call is bounded where they are accepted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::proto::{Log, ToolProgress};

/// An MCP log level (RFC 5424 severities, as MCP names them), least severe
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [Self; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The level MCP names `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|level| level.as_str() == name)
    }

    /// Its MCP name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

/// What an app sends its caller during a call.
#[derive(Debug)]
pub enum CallEvent {
    /// A progress report.
    Progress(ToolProgress),
    /// A log record at a level the caller asked for.
    Log(Log),
    /// A request for the caller to answer.
    Ask(ClientAsk),
}

/// A request of the app to the MCP client of one of its calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientAsk {
    /// The call's request id.
    pub request_id: String,
    /// The app's id of this request, unique among the call's outstanding
    /// ones.
    pub id: String,
    /// The MCP method ([`AskMethod`]).
    pub method: AskMethod,
    /// The params as the app wrote them: a JSON object.
    pub params_json: String,
}

/// What an app may ask the MCP client of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AskMethod {
    /// `elicitation/create`: ask the user (a form, or a URL to visit).
    Elicitation,
    /// `sampling/createMessage`: ask the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
}

impl AskMethod {
    /// Every method, in label order.
    pub const ALL: [Self; 3] = [Self::Elicitation, Self::Sampling, Self::Roots];

    /// The method MCP names `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|method| method.as_str() == name)
    }

    /// Its MCP name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation/create",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }

    /// The client capability MCP requires for it.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }
}

/// The elicitation modes a client declared. MCP 2025-11-25 has a client
/// declare `capabilities.elicitation: {}` (form mode only, as before modes
/// existed) or name each mode it supports (`{"form": {}, "url": {}}`); a
/// request in URL mode needs `url`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Elicitation {
    /// Form mode (`elicitation.form`, or an empty `elicitation`).
    pub form: bool,
    /// URL mode (`elicitation.url`).
    pub url: bool,
}

impl Elicitation {
    /// No elicitation declared.
    pub const NONE: Self = Self {
        form: false,
        url: false,
    };
    /// Form mode only: what `elicitation: {}` declares.
    pub const FORM: Self = Self {
        form: true,
        url: false,
    };
    /// Both modes.
    pub const BOTH: Self = Self {
        form: true,
        url: true,
    };

    /// What a declared `elicitation` capability with these sub-capabilities
    /// allows: neither named is form mode only.
    pub fn declared(form: bool, url: bool) -> Self {
        Self {
            form: form || !url,
            url,
        }
    }

    /// Whether any mode is declared.
    pub fn any(self) -> bool {
        self.form || self.url
    }

    /// Whether a request in `mode` may be sent.
    pub fn allows(self, mode: ElicitationMode) -> bool {
        match mode {
            ElicitationMode::Form => self.form,
            ElicitationMode::Url => self.url,
        }
    }
}

/// The mode of an `elicitation/create` request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElicitationMode {
    /// A form the user fills in (`"mode": "form"`, or no mode).
    Form,
    /// A URL the user visits (`"mode": "url"`).
    Url,
}

impl ElicitationMode {
    /// The mode `params_json` (the request's params, a JSON object) names:
    /// URL mode for `"mode": "url"`, form mode otherwise (MCP's default).
    /// Params whose `mode` cannot be read (a key given twice, say) count as
    /// URL mode, the one that needs more of the client, so that no reading
    /// of them reaches a client that declared form mode only.
    pub fn of(params_json: &str) -> Self {
        #[derive(serde::Deserialize)]
        struct Params<'a> {
            #[serde(borrow, default)]
            mode: Option<std::borrow::Cow<'a, str>>,
        }
        match serde_json::from_str::<Params<'_>>(params_json) {
            Ok(Params { mode: Some(mode) }) if mode == "url" => Self::Url,
            Ok(_) => Self::Form,
            Err(_) => Self::Url,
        }
    }

    /// The sub-capability MCP requires for it.
    pub fn capability(self) -> &'static str {
        match self {
            Self::Form => "elicitation.form",
            Self::Url => "elicitation.url",
        }
    }

    /// Its name in a request's `mode`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Form => "form",
            Self::Url => "url",
        }
    }
}

/// Which requests a call's caller can be sent, as far as its transport and
/// its declared capabilities tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Askable {
    /// None: the path the call took cannot carry a request to its client.
    #[default]
    Nothing,
    /// Those its capabilities declare (known per request at 2026-07-28).
    Declared {
        /// `elicitation`, by mode.
        elicitation: Elicitation,
        /// `sampling`.
        sampling: bool,
        /// `roots`.
        roots: bool,
    },
    /// Any: the client's capabilities are not known here (declared at
    /// `initialize`, which a stateless endpoint does not keep); a client
    /// without one answers "method not found", which the app gets.
    Any,
    /// None, though its capabilities (as in [`Self::Declared`]) may allow
    /// some: its request is answered in one piece, so no `input_required`
    /// round can carry a request (a 2026-07-28 request of a shape the
    /// proxy leaves to its MCP library). A request the capabilities do not
    /// allow is refused naming the capability, as for [`Self::Declared`].
    OnePiece {
        /// `elicitation`, by mode.
        elicitation: Elicitation,
        /// `sampling`.
        sampling: bool,
        /// `roots`.
        roots: bool,
    },
}

impl Askable {
    /// A client that declared none of the capabilities.
    pub const NOTHING_DECLARED: Self = Self::Declared {
        elicitation: Elicitation::NONE,
        sampling: false,
        roots: false,
    };

    /// Why `method` with these params (a JSON object; for
    /// `elicitation/create` they name its mode) cannot be asked, or `None`
    /// when it can.
    pub fn refusal(self, method: AskMethod, params_json: &str) -> Option<String> {
        let declared = match (self, method) {
            (Self::Any, _) => return None,
            (
                Self::OnePiece {
                    elicitation,
                    sampling,
                    roots,
                },
                _,
            ) => {
                let declared = Self::Declared {
                    elicitation,
                    sampling,
                    roots,
                };
                return Some(declared.refusal(method, params_json).unwrap_or_else(|| {
                    format!(
                        "the MCP client of this call cannot be sent {}: at 2026-07-28 a request reaches the client in an input_required round, and this request had a shape the proxy answers in one piece, without rounds (an unknown params field, say); the same request in its plain shape can be asked",
                        method.as_str()
                    )
                }));
            }
            (Self::Nothing, _) => {
                return Some(format!(
                    "the MCP client of this call cannot be sent {}: the way its request came in carries no requests back to it",
                    method.as_str()
                ));
            }
            (Self::Declared { elicitation, .. }, AskMethod::Elicitation) => {
                if !elicitation.any() {
                    false
                } else {
                    let mode = ElicitationMode::of(params_json);
                    return (!elicitation.allows(mode)).then(|| {
                        format!(
                            "the MCP client of this call did not declare the {} capability, so it cannot be sent {} in {} mode (\"mode\": \"{}\"); ask in a mode it declared",
                            mode.capability(),
                            method.as_str(),
                            mode.as_str(),
                            mode.as_str()
                        )
                    });
                }
            }
            (Self::Declared { sampling, .. }, AskMethod::Sampling) => sampling,
            (Self::Declared { roots, .. }, AskMethod::Roots) => roots,
        };
        (!declared).then(|| {
            format!(
                "the MCP client of this call did not declare the {} capability, so it cannot be sent {}",
                method.capability(),
                method.as_str()
            )
        })
    }
}

/// Reports waiting per call before the oldest gives way.
pub const CAPACITY: usize = 64;

#[derive(Default)]
struct Queue {
    reports: VecDeque<CallEvent>,
    thinned: u64,
}

struct Shared {
    queue: Mutex<Queue>,
    notify: Notify,
    senders: AtomicUsize,
    /// The least severe log record the caller wants; `None` for none.
    log_level: Option<LogLevel>,
    /// Which requests of the app the caller can be sent.
    askable: Askable,
}

impl Shared {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        // Plain data, never left half-updated: poison is harmless.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where an app's progress reports for one call go.
pub struct ProgressSink(Arc<Shared>);

/// The caller's end: the reports, oldest first.
pub struct ProgressReceiver(Arc<Shared>);

/// A sink and its receiver, for progress reports only.
pub fn channel() -> (ProgressSink, ProgressReceiver) {
    channel_with_logs(None)
}

/// A sink and its receiver that also take log records at `log_level` or
/// above (none when `None`).
pub fn channel_with_logs(log_level: Option<LogLevel>) -> (ProgressSink, ProgressReceiver) {
    call_channel(log_level, Askable::Nothing)
}

/// A sink and its receiver for everything a call may send its caller: log
/// records at `log_level` or above, and the requests `askable` allows.
pub fn call_channel(
    log_level: Option<LogLevel>,
    askable: Askable,
) -> (ProgressSink, ProgressReceiver) {
    let shared = Arc::new(Shared {
        queue: Mutex::default(),
        notify: Notify::new(),
        senders: AtomicUsize::new(1),
        log_level,
        askable,
    });
    (ProgressSink(shared.clone()), ProgressReceiver(shared))
}

/// What became of a log record handed to a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Logged {
    /// Queued for the caller.
    Queued,
    /// Queued; an older event gave way to it.
    Thinned,
    /// Below the caller's level, or the caller asked for no logs: dropped.
    Unwanted,
}

impl Logged {
    /// Every outcome, in label order.
    pub const ALL: [Self; 3] = [Self::Queued, Self::Thinned, Self::Unwanted];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "forwarded",
            Self::Thinned => "thinned",
            Self::Unwanted => "unwanted",
        }
    }
}

impl ProgressSink {
    /// Queues a report; never waits. Returns `false` when an older report
    /// gave way to it.
    pub fn push(&self, report: ToolProgress) -> bool {
        self.queue(CallEvent::Progress(report))
    }

    /// The least severe log record the caller wants; `None` for none.
    pub fn log_level(&self) -> Option<LogLevel> {
        self.0.log_level
    }

    /// Which requests of the app the caller can be sent.
    pub fn askable(&self) -> Askable {
        self.0.askable
    }

    /// Queues a request for the caller; it never gives way. The caller
    /// checks [`Self::askable`] first.
    pub fn push_ask(&self, ask: ClientAsk) {
        self.queue(CallEvent::Ask(ask));
    }

    /// Queues a log record if the caller wants its level; never waits.
    pub fn push_log(&self, level: LogLevel, record: Log) -> Logged {
        if self.0.log_level.is_none_or(|wanted| level < wanted) {
            return Logged::Unwanted;
        }
        if self.queue(CallEvent::Log(record)) {
            Logged::Queued
        } else {
            Logged::Thinned
        }
    }

    fn queue(&self, event: CallEvent) -> bool {
        let kept_all = {
            let mut queue = self.0.queue();
            let full = queue.reports.len() >= CAPACITY;
            // The oldest report or record gives way; a request never does.
            let gives_way = if full {
                queue
                    .reports
                    .iter()
                    .position(|event| !matches!(event, CallEvent::Ask(_)))
            } else {
                None
            };
            if let Some(oldest) = gives_way {
                queue.reports.remove(oldest);
                queue.thinned += 1;
            }
            queue.reports.push_back(event);
            gives_way.is_none()
        };
        self.0.notify.notify_one();
        kept_all
    }
}

impl Clone for ProgressSink {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        Self(self.0.clone())
    }
}

impl Drop for ProgressSink {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.notify.notify_one();
        }
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

impl ProgressReceiver {
    /// The next event; `None` once every sink is gone and nothing waits.
    pub async fn recv_event(&mut self) -> Option<CallEvent> {
        let shared = &*self.0;
        loop {
            // Made before looking: a push in between leaves `notify_one`'s
            // permit (stored when nobody waits yet), so it still wakes.
            let notified = shared.notify.notified();
            if let Some(event) = shared.queue().reports.pop_front() {
                return Some(event);
            }
            if shared.senders.load(Ordering::Acquire) == 0 {
                return None;
            }
            notified.await;
        }
    }

    /// The next event if one waits.
    pub fn try_recv_event(&mut self) -> Option<CallEvent> {
        self.0.queue().reports.pop_front()
    }

    /// The next progress report (a receiver of [`channel`] gets no logs);
    /// `None` once every sink is gone and nothing waits.
    pub async fn recv(&mut self) -> Option<ToolProgress> {
        loop {
            match self.recv_event().await? {
                CallEvent::Progress(report) => return Some(report),
                CallEvent::Log(_) | CallEvent::Ask(_) => {}
            }
        }
    }

    /// The next progress report if one waits.
    pub fn try_recv(&mut self) -> Option<ToolProgress> {
        loop {
            match self.try_recv_event()? {
                CallEvent::Progress(report) => return Some(report),
                CallEvent::Log(_) | CallEvent::Ask(_) => {}
            }
        }
    }

    /// How many reports gave way to newer ones so far.
    pub fn thinned(&self) -> u64 {
        self.0.queue().thinned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(progress: f64) -> ToolProgress {
        ToolProgress {
            progress,
            ..ToolProgress::default()
        }
    }

    #[tokio::test]
    async fn a_flood_keeps_the_latest_reports_and_counts_the_rest() {
        let (sink, mut receiver) = channel();
        for n in 1..=1000 {
            sink.push(report(f64::from(n)));
        }
        drop(sink);
        let mut seen = Vec::new();
        while let Some(report) = receiver.recv().await {
            seen.push(report.progress);
        }
        assert_eq!(seen.len(), CAPACITY);
        assert_eq!(seen.last(), Some(&1000.0), "the latest arrives");
        assert!(seen.windows(2).all(|pair| pair[0] < pair[1]), "in order");
        assert_eq!(receiver.thinned(), 1000 - CAPACITY as u64);
    }

    #[tokio::test]
    async fn logs_below_the_callers_level_are_never_queued() {
        let record = |text: &str| Log {
            data_json: format!("{text:?}"),
            ..Log::default()
        };
        let (sink, mut receiver) = channel_with_logs(Some(LogLevel::Warning));
        assert_eq!(
            sink.push_log(LogLevel::Info, record("quiet")),
            Logged::Unwanted
        );
        assert_eq!(
            sink.push_log(LogLevel::Error, record("loud")),
            Logged::Queued
        );
        sink.push(report(1.0));
        drop(sink);
        match receiver.recv_event().await {
            Some(CallEvent::Log(log)) => assert_eq!(log.data_json, "\"loud\""),
            other => panic!("expected the error record, got {other:?}"),
        }
        assert!(matches!(
            receiver.recv_event().await,
            Some(CallEvent::Progress(_))
        ));
        assert!(receiver.recv_event().await.is_none());

        let (sink, _receiver) = channel();
        assert_eq!(
            sink.push_log(LogLevel::Emergency, record("x")),
            Logged::Unwanted
        );
        assert!(LogLevel::parse("warning") == Some(LogLevel::Warning));
        assert!(LogLevel::parse("verbose").is_none());
    }

    #[tokio::test]
    async fn requests_never_give_way_to_a_flood_of_reports() {
        let (sink, mut receiver) = call_channel(None, Askable::Any);
        let ask = ClientAsk {
            request_id: "s:1".into(),
            id: "a".into(),
            method: AskMethod::Elicitation,
            params_json: "{}".into(),
        };
        sink.push(report(0.0));
        sink.push_ask(ask.clone());
        for n in 1..=1000 {
            sink.push(report(f64::from(n)));
        }
        drop(sink);
        let mut asks = 0;
        while let Some(event) = receiver.recv_event().await {
            if let CallEvent::Ask(seen) = event {
                assert_eq!(seen, ask);
                asks += 1;
            }
        }
        assert_eq!(asks, 1, "the request survived the flood");
        assert_eq!(receiver.thinned(), 1001 - (CAPACITY as u64 - 1));
    }

    #[test]
    fn a_request_is_refused_naming_what_the_client_lacks() {
        assert!(Askable::Any.refusal(AskMethod::Sampling, "{}").is_none());
        let declared = Askable::Declared {
            elicitation: Elicitation::FORM,
            sampling: false,
            roots: false,
        };
        assert!(declared.refusal(AskMethod::Elicitation, "{}").is_none());
        let refused = declared
            .refusal(AskMethod::Sampling, "{}")
            .expect("refused");
        assert!(refused.contains("sampling capability"), "{refused}");
        let nothing = Askable::Nothing
            .refusal(AskMethod::Roots, "{}")
            .expect("refused");
        assert!(nothing.contains("roots/list"), "{nothing}");
        // Answered in one piece: a capability not declared is named, a
        // declared one is refused saying why it cannot go in a round.
        let one_piece = Askable::OnePiece {
            elicitation: Elicitation::FORM,
            sampling: false,
            roots: false,
        };
        let refused = one_piece
            .refusal(AskMethod::Sampling, "{}")
            .expect("refused");
        assert!(refused.contains("sampling capability"), "{refused}");
        let refused = one_piece
            .refusal(AskMethod::Elicitation, "{}")
            .expect("refused");
        assert!(refused.contains("input_required"), "{refused}");
        assert_eq!(AskMethod::parse("roots/list"), Some(AskMethod::Roots));
        assert_eq!(AskMethod::parse("tools/call"), None);
    }

    #[test]
    fn url_mode_needs_the_url_sub_capability() {
        let url = r#"{"mode":"url","message":"Sign in","url":"https://example.com/x","elicitationId":"e1"}"#;
        let form = r#"{"mode":"form","message":"Which?","requestedSchema":{"type":"object"}}"#;
        let unnamed = r#"{"message":"Which?","requestedSchema":{"type":"object"}}"#;
        assert_eq!(ElicitationMode::of(url), ElicitationMode::Url);
        assert_eq!(ElicitationMode::of(form), ElicitationMode::Form);
        assert_eq!(ElicitationMode::of(unnamed), ElicitationMode::Form);
        // A mode that cannot be read needs what URL mode needs.
        let twice = r#"{"mode":"url","mode":"url","message":"m"}"#;
        assert_eq!(ElicitationMode::of(twice), ElicitationMode::Url);
        let with = |elicitation| Askable::Declared {
            elicitation,
            sampling: false,
            roots: false,
        };
        // `elicitation: {}`: form mode only.
        let form_only = with(Elicitation::declared(false, false));
        assert_eq!(form_only, with(Elicitation::FORM));
        assert!(form_only.refusal(AskMethod::Elicitation, unnamed).is_none());
        let refused = form_only
            .refusal(AskMethod::Elicitation, url)
            .expect("refused");
        assert!(refused.contains("elicitation.url capability"), "{refused}");
        // Both named: both allowed; URL only: a form is refused.
        let both = with(Elicitation::declared(true, true));
        assert!(both.refusal(AskMethod::Elicitation, url).is_none());
        assert!(both.refusal(AskMethod::Elicitation, form).is_none());
        let url_only = with(Elicitation::declared(false, true));
        assert!(url_only.refusal(AskMethod::Elicitation, url).is_none());
        let refused = url_only
            .refusal(AskMethod::Elicitation, form)
            .expect("refused");
        assert!(refused.contains("elicitation.form capability"), "{refused}");
        // None declared: the capability itself is named.
        let refused = with(Elicitation::NONE)
            .refusal(AskMethod::Elicitation, url)
            .expect("refused");
        assert!(
            refused.contains("did not declare the elicitation capability"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn a_reader_that_keeps_up_sees_every_report() {
        let (sink, mut receiver) = channel();
        let reader = tokio::spawn(async move {
            let mut count = 0;
            while receiver.recv().await.is_some() {
                count += 1;
            }
            (count, receiver.thinned())
        });
        for n in 0..10 {
            sink.push(report(f64::from(n)));
            tokio::task::yield_now().await;
        }
        drop(sink);
        let (count, thinned) = reader.await.expect("join");
        assert_eq!(count + thinned, 10);
    }
}
