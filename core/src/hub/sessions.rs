//! Sessions: creation (within the limits, with freshly minted tokens), what
//! a session is, its tools replaced, and its deletion.

use std::sync::Arc;

use super::{Hub, HubError};
use crate::audit::{self, Origin};
use crate::auth::{Credential, SessionCredentials, SessionTokens};
use crate::caller::Owner;
use crate::catalog::{self, Catalog};
use crate::directory::{Offer, SessionRecord};
use crate::escape::Outside;
use crate::limits::LimitError;
use crate::outcome::BridgeEnd;
use crate::progress::LogLevel;
use crate::proto;
use crate::tools::{Tool, validate_tools};
use openclaw_proxy_proto::session_name;

/// What a delete found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// The session existed and is gone now.
    Deleted,
    /// The session was gone already: deleted, expired, or never created.
    AlreadyGone,
}

impl Hub {
    /// Registers a session with validated tools, for a request from `origin`
    /// (audit log); `client` is the address its creation rate is counted
    /// against (`None` when unknown).
    pub async fn create_session(
        &self,
        request: proto::CreateSessionRequest,
        origin: Origin,
        client: Option<std::net::IpAddr>,
    ) -> Result<proto::CreateSessionResponse, HubError> {
        if self.inner.shutdown.is_cancelled() {
            return Err(HubError::ShuttingDown);
        }
        let limits = &self.inner.config.limits;
        if let (Some(creations), Some(client)) = (&self.inner.creations, client) {
            creations.check(client)?;
        }
        if limits.max_sessions > 0 && self.inner.directory.len() >= limits.max_sessions {
            return Err(LimitError::TooManySessions {
                limit: limits.max_sessions,
            }
            .into());
        }
        limits.check_tools(&request.tools)?;
        limits.check_declarations(
            &request.tools,
            &request.resources,
            &request.resource_templates,
            &request.prompts,
        )?;
        let tools = validate_tools(request.tools)?;
        self.fits_in_all(&tools)?;
        let catalog = catalog::validate(
            &catalog::empty(),
            Some(request.resources),
            Some(request.resource_templates),
            Some(request.prompts),
        )?;
        let owner = self.owner(request.owner)?;
        let metadata = request.metadata.unwrap_or_default();
        let name = self.session_name(&request.name, &metadata, owner.as_ref())?;
        let id: Arc<str> = uuid::Uuid::new_v4().to_string().into();
        let tokens = SessionTokens::mint()?;
        let credentials = SessionCredentials {
            owner,
            ..tokens.credentials()
        };
        let record = SessionRecord::new(
            id.clone(),
            metadata,
            self.inner.tool_sets.intern(tools),
            credentials,
        )
        .with_name(name.clone())
        .with_catalog(catalog);
        self.inner.directory.create(Arc::new(record)).await?;
        audit::event("session_created", Outside::session(&id), origin);
        Ok(proto::CreateSessionResponse {
            session_id: id.to_string(),
            session_token: tokens.session_token,
            mcp_token: tokens.mcp_token,
            name: name.to_string(),
        })
    }

    /// The name a new session gets in its owner's view: the one it asked
    /// for (checked) or the default made from its metadata, with the
    /// first free suffix when another live session of the same owner known
    /// here holds it already. Assigned once, so it stays the session's for
    /// its life.
    fn session_name(
        &self,
        asked: &str,
        metadata: &proto::SessionMetadata,
        owner: Option<&Owner>,
    ) -> Result<Arc<str>, HubError> {
        let name = if asked.is_empty() {
            session_name::default_name([metadata.device_name.as_str(), metadata.device_id.as_str()])
        } else {
            session_name::validate(asked)?;
            asked.to_owned()
        };
        let Some(owner) = owner else {
            return Ok(name.into());
        };
        let siblings = self.inner.directory.owned_by(owner);
        let free = session_name::first_free(&name, |candidate| {
            siblings.iter().any(|record| &*record.name == candidate)
        });
        Ok(free.into())
    }

    /// Whether the server can hold `tools` besides every tool set it holds
    /// (`OPENCLAW_PROXY_MAX_TOTAL_TOOL_DEFINITION_BYTES`).
    fn fits_in_all(&self, tools: &[Tool]) -> Result<(), HubError> {
        let limit = self.inner.config.limits.max_total_tool_definition_bytes;
        self.inner.tool_sets.fits(tools, limit).map_err(|held| {
            LimitError::TotalToolDefinitions {
                bytes: crate::tools::set_bytes(tools),
                held,
                limit,
            }
            .into()
        })
    }

