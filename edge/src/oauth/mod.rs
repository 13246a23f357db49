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
//! the URL the request reached, and the expiry are checked again each time,
//! so a remembered token is refused once its `exp` (plus the leeway) has
//! passed, as it would be if it were verified again.

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
    #[error(
        "the access token marks header parameters as critical ({names}) that this server does not understand; RFC 7515 requires refusing it"
    )]
    Critical { names: String },
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
    keys: Arc<KeySet>,
    cache: RwLock<HashMap<TokenDigest, Arc<Verified>>>,
}

impl Verifier {
    /// A verifier with these settings; no key is fetched until a token needs one.
    pub fn new(settings: OAuthSettings) -> Self {
        let keys = Arc::new(KeySet::new(
            settings.jwks.clone(),
            settings.issuer.clone(),
            settings.jwks_refresh_min,
            settings.jwks_max_age,
            settings.jwks_fetch_timeout,
        ));
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
        self.verify_digested(token, digest(token), accepts).await
    }

    /// [`Self::verify`] for a caller that has already digested `token`
    /// (to compare it with the static tokens): a JWT is long, and its
    /// digest is the one part of a remembered token's check that grows
    /// with it, so it is taken once per request.
    pub async fn verify_digested(
        &self,
        token: &str,
        key: TokenDigest,
        accepts: impl Fn(&str) -> bool,
    ) -> Result<Arc<OAuthIdentity>, TokenError> {
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
        if self.settings.cache_entries == 0 {
            return;
        }
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
        // RFC 7515 §4.1.11: a recipient that does not understand every
        // parameter `crit` names must refuse the token. This server
        // understands no extension, so any `crit` is refused, as is one that
        // is not a list of names.
        if let Some(critical) = header.get("crit") {
            let names = match critical {
                Value::Array(names) => names
                    .iter()
                    .map(|name| escape::quoted(name.as_str().unwrap_or("<not a string>")))
                    .collect::<Vec<_>>()
                    .join(", "),
                other => format!("crit is {} rather than a list of names", json_type(other)),
            };
            return Err(TokenError::Critical { names });
        }
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
            expires: claims.get("exp").and_then(numeric_date).unwrap_or(0),
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

/// A NumericDate (RFC 7519 §2): seconds since the epoch, which may have a
/// fraction; in whole seconds, the fraction cut off (a token expiring at
/// 10.7 is held to expire at 10, never later).
fn numeric_date(value: &Value) -> Option<u64> {
    if let Some(whole) = value.as_u64() {
        return Some(whole);
    }
    let seconds = value.as_f64().filter(|s| s.is_finite() && *s >= 0.0)?;
    // Saturating: a date beyond u64 seconds is "never" in either form.
    Some(seconds.floor() as u64)
}

/// What kind of JSON value `value` is, for messages.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use base64::Engine;
    use jsonwebtoken::{EncodingKey, Header};
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use serde_json::json;

    use super::*;

    const ISSUER: &str = "http://127.0.0.1:9";
    const AUDIENCE: &str = "http://127.0.0.1:8000/v1/mcp";

    /// An EC P-256 key: what signs, and its public JWK.
    struct TestKey {
        pkcs8: Vec<u8>,
        jwk: Value,
    }

    impl TestKey {
        fn generate(kid: &str) -> Self {
            let random = SystemRandom::new();
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &random)
                .expect("key generation");
            let pair =
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &random)
                    .expect("the key just made");
            let (x, y) = pair.public_key().as_ref()[1..].split_at(32);
            Self {
                pkcs8: pkcs8.as_ref().to_vec(),
                jwk: json!({"kty": "EC", "crv": "P-256", "alg": "ES256", "kid": kid,
                            "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y)}),
            }
        }

        /// A token of `subject` expiring at `exp`, numbered `n` (so each
        /// is a token of its own).
        fn token(&self, subject: &str, exp: u64, n: u64) -> String {
            let mut header = Header::new(Algorithm::ES256);
            header.kid = self.jwk["kid"].as_str().map(str::to_owned);
            let claims = json!({"iss": ISSUER, "sub": subject, "aud": AUDIENCE,
                                "exp": exp, "jti": n, "client_id": "c"});
            jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ec_der(&self.pkcs8))
                .expect("signing")
        }
    }

