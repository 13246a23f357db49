//! How many `subscriptions/listen` streams each session has open, so that
//! one session cannot open them without end
//! (`OPENCLAW_PROXY_MAX_LISTEN_STREAMS_PER_SESSION`).
//!
//! Why: a listen stream is one request held open, keeping the resource URIs
//! it listens to; nothing else bounded how many a client opened, and each
//! held what it named for as long as the client liked.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// The open listen streams of every session on this node.
#[derive(Default)]
pub struct ListenStreams {
    open: Mutex<HashMap<Arc<str>, usize>>,
}

/// A session that already has as many listen streams open as it may.
#[derive(Debug, thiserror::Error)]
#[error(
    "this session already has {limit} subscriptions/listen streams open (OPENCLAW_PROXY_MAX_LISTEN_STREAMS_PER_SESSION); close one first"
)]
pub struct TooManyListens {
    /// The limit.
    pub limit: usize,
}

impl ListenStreams {
    /// A stream of `session`, counted until the returned guard is dropped;
    /// refused when the session already has `limit` open.
    pub fn open(
        self: &Arc<Self>,
        session: &Arc<str>,
        limit: usize,
    ) -> Result<ListenGuard, TooManyListens> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(session.clone()).or_default();
        if *count >= limit {
            return Err(TooManyListens { limit });
        }
        *count += 1;
        Ok(ListenGuard {
            streams: self.clone(),
            session: session.clone(),
        })
    }
}

/// One open listen stream.
pub struct ListenGuard {
    streams: Arc<ListenStreams>,
    session: Arc<str>,
}

impl Drop for ListenGuard {
    fn drop(&mut self) {
        let mut open = self
            .streams
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.session) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_holds_at_most_its_limit_and_a_closed_stream_makes_room() {
        let streams = Arc::new(ListenStreams::default());
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let first = streams.open(&a, 2).expect("first");
        let _second = streams.open(&a, 2).expect("second");
        let refused = streams.open(&a, 2).err().expect("third is refused");
        assert!(
            refused
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_LISTEN_STREAMS_PER_SESSION")
        );
        let _other = streams.open(&b, 2).expect("another session has its own");
        drop(first);
        let _again = streams.open(&a, 2).expect("room again");
    }
}
