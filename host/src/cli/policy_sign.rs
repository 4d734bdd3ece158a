//! `radwasm policy sign|verify`: cosign signatures of policy artifacts in
//! OCI registries, in cosign's own format (`crates/policy-fetch/src/trust/`), so that
//! `cosign verify --key` accepts what `policy sign` writes and `policy
//! verify` accepts what `cosign sign --key` writes. Keys are cosign's: a
//! `cosign generate-key-pair` private key (password from `COSIGN_PASSWORD`)
//! or a PKCS#8 EC P-256 PEM, and PEM public keys. A module file is signed
//! and verified as a blob instead, as `cosign sign-blob` and `cosign
//! verify-blob` do (`policy_sign_blob.rs`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use super::policy_oci::{RegistryArgs, runtime, with_reference};
use crate::policy::source::{oci, signatures_verify};
use crate::policy::trust;

/// The environment variable cosign reads a private key's password from.
pub const COSIGN_PASSWORD_ENV: &str = "COSIGN_PASSWORD";

#[derive(Debug, Args)]
pub struct SignArgs {
    /// What to sign: `REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`; a tag is
    /// resolved to its digest, and the digest is what is signed. Or a
    /// module file (`policy.wasm`, for a ConfigMap or `--policy`), signed as
    /// `cosign sign-blob` signs it.
    pub reference: String,
    /// The private key: cosign's (`cosign generate-key-pair`, password in
    /// COSIGN_PASSWORD) or a PKCS#8 EC P-256 PEM.
    #[arg(long)]
    pub key: PathBuf,
    /// For a module file: where to write its signature (default
    /// `<file>.sig`, where the controller looks for it).
    #[arg(long, value_name = "FILE")]
    pub output_signature: Option<PathBuf>,
    /// `KEY=VALUE` written into the signed payload's `optional`, as `cosign
    /// sign -a` writes it (repeatable, or comma-separated): what
    /// `spec.verify.annotations` and `cosign verify -a` require.
    #[arg(short = 'a', long = "annotation", visible_alias = "annotations", value_name = "KEY=VALUE", value_delimiter = ',', value_parser = annotation)]
    pub annotations: Vec<(String, String)>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// What to verify: `REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`.
    pub reference: String,
    /// A trusted PEM public key (`cosign.pub`); repeatable: a signature by
    /// any of them is accepted.
    #[arg(long, required_unless_present = "certificate_roots")]
    pub key: Vec<PathBuf>,
    /// Or a certificate-made signature checked against a CA.
    #[command(flatten)]
    pub certificate: Box<super::policy_verify_certificate::CertificateArgs>,
    /// For a module file: its signature (default `<file>.sig`), as `cosign
    /// verify-blob --signature` reads it.
    #[arg(long, value_name = "FILE")]
    pub signature: Option<PathBuf>,
    /// `KEY=VALUE` an accepted signature must carry in its payload's
    /// `optional`, as `cosign verify -a` requires (repeatable, or
    /// comma-separated).
    #[arg(short = 'a', long = "annotation", visible_alias = "annotations", value_name = "KEY=VALUE", value_delimiter = ',', value_parser = annotation)]
    pub annotations: Vec<(String, String)>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

fn annotation(text: &str) -> Result<(String, String), String> {
    trust::claims::parse_annotation(text)
}

/// A blob signature is the bare signature of the file: it has no payload
/// to carry annotations (as with `cosign sign-blob`).
fn no_annotations_on_a_file(annotations: &[(String, String)]) -> anyhow::Result<()> {
    if annotations.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "-a/--annotation applies to OCI artifacts: a module file's signature (a blob \
         signature, as cosign sign-blob writes) has no payload to carry annotations"
    )
}

