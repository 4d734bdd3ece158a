//! Prometheus metrics of the controllers and the policy runtime; [`server`]
//! serves them with the liveness and readiness probes.

mod server;

pub use server::{Readiness, serve};

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::policy::records::Recorder;
use crate::policy::{LoadCounter, LoadedPolicy};

/// Labels of a reconcile: object kind and outcome (`ok`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub kind: &'static str,
    pub outcome: &'static str,
}

/// Labels of an object kind alone.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: &'static str,
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

/// Labels of one Radius HTTP request: method, outcome (`ok` for 2xx,
/// `client_error`, `server_error`, `throttled`, `unreachable`) and status
/// code (`0` when no answer came).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RadiusLabels {
    pub method: String,
    pub outcome: &'static str,
    pub code: u16,
}

/// Labels of Radius request latency: the method.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
}

/// Labels of one Kubernetes API request: its verb (`get`, `list`, `watch`,
/// `create`, `update`, `patch`, `delete`), its resource with any
/// subresource (`deploymenttemplates/status`) and the status code (`0` when
/// no answer came).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KubeRequestLabels {
    pub verb: &'static str,
    pub resource: String,
    pub code: u16,
}

/// Labels of a CustomResourceDefinition, by name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CrdLabels {
    pub crd: String,
}

/// Labels of one drift check: what it found (`found`, `missing`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftLabels {
    pub result: &'static str,
}

/// Labels of one signature check of a `ReconcilePolicy` module: the policy
/// and `Verified` or the refusal's reason (`SignatureMissing`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerificationLabels {
    pub reconcile_policy: String,
    pub result: &'static str,
}

