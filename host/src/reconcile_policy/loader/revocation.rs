//! Revocation: a running version decides only while the trust its policy
//! names now still verifies it. When a candidate is refused and the key
//! that verified the running version is no longer in the keys ConfigMap
//! (or the ConfigMap is gone or unusable), or `spec.verify` changed since
//! it was verified, its signatures are checked again with the keys and
//! annotations of now; if none verifies it, or they cannot be read, it
//! stops deciding ([`PolicyRegistry::retire`]), and objects selecting the
//! policy are decided by nothing until a version that verifies loads.
//!
//! [`PolicyRegistry::retire`]: crate::reconcile_policy::registry::PolicyRegistry::retire

use kube::ResourceExt;

use crate::policy::source::{Artifact, SecretRef, VerifyFailure};
use crate::policy::trust::TrustError;
use crate::reconcile_policy::crd::ReconcilePolicy;
use crate::reconcile_policy::registry::{Entry, Problem, TrustBasis};

use super::Loader;
use super::refusal::problem;
use super::trust::{Trusted, count, read_trusted};

/// What `policy`'s running version is verified under once its spec's
/// signature check passed.
pub(super) fn basis(policy: &ReconcilePolicy) -> Option<TrustBasis> {
    let verify = policy.spec.verify.clone()?;
    Some(TrustBasis {
        module: policy.spec.module.clone(),
        verify,
    })
}

/// Why the running version of `policy` (in `entry`) no longer verifies
/// with the keys and annotations its spec names now; `None` if it still
/// does, or if that cannot be told now (the keys ConfigMap cannot be read:
/// it is looked at again with the candidate's backoff).
pub(super) async fn revoked(
    policy: &ReconcilePolicy,
    loader: &Loader,
    entry: Option<&Entry>,
) -> Option<Problem> {
    let verify = policy.spec.verify.as_ref()?;
    let entry = entry?;
    let verified = entry.active.as_ref()?.verified.as_ref()?;
    let trusted = match read_trusted(verify, loader).await {
        Ok(trusted) => trusted,
        // No key, or not one that parses: nothing verifies it now.
        Err(VerifyFailure::Refused(error)) if error.reason() != "VerifyKeysUnreadable" => {
            return Some(refusal(loader, policy, error));
        }
        Err(_) => return None,
    };
    let kept = match &trusted {
        Trusted::Keys(keys) => keys.iter().any(|key| key.describe() == verified.key),
        Trusted::Certificate(trust) => trust.roots.has_root(&verified.key),
    };
    let under = entry.verified_under.clone().or_else(|| basis(policy))?;
    if kept && under.verify == *verify {
        return None;
    }
    let gone = |detail: String| {
        count(loader, policy, "SignatureUntrusted");
        problem(
            "SignatureUntrusted",
            format!(
                "{} was verified by {}, which {}; {detail}",
                verified.digest,
                verified.key,
                match kept {
                    true => "is still trusted, but spec.verify changed",
                    false => "is no longer among the trusted keys",
                }
            ),
        )
    };
    // A ConfigMap module carries one signature: by the key that is gone.
    let Some(reference) = under.module.oci.as_deref() else {
        if kept {
            return None;
        }
        return Some(gone("no other signature can verify it".to_string()));
    };
    let artifact = Artifact {
        reference: format!("{}@{}", repository(reference), verified.digest),
        digest: verified.digest.clone(),
    };
    let pull_secret = under.module.pull_secret.as_ref().map(|s| SecretRef {
        namespace: s.namespace.clone(),
        name: s.name.clone(),
    });
    let (fetcher, annotations) = (&loader.fetcher, &verify.annotations);
    let checked = match &trusted {
        Trusted::Keys(keys) => {
            fetcher
                .verify_artifact(&artifact, pull_secret.as_ref(), keys, annotations)
                .await
        }
        Trusted::Certificate(trust) => {
            fetcher
                .verify_certified_artifact(&artifact, pull_secret.as_ref(), trust, annotations)
                .await
        }
    };
    match checked {
        Ok(again) => {
            count(loader, policy, "Verified");
            tracing::info!(reconcile_policy = %policy.name_any(), reference = %artifact.reference, key = %again.key, "the running version still verifies");
            loader
                .registry
                .verified_under(&policy.name_any(), basis(policy));
            None
        }
        Err(VerifyFailure::Refused(error)) => Some(refusal(loader, policy, error)),
        // Trusted no more unless shown otherwise: a registry that cannot be
        // reached does not keep a revoked key's version deciding.
        Err(VerifyFailure::Fetch(error)) => Some(gone(format!(
            "its signatures could not be read to check them with the keys left: {error}"
        ))),
    }
}

fn refusal(loader: &Loader, policy: &ReconcilePolicy, error: TrustError) -> Problem {
    count(loader, policy, error.reason());
    problem(error.reason(), error.to_string())
}

/// `registry/repository` of a module reference, without tag or digest.
fn repository(reference: &str) -> &str {
    let repository = reference.rsplit_once('@').map_or(reference, |(r, _)| r);
    match repository.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => repository,
    }
}

/// The status message of a refused candidate whose refusal also stopped
/// the running version `current`.
pub(super) fn message(candidate: &Problem, why: &Problem, current: &str) -> String {
    let stopped =
        format!("{current} no longer verifies with the trusted keys and no longer decides");
    // The candidate was the running digest, refused for the same reason.
    if candidate.message.starts_with(&why.message) {
        return format!("{}; {stopped}", why.message);
    }
    format!(
        "{}; and {current}'s own signature check: {}: {}, so it no longer decides",
        candidate.message, why.reason, why.message
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_repository_is_the_reference_without_tag_or_digest() {
        assert_eq!(
            repository("127.0.0.1:5000/p/q:stable"),
            "127.0.0.1:5000/p/q"
        );
        assert_eq!(
            repository("127.0.0.1:5000/p/q@sha256:ab"),
            "127.0.0.1:5000/p/q"
        );
        assert_eq!(repository("127.0.0.1:5000/p/q"), "127.0.0.1:5000/p/q");
    }

    #[test]
    fn a_candidate_refused_as_the_running_version_is_said_once() {
        let why = problem(
            "SignatureUntrusted",
            "sha256:1 is signed, but by none of the trusted keys",
        );
        let candidate = problem("SignatureUntrusted", format!("{}; not loaded", why.message));
        let said = message(&candidate, &why, "guardrail 1.0");
        assert_eq!(
            said.matches("none of the trusted keys").count(),
            1,
            "{said}"
        );
        assert!(
            said.ends_with(
                "guardrail 1.0 no longer verifies with the trusted keys and no longer decides"
            ),
            "{said}"
        );
        let other = problem("SignatureMissing", "sha256:2 is not signed; not loaded");
        let said = message(&other, &why, "guardrail 1.0");
        assert!(said.starts_with("sha256:2 is not signed"), "{said}");
        assert!(said.contains("SignatureUntrusted: sha256:1"), "{said}");
    }
}
