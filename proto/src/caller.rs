//! Which credential opened a request to a session's MCP endpoint, as the
//! proxy verified it and tells the app with every call
//! (`CallerIdentity.kind`). One type for the proxy and the apps, so that
//! the names on the wire are written in one place.

/// Which credential opened the MCP request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallerKind {
    /// No credential was needed (the proxy's MCP side is open), or the call
    /// did not come through an authenticated surface, or the proxy did not
    /// say.
    #[default]
    None,
    /// The session's own token (`mcp_token`).
    SessionToken,
    /// The proxy's global OpenClaw token (`OPENCLAW_PROXY_OPENCLAW_TOKEN`).
    GlobalToken,
    /// An OAuth access token the proxy verified.
    OAuth,
}

impl CallerKind {
    /// The wire name: `none`, `session_token`, `global_token`, `oauth`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::SessionToken => "session_token",
            Self::GlobalToken => "global_token",
            Self::OAuth => "oauth",
        }
    }

    /// The kind of a wire name; an unknown one is [`CallerKind::None`].
    pub fn parse(name: &str) -> Self {
        match name {
            "session_token" => Self::SessionToken,
            "global_token" => Self::GlobalToken,
            "oauth" => Self::OAuth,
            _ => Self::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_reads_back_from_its_wire_name() {
        for kind in [
            CallerKind::None,
            CallerKind::SessionToken,
            CallerKind::GlobalToken,
            CallerKind::OAuth,
        ] {
            assert_eq!(CallerKind::parse(kind.as_str()), kind);
        }
        assert_eq!(CallerKind::parse("bearer"), CallerKind::None);
    }
}
