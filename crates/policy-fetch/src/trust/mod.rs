//! Trust in policy modules: cosign signatures over OCI artifacts, checked
//! offline with public keys, before a module decides anything.
//!
//! The format is cosign's for OCI artifacts (cosign v2's default, without a
//! transparency log): the signatures of the manifest `sha256:<hex>` are the
//! layers of the manifest tagged `sha256-<hex>.sig` in the same repository.
//! Each layer (media type [`SIMPLE_SIGNING_MEDIA_TYPE`]) is a simple-signing
//! payload naming the signed manifest digest
//! (`critical.image.docker-manifest-digest`), and its annotation
//! [`SIGNATURE_ANNOTATION`] is the base64 ECDSA P-256 signature (ASN.1 DER)
//! of the payload's SHA-256. [`verify`] accepts a digest only if a payload
//! signed by one of the keys given names exactly that digest, names the
//! repository the module was fetched from (`critical.identity.docker-reference`)
//! and carries the annotations required (`optional`): [`claims`]. cosign
//! 3's default format, a sigstore bundle stored as an OCI referrer of the
//! manifest, is [`bundle`]'s; a digest verifies if either format does.
//!
//! Not the `sigstore` crate, which Kubewarden uses: sigstore 0.15 refuses to
//! build (`compile_error!`) unless its `native-tls` (OpenSSL) or `rustls-tls`
//! (aws-lc-rs) feature picks a crypto backend, and this repository builds
//! with rustls on ring and neither OpenSSL nor aws-lc. The primitives are
//! RustCrypto's (`p256` ECDSA, `sha2`, `scrypt`, `crypto_secretbox`); the
//! registry side is `oci-client` (`source/oci/signatures.rs`).

pub mod blob;
pub mod bundle;
pub mod certificate;
pub mod claims;
pub mod keys;

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{DerSignature, Signature, SigningKey};
use serde::{Deserialize, Serialize};

pub use keys::{KeyError, PublicKey, public_key_from_pem, signing_key_from_pem};

/// Media type of a signature layer (a simple-signing payload).
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature of the payload.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// `critical.type` of a cosign payload.
pub const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The tag under which the signatures of manifest `digest` (`sha256:<hex>`)
/// are stored: `sha256-<hex>.sig`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// One signature layer as fetched: the payload bytes (already checked
/// against the layer digest) and the signature annotation, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLayer {
    pub payload: Vec<u8>,
    pub signature: Option<String>,
}

/// A digest that verified, and with which key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The manifest digest, `sha256:…`.
    pub digest: String,
    /// The key that verified it: name and fingerprint.
    pub key: String,
}

