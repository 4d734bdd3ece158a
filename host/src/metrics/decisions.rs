//! What the policy runtime measures: decisions (count, time, fuel), the
//! ones that failed or were decided again on the blocking pool, the
//! shadows' agreement, and where loaded policies' compiled code came from.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Metrics;
use crate::policy::{LoadCounter, LoadedPolicy};

/// Labels of a policy decision: object kind, policy name and version, and
/// outcome (`ok`, or `error` when the guest trapped, ran out of fuel or
/// refused to decide).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    pub kind: &'static str,
    pub policy: String,
    pub version: String,
    pub outcome: &'static str,
}

impl DecisionLabels {
    pub fn new(kind: &'static str, policy: &LoadedPolicy, outcome: &'static str) -> Self {
        Self {
            kind,
            policy: policy.description().name.clone(),
            version: policy.description().version.clone(),
            outcome,
        }
    }
}

/// Labels of a policy by name and version (`describe()`'s).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabels {
    pub policy: String,
    pub version: String,
}

impl PolicyLabels {
    pub fn new(policy: &LoadedPolicy) -> Self {
        Self {
            policy: policy.description().name.clone(),
            version: policy.description().version.clone(),
        }
    }
}

/// Labels of a failed decision: the object kind and the reason
/// (`DecisionError::reason()`, or `PlanRejected` for the guard rails).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    pub kind: &'static str,
    pub reason: &'static str,
}

/// Labels of a shadow decision: object kind, the enforcing and the shadow
/// `ReconcilePolicy` (`--policy` for the controller's own), and whether the
/// shadow's plan `agreed`, `disagreed` or `failed` (it could not decide).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    pub kind: &'static str,
    pub enforcing: String,
    pub shadow: String,
    pub outcome: &'static str,
}

/// The policy runtime's metrics (`crates/policy-runtime`, decided from
/// `host/src/controller/driver/`).
pub(super) struct DecisionMetrics {
    decisions: Family<DecisionLabels, Counter>,
    decision_seconds: Family<DecisionLabels, Histogram>,
    decision_fuel: Family<DecisionLabels, Histogram>,
    decision_failures: Family<FailureLabels, Counter>,
    decision_reruns: Family<PolicyLabels, Counter>,
    policy_loads: LoadCounter,
    shadow_decisions: Family<ShadowLabels, Counter>,
}

impl DecisionMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            decisions: Family::default(),
            // 5 µs .. ~40 ms
            decision_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(5e-6, 2.5, 10))
            }),
            // 1k .. ~260M fuel
            decision_fuel: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e3, 4.0, 10))
            }),
            decision_failures: Family::default(),
            decision_reruns: Family::default(),
            policy_loads: LoadCounter::default(),
            shadow_decisions: Family::default(),
        };
        registry.register(
            "policy_decisions",
            "Policy decisions by object kind, policy, version and outcome",
            metrics.decisions.clone(),
        );
        registry.register(
            "policy_decision_seconds",
            "Time to instantiate the policy guest and decide",
            metrics.decision_seconds.clone(),
        );
        registry.register(
            "policy_decision_fuel",
            "Fuel (wasm instructions, roughly) one decision used",
            metrics.decision_fuel.clone(),
        );
        registry.register(
            "policy_decision_failures",
            "Decisions that produced nothing to carry out (trap, fuel, memory cap, policy error, guard rail)",
            metrics.decision_failures.clone(),
        );
        registry.register(
            "policy_decision_reruns",
            "Decisions stopped on the async worker for want of fuel and decided again from the start on the blocking pool",
            metrics.decision_reruns.clone(),
        );
        registry.register(
            "policy_loads",
            "Policy loads by where the compiled code came from (compiled, disk_cache, memory_cache)",
            metrics.policy_loads.family(),
        );
        registry.register(
            "shadow_decisions",
            "Decisions of Shadow ReconcilePolicies, by whether their plan agreed with the enforcing policy's",
            metrics.shadow_decisions.clone(),
        );
        metrics
    }
}

impl Metrics {
    /// One decision: its count, duration and fuel.
    pub fn observe_decision(&self, labels: DecisionLabels, took: Duration, fuel: u64) {
        let decisions = &self.decisions;
        decisions.decisions.get_or_create(&labels).inc();
        decisions
            .decision_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        decisions
            .decision_fuel
            .get_or_create(&labels)
            .observe(fuel as f64);
    }

    /// A decision that produced nothing to carry out.
    pub fn count_decision_failure(&self, kind: &'static str, reason: &'static str) {
        self.decisions
            .decision_failures
            .get_or_create(&FailureLabels { kind, reason })
            .inc();
    }

    /// A decision that ran out of its worker's fuel slice and was decided
    /// again on the blocking pool.
    pub fn count_decision_rerun(&self, labels: PolicyLabels) {
        self.decisions.decision_reruns.get_or_create(&labels).inc();
    }

    /// The counter of policy loads, for the engine to count into.
    pub fn policy_loads(&self) -> LoadCounter {
        self.decisions.policy_loads.clone()
    }

    /// One decision of a shadow policy.
    pub fn count_shadow(
        &self,
        kind: &'static str,
        enforcing: &str,
        shadow: &str,
        outcome: &'static str,
    ) {
        self.decisions
            .shadow_decisions
            .get_or_create(&ShadowLabels {
                kind,
                enforcing: enforcing.to_string(),
                shadow: shadow.to_string(),
                outcome,
            })
            .inc();
    }
}
