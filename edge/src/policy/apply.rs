//! The policy applied to the two requests it changes: `tools/list` (which
//! tools a caller sees, under which names, with which schemas) and
//! `tools/call` (which tool a name means, refused or rate-limited, with
//! the pinned arguments in).
//!
//! The app's own requirements (`requires`) are applied first: a tool the
//! caller may not see by its app's declaration is not read by any rule.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use openclaw_proxy_core::directory::SessionRecord;
use openclaw_proxy_core::escape::Outside;
use openclaw_proxy_core::tools::Tool;
use openclaw_proxy_core::{Caller, Hub};
use rmcp::ErrorData as McpError;
use rmcp::model::ErrorCode;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{Facts, Live, Policy, Verdict};

/// The JSON-RPC error of a call over its rate limit: a server error
/// (JSON-RPC leaves -32000 to -32099 to servers), whose `data` says when to
/// retry (`retryAfterSeconds`), as HTTP's 429 and `Retry-After` would.
pub const RATE_LIMITED: ErrorCode = ErrorCode(-32000);

/// A tool as one caller sees it.
pub struct ToolView {
    pub name: Arc<str>,
    pub description: Arc<str>,
    pub input_schema: Box<RawValue>,
    /// Whether its calls may run as MCP tasks, as the app declared.
    pub task_support: openclaw_proxy_core::tools::TaskSupport,
}

/// What a call became under the policy.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CallAdmitted {
    /// The app's name of the tool, when the caller used another.
    pub tool: Option<String>,
    /// The arguments with the pinned ones in, when any are pinned.
    pub arguments_json: Option<String>,
    /// The question the user must confirm before the app sees the call.
    pub confirm: Option<Arc<str>>,
}

/// The tools of `record` that `caller` may see, each with the verdict the
/// rules give it, in the session's order; a name shown twice (a rename onto
/// another tool's name) is shown once, for the first.
fn visible<'p, 't>(
    policy: &'p Policy,
    record: &SessionRecord,
    tools: &'t [Tool],
    caller: &Caller,
) -> Vec<(&'t Tool, Verdict<'p>)> {
    let mut reading = policy.reading(Facts::new(caller, Some(record)));
    let mut shown = HashSet::new();
    let mut views = Vec::with_capacity(tools.len());
    for tool in tools.iter().filter(|tool| caller.may_use(tool)) {
        let verdict = reading.verdict(&tool.name, &tool.description);
        if !verdict.visible() {
            continue;
        }
        let name = verdict.rename.map_or(&*tool.name, |name| &**name);
        if !shown.insert(name.to_owned()) {
            tracing::warn!(
                tool = Outside::new(&tool.name).field(),
                "policy shows two tools of a session under one name; the second is hidden: rename it elsewhere"
            );
            continue;
        }
        views.push((tool, verdict));
    }
    views
}

impl Live {
    /// The tools of `record` as `caller` sees them.
    pub fn tools_for(&self, record: &SessionRecord, caller: &Caller) -> Vec<ToolView> {
        let policy = self.current();
        let tools = record.tools();
        visible(&policy, record, &tools, caller)
            .into_iter()
            .map(|(tool, verdict)| ToolView {
                name: verdict.rename.unwrap_or(&tool.name).clone(),
                description: verdict.description.unwrap_or(&tool.description).clone(),
                input_schema: match verdict.pinned() {
                    None => tool.input_schema.to_raw(),
                    Some(pins) => without_pinned(&tool.input_schema.to_raw(), &pins),
                },
                task_support: tool.task_support,
            })
            .collect()
    }

    /// Admits a call of the tool the caller named `name` with
    /// `arguments_json` (a JSON object), or refuses it: a name the caller
    /// does not see is an unknown tool, a call over a rate limit is
    /// [`RATE_LIMITED`]. A session that cannot be read is the call's own
    /// error to report.
    pub async fn admit_call(
        &self,
        hub: &Hub,
        session_id: &str,
        name: &str,
        arguments_json: &str,
        caller: &Caller,
    ) -> Result<CallAdmitted, McpError> {
        let Ok(record) = hub.session_record(session_id).await else {
            return Ok(CallAdmitted::default());
        };
        let policy = self.current();
        let tools = record.tools();
        let views = visible(&policy, &record, &tools, caller);
        let shown = |(tool, verdict): &(&Tool, Verdict<'_>)| {
            verdict.rename.map_or(&*tool.name, |name| &**name) == name
        };
        let Some((tool, verdict)) = views.iter().find(|view| shown(view)) else {
            let metrics = hub.metrics();
            if let Some(denied_by) = denied(&policy, &record, &tools, caller, name) {
                metrics.policy().decided(denied_by, "deny");
                tracing::info!(
                    target: "audit",
                    event = "policy_refused",
                    session = Outside::session(session_id).field(),
                    tool = Outside::new(name).field(),
                    rule = denied_by,
                    "a policy rule hides this tool from the caller"
                );
            }
            let offered: Vec<&str> = views
                .iter()
                .map(|(tool, verdict)| verdict.rename.map_or(&*tool.name, |name| &**name))
                .collect();
            let offered = if offered.is_empty() {
                "no tools".to_owned()
            } else {
                offered.join(", ")
            };
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {}: this session offers {offered}",
                    openclaw_proxy_core::escape::quoted(name)
                ),
                None,
            ));
        };
        let metrics = hub.metrics();
        for (rule, limit) in &verdict.rate_limits {
            if let Err(wait) = limit.take(&bucket_key(session_id, &tool.name, caller)) {
                metrics.policy().decided(rule, "rate_limited");
                let seconds = wait.as_secs_f64().max(0.001);
                return Err(McpError::new(
                    RATE_LIMITED,
                    format!(
                        "rate limit reached: rule {rule:?} allows {} calls per second of this tool to this caller; retry in {seconds:.3} s",
                        limit.per_second()
                    ),
                    Some(serde_json::json!({ "retryAfterSeconds": seconds })),
                ));
            }
        }
        let mut admitted = CallAdmitted::default();
        if let Some(pins) = verdict.pinned() {
            for (rule, _) in &verdict.pins {
                metrics.policy().decided(rule, "pin");
            }
            admitted.arguments_json = Some(with_pinned(arguments_json, &pins)?);
        }
        if &*tool.name != name {
            admitted.tool = Some(tool.name.to_string());
        }
        if let Some((rule, question)) = verdict.confirm {
            metrics.policy().decided(rule, "confirm");
            admitted.confirm = Some(question.clone());
        }
        if let Some(rule) = verdict.shown_by {
            metrics.policy().decided(rule, "rename");
        }
        Ok(admitted)
    }
}