/// Why a module was refused. Each variant is its own status reason
/// ([`TrustError::reason`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    #[error(
        "{digest} is not signed: no cosign signature at tag {tag} (cosign 2's format) and no \
         sigstore bundle among its OCI referrers (cosign 3's) (sign it with `cosign sign --key` \
         or `radwasm policy sign --key`)"
    )]
    Unsigned { digest: String, tag: String },
    /// `found` says what was found in which format.
    #[error("{digest} is signed ({found}), but by none of the trusted keys ({keys})")]
    UnknownKey {
        digest: String,
        found: String,
        keys: String,
    },
    #[error(
        "the signature stored for {digest} was made by {key} for another digest ({signed}); \
         a signature is valid only for the digest it names"
    )]
    OtherDigest {
        digest: String,
        signed: String,
        key: String,
    },
    #[error(
        "the signature of {digest} by {key} was made for the repository {signed}, not for \
         {repository} the module was fetched from; a manifest and its signature copied from \
         another repository are refused"
    )]
    OtherRepository {
        digest: String,
        signed: String,
        repository: String,
        key: String,
    },
    #[error(
        "the signature of {digest} by {key} lacks annotation{} {missing} that spec.verify \
         requires (sign with `cosign sign -a KEY=VALUE` or `radwasm policy sign -a KEY=VALUE`)",
        if missing.contains(", ") { "s" } else { "" }
    )]
    MissingAnnotations {
        digest: String,
        missing: String,
        key: String,
    },
    #[error("{what}: {detail}")]
    KeysMissing { what: String, detail: String },
    #[error("{what}: {detail}")]
    KeysInvalid { what: String, detail: String },
    /// The keys ConfigMap could not be read (the API server refused or
    /// failed): nothing is trusted until it can be.
    #[error("{what} cannot be read: {detail}; nothing is trusted until it can be")]
    KeysUnreadable { what: String, detail: String },
    /// What a registry stores as the digest's signatures is not a cosign
    /// signature manifest that can be read within bounds.
    #[error("{detail}")]
    SignatureInvalid { detail: String },
    #[error(
        "{source_name}: the controller runs with --require-signatures and this policy has no \
         spec.verify; every module but the built-in default must be signed"
    )]
    Required { source_name: String },
    #[error(
        "{module} is not signed: no {signature} beside it (sign it with `cosign sign-blob --key \
         cosign.key --output-signature {signature}` or `radwasm policy sign --key`)"
    )]
    BlobUnsigned { module: String, signature: String },
    #[error("{module}: its signature {signature} is refused: {detail}")]
    BlobUntrusted {
        module: String,
        signature: String,
        detail: String,
    },
    #[error(
        "its base, ReconcilePolicy {base}, {why}; a layer that must be verified decides only over a verified base"
    )]
    BaseUnverified { base: String, why: String },
    /// `spec.verify.certificate`: signatures exist, none carries a
    /// certificate (they were made with a bare key).
    #[error(
        "{digest} is signed ({count} signature{}), but none carries a certificate \
         (dev.sigstore.cosign/certificate) to check against the trusted roots",
        if *count == 1 { "" } else { "s" }
    )]
    CertificateMissing { digest: String, count: usize },
    #[error("the certificate of a signature of {digest} cannot be read: {detail}")]
    CertificateInvalid { digest: String, detail: String },
    #[error(
        "the signature of {digest} by {certificate} does not chain to a root of {roots}: {detail}"
    )]
    CertificateUntrusted {
        digest: String,
        certificate: String,
        roots: String,
        detail: String,
    },
    #[error("the signature of {digest} by {certificate} is refused: {detail}")]
    CertificateUsageMismatch {
        digest: String,
        certificate: String,
        detail: String,
    },
    #[error(
        "the signature of {digest} by {certificate} matches none of the identities \
         spec.verify.certificate.identities names ({expected})"
    )]
    CertificateIdentityMismatch {
        digest: String,
        certificate: String,
        expected: String,
    },
    #[error("the certificate of the signature of {digest}, {certificate}, is expired: {detail}")]
    CertificateExpired {
        digest: String,
        certificate: String,
        detail: String,
    },
    #[error(
        "the signature of {digest} does not verify with the key of its certificate, {certificate}"
    )]
    CertificateSignatureMismatch { digest: String, certificate: String },
}

impl TrustError {
    /// The `Ready` condition's reason, the Event's reason and the metric's
    /// `reason` label.
    pub fn reason(&self) -> &'static str {
        match self {
            TrustError::Unsigned { .. } => "SignatureMissing",
            TrustError::UnknownKey { .. } => "SignatureUntrusted",
            TrustError::OtherDigest { .. } => "SignatureDigestMismatch",
            TrustError::OtherRepository { .. } => "SignatureReferenceMismatch",
            TrustError::MissingAnnotations { .. } => "SignatureAnnotationMismatch",
            TrustError::KeysMissing { .. } => "VerifyKeysMissing",
            TrustError::KeysInvalid { .. } => "VerifyKeysInvalid",
            TrustError::KeysUnreadable { .. } => "VerifyKeysUnreadable",
            TrustError::SignatureInvalid { .. } => "SignatureInvalid",
            TrustError::Required { .. } => "SignatureRequired",
            TrustError::BlobUnsigned { .. } => "SignatureMissing",
            TrustError::BlobUntrusted { .. } => "SignatureUntrusted",
            TrustError::BaseUnverified { .. } => "BaseUnverified",
            TrustError::CertificateMissing { .. } => "CertificateMissing",
            TrustError::CertificateInvalid { .. } => "CertificateInvalid",
            TrustError::CertificateUntrusted { .. } => "CertificateUntrusted",
            TrustError::CertificateUsageMismatch { .. } => "CertificateUsageMismatch",
            TrustError::CertificateIdentityMismatch { .. } => "CertificateIdentityMismatch",
            TrustError::CertificateExpired { .. } => "CertificateExpired",
            TrustError::CertificateSignatureMismatch { .. } => "SignatureUntrusted",
        }
    }
}

/// The reasons of refusals for trust (verification), which leave a
/// running version deciding but make the policy `Ready=False`.
pub const TRUST_REASONS: &[&str] = &[
    "SignatureMissing",
    "SignatureUntrusted",
    "SignatureDigestMismatch",
    "SignatureReferenceMismatch",
    "SignatureAnnotationMismatch",
    "VerifyKeysMissing",
    "VerifyKeysInvalid",
    "VerifyKeysUnreadable",
    "SignatureInvalid",
    "SignatureRequired",
    "BaseUnverified",
    "DigestMismatch",
    "CertificateMissing",
    "CertificateInvalid",
    "CertificateUntrusted",
    "CertificateUsageMismatch",
    "CertificateIdentityMismatch",
    "CertificateExpired",
];

