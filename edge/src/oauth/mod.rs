//! The MCP endpoints as an OAuth 2.1 resource server: JWT access tokens
//! checked against the configured issuer.
//!
//! Most MCP hosts other than OpenClaw sign their user in at an
//! authorization server and send its access token rather than a token the
//! app handed out. This module says whether such a token is good: its
//! signature with one of the issuer's keys ([`keys`]), an algorithm from the
//! configured list (never `none`, never HMAC: with public keys that would
//! let anyone sign), `iss`, `exp` and `nbf` within the leeway, the required
//! scopes, and an `aud` naming this server. What a good token says becomes
//! an [`OAuthIdentity`]; which sessions it opens is the hub's decision.
//!
//! Checking a signature costs far more than the rest of a call, and a
//! client sends the same token with every request, so a verified token is
//! remembered by its SHA-256 until it expires (a bounded map: when full,
//! expired entries go first, then all). Only the audience, which depends on
//! the URL the request reached, and the expiry are checked again each time.

pub mod fetch;
pub mod keys;
pub mod settings;

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, Validation, errors::ErrorKind as JwtError};
use openclaw_proxy_core::auth::{TokenDigest, digest};
use openclaw_proxy_core::{OAuthIdentity, escape};
use serde_json::{Map, Value};

use keys::{KeyError, KeySet};
pub use settings::{JwksSource, OAuthArgs, OAuthSettings};

/// Why an access token was refused; the messages say what is wrong with
/// the token, never the token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the access token is not a well-formed JWT: {0}")]
    Malformed(String),
    #[error(
        "the access token is signed with {alg}, which this server does not accept (OPENCLAW_PROXY_OAUTH_ALGORITHMS: {accepted})"
    )]
    Algorithm { alg: String, accepted: String },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("the access token's signature does not verify with the issuer's key")]
    Signature,
    #[error("the access token has expired: get a new one from the authorization server")]
    Expired,
    #[error("the access token is not valid yet (its nbf is in the future)")]
    NotYetValid,
    #[error(
        "the access token was issued by another issuer; this server accepts tokens of {expected}"
    )]
    Issuer { expected: String },
    #[error(
        "the access token is for another audience; this server accepts tokens whose aud is {expected}"
    )]
    Audience { expected: String },
    #[error("the access token names no subject (claim {claim:?})")]
    NoSubject { claim: String },
    #[error("the access token lacks the scope {}: ask the authorization server for it", .missing.join(" "))]
    MissingScope { missing: Vec<String> },
}

impl TokenError {
    /// The RFC 6750 error code: `insufficient_scope` for a missing scope,
    /// `invalid_token` for everything else.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingScope { .. } => "insufficient_scope",
            _ => "invalid_token",
        }
    }
}

/// A token that verified, remembered until it expires.
struct Verified {
    identity: Arc<OAuthIdentity>,
    audiences: Vec<String>,
    /// `exp`, in seconds since the epoch.
    expires: u64,
}

/// Checks access tokens for one issuer; shared by every request.
pub struct Verifier {
    settings: OAuthSettings,
    keys: KeySet,
    cache: RwLock<HashMap<TokenDigest, Arc<Verified>>>,
}

impl Verifier {
    /// A verifier with these settings; no key is fetched until a token needs one.
    pub fn new(settings: OAuthSettings) -> Self {
        let keys = KeySet::new(
            settings.jwks.clone(),
            settings.issuer.clone(),
            settings.jwks_refresh_min,
            settings.jwks_max_age,
        );
        Self {
            settings,
            keys,
            cache: RwLock::default(),
        }
    }

    /// The settings it checks with.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// What `token` says, if it is good for a resource whose accepted
    /// audiences `accepts` recognises.
    pub async fn verify(
        &self,
        token: &str,
        accepts: impl Fn(&str) -> bool,
    ) -> Result<Arc<OAuthIdentity>, TokenError> {
        let key = digest(token);
        let cached = self
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        let verified = match cached {
            Some(verified) => verified,
            None => {
                let verified = Arc::new(self.verify_uncached(token).await?);
                self.remember(key, verified.clone());
                verified
            }
        };
        if verified
            .expires
            .saturating_add(self.settings.leeway.as_secs())
            <= now()
        {
            return Err(TokenError::Expired);
        }
        if !verified.audiences.iter().any(|audience| accepts(audience)) {
            return Err(TokenError::Audience {
                expected: self.expected_audience(),
            });
        }
        Ok(verified.identity.clone())
    }

