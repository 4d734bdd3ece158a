//! Certificate-signed layers against a CA, an intermediate and leaves made
//! here with rcgen: each refusal with its own reason.

use std::collections::BTreeMap;
use std::time::SystemTime;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType, SigningKey,
};

use super::*;
use crate::trust::payload;

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const REPOSITORY: &str = "127.0.0.1:5000/p";
const SUBJECT: &str = "release@platform.example";
const ISSUER: &str = "https://issuer.platform.example";

struct Ca {
    root: CertifiedIssuer<'static, KeyPair>,
    intermediate: CertifiedIssuer<'static, KeyPair>,
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2100, 1, 1);
    params
}

/// An RSA-2048 key (PKCS#8), made once with `openssl genpkey`: ring signs
/// with RSA keys but does not make them. A test fixture, trusted by nothing.
const RSA_KEY: &str = include_str!("testdata/rsa-2048.pem");

fn rsa_key() -> KeyPair {
    KeyPair::from_pem(RSA_KEY).expect("the RSA test key")
}

fn new_ca(name: &str) -> Ca {
    new_ca_with(
        name,
        KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key"),
    )
}

fn new_ca_with(name: &str, root_key: KeyPair) -> Ca {
    let root =
        CertifiedIssuer::self_signed(ca_params(&format!("{name} Root")), root_key).expect("root");
    let intermediate = CertifiedIssuer::signed_by(
        ca_params(&format!("{name} Intermediate")),
        KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).expect("key"),
        &root,
    )
    .expect("intermediate");
    Ca { root, intermediate }
}

/// The DER of a UTF8String (short).
fn utf8_string(text: &str) -> Vec<u8> {
    let mut der = vec![0x0c, text.len() as u8];
    der.extend_from_slice(text.as_bytes());
    der
}

struct Leaf {
    subject: SanType,
    issuer_v1: Option<&'static str>,
    issuer_v2: Option<&'static str>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    years: (i32, i32),
    rsa: bool,
}

impl Default for Leaf {
    fn default() -> Self {
        Self {
            subject: SanType::Rfc822Name(SUBJECT.try_into().expect("ia5")),
            issuer_v1: Some(ISSUER),
            issuer_v2: Some(ISSUER),
            usages: vec![ExtendedKeyUsagePurpose::CodeSigning],
            years: (2024, 2099),
            rsa: false,
        }
    }
}

impl Leaf {
    /// The leaf's PEM and key, issued by `ca`'s intermediate.
    fn issue(self, ca: &Ca) -> (String, KeyPair) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = vec![self.subject];
        params.extended_key_usages = self.usages;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = rcgen::date_time_ymd(self.years.0, 1, 1);
        params.not_after = rcgen::date_time_ymd(self.years.1, 1, 1);
        if let Some(issuer) = self.issuer_v1 {
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(
                    &[1, 3, 6, 1, 4, 1, 57264, 1, 1],
                    issuer.as_bytes().to_vec(),
                ));
        }
        if let Some(issuer) = self.issuer_v2 {
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(
                    &[1, 3, 6, 1, 4, 1, 57264, 1, 8],
                    utf8_string(issuer),
                ));
        }
        let key = match self.rsa {
            true => rsa_key(),
            false => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key"),
        };
        let certificate = params.signed_by(&key, &ca.intermediate).expect("leaf");
        (certificate.pem(), key)
    }
}

/// A layer of `payload` signed by `key`, with `certificate` and `chain`.
fn layer(
    payload: Vec<u8>,
    key: &KeyPair,
    certificate: &str,
    chain: Option<String>,
) -> CertifiedLayer {
    let signature = key.sign(&payload).expect("sign");
    CertifiedLayer {
        layer: SignatureLayer {
            payload,
            signature: Some(STANDARD.encode(signature)),
        },
        certificate: Some(certificate.to_string()),
        chain,
    }
}

fn chain(ca: &Ca) -> String {
    format!("{}{}", ca.intermediate.pem(), ca.root.pem())
}

fn trust_in(ca: &Ca, subject: Matcher, issuer: Matcher) -> CertificateTrust {
    CertificateTrust {
        roots: Roots::from_pem(
            "ConfigMap radwasm-system/platform-ca",
            &[("ca.pem".to_string(), ca.root.pem())],
        )
        .expect("roots"),
        identities: vec![Identity { subject, issuer }],
    }
}

fn exact(text: &str) -> Matcher {
    Matcher::Exact(text.to_string())
}

fn check(layers: &[CertifiedLayer], trust: &CertificateTrust) -> Result<Verified, TrustError> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    let claims = Claims {
        digest: DIGEST,
        repository: REPOSITORY,
        annotations: &NONE,
    };
    verify_certificate(layers, &claims, trust, SystemTime::now())
}