/// cosign's simple-signing payload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Payload {
    pub critical: Critical,
    pub optional: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Critical {
    pub identity: Identity,
    pub image: Image,
    #[serde(rename = "type")]
    pub type_: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Identity {
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Image {
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

/// The payload cosign signs for `repository` (`registry/repository`) at
/// `digest`, in cosign's field order.
pub fn payload(repository: &str, digest: &str) -> Vec<u8> {
    payload_with(repository, digest, &BTreeMap::new())
}

/// The payload with `annotations` in `optional`, as `cosign sign -a
/// key=value` writes them (`null` without any).
pub fn payload_with(
    repository: &str,
    digest: &str,
    annotations: &BTreeMap<String, String>,
) -> Vec<u8> {
    let optional = (!annotations.is_empty()).then(|| {
        serde_json::Value::Object(
            annotations
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        )
    });
    let payload = Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: repository.to_string(),
            },
            image: Image {
                docker_manifest_digest: digest.to_string(),
            },
            type_: PAYLOAD_TYPE.to_string(),
        },
        optional,
    };
    // Serialising plain strings cannot fail.
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// A signature layer for `payload`, signed with `key`: the base64 ASN.1
/// DER ECDSA signature cosign writes.
pub fn sign(payload: &[u8], key: &SigningKey) -> String {
    let signature: DerSignature = key.sign(payload);
    STANDARD.encode(signature.as_bytes())
}

/// What an accepted signature's payload must claim.
#[derive(Debug, Clone, Copy)]
pub struct Claims<'a> {
    /// The manifest digest, `sha256:…`.
    pub digest: &'a str,
    /// `registry/repository` the module was fetched from: the payload's
    /// `docker-reference` must name it ([`claims::same_repository`]).
    pub repository: &'a str,
    /// What the payload's `optional` must carry (`spec.verify.annotations`).
    pub annotations: &'a BTreeMap<String, String>,
}

/// Of the refusals of several signatures, the one that got furthest (the
/// highest rank; the first of equals): what is reported when none
/// verifies.
#[derive(Debug, Default)]
pub(crate) struct Closest(Option<(u8, TrustError)>);

impl Closest {
    pub(crate) fn offer(&mut self, rank: u8, refusal: TrustError) {
        if self.0.as_ref().is_none_or(|(best, _)| *best < rank) {
            self.0 = Some((rank, refusal));
        }
    }

    /// The closest refusal, if one ranks above `floor`.
    pub(crate) fn above(self, floor: Option<u8>) -> Option<TrustError> {
        self.0
            .filter(|(rank, _)| floor.is_none_or(|floor| *rank > floor))
            .map(|(_, refusal)| refusal)
    }
}

/// Accept `claims.digest` if one of `layers` is signed by one of `keys`
/// and its payload names that digest, that repository and carries those
/// annotations; otherwise say precisely why not (of signatures by trusted
/// keys that claim something else, the one that came closest).
pub fn verify(
    layers: &[SignatureLayer],
    claims: &Claims<'_>,
    keys: &[PublicKey],
) -> Result<Verified, TrustError> {
    let digest = claims.digest;
    let mut closest = Closest::default();
    for layer in layers {
        let Some(signature) = layer.signature.as_deref().and_then(decode_signature) else {
            continue;
        };
        for key in keys {
            if key.key.verify(&layer.payload, &signature).is_err() {
                continue;
            }
            let refusal = match check_payload(&layer.payload, claims, &key.describe()) {
                Ok(()) => {
                    return Ok(Verified {
                        digest: digest.to_string(),
                        key: key.describe(),
                    });
                }
                Err(refusal) => refusal,
            };
            closest.offer(refusal.0, refusal.1);
        }
    }
    if let Some(refusal) = closest.above(None) {
        return Err(refusal);
    }
    if layers.is_empty() {
        return Err(TrustError::Unsigned {
            digest: digest.to_string(),
            tag: signature_tag(digest),
        });
    }
    Err(TrustError::UnknownKey {
        digest: digest.to_string(),
        found: format!(
            "{} cosign signature{} at tag {}",
            layers.len(),
            if layers.len() == 1 { "" } else { "s" },
            signature_tag(digest)
        ),
        keys: describe_keys(keys),
    })
}