/// Every metric the host exports. Each moves in a test
/// (`host/src/metrics/` and the end-to-end suite).
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_seconds: Family<KindLabels, Histogram>,
    reconcile_wait_seconds: Family<KindLabels, Histogram>,
    decisions: Family<DecisionLabels, Counter>,
    decision_seconds: Family<DecisionLabels, Histogram>,
    decision_fuel: Family<DecisionLabels, Histogram>,
    decision_failures: Family<FailureLabels, Counter>,
    decision_reruns: Family<PolicyLabels, Counter>,
    policy_loads: LoadCounter,
    paced_mutations: Family<KindLabels, Counter>,
    held_for_order: Family<KindLabels, Counter>,
    shadow_decisions: Family<ShadowLabels, Counter>,
    remembered_objects: Gauge,
    radius_requests: Family<RadiusLabels, Counter>,
    radius_request_seconds: Family<MethodLabels, Histogram>,
    drift_checks: Family<DriftLabels, Counter>,
    kube_requests: Family<KubeRequestLabels, Counter>,
    crd_schema_missing_fields: Family<CrdLabels, Gauge>,
    policy_verifications: Family<VerificationLabels, Counter>,
    /// Decision records: their counters are registered and their ring is
    /// served on `/debug/decisions` (`with_decision_records`).
    decision_records: Option<Recorder>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("radwasm");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "reconciles",
            "Reconciles by object kind and outcome",
            reconciles.clone(),
        );
        let reconcile_seconds = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            // 100 µs .. ~50 s
            Histogram::new(exponential_buckets(1e-4, 4.0, 10))
        });
        registry.register(
            "reconcile_seconds",
            "Time of one reconcile (observe, decide, execute), per object kind",
            reconcile_seconds.clone(),
        );
        let reconcile_wait_seconds = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            // 100 µs .. ~50 s
            Histogram::new(exponential_buckets(1e-4, 4.0, 10))
        });
        registry.register(
            "reconcile_wait_seconds",
            "Time a due reconcile waited for one of the --concurrency slots, per object kind",
            reconcile_wait_seconds.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "policy_decisions",
            "Policy decisions by object kind, policy, version and outcome",
            decisions.clone(),
        );
        let decision_seconds = Family::<DecisionLabels, Histogram>::new_with_constructor(|| {
            // 5 µs .. ~40 ms
            Histogram::new(exponential_buckets(5e-6, 2.5, 10))
        });
        registry.register(
            "policy_decision_seconds",
            "Time to instantiate the policy guest and decide",
            decision_seconds.clone(),
        );
        let decision_fuel = Family::<DecisionLabels, Histogram>::new_with_constructor(|| {
            // 1k .. ~260M fuel
            Histogram::new(exponential_buckets(1e3, 4.0, 10))
        });
        registry.register(
            "policy_decision_fuel",
            "Fuel (wasm instructions, roughly) one decision used",
            decision_fuel.clone(),
        );
        let decision_failures = Family::<FailureLabels, Counter>::default();
        registry.register(
            "policy_decision_failures",
            "Decisions that produced nothing to carry out (trap, fuel, memory cap, policy error, guard rail)",
            decision_failures.clone(),
        );
        let decision_reruns = Family::<PolicyLabels, Counter>::default();
        registry.register(
            "policy_decision_reruns",
            "Decisions stopped on the async worker for want of fuel and decided again from the start on the blocking pool",
            decision_reruns.clone(),
        );
        let policy_loads = LoadCounter::default();
        registry.register(
            "policy_loads",
            "Policy loads by where the compiled code came from (compiled, disk_cache, memory_cache)",
            policy_loads.family(),
        );
        let paced_mutations = Family::<KindLabels, Counter>::default();
        registry.register(
            "radius_mutations_held_back",
            "Radius mutations a plan asked for too soon after a failed one, held back until the delay passed",
            paced_mutations.clone(),
        );
        let held_for_order = Family::<KindLabels, Counter>::default();
        registry.register(
            "radius_deletions_held_for_order",
            "Radius deletions of an application or environment held back while the rest of its template's resources are still there",
            held_for_order.clone(),
        );
        let shadow_decisions = Family::<ShadowLabels, Counter>::default();
        registry.register(
            "shadow_decisions",
            "Decisions of Shadow ReconcilePolicies, by whether their plan agreed with the enforcing policy's",
            shadow_decisions.clone(),
        );
        let remembered_objects = Gauge::default();
        registry.register(
            "remembered_objects",
            "Objects the controller holds per-object memory for, in the largest of its parts (backoff, pacing, written versions, expectations, drift schedule, decisions)",
            remembered_objects.clone(),
        );
        let radius_requests = Family::<RadiusLabels, Counter>::default();
        registry.register(
            "radius_requests",
            "Radius API requests (each attempt) by method, outcome and status code",
            radius_requests.clone(),
        );
        let radius_request_seconds =
            Family::<MethodLabels, Histogram>::new_with_constructor(|| {
                // 500 µs .. ~130 s
                Histogram::new(exponential_buckets(5e-4, 4.0, 10))
            });
        registry.register(
            "radius_request_seconds",
            "Latency of one Radius API request attempt, by method",
            radius_request_seconds.clone(),
        );
        let drift_checks = Family::<DriftLabels, Counter>::default();
        registry.register(
            "drift_checks",
            "Drift checks of DeploymentResources (a GET of the Radius resource), by what they found",
            drift_checks.clone(),
        );
        let kube_requests = Family::<KubeRequestLabels, Counter>::default();
        registry.register(
            "kube_requests",
            "Kubernetes API requests by verb, resource and status code (a watch counts once, when it starts)",
            kube_requests.clone(),
        );
        let crd_schema_missing_fields = Family::<CrdLabels, Gauge>::default();
        registry.register(
            "crd_schema_missing_fields",
            "Fields the controller writes that the installed CustomResourceDefinition would drop (topmost of each missing subtree; 0 when it keeps them all)",
            crd_schema_missing_fields.clone(),
        );
        let policy_verifications = Family::<VerificationLabels, Counter>::default();
        registry.register(
            "policy_verifications",
            "Signature checks of ReconcilePolicy modules (spec.verify, --require-signatures), by policy and result (Verified or the refusal's reason)",
            policy_verifications.clone(),
        );
        Self {
            registry,
            reconciles,
            reconcile_seconds,
            reconcile_wait_seconds,
            decisions,
            decision_seconds,
            decision_fuel,
            decision_failures,
            decision_reruns,
            policy_loads,
            paced_mutations,
            held_for_order,
            shadow_decisions,
            remembered_objects,
            radius_requests,
            radius_request_seconds,
            drift_checks,
            kube_requests,
            crd_schema_missing_fields,
            policy_verifications,
            decision_records: None,
        }
    }
}

