//! Rate limits for warnings an outsider can trigger at will.
//!
//! An app that sends a stream of malformed frames, or results for calls
//! nobody waits for, would otherwise write one WARN line per message and
//! drown the log (and the disk). Each bridge gets a [`LogBudget`]: a few
//! lines per window; the rest are counted, and the next line that is written
//! says how many were left out, so nothing is lost silently. The app itself
//! is still answered for every message (error frames, notices): only the
//! log is thinned.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// Warning lines one bridge may write per [`WINDOW`].
pub const LINES_PER_WINDOW: u32 = 5;

/// The window of [`LINES_PER_WINDOW`].
pub const WINDOW: Duration = Duration::from_secs(60);

/// A budget of log lines: [`LINES_PER_WINDOW`] per [`WINDOW`].
#[derive(Debug)]
pub struct LogBudget {
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    window_start: Instant,
    used: u32,
    suppressed: u64,
}

impl Default for LogBudget {
    fn default() -> Self {
        Self {
            state: Mutex::new(State {
                window_start: Instant::now(),
                used: 0,
                suppressed: 0,
            }),
        }
    }
}

impl LogBudget {
    /// Whether a line may be written now; `Some(n)` with the number of
    /// lines left out since the last one written (write it with the line).
    pub fn allow(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.window_start.elapsed() >= WINDOW {
            state.window_start = Instant::now();
            state.used = 0;
        }
        if state.used >= LINES_PER_WINDOW {
            state.suppressed += 1;
            return None;
        }
        state.used += 1;
        Some(std::mem::take(&mut state.suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_flood_is_thinned_and_the_next_line_counts_what_was_left_out() {
        let budget = LogBudget::default();
        for _ in 0..LINES_PER_WINDOW {
            assert_eq!(budget.allow(), Some(0));
        }
        for _ in 0..1000 {
            assert_eq!(budget.allow(), None);
        }
        tokio::time::advance(WINDOW).await;
        assert_eq!(
            budget.allow(),
            Some(1000),
            "the count arrives with the next line"
        );
        assert_eq!(budget.allow(), Some(0));
    }
}
