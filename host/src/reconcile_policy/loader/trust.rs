//! The trust gate of a candidate: the keys `spec.verify` names, the
//! signature of the fetched module (an OCI artifact's digest, or a
//! ConfigMap module's blob signature), `--require-signatures`, and a
//! layer's base, held to the layer's rule. Every check counts in
//! `radwasm_policy_verifications_total{result}`; a refusal is a [`Problem`]
//! with the trust reason, so the version running keeps deciding and the
//! policy reports `Ready=False` with that reason.

use kube::ResourceExt;

use crate::policy::source::{Fetched, Source, VerifyFailure};
use crate::policy::trust::certificate::{CertificateTrust, Identity, Matcher};
use crate::policy::trust::{PublicKey, TrustError, Verified, blob};
use crate::policy::{LoadedPolicy, embedded};
use crate::reconcile_policy::crd::{PolicyVerify, ReconcilePolicy};
use crate::reconcile_policy::registry::Problem;

use super::Loader;
use super::refusal::{fetch_problem, problem};

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

/// What `spec.verify` trusts: keys, or a CA and identities.
pub(super) enum Trusted {
    Keys(Vec<PublicKey>),
    Certificate(CertificateTrust),
}

/// What `spec.verify` trusts, read now: the keys of its ConfigMap, or the
/// roots of `certificate.roots` with its identities.
pub(super) async fn read_trusted(
    verify: &PolicyVerify,
    loader: &Loader,
) -> Result<Trusted, VerifyFailure> {
    if let Some(certificate) = &verify.certificate {
        let roots = &certificate.roots.config_map;
        let roots = loader
            .fetcher
            .trusted_roots(&roots.namespace, &roots.name)
            .await?;
        let identities = identities(verify).map_err(|detail| TrustError::KeysInvalid {
            what: "spec.verify.certificate.identities".to_string(),
            detail,
        })?;
        return Ok(Trusted::Certificate(CertificateTrust { roots, identities }));
    }
    let keys = verify.config_map.clone().unwrap_or_default();
    let keys = loader
        .fetcher
        .trusted_keys(&keys.namespace, &keys.name)
        .await?;
    Ok(Trusted::Keys(keys))
}

/// `spec.verify.certificate.identities`, each with one subject and one
/// issuer matcher (at least one identity).
pub(super) fn identities(verify: &PolicyVerify) -> Result<Vec<Identity>, String> {
    let Some(certificate) = &verify.certificate else {
        return Ok(Vec::new());
    };
    if certificate.identities.is_empty() {
        return Err(
            "spec.verify.certificate.identities is empty: name who may sign (subject or \
             subjectRegExp, and issuer or issuerRegExp), as cosign verify requires \
             --certificate-identity and --certificate-oidc-issuer"
                .to_string(),
        );
    }
    certificate
        .identities
        .iter()
        .enumerate()
        .map(|(index, identity)| {
            let field = |name: &str| format!("spec.verify.certificate.identities[{index}].{name}");
            Ok(Identity {
                subject: Matcher::new(
                    (&field("subject"), identity.subject.as_deref()),
                    (&field("subjectRegExp"), identity.subject_reg_exp.as_deref()),
                )?,
                issuer: Matcher::new(
                    (&field("issuer"), identity.issuer.as_deref()),
                    (&field("issuerRegExp"), identity.issuer_reg_exp.as_deref()),
                )?,
            })
        })
        .collect()
}

/// What `spec.verify` trusts (`None` without it). Any module but the
/// built-in default without `spec.verify` is refused when the controller
/// requires signatures.
pub(super) async fn trusted(
    policy: &ReconcilePolicy,
    source: &Source,
    loader: &Loader,
) -> Result<Option<Trusted>, Problem> {
    let Some(verify) = &policy.spec.verify else {
        if loader.require_signatures && !matches!(source, Source::BuiltIn(_)) {
            let error = TrustError::Required {
                source_name: source.to_string(),
            };
            return Err(refused(loader, policy, error.into()));
        }
        return Ok(None);
    };
    read_trusted(verify, loader)
        .await
        .map(Some)
        .map_err(|failure| refused(loader, policy, failure))
}

