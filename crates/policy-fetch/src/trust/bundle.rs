//! cosign 3's signatures: a sigstore bundle (protobuf-specs bundle v0.3,
//! JSON, media type [`BUNDLE_MEDIA_TYPE`]) stored as an OCI referrer of the
//! signed manifest (`source/oci/referrers.rs` fetches them).
//!
//! `cosign sign --key` of cosign 3 writes a DSSE envelope
//! (`dsseEnvelope`) whose payload (type [`IN_TOTO_PAYLOAD_TYPE`]) is an
//! in-toto statement: one subject, `{"digest": {"sha256": <hex>}}` of the
//! signed manifest with the `-a key=value` annotations in the subject's
//! `annotations`, and the predicate type [`SIGN_PREDICATE_TYPE`] with an
//! empty predicate. The signature (`signatures[].sig`, base64 ASN.1 DER
//! ECDSA P-256) is over the DSSE pre-authentication encoding ([`pae`]) of
//! the payload type and the payload. A bundle may instead hold a
//! `messageSignature`: the signature of the manifest's SHA-256, which is
//! the manifest digest itself.
//!
//! [`verify_bundles`] accepts a digest if a bundle is signed by one of the
//! trusted keys, its statement has a subject whose `sha256` is that digest
//! and whose annotations carry those required (as cosign 3's
//! `IntotoSubjectClaimVerifier` checks them). Offline, as for cosign 2's
//! format: the bundle's transparency log entries, timestamps and
//! verification material (the key hint, a certificate) are neither
//! required nor trusted; only the trusted keys decide. Two differences with
//! `cosign verify`, both stricter: a statement of another predicate type (an
//! attestation, `cosign attest`) is not taken as a signature, and the
//! statement names no repository, so unlike cosign 2's payload a bundle
//! cannot be checked against the repository the module came from.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::Signature;
use p256::ecdsa::signature::Verifier;
use p256::ecdsa::signature::hazmat::PrehashVerifier;
use serde::Deserialize;

use super::{Claims, PublicKey, TrustError, Verified, claims, decode_signature};

/// The media type of a sigstore bundle v0.3 in JSON: the `artifactType` of
/// the referrer manifest, its layer's media type and the bundle's own
/// `mediaType`.
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The DSSE payload type of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The predicate type of the statement `cosign sign` writes.
pub const SIGN_PREDICATE_TYPE: &str = "https://sigstore.dev/cosign/sign/v1";
/// The in-toto statement types read (v1, which cosign 3 writes, and v0.1).
const STATEMENT_TYPES: &[&str] = &[
    "https://in-toto.io/Statement/v1",
    "https://in-toto.io/Statement/v0.1",
];

/// Whether `media_type` names a sigstore bundle of version 0.3 (either
/// spelling protobuf-specs allows).
pub fn is_bundle_media_type(media_type: &str) -> bool {
    matches!(
        media_type,
        BUNDLE_MEDIA_TYPE | "application/vnd.dev.sigstore.bundle+json;version=0.3"
    )
}

/// One bundle as fetched: the referrer manifest's digest (to name it in
/// messages) and the bundle's bytes (already checked against its layer
/// digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleLayer {
    pub referrer: String,
    pub bundle: Vec<u8>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    media_type: String,
    dsse_envelope: Option<Envelope>,
    message_signature: Option<MessageSignature>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    #[serde(default)]
    signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Deserialize)]
