//! The operator's policy (`OPENCLAW_PROXY_POLICY_FILE`): ordered rules,
//! each a CEL condition over the caller, the session and the tool, that
//! hide and refuse tools, rename or re-describe them, pin arguments, and
//! rate-limit calls per caller and tool (docs/security.md, "Policy").
//!
//! Why in the edge, in front of the core: a policy is about who called,
//! which only the node the caller reached knows first-hand; deciding there,
//! before a call is routed, means a call forwarded to another node's bridge
//! is never judged twice, and the app only ever receives a call as the
//! policy let it through (its own tool name, the pinned arguments in). The
//! hooks are two: [`Live::tools_for`] for `tools/list` and
//! [`Live::admit_call`] for `tools/call`.
//!
//! The file is read and compiled once; a bad file refuses to start, naming
//! the rule, its line and the problem. While serving, the file is polled:
//! a changed file that compiles replaces the rules between two requests
//! (a request in flight keeps the rules it started with); one that does
//! not is refused with a log line, and the rules before it stay. Every
//! node of a cluster reads its own copy; `openclaw_proxy_policy_loaded`
//! carries the SHA-256 of the file each applies.

mod apply;
mod file;
mod rules;

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use openclaw_proxy_core::Hub;

pub use apply::{CallAdmitted, ToolView};
use rules::{Facts, Reading, Verdict};

/// How often the file is looked at for changes, unless configured.
pub const DEFAULT_POLL: Duration = Duration::from_secs(2);

/// Why a policy file was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read the policy file {file}: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the policy file {file}, line {line}: {problem}")]
    Syntax {
        file: String,
        line: usize,
        problem: String,
    },
    #[error(
        "the policy file {file}, line {line}: rule {rule:?} (rule {index}, counting from 0): {problem}"
    )]
    Rule {
        file: String,
        line: usize,
        rule: String,
        index: usize,
        problem: String,
    },
}

/// A compiled policy file.
pub struct Policy {
    rules: Vec<rules::Rule>,
    env: Arc<cel::Env>,
    sha256: String,
}

impl std::fmt::Debug for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policy")
            .field("rules", &self.rule_names())
            .field("sha256", &self.sha256)
            .finish()
    }
}

impl Policy {
    fn new(rules: Vec<rules::Rule>) -> Self {
        Self {
            rules,
            env: Arc::new(cel::Env::stdlib()),
            sha256: String::new(),
        }
    }

    /// Reads and compiles the policy in `text`; `source` names the file in
    /// errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, PolicyError> {
        let mut policy = file::parse(text, source)?;
        policy.sha256 = sha256_hex(text.as_bytes());
        Ok(policy)
    }

    /// The rules' names, in order.
    pub fn rule_names(&self) -> Vec<&str> {
        self.rules.iter().map(|rule| &*rule.name).collect()
    }

    /// The SHA-256 of the file, in hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The rules read for one request of a caller.
    fn reading(&self, facts: Facts) -> Reading<'_> {
        Reading::new(&self.rules, self.env.clone(), facts)
    }

    fn forget_idle_buckets(&self) {
        for rule in &self.rules {
            if let Some(limit) = &rule.effects.rate_limit {
                limit.forget_idle();
            }
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest
        .as_ref()
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// The policy a server applies, reloaded when its file changes.
#[derive(Debug)]
pub struct Live {
    path: PathBuf,
    poll: Duration,
    current: RwLock<Arc<Policy>>,
}

impl Live {
    /// Reads `path`, refusing a file that does not compile.
    pub fn load(path: &Path, poll: Duration) -> Result<Self, PolicyError> {
        let policy = read(path)?;
        Ok(Self {
            path: path.to_owned(),
            poll: poll.max(Duration::from_millis(10)),
            current: RwLock::new(Arc::new(policy)),
        })
    }

    /// The rules in force.
    pub fn current(&self) -> Arc<Policy> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Looks at the file every poll interval, forever: a changed file that
    /// compiles replaces the rules, one that does not is logged and the
    /// rules stay. A change is told to the clients that hold a stream
    /// (`notifications/tools/list_changed`): what they see may differ.
    /// Also forgets the rate-limit buckets of callers gone.
    pub async fn reload_when_changed(self: Arc<Self>, hub: Hub) {
        let metrics = hub.metrics().clone();
        let mut applied = self.current().sha256.clone();
        metrics.policy().loaded(&applied);
        let mut refused: Option<String> = None;
        let mut ticks = tokio::time::interval(self.poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.current().forget_idle_buckets();
            let Ok(bytes) = tokio::fs::read(&self.path).await else {
                // A file being replaced may be missing for a moment; the
                // rules stay until it is back.
                continue;
            };
            let sha256 = sha256_hex(&bytes);
            if sha256 == applied || refused.as_ref() == Some(&sha256) {
                continue;
            }
            let source = self.path.display().to_string();
            let parsed = std::str::from_utf8(&bytes)
                .map_err(|error| PolicyError::Syntax {
                    file: source.clone(),
                    line: 1,
                    problem: format!("the file is not UTF-8: {error}"),
                })
                .and_then(|text| Policy::parse(text, &source));
            match parsed {
                Ok(policy) => {
                    tracing::info!(
                        file = %source,
                        sha256 = %sha256,
                        rules = policy.rules.len(),
                        "policy file changed: its new rules apply from now on"
                    );
                    *self.current.write().unwrap_or_else(PoisonError::into_inner) =
                        Arc::new(policy);
                    metrics.policy().loaded(&sha256);
                    metrics.policy().reloaded(true);
                    hub.tools_changed_here();
                    applied = sha256;
                    refused = None;
                }
                Err(error) => {
                    tracing::error!(
                        "policy file changed but was refused, the rules before it stay in force: {error}"
                    );
                    metrics.policy().reloaded(false);
                    refused = Some(sha256);
                }
            }
        }
    }
}

/// Reads and compiles the file at `path`.
fn read(path: &Path) -> Result<Policy, PolicyError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source_error| PolicyError::Read {
        file: source.clone(),
        source: source_error,
    })?;
    Policy::parse(&text, &source)
}