impl Metrics {
    /// Export the recorder's counters
    /// (`radwasm_decision_records_written_total`,
    /// `radwasm_decision_records_dropped_total{reason}`) and serve its ring
    /// on `/debug/decisions`. Call before the metrics are shared.
    pub fn with_decision_records(mut self, recorder: &Recorder) -> Self {
        let counters = recorder.counters();
        self.registry.register(
            "decision_records_written",
            "Decision records stored (in the in-memory ring and/or the record files)",
            counters.written.clone(),
        );
        self.registry.register(
            "decision_records_dropped",
            "Decision records lost: the writer was behind (queue_full) or a file write failed (write_error)",
            counters.dropped.clone(),
        );
        self.decision_records = Some(recorder.clone());
        self
    }

    /// One signature check of `reconcile_policy`'s module: `Verified` or
    /// the refusal's reason.
    pub fn observe_verification(&self, reconcile_policy: &str, result: &'static str) {
        self.policy_verifications
            .get_or_create(&VerificationLabels {
                reconcile_policy: reconcile_policy.to_string(),
                result,
            })
            .inc();
    }

    /// One reconcile finished.
    pub fn observe_reconcile(&self, kind: &'static str, outcome: &'static str, took: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels { kind, outcome })
            .inc();
        self.reconcile_seconds
            .get_or_create(&KindLabels { kind })
            .observe(took.as_secs_f64());
    }

    /// A due reconcile got a slot after waiting this long.
    pub fn observe_reconcile_wait(&self, kind: &'static str, waited: Duration) {
        self.reconcile_wait_seconds
            .get_or_create(&KindLabels { kind })
            .observe(waited.as_secs_f64());
    }

    /// One decision: its count, duration and fuel.
    pub fn observe_decision(&self, labels: DecisionLabels, took: Duration, fuel: u64) {
        self.decisions.get_or_create(&labels).inc();
        self.decision_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.decision_fuel
            .get_or_create(&labels)
            .observe(fuel as f64);
    }

    /// A decision that produced nothing to carry out.
    pub fn count_decision_failure(&self, kind: &'static str, reason: &'static str) {
        self.decision_failures
            .get_or_create(&FailureLabels { kind, reason })
            .inc();
    }

    /// A decision that ran out of its worker's fuel slice and was decided
    /// again on the blocking pool.
    pub fn count_decision_rerun(&self, labels: PolicyLabels) {
        self.decision_reruns.get_or_create(&labels).inc();
    }

    /// The counter of policy loads, for the engine to count into.
    pub fn policy_loads(&self) -> LoadCounter {
        self.policy_loads.clone()
    }

    /// A Radius mutation held back by pacing.
    pub fn count_paced(&self, kind: &'static str) {
        self.paced_mutations
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// A Radius deletion held back for the deletion order.
    pub fn count_held_for_order(&self, kind: &'static str) {
        self.held_for_order
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// One drift check: `found`, `missing` or `error`.
    pub fn count_drift_check(&self, result: &'static str) {
        self.drift_checks
            .get_or_create(&DriftLabels { result })
            .inc();
    }

    /// One decision of a shadow policy.
    pub fn count_shadow(
        &self,
        kind: &'static str,
        enforcing: &str,
        shadow: &str,
        outcome: &'static str,
    ) {
        self.shadow_decisions
            .get_or_create(&ShadowLabels {
                kind,
                enforcing: enforcing.to_string(),
                shadow: shadow.to_string(),
                outcome,
            })
            .inc();
    }

    /// How many objects the per-object memory holds.
    pub fn set_remembered_objects(&self, count: usize) {
        self.remembered_objects
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// One Radius request attempt; `code` 0 when no answer came.
    pub fn observe_radius_request(&self, method: &str, code: u16, took: Duration) {
        let outcome = match code {
            0 => "unreachable",
            200..=299 => "ok",
            429 => "throttled",
            400..=499 => "client_error",
            _ => "server_error",
        };
        self.radius_requests
            .get_or_create(&RadiusLabels {
                method: method.to_string(),
                outcome,
                code,
            })
            .inc();
        self.radius_request_seconds
            .get_or_create(&MethodLabels {
                method: method.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// How many fields the controller writes the installed CRD `crd` lacks.
    pub fn set_crd_schema_missing_fields(&self, crd: &str, count: usize) {
        self.crd_schema_missing_fields
            .get_or_create(&CrdLabels {
                crd: crd.to_string(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// One Kubernetes API request; `code` 0 when no answer came.
    pub fn count_kube_request(&self, verb: &'static str, resource: String, code: u16) {
        self.kube_requests
            .get_or_create(&KubeRequestLabels {
                verb,
                resource,
                code,
            })
            .inc();
    }

    /// The registry in the Prometheus text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_in_the_prometheus_text_format() {
        let metrics = Metrics::default();
        metrics.observe_reconcile("DeploymentTemplate", "ok", Duration::from_millis(3));
        metrics.observe_decision(
            DecisionLabels {
                kind: "DeploymentTemplate",
                policy: "default".into(),
                version: "0.1.0".into(),
                outcome: "ok",
            },
            Duration::from_micros(20),
            84_000,
        );
        metrics.observe_reconcile_wait("DeploymentTemplate", Duration::from_millis(3));
        metrics.count_decision_failure("DeploymentResource", "OutOfFuel");
        metrics.count_paced("DeploymentResource");
        metrics.count_decision_rerun(PolicyLabels {
            policy: "python-policy".into(),
            version: "0.2.0".into(),
        });
        metrics
            .policy_loads()
            .count(crate::policy::LoadOutcome::DiskCache);
        metrics.count_held_for_order("DeploymentResource");
        metrics.count_drift_check("missing");
        metrics.count_shadow("DeploymentTemplate", "team-a", "team-a-canary", "disagreed");
        metrics.set_remembered_objects(3);
        metrics.set_crd_schema_missing_fields("deploymenttemplates.radapp.io", 2);
        metrics.observe_radius_request("DELETE", 409, Duration::from_millis(2));
        metrics.observe_radius_request("PUT", 0, Duration::from_millis(2));
        metrics.observe_verification("team-a", "SignatureMissing");
        let text = metrics.encode();
        for line in [
            r#"radwasm_reconciles_total{kind="DeploymentTemplate",outcome="ok"} 1"#,
            r#"radwasm_reconcile_seconds_count{kind="DeploymentTemplate"} 1"#,
            r#"radwasm_reconcile_wait_seconds_count{kind="DeploymentTemplate"} 1"#,
            r#"radwasm_policy_decisions_total{kind="DeploymentTemplate",policy="default",version="0.1.0",outcome="ok"} 1"#,
            r#"radwasm_policy_decision_fuel_sum{kind="DeploymentTemplate",policy="default",version="0.1.0",outcome="ok"} 84000.0"#,
            r#"radwasm_policy_decision_failures_total{kind="DeploymentResource",reason="OutOfFuel"} 1"#,
            r#"radwasm_radius_mutations_held_back_total{kind="DeploymentResource"} 1"#,
            r#"radwasm_policy_decision_reruns_total{policy="python-policy",version="0.2.0"} 1"#,
            r#"radwasm_policy_loads_total{outcome="disk_cache"} 1"#,
            r#"radwasm_radius_deletions_held_for_order_total{kind="DeploymentResource"} 1"#,
            r#"radwasm_drift_checks_total{result="missing"} 1"#,
            "radwasm_remembered_objects 3",
            r#"radwasm_crd_schema_missing_fields{crd="deploymenttemplates.radapp.io"} 2"#,
            r#"radwasm_radius_requests_total{method="DELETE",outcome="client_error",code="409"} 1"#,
            r#"radwasm_radius_requests_total{method="PUT",outcome="unreachable",code="0"} 1"#,
            r#"radwasm_radius_request_seconds_count{method="DELETE"} 1"#,
            r#"radwasm_policy_verifications_total{reconcile_policy="team-a",result="SignatureMissing"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
