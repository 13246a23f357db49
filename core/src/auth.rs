//! Credentials: the two global bearer tokens, the two tokens minted for each
//! session, and how a presented token is compared with them.
//!
//! An app token ships inside every copy of an app, so it must not be enough to
//! take over someone else's session. Each session therefore gets its own two
//! tokens at creation (`docs/security.md`): `session_token`
//! (`ocps_…`, the app side: bridge, delete, get) and `mcp_token` (`ocpm_…`,
//! the MCP side). Each is 256 random bits in base64url; the prefix lets secret
//! scanners recognise a leaked one. Only their SHA-256 digests are kept, in
//! memory or in a shared store, so a dump of the directory opens nothing.
//!
//! Every comparison is between two SHA-256 digests, 32 bytes each, in constant
//! time: neither the content nor the length of the presented token shows in
//! the response time. Which token opens what is decided in one place,
//! [`crate::Hub::authorize`]; this module only says whether a token matches.
//!
//! The MCP side also accepts OAuth access tokens when an issuer is
//! configured. The edge verifies them (signature, issuer, audience,
//! lifetime, scopes) and hands the verdict here as an [`OAuthIdentity`];
//! which sessions that identity opens is again the hub's decision.

use std::fmt;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use subtle::ConstantTimeEq;

use crate::caller::{OAuthIdentity, Owner};
use crate::error::ErrorKind;

/// A SHA-256 digest of a token.
pub type TokenDigest = [u8; 32];

/// Prefix of a session token (the app side).
pub const SESSION_TOKEN_PREFIX: &str = "ocps_";
/// Prefix of an MCP token (the MCP side of one session).
pub const MCP_TOKEN_PREFIX: &str = "ocpm_";
/// Random bytes in a minted token.
const TOKEN_BYTES: usize = 32;
/// Length of a minted token's base64url text without padding.
const TOKEN_TEXT_LEN: usize = TOKEN_BYTES.div_ceil(3) * 4 - 1;

/// The SHA-256 digest of a token.
pub fn digest(token: &str) -> TokenDigest {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Compares two digests in constant time.
fn same(a: &TokenDigest, b: &TokenDigest) -> bool {
    bool::from(a.ct_eq(b))
}

/// A configured global bearer token. Empty means authentication is off (local
/// development, as in the original proxy). Only its digest is kept.
#[derive(Clone, Default)]
pub struct BearerToken(Option<TokenDigest>);

impl BearerToken {
    /// Wraps a configured token; surrounding whitespace is ignored.
    pub fn new(token: impl Into<String>) -> Self {
        let token = token.into();
        let token = token.trim();
        Self((!token.is_empty()).then(|| digest(token)))
    }

    /// True when no token is configured, so every request is accepted.
    pub fn is_open(&self) -> bool {
        self.0.is_none()
    }

    /// Checks an `Authorization` header value (`Bearer <token>`); `None`
    /// means the header was absent.
    pub fn accepts_header(&self, header: Option<&str>) -> bool {
        self.is_open() || bearer(header).is_some_and(|token| self.matches(token))
    }

    /// Compares a presented token with the configured one: digests of equal
    /// length, in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        self.matches_digest(&digest(presented))
    }

    /// [`Self::matches`] for a token already digested with [`digest`].
    pub fn matches_digest(&self, presented: &TokenDigest) -> bool {
        match &self.0 {
            None => true,
            Some(expected) => same(expected, presented),
        }
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_open() {
            "<none>"
        } else {
            "<redacted>"
        })
    }
}

/// The token of an `Authorization: Bearer <token>` header value.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What the directory keeps of a session's credentials: the digests of its
/// two tokens, and the OAuth subject it is bound to, if any.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionCredentials {
    /// SHA-256 of the `session_token` (`ocps_…`).
    pub session_token_digest: TokenDigest,
    /// SHA-256 of the `mcp_token` (`ocpm_…`).
    pub mcp_token_digest: TokenDigest,
    /// The subject whose access tokens open the session's MCP endpoint.
    pub owner: Option<Owner>,
}

impl SessionCredentials {
    /// Whether `presented` is this session's token for `side`.
    pub fn accepts(&self, side: Side, presented: &str) -> bool {
        self.accepts_digest(side, &digest(presented))
    }

    /// [`Self::accepts`] for a token already digested with [`digest`].
    pub fn accepts_digest(&self, side: Side, presented: &TokenDigest) -> bool {
        let expected = match side {
            Side::App => &self.session_token_digest,
            Side::Mcp => &self.mcp_token_digest,
        };
        same(expected, presented)
    }

    /// Whether a verified access token of `identity` opens this session:
    /// only its owner's do.
    pub fn owned_by(&self, identity: &OAuthIdentity) -> bool {
        self.owner.as_ref().is_some_and(|owner| owner.is(identity))
    }
}

