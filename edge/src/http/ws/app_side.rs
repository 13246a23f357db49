//! What the two halves of a WebSocket bridge share, and the app's frames as
//! the core reads them.
//!
//! The core reads the socket itself, in its driver task: each frame is
//! parsed where it is consumed, with no reader task and no queue between.
//! What the edge answers by itself (a pong to the app's JSON ping, an error
//! frame for a frame it cannot parse) goes to the writer through [`Shared`],
//! as does the reason the app's side broke, for the close code. Both are
//! plain structures rather than channels because every idle bridge pays for
//! them: a channel reserves a block of slots up front, these reserve
//! nothing until something is queued.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll};

use futures_util::stream::SplitStream;
use futures_util::{Stream, StreamExt};
use openclaw_proxy_core::escape::{Outside, TEXT_LIMIT};
use openclaw_proxy_core::log_budget::LogBudget;
use openclaw_proxy_core::metrics::{DropReason, Metrics};
use openclaw_proxy_core::{BridgeEnd, Inbound};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tungstenite::Message;

use super::fragments::Unfinished;
use super::frame::{Parsed, error_frame, parse_frame, pong};
use super::{CLOSE_TOO_BIG, Socket, violation_of};

/// How many of the edge's own replies (error frames, pongs) may wait; more
/// are dropped (the app is not reading them).
const REPLIES_CAPACITY: usize = 16;

/// Shared by the reader (the core's driver) and the writer of one bridge.
#[derive(Default)]
pub(super) struct Shared {
    replies: Mutex<VecDeque<Message>>,
    queued: Notify,
    /// Why the app's side of the socket failed, when the close code should
    /// say so rather than `1000`: set once by the reader, read by the writer
    /// when the bridge ends.
    violation: OnceLock<(u16, String)>,
    /// Whether the app is in the middle of a fragmented message.
    unfinished: Unfinished,
}

impl AsRef<Unfinished> for Shared {
    fn as_ref(&self) -> &Unfinished {
        &self.unfinished
    }
}

impl Shared {
    /// Queues a frame for the app; dropped if too many wait.
    fn reply(&self, frame: Value) {
        let mut replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        if replies.len() >= REPLIES_CAPACITY {
            tracing::debug!("bridge reply dropped: the app is not reading");
            return;
        }
        replies.push_back(Message::Text(frame.to_string().into()));
        drop(replies);
        self.queued.notify_one();
    }

    /// Waits until a reply is queued (or was, since the last wait).
    pub(super) async fn replies_queued(&self) {
        self.queued.notified().await;
    }

    /// The replies queued so far, oldest first.
    pub(super) fn take_replies(&self) -> Vec<Message> {
        let mut replies = self.replies.lock().unwrap_or_else(PoisonError::into_inner);
        replies.drain(..).collect()
    }

    /// The close code and reason of the app's violation, if it made one.
    pub(super) fn violation(&self) -> Option<&(u16, String)> {
        self.violation.get()
    }
}

/// The app's frames as core messages, until it closes: results, progress
/// and pongs pass on; bad frames are answered with error frames and
/// skipped. A message over `limit` ends the stream with
/// [`BridgeEnd::TooLarge`], so the calls it cut off name the limit.
pub(super) struct AppFrames {
    stream: SplitStream<Socket>,
    shared: Arc<Shared>,
    metrics: Arc<Metrics>,
    /// One malformed frame after another is one app's mistake, not news:
    /// the app hears of each, the log of a few per minute.
    warnings: LogBudget,
    limit: usize,
    ended: bool,
}

impl AppFrames {
    pub(super) fn new(
        stream: SplitStream<Socket>,
        shared: Arc<Shared>,
        metrics: Arc<Metrics>,
        limit: usize,
    ) -> Self {
        Self {
            stream,
            shared,
            metrics,
            warnings: LogBudget::default(),
            limit,
            ended: false,
        }
    }

    /// The end of the app's frames: the transport's reason, when it knows.
    fn end(&mut self) -> Option<Inbound> {
        self.ended = true;
        matches!(self.shared.violation(), Some((CLOSE_TOO_BIG, _)))
            .then_some(Inbound::Ended(BridgeEnd::TooLarge { limit: self.limit }))
    }

    /// What the core makes of one frame; `None` for a frame answered here.
    fn inbound(&self, frame: Message) -> Option<Inbound> {
        match frame {
            Message::Text(text) => match parse_frame(text.as_str()) {
                Ok(Parsed::ToCore(inbound)) => Some(inbound),
                Ok(Parsed::Ping) => {
                    self.shared.reply(json!({"type": "pong"}));
                    Some(pong())
                }
                Err(problem) => {
                    self.metrics.dropped(DropReason::Malformed);
                    // The problem may quote the frame, which may hold ids:
                    // in full only below INFO.
                    if let Some(suppressed) = self.warnings.allow() {
                        tracing::warn!(
                            suppressed,
                            "malformed bridge frame; the app got an error frame"
                        );
                    }
                    tracing::debug!(
                        problem = Outside::within(&problem, TEXT_LIMIT).field(),
                        "malformed bridge frame"
                    );
                    self.shared.reply(error_frame(&problem, ""));
                    None
                }
            },
            Message::Binary(_) => {
                self.metrics.dropped(DropReason::Malformed);
                let problem =
                    "binary frames are not part of the bridge protocol: send JSON text frames";
                self.shared.reply(error_frame(problem, ""));
                None
            }
            // Any frame from the app is a sign of life, but for pings and
            // pongs between the fragments of an unfinished message: a
            // message left unfinished for three ping intervals drops the
            // bridge, as on gRPC ([`super::fragments`]).
            Message::Pong(_) | Message::Ping(_) => (!self.shared.unfinished.is_set()).then(pong),
            Message::Close(_) | Message::Frame(_) => None,
        }
    }
}

impl Stream for AppFrames {
    type Item = Inbound;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Inbound>> {
        loop {
            if self.ended {
                return Poll::Ready(None);
            }
            let frame = match std::task::ready!(self.stream.poll_next_unpin(cx)) {
                None | Some(Ok(Message::Close(_))) => return Poll::Ready(self.end()),
                Some(Err(error)) => {
                    // A message over OPENCLAW_PROXY_MAX_BODY_BYTES, invalid
                    // UTF-8, a protocol violation: the close code says which.
                    if let Some(found) = violation_of(&error) {
                        let _ = self.shared.violation.set(found);
                    }
                    tracing::debug!(%error, "bridge socket error");
                    return Poll::Ready(self.end());
                }
                Some(Ok(frame)) => frame,
            };
            if let Some(inbound) = self.inbound(frame) {
                return Poll::Ready(Some(inbound));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_websocket_bridge_keeps_beside_the_core_stays_small() {
        // Each kept as long as its bridge lives: every byte is a byte of
        // every idle session.
        let frames = std::mem::size_of::<AppFrames>();
        assert!(frames <= 80, "the app's frames are {frames} bytes");
        // 112 before the flag of an unfinished fragmented message, which
        // finds no padding to sit in (the socket no longer carries axum's
        // wrapper, which held more).
        let shared = std::mem::size_of::<Shared>();
        assert!(shared <= 120, "the shared part is {shared} bytes");
    }
}
