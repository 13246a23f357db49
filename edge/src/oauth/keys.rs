//! The issuer's signing keys (its JWKS), fetched when first needed and kept.
//!
//! An issuer rotates keys by publishing a new one before signing with it,
//! so a token naming a `kid` the proxy has not seen makes it fetch the set
//! again, at most once per `refresh_min` however many such tokens arrive
//! (a stranger sending made-up `kid`s cannot make the proxy hammer the
//! issuer). The set is also fetched again once it is older than `max_age`,
//! in the background: requests go on with the keys known meanwhile, so an
//! issuer that hangs never holds up a request whose key is known (only a
//! token naming a key not seen yet waits, for a fetch bounded in time).
//! A failed fetch keeps the keys already known, so an outage of the issuer
//! does not stop tokens signed with them; it is logged, and only tokens
//! that need a new key fail.
//!
//! Only asymmetric signing keys are kept: a symmetric (`oct`) key or one
//! marked for encryption never verifies a token.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use tokio::time::Instant;

use super::fetch::{self, FetchError};
use super::settings::JwksSource;

/// One usable key.
struct Key {
    kid: Option<String>,
    /// The algorithm the key is for, when the set says.
    alg: Option<Algorithm>,
    /// The key's type: RSA keys verify RS*/PS*, EC keys ES*, OKP EdDSA.
    family: Family,
    key: DecodingKey,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Rsa,
    Ec,
    Okp,
}

impl Family {
    fn of(alg: Algorithm) -> Option<Self> {
        use Algorithm::*;
        match alg {
            RS256 | RS384 | RS512 | PS256 | PS384 | PS512 => Some(Self::Rsa),
            ES256 | ES384 => Some(Self::Ec),
            EdDSA => Some(Self::Okp),
            HS256 | HS384 | HS512 => None,
        }
    }
}

/// Why no key verifies a token.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error(
        "the issuer's key set has no key {} for {alg:?}, and fetching it again did not bring one",
        kid.as_deref().map_or_else(|| "without a kid".to_owned(), |kid| format!("with kid {}", openclaw_proxy_core::escape::quoted(kid)))
    )]
    Unknown { kid: Option<String>, alg: Algorithm },
}

/// Why a key set could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error("could not read the key set file {path}: {error}")]
    File { path: String, error: std::io::Error },
    #[error("{what} is not the JSON expected: {error}")]
    Json {
        what: String,
        error: serde_json::Error,
    },
    #[error(
        "the issuer's metadata names issuer {found:?}, not the configured {expected:?}: check OPENCLAW_PROXY_OAUTH_ISSUER"
    )]
    IssuerMismatch { expected: String, found: String },
    #[error(
        "no metadata with a jwks_uri at {tried}: set OPENCLAW_PROXY_OAUTH_JWKS_URL or OPENCLAW_PROXY_OAUTH_JWKS_FILE"
    )]
    NoMetadata { tried: String },
    #[error("the issuer's key set did not load within {0:?}")]
    Timeout(Duration),
}

/// The keys known now and when they were fetched.
#[derive(Default)]
struct Snapshot {
    keys: Vec<Key>,
    fetched: Option<Instant>,
}

/// The issuer's key set, shared by every verification.
pub struct KeySet {
    source: JwksSource,
    issuer: String,
    refresh_min: Duration,
    max_age: Duration,
    current: RwLock<Arc<Snapshot>>,
    /// One fetch at a time; the instant of the last attempt.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    /// Whether a refresh of a stale set runs in the background.
    refreshing: AtomicBool,
    /// How long one load of the set may take, metadata and key set together.
    fetch_timeout: Duration,
}

impl KeySet {
    /// A key set not fetched yet; one load of it may take `fetch_timeout`.
    pub fn new(
        source: JwksSource,
        issuer: String,
        refresh_min: Duration,
        max_age: Duration,
        fetch_timeout: Duration,
    ) -> Self {
        Self {
            source,
            issuer,
            refresh_min,
            max_age,
            current: RwLock::default(),
            fetching: tokio::sync::Mutex::new(None),
            refreshing: AtomicBool::new(false),
            fetch_timeout,
        }
    }

