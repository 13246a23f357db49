//! An issuer of OAuth access tokens for the tests: EC P-256 keys made in the
//! test, its metadata (RFC 8414) and key set served by a real HTTP server on
//! `127.0.0.1:0`, and tokens signed with `jsonwebtoken`.
//!
//! It publishes keys and signs tokens; it runs no sign-in (the test with the
//! official TypeScript SDK does that against a real authorization server).
//! Its key set can be rotated, its key set route made to hang and the
//! server stopped, and it counts how often the key set was fetched (and
//! how many fetches hang).
//!
//! The end-to-end and cluster tests refuse the same bad tokens on the same
//! routes, so both take them from here: [`TestIssuer::bad_tokens`], one
//! request on each MCP route ([`on_every_route`]), and the challenge a
//! refusal must carry ([`assert_challenged`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

use crate::rest::{Reply, Rest, StatusCode};

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

    /// `claims` signed with this key (ES256) under `header`, a JOSE header
    /// of any shape (`alg` is the test's to set).
    pub fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let key = EncodingKey::from_ec_der(&self.pkcs8);
        let signature =
            jsonwebtoken::crypto::sign(input.as_bytes(), &key, Algorithm::ES256).expect("signing");
        format!("{input}.{signature}")
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
    /// While true, the key set route answers nothing until released.
    hang: AtomicBool,
    released: tokio::sync::Notify,
    /// Fetches of the key set waiting to be released.
    hanging: AtomicUsize,
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
            hang: AtomicBool::new(false),
            released: tokio::sync::Notify::new(),
            hanging: AtomicUsize::new(0),
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

    /// Makes fetches of the key set hang, answering nothing, until
    /// [`TestIssuer::release`].
    pub fn hang(&self) {
        self.published.hang.store(true, Ordering::SeqCst);
    }

    /// Answers the hanging fetches, and every fetch from now on.
    pub fn release(&self) {
        self.published.hang.store(false, Ordering::SeqCst);
        self.published.released.notify_waiters();
    }

    /// How many fetches of the key set hang now.
    pub fn jwks_hanging(&self) -> usize {
        self.published.hanging.load(Ordering::SeqCst)
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

    /// Tokens of `subject` for `audience` that are bad in one way each,
    /// for a server requiring the scope `mcp`: the case, the token, and
    /// the RFC 6750 error its refusal names.
    pub fn bad_tokens(&self, subject: &str, audience: &str) -> Vec<BadToken> {
        let key = self.key();
        let good = self.claims(subject, audience);
        let with = |change: &dyn Fn(&mut Value)| {
            let mut claims = good.clone();
            change(&mut claims);
            claims
        };
        let now = unix_now();
        let encode = |value: &Value| URL_SAFE_NO_PAD.encode(value.to_string());
        let unsigned = format!(
            "{}.{}.",
            encode(&json!({"alg": "none", "typ": "JWT"})),
            encode(&good)
        );
        let hmac = {
            let mut header = Header::new(Algorithm::HS256);
            header.kid = Some(key.kid.clone());
            let secret = EncodingKey::from_secret(key.public_bytes());
            jsonwebtoken::encode(&header, &good, &secret).expect("signing")
        };
        let invalid = |case, token| BadToken {
            case,
            token,
            error: "invalid_token",
        };
        vec![
            invalid(
                "expired",
                key.sign(&with(&|c| {
                    c["exp"] = json!(now - 600);
                    c["iat"] = json!(now - 4000);
                    c["nbf"] = json!(now - 4000);
                })),
            ),
            invalid(
                "not yet valid",
                key.sign(&with(&|c| c["nbf"] = json!(now + 600))),
            ),
            invalid(
                "wrong audience",
                key.sign(&with(&|c| {
                    c["aud"] = json!("https://elsewhere.example/v1/mcp")
                })),
            ),
            invalid(
                "wrong issuer",
                key.sign(&with(&|c| c["iss"] = json!("https://other-issuer.example"))),
            ),
            invalid("bad signature", SigningKey::generate(&key.kid).sign(&good)),
            invalid("alg none", unsigned),
            invalid("HMAC with the public key", hmac),
            invalid(
                "unknown kid",
                SigningKey::generate("key-unknown").sign(&good),
            ),
            BadToken {
                case: "missing scope",
                token: key.sign(&with(&|c| c["scope"] = json!("profile"))),
                error: "insufficient_scope",
            },
        ]
    }
}

