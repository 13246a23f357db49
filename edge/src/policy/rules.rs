//! Compiled rules and how they are read for one caller and one tool.
//!
//! Rules are read top to bottom. A rule whose condition holds applies its
//! effects (confirm, rename, description, pin, rate limit), the first rule
//! to set an effect setting it; `allow` and `deny` end the reading (`deny`
//! hides and refuses the tool). No rule ending the reading: allowed.
//!
//! Conditions are CEL programs compiled once, when the file is read, and
//! evaluated per request over three maps: `caller`, `session` and `tool`.
//! A rule whose condition does not look at `tool` is evaluated once per
//! request, not once per tool of a list. A condition that fails at run
//! time (a value of the wrong type) does not hold, and says so in the log.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use cel::objects::Key;
use cel::{Context, Env, Program, Value};
use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};
use serde_json::Map;

/// A rule's condition: a compiled CEL program, or none (every call).
pub(super) struct Condition {
    program: Option<Program>,
    uses_tool: bool,
}

/// The variables a condition may name.
pub(super) const VARIABLES: [&str; 3] = ["caller", "session", "tool"];

impl Condition {
    pub(super) fn always() -> Self {
        Self {
            program: None,
            uses_tool: false,
        }
    }

    /// Compiles `source` and tries it once on facts with every field
    /// present, so a misspelt variable or field, or a condition that is not
    /// true or false, is found when the file is read.
    pub(super) fn compile(source: &str) -> Result<Self, String> {
        let program = Program::compile(source).map_err(|errors| {
            let first = errors.errors.first();
            match first {
                Some(error) => format!(
                    "`when` is not valid CEL: {} (at column {} of the condition)",
                    error.msg, error.pos.1
                ),
                None => "`when` is not valid CEL".to_owned(),
            }
        })?;
        let references = program.references();
        let uses_tool = references.has_variable("tool");
        let condition = Self {
            program: Some(program),
            uses_tool,
        };
        let env = Arc::new(Env::stdlib());
        let facts = Facts::sample();
        let mut context = Context::with_env(env);
        facts.bind(&mut context);
        context.add_variable_from_value("tool", ToolFacts::sample().value());
        match condition.evaluate(&context) {
            Ok(_) => Ok(condition),
            Err(problem) => Err(format!(
                "`when` cannot be evaluated: {problem}; the variables are {} (docs/security.md, \"Policy\")",
                VARIABLES.join(", ")
            )),
        }
    }

    fn evaluate(&self, context: &Context<'_, '_>) -> Result<bool, String> {
        let Some(program) = &self.program else {
            return Ok(true);
        };
        match program.execute(context) {
            Ok(Value::Bool(holds)) => Ok(holds),
            Ok(_) => Err("it gave a value that is not true or false".to_owned()),
            Err(error) => Err(error.to_string()),
        }
    }
}

/// A token bucket per caller and tool: `per_second` calls, `burst` at once.
pub(super) struct RateLimit {
    per_second: f64,
    buckets: RateLimiter<String, HashMapStateStore<String>, DefaultClock>,
}

impl RateLimit {
    pub(super) fn new(per_second: f64, burst: NonZeroU32) -> Option<Self> {
        if !(per_second > 0.0 && per_second <= 1_000_000.0) {
            return None;
        }
        let quota = Quota::with_period(Duration::from_secs_f64(1.0 / per_second))?;
        Some(Self {
            per_second,
            buckets: RateLimiter::keyed(quota.allow_burst(burst)),
        })
    }

    /// Takes a token for `key`; when there is none, how long until there is.
    pub(super) fn take(&self, key: &String) -> Result<(), Duration> {
        self.buckets
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// Forgets the buckets that are full again (memory for callers gone).
    pub(super) fn forget_idle(&self) {
        self.buckets.retain_recent();
    }

    pub(super) fn per_second(&self) -> f64 {
        self.per_second
    }
}

/// What a rule does when its condition holds, besides allow or deny.
pub(super) struct Effects {
    pub confirm: Option<Arc<str>>,
    pub rename: Option<Arc<str>>,
    pub description: Option<Arc<str>>,
    pub pin: Option<Arc<Map<String, serde_json::Value>>>,
    pub rate_limit: Option<RateLimit>,
}

impl Effects {
    pub(super) fn is_empty(&self) -> bool {
        self.confirm.is_none()
            && self.rename.is_none()
            && self.description.is_none()
            && self.pin.is_none()
            && self.rate_limit.is_none()
    }
}

/// One rule of the file.
pub(super) struct Rule {
    pub name: Arc<str>,
    pub condition: Condition,
    /// `Some(true)` allow, `Some(false)` deny: the reading ends.
    pub final_decision: Option<bool>,
    pub effects: Effects,
}

/// What the caller and the session are, as conditions see them.
pub(super) struct Facts {
    caller: Value,
    session: Value,
}

fn map(entries: Vec<(&'static str, Value)>) -> Value {
    let map: HashMap<Key, Value> = entries
        .into_iter()
        .map(|(key, value)| (Key::from(key.to_owned()), value))
        .collect();
    Value::Map(map.into())
}

fn text(value: &str) -> Value {
    Value::String(Arc::new(value.to_owned()))
}

impl Facts {
    /// The facts of a verified caller of a session.
    pub(super) fn new(
        caller: &openclaw_proxy_core::Caller,
        session: Option<&openclaw_proxy_core::directory::SessionRecord>,
    ) -> Self {
        let identity = caller.identity.as_deref();
        let field = |get: fn(&openclaw_proxy_core::OAuthIdentity) -> &str| {
            text(identity.map(get).unwrap_or_default())
        };
        let caller = map(vec![
            ("kind", text(caller.kind.as_str())),
            ("issuer", field(|identity| &identity.issuer)),
            ("subject", field(|identity| &identity.subject)),
            ("client_id", field(|identity| &identity.client_id)),
            (
                "scopes",
                Value::List(Arc::new(caller.scopes().iter().map(|s| text(s)).collect())),
            ),
        ]);
        let owner = session.and_then(|record| record.credentials.owner.as_ref());
        let metadata = session.map(|record| &record.metadata);
        let meta = |get: fn(&openclaw_proxy_core::proto::SessionMetadata) -> &str| {
            text(metadata.map(get).unwrap_or_default())
        };
        let session = map(vec![
            (
                "id",
                text(session.map(|record| &*record.id).unwrap_or_default()),
            ),
            (
                "owner",
                map(vec![
                    (
                        "subject",
                        text(
                            owner
                                .map(|owner| owner.subject.as_str())
                                .unwrap_or_default(),
                        ),
                    ),
                    (
                        "issuer",
                        text(owner.map(|owner| owner.issuer.as_str()).unwrap_or_default()),
                    ),
                ]),
            ),
            ("device_id", meta(|m| &m.device_id)),
            ("device_name", meta(|m| &m.device_name)),
            ("app_version", meta(|m| &m.app_version)),
            ("chat_id", meta(|m| &m.chat_id)),
        ]);
        Self { caller, session }
    }

    fn sample() -> Self {
        Self::new(&openclaw_proxy_core::Caller::default(), None)
    }

    fn bind(&self, context: &mut Context<'_, '_>) {
        context.add_variable_from_value("caller", self.caller.clone());
        context.add_variable_from_value("session", self.session.clone());
    }
}

/// What a tool is, as conditions see it.
pub(super) struct ToolFacts<'a> {
    pub name: &'a str,
    pub description: &'a str,
}

impl ToolFacts<'_> {
    fn sample() -> Self {
        ToolFacts {
            name: "",
            description: "",
        }
    }

