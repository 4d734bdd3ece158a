//! The signature check of a fetched OCI module with
//! `spec.verify.certificate`: the trusted roots read from a ConfigMap, and
//! the certificate-made signatures stored for the artifact's manifest
//! digest checked against them (`policy/trust/certificate.rs`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::{Artifact, Fetcher, SecretRef, SourceError, SourceErrorKind, oci, unavailable};
use crate::policy::source::VerifyFailure;
use crate::policy::trust::certificate::{self, CertificateTrust, Roots};
use crate::policy::trust::{Claims, TrustError, Verified};

impl Fetcher {
    /// The certificates of the ConfigMap `namespace/name` (every `data`
    /// key PEM certificates): its self-signed ones are the roots; none, or
    /// any that does not parse, refuses all.
    pub async fn trusted_roots(&self, namespace: &str, name: &str) -> Result<Roots, VerifyFailure> {
        let what = format!("certificate roots ConfigMap {namespace}/{name}");
        let config_map = match self.config_map(namespace, name, &what).await {
            Ok(config_map) => config_map,
            Err(error) if error.detail == "the ConfigMap does not exist" => {
                return Err(TrustError::KeysMissing {
                    what,
                    detail: "the ConfigMap does not exist; no module is trusted without its roots"
                        .to_string(),
                }
                .into());
            }
            Err(error) => {
                return Err(TrustError::KeysUnreadable {
                    what,
                    detail: error.detail,
                }
                .into());
            }
        };
        let data: Vec<(String, String)> = config_map.data.unwrap_or_default().into_iter().collect();
        if data.is_empty() {
            return Err(TrustError::KeysMissing {
                what,
                detail: "no certificates in data (PEM certificates per key, e.g. ca.pem)"
                    .to_string(),
            }
            .into());
        }
        Roots::from_pem(&format!("ConfigMap {namespace}/{name}"), &data).map_err(|detail| {
            TrustError::KeysInvalid {
                what: what.clone(),
                detail,
            }
            .into()
        })
    }

    /// Check the certificate-made signatures stored for `artifact` against
    /// `trust`: one must chain to its roots, match an identity, and name the
    /// artifact's digest and repository and carry `annotations`. The leaf
    /// must be valid now.
    pub async fn verify_certified_artifact(
        &self,
        artifact: &Artifact,
        pull_secret: Option<&SecretRef>,
        trust: &CertificateTrust,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Verified, VerifyFailure> {
        let auth = match pull_secret {
            Some(secret) => self.credentials(secret, &artifact.reference).await?,
            None => None,
        };
        let options = self.oci_options(auth);
        let what = format!("signatures of {}", artifact.reference);
        let layers = oci::certified_signatures(&artifact.reference, &artifact.digest, &options)
            .await
            .map_err(|error| match error {
                oci::OciError::BadSignatures { .. } => {
                    VerifyFailure::Refused(TrustError::SignatureInvalid {
                        detail: error.to_string(),
                    })
                }
                oci::OciError::DigestMismatch { .. } => SourceError {
                    kind: SourceErrorKind::DigestMismatch,
                    what: what.clone(),
                    detail: error.to_string(),
                }
                .into(),
                error => unavailable(&what, error.to_string()).into(),
            })?;
        let claims = Claims {
            digest: &artifact.digest,
            repository: artifact
                .reference
                .rsplit_once('@')
                .map_or(artifact.reference.as_str(), |(repository, _)| repository),
            annotations,
        };
        Ok(certificate::verify_certificate(
            &layers,
            &claims,
            trust,
            SystemTime::now(),
        )?)
    }
}
