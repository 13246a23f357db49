//! Access decisions: which credential opens what. The one place that says
//! whether a token may create sessions or touch a given session, for every
//! transport.

use super::{Hub, HubError};
use crate::auth::{AuthError, Credential, Side};

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
    /// headers alone: the global token of its side where that still opens
    /// sessions, or a token shaped like one of that side's session tokens.
    /// Transports call this before reading a body or decoding a message that
    /// names the session; [`Hub::authorize`] decides once the id is known.
    pub fn precheck(&self, credential: Credential<'_>) -> Result<(), AuthError> {
        if self.global_opens_sessions(credential) || credential.looks_like_session_token() {
            Ok(())
        } else {
            Err(self.refusal(credential.side))
        }
    }

    /// The one decision about who may touch a session: its own token for
    /// that side (`session_token` for the app, `mcp_token` for MCP), or, unless
    /// `require_session_tokens` is set, the side's global token (an empty
    /// global token opening everything, as in the original proxy). A
    /// session's token never opens another session. An unknown session is
    /// [`HubError::UnknownSession`] for a credential that could have opened it,
    /// so an app with a stale session can tell that it must register again.
    pub async fn authorize(
        &self,
        session_id: &str,
        credential: Credential<'_>,
    ) -> Result<(), HubError> {
        if self.global_opens_sessions(credential) {
            return Ok(());
        }
        self.precheck(credential)?;
        let record = self.record(session_id).await?;
        match credential.bearer {
            Some(bearer) if record.credentials.accepts(credential.side, bearer) => Ok(()),
            _ => Err(self.refusal(credential.side).into()),
        }
    }

    /// Whether the global token of the credential's side opens sessions and
    /// was presented (or is empty).
    fn global_opens_sessions(&self, credential: Credential<'_>) -> bool {
        let config = &self.inner.config;
        if config.require_session_tokens {
            return false;
        }
        let token = match credential.side {
            Side::App => &config.app_token,
            Side::Mcp => &config.openclaw_token,
        };
        credential.opens(token)
    }

    fn refusal(&self, side: Side) -> AuthError {
        let global_allowed = !self.inner.config.require_session_tokens;
        match side {
            Side::App => AuthError::SessionToken { global_allowed },
            Side::Mcp => AuthError::McpToken { global_allowed },
        }
    }
}
