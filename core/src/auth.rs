//! Bearer tokens, compared in constant time so that response timing reveals
//! nothing about how much of a guessed token was right.

use std::fmt;

use subtle::ConstantTimeEq;

/// A configured bearer token. Empty means authentication is off (local
/// development, as in the original proxy).
#[derive(Clone, Default)]
pub struct BearerToken(String);

impl BearerToken {
    /// Wraps a configured token; surrounding whitespace is ignored.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into().trim().to_owned())
    }

    /// True when no token is configured, so every request is accepted.
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks an `Authorization` header value (`Bearer <token>`); `None`
    /// means the header was absent.
    pub fn accepts_header(&self, header: Option<&str>) -> bool {
        if self.is_open() {
            return true;
        }
        let Some(value) = header else { return false };
        let Some((scheme, presented)) = value.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer") && self.matches(presented.trim())
    }

    /// Compares a presented token with the configured one in constant time.
    pub fn matches(&self, presented: &str) -> bool {
        self.is_open() || bool::from(self.0.as_bytes().ct_eq(presented.as_bytes()))
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
}
