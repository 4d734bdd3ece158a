//! `radwasm policy sign|verify` of a module file (a blob), as `cosign
//! sign-blob` and `cosign verify-blob` do: the signature is the base64 ECDSA
//! P-256 signature of the file's SHA-256, written beside it as `<file>.sig`
//! (`crates/policy-fetch/src/trust/blob.rs`). What the controller checks for a ConfigMap
//! module and for its `--policy` file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use p256::ecdsa::SigningKey;

use crate::policy::trust::{self, PublicKey, blob};

/// Whether `reference` names a module file rather than an OCI artifact.
pub fn is_file(reference: &str) -> bool {
    Path::new(reference).is_file()
}

/// Where the signature of `module` goes (or is read from): `output`, or
/// `<module>.sig`.
pub fn signature_path(module: &Path, output: Option<&Path>) -> PathBuf {
    output.map(Path::to_path_buf).unwrap_or_else(|| {
        let mut name = module.as_os_str().to_owned();
        name.push(blob::SIGNATURE_SUFFIX);
        PathBuf::from(name)
    })
}

/// Sign the file `module` with `key`; write the signature to `output` (by
/// default `<module>.sig`).
pub fn sign(module: &Path, key: &SigningKey, output: Option<&Path>) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(module)
        .with_context(|| format!("{}: cannot read the module", module.display()))?;
    let signature = blob::sign_blob(&bytes, key);
    let path = signature_path(module, output);
    std::fs::write(&path, &signature)
        .with_context(|| format!("{}: cannot write the signature", path.display()))?;
    let public = trust::keys::fingerprint(key.verifying_key());
    eprintln!(
        "signed {} (sha256:{}) with key {public}",
        module.display(),
        crate::policy::digest(&bytes)
    );
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// Verify the file `module` with its signature (`signature`, by default
/// `<module>.sig`) and `keys`.
pub fn verify(
    module: &Path,
    keys: &[PublicKey],
    signature: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(module)
        .with_context(|| format!("{}: cannot read the module", module.display()))?;
    let path = signature_path(module, signature);
    let text = std::fs::read(&path).ok();
    let verified = blob::verify_blob(
        &module.display().to_string(),
        &bytes,
        &path.display().to_string(),
        text.as_deref(),
        keys,
    )
    .map_err(|error| anyhow::anyhow!("refused ({}): {error}", error.reason()))?;
    println!("verified: {} ({})", module.display(), verified.digest);
    println!("key:      {}", verified.key);
    Ok(ExitCode::SUCCESS)
}