    /// A key set file that is removed when dropped.
    struct KeyFile(PathBuf);

    impl KeyFile {
        fn new(name: &str) -> Self {
            Self(
                std::env::temp_dir()
                    .join(format!("openclaw-proxy-{name}-{}.json", std::process::id())),
            )
        }

        fn publish(&self, keys: &[&TestKey]) {
            let keys: Vec<&Value> = keys.iter().map(|key| &key.jwk).collect();
            std::fs::write(&self.0, json!({"keys": keys}).to_string()).expect("write the set");
        }
    }

    impl Drop for KeyFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn verifier(file: &KeyFile, cache_entries: usize) -> Verifier {
        let mut settings = OAuthSettings::new(ISSUER);
        settings.jwks = JwksSource::File(file.0.clone());
        settings.leeway = Duration::ZERO;
        settings.jwks_refresh_min = Duration::ZERO;
        settings.cache_entries = cache_entries;
        Verifier::new(settings)
    }

    fn cached(verifier: &Verifier) -> usize {
        verifier
            .cache
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    async fn verify(verifier: &Verifier, token: &str) -> Result<Arc<OAuthIdentity>, TokenError> {
        verifier
            .verify(token, |audience| audience == AUDIENCE)
            .await
    }

    #[tokio::test]
    async fn a_verified_token_is_remembered_within_the_bound_until_it_expires() {
        let file = KeyFile::new("cache-test-jwks");
        let key = TestKey::generate("k1");
        file.publish(&[&key]);
        let hour = now() + 3600;

        // Tokens of their own, more than the cache holds: it never holds
        // more than its bound.
        let bounded = verifier(&file, 2);
        for n in 0..5 {
            let token = key.token("alice", hour, n);
            let identity = verify(&bounded, &token).await.expect("a good token");
            assert_eq!(identity.subject, "alice");
            assert!(cached(&bounded) <= 2, "{} entries", cached(&bounded));
        }

        let verifier = verifier(&file, 2);
        let remembered = key.token("alice", hour, 10);
        let soon = now() + 2;
        let expiring = key.token("alice", soon, 11);
        verify(&verifier, &remembered).await.expect("a good token");
        verify(&verifier, &expiring).await.expect("a good token");
        assert_eq!(cached(&verifier), 2);

        // The issuer drops the key, and a token naming a new kid makes the
        // verifier load that set: the key is gone from memory too.
        file.publish(&[]);
        let stranger = TestKey::generate("k2").token("alice", hour, 12);
        assert!(matches!(
            verify(&verifier, &stranger).await,
            Err(TokenError::Key(_))
        ));
        let unseen = key.token("alice", hour, 13);
        assert!(
            matches!(verify(&verifier, &unseen).await, Err(TokenError::Key(_))),
            "a token not verified before needs the key"
        );
        // A remembered token does not: it is served from the cache, for
        // this resource only.
        let identity = verify(&verifier, &remembered).await.expect("remembered");
        assert_eq!(identity.subject, "alice");
        assert!(matches!(
            verifier.verify(&remembered, |_| false).await,
            Err(TokenError::Audience { .. })
        ));

        // Once its exp has passed, a remembered token is refused by the
        // cache itself (verifying it again would fail on the key instead).
        while now() <= soon {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            verifier
                .cache
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&digest(&expiring)),
            "still remembered"
        );
        assert!(matches!(
            verify(&verifier, &expiring).await,
            Err(TokenError::Expired)
        ));
        assert!(cached(&verifier) <= 2);
    }

    #[tokio::test]
    async fn a_cache_of_no_entries_remembers_nothing() {
        let file = KeyFile::new("no-cache-test-jwks");
        let key = TestKey::generate("k1");
        file.publish(&[&key]);
        let verifier = verifier(&file, 0);
        let token = key.token("alice", now() + 3600, 0);
        verify(&verifier, &token).await.expect("a good token");
        verify(&verifier, &token).await.expect("verified again");
        assert_eq!(cached(&verifier), 0);
    }
}
