//! Blob signatures: a module that is a plain file (a ConfigMap key, the
//! controller's `--policy` file) is signed as cosign signs a blob, `cosign
//! sign-blob --key cosign.key policy.wasm --output-signature
//! policy.wasm.sig`. The signature is the base64 ASN.1 DER ECDSA P-256
//! signature of the module bytes' SHA-256, kept beside the module under the
//! module's name with [`SIGNATURE_SUFFIX`]; `cosign verify-blob --key
//! cosign.pub --signature policy.wasm.sig --insecure-ignore-tlog
//! policy.wasm` checks it, and so does [`verify_blob`], offline.

use std::path::PathBuf;

use p256::ecdsa::SigningKey;
use p256::ecdsa::signature::Verifier;

use super::{PublicKey, TrustError, Verified, decode_signature, sign};

/// What is appended to a module's file name or ConfigMap key to name its
/// signature: `policy.wasm` is signed by `policy.wasm.sig`.
pub const SIGNATURE_SUFFIX: &str = ".sig";

/// The name of the signature of the module named `module`.
pub fn signature_name(module: &str) -> String {
    format!("{module}{SIGNATURE_SUFFIX}")
}

/// The signature of `blob` with `key`, as `cosign sign-blob
/// --output-signature` writes it: base64 of the ASN.1 DER signature, no
/// line break.
pub fn sign_blob(blob: &[u8], key: &SigningKey) -> String {
    sign(blob, key)
}

