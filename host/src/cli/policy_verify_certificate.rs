//! `radwasm policy verify --certificate-roots FILE --certificate-identity …
//! --certificate-oidc-issuer …`: a module signed with a certificate
//! (`cosign sign --certificate --certificate-chain`) checked offline against
//! a platform's CA, as `cosign verify --certificate-chain` checks it and as
//! the controller checks `spec.verify.certificate`
//! (`crates/policy-fetch/src/trust/certificate.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use clap::Args;

use super::policy_oci::{RegistryArgs, runtime, with_reference};
use crate::policy::source::oci;
use crate::policy::trust::certificate::{self, CertificateTrust, Identity, Matcher, Roots};
use crate::policy::trust::{self, Claims};

/// The certificate options of `policy verify`.
#[derive(Debug, Args)]
pub struct CertificateArgs {
    /// Instead of --key: PEM certificates of the CA (repeatable). Every
    /// self-signed one is a trusted root, every other an intermediate that
    /// may complete a signer's chain, so cosign's --certificate-chain,
    /// --ca-roots and --ca-intermediates files all fit here.
    #[arg(long, value_name = "FILE", visible_aliases = ["certificate-chain", "ca-roots", "ca-intermediates"], conflicts_with = "key")]
    pub certificate_roots: Vec<PathBuf>,
    /// The signer's subject (a subject alternative name: email, URI, DNS
    /// name or IP address), exactly.
    #[arg(long, value_name = "SUBJECT", requires = "certificate_roots")]
    pub certificate_identity: Option<String>,
    /// A regular expression of the signer's subject (matches anywhere, as
    /// cosign's, unless anchored with ^…$).
    #[arg(long, value_name = "REGEXP", requires = "certificate_roots")]
    pub certificate_identity_regexp: Option<String>,
    /// The OIDC issuer (extension 1.3.6.1.4.1.57264.1.8, or .1.1) exactly.
    #[arg(long, value_name = "ISSUER", requires = "certificate_roots")]
    pub certificate_oidc_issuer: Option<String>,
    /// A regular expression of the OIDC issuer.
    #[arg(long, value_name = "REGEXP", requires = "certificate_roots")]
    pub certificate_oidc_issuer_regexp: Option<String>,
}

impl CertificateArgs {
    /// The roots and the one identity the flags name.
    fn trust(&self) -> anyhow::Result<CertificateTrust> {
        let mut files = Vec::new();
        for path in &self.certificate_roots {
            let pem = std::fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read the certificates", path.display()))?;
            files.push((path.display().to_string(), pem));
        }
        let name = files
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let roots = Roots::from_pem(&name, &files).map_err(|error| anyhow::anyhow!("{error}"))?;
        let matcher = |flag: &str, exact: &Option<String>, regexp: &Option<String>| {
            Matcher::new(
                (flag, exact.as_deref()),
                (&format!("{flag}-regexp"), regexp.as_deref()),
            )
            .map_err(|error| anyhow::anyhow!("{error} (who may sign, as cosign verify requires)"))
        };
        let subject = matcher(
            "--certificate-identity",
            &self.certificate_identity,
            &self.certificate_identity_regexp,
        )?;
        let issuer = matcher(
            "--certificate-oidc-issuer",
            &self.certificate_oidc_issuer,
            &self.certificate_oidc_issuer_regexp,
        )?;
        Ok(CertificateTrust {
            roots,
            identities: vec![Identity { subject, issuer }],
        })
    }
}

/// `radwasm policy verify <oci-ref> --certificate-roots FILE …`: the
/// `reference` with the certificate options, the required `annotations` and
/// the registry options of the command line.
pub fn verify(
    reference: &str,
    certificate: &CertificateArgs,
    annotations: Vec<(String, String)>,
    registry: &RegistryArgs,
) -> anyhow::Result<ExitCode> {
    if super::policy_sign_blob::is_file(reference) {
        anyhow::bail!(
            "--certificate-roots applies to OCI artifacts: a module file's signature (a blob \
             signature) carries no certificate; verify it with --key"
        );
    }
    let trust = certificate.trust()?;
    let options = registry.options()?;
    let runtime = runtime()?;
    let pulled = runtime
        .block_on(oci::pull(reference, &options))
        .map_err(|error| match error {
            oci::OciError::DigestMismatch { .. } => {
                anyhow::Error::new(error).context(format!("refused (DigestMismatch): {reference}"))
            }
            other => with_reference(other, reference),
        })?;
    let layers = runtime
        .block_on(oci::certified_signatures(
            &pulled.reference,
            &pulled.digest,
            &options,
        ))
        .map_err(|error| with_reference(error, reference))
        .context("reading the signatures")?;
    let annotations: BTreeMap<String, String> = annotations.into_iter().collect();
    let claims = Claims {
        digest: &pulled.digest,
        repository: pulled
            .reference
            .rsplit_once('@')
            .map_or(pulled.reference.as_str(), |(repository, _)| repository),
        annotations: &annotations,
    };
    let verified = certificate::verify_certificate(&layers, &claims, &trust, SystemTime::now())
        .map_err(|error: trust::TrustError| {
            anyhow::anyhow!("refused ({}): {error}", error.reason())
        })?;
    println!("verified:    {}", pulled.reference);
    println!("certificate: {}", verified.key);
    Ok(ExitCode::SUCCESS)
}
