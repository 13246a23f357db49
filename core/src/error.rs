//! Refusals classified once, for every surface.
//!
//! Each error of the core says which [`ErrorKind`] it is, and each transport
//! renders the kinds in one table of its own: gRPC codes in
//! [`crate::grpc`], HTTP statuses and WebSocket close codes in the edge. A
//! new kind does not compile until every table says what it means there.
//! Sentences that several errors and surfaces use are written here, once.

use std::fmt;
use std::time::Duration;

use crate::escape;

/// What kind of refusal an error is, whatever its details.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// What the request names does not exist (a session, most often).
    NotFound,
    /// The request is malformed or breaks a rule: sent again unchanged, it
    /// fails again.
    Invalid,
    /// The credential does not open what the request asks for.
    Unauthenticated,
    /// A limit was reached.
    Exhausted {
        /// When trying again makes sense, when that is known.
        retry_after: Option<Duration>,
    },
    /// The proxy cannot serve it now (shutting down, a backend out of
    /// reach); later it may.
    Unavailable,
}

/// The sentence of a session that does not exist, for every error and
/// surface that reports one: `session "…" does not exist: …`.
#[derive(Clone, Copy, Debug)]
pub struct UnknownSession<'a>(pub &'a str);

impl fmt::Display for UnknownSession<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "session {} does not exist: it was never created, it expired, or it was deleted",
            escape::quoted(self.0)
        )
    }
}
