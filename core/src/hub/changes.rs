//! What changes in a session while clients watch it: a resource the app
//! says changed, and its lists replaced by an update. Transports that hold a
//! stream to their client (the 2026-07-28 `subscriptions/listen` request,
//! the legacy SSE stream) watch a session and pass each change on; a session
//! nobody watches costs nothing (the feed is made on the first watch and
//! dropped with the last watcher), and a watcher that falls behind skips
//! what it missed rather than holding the app up.
//!
//! A change happens on one node (the node holding the app's bridge for
//! `resource_updated`, the node that took the update for list changes),
//! and a session's watchers may sit on any node. So the hub tells its own
//! watchers at once and hands the change to its [`RemoteDelivery`], which
//! carries it to the other nodes (in cluster mode: `cluster/changes.rs`);
//! a node hears the changes of a session only while it has a watcher for
//! it (the first watcher here asks for them, the last one's going ends
//! that), and passes what it hears to its watchers with [`Hub::hear_change`].
//! Each watcher hears each change once: the node where it happened delivers
//! it itself (its watchers hear it even when the other nodes cannot be
//! reached, and without a round trip), and the delivery never hands a node
//! back its own changes.
//!
//! [`RemoteDelivery`]: crate::delivery::RemoteDelivery

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, Weak};

use tokio::sync::broadcast;

use super::{Hub, HubError, Inner};
use crate::catalog::Catalog;
use crate::change::SessionEvent;
use crate::tools::Tool;

/// How many changes wait for a slow watcher before it skips ahead.
const BACKLOG: usize = 64;

/// The change feeds of the sessions watched here.
pub(super) type Feeds = HashMap<Arc<str>, broadcast::Sender<SessionEvent>>;

/// One watcher of a session's changes. The last one dropped ends the feed
/// here, and with it this node's interest in the session's changes made
/// elsewhere.
#[derive(Debug)]
pub struct Watch {
    hub: Weak<Inner>,
    session_id: Arc<str>,
    /// Always `Some` but while dropping: dropped under the feeds' lock, so
    /// that the count of watchers left is exact.
    receiver: Option<broadcast::Receiver<SessionEvent>>,
}

impl Watch {
    /// The next change; `Lagged` when this watcher fell behind and skipped
    /// some, `Closed` once the session is gone.
    pub async fn recv(&mut self) -> Result<SessionEvent, broadcast::error::RecvError> {
        match self.receiver.as_mut() {
            Some(receiver) => receiver.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(inner) = self.hub.upgrade() else {
            return;
        };
        let mut feeds = inner.changes.lock().unwrap_or_else(PoisonError::into_inner);
        drop(self.receiver.take());
        // The feed may be a newer one (the session's feed ended and another
        // began): it has watchers of its own, and stays.
        let unwatched = feeds
            .get(&self.session_id)
            .is_some_and(|feed| feed.receiver_count() == 0);
        if unwatched {
            feeds.remove(&self.session_id);
            inner.remote.unwatch_changes(&self.session_id);
        }
    }
}

impl Hub {
    /// The changes of a live session from now on, made here or on any other
    /// node. The feed ends when the session is deleted or expires.
    pub async fn watch(&self, session_id: &str) -> Result<Watch, HubError> {
        let record = self.record(session_id).await?;
        let (receiver, elsewhere) = {
            let mut feeds = self
                .inner
                .changes
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match feeds.get(&record.id) {
                Some(feed) => (feed.subscribe(), None),
                None => {
                    let (feed, receiver) = broadcast::channel(BACKLOG);
                    feeds.insert(record.id.clone(), feed);
                    (receiver, Some(self.inner.remote.watch_changes(&record.id)))
                }
            }
        };
        // Made before waiting: a caller that stops waiting drops the watch,
        // which ends what it began.
        let watch = Watch {
            hub: Arc::downgrade(&self.inner),
            session_id: record.id.clone(),
            receiver: Some(receiver),
        };
        if let Some(elsewhere) = elsewhere {
            elsewhere.await;
        }
        // Deleted between the look-up and the subscription, its last event
        // went out before anyone here listened: the watch would wait for
        // ever. Looked up again now that every later change reaches it.
        if !self.session_exists(&record.id).await? {
            return Err(HubError::UnknownSession(record.id.to_string()));
        }
        Ok(watch)
    }

    /// Tells the session's watchers, here and on other nodes, of a change
    /// that happened here.
    pub(super) fn publish(&self, session_id: &str, change: SessionEvent) {
        self.inner.remote.publish_change(session_id, &change);
        self.hear_change(session_id, change);
    }

