//! What the Kubernetes side measures: each API request by verb, resource
//! and code (`host/src/kube_client/`), and the fields an installed CRD
//! would drop (`host/src/controller/schema_check.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Metrics;

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

/// The Kubernetes client's and the CRD check's metrics.
pub(super) struct KubeMetrics {
    requests: Family<KubeRequestLabels, Counter>,
    crd_schema_missing_fields: Family<CrdLabels, Gauge>,
}

impl KubeMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            crd_schema_missing_fields: Family::default(),
        };
        registry.register(
            "kube_requests",
            "Kubernetes API requests by verb, resource and status code (a watch counts once, when it starts)",
            metrics.requests.clone(),
        );
        registry.register(
            "crd_schema_missing_fields",
            "Fields the controller writes that the installed CustomResourceDefinition would drop (topmost of each missing subtree; 0 when it keeps them all)",
            metrics.crd_schema_missing_fields.clone(),
        );
        metrics
    }
}

impl Metrics {
    /// One Kubernetes API request; `code` 0 when no answer came.
    pub fn count_kube_request(&self, verb: &'static str, resource: String, code: u16) {
        self.kube
            .requests
            .get_or_create(&KubeRequestLabels {
                verb,
                resource,
                code,
            })
            .inc();
    }

    /// How many fields the controller writes the installed CRD `crd` lacks.
    pub fn set_crd_schema_missing_fields(&self, crd: &str, count: usize) {
        self.kube
            .crd_schema_missing_fields
            .get_or_create(&CrdLabels {
                crd: crd.to_string(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}