fn signed(ca: &Ca, leaf: Leaf) -> CertifiedLayer {
    let (certificate, key) = leaf.issue(ca);
    layer(
        payload(REPOSITORY, DIGEST),
        &key,
        &certificate,
        Some(chain(ca)),
    )
}

#[test]
fn a_leaf_chaining_to_a_root_with_a_matching_identity_verifies() {
    let ca = new_ca("Platform");
    let trust = trust_in(&ca, exact(SUBJECT), exact(ISSUER));
    let verified = check(&[signed(&ca, Leaf::default())], &trust).expect("verified");
    assert_eq!(verified.digest, DIGEST);
    assert!(verified.key.contains(SUBJECT), "{}", verified.key);
    assert!(trust.roots.has_root(&verified.key), "{}", verified.key);
    // The intermediate given beside the roots instead of in the layer.
    let (certificate, key) = Leaf::default().issue(&ca);
    let bare = layer(payload(REPOSITORY, DIGEST), &key, &certificate, None);
    assert_eq!(
        check(std::slice::from_ref(&bare), &trust)
            .unwrap_err()
            .reason(),
        "CertificateUntrusted"
    );
    let beside = CertificateTrust {
        roots: Roots::from_pem(
            "ConfigMap radwasm-system/platform-ca",
            &[
                ("ca.pem".to_string(), ca.root.pem()),
                ("intermediate.pem".to_string(), ca.intermediate.pem()),
            ],
        )
        .expect("roots"),
        identities: trust.identities.clone(),
    };
    check(&[bare], &beside).expect("verified with the intermediate beside the roots");
    // Regular expressions, unanchored as cosign's.
    let regexp = |r: &str| Matcher::Regexp(Regex::new(r).expect("regex"));
    let loose = trust_in(&ca, regexp("@platform\\.example$"), regexp("platform"));
    check(&[signed(&ca, Leaf::default())], &loose).expect("regexp identity");
}

#[test]
fn each_certificate_refusal_has_its_own_reason() {
    let ca = new_ca("Platform");
    let stranger = new_ca("Stranger");
    let trust = trust_in(&ca, exact(SUBJECT), exact(ISSUER));
    let reason = |layer: CertifiedLayer| check(&[layer], &trust).unwrap_err();

    let other_ca = reason(signed(&stranger, Leaf::default()));
    assert_eq!(other_ca.reason(), "CertificateUntrusted", "{other_ca}");
    assert!(other_ca.to_string().contains("platform-ca"), "{other_ca}");

    let wrong_subject = reason(signed(
        &ca,
        Leaf {
            subject: SanType::URI("https://ci.example/other".try_into().expect("ia5")),
            ..Leaf::default()
        },
    ));
    assert_eq!(wrong_subject.reason(), "CertificateIdentityMismatch");
    assert!(
        wrong_subject
            .to_string()
            .contains("https://ci.example/other"),
        "{wrong_subject}"
    );

    let wrong_issuer = reason(signed(
        &ca,
        Leaf {
            issuer_v1: Some("https://other.example"),
            issuer_v2: Some("https://other.example"),
            ..Leaf::default()
        },
    ));
    assert_eq!(wrong_issuer.reason(), "CertificateIdentityMismatch");

    let expired = reason(signed(
        &ca,
        Leaf {
            years: (2021, 2022),
            ..Leaf::default()
        },
    ));
    assert_eq!(expired.reason(), "CertificateExpired", "{expired}");
    assert!(expired.to_string().contains("current time"), "{expired}");

    let server = reason(signed(
        &ca,
        Leaf {
            usages: vec![ExtendedKeyUsagePurpose::ServerAuth],
            ..Leaf::default()
        },
    ));
    assert_eq!(server.reason(), "CertificateUsageMismatch", "{server}");
    let unrestricted = reason(signed(
        &ca,
        Leaf {
            usages: Vec::new(),
            ..Leaf::default()
        },
    ));
    assert_eq!(
        unrestricted.reason(),
        "CertificateUsageMismatch",
        "{unrestricted}"
    );

    assert_refused_for_trust(&[other_ca, wrong_subject, expired, server]);
}

