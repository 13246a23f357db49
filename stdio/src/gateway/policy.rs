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

use std::collections::BTreeMap;

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
    /// Adds to the deny list: names, `*` globs, `group:<id>` tool groups.
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

/// Whether `/tools/invoke` refuses `tool`. `groups` maps a `group:<id>` deny
/// entry to its tools (from `tools.catalog`); unknown groups match nothing.
pub fn refusal(
    tool: &str,
    settings: &HttpToolSettings,
    groups: &BTreeMap<String, Vec<String>>,
) -> Option<Refusal> {
    let name = policy_name(tool);
    if NEVER_BUILT_FOR_HTTP.contains(&name.as_str()) {
        return Some(Refusal::NotBuilt);
    }
    let allowed = settings
        .allow
        .iter()
        .any(|allowed| policy_name(allowed) == name);
    if DEFAULT_HTTP_DENY.contains(&name.as_str()) && !allowed {
        return Some(Refusal::DefaultDeny);
    }
    let denied = settings.deny.iter().any(|entry| {
        let pattern = policy_name(entry);
        match groups.get(&pattern) {
            Some(members) => members.iter().any(|member| policy_name(member) == name),
            None => glob_matches(&pattern, &name),
        }
    });
    denied.then_some(Refusal::OperatorDeny)
}

/// `*` matches any run of characters; everything else matches itself.
fn glob_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
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
        let none = BTreeMap::new();
        let defaults = HttpToolSettings::default();
        assert_eq!(
            refusal("sessions_send", &defaults, &none),
            Some(Refusal::DefaultDeny)
        );
        assert_eq!(refusal("read", &defaults, &none), Some(Refusal::NotBuilt));
        assert_eq!(refusal("Bash", &defaults, &none), Some(Refusal::NotBuilt));
        assert_eq!(
            refusal("cron", &defaults, &none),
            Some(Refusal::DefaultDeny)
        );
        assert_eq!(refusal("sessions_list", &defaults, &none), None);
    }

    #[test]
    fn allow_lifts_the_default_list_but_never_builds_coding_tools() {
        let none = BTreeMap::new();
        let allowed = settings(&["Sessions_Send", "cron", "exec"], &[]);
        assert_eq!(refusal("sessions_send", &allowed, &none), None);
        assert_eq!(refusal("automations", &allowed, &none), None);
        assert_eq!(refusal("exec", &allowed, &none), Some(Refusal::NotBuilt));
    }

    #[test]
    fn deny_takes_names_globs_and_groups() {
        let groups = BTreeMap::from([(
            "group:memory".to_owned(),
            vec!["memory_get".to_owned(), "memory_search".to_owned()],
        )]);
        let denied = settings(
            &["sessions_send"],
            &["browser", "web_*", "group:memory", "*_status"],
        );
        for tool in ["browser", "web_fetch", "memory_get", "session_status"] {
            assert_eq!(
                refusal(tool, &denied, &groups),
                Some(Refusal::OperatorDeny),
                "{tool}"
            );
        }
        assert_eq!(refusal("sessions_send", &denied, &groups), None);
        assert_eq!(refusal("canvas", &denied, &groups), None);
        let everything = settings(&[], &["*"]);
        assert_eq!(
            refusal("canvas", &everything, &groups),
            Some(Refusal::OperatorDeny)
        );
    }

    #[test]
    fn globs() {
        assert!(glob_matches("a*c", "abc"));
        assert!(glob_matches("a*c", "ac"));
        assert!(!glob_matches("a*c", "acb"));
        assert!(glob_matches("*a*b*", "xaxbx"));
        assert!(!glob_matches("ab*ba", "aba"));
        assert!(glob_matches("exact", "exact"));
        assert!(!glob_matches("exact", "exactly"));
    }
}