/// A token that must be refused, from [`TestIssuer::bad_tokens`].
#[derive(Clone, Debug)]
pub struct BadToken {
    /// What is wrong with it.
    pub case: &'static str,
    /// The token.
    pub token: String,
    /// The RFC 6750 error of its challenge: `invalid_token` or
    /// `insufficient_scope`.
    pub error: &'static str,
}

fn tools_list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
}

/// One request on each MCP route of `session` at the server at `base`
/// (`http://127.0.0.1:PORT`), with `token`: the streamable endpoint by path
/// and by header, the legacy stream, and the legacy message route. Answers
/// each route's name and reply.
pub async fn on_every_route(base: &str, session: &str, token: &str) -> Vec<(String, Reply)> {
    let rest = Rest::new(base);
    let by_path = rest
        .mcp(&format!("/v1/mcp/{session}"), &tools_list())
        .bearer_auth(token)
        .send()
        .await;
    let by_header = rest
        .mcp("/v1/mcp", &tools_list())
        .header("mcp-session-id", session)
        .bearer_auth(token)
        .send()
        .await;
    let stream = rest
        .get(&format!("/v1/mcp/{session}"))
        .header("accept", "text/event-stream")
        .bearer_auth(token)
        .timeout(Duration::from_secs(2))
        .try_send()
        .await;
    let message = rest
        .mcp(
            &format!("/v1/mcp/{session}/messages?legacy=none"),
            &tools_list(),
        )
        .bearer_auth(token)
        .send()
        .await;
    let mut replies = vec![
        ("POST /v1/mcp/{id}".to_owned(), by_path),
        ("POST /v1/mcp".to_owned(), by_header),
        ("POST /v1/mcp/{id}/messages".to_owned(), message),
    ];
    // An opened legacy stream never ends: reading it times out, which
    // shows it was opened (a refusal is a whole answer).
    if let Ok(reply) = stream {
        replies.push(("GET /v1/mcp/{id}".to_owned(), reply));
    }
    replies
}

/// Asserts that `reply`, from `route` of [`on_every_route`], is a refusal
/// whose challenge names the metadata of the resource the client used, on
/// the public base URL `public` the server knows itself by, and `error`;
/// `case` says in a failure what was sent.
pub fn assert_challenged(
    public: &str,
    session: &str,
    (case, route): (&str, &str),
    reply: &Reply,
    error: &str,
) {
    let expected = if error == "insufficient_scope" {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::UNAUTHORIZED
    };
    assert_eq!(
        reply.status(),
        expected,
        "{case}, {route}: {}",
        reply.text()
    );
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    let metadata = if route == "POST /v1/mcp" {
        format!("resource_metadata=\"{public}/.well-known/oauth-protected-resource/v1/mcp\"")
    } else {
        format!(
            "resource_metadata=\"{public}/.well-known/oauth-protected-resource/v1/mcp/{session}\""
        )
    };
    assert!(
        challenge.starts_with("Bearer "),
        "{case}, {route}: {challenge}"
    );
    assert!(
        challenge.contains(&metadata),
        "{case}, {route}: {challenge}"
    );
    assert!(
        challenge.contains(&format!("error=\"{error}\"")),
        "{case}, {route}: {challenge}"
    );
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

/// Counts a hanging fetch while it hangs (its fetcher may give up on it).
struct Hanging<'a>(&'a AtomicUsize);

impl Drop for Hanging<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn jwks(State(published): State<Arc<Published>>) -> axum::Json<Value> {
    let released = published.released.notified();
    if published.hang.load(Ordering::SeqCst) {
        published.hanging.fetch_add(1, Ordering::SeqCst);
        let _hanging = Hanging(&published.hanging);
        released.await;
    }
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
