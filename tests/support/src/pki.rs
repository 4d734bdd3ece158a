//! A platform's own PKI for the certificate-signed policy tests: a root CA,
//! an intermediate, and code-signing leaves with a subject (an email SAN)
//! and Sigstore's OIDC issuer extensions (both, as Fulcio writes them), in
//! the PEM files `cosign sign --key --certificate --certificate-chain` and
//! `cosign verify --certificate-chain` read.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, CustomExtension, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

/// A root CA and an intermediate under it.
pub struct Ca {
    root: CertifiedIssuer<'static, KeyPair>,
    intermediate: CertifiedIssuer<'static, KeyPair>,
}

/// What a leaf says: who, for what, until when.
#[derive(Clone, Debug)]
pub struct LeafSpec {
    /// The email SAN.
    pub subject: String,
    /// The OIDC issuer (extensions 1.3.6.1.4.1.57264.1.1 and .1.8).
    pub issuer: String,
    /// With the code-signing extended key usage (else server auth only).
    pub code_signing: bool,
    /// Valid 2021 to 2022 instead of 2024 to 2099.
    pub expired: bool,
}

impl LeafSpec {
    pub fn new(subject: &str, issuer: &str) -> Self {
        Self {
            subject: subject.to_string(),
            issuer: issuer.to_string(),
            code_signing: true,
            expired: false,
        }
    }
}

/// A leaf: its certificate and its PKCS#8 private key, PEM.
pub struct Leaf {
    pub certificate: String,
    pub key: String,
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

/// The DER of a short UTF8String.
fn utf8_string(text: &str) -> Vec<u8> {
    let mut der = vec![0x0c, u8::try_from(text.len()).expect("a short issuer")];
    der.extend_from_slice(text.as_bytes());
    der
}

impl Ca {
    /// A new CA named `name` (its root `NAME Root`, intermediate `NAME
    /// Intermediate`), ECDSA P-256.
    pub fn new(name: &str) -> Self {
        let root = CertifiedIssuer::self_signed(
            ca_params(&format!("{name} Root")),
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key"),
        )
        .expect("root");
        let intermediate = CertifiedIssuer::signed_by(
            ca_params(&format!("{name} Intermediate")),
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key"),
            &root,
        )
        .expect("intermediate");
        Self { root, intermediate }
    }

    /// The root certificate, PEM.
    pub fn root_pem(&self) -> String {
        self.root.pem()
    }

    /// The intermediate certificate, PEM.
    pub fn intermediate_pem(&self) -> String {
        self.intermediate.pem()
    }

    /// The chain above a leaf: the intermediate, then the root (cosign's
    /// `--certificate-chain`).
    pub fn chain_pem(&self) -> String {
        format!("{}{}", self.intermediate.pem(), self.root.pem())
    }

    /// A leaf issued by the intermediate.
    pub fn leaf(&self, spec: &LeafSpec) -> Leaf {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = vec![SanType::Rfc822Name(
            spec.subject.as_str().try_into().expect("an IA5 subject"),
        )];
        params.extended_key_usages = vec![match spec.code_signing {
            true => ExtendedKeyUsagePurpose::CodeSigning,
            false => ExtendedKeyUsagePurpose::ServerAuth,
        }];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let (from, to) = match spec.expired {
            true => (2021, 2022),
            false => (2024, 2099),
        };
        params.not_before = rcgen::date_time_ymd(from, 1, 1);
        params.not_after = rcgen::date_time_ymd(to, 1, 1);
        params.custom_extensions = vec![
            CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 4, 1, 57264, 1, 1],
                spec.issuer.as_bytes().to_vec(),
            ),
            CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 4, 1, 57264, 1, 8],
                utf8_string(&spec.issuer),
            ),
        ];
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let certificate = params.signed_by(&key, &self.intermediate).expect("leaf");
        Leaf {
            certificate: certificate.pem(),
            key: key.serialize_pem(),
        }
    }
}
