//! Access decisions: which credential opens what. The one place that says
//! whether a token may create sessions or touch a given session, for every
//! transport, and which [`Caller`] a request that got in is.

use std::sync::Arc;

use super::{Hub, HubError};
use crate::auth::{AuthError, BearerToken, Credential, Side};
use crate::caller::{Caller, CallerKind};

impl Hub {
    /// Whether `credential` may create sessions: only the app token can.
    pub fn authorize_create(&self, credential: Credential<'_>) -> Result<(), AuthError> {
        let token = &self.inner.config.app_token;
        if credential.side == Side::App && credential.opens(token) {
            Ok(())
        } else if credential.bearer.is_none() {
            Err(AuthError::NoAppToken)
        } else {
            Err(AuthError::AppToken)
        }
    }

    /// Whether `credential` may be checked against a session at all, from the
    /// headers alone: a verified access token, the global token of its side
    /// where that still opens sessions, or a token shaped like one of that
    /// side's session tokens where those are accepted. Transports call this
    /// before reading a body or decoding a message that names the session;
    /// [`Hub::authorize`] decides once the id is known.
    pub fn precheck(&self, credential: Credential<'_>) -> Result<(), AuthError> {
        let session_token =
            self.session_tokens_open(credential.side) && credential.looks_like_session_token();
        if credential.oauth.is_some() || self.global_opens_sessions(credential) || session_token {
            Ok(())
        } else {
            Err(self.refusal(credential.side))
        }
    }

    /// The one decision about who may touch a session: its own token for
    /// that side (`session_token` for the app, `mcp_token` for MCP), or, unless
    /// `require_session_tokens` is set, the side's global token (an empty
    /// global token opening everything, as in the original proxy). A
    /// session's token never opens another session. A verified OAuth access
    /// token opens only the sessions bound to its subject (in either mode);
    /// with `oauth.only`, nothing else opens the MCP side. An unknown session
    /// is [`HubError::UnknownSession`] for a credential that could have
    /// opened it, so an app with a stale session can tell that it must
    /// register again. What got in is answered as the call's [`Caller`].
    pub async fn authorize(
        &self,
        session_id: &str,
        credential: Credential<'_>,
    ) -> Result<Caller, HubError> {
        if let Some(identity) = credential.oauth {
            let record = self.record(session_id).await?;
            if !record.credentials.owned_by(identity) {
                return Err(AuthError::NotOwner.into());
            }
            return Ok(Caller::oauth(Arc::clone(identity)));
        }
        if self.global_opens_sessions(credential) {
            let open = self.global_token(credential.side).is_open();
            return Ok(Caller::of_kind(if open {
                CallerKind::None
            } else {
                CallerKind::GlobalToken
            }));
        }
        self.precheck(credential)?;
        let record = self.record(session_id).await?;
        if credential.opens_session(&record.credentials) {
            Ok(Caller::of_kind(CallerKind::SessionToken))
        } else {
            Err(self.refusal(credential.side).into())
        }
    }

    fn global_token(&self, side: Side) -> &BearerToken {
        match side {
            Side::App => &self.inner.config.app_token,
            Side::Mcp => &self.inner.config.openclaw_token,
        }
    }

    /// Whether the global token of the credential's side opens sessions and
    /// was presented (or is empty). With OAuth on, an empty OpenClaw token
    /// opens nothing: access tokens are then the way in.
    fn global_opens_sessions(&self, credential: Credential<'_>) -> bool {
        let config = &self.inner.config;
        if config.require_session_tokens || credential.oauth.is_some() {
            return false;
        }
        let token = self.global_token(credential.side);
        if credential.side == Side::Mcp
            && let Some(oauth) = &config.oauth
            && (oauth.only || token.is_open())
        {
            return false;
        }
        credential.opens(token)
    }

    /// Whether sessions' own tokens of `side` open them: always, but for
    /// the MCP side when only OAuth access tokens do.
    fn session_tokens_open(&self, side: Side) -> bool {
        side == Side::App
            || !self
                .inner
                .config
                .oauth
                .as_ref()
                .is_some_and(|oauth| oauth.only)
    }

    fn refusal(&self, side: Side) -> AuthError {
        let config = &self.inner.config;
        let global_allowed = !config.require_session_tokens;
        match (side, &config.oauth) {
            (Side::App, _) => AuthError::SessionToken { global_allowed },
            (Side::Mcp, Some(oauth)) if oauth.only => AuthError::OAuthOnly,
            (Side::Mcp, oauth) => AuthError::McpToken {
                global_allowed: global_allowed
                    && !(oauth.is_some() && self.global_token(side).is_open()),
                oauth: oauth.is_some(),
            },
        }
    }
}