struct EnvelopeSignature {
    sig: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageSignature {
    message_digest: MessageDigest,
    signature: String,
}

#[derive(Debug, Deserialize)]
struct MessageDigest {
    algorithm: String,
    digest: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    #[serde(rename = "_type")]
    type_: String,
    #[serde(default)]
    subject: Vec<Subject>,
    predicate_type: String,
}

#[derive(Debug, Deserialize)]
struct Subject {
    #[serde(default)]
    digest: std::collections::BTreeMap<String, String>,
    annotations: Option<serde_json::Value>,
}

/// What a bundle signs, read before any key is tried.
enum Signed {
    /// A DSSE envelope: the PAE signed, the statement, the signatures.
    Statement {
        pae: Vec<u8>,
        statement: Statement,
        signatures: Vec<Signature>,
    },
    /// A message signature over the manifest's digest.
    Message {
        digest: Vec<u8>,
        signature: Signature,
    },
    /// Signed, but not a signature of an image: an attestation.
    Attestation,
}

/// DSSE's pre-authentication encoding of `payload_type` and `payload`,
/// what a DSSE signature signs.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Read `bytes` as a bundle, or say why it cannot be.
fn read(bytes: &[u8]) -> Result<Signed, String> {
    let bundle: Bundle = serde_json::from_slice(bytes)
        .map_err(|error| format!("it is not a sigstore bundle in JSON: {error}"))?;
    if !is_bundle_media_type(&bundle.media_type) {
        return Err(format!(
            "its mediaType is {:?}, not {BUNDLE_MEDIA_TYPE}",
            bundle.media_type
        ));
    }
    match (bundle.dsse_envelope, bundle.message_signature) {
        (Some(envelope), None) => {
            let payload = STANDARD
                .decode(envelope.payload.trim())
                .map_err(|_| "its DSSE payload is not base64".to_string())?;
            if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE {
                return Err(format!(
                    "its DSSE payload type is {:?}, not an in-toto statement \
                     ({IN_TOTO_PAYLOAD_TYPE})",
                    envelope.payload_type
                ));
            }
            let statement: Statement = serde_json::from_slice(&payload).map_err(|error| {
                format!("its DSSE payload is not an in-toto statement: {error}")
            })?;
            if !STATEMENT_TYPES.contains(&statement.type_.as_str()) {
                return Err(format!(
                    "its statement's _type is {:?}, not an in-toto statement",
                    statement.type_
                ));
            }
            if statement.predicate_type != SIGN_PREDICATE_TYPE {
                return Ok(Signed::Attestation);
            }
            // A signature that is not DER is none (cosign accepts only DER).
            let signatures = envelope
                .signatures
                .iter()
                .filter_map(|s| decode_signature(&s.sig))
                .collect();
            Ok(Signed::Statement {
                pae: pae(&envelope.payload_type, &payload),
                statement,
                signatures,
            })
        }
        (None, Some(message)) => {
            if message.message_digest.algorithm != "SHA2_256" {
                return Err(format!(
                    "its message digest algorithm is {:?}; only SHA2_256 names a manifest digest",
                    message.message_digest.algorithm
                ));
            }
            let digest = STANDARD
                .decode(message.message_digest.digest.trim())
                .map_err(|_| "its message digest is not base64".to_string())?;
            let signature = decode_signature(&message.signature).ok_or_else(|| {
                "its message signature is not a base64 ASN.1 DER ECDSA signature".to_string()
            })?;
            Ok(Signed::Message { digest, signature })
        }
        (Some(_), Some(_)) => {
            Err("it holds both a DSSE envelope and a message signature".to_string())
        }
        (None, None) => Err("it holds neither a DSSE envelope nor a message signature".to_string()),
    }
}

/// Accept `claims.digest` if one of `bundles` is signed by one of `keys`
/// and names that digest with the annotations required; otherwise say why
/// not, as [`super::verify`] does for cosign 2's signatures.
pub fn verify_bundles(
    bundles: &[BundleLayer],
    claims: &Claims<'_>,
    keys: &[PublicKey],
) -> Result<Verified, TrustError> {
    let digest = claims.digest;
    let mut closest = super::Closest::default();
    let mut keep = |refusal: TrustError| closest.offer(rank(&refusal), refusal);
    let mut signatures = 0;
    for layer in bundles {
        let signed = match read(&layer.bundle) {
            Ok(signed) => signed,
            Err(why) => {
                keep(TrustError::SignatureInvalid {
                    detail: format!(
                        "the sigstore bundle {} stored as an OCI referrer of {digest} cannot be \
                         read: {why}",
                        layer.referrer
                    ),
                });
                continue;
            }
        };
        for key in keys {
            let outcome = match &signed {
                Signed::Attestation => break,
                Signed::Statement {
                    pae,
                    statement,
                    signatures,
                } => {
                    if !signatures.iter().any(|s| key.key.verify(pae, s).is_ok()) {
                        continue;
                    }
                    check_statement(statement, claims, &key.describe())
                }
                Signed::Message {
                    digest: signed,
                    signature,
                } => {
                    if key.key.verify_prehash(signed, signature).is_err() {
                        continue;
                    }
                    check_message(signed, claims, &key.describe())
                }
            };
            match outcome {
                Ok(()) => {
                    return Ok(Verified {
                        digest: digest.to_string(),
                        key: key.describe(),
                    });
                }
                Err(refusal) => keep(refusal),
            }
        }
        if !matches!(signed, Signed::Attestation) {
            signatures += 1;
        }
    }
    if let Some(refusal) = closest.above(Some(rank_untrusted())) {
        return Err(refusal);
    }
    if signatures == 0 {
        return Err(TrustError::Unsigned {
            digest: digest.to_string(),
            tag: super::signature_tag(digest),
        });
    }
    Err(TrustError::UnknownKey {
        digest: digest.to_string(),
        found: found(signatures),
        keys: super::describe_keys(keys),
    })
}

/// How `count` bundles are named in a refusal.
fn found(count: usize) -> String {
    format!(
        "{count} sigstore bundle{} (cosign 3) among its OCI referrers",
        if count == 1 { "" } else { "s" }
    )
}

/// The statement of a bundle signed by a trusted key (`key`), checked
/// against `claims`: a subject naming the digest, with the annotations.
fn check_statement(
    statement: &Statement,
    claims: &Claims<'_>,
    key: &str,
) -> Result<(), TrustError> {
    let hex = claims
        .digest
        .strip_prefix("sha256:")
        .unwrap_or(claims.digest);
    let Some(subject) = statement
        .subject
        .iter()
        .find(|s| s.digest.get("sha256").map(String::as_str) == Some(hex))
    else {
        let named: Vec<String> = statement
            .subject
            .iter()
            .filter_map(|s| s.digest.get("sha256").map(|d| format!("sha256:{d}")))
            .collect();
        let signed = match named.is_empty() {
            true => "an in-toto statement that names no sha256 digest".to_string(),
            false => format!("{}, the subject of a sigstore bundle", named.join(", ")),
        };
        return Err(TrustError::OtherDigest {
            digest: claims.digest.to_string(),
            signed,
            key: key.to_string(),
        });
    };
    let missing = claims::missing_annotations(claims.annotations, subject.annotations.as_ref());
    if !missing.is_empty() {
        return Err(TrustError::MissingAnnotations {
            digest: claims.digest.to_string(),
            missing: missing.join(", "),
            key: key.to_string(),
        });
    }
    Ok(())
}

/// A message signature by a trusted key (`key`): the digest it signed must
/// be the manifest's; it carries no annotations.
fn check_message(signed: &[u8], claims: &Claims<'_>, key: &str) -> Result<(), TrustError> {
    let named = format!("sha256:{}", hex::encode(signed));
    if named != claims.digest {
        return Err(TrustError::OtherDigest {
            digest: claims.digest.to_string(),
            signed: format!("{named}, the message digest of a sigstore bundle"),
            key: key.to_string(),
        });
    }
    let missing = claims::missing_annotations(claims.annotations, None);
    if !missing.is_empty() {
        return Err(TrustError::MissingAnnotations {
            digest: claims.digest.to_string(),
            missing: missing.join(", "),
            key: key.to_string(),
        });
    }
    Ok(())
}

/// How close a refusal came to a verified signature: of the refusals of
/// both formats, the closest is reported.
pub fn rank(refusal: &TrustError) -> u8 {
    match refusal {
        TrustError::MissingAnnotations { .. } => 5,
        TrustError::OtherRepository { .. } => 4,
        TrustError::OtherDigest { .. } => 3,
        TrustError::SignatureInvalid { .. } => 2,
        TrustError::UnknownKey { .. } => rank_untrusted(),
        _ => 0,
    }
}

const fn rank_untrusted() -> u8 {
    1
}

/// The outcome of both formats: verified if either verified, else the
/// refusal closest to passing (signatures by unknown keys in both formats
/// counted together).
pub fn either(
    cosign2: Result<Verified, TrustError>,
    cosign3: Result<Verified, TrustError>,
) -> Result<Verified, TrustError> {
    match (cosign2, cosign3) {
        (Ok(verified), _) | (_, Ok(verified)) => Ok(verified),
        (
            Err(TrustError::UnknownKey {
                digest,
                found: two,
                keys,
            }),
            Err(TrustError::UnknownKey { found: three, .. }),
        ) => Err(TrustError::UnknownKey {
            digest,
            found: format!("{two} and {three}"),
            keys,
        }),
        (Err(two), Err(three)) => Err(if rank(&three) > rank(&two) {
            three
        } else {
            two
        }),
    }
}

#[cfg(test)]
#[path = "bundle_tests.rs"]
mod tests;
