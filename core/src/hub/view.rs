//! The sessions one signed-in user owns, for their one-URL view (the edge's
//! `POST /v1/mcp` with an access token and no session named): which
//! sessions are theirs, and a signal each time the sessions known here
//! change, so a view's listeners look again only when something happened.
//! Who may see what is decided here, by the sessions' owners; the view's
//! names and routing are the edge's.

use std::sync::Arc;

use super::Hub;
use crate::caller::{OAuthIdentity, Owner};
use crate::directory::SessionRecord;

impl Hub {
    /// The live sessions bound to `identity`'s issuer and subject, as this
    /// node knows them (in cluster mode every node knows every session).
    /// Sessions without an owner are in no one's view.
    pub fn owned_sessions(&self, identity: &OAuthIdentity) -> Vec<Arc<SessionRecord>> {
        let owner = Owner {
            subject: identity.subject.clone(),
            issuer: identity.issuer.clone(),
        };
        self.inner.directory.owned_by(&owner)
    }

    /// Ticks each time a session known here is created, updated or removed.
    pub fn session_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.directory.changes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::config;
    use super::*;
    use crate::audit::Origin;
    use crate::proto;

    fn owned_request(subject: &str, name: &str) -> proto::CreateSessionRequest {
        proto::CreateSessionRequest {
            metadata: Some(proto::SessionMetadata {
                device_id: "d".into(),
                device_name: "Anna's Phone".into(),
                app_version: "1".into(),
                chat_id: String::new(),
            }),
            owner: Some(proto::SessionOwner {
                subject: subject.into(),
                issuer: "https://issuer.example".into(),
            }),
            name: name.into(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_users_sessions_keep_distinct_names_and_others_see_none_of_them() {
        let hub = Hub::new(config());
        let mut changes = hub.session_changes();
        let create = |request| hub.create_session(request, Origin::default(), None);
        let first = create(owned_request("alice", "notes"))
            .await
            .expect("first");
        let second = create(owned_request("alice", "notes"))
            .await
            .expect("second");
        let third = create(owned_request("alice", "")).await.expect("third");
        let bobs = create(owned_request("bob", "notes")).await.expect("bob's");
        assert_eq!(
            (
                first.name.as_str(),
                second.name.as_str(),
                third.name.as_str()
            ),
            ("notes", "notes_2", "Anna_s_Phone")
        );
        assert_eq!(bobs.name, "notes");
        assert!(changes.has_changed().expect("open"));
        changes.mark_unchanged();
        let alice = OAuthIdentity {
            issuer: "https://issuer.example".into(),
            subject: "alice".into(),
            ..OAuthIdentity::default()
        };
        let mut ids: Vec<String> = hub
            .owned_sessions(&alice)
            .iter()
            .map(|record| record.id.to_string())
            .collect();
        ids.sort();
        let mut expected = vec![
            first.session_id,
            second.session_id.clone(),
            third.session_id,
        ];
        expected.sort();
        assert_eq!(ids, expected);
        let elsewhere = OAuthIdentity {
            issuer: "https://other.example".into(),
            ..alice.clone()
        };
        assert!(hub.owned_sessions(&elsewhere).is_empty());
        let refused = create(owned_request("alice", "no__te")).await;
        assert!(matches!(
            refused,
            Err(super::super::HubError::InvalidName(_))
        ));
        // A name set free is given again.
        hub.inner
            .directory
            .remove(&second.session_id)
            .await
            .expect("removed");
        assert!(changes.has_changed().expect("open"));
        let again = create(owned_request("alice", "notes"))
            .await
            .expect("again");
        assert_eq!(again.name, "notes_2");
    }
}
