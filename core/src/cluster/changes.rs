//! A session's changes between nodes: the node where a change happens (the
//! one holding the app's bridge for `resource_updated`, the one that took
//! the update for list changes) publishes it to
//! `{prefix}.changes.{session_id}`, and every node with a watcher of that
//! session hears it there and tells its watchers.
//!
//! A node subscribes to a session's subject when the session gets its first
//! watcher here, and drops the subscription with the last one: an idle
//! session costs no subscription on any node, and a change nobody watches
//! costs one message that NATS drops at once (the publisher cannot know
//! whether anyone listens, and asking would cost more than the message).
//!
//! The publishing node tells its own watchers itself, at once and even
//! while NATS is out of reach, and skips its own messages when they come
//! back (the [`NODE`] header): each watcher hears each change once. One
//! publisher's changes arrive in the order it made them (one outbox, one
//! connection, one subject).
//!
//! A change never holds the app up: it is queued for NATS at once or not at
//! all, and one that cannot be sent is logged, a few lines a minute
//! ([`LogBudget`]), as an app that floods its bridge with
//! `resource_updated` while NATS is slow could otherwise fill the log.
//!
//! A list change is heard only after this node read the session's entry in
//! KV again: the update was written there before it was announced, but this
//! node's watch of the bucket may bring it later than the announcement, and
//! a client that lists again on hearing of a change must get the new list.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use async_nats::HeaderMap;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::Node;
use super::directory::NatsDirectory;
use super::outbox::{Outbox, Outgoing};
use super::wire::{self, NODE};
use crate::escape::Outside;
use crate::hub::{SessionEvent, WeakHub};
use crate::log_budget::LogBudget;

/// Longest a new watcher waits for its subscription to be made.
const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

/// The changes of the sessions watched on this node, to and from the
/// others.
pub(crate) struct Changes {
    node: Arc<Node>,
    directory: Arc<NatsDirectory>,
    outbox: Outbox,
    hub: OnceLock<WeakHub>,
    /// The task hearing each session watched here, which holds its
    /// subscription.
    watched: Mutex<HashMap<Arc<str>, JoinHandle<()>>>,
    /// Warnings about changes not sent.
    unsent: Arc<LogBudget>,
}

impl Changes {
    pub(crate) fn new(node: Arc<Node>, directory: Arc<NatsDirectory>, outbox: Outbox) -> Self {
        Self {
            node,
            directory,
            outbox,
            hub: OnceLock::new(),
            watched: Mutex::default(),
            unsent: Arc::default(),
        }
    }

    /// Sets the hub that the changes heard go to.
    pub(crate) fn start(&self, hub: WeakHub) {
        let _ = self.hub.set(hub);
    }

    fn subject(&self, session_id: &str) -> String {
        format!("{}.changes.{session_id}", self.node.prefix)
    }

    fn watched(&self) -> MutexGuard<'_, HashMap<Arc<str>, JoinHandle<()>>> {
        self.watched.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the other nodes of a change made here, without waiting.
    pub(crate) fn publish(&self, session_id: &str, change: &SessionEvent) {
        let mut headers = HeaderMap::new();
        headers.insert(NODE, self.node.id.as_str());
        let message = Outgoing {
            subject: self.subject(session_id).into(),
            reply: None,
            headers: Some(headers),
            payload: wire::change_message(change),
            caller: None,
            unsent_warnings: Some(self.unsent.clone()),
        };
        if let Err(error) = self.outbox.try_send(message)
            && let Some(left_out) = self.unsent.allow()
        {
            tracing::warn!(
                session = Outside::session(session_id).field(),
                %error,
                left_out,
                "a session's change was not sent to the other nodes"
            );
        }
    }

    /// Hears the session's changes made on other nodes, until
    /// [`Changes::unwatch`]; the future ends once subscribed (or when that
    /// failed, or took too long).
    pub(crate) fn watch(&self, session_id: &Arc<str>) -> BoxFuture<'static, ()> {
        let Some(hub) = self.hub.get().cloned() else {
            return Box::pin(std::future::ready(()));
        };
        let (subscribed, ready) = oneshot::channel();
        let hearing = Hearing {
            hub,
            node: self.node.clone(),
            directory: self.directory.clone(),
            session_id: session_id.clone(),
        };
        let task = tokio::spawn(hearing.run(self.subject(session_id), subscribed));
        if let Some(old) = self.watched().insert(session_id.clone(), task) {
            old.abort();
        }
        Box::pin(async move {
            let _ = tokio::time::timeout(SUBSCRIBE_WAIT, ready).await;
        })
    }

    /// Stops hearing the session's changes: its subscription goes with the
    /// task that holds it.
    pub(crate) fn unwatch(&self, session_id: &str) {
        if let Some(task) = self.watched().remove(session_id) {
            task.abort();
        }
    }
}

/// What the task hearing one session's changes needs.
struct Hearing {
    hub: WeakHub,
    node: Arc<Node>,
    directory: Arc<NatsDirectory>,
    session_id: Arc<str>,
}

impl Hearing {
    async fn run(self, subject: String, subscribed: oneshot::Sender<()>) {
        let session = Outside::session(&self.session_id);
        let mut messages = match self.node.client.subscribe(subject).await {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(session = session.field(), %error, "changes made on other nodes cannot reach this session's watchers here");
                return;
            }
        };
        let _ = subscribed.send(());
        while let Some(message) = messages.next().await {
            let own = message
                .headers
                .as_ref()
                .and_then(|headers| headers.get(NODE))
                .is_some_and(|node| node.as_str() == self.node.id);
            if own {
                continue;
            }
            let change = match wire::read_change(&message.payload) {
                Ok(Some(change)) => change,
                Ok(None) => continue,
                Err(problem) => {
                    tracing::debug!(
                        session = session.field(),
                        problem = Outside::within(&problem, crate::escape::TEXT_LIMIT).field(),
                        "unreadable change from another node ignored"
                    );
                    continue;
                }
            };
            if !matches!(change, SessionEvent::ResourceUpdated(_))
                && let Err(error) = self.directory.fetch(&self.session_id).await
            {
                tracing::debug!(session = session.field(), %error, "the session's new lists cannot be read ahead of the watch");
            }
            let Some(hub) = self.hub.upgrade() else {
                return;
            };
            hub.hear_change(&self.session_id, change);
        }
    }
}
