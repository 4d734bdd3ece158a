//! Certificate-signed modules: a cosign signature whose layer carries the
//! signer's certificate (`dev.sigstore.cosign/certificate`) and its chain
//! (`dev.sigstore.cosign/chain`), as `cosign sign --key leaf.key
//! --certificate leaf.pem --certificate-chain chain.pem` writes them, checked
//! offline against a platform's own CA, as `cosign verify
//! --certificate-chain`/`--ca-roots` with `--certificate-identity` and
//! `--certificate-oidc-issuer` (and their `-regexp` forms) checks it.
//!
//! For each layer, in cosign's order: the certificate must chain to one of
//! the roots (the chain's and the roots ConfigMap's intermediates used to
//! build the path; every signature on it checked by rustls-webpki on ring),
//! every certificate on the path valid when the leaf was issued (cosign
//! verifies the chain at the leaf's `notBefore`), every one allowing code
//! signing where it restricts its usage, and the leaf naming code signing
//! (EKU 1.3.6.1.5.5.7.3.3) itself; its subject (a SAN) and OIDC issuer
//! (Sigstore's extension) must match one of the identities; the leaf must be
//! valid now (offline there is no signed time, so cosign too checks the
//! current time, and an expired leaf is refused); then the payload's
//! signature is checked with the leaf's key and the payload's claims as with
//! keys ([`super::check_payload`]).

use std::time::{Duration, SystemTime};

use regex::Regex;
use rustls_pki_types::{CertificateDer, TrustAnchor, UnixTime};
use sha2::{Digest, Sha256};
use webpki::{EndEntityCert, ExtendedKeyUsageValidator, KeyPurposeIdIter};
use x509_cert::Certificate;
use x509_cert::der::asn1::Utf8StringRef;
use x509_cert::der::oid::ObjectIdentifier;
use x509_cert::der::{Decode, Encode};
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{ExtendedKeyUsage, SubjectAltName};

use super::{Claims, SignatureLayer, TrustError, Verified, check_payload, signature_tag};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// The layer annotation holding the signer's PEM certificate.
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation holding the PEM chain above it (intermediates, then
/// the root).
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";

/// Extended key usage: code signing.
const CODE_SIGNING: &[usize] = &[1, 3, 6, 1, 5, 5, 7, 3, 3];
/// Extended key usage: any.
const ANY_USAGE: &[usize] = &[2, 5, 29, 37, 0];
/// Sigstore's OIDC issuer extension, a DER UTF8String (Fulcio writes it).
const OIDC_ISSUER: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
/// The deprecated issuer extension: the raw string (Fulcio writes it too,
/// and cosign 2 reads only this one).
const OIDC_ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
const SUBJECT_ALT_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
const EXTENDED_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");

/// The algorithms a certificate on the path may be signed with.
static CHAIN_ALGORITHMS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P256_SHA384,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::ECDSA_P384_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA384,
    webpki::ring::RSA_PKCS1_2048_8192_SHA512,
    webpki::ring::RSA_PSS_2048_8192_SHA256_LEGACY_KEY,
    webpki::ring::RSA_PSS_2048_8192_SHA384_LEGACY_KEY,
    webpki::ring::RSA_PSS_2048_8192_SHA512_LEGACY_KEY,
    webpki::ring::ED25519,
];

/// How cosign signs a payload with a certificate's key: SHA-256 whatever
/// the key (ECDSA ASN.1 DER, RSA PKCS#1 v1.5), or Ed25519.
static PAYLOAD_ALGORITHMS: &[&dyn rustls_pki_types::SignatureVerificationAlgorithm] = &[
    webpki::ring::ECDSA_P256_SHA256,
    webpki::ring::ECDSA_P384_SHA256,
    webpki::ring::RSA_PKCS1_2048_8192_SHA256,
    webpki::ring::ED25519,
];

/// A signature layer with what cosign stores beside a certificate-made
/// signature: the signer's PEM certificate and the PEM chain above it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertifiedLayer {
    pub layer: SignatureLayer,
    pub certificate: Option<String>,
    pub chain: Option<String>,
}

/// The platform's CA: root certificates (self-signed) a signer's chain must
/// end in, and intermediates that may be used to get there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    /// Where they came from (`ConfigMap NS/NAME`, or a file).
    pub name: String,
    roots: Vec<Root>,
    intermediates: Vec<CertificateDer<'static>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Root {
    der: CertificateDer<'static>,
    /// `KEY: subject (sha256:…)`.
    description: String,
}