impl fmt::Debug for SessionCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionCredentials")
            .field("digests", &"<digests>")
            .field("owner", &self.owner)
            .finish()
    }
}

/// A session's two tokens, as minted: handed to the app once, never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionTokens {
    /// Opens the session's bridge, delete and get: `ocps_` + 43 characters.
    pub session_token: String,
    /// Opens the session's MCP endpoint: `ocpm_` + 43 characters.
    pub mcp_token: String,
}

/// The operating system could not provide random bytes.
#[derive(Debug, thiserror::Error)]
#[error(
    "the operating system's random number generator failed, so no session token can be minted; check the host's entropy source (getrandom)"
)]
pub struct RandomnessUnavailable;

impl SessionTokens {
    /// Two fresh tokens of 256 random bits each, from the OS generator.
    pub fn mint() -> Result<Self, RandomnessUnavailable> {
        let random = ring::rand::SystemRandom::new();
        let mint = |prefix: &str| {
            let mut bytes = [0u8; TOKEN_BYTES];
            ring::rand::SecureRandom::fill(&random, &mut bytes)
                .map_err(|_| RandomnessUnavailable)?;
            Ok::<_, RandomnessUnavailable>(format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes)))
        };
        Ok(Self {
            session_token: mint(SESSION_TOKEN_PREFIX)?,
            mcp_token: mint(MCP_TOKEN_PREFIX)?,
        })
    }

    /// The digests to keep.
    pub fn credentials(&self) -> SessionCredentials {
        SessionCredentials {
            session_token_digest: digest(&self.session_token),
            mcp_token_digest: digest(&self.mcp_token),
            owner: None,
        }
    }
}

impl fmt::Debug for SessionTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionTokens(<redacted>)")
    }
}

/// Which side of a session a credential is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The app: bridge, delete, get. Global token: `OPENCLAW_PROXY_APP_TOKEN`.
    App,
    /// The MCP endpoint. Global token: `OPENCLAW_PROXY_OPENCLAW_TOKEN`.
    Mcp,
}

impl Side {
    fn session_prefix(self) -> &'static str {
        match self {
            Self::App => SESSION_TOKEN_PREFIX,
            Self::Mcp => MCP_TOKEN_PREFIX,
        }
    }
}

/// What a request presented: the side it wants and its bearer token, read
/// from the headers (or gRPC metadata) alone.
#[derive(Clone, Copy)]
pub struct Credential<'a> {
    /// The side the request is for.
    pub side: Side,
    /// The bearer token, when an `Authorization: Bearer` header was sent.
    pub bearer: Option<&'a str>,
    /// When the bearer is an OAuth access token the edge verified: what it
    /// says. The bearer is then not compared with any static token.
    pub oauth: Option<&'a Arc<OAuthIdentity>>,
    /// The bearer's digest, taken once: a request's token is compared with
    /// a global token and a session's, and each comparison is of digests.
    digest: Option<TokenDigest>,
}

impl<'a> Credential<'a> {
    /// An app-side request with this `Authorization` header value.
    pub fn app(authorization: Option<&'a str>) -> Self {
        Self::presented(Side::App, bearer(authorization))
    }

    /// An MCP request with this `Authorization` header value.
    pub fn mcp(authorization: Option<&'a str>) -> Self {
        Self::presented(Side::Mcp, bearer(authorization))
    }

    fn presented(side: Side, bearer: Option<&'a str>) -> Self {
        Self {
            side,
            bearer,
            oauth: None,
            digest: bearer.map(digest),
        }
    }

    /// An MCP request whose bearer is a verified OAuth access token.
    pub fn oauth(identity: &'a Arc<OAuthIdentity>) -> Self {
        Self {
            side: Side::Mcp,
            bearer: None,
            oauth: Some(identity),
            digest: None,
        }
    }

    /// Whether this credential satisfies a global token: it is empty (open),
    /// or the bearer is that token.
    pub fn opens(&self, token: &BearerToken) -> bool {
        token.is_open()
            || self
                .digest
                .is_some_and(|presented| token.matches_digest(&presented))
    }

    /// Whether the bearer is `session`'s own token for this credential's
    /// side.
    pub fn opens_session(&self, session: &SessionCredentials) -> bool {
        self.digest
            .is_some_and(|presented| session.accepts_digest(self.side, &presented))
    }

    /// Whether the bearer has the shape of a minted token of this side (the
    /// prefix and 43 base64url characters): a cheap check that needs no
    /// lookup, so a token that cannot be any session's is refused at once.
    pub fn looks_like_session_token(&self) -> bool {
        self.bearer.is_some_and(|token| {
            token
                .strip_prefix(self.side.session_prefix())
                .is_some_and(|rest| {
                    rest.len() == TOKEN_TEXT_LEN
                        && rest
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                })
        })
    }
}