/// The signature of the artifact `fetched` came from (or, for a ConfigMap
/// module, the blob signature beside it), checked with what is `trusted`.
pub(super) async fn verify(
    policy: &ReconcilePolicy,
    source: &Source,
    fetched: &Fetched,
    trusted: &Trusted,
    loader: &Loader,
) -> Result<Verified, Problem> {
    let keys = match trusted {
        Trusted::Keys(keys) => keys.as_slice(),
        Trusted::Certificate(trust) => {
            return verify_certified(policy, source, fetched, trust, loader).await;
        }
    };
    if let (Source::ConfigMap { .. }, Some(signature)) = (source, &fetched.signature) {
        let verified = blob::verify_blob(
            &fetched.source_name,
            &fetched.bytes,
            &signature.name,
            signature.bytes.as_deref(),
            keys,
        )
        .map_err(|error| refused(loader, policy, error.into()))?;
        count(loader, policy, "Verified");
        tracing::info!(reconcile_policy = %policy.name_any(), module = %fetched.source_name, key = %verified.key, "module blob signature verified");
        return Ok(verified);
    }
    let (Some(artifact), Source::Oci { pull_secret, .. }) = (&fetched.artifact, source) else {
        return Err(problem(
            "InvalidSpec",
            "spec.verify checks cosign signatures of OCI artifacts and ConfigMap modules: it \
             needs spec.module.oci or spec.module.configMap",
        ));
    };
    let verified = loader
        .fetcher
        .verify_artifact(artifact, pull_secret.as_ref(), keys, &annotations(policy))
        .await
        .map_err(|failure| refused(loader, policy, failure))?;
    count(loader, policy, "Verified");
    tracing::info!(reconcile_policy = %policy.name_any(), reference = %artifact.reference, key = %verified.key, "module signature verified");
    Ok(verified)
}

/// A certificate-made signature of the artifact `fetched` came from.
async fn verify_certified(
    policy: &ReconcilePolicy,
    source: &Source,
    fetched: &Fetched,
    trust: &CertificateTrust,
    loader: &Loader,
) -> Result<Verified, Problem> {
    let (Some(artifact), Source::Oci { pull_secret, .. }) = (&fetched.artifact, source) else {
        return Err(problem(
            "InvalidSpec",
            "spec.verify.certificate checks cosign signatures of OCI artifacts: it needs \
             spec.module.oci",
        ));
    };
    let verified = loader
        .fetcher
        .verify_certified_artifact(artifact, pull_secret.as_ref(), trust, &annotations(policy))
        .await
        .map_err(|failure| refused(loader, policy, failure))?;
    count(loader, policy, "Verified");
    tracing::info!(reconcile_policy = %policy.name_any(), reference = %artifact.reference, certificate = %verified.key, "module certificate signature verified");
    Ok(verified)
}

/// A layer that must be verified (the controller requires signatures, or
/// the layer has `spec.verify`) decides only over verified bases: every
/// policy down its `spec.base` chain must have loaded a verified version,
/// or be the built-in default. A base with no loaded version, missing or
/// in a cycle is left to the stack's own checks (`BaseNotReady`, …).
pub(super) fn check_base(policy: &ReconcilePolicy, loader: &Loader) -> Result<(), Problem> {
    let Some(first) = policy.spec.base.as_deref() else {
        return Ok(());
    };
    if !loader.require_signatures && policy.spec.verify.is_none() {
        return Ok(());
    }
    let mut seen = vec![policy.name_any()];
    let mut next = Some(first.to_string());
    while let Some(base) = next.take() {
        if seen.contains(&base) {
            return Ok(());
        }
        let Some(active) = loader.registry.get(&base).and_then(|entry| {
            next = entry.base.clone();
            entry.active
        }) else {
            return Ok(());
        };
        if active.verified.is_none() && !is_built_in(&active.policy) {
            let why = format!(
                "runs {} ({}), which was loaded without a verified signature{}",
                active.policy.display_name(),
                active.policy.source_name(),
                if seen.len() > 1 {
                    format!(" (under {})", seen[1..].join(" -> "))
                } else {
                    String::new()
                }
            );
            let error = TrustError::BaseUnverified { base, why };
            return Err(refused(loader, policy, error.into()));
        }
        if !active.policy.is_layer() {
            return Ok(());
        }
        seen.push(base);
    }
    Ok(())
}

/// The default policy compiled into the binary: trusted as the binary is.
fn is_built_in(policy: &LoadedPolicy) -> bool {
    policy.source_name() == embedded::DEFAULT_POLICY_SOURCE
        && policy.digest() == crate::policy::digest(embedded::DEFAULT_POLICY)
}

/// `spec.verify.annotations`: what every accepted signature must carry.
pub(super) fn annotations(policy: &ReconcilePolicy) -> std::collections::BTreeMap<String, String> {
    let verify = policy.spec.verify.as_ref();
    verify.map(|v| v.annotations.clone()).unwrap_or_default()
}
