//! What the Gateway's `POST /tools/invoke` refuses, so that discovery does not
//! list tools whose every call would be a 404.
//!
//! `tools.effective` reports the tools after the agent's tool policy, but not
//! after the HTTP surface's own rules, which live in the Gateway's code rather
//! than in anything it reports. They are mirrored here from the pinned
//! OpenClaw (2026.9.6: `src/security/dangerous-tools.ts`,
//! `src/gateway/tool-resolution.ts`, `src/agents/tool-policy-shared.ts`); the
//! real-gateway tests fail when an upgrade changes them, and a tool that still
//! answers 404 is dropped at its first call ([`super`]), so a drift costs one
//! failed call, not a broken list.

/// Tools `/tools/invoke` refuses unless `gateway.tools.allow` names them.
pub const DEFAULT_HTTP_DENY: &[&str] = &[
    "exec",
    "spawn",
    "shell",
    "fs_write",
    "fs_delete",
    "fs_move",
    "apply_patch",
    "terminal",
    "portal",
    "sessions_spawn",
    "sessions_send",
    "conversations_list",
    "conversations_send",
    "conversations_turn",
    "automations",
    "gateway",
    "plugins",
    "nodes",
    "computer",
    "mobile_ui",
    "openclaw",
];

/// The coding tools (file and shell families): agents get them, but the HTTP
/// surface never builds them, whatever the configuration says.
pub const NEVER_BUILT_FOR_HTTP: &[&str] = &[
    "read",
    "write",
    "edit",
    "ls",
    "apply_patch",
    "exec",
    "process",
];

/// Names the Gateway's tool policy treats as another tool's.
const ALIASES: &[(&str, &str)] = &[
    ("bash", "exec"),
    ("apply-patch", "apply_patch"),
    ("cron", "automations"),
];

/// The operator's `gateway.tools` settings, as `config.get` reports them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpToolSettings {
    /// Removes names from [`DEFAULT_HTTP_DENY`] (exact names, after aliases).
    pub allow: Vec<String>,
    /// Adds to the deny list, compared by name (after case and aliases), as
    /// the Gateway's HTTP filter does for its core tools: it expands no
    /// `group:` entry there (the real-gateway test shows it). A glob that
    /// does deny a plugin tool is caught by the 404 at its first call.
    pub deny: Vec<String>,
}

/// Why `/tools/invoke` would refuse a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The HTTP surface never builds it.
    NotBuilt,
    /// On the default HTTP deny list and not in `gateway.tools.allow`.
    DefaultDeny,
    /// Matched by `gateway.tools.deny`.
    OperatorDeny,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NotBuilt => "never built for HTTP",
            Self::DefaultDeny => {
                "on the Gateway's default HTTP deny list (gateway.tools.allow lifts it)"
            }
            Self::OperatorDeny => "denied by gateway.tools.deny",
        })
    }
}

/// The Gateway's policy name of a tool: lower case, aliases resolved.
pub fn policy_name(name: &str) -> String {
    let lower = name.trim().to_ascii_lowercase();
    ALIASES
        .iter()
        .find(|(alias, _)| *alias == lower)
        .map(|(_, tool)| (*tool).to_owned())
        .unwrap_or(lower)
}

/// Whether `/tools/invoke` refuses `tool`.
pub fn refusal(tool: &str, settings: &HttpToolSettings) -> Option<Refusal> {
    let name = policy_name(tool);
    if NEVER_BUILT_FOR_HTTP.contains(&name.as_str()) {
        return Some(Refusal::NotBuilt);
    }
    let listed = |entries: &[String]| entries.iter().any(|entry| policy_name(entry) == name);
    if DEFAULT_HTTP_DENY.contains(&name.as_str()) && !listed(&settings.allow) {
        return Some(Refusal::DefaultDeny);
    }
    listed(&settings.deny).then_some(Refusal::OperatorDeny)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(allow: &[&str], deny: &[&str]) -> HttpToolSettings {
        HttpToolSettings {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn defaults_refuse_the_deny_list_and_the_coding_tools() {
        let defaults = HttpToolSettings::default();
        assert_eq!(
            refusal("sessions_send", &defaults),
            Some(Refusal::DefaultDeny)
        );
        assert_eq!(refusal("read", &defaults), Some(Refusal::NotBuilt));
        assert_eq!(refusal("Bash", &defaults), Some(Refusal::NotBuilt));
        assert_eq!(refusal("cron", &defaults), Some(Refusal::DefaultDeny));
        assert_eq!(refusal("sessions_list", &defaults), None);
    }

    #[test]
    fn allow_lifts_the_default_list_but_never_builds_coding_tools() {
        let allowed = settings(&["Sessions_Send", "cron", "exec"], &[]);
        assert_eq!(refusal("sessions_send", &allowed), None);
        assert_eq!(refusal("automations", &allowed), None);
        assert_eq!(refusal("exec", &allowed), Some(Refusal::NotBuilt));
    }

    #[test]
    fn deny_takes_exact_names_only() {
        let denied = settings(&["sessions_send"], &["Browser", "web_*", "group:memory"]);
        assert_eq!(refusal("browser", &denied), Some(Refusal::OperatorDeny));
        for tool in ["web_fetch", "memory_get", "sessions_send"] {
            assert_eq!(refusal(tool, &denied), None, "{tool}");
        }
    }
}
