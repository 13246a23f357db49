//! The operator's policy file in the metrics: which file each node runs
//! (its SHA-256, so an operator sees that every node of a cluster agrees),
//! its reloads, and how often each rule decided. The rule names are the
//! operator's own words from that file, never a client's.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HashLabels {
    sha256: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RuleLabels {
    rule: String,
    effect: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReloadLabels {
    result: &'static str,
}

/// The policy's series.
#[derive(Debug, Default)]
pub struct PolicyMetrics {
    loaded: Family<HashLabels, Gauge>,
    decisions: Family<RuleLabels, Counter>,
    reloads: Family<ReloadLabels, Counter>,
}

impl PolicyMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "policy_loaded",
            "1 for the SHA-256 of the policy file this node applies (OPENCLAW_PROXY_POLICY_FILE)",
            metrics.loaded.clone(),
        );
        registry.register(
            "policy_decisions",
            "Tool calls a policy rule applied to, by rule name and effect (deny, confirm, rate_limited, ...)",
            metrics.decisions.clone(),
        );
        registry.register(
            "policy_reloads",
            "Reloads of the policy file after it changed, by result (applied, or kept_old when the new file was refused)",
            metrics.reloads.clone(),
        );
        metrics
    }

    /// The node now applies the policy file of this SHA-256 (hex).
    pub fn loaded(&self, sha256: &str) {
        self.loaded.clear();
        self.loaded
            .get_or_create(&HashLabels {
                sha256: sha256.to_owned(),
            })
            .set(1);
    }

    /// A rule applied `effect` to a call.
    pub fn decided(&self, rule: &str, effect: &'static str) {
        self.decisions
            .get_or_create(&RuleLabels {
                rule: rule.to_owned(),
                effect,
            })
            .inc();
    }

    /// A changed file was applied (`true`) or refused, the old one kept.
    pub fn reloaded(&self, applied: bool) {
        let result = if applied { "applied" } else { "kept_old" };
        self.reloads.get_or_create(&ReloadLabels { result }).inc();
    }
}
