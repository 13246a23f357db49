//! The policy file as the operator writes it, read into compiled rules:
//! every problem is named by the rule and the line, before anything is
//! served.
//!
//! Why TOML rather than YAML: a policy decides who may delete what, so its
//! file must mean one thing. TOML has no implicit typing (`no` is not
//! `false`, `0755` is not octal), no indentation to get wrong, an ordered
//! list of rules written as `[[rule]]` tables that read top to bottom, and
//! it is the configuration format of Rust's own tools; the `toml` crate
//! keeps the span of every value, which is how a bad rule is named by its
//! line. (YAML's maintained Rust parsers are forks of a deprecated one.)

use std::collections::HashSet;
use std::num::NonZeroU32;
use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};
use toml::Spanned;

use super::rules::{Condition, Effects, RateLimit, Rule};
use super::{Policy, PolicyError};

/// The file: `[[rule]]` tables, in order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileBody {
    #[serde(default)]
    rule: Vec<Spanned<RuleBody>>,
}

/// One `[[rule]]` table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleBody {
    name: Spanned<String>,
    /// The CEL condition; absent: every call.
    #[serde(default)]
    when: Option<Spanned<String>>,
    /// `allow` or `deny`: ends the reading of the rules.
    #[serde(default)]
    decision: Option<Spanned<String>>,
    /// `true`, or the question the user is asked.
    #[serde(default)]
    confirm: Option<Spanned<ConfirmBody>>,
    #[serde(default)]
    rename: Option<Spanned<String>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    pin: Option<Spanned<Map<String, Value>>>,
    #[serde(default)]
    rate_limit: Option<Spanned<RateBody>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ConfirmBody {
    Flag(bool),
    Message(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RateBody {
    per_second: f64,
    #[serde(default)]
    burst: Option<u32>,
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// Reads and compiles the policy in `text` (the file's contents).
pub(super) fn parse(text: &str, source: &str) -> Result<Policy, PolicyError> {
    let body: FileBody = toml::from_str(text).map_err(|error| PolicyError::Syntax {
        file: source.to_owned(),
        line: error.span().map_or(1, |span| line_of(text, span.start)),
        problem: error.message().trim().to_owned(),
    })?;
    let mut names = HashSet::new();
    let mut rules = Vec::with_capacity(body.rule.len());
    for (index, spanned) in body.rule.into_iter().enumerate() {
        let table = spanned.span();
        let rule = spanned.into_inner();
        let refused = |span: Range<usize>, problem: String| PolicyError::Rule {
            file: source.to_owned(),
            line: line_of(text, span.start),
            rule: rule.name.get_ref().clone(),
            index,
            problem,
        };
        let name = rule.name.get_ref().trim();
        if name.is_empty() {
            return Err(refused(rule.name.span(), "its name is empty".into()));
        }
        if !names.insert(name.to_owned()) {
            return Err(refused(
                rule.name.span(),
                "another rule has this name: names identify rules in metrics and audit events"
                    .into(),
            ));
        }
        let condition = match &rule.when {
            None => Condition::always(),
            Some(when) => Condition::compile(when.get_ref())
                .map_err(|problem| refused(when.span(), problem))?,
        };
        let final_decision = match &rule.decision {
            None => None,
            Some(decision) => match decision.get_ref().as_str() {
                "allow" => Some(true),
                "deny" => Some(false),
                other => {
                    return Err(refused(
                        decision.span(),
                        format!("decision is {other:?}: it is \"allow\" or \"deny\""),
                    ));
                }
            },
        };
        let effects = effects_of(&rule, &refused)?;
        if final_decision == Some(false) && !effects.is_empty() {
            return Err(refused(
                table.clone(),
                "a deny rule hides and refuses the tool: it cannot also confirm, rename, describe, pin or rate-limit it".into(),
            ));
        }
        if final_decision.is_none() && effects.is_empty() {
            return Err(refused(
                table,
                "it does nothing: give it a decision (allow, deny) or an effect (confirm, rename, description, pin, rate_limit)".into(),
            ));
        }
        rules.push(Rule {
            name: name.into(),
            condition,
            final_decision,
            effects,
        });
    }
    Ok(Policy::new(rules))
}

fn effects_of(
    rule: &RuleBody,
    refused: &impl Fn(Range<usize>, String) -> PolicyError,
) -> Result<Effects, PolicyError> {
    let confirm = match &rule.confirm {
        None => None,
        Some(confirm) => match confirm.get_ref() {
            ConfirmBody::Flag(false) => None,
            ConfirmBody::Flag(true) => Some(Arc::from("")),
            ConfirmBody::Message(message) => Some(Arc::from(message.as_str())),
        },
    };
    let rename = match &rule.rename {
        None => None,
        Some(rename) => {
            if !openclaw_proxy_proto::tools::is_valid_tool_name(rename.get_ref()) {
                return Err(refused(
                    rename.span(),
                    format!(
                        "rename {:?} is not a valid MCP tool name: 1 to 128 characters from A-Z a-z 0-9 _ - .",
                        rename.get_ref()
                    ),
                ));
            }
            Some(Arc::from(rename.get_ref().as_str()))
        }
    };
    let pin = match &rule.pin {
        None => None,
        Some(pin) if pin.get_ref().is_empty() => {
            return Err(refused(pin.span(), "pin names no argument".into()));
        }
        Some(pin) => Some(Arc::new(pin.get_ref().clone())),
    };
    let rate_limit = match &rule.rate_limit {
        None => None,
        Some(rate) => {
            let body = rate.get_ref();
            let burst = body.burst.unwrap_or(1);
            let limit = (body.per_second.is_finite() && body.per_second > 0.0)
                .then_some(())
                .and_then(|()| NonZeroU32::new(burst))
                .and_then(|burst| RateLimit::new(body.per_second, burst));
            match limit {
                Some(limit) => Some(limit),
                None => {
                    return Err(refused(
                        rate.span(),
                        format!(
                            "rate_limit needs per_second above 0 (at most 1,000,000) and a burst of at least 1; it has per_second = {}, burst = {burst}",
                            body.per_second
                        ),
                    ));
                }
            }
        }
    };
    Ok(Effects {
        confirm,
        rename,
        description: rule.description.as_deref().map(Arc::from),
        pin,
        rate_limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> String {
        match parse(text, "policy.toml") {
            Ok(_) => panic!("accepted: {text}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn a_good_file_compiles_every_rule_in_order() {
        let policy = parse(
            r#"
[[rule]]
name = "hide deletes"
when = 'caller.kind == "global_token" && tool.name.startsWith("delete_")'
decision = "deny"

[[rule]]
name = "pin the room"
when = 'tool.name == "post"'
rename = "say"
description = "Says something in the team room."
pin = { room = "team" }
rate_limit = { per_second = 2.0, burst = 5 }
"#,
            "policy.toml",
        )
        .expect("valid");
        assert_eq!(policy.rule_names(), ["hide deletes", "pin the room"]);
    }

    #[test]
    fn a_bad_rule_is_named_with_its_line_and_problem() {
        let bad_cel = refusal(
            "[[rule]]\nname = \"a\"\ndecision = \"deny\"\n\n[[rule]]\nname = \"b\"\nwhen = 'caller.kind ==='\ndecision = \"deny\"\n",
        );
        assert!(
            bad_cel.contains("line 7") && bad_cel.contains("\"b\""),
            "{bad_cel}"
        );
        let unknown_variable =
            refusal("[[rule]]\nname = \"c\"\nwhen = 'user.name == \"x\"'\ndecision = \"deny\"\n");
        assert!(
            unknown_variable.contains("line 3") && unknown_variable.contains("\"c\""),
            "{unknown_variable}"
        );
        let decision = refusal("[[rule]]\nname = \"d\"\ndecision = \"maybe\"\n");
        assert!(decision.contains("line 3"), "{decision}");
        let field = refusal("[[rule]]\nname = \"e\"\ndecison = \"deny\"\n");
        assert!(
            field.contains("line 3") && field.contains("decison"),
            "{field}"
        );
        let twice = refusal(
            "[[rule]]\nname = \"f\"\ndecision = \"deny\"\n[[rule]]\nname = \"f\"\ndecision = \"allow\"\n",
        );
        assert!(twice.contains("line 5"), "{twice}");
        let idle = refusal("[[rule]]\nname = \"g\"\nwhen = 'true'\n");
        assert!(idle.contains("does nothing"), "{idle}");
        let rate = refusal("[[rule]]\nname = \"h\"\nrate_limit = { per_second = 0.0 }\n");
        assert!(rate.contains("line 3"), "{rate}");
    }
}
