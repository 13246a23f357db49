//! A call's progress reports on their way to its caller.
//!
//! An app may report progress faster than the MCP client reads it. Queuing
//! every report would let one app fill the proxy's memory; dropping the
//! newest (what a full channel does) would lose exactly the report that
//! matters. So a call keeps at most [`CAPACITY`] reports waiting, and when
//! one more comes the *oldest* waiting report gives way: the latest report
//! always arrives (before the result, which never waits here), the client
//! sees fewer steps, and the reports left out are counted.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::proto::ToolProgress;

/// Reports waiting per call before the oldest gives way.
pub const CAPACITY: usize = 64;

#[derive(Default)]
struct Queue {
    reports: VecDeque<ToolProgress>,
    thinned: u64,
}

struct Shared {
    queue: Mutex<Queue>,
    notify: Notify,
    senders: AtomicUsize,
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

/// A sink and its receiver.
pub fn channel() -> (ProgressSink, ProgressReceiver) {
    let shared = Arc::new(Shared {
        queue: Mutex::default(),
        notify: Notify::new(),
        senders: AtomicUsize::new(1),
    });
    (ProgressSink(shared.clone()), ProgressReceiver(shared))
}

impl ProgressSink {
    /// Queues a report; never waits. Returns `false` when an older report
    /// gave way to it.
    pub fn push(&self, report: ToolProgress) -> bool {
        let kept_all = {
            let mut queue = self.0.queue();
            let full = queue.reports.len() >= CAPACITY;
            if full {
                queue.reports.pop_front();
                queue.thinned += 1;
            }
            queue.reports.push_back(report);
            !full
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
    /// The next report; `None` once every sink is gone and nothing waits.
    pub async fn recv(&mut self) -> Option<ToolProgress> {
        let shared = &*self.0;
        loop {
            // Made before looking: a push in between leaves `notify_one`'s
            // permit (stored when nobody waits yet), so it still wakes.
            let notified = shared.notify.notified();
            if let Some(report) = shared.queue().reports.pop_front() {
                return Some(report);
            }
            if shared.senders.load(Ordering::Acquire) == 0 {
                return None;
            }
            notified.await;
        }
    }

    /// The next report if one waits.
    pub fn try_recv(&mut self) -> Option<ToolProgress> {
        self.0.queue().reports.pop_front()
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