/// The trusted keys, named in a refusal.
fn describe_keys(keys: &[PublicKey]) -> String {
    keys.iter()
        .map(PublicKey::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A payload signed by a trusted key (`key`), checked against `claims` in
/// order: the digest, the repository, the annotations. A refusal comes with
/// how many checks passed before it.
pub(crate) fn check_payload(
    payload: &[u8],
    claims: &Claims<'_>,
    key: &str,
) -> Result<(), (u8, TrustError)> {
    let digest = claims.digest.to_string();
    let Some(payload) = serde_json::from_slice::<Payload>(payload)
        .ok()
        .filter(|p| p.critical.type_ == PAYLOAD_TYPE)
    else {
        let signed = "a payload that names no digest".to_string();
        let key = key.to_string();
        return Err((
            0,
            TrustError::OtherDigest {
                digest,
                signed,
                key,
            },
        ));
    };
    let critical = payload.critical;
    if critical.image.docker_manifest_digest != claims.digest {
        let signed = critical.image.docker_manifest_digest;
        let key = key.to_string();
        return Err((
            0,
            TrustError::OtherDigest {
                digest,
                signed,
                key,
            },
        ));
    }
    let signed = critical.identity.docker_reference;
    if !claims::same_repository(&signed, claims.repository) {
        let repository = claims.repository.to_string();
        let key = key.to_string();
        return Err((
            1,
            TrustError::OtherRepository {
                digest,
                signed,
                repository,
                key,
            },
        ));
    }
    let missing = claims::missing_annotations(claims.annotations, payload.optional.as_ref());
    if !missing.is_empty() {
        let missing = missing.join(", ");
        let key = key.to_string();
        return Err((
            2,
            TrustError::MissingAnnotations {
                digest,
                missing,
                key,
            },
        ));
    }
    Ok(())
}

/// A base64 signature, ASN.1 DER only: cosign (Go's `ecdsa.VerifyASN1`)
/// accepts nothing else, so a raw 64-byte `r‖s` that cosign would refuse is
/// refused here too.
fn decode_signature(text: &str) -> Option<Signature> {
    let bytes = STANDARD.decode(text.trim()).ok()?;
    Signature::from_der(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn key(seed: u8) -> (SigningKey, PublicKey) {
        let signing = SigningKey::from_slice(&[seed; 32]).expect("key");
        let public = PublicKey {
            name: format!("key{seed}"),
            fingerprint: keys::fingerprint(signing.verifying_key()),
            key: *signing.verifying_key(),
        };
        (signing, public)
    }

    const REPOSITORY: &str = "127.0.0.1:5000/p";

    fn layer(digest: &str, key: &SigningKey) -> SignatureLayer {
        signed(payload(REPOSITORY, digest), key)
    }

    fn signed(payload: Vec<u8>, key: &SigningKey) -> SignatureLayer {
        SignatureLayer {
            signature: Some(sign(&payload, key)),
            payload,
        }
    }

    fn claims<'a>(digest: &'a str, annotations: &'a BTreeMap<String, String>) -> Claims<'a> {
        Claims {
            digest,
            repository: REPOSITORY,
            annotations,
        }
    }

    fn unconstrained(digest: &str) -> Claims<'_> {
        static NONE: BTreeMap<String, String> = BTreeMap::new();
        claims(digest, &NONE)
    }

    #[test]
    fn a_digest_verifies_with_any_trusted_key_that_signed_it() {
        let (old, old_pub) = key(1);
        let (_, new_pub) = key(2);
        let verified = verify(
            &[layer(DIGEST, &old)],
            &unconstrained(DIGEST),
            &[new_pub, old_pub],
        )
        .expect("ok");
        assert_eq!(verified.digest, DIGEST);
        assert!(
            verified.key.starts_with("key1 (sha256:"),
            "{}",
            verified.key
        );
    }

    #[test]
    fn each_refusal_has_its_own_reason() {
        let (signer, signer_pub) = key(1);
        let (_, stranger_pub) = key(2);
        let unsigned = verify(
            &[],
            &unconstrained(DIGEST),
            std::slice::from_ref(&signer_pub),
        )
        .unwrap_err();
        assert_eq!(unsigned.reason(), "SignatureMissing");
        assert!(unsigned.to_string().contains(&signature_tag(DIGEST)));
        let unknown = verify(
            &[layer(DIGEST, &signer)],
            &unconstrained(DIGEST),
            &[stranger_pub],
        )
        .unwrap_err();
        assert_eq!(unknown.reason(), "SignatureUntrusted");
        let other = verify(
            &[layer(OTHER, &signer)],
            &unconstrained(DIGEST),
            std::slice::from_ref(&signer_pub),
        )
        .unwrap_err();
        assert_eq!(other.reason(), "SignatureDigestMismatch");
        assert!(other.to_string().contains(OTHER), "{other}");
        let mut tampered = layer(DIGEST, &signer);
        tampered.payload = payload("127.0.0.1:5000/q", DIGEST);
        let refused = verify(
            &[tampered],
            &unconstrained(DIGEST),
            std::slice::from_ref(&signer_pub),
        )
        .unwrap_err();
        assert_eq!(refused.reason(), "SignatureUntrusted");
        // Signed for the same digest in another repository: copied here.
        let elsewhere = signed(payload("127.0.0.1:5000/other", DIGEST), &signer);
        let refused = verify(
            &[elsewhere],
            &unconstrained(DIGEST),
            std::slice::from_ref(&signer_pub),
        )
        .unwrap_err();
        assert_eq!(refused.reason(), "SignatureReferenceMismatch");
        assert!(
            refused.to_string().contains("127.0.0.1:5000/other"),
            "{refused}"
        );
        // Without an annotation spec.verify requires.
        let required = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        let refused = verify(
            &[layer(DIGEST, &signer)],
            &claims(DIGEST, &required),
            &[signer_pub],
        )
        .unwrap_err();
        assert_eq!(refused.reason(), "SignatureAnnotationMismatch");
        assert!(refused.to_string().contains("env=prod"), "{refused}");
    }

    #[test]
    fn annotations_required_accept_only_signatures_carrying_them() {
        let (signer, signer_pub) = key(1);
        let keys = std::slice::from_ref(&signer_pub);
        let release = |version: &str| {
            BTreeMap::from([
                ("env".to_string(), "prod".to_string()),
                ("version".to_string(), version.to_string()),
            ])
        };
        let required = release("1.4");
        let layers = [
            signed(payload_with(REPOSITORY, DIGEST, &release("1.3")), &signer),
            signed(payload_with(REPOSITORY, DIGEST, &release("1.4")), &signer),
        ];
        let verified = verify(&layers, &claims(DIGEST, &required), keys).expect("1.4 signed");
        assert_eq!(verified.digest, DIGEST);
        // The older release's signature alone is refused, naming what lacks.
        let refused = verify(&layers[..1], &claims(DIGEST, &required), keys).unwrap_err();
        assert_eq!(refused.reason(), "SignatureAnnotationMismatch");
        assert!(refused.to_string().contains("version=1.4"), "{refused}");
        // Annotations signed but none required: accepted, as cosign does.
        verify(&layers[..1], &unconstrained(DIGEST), keys).expect("unconstrained");
        // Of several refusals, the one closest to passing is reported.
        let mixed = [layer(OTHER, &signer), layers[0].clone()];
        let refused = verify(&mixed, &claims(DIGEST, &required), keys).unwrap_err();
        assert_eq!(refused.reason(), "SignatureAnnotationMismatch");
    }

    #[test]
    fn a_raw_r_s_signature_is_refused_as_cosign_refuses_it() {
        let (signer, signer_pub) = key(1);
        let payload = payload(REPOSITORY, DIGEST);
        let raw: Signature = signer.sign(&payload);
        assert!(signer_pub.key.verify(&payload, &raw).is_ok());
        let layer = SignatureLayer {
            payload,
            signature: Some(STANDARD.encode(raw.to_bytes())),
        };
        let refused = verify(&[layer], &unconstrained(DIGEST), &[signer_pub]).unwrap_err();
        assert_eq!(refused.reason(), "SignatureUntrusted", "{refused}");
        let der = STANDARD.encode(raw.to_der().as_bytes());
        assert!(decode_signature(&der).is_some());
        assert!(decode_signature(&STANDARD.encode(raw.to_bytes())).is_none());
    }

    #[test]
    fn the_payload_and_tag_are_cosigns() {
        assert_eq!(
            String::from_utf8(payload("r.example/p", DIGEST)).expect("utf8"),
            format!(
                "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"r.example/p\"}},\"image\":{{\"docker-manifest-digest\":\"{DIGEST}\"}},\"type\":\"cosign container image signature\"}},\"optional\":null}}"
            )
        );
        let annotations = BTreeMap::from([
            ("version".to_string(), "1.4".to_string()),
            ("env".to_string(), "prod".to_string()),
        ]);
        let text =
            String::from_utf8(payload_with("r.example/p", DIGEST, &annotations)).expect("utf8");
        assert!(
            text.ends_with(r#""optional":{"env":"prod","version":"1.4"}}"#),
            "{text}"
        );
        assert_eq!(
            signature_tag(DIGEST),
            format!("sha256-{}.sig", &DIGEST[7..])
        );
    }
}
