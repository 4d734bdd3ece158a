//! The signature check of a fetched OCI module (`spec.verify`): the trusted
//! public keys read from a ConfigMap, and the signatures stored for the
//! artifact's manifest digest checked against them (`policy/trust/`).

use std::collections::BTreeMap;

use super::{Artifact, Fetcher, SecretRef, SourceError, SourceErrorKind, oci, unavailable};
use crate::trust::{self, Claims, PublicKey, TrustError, Verified};

/// Why a module was not verified: refused for trust, or the signatures
/// could not be fetched (a registry error: retried like any fetch).
#[derive(Debug, thiserror::Error)]
pub enum VerifyFailure {
    #[error(transparent)]
    Refused(#[from] TrustError),
    #[error(transparent)]
    Fetch(#[from] SourceError),
}

impl Fetcher {
    /// The public keys of the ConfigMap `namespace/name`: every `data` key
    /// is one PEM public key; none, or any that does not parse, refuses all.
    pub async fn trusted_keys(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Vec<PublicKey>, VerifyFailure> {
        let what = format!("verify keys ConfigMap {namespace}/{name}");
        let data = self
            .trust_config_map(
                namespace,
                name,
                &what,
                "keys",
                "one PEM public key per key, e.g. cosign.pub",
            )
            .await?;
        data.iter()
            .map(|(key, pem)| {
                trust::public_key_from_pem(&format!("{namespace}/{name}:{key}"), pem).map_err(
                    |error| {
                        TrustError::KeysInvalid {
                            what: what.clone(),
                            detail: error.to_string(),
                        }
                        .into()
                    },
                )
            })
            .collect()
    }

    /// The `data` of the ConfigMap `namespace/name` that holds trust
    /// material (`what` names it, `material` says what it holds, `layout`
    /// how): missing or empty is [`TrustError::KeysMissing`], one the API
    /// server does not serve [`TrustError::KeysUnreadable`].
    pub(super) async fn trust_config_map(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
        material: &str,
        layout: &str,
    ) -> Result<BTreeMap<String, String>, VerifyFailure> {
        let missing = |detail: String| -> VerifyFailure {
            TrustError::KeysMissing {
                what: what.to_string(),
                detail,
            }
            .into()
        };
        let unreadable = |detail: String| -> VerifyFailure {
            TrustError::KeysUnreadable {
                what: what.to_string(),
                detail,
            }
            .into()
        };
        let read = match self.cluster(what) {
            Ok(cluster) => cluster.config_map(namespace, name).await,
            Err(error) => return Err(unreadable(error.detail)),
        };
        let config_map = match read {
            Ok(Some(config_map)) => config_map,
            Ok(None) => {
                return Err(missing(format!(
                    "the ConfigMap does not exist; no module is trusted without its {material}"
                )));
            }
            Err(error) => return Err(unreadable(error)),
        };
        let data = config_map.data;
        if data.is_empty() {
            return Err(missing(format!("no {material} in data ({layout})")));
        }
        Ok(data)
    }

    /// Check the signatures stored for `artifact` against `keys`: one must
    /// name its digest and repository and carry `annotations`.
    pub async fn verify_artifact(
        &self,
        artifact: &Artifact,
        pull_secret: Option<&SecretRef>,
        keys: &[PublicKey],
        annotations: &BTreeMap<String, String>,
    ) -> Result<Verified, VerifyFailure> {
        let options = self.artifact_options(artifact, pull_secret).await?;
        let claims = claims(artifact, annotations);
        let verified = signatures_verify(&artifact.reference, &claims, keys, &options)
            .await
            .map_err(|error| registry_failure(artifact, error))?;
        Ok(verified?)
    }

    /// How to reach `artifact`'s registry, with the credentials of
    /// `pull_secret` if it names one.
    pub(super) async fn artifact_options(
        &self,
        artifact: &Artifact,
        pull_secret: Option<&SecretRef>,
    ) -> Result<oci::OciOptions, VerifyFailure> {
        let auth = match pull_secret {
            Some(secret) => self.credentials(secret, &artifact.reference).await?,
            None => None,
        };
        Ok(self.oci_options(auth))
    }
}

/// What a signature of `artifact` must claim: its digest, its repository
/// (the reference without `@digest`) and `annotations`.
pub(super) fn claims<'a>(
    artifact: &'a Artifact,
    annotations: &'a BTreeMap<String, String>,
) -> Claims<'a> {
    Claims {
        digest: &artifact.digest,
        repository: artifact
            .reference
            .rsplit_once('@')
            .map_or(artifact.reference.as_str(), |(repository, _)| repository),
        annotations,
    }
}

/// Why `artifact`'s signatures could not be read: what is stored but cannot
/// be used is a refusal (`SignatureInvalid`), content that does not match
/// its digest a digest mismatch, anything else a fetch failure (retried).
pub(super) fn registry_failure(artifact: &Artifact, error: oci::OciError) -> VerifyFailure {
    let what = format!("signatures of {}", artifact.reference);
    match error {
        oci::OciError::BadSignatures { .. } => TrustError::SignatureInvalid {
            detail: error.to_string(),
        }
        .into(),
        oci::OciError::DigestMismatch { .. } => SourceError {
            kind: SourceErrorKind::DigestMismatch,
            what,
            detail: error.to_string(),
        }
        .into(),
        error => unavailable(&what, error.to_string()).into(),
    }
}

/// Check the signatures stored in both of cosign's formats for
/// `claims.digest` of `reference` against `keys`: cosign 2's at the
/// `sha256-<hex>.sig` tag and cosign 3's sigstore bundles among the OCI
/// referrers (asked for only if the first does not verify). Verified if
/// either verifies; else the refusal closest to
/// passing ([`trust::bundle::either`]). What is stored but cannot be used
/// (an index at the signature tag, an oversized bundle) is a refusal
/// (`SignatureInvalid`) only if the other format does not verify either.
/// `Err` is a registry failure: the signatures could not be read.
pub async fn signatures_verify(
    reference: &str,
    claims: &Claims<'_>,
    keys: &[PublicKey],
    options: &oci::OciOptions,
) -> Result<Result<Verified, TrustError>, oci::OciError> {
    let refusal = |error: oci::OciError| match error {
        oci::OciError::BadSignatures { .. } => Ok(TrustError::SignatureInvalid {
            detail: error.to_string(),
        }),
        error => Err(error),
    };
    let cosign2 = match oci::signatures(reference, claims.digest, options).await {
        Ok(layers) => trust::verify(&layers, claims, keys),
        Err(error) => Err(refusal(error)?),
    };
    // A verified `.sig` is enough: the referrers are not asked for.
    if cosign2.is_ok() {
        return Ok(cosign2);
    }
    let cosign3 = match oci::bundles(reference, claims.digest, options).await {
        Ok(bundles) => trust::bundle::verify_bundles(&bundles, claims, keys),
        Err(error) => Err(refusal(error)?),
    };
    Ok(trust::bundle::either(cosign2, cosign3))
}