    /// The owner a creation names, its issuer defaulting to the configured
    /// one; a subject is required.
    fn owner(&self, owner: Option<proto::SessionOwner>) -> Result<Option<Owner>, HubError> {
        let Some(owner) = owner else {
            return Ok(None);
        };
        if owner.subject.is_empty() {
            return Err(HubError::InvalidOwner(
                "owner.subject is empty: name the OAuth subject (the token's `sub`) the session belongs to, or leave owner out".into(),
            ));
        }
        let issuer = match (owner.issuer, &self.inner.config.oauth) {
            (issuer, _) if !issuer.is_empty() => issuer,
            (_, Some(oauth)) => oauth.issuer.clone(),
            (_, None) => {
                return Err(HubError::InvalidOwner(
                    "owner.issuer is empty and this server has no OAuth issuer configured (OPENCLAW_PROXY_OAUTH_ISSUER): name the issuer".into(),
                ));
            }
        };
        Ok(Some(Owner {
            subject: owner.subject,
            issuer,
        }))
    }

    /// Deletes a session for a request from `origin` that presents
    /// `credential`: the session's bridge ends and its calls fail at once.
    /// Idempotent: for a credential that could have opened it, a session that
    /// is gone (or never was) is [`Deletion::AlreadyGone`], not an error.
    pub async fn delete(
        &self,
        session_id: &str,
        credential: Credential<'_>,
        origin: Origin,
    ) -> Result<Deletion, HubError> {
        match self.authorize(session_id, credential).await {
            Ok(_) => {}
            Err(HubError::UnknownSession(_)) => return Ok(Deletion::AlreadyGone),
            Err(error) => return Err(error),
        }
        let existed = self.inner.directory.remove(session_id).await?;
        self.end_local_bridge(session_id, BridgeEnd::SessionDeleted);
        if !existed {
            return Ok(Deletion::AlreadyGone);
        }
        audit::event("session_deleted", Outside::session(session_id), origin);
        Ok(Deletion::Deleted)
    }

    /// Describes a live session. `calls_in_flight` counts the calls on
    /// bridges attached to this process.
    pub async fn get_session(
        &self,
        request: proto::GetSessionRequest,
    ) -> Result<proto::GetSessionResponse, HubError> {
        let record = self.record(&request.session_id).await?;
        let (bridge_connected, calls_in_flight) = match self.inner.local(&record.id) {
            Some(local) => {
                let state = local.state();
                (state.bridge.is_some(), state.calls_in_flight)
            }
            None => (false, 0),
        };
        let catalog = record.catalog();
        Ok(proto::GetSessionResponse {
            session_id: record.id.to_string(),
            metadata: Some(record.metadata.clone()),
            tools: record.tools().iter().map(Tool::to_proto).collect(),
            bridge_connected,
            calls_in_flight,
            resources: catalog.resources.iter().map(|r| r.to_proto()).collect(),
            resource_templates: catalog
                .resource_templates
                .iter()
                .map(|t| t.to_proto())
                .collect(),
            prompts: catalog.prompts.iter().map(|p| p.to_proto()).collect(),
            owner: record
                .credentials
                .owner
                .as_ref()
                .map(|owner| proto::SessionOwner {
                    subject: owner.subject.clone(),
                    issuer: owner.issuer.clone(),
                }),
            name: record.name.to_string(),
        })
    }

    /// The live session `session_id`, for what a policy matches on (its
    /// owner and metadata) and what it offers.
    pub async fn session_record(&self, session_id: &str) -> Result<Arc<SessionRecord>, HubError> {
        self.record(session_id).await
    }

    /// The tools of a live session, for MCP `tools/list`.
    pub async fn tools(&self, session_id: &str) -> Result<Arc<[Tool]>, HubError> {
        Ok(self.record(session_id).await?.tools())
    }

    /// Sets the least severe log record MCP clients of the session want
    /// (`logging/setLevel`, up to MCP 2025-11-25; later revisions name the
    /// level in each request).
    pub async fn set_log_level(&self, session_id: &str, level: LogLevel) -> Result<(), HubError> {
        self.record(session_id).await?.set_log_level(level);
        Ok(())
    }

    /// The level set with [`Hub::set_log_level`], when this process knows
    /// the session (answered from memory, without waiting).
    pub fn log_level(&self, session_id: &str) -> Option<LogLevel> {
        self.inner.directory.cached(session_id)?.log_level()
    }

    /// The resources, resource templates and prompts of a live session, for
    /// MCP's lists.
    pub async fn catalog(&self, session_id: &str) -> Result<Arc<Catalog>, HubError> {
        Ok(self.record(session_id).await?.catalog())
    }