    /// The key that verifies a token with this header: from the keys known
    /// (a set older than `max_age` is fetched again in the background),
    /// else after fetching the set again (rate-limited).
    pub async fn key_for(
        self: &Arc<Self>,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, KeyError> {
        let snapshot = self.snapshot();
        if let Some(key) = find(&snapshot, kid, alg) {
            let stale = snapshot
                .fetched
                .is_none_or(|fetched| fetched.elapsed() >= self.max_age);
            if stale {
                self.refresh_in_background(snapshot.fetched);
            }
            return Ok(key);
        }
        self.refresh(snapshot.fetched).await;
        find(&self.snapshot(), kid, alg).ok_or_else(|| KeyError::Unknown {
            kid: kid.map(str::to_owned),
            alg,
        })
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Starts [`Self::refresh`] on a task of its own, unless one runs.
    fn refresh_in_background(self: &Arc<Self>, seen: Option<Instant>) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let keys = self.clone();
        tokio::spawn(async move {
            keys.refresh(seen).await;
            keys.refreshing.store(false, Ordering::Release);
        });
    }

    /// Fetches the set again unless another task did since `seen` or the
    /// last attempt was under `refresh_min` ago. A failure keeps the keys.
    async fn refresh(&self, seen: Option<Instant>) {
        let mut last_attempt = self.fetching.lock().await;
        if self.snapshot().fetched != seen {
            return;
        }
        if last_attempt.is_some_and(|at| at.elapsed() < self.refresh_min) {
            return;
        }
        *last_attempt = Some(Instant::now());
        let loaded = tokio::time::timeout(self.fetch_timeout, self.load())
            .await
            .unwrap_or(Err(LoadError::Timeout(self.fetch_timeout)));
        match loaded {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "OAuth signing keys loaded");
                let fresh = Arc::new(Snapshot {
                    keys,
                    fetched: Some(Instant::now()),
                });
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = fresh;
            }
            Err(error) => {
                // The error may quote what the issuer sent: an outside value.
                let error = error.to_string();
                tracing::warn!(
                    error = openclaw_proxy_core::escape::Outside::within(
                        &error,
                        openclaw_proxy_core::escape::TEXT_LIMIT
                    )
                    .field(),
                    "OAuth signing keys could not be fetched; the keys known stay in use"
                );
            }
        }
    }

    async fn load(&self) -> Result<Vec<Key>, LoadError> {
        let (what, text) = match &self.source {
            JwksSource::File(path) => {
                let text = tokio::fs::read(path)
                    .await
                    .map_err(|error| LoadError::File {
                        path: path.display().to_string(),
                        error,
                    })?;
                (path.display().to_string(), text.into())
            }
            JwksSource::Url(url) => (url.clone(), fetch::get(url, self.fetch_timeout).await?),
            JwksSource::Discover => {
                let url = self.discover().await?;
                let text = fetch::get(&url, self.fetch_timeout).await?;
                (url, text)
            }
        };
        parse_set(&text).map_err(|error| LoadError::Json { what, error })
    }

    /// The `jwks_uri` of the issuer's metadata: RFC 8414's location first,
    /// then OpenID Connect's.
    async fn discover(&self) -> Result<String, LoadError> {
        let issuer = self.issuer.trim_end_matches('/');
        let (origin, path) = split_origin(issuer);
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer}/.well-known/openid-configuration"),
        ];
        for url in &candidates {
            let Ok(text) = fetch::get(url, self.fetch_timeout).await else {
                continue;
            };
            let metadata: Metadata =
                serde_json::from_slice(&text).map_err(|error| LoadError::Json {
                    what: url.clone(),
                    error,
                })?;
            if metadata.issuer != self.issuer {
                return Err(LoadError::IssuerMismatch {
                    expected: self.issuer.clone(),
                    found: metadata.issuer,
                });
            }
            if let Some(jwks_uri) = metadata.jwks_uri {
                fetch::check_url(&jwks_uri)?;
                return Ok(jwks_uri);
            }
        }
        Err(LoadError::NoMetadata {
            tried: candidates.join(" and "),
        })
    }
}

/// What the proxy reads of an issuer's metadata.
#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    #[serde(default)]
    jwks_uri: Option<String>,
}

/// `https://host/path` as (`https://host`, `/path`).
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => url.split_at(after_scheme + slash),
        None => (url, ""),
    }
}

/// The usable keys of a JWKS document; a key the proxy cannot use is left
/// out rather than failing the set.
fn parse_set(text: &[u8]) -> Result<Vec<Key>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Set {
        keys: Vec<serde_json::Value>,
    }
    let set: Set = serde_json::from_slice(text)?;
    Ok(set
        .keys
        .into_iter()
        .filter_map(|value| serde_json::from_value::<Jwk>(value).ok())
        .filter_map(|jwk| usable(&jwk))
        .collect())
}

fn usable(jwk: &Jwk) -> Option<Key> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let family = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Family::Rsa,
        AlgorithmParameters::EllipticCurve(_) => Family::Ec,
        AlgorithmParameters::OctetKeyPair(_) => Family::Okp,
        AlgorithmParameters::OctetKey(_) => return None,
    };
    let alg = jwk
        .common
        .key_algorithm
        .and_then(|alg| alg.to_string().parse::<Algorithm>().ok());
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        family,
        key: DecodingKey::from_jwk(jwk).ok()?,
    })
}

/// The key for `kid` and `alg`: the one with that `kid` (of the right
/// type), or, for a token without a `kid`, the first of the right type.
fn find(snapshot: &Snapshot, kid: Option<&str>, alg: Algorithm) -> Option<DecodingKey> {
    let family = Family::of(alg)?;
    snapshot
        .keys
        .iter()
        .filter(|key| key.family == family && key.alg.is_none_or(|key_alg| key_alg == alg))
        .find(|key| kid.is_none() || key.kid.as_deref() == kid)
        .map(|key| key.key.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_and_encryption_keys_are_left_out_and_odd_keys_skipped() {
        let set = br#"{"keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {"kty": "EC", "crv": "P-256", "use": "enc", "kid": "enc",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "EC", "crv": "P-256", "kid": "sig",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "made-up"}
        ]}"#;
        let keys = parse_set(set).expect("a set");
        let kids: Vec<_> = keys.iter().map(|key| key.kid.as_deref()).collect();
        assert_eq!(kids, [Some("sig")]);
        let snapshot = Snapshot {
            keys,
            fetched: None,
        };
        assert!(find(&snapshot, Some("sig"), Algorithm::ES256).is_some());
        assert!(find(&snapshot, None, Algorithm::ES256).is_some());
        assert!(find(&snapshot, Some("sig"), Algorithm::RS256).is_none());
        assert!(find(&snapshot, Some("hmac"), Algorithm::HS256).is_none());
    }

    #[test]
    fn metadata_locations_insert_the_well_known_path() {
        assert_eq!(
            split_origin("https://id.example/tenant/v2"),
            ("https://id.example", "/tenant/v2")
        );
        assert_eq!(
            split_origin("https://id.example"),
            ("https://id.example", "")
        );
    }
}