/// Accept `blob` (named `module` in messages) if `signature` (the text of
/// the file or key named `signature_name`, `None` when there is none) is a
/// signature of it by one of `keys`. The verified digest is the blob's
/// `sha256:<hex>`.
pub fn verify_blob(
    module: &str,
    blob: &[u8],
    signature_name: &str,
    signature: Option<&[u8]>,
    keys: &[PublicKey],
) -> Result<Verified, TrustError> {
    let digest = format!("sha256:{}", crate::digest(blob));
    let Some(signature) = signature else {
        return Err(TrustError::BlobUnsigned {
            module: module.to_string(),
            signature: signature_name.to_string(),
        });
    };
    let untrusted = |detail: String| TrustError::BlobUntrusted {
        module: module.to_string(),
        signature: signature_name.to_string(),
        detail,
    };
    let text = std::str::from_utf8(signature).map_err(|_| {
        untrusted("it is not text (expected the base64 cosign sign-blob writes)".to_string())
    })?;
    let decoded = decode_signature(text).ok_or_else(|| {
        untrusted(
            "it is not a base64 ASN.1 DER ECDSA signature (as cosign sign-blob writes; a raw \
             r||s signature is refused, as cosign refuses it)"
                .to_string(),
        )
    })?;
    for key in keys {
        if key.key.verify(blob, &decoded).is_ok() {
            return Ok(Verified {
                digest,
                key: key.describe(),
            });
        }
    }
    Err(untrusted(format!(
        "it verifies with none of the trusted keys ({}): another key signed it, or the module \
         changed since",
        keys.iter()
            .map(PublicKey::describe)
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The public keys a `--policy` file is checked with
/// (`--policy-verify-keys`): one PEM file, or a directory whose every file
/// is one PEM public key (a ConfigMap mounted as a volume: the names
/// starting with `.` that the kubelet adds are skipped). Read again at each
/// check, so a key added or removed there counts from the next reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyFiles(pub PathBuf);

impl KeyFiles {
    /// Every key, or why none is trusted.
    pub fn read(&self) -> Result<Vec<PublicKey>, TrustError> {
        let what = format!("--policy-verify-keys {}", self.0.display());
        let missing = |detail: String| TrustError::KeysMissing {
            what: what.clone(),
            detail,
        };
        let metadata = std::fs::metadata(&self.0)
            .map_err(|error| missing(format!("cannot read it: {error}")))?;
        let files: Vec<PathBuf> = if metadata.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&self.0)
                .map_err(|error| missing(format!("cannot list the directory: {error}")))?
                .flatten()
                .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
                .map(|entry| entry.path())
                .filter(|path| path.is_file())
                .collect();
            files.sort();
            files
        } else {
            vec![self.0.clone()]
        };
        if files.is_empty() {
            return Err(missing(
                "no key files in the directory (one PEM public key per file, e.g. cosign.pub)"
                    .to_string(),
            ));
        }
        files
            .iter()
            .map(|path| {
                let name = path.display().to_string();
                let pem =
                    std::fs::read_to_string(path).map_err(|error| TrustError::KeysInvalid {
                        what: what.clone(),
                        detail: format!("{name}: cannot read it: {error}"),
                    })?;
                super::public_key_from_pem(&name, &pem).map_err(|error| TrustError::KeysInvalid {
                    what: what.clone(),
                    detail: error.to_string(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::keys;

    fn key(seed: u8) -> (SigningKey, PublicKey) {
        let signing = SigningKey::from_slice(&[seed; 32]).expect("key");
        let public = PublicKey {
            name: format!("key{seed}"),
            fingerprint: keys::fingerprint(signing.verifying_key()),
            key: *signing.verifying_key(),
        };
        (signing, public)
    }

    #[test]
    fn a_blob_verifies_with_the_key_that_signed_it_and_names_its_digest() {
        let (signing, public) = key(1);
        let (_, other) = key(2);
        let blob = b"\0asm module bytes";
        let signature = sign_blob(blob, &signing);
        let verified = verify_blob(
            "policy.wasm",
            blob,
            "policy.wasm.sig",
            Some(signature.as_bytes()),
            &[other, public],
        )
        .expect("verifies");
        assert_eq!(verified.digest, format!("sha256:{}", crate::digest(blob)));
        assert!(
            verified.key.starts_with("key1 (sha256:"),
            "{}",
            verified.key
        );
    }

    #[test]
    fn key_files_are_a_file_or_a_mounted_config_maps_directory() {
        use p256::pkcs8::{EncodePublicKey, LineEnding};
        let dir = tempfile::tempdir().expect("temp dir");
        let pem = |seed: u8| {
            key(seed)
                .0
                .verifying_key()
                .to_public_key_pem(LineEnding::LF)
                .expect("pem")
        };
        std::fs::write(dir.path().join("cosign.pub"), pem(1)).expect("write");
        std::fs::write(dir.path().join("new.pub"), pem(2)).expect("write");
        // The kubelet's own entries in a ConfigMap volume.
        std::fs::create_dir(dir.path().join("..2026_11_29")).expect("mkdir");
        std::fs::write(dir.path().join("..data"), "").expect("write");
        let keys = KeyFiles(dir.path().to_path_buf()).read().expect("two keys");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[1].key, key(2).1.key);
        let one = KeyFiles(dir.path().join("cosign.pub"))
            .read()
            .expect("one key");
        assert_eq!(one[0].key, key(1).1.key);

        std::fs::write(dir.path().join("bad.pub"), "not a key").expect("write");
        let error = KeyFiles(dir.path().to_path_buf()).read().unwrap_err();
        assert_eq!(error.reason(), "VerifyKeysInvalid");
        assert!(error.to_string().contains("bad.pub"), "{error}");
        let error = KeyFiles(dir.path().join("absent")).read().unwrap_err();
        assert_eq!(error.reason(), "VerifyKeysMissing");
        let empty = tempfile::tempdir().expect("temp dir");
        let error = KeyFiles(empty.path().to_path_buf()).read().unwrap_err();
        assert!(error.to_string().contains("no key files"), "{error}");
    }

    #[test]
    fn each_blob_refusal_names_the_module_and_its_signature() {
        let (signing, public) = key(1);
        let (stranger, _) = key(2);
        let blob = b"module";
        let keys = std::slice::from_ref(&public);
        let missing = verify_blob("m.wasm", blob, "m.wasm.sig", None, keys).unwrap_err();
        assert_eq!(missing.reason(), "SignatureMissing");
        assert!(missing.to_string().contains("m.wasm.sig"), "{missing}");

        let by_stranger = sign_blob(blob, &stranger);
        let refused = verify_blob(
            "m.wasm",
            blob,
            "m.wasm.sig",
            Some(by_stranger.as_bytes()),
            keys,
        )
        .unwrap_err();
        assert_eq!(refused.reason(), "SignatureUntrusted");
        assert!(refused.to_string().contains("key1 (sha256:"), "{refused}");

        let of_other_bytes = sign_blob(b"another module", &signing);
        let refused = verify_blob(
            "m.wasm",
            blob,
            "m.wasm.sig",
            Some(of_other_bytes.as_bytes()),
            keys,
        )
        .unwrap_err();
        assert_eq!(refused.reason(), "SignatureUntrusted");

        let garbage =
            verify_blob("m.wasm", blob, "m.wasm.sig", Some(b"not base64!"), keys).unwrap_err();
        assert_eq!(garbage.reason(), "SignatureUntrusted");
        assert!(garbage.to_string().contains("not a base64"), "{garbage}");
    }

    #[test]
    fn a_raw_r_s_blob_signature_is_refused_as_cosign_refuses_it() {
        use base64::Engine as _;
        use p256::ecdsa::Signature;
        use p256::ecdsa::signature::Signer;
        let (signing, public) = key(1);
        let blob = b"module";
        let raw: Signature = signing.sign(blob);
        let raw = base64::engine::general_purpose::STANDARD.encode(raw.to_bytes());
        let refused = verify_blob(
            "m.wasm",
            blob,
            "m.wasm.sig",
            Some(raw.as_bytes()),
            &[public],
        )
        .unwrap_err();
        assert_eq!(refused.reason(), "SignatureUntrusted");
        assert!(refused.to_string().contains("ASN.1 DER"), "{refused}");
    }
}
