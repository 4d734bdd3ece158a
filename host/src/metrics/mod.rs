//! Prometheus metrics of the controllers and the policy runtime, each
//! subsystem's in a small struct of its own that registers them
//! (`controller.rs`, `decisions.rs`, `radius.rs`, `kube.rs`, `trust.rs`;
//! the decision records' counters are the recorder's own); `server.rs`
//! serves them with the liveness and readiness probes.

mod controller;
mod decisions;
mod kube;
mod radius;
mod server;
mod trust;

pub use controller::{DriftLabels, KindLabels, ReconcileLabels};
pub use decisions::{DecisionLabels, FailureLabels, PolicyLabels, ShadowLabels};
pub use kube::{CrdLabels, KubeRequestLabels};
pub use radius::{MethodLabels, RadiusLabels};
pub use server::{Readiness, serve};
pub use trust::VerificationLabels;

use prometheus_client::registry::Registry;

use crate::policy::records::Recorder;

/// Every metric the host exports. Each moves in a test
/// (`host/src/metrics/` and the end-to-end suite).
pub struct Metrics {
    registry: Registry,
    controller: controller::ControllerMetrics,
    decisions: decisions::DecisionMetrics,
    radius: radius::RadiusMetrics,
    kube: kube::KubeMetrics,
    trust: trust::TrustMetrics,
    /// Decision records: their counters are registered and their ring is
    /// served on `/debug/decisions` (`with_decision_records`).
    decision_records: Option<Recorder>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("radwasm");
        Self {
            controller: controller::ControllerMetrics::register(&mut registry),
            decisions: decisions::DecisionMetrics::register(&mut registry),
            radius: radius::RadiusMetrics::register(&mut registry),
            kube: kube::KubeMetrics::register(&mut registry),
            trust: trust::TrustMetrics::register(&mut registry),
            registry,
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
mod records_tests;
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Metrics where each metric moved once.
    fn every_metric_moved() -> Metrics {
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
        metrics.count_kube_request("list", "deploymenttemplates".into(), 200);
        metrics
    }

    #[test]
    fn metrics_encode_in_the_prometheus_text_format() {
        let metrics = every_metric_moved();
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
            r#"radwasm_kube_requests_total{verb="list",resource="deploymenttemplates",code="200"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
    /// Every metric's name, type and help text, as dashboards, alerts, the
    /// docs and the end-to-end tests know them.
    const EXPORTED: &[(&str, &str, &str)] = &[
        (
            "reconciles",
            "counter",
            "Reconciles by object kind and outcome",
        ),
        (
            "reconcile_seconds",
            "histogram",
            "Time of one reconcile (observe, decide, execute), per object kind",
        ),
        (
            "reconcile_wait_seconds",
            "histogram",
            "Time a due reconcile waited for one of the --concurrency slots, per object kind",
        ),
        (
            "policy_decisions",
            "counter",
            "Policy decisions by object kind, policy, version and outcome",
        ),
        (
            "policy_decision_seconds",
            "histogram",
            "Time to instantiate the policy guest and decide",
        ),
        (
            "policy_decision_fuel",
            "histogram",
            "Fuel (wasm instructions, roughly) one decision used",
        ),
        (
            "policy_decision_failures",
            "counter",
            "Decisions that produced nothing to carry out (trap, fuel, memory cap, policy error, guard rail)",
        ),
        (
            "policy_decision_reruns",
            "counter",
            "Decisions stopped on the async worker for want of fuel and decided again from the start on the blocking pool",
        ),
        (
            "policy_loads",
            "counter",
            "Policy loads by where the compiled code came from (compiled, disk_cache, memory_cache)",
        ),
        (
            "radius_mutations_held_back",
            "counter",
            "Radius mutations a plan asked for too soon after a failed one, held back until the delay passed",
        ),
        (
            "radius_deletions_held_for_order",
            "counter",
            "Radius deletions of an application or environment held back while the rest of its template's resources are still there",
        ),
        (
            "shadow_decisions",
            "counter",
            "Decisions of Shadow ReconcilePolicies, by whether their plan agreed with the enforcing policy's",
        ),
        (
            "remembered_objects",
            "gauge",
            "Objects the controller holds per-object memory for, in the largest of its parts (backoff, pacing, written versions, expectations, drift schedule, decisions)",
        ),
        (
            "radius_requests",
            "counter",
            "Radius API requests (each attempt) by method, outcome and status code",
        ),
        (
            "radius_request_seconds",
            "histogram",
            "Latency of one Radius API request attempt, by method",
        ),
        (
            "drift_checks",
            "counter",
            "Drift checks of DeploymentResources (a GET of the Radius resource), by what they found",
        ),
        (
            "kube_requests",
            "counter",
            "Kubernetes API requests by verb, resource and status code (a watch counts once, when it starts)",
        ),
        (
            "crd_schema_missing_fields",
            "gauge",
            "Fields the controller writes that the installed CustomResourceDefinition would drop (topmost of each missing subtree; 0 when it keeps them all)",
        ),
        (
            "policy_verifications",
            "counter",
            "Signature checks of ReconcilePolicy modules (spec.verify, --require-signatures), by policy and result (Verified or the refusal's reason)",
        ),
    ];

    #[test]
    fn every_metric_keeps_its_name_type_and_help() {
        let text = every_metric_moved().encode();
        for (name, kind, help) in EXPORTED {
            let help_line = format!("# HELP radwasm_{name} {help}.");
            let type_line = format!("# TYPE radwasm_{name} {kind}");
            assert!(
                text.lines().any(|l| l == help_line),
                "{help_line} missing from\n{text}"
            );
            assert!(
                text.lines().any(|l| l == type_line),
                "{type_line} missing from\n{text}"
            );
        }
        let exported = text.lines().filter(|l| l.starts_with("# HELP ")).count();
        assert_eq!(exported, EXPORTED.len(), "a metric came or went:\n{text}");
    }
}