/// `radwasm policy sign <oci-ref> --key <file>`.
pub fn sign(args: SignArgs) -> anyhow::Result<ExitCode> {
    let options = args.registry.options()?;
    let what = args.key.display().to_string();
    let pem = std::fs::read_to_string(&args.key)
        .with_context(|| format!("{what}: cannot read the private key"))?;
    let password = std::env::var(COSIGN_PASSWORD_ENV).ok();
    let key = trust::signing_key_from_pem(&what, &pem, password.as_deref())?;
    if super::policy_sign_blob::is_file(&args.reference) {
        no_annotations_on_a_file(&args.annotations)?;
        let module = PathBuf::from(&args.reference);
        return super::policy_sign_blob::sign(&module, &key, args.output_signature.as_deref());
    }
    let runtime = runtime()?;
    // The digest signed is the one whose content was pulled and checked.
    let pulled = runtime
        .block_on(oci::pull(&args.reference, &options))
        .map_err(|error| with_reference(error, &args.reference))
        .context("not signed")?;
    if let Some(warning) = tag_warning(&args.reference, &pulled.reference) {
        eprintln!("{warning}");
    }
    let repository = repository_of(&pulled.reference);
    let annotations = args.annotations.into_iter().collect();
    let payload = trust::payload_with(repository, &pulled.digest, &annotations);
    let signature = trust::sign(&payload, &key);
    let stored = runtime
        .block_on(oci::push_signature(
            &pulled.reference,
            &pulled.digest,
            payload,
            signature,
            &options,
        ))
        .map_err(|error| with_reference(error, &args.reference))
        .context("the signature was not stored")?;
    let public = trust::keys::fingerprint(key.verifying_key());
    eprintln!("signed {} with key {public}", pulled.reference);
    println!("{stored}");
    Ok(ExitCode::SUCCESS)
}

/// `radwasm policy verify <oci-ref> --key <file>...`.
pub fn verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    if !args.certificate.certificate_roots.is_empty() {
        return super::policy_verify_certificate::verify(
            &args.reference,
            &args.certificate,
            args.annotations,
            &args.registry,
        );
    }
    let options = args.registry.options()?;
    let mut keys = Vec::new();
    for path in &args.key {
        let what = path.display().to_string();
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("{what}: cannot read the public key"))?;
        keys.push(trust::public_key_from_pem(&what, &pem)?);
    }
    if super::policy_sign_blob::is_file(&args.reference) {
        no_annotations_on_a_file(&args.annotations)?;
        let module = PathBuf::from(&args.reference);
        return super::policy_sign_blob::verify(&module, &keys, args.signature.as_deref());
    }
    let runtime = runtime()?;
    let pulled = runtime
        .block_on(oci::pull(&args.reference, &options))
        .map_err(|error| match error {
            oci::OciError::DigestMismatch { .. } => anyhow::Error::new(error)
                .context(format!("refused (DigestMismatch): {}", args.reference)),
            other => with_reference(other, &args.reference),
        })?;
    let annotations = args.annotations.into_iter().collect();
    let claims = trust::Claims {
        digest: &pulled.digest,
        repository: repository_of(&pulled.reference),
        annotations: &annotations,
    };
    // Both of cosign's formats: 2's `.sig` tag, 3's bundles as referrers.
    let verified = runtime
        .block_on(signatures_verify(
            &pulled.reference,
            &claims,
            &keys,
            &options,
        ))
        .map_err(|error| with_reference(error, &args.reference))
        .context("reading the signatures")?
        .map_err(|error| anyhow::anyhow!("refused ({}): {error}", error.reason()))?;
    println!("verified: {}", pulled.reference);
    println!("key:      {}", verified.key);
    Ok(ExitCode::SUCCESS)
}

/// The warning for a reference that names a tag (or none, which is
/// `latest`): what a tag names can change between the read and the
/// signature, or after it, so the digest signed is said (as `cosign sign`
/// warns of signing by tag).
fn tag_warning(reference: &str, pinned: &str) -> Option<String> {
    if reference.contains('@') {
        return None;
    }
    Some(format!(
        "warning: {reference} is a tag, which can be moved to another manifest at any time; \
         what is signed is the digest it named when it was read: {pinned}. Sign \
         REGISTRY/REPOSITORY@sha256:DIGEST to be sure of what you sign."
    ))
}

/// `registry/repository` of `registry/repository@sha256:…`.
fn repository_of(pinned: &str) -> &str {
    pinned
        .rsplit_once('@')
        .map_or(pinned, |(repository, _)| repository)
}
