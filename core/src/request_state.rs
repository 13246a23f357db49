//! The `requestState` of an MCP 2026-07-28 `input_required` result: what the
//! proxy needs to resume the waiting call when the client retries, sealed
//! with HMAC-SHA256 so that a client can neither forge nor alter it.
//!
//! The state names the session, the waiting call, the node it waits on (in
//! cluster mode; any node may receive the retry and sends it there) and
//! when it expires, and nothing the client did not already know (the
//! session id is in its URL).
//! Every node that may receive the retry needs the same key
//! (`OPENCLAW_PROXY_REQUEST_STATE_KEY`); without one, each process makes a
//! random key, which is enough on a single node.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;

/// The longest state accepted: a session id of the longest kind and three
/// numbers fit many times over.
pub const MAX_STATE_BYTES: usize = 1024;

/// The key states are sealed with.
#[derive(Clone)]
pub struct StateKey(hmac::Key);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

impl Default for StateKey {
    fn default() -> Self {
        Self::random()
    }
}

impl StateKey {
    /// A key from configured secret bytes.
    pub fn new(secret: &[u8]) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// A key of this process alone.
    pub fn random() -> Self {
        let rng = ring::rand::SystemRandom::new();
        match hmac::Key::generate(hmac::HMAC_SHA256, &rng) {
            Ok(key) => Self(key),
            // The OS generator failed, which it does not; a key nobody can
            // guess is still needed: the process's address space layout and
            // the time are not that, so refuse every state instead.
            Err(_) => Self::new(b""),
        }
    }

    /// The sealed text of `state`.
    pub fn seal(&self, state: &RequestState) -> String {
        // The node is an id without dots (a NATS subject token); the
        // session id, last, may hold any.
        let payload = format!(
            "2.{}.{}.{}.{}",
            state.expires_unix, state.call, state.node, state.session_id
        );
        let tag = hmac::sign(&self.0, payload.as_bytes());
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        )
    }

    /// The state sealed in `text`, if this key sealed it and it has not
    /// expired at `now_unix`.
    pub fn open(&self, text: &str, now_unix: u64) -> Result<RequestState, StateError> {
        if text.len() > MAX_STATE_BYTES {
            return Err(StateError::TooLong);
        }
        let (payload, tag) = text.split_once('.').ok_or(StateError::Tampered)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| StateError::Tampered)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| StateError::Tampered)?;
        hmac::verify(&self.0, &payload, &tag).map_err(|_| StateError::Tampered)?;
        let payload = String::from_utf8(payload).map_err(|_| StateError::Tampered)?;
        let field = |text: &str| -> Result<(String, String), StateError> {
            text.split_once('.')
                .map(|(first, rest)| (first.to_owned(), rest.to_owned()))
                .ok_or(StateError::Tampered)
        };
        let (version, rest) = field(&payload)?;
        let (expires, rest) = field(&rest)?;
        let (call, rest) = field(&rest)?;
        // Version 1, from a node of the release before states crossed
        // nodes, names no node: the one that reads it.
        let (node, session_id) = match version.as_str() {
            "2" => field(&rest)?,
            "1" => (String::new(), rest),
            _ => return Err(StateError::Tampered),
        };
        let state = RequestState {
            session_id,
            node,
            call: call.parse().map_err(|_| StateError::Tampered)?,
            expires_unix: expires.parse().map_err(|_| StateError::Tampered)?,
        };
        if state.expires_unix <= now_unix {
            return Err(StateError::Expired);
        }
        Ok(state)
    }
}

/// What a `requestState` carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestState {
    /// The session of the waiting call.
    pub session_id: String,
    /// The waiting call, as the node that holds it numbers them.
    pub call: u64,
    /// The node that holds it; empty on a single node.
    pub node: String,
    /// When the wait ends, in seconds since the Unix epoch.
    pub expires_unix: u64,
}

/// Why a `requestState` cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Longer than any state the proxy makes.
    #[error("requestState is longer than any the proxy makes ({MAX_STATE_BYTES} bytes)")]
    TooLong,
    /// Not sealed by this cluster's key, or altered.
    #[error("requestState failed its integrity check: it was altered, or made by another server")]
    Tampered,
    /// Its wait is over.
    #[error(
        "requestState has expired: the call no longer waits for these answers; send the request again without it"
    )]
    Expired,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_opens_only_unaltered_unexpired_and_with_its_key() {
        let key = StateKey::new(b"cluster secret");
        let state = RequestState {
            session_id: "0f3c.with.dots".into(),
            call: 42,
            node: "a1b2".into(),
            expires_unix: 1_000,
        };
        let sealed = key.seal(&state);
        assert_eq!(key.open(&sealed, 999), Ok(state.clone()));
        assert_eq!(key.open(&sealed, 1_000), Err(StateError::Expired));
        assert_eq!(
            StateKey::new(b"other").open(&sealed, 0),
            Err(StateError::Tampered)
        );
        let tampered = format!("{sealed}-TAMPERED");
        assert_eq!(key.open(&tampered, 0), Err(StateError::Tampered));
        let mut flipped = sealed.into_bytes();
        flipped[3] ^= 1;
        let flipped = String::from_utf8_lossy(&flipped).into_owned();
        assert_eq!(key.open(&flipped, 0), Err(StateError::Tampered));
        assert_eq!(key.open(&"x".repeat(2000), 0), Err(StateError::TooLong));
        assert_eq!(key.open("", 0), Err(StateError::Tampered));
    }

    #[test]
    fn a_state_of_the_release_before_names_no_node() {
        let key = StateKey::new(b"cluster secret");
        let payload = "1.1000.7.s.with.dots";
        let tag = hmac::sign(&key.0, payload.as_bytes());
        let sealed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag.as_ref())
        );
        let state = key.open(&sealed, 0).expect("opens");
        assert_eq!(
            (state.node.as_str(), state.call, state.session_id.as_str()),
            ("", 7, "s.with.dots")
        );
    }
}
