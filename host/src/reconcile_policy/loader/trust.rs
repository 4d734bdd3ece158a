//! The trust gate of a candidate: the keys `spec.verify` names, the
//! signature of the fetched artifact's digest, and `--require-signatures`.
//! Every check counts in `radwasm_policy_verifications_total{result}`; a
//! refusal is a [`Problem`] with the trust reason, so the version running
//! keeps deciding and the policy reports `Ready=False` with that reason.

use kube::ResourceExt;

use crate::policy::source::{Fetched, Source, VerifyFailure};
use crate::policy::trust::{PublicKey, TrustError, Verified};
use crate::reconcile_policy::crd::ReconcilePolicy;
use crate::reconcile_policy::registry::Problem;

use super::Loader;
use super::candidate::{fetch_problem, problem};

/// Count one check of `policy`'s module.
pub(super) fn count(loader: &Loader, policy: &ReconcilePolicy, result: &'static str) {
    if let Some(metrics) = &loader.metrics {
        metrics.observe_verification(&policy.name_any(), result);
    }
}

fn refused(loader: &Loader, policy: &ReconcilePolicy, failure: VerifyFailure) -> Problem {
    let refusal = match failure {
        VerifyFailure::Refused(error) => problem(error.reason(), format!("{error}; not loaded")),
        VerifyFailure::Fetch(error) => fetch_problem(error),
    };
    // A registry that cannot be reached is a fetch failure, not a verdict.
    if refusal.reason != "FetchFailed" {
        count(loader, policy, refusal.reason);
    }
    refusal
}

/// The keys `spec.verify` names (`None` without it). A module from a
/// registry or a URL without `spec.verify` is refused when the controller
/// requires signatures.
pub(super) async fn trusted_keys(
    policy: &ReconcilePolicy,
    source: &Source,
    loader: &Loader,
) -> Result<Option<Vec<PublicKey>>, Problem> {
    let Some(verify) = &policy.spec.verify else {
        if loader.require_signatures && matches!(source, Source::Oci { .. } | Source::Url(_)) {
            let error = TrustError::Required {
                source_name: source.to_string(),
            };
            return Err(refused(loader, policy, error.into()));
        }
        return Ok(None);
    };
    let keys = &verify.config_map;
    loader
        .fetcher
        .trusted_keys(&keys.namespace, &keys.name)
        .await
        .map(Some)
        .map_err(|failure| refused(loader, policy, failure))
}

/// The signature of the artifact `fetched` came from, checked with `keys`.
pub(super) async fn verify(
    policy: &ReconcilePolicy,
    source: &Source,
    fetched: &Fetched,
    keys: &[PublicKey],
    loader: &Loader,
) -> Result<Verified, Problem> {
    let (Some(artifact), Source::Oci { pull_secret, .. }) = (&fetched.artifact, source) else {
        return Err(problem(
            "InvalidSpec",
            "spec.verify checks cosign signatures of OCI artifacts: it needs spec.module.oci",
        ));
    };
    let verified = loader
        .fetcher
        .verify_artifact(artifact, pull_secret.as_ref(), keys)
        .await
        .map_err(|failure| refused(loader, policy, failure))?;
    count(loader, policy, "Verified");
    tracing::info!(reconcile_policy = %policy.name_any(), reference = %artifact.reference, key = %verified.key, "module signature verified");
    Ok(verified)
}