impl fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("side", &self.side)
            .field("bearer", &self.bearer.map(|_| "<redacted>"))
            .field("oauth", &self.oauth.map(|identity| &identity.subject))
            .finish()
    }
}

/// Why a credential was refused. The messages say what to send instead and
/// never echo what was sent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("invalid app token")]
    AppToken,
    #[error(
        "missing app token: send `Authorization: Bearer <OPENCLAW_PROXY_APP_TOKEN>` (gRPC: metadata `authorization`)"
    )]
    NoAppToken,
    #[error(
        "invalid or missing token for this session: send `Authorization: Bearer <session_token>` with the session_token returned when the session was created{}",
        if *.global_allowed { ", or the app token (OPENCLAW_PROXY_APP_TOKEN)" } else { "" }
    )]
    SessionToken { global_allowed: bool },
    #[error(
        "invalid or missing token for this session's MCP endpoint: send `Authorization: Bearer <mcp_token>` with the mcp_token returned when the session was created{}{}",
        if *.global_allowed { ", or the OpenClaw token (OPENCLAW_PROXY_OPENCLAW_TOKEN)" } else { "" },
        if *.oauth { ", or an OAuth access token for this server (see the resource_metadata of WWW-Authenticate)" } else { "" }
    )]
    McpToken { global_allowed: bool, oauth: bool },
    #[error(
        "missing or refused token: this server's MCP endpoints take only OAuth access tokens; sign in at the authorization server named by the resource_metadata of WWW-Authenticate"
    )]
    OAuthOnly,
    #[error(
        "this access token opens only the sessions of its own subject, and this session is not bound to it; the app binds a session with `owner` when it creates it"
    )]
    NotOwner,
}

impl AuthError {
    /// Every refused credential is [`ErrorKind::Unauthenticated`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Unauthenticated
    }

    /// The side whose credential was refused.
    pub fn side(&self) -> Side {
        match self {
            Self::AppToken | Self::NoAppToken | Self::SessionToken { .. } => Side::App,
            Self::McpToken { .. } | Self::OAuthOnly | Self::NotOwner => Side::Mcp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_token_accepts_anything() {
        let token = BearerToken::new("");
        assert!(token.accepts_header(None));
        assert!(token.accepts_header(Some("Bearer whatever")));
    }

    #[test]
    fn configured_token_needs_exact_bearer() {
        let token = BearerToken::new("s3cret");
        assert!(token.accepts_header(Some("Bearer s3cret")));
        assert!(token.accepts_header(Some("bearer s3cret")));
        assert!(!token.accepts_header(Some("Bearer s3cre")));
        assert!(!token.accepts_header(Some("Bearer s3cret2")));
        assert!(!token.accepts_header(Some("Basic s3cret")));
        assert!(!token.accepts_header(Some("s3cret")));
        assert!(!token.accepts_header(None));
    }

    #[test]
    fn minted_tokens_have_their_prefix_256_bits_and_only_digests_are_kept() {
        let tokens = SessionTokens::mint().expect("randomness");
        for (token, prefix) in [
            (&tokens.session_token, "ocps_"),
            (&tokens.mcp_token, "ocpm_"),
        ] {
            let rest = token.strip_prefix(prefix).expect("prefix");
            let bytes = URL_SAFE_NO_PAD.decode(rest).expect("base64url");
            assert_eq!(bytes.len(), 32, "{token}");
        }
        let other = SessionTokens::mint().expect("randomness");
        assert_ne!(tokens.session_token, other.session_token);
        let credentials = tokens.credentials();
        assert!(credentials.accepts(Side::App, &tokens.session_token));
        assert!(credentials.accepts(Side::Mcp, &tokens.mcp_token));
        assert!(!credentials.accepts(Side::App, &tokens.mcp_token));
        assert!(!credentials.accepts(Side::Mcp, &other.mcp_token));
        assert_eq!(
            credentials.session_token_digest,
            digest(&tokens.session_token)
        );
        assert!(!format!("{credentials:?}{tokens:?}").contains("ocp"));
    }

    #[test]
    fn the_shape_check_knows_each_side() {
        let tokens = SessionTokens::mint().expect("randomness");
        let app = format!("Bearer {}", tokens.session_token);
        let mcp = format!("Bearer {}", tokens.mcp_token);
        assert!(Credential::app(Some(&app)).looks_like_session_token());
        assert!(!Credential::app(Some(&mcp)).looks_like_session_token());
        assert!(Credential::mcp(Some(&mcp)).looks_like_session_token());
        assert!(!Credential::app(Some("Bearer ocps_short")).looks_like_session_token());
        assert!(!Credential::app(None).looks_like_session_token());
    }
}
