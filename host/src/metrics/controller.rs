//! What the controllers' reconciles measure: how many and how long, how
//! long a due one waited for a slot, the Radius mutations pacing and the
//! deletion order held back, the per-object memory and the drift checks.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Metrics;

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

/// Labels of one drift check: what it found (`found`, `missing`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftLabels {
    pub result: &'static str,
}

/// The reconcile path's metrics (`host/src/controller/`).
pub(super) struct ControllerMetrics {
    reconciles: Family<ReconcileLabels, Counter>,
    reconcile_seconds: Family<KindLabels, Histogram>,
    reconcile_wait_seconds: Family<KindLabels, Histogram>,
    paced_mutations: Family<KindLabels, Counter>,
    held_for_order: Family<KindLabels, Counter>,
    remembered_objects: Gauge,
    drift_checks: Family<DriftLabels, Counter>,
}

/// 100 µs .. ~50 s
fn reconcile_buckets() -> Histogram {
    Histogram::new(exponential_buckets(1e-4, 4.0, 10))
}

impl ControllerMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconciles: Family::default(),
            reconcile_seconds: Family::new_with_constructor(reconcile_buckets),
            reconcile_wait_seconds: Family::new_with_constructor(reconcile_buckets),
            paced_mutations: Family::default(),
            held_for_order: Family::default(),
            remembered_objects: Gauge::default(),
            drift_checks: Family::default(),
        };
        registry.register(
            "reconciles",
            "Reconciles by object kind and outcome",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_seconds",
            "Time of one reconcile (observe, decide, execute), per object kind",
            metrics.reconcile_seconds.clone(),
        );
        registry.register(
            "reconcile_wait_seconds",
            "Time a due reconcile waited for one of the --concurrency slots, per object kind",
            metrics.reconcile_wait_seconds.clone(),
        );
        registry.register(
            "radius_mutations_held_back",
            "Radius mutations a plan asked for too soon after a failed one, held back until the delay passed",
            metrics.paced_mutations.clone(),
        );
        registry.register(
            "radius_deletions_held_for_order",
            "Radius deletions of an application or environment held back while the rest of its template's resources are still there",
            metrics.held_for_order.clone(),
        );
        registry.register(
            "remembered_objects",
            "Objects the controller holds per-object memory for, in the largest of its parts (backoff, pacing, written versions, expectations, drift schedule, decisions)",
            metrics.remembered_objects.clone(),
        );
        registry.register(
            "drift_checks",
            "Drift checks of DeploymentResources (a GET of the Radius resource), by what they found",
            metrics.drift_checks.clone(),
        );
        metrics
    }
}

impl Metrics {
    /// One reconcile finished.
    pub fn observe_reconcile(&self, kind: &'static str, outcome: &'static str, took: Duration) {
        let controller = &self.controller;
        controller
            .reconciles
            .get_or_create(&ReconcileLabels { kind, outcome })
            .inc();
        controller
            .reconcile_seconds
            .get_or_create(&KindLabels { kind })
            .observe(took.as_secs_f64());
    }

    /// A due reconcile got a slot after waiting this long.
    pub fn observe_reconcile_wait(&self, kind: &'static str, waited: Duration) {
        self.controller
            .reconcile_wait_seconds
            .get_or_create(&KindLabels { kind })
            .observe(waited.as_secs_f64());
    }

    /// A Radius mutation held back by pacing.
    pub fn count_paced(&self, kind: &'static str) {
        self.controller
            .paced_mutations
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// A Radius deletion held back for the deletion order.
    pub fn count_held_for_order(&self, kind: &'static str) {
        self.controller
            .held_for_order
            .get_or_create(&KindLabels { kind })
            .inc();
    }

    /// How many objects the per-object memory holds.
    pub fn set_remembered_objects(&self, count: usize) {
        self.controller
            .remembered_objects
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// One drift check: `found`, `missing` or `error`.
    pub fn count_drift_check(&self, result: &'static str) {
        self.controller
            .drift_checks
            .get_or_create(&DriftLabels { result })
            .inc();
    }
}