    /// Tells the session's watchers here of a change; nothing when nobody
    /// here watches it. For changes made elsewhere, as the remote delivery
    /// hears them.
    pub(crate) fn hear_change(&self, session_id: &str, change: SessionEvent) {
        let feeds = self
            .inner
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = feeds.get(session_id) {
            // No receiver left: its last watch is being dropped, and
            // removes the feed.
            let _ = feed.send(change);
        }
    }

    /// Tells every watcher here that its session's tool list changed: the
    /// operator's policy, which each node applies itself, now shows the
    /// tools differently. Nothing crosses to other nodes (each reloads its
    /// own policy and tells its own watchers).
    pub fn tools_changed_here(&self) {
        let feeds = self
            .inner
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for feed in feeds.values() {
            let _ = feed.send(SessionEvent::ToolsChanged);
        }
    }

    /// Ends the session's feed: its watchers see it close.
    pub(super) fn end_feed(&self, session_id: &str) {
        let mut feeds = self
            .inner
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Under the lock, as every start and end of a feed: a watch begun
        // meanwhile keeps what it asked the delivery for.
        if feeds.remove(session_id).is_some() {
            self.inner.remote.unwatch_changes(session_id);
        }
    }

    /// Tells the watchers which lists an update changed.
    pub(super) fn publish_update(
        &self,
        session_id: &str,
        before: (&[Tool], &Catalog),
        after: (&[Tool], &Catalog),
    ) {
        if before.0 != after.0 {
            self.publish(session_id, SessionEvent::ToolsChanged);
        }
        if before.1.resources != after.1.resources
            || before.1.resource_templates != after.1.resource_templates
        {
            self.publish(session_id, SessionEvent::ResourcesChanged);
        }
        if before.1.prompts != after.1.prompts {
            self.publish(session_id, SessionEvent::PromptsChanged);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{hub, session};
    use super::*;
    use crate::audit::Origin;
    use crate::auth::Credential;
    use crate::proto;

    #[tokio::test]
    async fn watchers_hear_of_changed_lists_only_and_the_feed_ends_with_the_session() {
        let hub = hub();
        let id = session(&hub).await;
        let mut changes = hub.watch(&id).await.expect("watch");
        let prompts = proto::PromptList {
            prompts: vec![proto::PromptDefinition {
                name: "p".into(),
                ..Default::default()
            }],
        };
        let same_tools = vec![proto::ToolDefinition {
            name: "echo".into(),
            ..Default::default()
        }];
        hub.update_tools(
            &id,
            proto::UpdateTools {
                tools: same_tools,
                prompts: Some(prompts),
                ..Default::default()
            },
        )
        .await
        .expect("update");
        assert_eq!(
            changes.recv().await.ok(),
            Some(SessionEvent::PromptsChanged)
        );
        hub.publish(&id, SessionEvent::ResourceUpdated("a:1".into()));
        assert_eq!(
            changes.recv().await.ok(),
            Some(SessionEvent::ResourceUpdated("a:1".into()))
        );
        hub.delete(&id, Credential::app(None), Origin::default())
            .await
            .expect("delete");
        assert!(changes.recv().await.is_err(), "the feed ends");
    }

    #[tokio::test]
    async fn the_feed_lives_as_long_as_its_watchers() {
        let hub = hub();
        let id = session(&hub).await;
        let feeds = |hub: &Hub| hub.inner.changes.lock().expect("feeds").len();
        let first = hub.watch(&id).await.expect("watch");
        let mut second = hub.watch(&id).await.expect("watch");
        assert_eq!(feeds(&hub), 1, "one feed for both watchers");
        drop(first);
        assert_eq!(feeds(&hub), 1, "a watcher is left");
        hub.publish(&id, SessionEvent::ToolsChanged);
        assert_eq!(second.recv().await.ok(), Some(SessionEvent::ToolsChanged));
        drop(second);
        assert_eq!(feeds(&hub), 0, "an unwatched session has no feed");
        // A change nobody watches goes nowhere; a new watcher begins anew.
        hub.publish(&id, SessionEvent::PromptsChanged);
        let mut again = hub.watch(&id).await.expect("watch");
        hub.publish(&id, SessionEvent::ResourcesChanged);
        assert_eq!(
            again.recv().await.ok(),
            Some(SessionEvent::ResourcesChanged)
        );
    }
}
