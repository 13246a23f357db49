//! Who called, as far as the proxy verified it: the credential that opened
//! the MCP request and, for an OAuth access token, what the token says.
//!
//! An app serving several people answers "who asked?" from this, not from
//! anything the agent says: the proxy fills it from the credential it
//! checked, and never passes the token itself.

pub use openclaw_proxy_proto::CallerKind;
use openclaw_proxy_proto::v1::CallerIdentity;

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
        Self {
            kind: CallerKind::parse(&caller.kind),
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
