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

pub use openclaw_proxy_proto::LogLevel;

use crate::asking::{Askable, ClientAsk};
use crate::proto::{Log, ToolProgress};

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
    use crate::asking::AskMethod;

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
