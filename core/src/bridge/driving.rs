//! Driving a bridge: reading the app's messages, pinging it, watching that
//! it reads, and, once the bridge ended, reading what it still sends for a
//! moment so it can close cleanly.
//!
//! Written as a state machine rather than an `async fn`, because one runs
//! for every attached bridge for as long as it lives: an `async fn` keeps
//! room for its arguments twice and for every branch of its `select!`, some
//! 600 bytes per idle session, where [`Driving`] holds its few fields once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tokio::time::{Instant, Sleep};

use super::{Bridge, Inbound, SessionChange, proxy};
use crate::escape::Outside;
use crate::outcome::BridgeEnd;
use crate::proto::{self, proxy_message};

/// How a bridge is kept alive, and when it is given up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Liveness {
    /// How often the app is pinged.
    pub ping_interval: Duration,
    /// Silent ping intervals after which the bridge is dropped.
    pub missed_pings_allowed: u32,
    /// How long queued messages may stay unread before the bridge is dropped.
    pub write_timeout: Duration,
}

/// How long an ended bridge keeps reading (and ignoring) the app's messages,
/// so the app can complete a closing handshake before the connection drops.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Messages read in one poll before the driver lets other tasks run.
const MESSAGES_PER_POLL: usize = 64;

/// Watches the outbound queue: messages waiting while the transport takes
/// none for `limit` mean the app stopped reading (its TCP window, or its
/// HTTP/2 stream window, is full).
struct StallWatch {
    limit: Duration,
    last_taken: u64,
    since: Option<Instant>,
}

impl StallWatch {
    /// Checks four times per limit, so a stall is seen at most a quarter
    /// of the limit late.
    fn period(limit: Duration) -> Duration {
        (limit / 4).max(Duration::from_millis(10))
    }

    /// Whether the app has left messages unread for longer than the limit.
    fn stalled(&mut self, bridge: &Bridge) -> bool {
        let taken = bridge.outbound.taken.load(Ordering::Relaxed);
        let waiting = bridge.outbound.queued.load(Ordering::Relaxed) > taken;
        if !waiting || taken != self.last_taken {
            self.last_taken = taken;
            self.since = None;
            return false;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        since.elapsed() >= self.limit
    }
}

/// Where a bridge's driver is.
enum Phase {
    /// Reading the app's messages until the bridge ends.
    Driving,
    /// The bridge ended (and its owner was told): reading what the app
    /// still sends until it stops or the grace runs out.
    Draining,
    Done,
}

/// The state of one bridge's driver. [`Driving::poll`] returns
/// [`Driven::Ended`] once, when the bridge ends, and [`Driven::Done`] after
/// the grace given to the app's closing handshake.
pub(crate) struct Driving {
    liveness: Liveness,
    /// One timer for the pings, the stall watch and the grace, set to
    /// whichever is due first: a timer is an allocation and a wheel entry
    /// per idle bridge.
    timer: Pin<Box<Sleep>>,
    next_ping: Instant,
    next_watch: Instant,
    last_heard: Instant,
    nonce: u64,
    watch: StallWatch,
    phase: Phase,
}

/// What a poll of [`Driving`] came to.
pub(crate) enum Driven {
    /// The bridge ended, for this reason: its owner detaches it now.
    Ended(BridgeEnd),
    /// The app's side is done too; the driver's task may end.
    Done,
}

impl Driving {
    pub(crate) fn new(liveness: Liveness) -> Self {
        let now = Instant::now();
        let watch_period = StallWatch::period(liveness.write_timeout);
        let mut driving = Self {
            liveness,
            timer: Box::pin(tokio::time::sleep_until(now)),
            next_ping: now + liveness.ping_interval,
            next_watch: now + watch_period,
            last_heard: now,
            nonce: 0,
            watch: StallWatch {
                limit: liveness.write_timeout,
                last_taken: 0,
                since: None,
            },
            phase: Phase::Driving,
        };
        let due = driving.due();
        driving.timer.as_mut().reset(due);
        driving
    }

    fn watching(&self) -> bool {
        !self.liveness.write_timeout.is_zero()
    }

    fn due(&self) -> Instant {
        if self.watching() {
            self.next_ping.min(self.next_watch)
        } else {
            self.next_ping
        }
    }