    /// Whether a live session has this id.
    pub async fn session_exists(&self, session_id: &str) -> Result<bool, HubError> {
        match self.record(session_id).await {
            Ok(_) => Ok(true),
            Err(HubError::UnknownSession(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Replaces a session's tools and, for each list the update sets, its
    /// resources, resource templates or prompts; validated as at creation.
    pub async fn update_tools(
        &self,
        session_id: &str,
        update: proto::UpdateTools,
    ) -> Result<proto::UpdateToolsResponse, HubError> {
        let limits = &self.inner.config.limits;
        let record = self.record(session_id).await?;
        let current = record.catalog();
        let resources = update.resources.map(|list| list.resources);
        let resource_templates = update
            .resource_templates
            .map(|list| list.resource_templates);
        let prompts = update.prompts.map(|list| list.prompts);
        limits.check_tools(&update.tools)?;
        limits.check_declarations(
            &update.tools,
            resources.as_deref().unwrap_or_default(),
            resource_templates.as_deref().unwrap_or_default(),
            prompts.as_deref().unwrap_or_default(),
        )?;
        let tools = validate_tools(update.tools)?;
        self.fits_in_all(&tools)?;
        let catalog = catalog::validate(&current, resources, resource_templates, prompts)?;
        let tools_before = record.tools();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let answer = proto::UpdateToolsResponse {
            tools: count(tools.len()),
            resources: count(catalog.resources.len()),
            resource_templates: count(catalog.resource_templates.len()),
            prompts: count(catalog.prompts.len()),
        };
        let offer = Offer {
            tools: self.inner.tool_sets.intern(tools),
            catalog,
        };
        let after = offer.clone();
        if !self.inner.directory.update_offer(session_id, offer).await? {
            return Err(HubError::UnknownSession(session_id.to_owned()));
        }
        self.publish_update(
            session_id,
            (&tools_before, &current),
            (&after.tools, &after.catalog),
        );
        tracing::info!(
            session = Outside::session(session_id).field(),
            tools = answer.tools,
            resources = answer.resources,
            resource_templates = answer.resource_templates,
            prompts = answer.prompts,
            "tools updated"
        );
        Ok(answer)
    }

    /// Number of live sessions this process knows of.
    pub fn session_count(&self) -> usize {
        self.inner.directory.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, session};
    use super::*;
    use crate::config::CoreConfig;

    #[tokio::test(start_paused = true)]
    async fn sessions_and_tools_past_their_limits_are_refused_naming_the_setting() {
        let mut limited = config();
        limited.limits.max_sessions = 1;
        limited.limits.max_tools_per_session = 1;
        let hub = Hub::new(limited);
        let id = session(&hub).await;
        let refused = hub
            .create_session(
                proto::CreateSessionRequest::default(),
                Origin::default(),
                None,
            )
            .await
            .expect_err("second session");
        assert!(
            matches!(
                refused,
                HubError::Limit(LimitError::TooManySessions { limit: 1 })
            ),
            "{refused}"
        );
        let two = ["a", "b"].map(|name| proto::ToolDefinition {
            name: name.into(),
            ..Default::default()
        });
        let refused = hub
            .update_tools(
                &id,
                proto::UpdateTools {
                    tools: two.to_vec(),
                    ..Default::default()
                },
            )
            .await
            .expect_err("two tools");
        assert!(
            refused
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_TOOLS_PER_SESSION"),
            "{refused}"
        );
        // Deleting makes room again.
        let deleted = hub
            .delete(&id, Credential::app(None), Origin::default())
            .await
            .expect("delete");
        assert_eq!(deleted, Deletion::Deleted);
        session(&hub).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_delete_is_idempotent_for_a_credential_that_opens_the_session() {
        let hub = Hub::new(CoreConfig {
            app_token: crate::auth::BearerToken::new("app-secret"),
            ..config()
        });
        let id = session(&hub).await;
        let app = Credential::app(Some("Bearer app-secret"));
        let stranger = Credential::app(Some("Bearer wrong"));
        let refused = hub
            .delete(&id, stranger, Origin::default())
            .await
            .expect_err("a stranger");
        assert!(matches!(refused, HubError::Unauthenticated(_)), "{refused}");
        for expected in [Deletion::Deleted, Deletion::AlreadyGone] {
            let deleted = hub.delete(&id, app, Origin::default()).await;
            assert_eq!(deleted.expect("delete"), expected);
        }
        let never = hub.delete("never-created", app, Origin::default()).await;
        assert_eq!(never.expect("delete"), Deletion::AlreadyGone);
    }
}