impl Roots {
    /// The certificates of `files` (name, PEM text with one or more
    /// certificates): each self-signed one is a root, every other an
    /// intermediate. At least one root is needed.
    pub fn from_pem(name: &str, files: &[(String, String)]) -> Result<Self, String> {
        let mut roots = Vec::new();
        let mut intermediates = Vec::new();
        for (file, pem) in files {
            let certificates = Certificate::load_pem_chain(pem.as_bytes())
                .map_err(|error| format!("{file}: not PEM certificates: {error}"))?;
            if certificates.is_empty() {
                return Err(format!("{file}: no -----BEGIN CERTIFICATE----- in it"));
            }
            for certificate in certificates {
                let der = certificate
                    .to_der()
                    .map_err(|error| format!("{file}: {error}"))?;
                let tbs = &certificate.tbs_certificate;
                if tbs.subject == tbs.issuer {
                    let description = format!("{file}: {} ({})", tbs.subject, fingerprint(&der));
                    roots.push(Root {
                        der: CertificateDer::from(der),
                        description,
                    });
                } else {
                    intermediates.push(CertificateDer::from(der));
                }
            }
        }
        if roots.is_empty() {
            return Err(
                "no root certificate (a self-signed CA certificate) among them; \
                 intermediates alone are not trusted"
                    .to_string(),
            );
        }
        for root in &roots {
            webpki::anchor_from_trusted_cert(&root.der)
                .map_err(|error| format!("{}: not usable as a root: {error}", root.description))?;
        }
        Ok(Self {
            name: name.to_string(),
            roots,
            intermediates,
        })
    }

    /// Whether a root `description` (as [`Verified::key`] ends) is still one
    /// of these.
    pub fn has_root(&self, verified_key: &str) -> bool {
        self.roots
            .iter()
            .any(|root| verified_key.ends_with(&format!("root {}", root.description)))
    }
}

/// `sha256:` of a certificate's DER.
fn fingerprint(der: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(der)))
}

/// How one value is matched: exactly, or by a regular expression that, as
/// in cosign (Go's `regexp.MatchString`), matches anywhere unless anchored
/// with `^…$`.
#[derive(Debug, Clone)]
pub enum Matcher {
    Exact(String),
    Regexp(Regex),
}

impl Matcher {
    fn matches(&self, value: &str) -> bool {
        match self {
            Matcher::Exact(exact) => exact == value,
            Matcher::Regexp(regex) => regex.is_match(value),
        }
    }

    /// Exactly one of `exact` (the field or flag `exact_name`) and `regexp`
    /// (`regexp_name`), named in the message.
    pub fn new(
        (exact_name, exact): (&str, Option<&str>),
        (regexp_name, regexp): (&str, Option<&str>),
    ) -> Result<Matcher, String> {
        match (
            exact.filter(|e| !e.is_empty()),
            regexp.filter(|r| !r.is_empty()),
        ) {
            (Some(exact), None) => Ok(Matcher::Exact(exact.to_string())),
            (None, Some(regexp)) => Regex::new(regexp).map(Matcher::Regexp).map_err(|error| {
                format!("{regexp_name} {regexp:?} is not a regular expression: {error}")
            }),
            (Some(_), Some(_)) => Err(format!(
                "{exact_name} and {regexp_name} are both set: give one"
            )),
            (None, None) => Err(format!("one of {exact_name} and {regexp_name} is required")),
        }
    }
}

impl std::fmt::Display for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Matcher::Exact(exact) => write!(f, "{exact:?}"),
            Matcher::Regexp(regex) => write!(f, "/{}/", regex.as_str()),
        }
    }
}

/// Who may have signed: the certificate's subject (a SAN: email, URI, DNS
/// name or IP address) and its OIDC issuer.
#[derive(Debug, Clone)]
pub struct Identity {
    pub subject: Matcher,
    pub issuer: Matcher,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "subject {} issuer {}", self.subject, self.issuer)
    }
}

/// What a certificate-signed module is checked with.
#[derive(Debug, Clone)]
pub struct CertificateTrust {
    pub roots: Roots,
    /// A signer's certificate must match one of them.
    pub identities: Vec<Identity>,
}

