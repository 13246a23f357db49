//! Who may see and call a tool, as its app declares it
//! (`ToolDefinition.requires.scopes` and `.caller_kinds`).
//!
//! The app knows which of its tools are dangerous; the proxy knows who
//! calls. A requirement joins the two before the app sees anything: a
//! caller that lacks it does not find the tool in `tools/list`, and a call
//! is refused naming what was missing (a scope or a kind of credential,
//! which says nothing about anyone else). One type for the proxy, the
//! cluster's stored tools and the apps, so the rule is written once.

use std::fmt;
use std::sync::Arc;

use crate::CallerKind;

/// What a tool needs of its verified caller: every one of `scopes`, and
/// one of the kinds (any kind when none is named).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallerNeeds {
    scopes: Arc<[Box<str>]>,
    kinds: u8,
}

/// Why a caller may not see or call a tool: said to that caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Missing {
    /// An OAuth scope its token does not grant.
    Scope(Box<str>),
    /// Its kind of credential is not one the tool accepts.
    Kind {
        /// The caller's kind.
        presented: CallerKind,
        /// The kinds the tool accepts, by wire name, comma-separated.
        accepted: String,
    },
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Scope(scope) => write!(
                f,
                "it needs the OAuth scope {}, which this caller's access token does not grant",
                crate::escape::quoted(scope)
            ),
            Self::Kind {
                presented,
                accepted,
            } => write!(
                f,
                "it is offered to callers of kind {accepted}, and this caller is of kind {}",
                presented.as_str()
            ),
        }
    }
}

/// Why a declared requirement was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequirementError {
    #[error(
        "requires.scopes names {}: a scope is 1 to 256 printable ASCII characters without spaces, quotes or backslashes (RFC 6749, section 3.3)",
        crate::escape::quoted(.0)
    )]
    InvalidScope(String),
    #[error(
        "requires.caller_kinds names {}: the kinds are \"oauth\", \"session_token\", \"global_token\" and \"none\"",
        crate::escape::quoted(.0)
    )]
    UnknownKind(String),
}

/// Every kind, in the order they are reported.
const KINDS: [CallerKind; 4] = [
    CallerKind::OAuth,
    CallerKind::SessionToken,
    CallerKind::GlobalToken,
    CallerKind::None,
];

fn bit(kind: CallerKind) -> u8 {
    KINDS
        .iter()
        .position(|known| *known == kind)
        .map_or(0, |index| 1 << index)
}

/// Whether `scope` is a scope token (RFC 6749: `%x21 / %x23-5B / %x5D-7E`).
fn is_scope_token(scope: &str) -> bool {
    (1..=256).contains(&scope.len())
        && scope
            .bytes()
            .all(|b| matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

impl CallerNeeds {
    /// Nothing needed: every caller.
    pub fn none() -> Self {
        Self::default()
    }

    /// The needs a definition names, checked.
    pub fn parse(scopes: &[String], kinds: &[String]) -> Result<Self, RequirementError> {
        let mut kept: Vec<Box<str>> = Vec::with_capacity(scopes.len());
        for scope in scopes {
            if !is_scope_token(scope) {
                return Err(RequirementError::InvalidScope(scope.clone()));
            }
            if !kept.iter().any(|known| **known == **scope) {
                kept.push(scope.as_str().into());
            }
        }
        let mut bits = 0;
        for name in kinds {
            let kind = CallerKind::parse(name);
            if kind.as_str() != name {
                return Err(RequirementError::UnknownKind(name.clone()));
            }
            bits |= bit(kind);
        }
        Ok(Self {
            scopes: kept.into(),
            kinds: bits,
        })
    }

    /// The needs of stored names, leaving out any this build does not know
    /// (stored by a newer one): a scope is kept as it is.
    pub fn trusted(scopes: &[String], kinds: &[String]) -> Self {
        Self {
            scopes: scopes.iter().map(|scope| scope.as_str().into()).collect(),
            kinds: kinds
                .iter()
                .map(|name| CallerKind::parse(name))
                .filter(|kind| kinds.iter().any(|name| name == kind.as_str()))
                .fold(0, |bits, kind| bits | bit(kind)),
        }
    }

    /// Whether every caller qualifies.
    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty() && self.kinds == 0
    }

    /// The scopes needed, as declared.
    pub fn scopes(&self) -> impl Iterator<Item = &str> {
        self.scopes.iter().map(|scope| &**scope)
    }

    /// The kinds accepted, by wire name; empty for every kind.
    pub fn kind_names(&self) -> Vec<String> {
        KINDS
            .iter()
            .filter(|kind| self.kinds & bit(**kind) != 0)
            .map(|kind| kind.as_str().to_owned())
            .collect()
    }

    /// The scopes needed, owned, as a definition gives them.
    pub fn scope_names(&self) -> Vec<String> {
        self.scopes().map(str::to_owned).collect()
    }

    /// What a caller of `kind` granted `granted` lacks, the first thing
    /// only (the kind before the scopes); `None` when it qualifies.
    pub fn missing(&self, kind: CallerKind, granted: &[String]) -> Option<Missing> {
        if self.kinds != 0 && self.kinds & bit(kind) == 0 {
            return Some(Missing::Kind {
                presented: kind,
                accepted: self.kind_names().join(", "),
            });
        }
        self.scopes
            .iter()
            .find(|scope| !granted.iter().any(|have| *have == ***scope))
            .map(|scope| Missing::Scope(scope.clone()))
    }

    /// Whether a caller of `kind` granted `granted` qualifies.
    pub fn admits(&self, kind: CallerKind, granted: &[String]) -> bool {
        self.is_empty() || self.missing(kind, granted).is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_caller_needs_every_scope_and_one_of_the_kinds() {
        let needs = CallerNeeds::parse(
            &strings(&["chat:write", "admin"]),
            &strings(&["oauth", "session_token"]),
        )
        .expect("valid");
        let granted = strings(&["chat:write", "admin", "profile"]);
        assert!(needs.admits(CallerKind::OAuth, &granted));
        assert_eq!(
            needs.missing(CallerKind::OAuth, &strings(&["chat:write"])),
            Some(Missing::Scope("admin".into()))
        );
        assert!(matches!(
            needs.missing(CallerKind::GlobalToken, &granted),
            Some(Missing::Kind { presented: CallerKind::GlobalToken, ref accepted })
                if accepted == "oauth, session_token"
        ));
        assert!(CallerNeeds::none().admits(CallerKind::None, &[]));
    }

    #[test]
    fn a_bad_scope_or_an_unknown_kind_is_refused_by_name() {
        assert_eq!(
            CallerNeeds::parse(&strings(&["two words"]), &[]),
            Err(RequirementError::InvalidScope("two words".into()))
        );
        assert_eq!(
            CallerNeeds::parse(&[], &strings(&["bearer"])),
            Err(RequirementError::UnknownKind("bearer".into()))
        );
        let stored = CallerNeeds::trusted(&strings(&["a"]), &strings(&["oauth", "robot"]));
        assert_eq!(stored.kind_names(), strings(&["oauth"]));
    }
}
