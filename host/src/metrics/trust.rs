//! What the trust checks measure: each signature check of a
//! `ReconcilePolicy`'s module (`host/src/reconcile_policy/loader/trust.rs`)
//! or of the `--policy` file (`host/src/cli/trust_args.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::Metrics;

/// Labels of one signature check of a `ReconcilePolicy` module: the policy
/// and `Verified` or the refusal's reason (`SignatureMissing`, …).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerificationLabels {
    pub reconcile_policy: String,
    pub result: &'static str,
}

/// The signature checks' metrics.
pub(super) struct TrustMetrics {
    verifications: Family<VerificationLabels, Counter>,
}

impl TrustMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            verifications: Family::default(),
        };
        registry.register(
            "policy_verifications",
            "Signature checks of ReconcilePolicy modules (spec.verify, --require-signatures), by policy and result (Verified or the refusal's reason)",
            metrics.verifications.clone(),
        );
        metrics
    }
}

impl Metrics {
    /// One signature check of `reconcile_policy`'s module: `Verified` or
    /// the refusal's reason.
    pub fn observe_verification(&self, reconcile_policy: &str, result: &'static str) {
        self.trust
            .verifications
            .get_or_create(&VerificationLabels {
                reconcile_policy: reconcile_policy.to_string(),
                result,
            })
            .inc();
    }
}