/// What the leaf says of its signer.
struct Signer {
    subjects: Vec<String>,
    issuer: String,
    not_before: Duration,
    not_after: Duration,
    code_signing: bool,
}

impl Signer {
    fn describe(&self) -> String {
        format!(
            "certificate [{}] issuer {:?}",
            self.subjects.join(", "),
            self.issuer
        )
    }
}

/// A layer's refusal with how far it got (the furthest is reported).
type Refusal = (u8, TrustError);

/// Accept `claims.digest` if one of `layers` carries a certificate that
/// chains to `trust.roots` and matches one of its identities, and its
/// payload is signed with that certificate's key and claims that digest,
/// repository and annotations; `now` is when the leaf must be valid.
pub fn verify_certificate(
    layers: &[CertifiedLayer],
    claims: &Claims<'_>,
    trust: &CertificateTrust,
    now: SystemTime,
) -> Result<Verified, TrustError> {
    let digest = claims.digest;
    let mut closest = super::Closest::default();
    for layer in layers {
        let Some(certificate) = layer.certificate.as_deref() else {
            continue;
        };
        match verify_layer(layer, certificate, claims, trust, now) {
            Ok(verified) => return Ok(verified),
            Err((rank, refusal)) => closest.offer(rank, refusal),
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
    Err(TrustError::CertificateMissing {
        digest: digest.to_string(),
        count: layers.len(),
    })
}

/// Accept `certified` if its `certificate` chains to `trust.roots`, names
/// code signing and one of `trust.identities`, is valid at `now`, and signs
/// a payload that makes `claims`.
fn verify_layer(
    certified: &CertifiedLayer,
    certificate: &str,
    claims: &Claims<'_>,
    trust: &CertificateTrust,
    now: SystemTime,
) -> Result<Verified, Refusal> {
    let layer = &certified.layer;
    let digest = claims.digest.to_string();
    let invalid = |detail: String| invalid_certificate(&digest, detail);
    let leaf = Certificate::load_pem_chain(certificate.as_bytes())
        .ok()
        .and_then(|mut c| (!c.is_empty()).then(|| c.remove(0)))
        .ok_or_else(|| invalid(format!("{CERTIFICATE_ANNOTATION} is not a PEM certificate")))?;
    let leaf_der = leaf.to_der().map_err(|e| invalid(e.to_string()))?;
    let signer = read_signer(&leaf).map_err(invalid)?;
    let intermediates = intermediates(certified, &trust.roots, &digest)?;
    let who = signer.describe();
    let leaf_der = CertificateDer::from(leaf_der);
    let end_entity = EndEntityCert::try_from(&leaf_der)
        .map_err(|error| invalid(format!("{CERTIFICATE_ANNOTATION}: {error}")))?;
    let anchors: Vec<TrustAnchor<'_>> = trust
        .roots
        .roots
        .iter()
        .filter_map(|root| webpki::anchor_from_trusted_cert(&root.der).ok())
        .collect();
    // As cosign: the path is verified at the leaf's notBefore.
    let issued = UnixTime::since_unix_epoch(signer.not_before);
    let path = end_entity
        .verify_for_usage(
            CHAIN_ALGORITHMS,
            &anchors,
            &intermediates,
            issued,
            CodeSigningIfRestricted,
            None,
            None,
        )
        .map_err(|error| chain_refusal(&digest, &who, &trust.roots.name, error))?;
    let root = root_description(&trust.roots, path.anchor());
    check_signer(&signer, trust, &digest, &who)?;
    check_validity(&signer, &digest, &who, now)?;
    let signature = layer
        .signature
        .as_deref()
        .and_then(|s| STANDARD.decode(s.trim()).ok())
        .unwrap_or_default();
    if !PAYLOAD_ALGORITHMS.iter().any(|alg| {
        end_entity
            .verify_signature(*alg, &layer.payload, &signature)
            .is_ok()
    }) {
        return Err((
            5,
            TrustError::CertificateSignatureMismatch {
                digest,
                certificate: who,
            },
        ));
    }
    let key = format!("{who} under root {root}");
    check_payload(&layer.payload, claims, &key).map_err(|(rank, error)| (6 + rank, error))?;
    Ok(Verified {
        digest: claims.digest.to_string(),
        key,
    })
}

/// The certificate of `digest`'s signature cannot be read, for the reason
/// `detail`.
fn invalid_certificate(digest: &str, detail: String) -> Refusal {
    (
        1,
        TrustError::CertificateInvalid {
            digest: digest.to_string(),
            detail,
        },
    )
}

/// The intermediates a leaf may chain through: those of `roots`, and those
/// of `certified`'s chain annotation but its root (which is trusted only if
/// it is one of `roots`).
fn intermediates(
    certified: &CertifiedLayer,
    roots: &Roots,
    digest: &str,
) -> Result<Vec<CertificateDer<'static>>, Refusal> {
    let invalid = |detail: String| invalid_certificate(digest, detail);
    let mut intermediates = roots.intermediates.clone();
    if let Some(chain) = certified.chain.as_deref() {
        let chain = Certificate::load_pem_chain(chain.as_bytes())
            .map_err(|e| invalid(format!("{CHAIN_ANNOTATION} is not PEM certificates: {e}")))?;
        for certificate in chain {
            let tbs = &certificate.tbs_certificate;
            // The chain's root is trusted only if it is one of the roots.
            if tbs.subject != tbs.issuer {
                let der = certificate.to_der().map_err(|e| invalid(e.to_string()))?;
                intermediates.push(CertificateDer::from(der));
            }
        }
    }
    Ok(intermediates)
}

/// The description of the root of `roots` that is trust anchor `anchor`.
fn root_description(roots: &Roots, anchor: &TrustAnchor<'_>) -> String {
    let anchor_spki = anchor.subject_public_key_info.as_ref().to_vec();
    roots
        .roots
        .iter()
        .find(|root| {
            webpki::anchor_from_trusted_cert(&root.der)
                .is_ok_and(|a| a.subject_public_key_info.as_ref() == anchor_spki.as_slice())
        })
        .map(|root| root.description.clone())
        .unwrap_or_default()
}

/// Whether `signer` (described as `who`) names code signing and one of
/// `trust.identities`.
fn check_signer(
    signer: &Signer,
    trust: &CertificateTrust,
    digest: &str,
    who: &str,
) -> Result<(), Refusal> {
    if !signer.code_signing {
        return Err((
            2,
            TrustError::CertificateUsageMismatch {
                digest: digest.to_string(),
                certificate: who.to_string(),
                detail: "the leaf certificate does not name code signing (extended key usage \
                         1.3.6.1.5.5.7.3.3)"
                    .to_string(),
            },
        ));
    }
    if !trust.identities.iter().any(|identity| {
        identity.issuer.matches(&signer.issuer)
            && signer.subjects.iter().any(|s| identity.subject.matches(s))
    }) {
        let expected = trust
            .identities
            .iter()
            .map(Identity::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err((
            3,
            TrustError::CertificateIdentityMismatch {
                digest: digest.to_string(),
                certificate: who.to_string(),
                expected,
            },
        ));
    }
    Ok(())
}

/// Whether `signer`'s certificate (described as `who`) is valid at `now`.
fn check_validity(
    signer: &Signer,
    digest: &str,
    who: &str,
    now: SystemTime,
) -> Result<(), Refusal> {
    let now = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    if now < signer.not_before || now > signer.not_after {
        return Err((
            4,
            TrustError::CertificateExpired {
                digest: digest.to_string(),
                certificate: who.to_string(),
                detail: format!(
                    "it is valid from {} to {}, not now ({}); offline, without a signed \
                     timestamp, a certificate is checked at the current time, as cosign does",
                    rfc3339(signer.not_before),
                    rfc3339(signer.not_after),
                    rfc3339(now)
                ),
            },
        ));
    }
    Ok(())
}

/// A chain that did not verify: which refusal.
#[allow(deprecated)] // RequiredEkuNotFound: what the validator below returns.
fn chain_refusal(digest: &str, who: &str, roots: &str, error: webpki::Error) -> Refusal {
    let digest = digest.to_string();
    let certificate = who.to_string();
    match error {
        webpki::Error::CertExpired { .. } | webpki::Error::CertNotValidYet { .. } => (
            2,
            TrustError::CertificateExpired {
                digest,
                certificate,
                detail: format!(
                    "a certificate of its chain was not valid when the leaf was issued: {error:?}"
                ),
            },
        ),
        webpki::Error::RequiredEkuNotFound | webpki::Error::RequiredEkuNotFoundContext(_) => (
            2,
            TrustError::CertificateUsageMismatch {
                digest,
                certificate,
                detail: "a certificate of its chain restricts its usage to other purposes than \
                         code signing"
                    .to_string(),
            },
        ),
        other => (
            2,
            TrustError::CertificateUntrusted {
                digest,
                certificate,
                roots: roots.to_string(),
                detail: format!("{other:?}"),
            },
        ),
    }
}

/// Every certificate on the path that restricts its usage (has an EKU
/// extension) must allow code signing (or any usage), as Go's verifier
/// (and so cosign) requires; the leaf is held to naming code signing
/// itself apart.
struct CodeSigningIfRestricted;

impl ExtendedKeyUsageValidator for CodeSigningIfRestricted {
    // The variant with context has fields private to rustls-webpki.
    #[allow(deprecated)]
    fn validate(&self, iter: KeyPurposeIdIter<'_, '_>) -> Result<(), webpki::Error> {
        let mut restricted = false;
        for purpose in iter {
            let oid = purpose?.to_decoded_oid();
            if oid == CODE_SIGNING || oid == ANY_USAGE {
                return Ok(());
            }
            restricted = true;
        }
        match restricted {
            true => Err(webpki::Error::RequiredEkuNotFound),
            false => Ok(()),
        }
    }
}

/// The leaf's subjects (SANs, in cosign's order: DNS names, emails, IP
/// addresses, URIs), OIDC issuer, validity and whether it names code signing.
fn read_signer(leaf: &Certificate) -> Result<Signer, String> {
    let tbs = &leaf.tbs_certificate;
    let mut names: [Vec<String>; 4] = Default::default();
    let mut issuer_v1 = None;
    let mut issuer_v2 = None;
    let mut code_signing = false;
    for extension in tbs.extensions.iter().flatten() {
        let value = extension.extn_value.as_bytes();
        if extension.extn_id == SUBJECT_ALT_NAME {
            let sans = SubjectAltName::from_der(value)
                .map_err(|e| format!("its subject alternative names cannot be read: {e}"))?;
            for name in sans.0 {
                match name {
                    GeneralName::DnsName(dns) => names[0].push(dns.to_string()),
                    GeneralName::Rfc822Name(email) => names[1].push(email.to_string()),
                    GeneralName::IpAddress(ip) => names[2].push(ip_text(ip.as_bytes())),
                    GeneralName::UniformResourceIdentifier(uri) => names[3].push(uri.to_string()),
                    _ => {}
                }
            }
        } else if extension.extn_id == EXTENDED_KEY_USAGE {
            let usage = ExtendedKeyUsage::from_der(value)
                .map_err(|e| format!("its extended key usage cannot be read: {e}"))?;
            code_signing = usage
                .0
                .iter()
                .any(|oid| oid.to_string() == "1.3.6.1.5.5.7.3.3");
        } else if extension.extn_id == OIDC_ISSUER {
            let issuer = Utf8StringRef::from_der(value).map_err(|e| {
                format!("its OIDC issuer (1.3.6.1.4.1.57264.1.8) is not a UTF8String: {e}")
            })?;
            issuer_v2 = Some(issuer.as_str().to_string());
        } else if extension.extn_id == OIDC_ISSUER_V1 {
            issuer_v1 = Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    Ok(Signer {
        subjects: names.concat(),
        issuer: issuer_v2.or(issuer_v1).unwrap_or_default(),
        not_before: tbs.validity.not_before.to_unix_duration(),
        not_after: tbs.validity.not_after.to_unix_duration(),
        code_signing,
    })
}

fn ip_text(bytes: &[u8]) -> String {
    match bytes.len() {
        4 => std::net::Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap_or_default()).to_string(),
        16 => std::net::Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap_or_default()).to_string(),
        _ => hex::encode(bytes),
    }
}

/// A time as RFC 3339, UTC.
fn rfc3339(since_epoch: Duration) -> String {
    chrono::DateTime::from_timestamp(since_epoch.as_secs() as i64, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| format!("{}s after 1970", since_epoch.as_secs()))
}

#[cfg(test)]
#[path = "certificate_tests.rs"]
mod tests;