    fn expected_audience(&self) -> String {
        self.settings
            .audience
            .clone()
            .unwrap_or_else(|| "this server's MCP URL ({public URL}/v1/mcp)".into())
    }

    fn remember(&self, key: TokenDigest, verified: Arc<Verified>) {
        let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= self.settings.cache_entries {
            let now = now();
            cache.retain(|_, verified| verified.expires > now);
            if cache.len() >= self.settings.cache_entries {
                cache.clear();
            }
        }
        cache.insert(key, verified);
    }

    async fn verify_uncached(&self, token: &str) -> Result<Verified, TokenError> {
        let alg = self.algorithm_of(token)?;
        let header = jsonwebtoken::decode_header(token)
            .map_err(|error| TokenError::Malformed(error.to_string()))?;
        let key = self.keys.key_for(header.kid.as_deref(), alg).await?;
        let mut validation = Validation::new(alg);
        validation.leeway = self.settings.leeway.as_secs();
        validation.validate_nbf = true;
        validation.validate_aud = false;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        let claims = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|error| self.refusal(error.into_kind()))?
            .claims;
        self.identity(&claims)
    }

    /// The token's `alg`, when it is one this server accepts: read before
    /// anything else, so `none` and HMAC are refused by name.
    fn algorithm_of(&self, token: &str) -> Result<Algorithm, TokenError> {
        let header = token
            .split('.')
            .next()
            .and_then(|segment| URL_SAFE_NO_PAD.decode(segment).ok())
            .and_then(|bytes| serde_json::from_slice::<Map<String, Value>>(&bytes).ok())
            .ok_or_else(|| TokenError::Malformed("its header is not base64url JSON".into()))?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let accepted = alg
            .parse::<Algorithm>()
            .ok()
            .filter(|alg| self.settings.algorithms.contains(alg));
        accepted.ok_or_else(|| TokenError::Algorithm {
            alg: escape::quoted(alg),
            accepted: self
                .settings
                .algorithms
                .iter()
                .map(|alg| format!("{alg:?}"))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    fn refusal(&self, error: JwtError) -> TokenError {
        match error {
            JwtError::ExpiredSignature => TokenError::Expired,
            JwtError::ImmatureSignature => TokenError::NotYetValid,
            JwtError::InvalidIssuer => TokenError::Issuer {
                expected: self.settings.issuer.clone(),
            },
            JwtError::InvalidSignature | JwtError::InvalidAlgorithm => TokenError::Signature,
            JwtError::MissingRequiredClaim(claim) => {
                TokenError::Malformed(format!("it has no {claim} claim"))
            }
            other => TokenError::Malformed(format!("{other:?}")),
        }
    }

    /// The identity in verified claims, once the required scopes are there.
    fn identity(&self, claims: &Map<String, Value>) -> Result<Verified, TokenError> {
        let text = |name: &str| claims.get(name).and_then(Value::as_str).unwrap_or_default();
        let subject = text(&self.settings.subject_claim);
        if subject.is_empty() {
            return Err(TokenError::NoSubject {
                claim: self.settings.subject_claim.clone(),
            });
        }
        let scopes = scopes(claims);
        let missing: Vec<String> = self
            .settings
            .required_scopes
            .iter()
            .filter(|required| !scopes.contains(required))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(TokenError::MissingScope { missing });
        }
        let client_id = Some(text("client_id"))
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| text("azp"));
        Ok(Verified {
            identity: Arc::new(OAuthIdentity {
                issuer: text("iss").to_owned(),
                subject: subject.to_owned(),
                client_id: client_id.to_owned(),
                scopes,
            }),
            audiences: strings(claims.get("aud")),
            expires: claims.get("exp").and_then(Value::as_u64).unwrap_or(0),
        })
    }
}

/// The scopes granted: `scope` (space-separated, RFC 8693 and RFC 9068)
/// or `scp` (a list, as some issuers write it).
fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    match claims.get("scope").or_else(|| claims.get("scp")) {
        Some(Value::String(text)) => text.split_whitespace().map(str::to_owned).collect(),
        other => strings(other),
    }
}

/// A claim that is one string or a list of strings.
fn strings(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
