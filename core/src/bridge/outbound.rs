//! A bridge's outbound queue: the proxy's messages waiting for the app's
//! transport to take them.
//!
//! A plain locked deque rather than a channel, because every idle bridge
//! pays for it: tokio's bounded channel reserves a shared block of 32 slots
//! and a cache-padded state of half a kilobyte per bridge, where this holds
//! its few words inside the bridge and allocates nothing until a message
//! waits (and gives a burst's room back once the queue is empty again).
//! There is one reader, the bridge's transport, and any number of writers:
//! calls wait while the queue is full, notices and pings are dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::task::Context;

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

use super::Queued;
use super::closed::Closed;

/// Room a queue keeps once it is empty again; more is given back.
const KEPT_WHEN_EMPTY: usize = 8;

pub(super) struct Outbound {
    messages: Mutex<VecDeque<Queued>>,
    capacity: usize,
    /// The transport, waiting for a message.
    reader: AtomicWaker,
    /// Writers waiting for room.
    room: Notify,
    /// Messages queued and messages the transport took, for the stall
    /// watch: a queue that holds messages and does not move is an app that
    /// stopped reading.
    pub(super) queued: AtomicU64,
    pub(super) taken: AtomicU64,
}

/// The queue was full; the message comes back.
pub(super) struct Full(pub(super) Queued);

impl Outbound {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            messages: Mutex::default(),
            capacity,
            reader: AtomicWaker::new(),
            room: Notify::new(),
            queued: AtomicU64::new(0),
            taken: AtomicU64::new(0),
        }
    }

    fn messages(&self) -> MutexGuard<'_, VecDeque<Queued>> {
        // Plain data, never left half-changed: a poisoned lock is usable.
        self.messages.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a message unless the queue is full.
    pub(super) fn try_push(&self, message: Queued) -> Result<(), Full> {
        {
            let mut messages = self.messages();
            if messages.len() >= self.capacity {
                return Err(Full(message));
            }
            messages.push_back(message);
        }
        self.queued.fetch_add(1, Ordering::Relaxed);
        self.reader.wake();
        Ok(())
    }

    /// Queues a message, waiting while the queue is full; `Err` once
    /// `closed` is.
    pub(super) async fn push(&self, mut message: Queued, closed: &Closed) -> Result<(), ()> {
        loop {
            // Registered before the check, so room made in between wakes it.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match self.try_push(message) {
                Ok(()) => return Ok(()),
                Err(Full(back)) => message = back,
            }
            tokio::select! {
                biased;
                () = closed.wait() => return Err(()),
                () = &mut room => {}
            }
        }
    }

    /// Wakes the reader when a message is queued or [`Self::wake_reader`]
    /// is called; register before looking, so nothing is missed between.
    pub(super) fn register_reader(&self, cx: &Context<'_>) {
        self.reader.register(cx.waker());
    }

    /// Wakes the reader to look again (the bridge ended).
    pub(super) fn wake_reader(&self) {
        self.reader.wake();
    }

    /// The next message, if one waits.
    pub(super) fn pop(&self) -> Option<Queued> {
        let (message, was_full) = {
            let mut messages = self.messages();
            let was_full = messages.len() >= self.capacity;
            let message = messages.pop_front();
            if messages.is_empty() && messages.capacity() > KEPT_WHEN_EMPTY {
                messages.shrink_to(KEPT_WHEN_EMPTY);
            }
            (message, was_full)
        };
        let message = message?;
        self.taken.fetch_add(1, Ordering::Relaxed);
        if was_full {
            // Every waiting writer retries; those that find it full again
            // wait again.
            self.room.notify_waiters();
        }
        Some(message)
    }

    /// Drops what waits (the bridge ended: nobody will read it).
    pub(super) fn clear(&self) {
        let dropped = std::mem::take(&mut *self.messages());
        drop(dropped);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::task::noop_waker_ref;

    use super::*;
    use crate::proto::ProxyMessage;

    fn message() -> Queued {
        Box::new(ProxyMessage::default())
    }

    fn pop(queue: &Outbound) -> Option<Queued> {
        queue.register_reader(&Context::from_waker(noop_waker_ref()));
        queue.pop()
    }

    #[tokio::test]
    async fn a_full_queue_refuses_notices_and_holds_writers_until_there_is_room() {
        let queue = Arc::new(Outbound::new(2));
        let closed = Arc::new(Closed::default());
        assert!(queue.try_push(message()).is_ok());
        assert!(queue.try_push(message()).is_ok());
        assert!(queue.try_push(message()).is_err(), "full");
        let writers: Vec<_> = (0..3)
            .map(|_| {
                let (queue, closed) = (queue.clone(), closed.clone());
                tokio::spawn(async move { queue.push(message(), &closed).await })
            })
            .collect();
        tokio::task::yield_now().await;
        // Each message taken lets one waiting writer in.
        let mut taken = 0;
        while taken < 5 {
            if pop(&queue).is_some() {
                taken += 1;
            }
            tokio::task::yield_now().await;
        }
        for writer in writers {
            assert_eq!(writer.await.ok(), Some(Ok(())));
        }
        assert!(pop(&queue).is_none(), "all five were taken");
        assert_eq!(queue.queued.load(Ordering::Relaxed), 5);
        assert_eq!(queue.taken.load(Ordering::Relaxed), 5);
    }

    #[tokio::test]
    async fn a_waiting_writer_is_let_go_when_the_bridge_closes() {
        let queue = Arc::new(Outbound::new(1));
        let closed = Arc::new(Closed::default());
        assert!(queue.try_push(message()).is_ok());
        let writer = {
            let (queue, closed) = (queue.clone(), closed.clone());
            tokio::spawn(async move { queue.push(message(), &closed).await })
        };
        tokio::task::yield_now().await;
        closed.close();
        assert_eq!(writer.await.ok(), Some(Err(())));
    }

    #[test]
    fn an_emptied_queue_gives_a_bursts_room_back() {
        let queue = Outbound::new(256);
        for _ in 0..200 {
            assert!(queue.try_push(message()).is_ok());
        }
        while pop(&queue).is_some() {}
        assert!(queue.messages().capacity() <= KEPT_WHEN_EMPTY);
    }
}
