//! Whether a bridge has ended, and a way to wait for it.
//!
//! A flag, a [`Notify`] for those that wait and a waker for the driver
//! (which polls), kept inside the bridge, where a
//! `CancellationToken` would be a separate allocation (a tree node of some
//! 110 bytes) per bridge for a tree of one.

use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

#[derive(Default)]
pub(super) struct Closed {
    closed: AtomicBool,
    waiters: Notify,
    /// The bridge's driver, which polls rather than waits.
    driver: AtomicWaker,
}

impl Closed {
    /// Marks the bridge closed and wakes everything waiting for it.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waiters.notify_waiters();
        self.driver.wake();
    }

    /// Wakes the driver's task when the bridge closes; register before
    /// looking at [`Self::is_closed`], so a close in between is not missed.
    pub(super) fn register_driver(&self, waker: &std::task::Waker) {
        self.driver.register(waker);
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Returns once the bridge is closed (at once if it is).
    pub(super) async fn wait(&self) {
        loop {
            // Registered before the check, so a close in between wakes it.
            let notified = self.waiters.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_closed() {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn waiters_before_and_after_the_close_return() {
        let closed = Arc::new(Closed::default());
        let early = {
            let closed = closed.clone();
            tokio::spawn(async move { closed.wait().await })
        };
        tokio::task::yield_now().await;
        assert!(!closed.is_closed());
        closed.close();
        assert!(early.await.is_ok());
        // A wait that starts after the close returns at once.
        closed.wait().await;
        assert!(closed.is_closed());
    }
}