#[test]
fn each_signature_refusal_has_its_own_reason() {
    let ca = new_ca("Platform");
    let trust = trust_in(&ca, exact(SUBJECT), exact(ISSUER));
    let reason = |layer: CertifiedLayer| check(&[layer], &trust).unwrap_err();

    // A certificate that verifies, over a payload signed by another key.
    let (certificate, _) = Leaf::default().issue(&ca);
    let (_, other_key) = Leaf::default().issue(&ca);
    let forged = reason(layer(
        payload(REPOSITORY, DIGEST),
        &other_key,
        &certificate,
        Some(chain(&ca)),
    ));
    assert_eq!(forged.reason(), "SignatureUntrusted", "{forged}");

    // The payload's claims, as with keys.
    let (certificate, key) = Leaf::default().issue(&ca);
    let other_digest = reason(layer(
        payload(REPOSITORY, OTHER),
        &key,
        &certificate,
        Some(chain(&ca)),
    ));
    assert_eq!(other_digest.reason(), "SignatureDigestMismatch");

    // Signed with a bare key: no certificate to check.
    let mut bare = signed(&ca, Leaf::default());
    bare.certificate = None;
    assert_eq!(reason(bare).reason(), "CertificateMissing");
    assert_eq!(check(&[], &trust).unwrap_err().reason(), "SignatureMissing");

    let mut garbage = signed(&ca, Leaf::default());
    garbage.certificate = Some("not a certificate".to_string());
    assert_eq!(reason(garbage).reason(), "CertificateInvalid");

    assert_refused_for_trust(&[forged]);
}

/// Each of `refusals` is a refusal for trust: Ready=False, an Event, the
/// metric.
fn assert_refused_for_trust(refusals: &[TrustError]) {
    for refusal in refusals {
        assert!(
            crate::trust::TRUST_REASONS.contains(&refusal.reason()),
            "{}",
            refusal.reason()
        );
    }
}

#[test]
fn the_issuer_is_read_from_either_extension() {
    let ca = new_ca("Platform");
    let trust = trust_in(&ca, exact(SUBJECT), exact(ISSUER));
    for (v1, v2) in [(Some(ISSUER), None), (None, Some(ISSUER))] {
        let leaf = Leaf {
            issuer_v1: v1,
            issuer_v2: v2,
            ..Leaf::default()
        };
        check(&[signed(&ca, leaf)], &trust).expect("issuer read");
    }
    // The current extension wins over the deprecated one.
    let both = Leaf {
        issuer_v1: Some("https://old.example"),
        issuer_v2: Some(ISSUER),
        ..Leaf::default()
    };
    check(&[signed(&ca, both)], &trust).expect("v2 read first");
}

#[test]
fn roots_and_matchers_refuse_what_they_cannot_use() {
    let ca = new_ca("Platform");
    let only_intermediate = Roots::from_pem(
        "ConfigMap ns/ca",
        &[("i.pem".to_string(), ca.intermediate.pem())],
    )
    .unwrap_err();
    assert!(
        only_intermediate.contains("no root certificate"),
        "{only_intermediate}"
    );
    let garbage = Roots::from_pem(
        "ConfigMap ns/ca",
        &[("ca.pem".to_string(), "x".to_string())],
    )
    .unwrap_err();
    assert!(garbage.starts_with("ca.pem:"), "{garbage}");
    let both = Matcher::new(("subject", Some("a")), ("subjectRegExp", Some("b"))).unwrap_err();
    assert!(
        both.contains("subject and subjectRegExp are both set"),
        "{both}"
    );
    assert!(Matcher::new(("subject", None), ("subjectRegExp", None)).is_err());
    let bad = Matcher::new(("issuer", None), ("issuerRegExp", Some("("))).unwrap_err();
    assert!(bad.contains("issuerRegExp \"(\""), "{bad}");
}

#[test]
fn rsa_signs_the_chain_and_the_payload_as_ecdsa_does() {
    // An RSA root over a P-384 intermediate, and an RSA leaf (PKCS#1 v1.5
    // SHA-256, as cosign signs with an RSA certificate's key).
    let ca = new_ca_with("Platform", rsa_key());
    let trust = trust_in(&ca, exact(SUBJECT), exact(ISSUER));
    check(&[signed(&ca, Leaf::default())], &trust).expect("an RSA root");
    let rsa_leaf = Leaf {
        rsa: true,
        ..Leaf::default()
    };
    check(&[signed(&ca, rsa_leaf)], &trust).expect("an RSA leaf");
    // A payload changed after an RSA signature is refused.
    let (certificate, key) = Leaf {
        rsa: true,
        ..Leaf::default()
    }
    .issue(&ca);
    let mut tampered = layer(
        payload(REPOSITORY, DIGEST),
        &key,
        &certificate,
        Some(chain(&ca)),
    );
    tampered.layer.payload = payload("127.0.0.1:5000/q", DIGEST);
    let refused = check(&[tampered], &trust).unwrap_err();
    assert_eq!(refused.reason(), "SignatureUntrusted", "{refused}");
}