    fn value(&self) -> Value {
        map(vec![
            ("name", text(self.name)),
            ("description", text(self.description)),
        ])
    }
}

/// How a tool looks to one caller, and what its calls go through.
#[derive(Default)]
pub(super) struct Verdict<'p> {
    /// The deny rule that hides it.
    pub denied_by: Option<&'p str>,
    /// The name the caller sees, when renamed.
    pub rename: Option<&'p Arc<str>>,
    /// The rule that renamed or re-described it.
    pub shown_by: Option<&'p str>,
    pub description: Option<&'p Arc<str>>,
    /// Arguments fixed by the operator, by name (the first rule to pin a
    /// name fixing it).
    pub pins: Vec<(&'p str, &'p Arc<Map<String, serde_json::Value>>)>,
    /// The question of a confirmation, and the rule that asks it.
    pub confirm: Option<(&'p str, &'p Arc<str>)>,
    /// The rate limits that apply, with their rules' names.
    pub rate_limits: Vec<(&'p str, &'p RateLimit)>,
}

impl<'p> Verdict<'p> {
    /// Whether the caller may see the tool.
    pub fn visible(&self) -> bool {
        self.denied_by.is_none()
    }

    /// The pinned arguments, merged (the first pin of a name wins).
    pub fn pinned(&self) -> Option<Map<String, serde_json::Value>> {
        if self.pins.is_empty() {
            return None;
        }
        let mut merged = Map::new();
        for (_, pin) in &self.pins {
            for (key, value) in pin.iter() {
                merged.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        Some(merged)
    }
}

/// The rules read for one request: the base context with the caller and
/// session bound, and the results of the conditions that do not look at
/// the tool.
pub(super) struct Reading<'p> {
    rules: &'p [Rule],
    env: Arc<Env>,
    facts: Facts,
    cached: Vec<Option<bool>>,
}

impl<'p> Reading<'p> {
    pub(super) fn new(rules: &'p [Rule], env: Arc<Env>, facts: Facts) -> Self {
        Self {
            rules,
            env,
            facts,
            cached: vec![None; rules.len()],
        }
    }

    /// The verdict for the tool `name`, described `description`.
    pub fn verdict(&mut self, name: &str, description: &str) -> Verdict<'p> {
        let mut context = Context::with_env(self.env.clone());
        self.facts.bind(&mut context);
        let tool = ToolFacts { name, description };
        context.add_variable_from_value("tool", tool.value());
        let mut verdict = Verdict::default();
        for (index, rule) in self.rules.iter().enumerate() {
            let holds = match self.cached[index] {
                Some(holds) => holds,
                None => {
                    let holds = rule.condition.evaluate(&context).unwrap_or_else(|problem| {
                        tracing::warn!(
                            rule = &*rule.name,
                            "policy rule's condition failed, taken as false: {problem}"
                        );
                        false
                    });
                    if !rule.condition.uses_tool {
                        self.cached[index] = Some(holds);
                    }
                    holds
                }
            };
            if !holds {
                continue;
            }
            let name = &*rule.name;
            let effects = &rule.effects;
            if let Some(message) = &effects.confirm {
                verdict.confirm.get_or_insert((name, message));
            }
            if verdict.rename.is_none() && effects.rename.is_some() {
                verdict.rename = effects.rename.as_ref();
                verdict.shown_by = Some(name);
            }
            if verdict.description.is_none() && effects.description.is_some() {
                verdict.description = effects.description.as_ref();
                verdict.shown_by.get_or_insert(name);
            }
            if let Some(pin) = &effects.pin {
                verdict.pins.push((name, pin));
            }
            if let Some(limit) = &effects.rate_limit {
                verdict.rate_limits.push((name, limit));
            }
            match rule.final_decision {
                Some(true) => break,
                Some(false) => {
                    verdict.denied_by = Some(name);
                    break;
                }
                None => {}
            }
        }
        verdict
    }
}