/// The deny rule that hides the session's tool `name` from `caller`, when
/// one does.
fn denied<'p>(
    policy: &'p Policy,
    record: &SessionRecord,
    tools: &[Tool],
    caller: &Caller,
    name: &str,
) -> Option<&'p str> {
    let tool = tools
        .iter()
        .find(|tool| &*tool.name == name && caller.may_use(tool))?;
    let mut reading = policy.reading(Facts::new(caller, Some(record)));
    reading.verdict(&tool.name, &tool.description).denied_by
}

/// Whose bucket a call takes from: the session's tool, and the caller (an
/// OAuth subject of its issuer; else the kind of credential, which for a
/// session's own token is the session).
fn bucket_key(session_id: &str, tool: &str, caller: &Caller) -> String {
    let who = match (&caller.identity, caller.kind) {
        (Some(identity), _) => format!("oauth\0{}\0{}", identity.issuer, identity.subject),
        (None, kind) => kind.as_str().to_owned(),
    };
    format!("{session_id}\0{tool}\0{who}")
}

/// `schema` without the pinned properties: the caller neither sees nor
/// sends them. A schema that cannot be read as an object is left alone.
fn without_pinned(schema: &RawValue, pins: &Map<String, Value>) -> Box<RawValue> {
    let Ok(Value::Object(mut schema_object)) = serde_json::from_str::<Value>(schema.get()) else {
        return schema.to_owned();
    };
    if let Some(Value::Object(properties)) = schema_object.get_mut("properties") {
        for key in pins.keys() {
            properties.remove(key);
        }
    }
    if let Some(Value::Array(required)) = schema_object.get_mut("required") {
        required.retain(|name| name.as_str().is_none_or(|name| !pins.contains_key(name)));
    }
    serde_json::value::to_raw_value(&schema_object).unwrap_or_else(|_| schema.to_owned())
}

/// The members of a JSON object, their values as sent (no number is
/// rewritten), in order.
struct Members(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MembersVisitor;
        impl<'de> Visitor<'de> for MembersVisitor {
            type Value = Members;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, Box<RawValue>>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(MembersVisitor)
    }
}

/// `arguments_json` with the pinned arguments in, replacing any the caller
/// sent under their names; the others exactly as sent.
fn with_pinned(arguments_json: &str, pins: &Map<String, Value>) -> Result<String, McpError> {
    let Members(members) = serde_json::from_str(arguments_json).map_err(|error| {
        McpError::invalid_params(
            format!("Invalid params: tools/call arguments must be a JSON object: {error}"),
            None,
        )
    })?;
    let mut out = String::with_capacity(arguments_json.len() + 64);
    out.push('{');
    let mut first = true;
    let mut member = |key: &str, value: &str, out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
        out.push(':');
        out.push_str(value);
    };
    for (key, value) in &members {
        if !pins.contains_key(key) {
            member(key, value.get(), &mut out);
        }
    }
    for (key, value) in pins {
        member(key, &value.to_string(), &mut out);
    }
    out.push('}');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_arguments_replace_the_callers_and_leave_the_rest_as_sent() {
        let pins: Map<String, Value> =
            serde_json::from_str(r#"{"room": "team", "n": 2}"#).expect("pins");
        let merged = with_pinned(
            r#"{"text":"hi","room":"other","big":9007199254740993}"#,
            &pins,
        )
        .expect("an object");
        assert_eq!(
            merged,
            r#"{"text":"hi","big":9007199254740993,"n":2,"room":"team"}"#
        );
        assert!(with_pinned("[1]", &pins).is_err());
    }

    #[test]
    fn a_pinned_argument_leaves_the_schema_and_its_required_list() {
        let schema = serde_json::value::to_raw_value(&serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "room": {"type": "string"}},
            "required": ["text", "room"],
        }))
        .expect("raw");
        let pins: Map<String, Value> = serde_json::from_str(r#"{"room": "team"}"#).expect("pins");
        let shown: Value =
            serde_json::from_str(without_pinned(&schema, &pins).get()).expect("json");
        assert_eq!(
            shown,
            serde_json::json!({
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            })
        );
    }
}