    /// Drives the bridge: the app's messages dispatched (its changes to
    /// `on_change`), pings sent, the bridge ended when the app falls silent
    /// or stops reading.
    pub(crate) fn poll<S>(
        &mut self,
        cx: &mut Context<'_>,
        bridge: &Bridge,
        mut inbound: Pin<&mut S>,
        on_change: &mut impl FnMut(SessionChange),
    ) -> Poll<Driven>
    where
        S: Stream<Item = Inbound> + ?Sized,
    {
        match self.phase {
            Phase::Driving => {}
            Phase::Draining => return self.poll_drain(cx, inbound),
            Phase::Done => return Poll::Ready(Driven::Done),
        }
        // Registered before each look, so an end in between wakes it.
        bridge.closed.register_driver(cx.waker());
        for _ in 0..MESSAGES_PER_POLL {
            if bridge.closed.is_closed() {
                return self.ended(bridge.end_reason().unwrap_or(BridgeEnd::Disconnected));
            }
            match inbound.as_mut().poll_next(cx) {
                Poll::Ready(None) => {
                    bridge.end(BridgeEnd::Disconnected);
                    return self.ended(bridge.end_reason().unwrap_or(BridgeEnd::Disconnected));
                }
                Poll::Ready(Some(message)) => {
                    self.last_heard = Instant::now();
                    match message {
                        Inbound::Message(message) => {
                            if let Some(change) = bridge.handle(message) {
                                on_change(change);
                            }
                        }
                        Inbound::Malformed {
                            request_id,
                            result,
                            problem,
                        } => bridge.fail_malformed(request_id, result, &problem),
                        Inbound::Ended(end) => {
                            bridge.end(end);
                            return self.ended(bridge.end_reason().unwrap_or(end));
                        }
                    }
                    continue;
                }
                Poll::Pending => {}
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if let Some(end) = self.tick(bridge) {
                return self.ended(end);
            }
            // The timer was reset: the next round polls it again, which
            // registers it.
        }
        // Plenty read: let the other tasks run, and come back at once.
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// The timer fired: a ping when one is due, the stall watch when it is;
    /// the bridge's end when either gives up on the app.
    fn tick(&mut self, bridge: &Bridge) -> Option<BridgeEnd> {
        let now = Instant::now();
        if now >= self.next_ping {
            let period = self.liveness.ping_interval;
            let silence_limit = period.saturating_mul(self.liveness.missed_pings_allowed.max(1));
            if self.last_heard.elapsed() >= silence_limit {
                tracing::warn!(
                    session = Outside::session(&bridge.session_id).field(),
                    "bridge silent too long; dropping it"
                );
                bridge.end(BridgeEnd::Unresponsive);
                return Some(bridge.end_reason().unwrap_or(BridgeEnd::Unresponsive));
            }
            self.nonce += 1;
            bridge.notify(proxy(proxy_message::Kind::Ping(proto::Ping {
                nonce: self.nonce,
            })));
            self.next_ping = now + period;
        }
        if self.watching() && now >= self.next_watch {
            if self.watch.stalled(bridge) {
                tracing::warn!(
                    session = Outside::session(&bridge.session_id).field(),
                    "the app stopped reading its bridge; dropping it"
                );
                bridge.end(BridgeEnd::Stalled);
                return Some(bridge.end_reason().unwrap_or(BridgeEnd::Stalled));
            }
            self.next_watch = now + StallWatch::period(self.liveness.write_timeout);
        }
        let due = self.due();
        self.timer.as_mut().reset(due);
        None
    }

    /// The bridge ended: the grace starts, and the owner hears why.
    fn ended(&mut self, end: BridgeEnd) -> Poll<Driven> {
        self.phase = Phase::Draining;
        self.timer.as_mut().reset(Instant::now() + CLOSE_GRACE);
        Poll::Ready(Driven::Ended(end))
    }

    /// Reads (and ignores) what an ended bridge's app still sends, until it
    /// stops or the grace runs out.
    fn poll_drain<S>(&mut self, cx: &mut Context<'_>, mut inbound: Pin<&mut S>) -> Poll<Driven>
    where
        S: Stream<Item = Inbound> + ?Sized,
    {
        for _ in 0..MESSAGES_PER_POLL {
            match inbound.as_mut().poll_next(cx) {
                Poll::Ready(Some(_)) => {}
                Poll::Ready(None) => return self.done(),
                Poll::Pending => {
                    return match self.timer.as_mut().poll(cx) {
                        Poll::Ready(()) => self.done(),
                        Poll::Pending => Poll::Pending,
                    };
                }
            }
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            return self.done();
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn done(&mut self) -> Poll<Driven> {
        self.phase = Phase::Done;
        Poll::Ready(Driven::Done)
    }
}
