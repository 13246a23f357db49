//! Who called, as far as the proxy verified it, and who owns a session.
//!
//! An app serving many users must be able to answer "who asked?" without
//! trusting what the agent says about itself. The proxy knows which
//! credential opened the MCP request: a session's `mcp_token`, the global
//! OpenClaw token, nothing (an open server), or an OAuth access token whose
//! signature, issuer, audience and lifetime it checked. That verdict, never
//! the token, travels with every invocation as a [`Caller`].
//!
//! A session may be bound to an OAuth subject when it is created
//! ([`Owner`]); an access token then opens only the sessions its subject
//! owns. The rule is applied in one place, [`crate::Hub::authorize`].

use std::sync::Arc;

pub use openclaw_proxy_proto::CallerKind;

use crate::proto;

/// What a verified OAuth access token says about its bearer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OAuthIdentity {
    /// The token's `iss`.
    pub issuer: String,
    /// The subject: `sub`, or the claim configured instead.
    pub subject: String,
    /// The OAuth client the token was issued to (`client_id`, else `azp`);
    /// empty when the token names none.
    pub client_id: String,
    /// The scopes granted (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
}

/// Who called, as far as the proxy verified it: cheap to clone, carried by
/// every call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// Which credential opened the request.
    pub kind: CallerKind,
    /// For [`CallerKind::OAuth`], what the token said.
    pub identity: Option<Arc<OAuthIdentity>>,
}

impl Caller {
    /// A caller that presented `kind`, with no identity beyond it.
    pub fn of_kind(kind: CallerKind) -> Self {
        Self {
            kind,
            identity: None,
        }
    }

    /// A caller with a verified access token.
    pub fn oauth(identity: Arc<OAuthIdentity>) -> Self {
        Self {
            kind: CallerKind::OAuth,
            identity: Some(identity),
        }
    }

    /// The gRPC form.
    pub fn to_proto(&self) -> proto::CallerIdentity {
        let identity = self.identity.as_deref();
        let field = |get: fn(&OAuthIdentity) -> &String| identity.map(get).cloned();
        proto::CallerIdentity {
            kind: self.kind.as_str().to_owned(),
            issuer: field(|identity| &identity.issuer).unwrap_or_default(),
            subject: field(|identity| &identity.subject).unwrap_or_default(),
            client_id: field(|identity| &identity.client_id).unwrap_or_default(),
            scopes: identity
                .map(|identity| identity.scopes.clone())
                .unwrap_or_default(),
        }
    }

    /// The caller of its gRPC form (a call forwarded between nodes).
    pub fn from_proto(caller: proto::CallerIdentity) -> Self {
        let kind = CallerKind::parse(&caller.kind);
        let identity = (kind == CallerKind::OAuth).then(|| {
            Arc::new(OAuthIdentity {
                issuer: caller.issuer,
                subject: caller.subject,
                client_id: caller.client_id,
                scopes: caller.scopes,
            })
        });
        Self { kind, identity }
    }
}

/// The OAuth subject a session is bound to at creation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The subject, compared exactly with the token's.
    pub subject: String,
    /// The issuer, compared exactly with the token's `iss`.
    pub issuer: String,
}

impl Owner {
    /// Whether `identity` is this owner: same issuer, same subject.
    pub fn is(&self, identity: &OAuthIdentity) -> bool {
        self.subject == identity.subject && self.issuer == identity.issuer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oauth_caller_survives_its_grpc_form_and_others_carry_no_identity() {
        let caller = Caller::oauth(Arc::new(OAuthIdentity {
            issuer: "https://issuer.example".into(),
            subject: "alice".into(),
            client_id: "desktop".into(),
            scopes: vec!["mcp".into(), "profile".into()],
        }));
        let wire = caller.to_proto();
        assert_eq!(wire.kind, "oauth");
        assert_eq!(Caller::from_proto(wire), caller);
        let global = Caller::of_kind(CallerKind::GlobalToken).to_proto();
        assert_eq!(
            (global.kind.as_str(), global.subject.as_str()),
            ("global_token", "")
        );
        assert_eq!(Caller::from_proto(global).identity, None);
    }

    #[test]
    fn an_owner_is_one_subject_of_one_issuer() {
        let owner = Owner {
            subject: "alice".into(),
            issuer: "https://a.example".into(),
        };
        let mut identity = OAuthIdentity {
            issuer: "https://a.example".into(),
            subject: "alice".into(),
            ..OAuthIdentity::default()
        };
        assert!(owner.is(&identity));
        identity.issuer = "https://b.example".into();
        assert!(!owner.is(&identity));
        identity.issuer = "https://a.example".into();
        identity.subject = "alicE".into();
        assert!(!owner.is(&identity));
    }
}
