//! Who called, as far as the proxy verified it: the credential that opened
//! the MCP request and, for an OAuth access token, what the token says.
//!
//! An app serving several people answers "who asked?" from this, not from
//! anything the agent says: the proxy fills it from the credential it
//! checked, and never passes the token itself.

use openclaw_proxy_proto::v1::CallerIdentity;

/// Which credential opened the MCP request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CallerKind {
    /// No credential was needed (the proxy's MCP side is open), or the
    /// proxy did not say.
    #[default]
    None,
    /// The session's own `mcp_token`.
    SessionToken,
    /// The proxy's global OpenClaw token.
    GlobalToken,
    /// An OAuth access token the proxy verified.
    OAuth,
}

/// The verified caller of a call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caller {
    /// Which credential opened the request.
    pub kind: CallerKind,
    /// For [`CallerKind::OAuth`]: the token's issuer; empty otherwise.
    pub issuer: String,
    /// For [`CallerKind::OAuth`]: the signed-in subject; empty otherwise.
    pub subject: String,
    /// For [`CallerKind::OAuth`]: the OAuth client the token was issued
    /// to; empty when unknown.
    pub client_id: String,
    /// For [`CallerKind::OAuth`]: the scopes the token grants.
    pub scopes: Vec<String>,
}

impl Caller {
    pub(crate) fn from_proto(caller: Option<CallerIdentity>) -> Self {
        let Some(caller) = caller else {
            return Self::default();
        };
        let kind = match caller.kind.as_str() {
            "session_token" => CallerKind::SessionToken,
            "global_token" => CallerKind::GlobalToken,
            "oauth" => CallerKind::OAuth,
            _ => CallerKind::None,
        };
        Self {
            kind,
            issuer: caller.issuer,
            subject: caller.subject,
            client_id: caller.client_id,
            scopes: caller.scopes,
        }
    }

    /// The signed-in subject, when an OAuth access token opened the request.
    pub fn subject(&self) -> Option<&str> {
        (self.kind == CallerKind::OAuth && !self.subject.is_empty()).then_some(&self.subject)
    }
}
