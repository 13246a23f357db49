//! What changes in a session while clients watch it: a resource the app
//! says changed, and its lists replaced by an update. Transports that hold a
//! stream to their client (the 2026-07-28 `subscriptions/listen` request,
//! the legacy SSE stream) watch a session and pass each change on; a session
//! nobody watches costs nothing (the feed is made on the first watch and
//! dropped with the last watcher), and a watcher that falls behind skips
//! what it missed rather than holding the app up.
//!
//! Changes are seen on the node where they happen: the node holding the
//! app's bridge for `resource_updated`, the node that took the update for
//! list changes.

use std::sync::{Arc, PoisonError};

use tokio::sync::broadcast;

use super::{Hub, HubError};
use crate::catalog::Catalog;
use crate::tools::Tool;

/// How many changes wait for a slow watcher before it skips ahead.
const BACKLOG: usize = 64;

/// One change in a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// The app said this resource changed.
    ResourceUpdated(Arc<str>),
    /// The session's tools were replaced by a different list.
    ToolsChanged,
    /// Its resources or resource templates were replaced by different ones.
    ResourcesChanged,
    /// Its prompts were replaced by different ones.
    PromptsChanged,
}

impl Hub {
    /// The changes of a live session from now on. The feed ends when the
    /// session is deleted or expires here.
    pub async fn watch(
        &self,
        session_id: &str,
    ) -> Result<broadcast::Receiver<SessionEvent>, HubError> {
        let record = self.record(session_id).await?;
        let mut feeds = self
            .inner
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let feed = feeds
            .entry(record.id.clone())
            .or_insert_with(|| broadcast::channel(BACKLOG).0);
        Ok(feed.subscribe())
    }

    /// Tells the session's watchers of a change; forgets a feed nobody
    /// watches any more.
    pub(super) fn publish(&self, session_id: &str, change: SessionEvent) {
        let mut feeds = self
            .inner
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = feeds.get(session_id)
            && feed.send(change).is_err()
        {
            feeds.remove(session_id);
        }
    }

    /// Ends the session's feed: its watchers see it close.
    pub(super) fn end_feed(&self, session_id: &str) {
        self.inner
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(session_id);
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
}
