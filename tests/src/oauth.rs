//! An issuer of OAuth access tokens for the tests: EC P-256 keys made in the
//! test, its metadata (RFC 8414) and key set served by a real HTTP server on
//! `127.0.0.1:0`, and tokens signed with `jsonwebtoken`.
//!
//! It publishes keys and signs tokens; it runs no sign-in (the test with the
//! official TypeScript SDK does that against a real authorization server).
//! Its key set can be rotated and the server stopped, and it counts how
//! often the key set was fetched.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One EC P-256 signing key.
#[derive(Clone)]
pub struct SigningKey {
    /// Its `kid`.
    pub kid: String,
    pkcs8: Vec<u8>,
    /// The public point, uncompressed (`04 || x || y`).
    public: Vec<u8>,
}

impl SigningKey {
    /// A fresh key named `kid`.
    pub fn generate(kid: &str) -> Self {
        let random = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &random)
            .expect("key generation");
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &random)
                .expect("the key just made");
        Self {
            kid: kid.to_owned(),
            public: pair.public_key().as_ref().to_vec(),
            pkcs8: pkcs8.as_ref().to_vec(),
        }
    }

    /// Its public JWK.
    pub fn jwk(&self) -> Value {
        let (x, y) = self.public[1..].split_at(32);
        json!({
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(x), "y": URL_SAFE_NO_PAD.encode(y),
        })
    }

    /// `claims` signed with this key (ES256, this `kid`).
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// `claims` signed with this key under another `kid`.
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &EncodingKey::from_ec_der(&self.pkcs8))
            .expect("signing")
    }

    /// The public key's bytes, as an HMAC secret: what an attacker who
    /// knows the public key would sign with if HMAC were accepted.
    pub fn public_bytes(&self) -> &[u8] {
        &self.public
    }
}

/// What the issuer's server shares with it.
struct Published {
    issuer: String,
    keys: Mutex<Vec<SigningKey>>,
    jwks_fetches: AtomicUsize,
}

/// A token issuer on a loopback port; stops when dropped.
pub struct TestIssuer {
    /// The issuer URL (`http://127.0.0.1:PORT`), the tokens' `iss`.
    pub url: String,
    published: Arc<Published>,
    stop: CancellationToken,
}

impl TestIssuer {
    /// An issuer publishing one key, `key-1`.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let published = Arc::new(Published {
            issuer: url.clone(),
            keys: Mutex::new(vec![SigningKey::generate("key-1")]),
            jwks_fetches: AtomicUsize::new(0),
        });
        let router = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/jwks", get(jwks))
            .with_state(published.clone());
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await
        });
        Self {
            url,
            published,
            stop,
        }
    }

    /// The key tokens are signed with now (the first published).
    pub fn key(&self) -> SigningKey {
        self.keys()[0].clone()
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Vec<SigningKey>> {
        self.published
            .keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes `key` instead of the current keys (a rotation).
    pub fn rotate_to(&self, key: SigningKey) {
        *self.keys() = vec![key];
    }

    /// How many times the key set was fetched.
    pub fn jwks_fetches(&self) -> usize {
        self.published.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Stops serving (an outage).
    pub fn stop(&self) {
        self.stop.cancel();
    }

    /// Claims of a good token of `subject` for `audience`: issued now, for
    /// an hour, with scope `mcp` and client `test-client`.
    pub fn claims(&self, subject: &str, audience: &str) -> Value {
        let now = unix_now();
        json!({
            "iss": self.url, "sub": subject, "aud": audience,
            "iat": now, "nbf": now, "exp": now + 3600,
            "client_id": "test-client", "scope": "mcp profile",
        })
    }

    /// A good token of `subject` for `audience`.
    pub fn token(&self, subject: &str, audience: &str) -> String {
        self.key().sign(&self.claims(subject, audience))
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

async fn metadata(State(published): State<Arc<Published>>) -> axum::Json<Value> {
    axum::Json(json!({
        "issuer": published.issuer,
        "jwks_uri": format!("{}/jwks", published.issuer),
        "response_types_supported": ["code"],
    }))
}

async fn jwks(State(published): State<Arc<Published>>) -> axum::Json<Value> {
    published.jwks_fetches.fetch_add(1, Ordering::SeqCst);
    let keys = published
        .keys
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(SigningKey::jwk)
        .collect::<Vec<_>>();
    axum::Json(json!({"keys": keys}))
}
