//! The signature check of a fetched OCI module with
//! `spec.verify.certificate`: the trusted roots read from a ConfigMap, and
//! the certificate-made signatures stored for the artifact's manifest
//! digest checked against them (`policy/trust/certificate.rs`).

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::verify::{claims, registry_failure};
use super::{Artifact, Fetcher, SecretRef, oci};
use crate::source::VerifyFailure;
use crate::trust::certificate::{self, CertificateTrust, Roots};
use crate::trust::{TrustError, Verified};

impl Fetcher {
    /// The certificates of the ConfigMap `namespace/name` (every `data`
    /// key PEM certificates): its self-signed ones are the roots; none, or
    /// any that does not parse, refuses all.
    pub async fn trusted_roots(&self, namespace: &str, name: &str) -> Result<Roots, VerifyFailure> {
        let what = format!("certificate roots ConfigMap {namespace}/{name}");
        let data: Vec<(String, String)> = self
            .trust_config_map(
                namespace,
                name,
                &what,
                "roots",
                "PEM certificates per key, e.g. ca.pem",
            )
            .await?
            .into_iter()
            .collect();
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
        let options = self.artifact_options(artifact, pull_secret).await?;
        let layers = oci::certified_signatures(&artifact.reference, &artifact.digest, &options)
            .await
            .map_err(|error| registry_failure(artifact, error))?;
        let claims = claims(artifact, annotations);
        Ok(certificate::verify_certificate(
            &layers,
            &claims,
            trust,
            SystemTime::now(),
        )?)
    }
}
