//! Certificate-signed modules with the real cosign 2.6: a CA, an
//! intermediate and leaves made here (`radwasm_test_support::pki`), a pushed
//! module signed by `cosign sign --key leaf.key --certificate leaf.pem
//! --certificate-chain chain.pem --tlog-upload=false`, and `radwasm policy
//! verify --certificate-roots` and the library agreeing with `cosign verify
//! --certificate-chain --certificate-identity --certificate-oidc-issuer
//! --insecure-ignore-tlog --insecure-ignore-sct` on what is accepted and
//! what is refused (another CA, another identity or issuer, an expired
//! leaf, a leaf without the code-signing usage).

use std::path::PathBuf;
use std::time::SystemTime;

use radwasm::policy::trust::certificate::{
    CertificateTrust, Identity, Matcher, Roots, verify_certificate,
};
use radwasm::policy::trust::{Claims, TrustError};
use radwasm_test_support::pki::{Ca, Leaf, LeafSpec};

use super::signatures::Cosign;
use super::*;

const SUBJECT: &str = "release@platform.example";
const ISSUER: &str = "https://issuer.platform.example";

struct Workdir {
    dir: tempfile::TempDir,
}

impl Workdir {
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    /// `cosign sign` of `reference` with `leaf` (its key imported into
    /// cosign's format first), storing its certificate and, if given, the
    /// chain.
    fn cosign_sign(
        &self,
        cosign: &Cosign,
        name: &str,
        leaf: &Leaf,
        chain: Option<&str>,
        reference: &str,
    ) {
        let key = self.write(&format!("{name}.pkcs8"), &leaf.key);
        let certificate = self.write(&format!("{name}.pem"), &leaf.certificate);
        let prefix = self.dir.path().join(format!("{name}-cosign"));
        let imported = cosign.run(&[
            "import-key-pair",
            "--key",
            &path_arg(&key),
            "--output-key-prefix",
            &path_arg(&prefix),
        ]);
        assert!(
            imported.status.success(),
            "import-key-pair: {}",
            text(&imported)
        );
        let cosign_key = path_arg(&prefix.with_extension("key"));
        let certificate = path_arg(&certificate);
        let mut args = vec![
            "sign",
            "--key",
            &cosign_key,
            "--certificate",
            &certificate,
            "--tlog-upload=false",
            "--allow-insecure-registry",
            "--allow-http-registry",
            "--yes",
        ];
        let chain = chain.map(|c| path_arg(&self.write(&format!("{name}-chain.pem"), c)));
        if let Some(chain) = &chain {
            args.extend(["--certificate-chain", chain]);
        }
        args.push(reference);
        let signed = cosign.run(&args);
        assert!(signed.status.success(), "cosign sign: {}", text(&signed));
    }
}

/// `cosign verify --certificate-chain chain --certificate-identity subject
/// --certificate-oidc-issuer issuer`, offline.
fn cosign_verify(
    cosign: &Cosign,
    chain: &Path,
    subject: &str,
    issuer: &str,
    reference: &str,
) -> Output {
    cosign.run(&[
        "verify",
        "--certificate-chain",
        &path_arg(chain),
        "--certificate-identity",
        subject,
        "--certificate-oidc-issuer",
        issuer,
        "--insecure-ignore-tlog=true",
        "--insecure-ignore-sct=true",
        "--allow-insecure-registry",
        "--allow-http-registry",
        reference,
    ])
}

/// `radwasm policy verify reference --certificate-roots roots...`.
fn radwasm_verify(
    registry: &Registry,
    reference: &str,
    roots: &[&Path],
    subject: &str,
    issuer: &str,
) -> Output {
    let roots: Vec<String> = roots.iter().map(|r| path_arg(r)).collect();
    let mut args = vec![
        "policy",
        "verify",
        reference,
        "--insecure-registry",
        &registry.addr,
    ];
    for root in &roots {
        args.extend(["--certificate-roots", root]);
    }
    args.extend([
        "--certificate-identity",
        subject,
        "--certificate-oidc-issuer",
        issuer,
    ]);
    radwasm(&args)
}

fn refused_with(output: &Output, reason: &str) {
    assert!(!output.status.success(), "accepted: {}", text(output));
    assert!(
        text(output).contains(&format!("refused ({reason})")),
        "not {reason}: {}",
        text(output)
    );
}

#[tokio::test]
async fn a_certificate_signed_module_verifies_here_as_with_cosign_and_each_refusal_agrees() {
    let registry = Registry::start();
    let cosign = Cosign::new();
    let work = Workdir {
        dir: tempfile::tempdir().expect("temp dir"),
    };
    let platform = Ca::new("Platform");
    let ca = work.write("ca.pem", &platform.root_pem());
    let chain = work.write("chain.pem", &platform.chain_pem());
    let intermediate = work.write("intermediate.pem", &platform.intermediate_pem());

    // Signed with a leaf of the platform's CA: accepted by both.
    let pinned = cli_push_default(&registry, "policies/certified:v1");
    let leaf = platform.leaf(&LeafSpec::new(SUBJECT, ISSUER));
    work.cosign_sign(&cosign, "leaf", &leaf, Some(&platform.chain_pem()), &pinned);
    let accepted = cosign_verify(&cosign, &chain, SUBJECT, ISSUER, &pinned);
    assert!(
        accepted.status.success(),
        "cosign verify: {}",
        text(&accepted)
    );
    let verified = radwasm_verify(&registry, &pinned, &[&ca], SUBJECT, ISSUER);
    assert!(
        verified.status.success(),
        "policy verify: {}",
        text(&verified)
    );
    let said = String::from_utf8_lossy(&verified.stdout).to_string();
    assert!(
        said.contains(SUBJECT) && said.contains("Platform Root"),
        "{said}"
    );

    // The library, as the controller calls it.
    let options = registry.options();
    let digest = pinned.rsplit_once('@').expect("digest").1;
    let layers = oci::certified_signatures(&pinned, digest, &options)
        .await
        .expect("signatures");
    assert!(
        layers
            .iter()
            .any(|l| l.certificate.is_some() && l.chain.is_some())
    );
    let trust = CertificateTrust {
        roots: Roots::from_pem("ca.pem", &[("ca.pem".to_string(), platform.root_pem())])
            .expect("roots"),
        identities: vec![Identity {
            subject: Matcher::new(("subject", Some(SUBJECT)), ("subjectRegExp", None))
                .expect("subject"),
            issuer: Matcher::new(
                ("issuer", None),
                ("issuerRegExp", Some("^https://issuer\\.platform\\.")),
            )
            .expect("issuer"),
        }],
    };
    let none = Default::default();
    let claims = Claims {
        digest,
        repository: pinned.rsplit_once('@').expect("repository").0,
        annotations: &none,
    };
    verify_certificate(&layers, &claims, &trust, SystemTime::now()).expect("verified");

    // Who may sign must be said, as cosign verify requires it.
    let ca_arg = path_arg(&ca);
    let unnamed = radwasm(&["policy", "verify", &pinned, "--certificate-roots", &ca_arg]);
    assert!(!unnamed.status.success());
    assert!(
        text(&unnamed).contains("one of --certificate-identity and --certificate-identity-regexp"),
        "{}",
        text(&unnamed)
    );

    // Another identity, another issuer: refused by both.
    let other = "someone@platform.example";
    refused_with(
        &radwasm_verify(&registry, &pinned, &[&ca], other, ISSUER),
        "CertificateIdentityMismatch",
    );
    assert!(
        !cosign_verify(&cosign, &chain, other, ISSUER, &pinned)
            .status
            .success()
    );
    let elsewhere = "https://issuer.elsewhere.example";
    refused_with(
        &radwasm_verify(&registry, &pinned, &[&ca], SUBJECT, elsewhere),
        "CertificateIdentityMismatch",
    );
    assert!(
        !cosign_verify(&cosign, &chain, SUBJECT, elsewhere, &pinned)
            .status
            .success()
    );

    // Signed under another CA: its chain does not reach the platform's root.
    let stranger = Ca::new("Stranger");
    let pinned = cli_push_default(&registry, "policies/stranger:v1");
    let leaf = stranger.leaf(&LeafSpec::new(SUBJECT, ISSUER));
    work.cosign_sign(
        &cosign,
        "stranger",
        &leaf,
        Some(&stranger.chain_pem()),
        &pinned,
    );
    refused_with(
        &radwasm_verify(&registry, &pinned, &[&ca], SUBJECT, ISSUER),
        "CertificateUntrusted",
    );
    assert!(
        !cosign_verify(&cosign, &chain, SUBJECT, ISSUER, &pinned)
            .status
            .success()
    );

    // An expired leaf: offline, checked at the current time by both.
    let pinned = cli_push_default(&registry, "policies/expired:v1");
    let leaf = platform.leaf(&LeafSpec {
        expired: true,
        ..LeafSpec::new(SUBJECT, ISSUER)
    });
    work.cosign_sign(
        &cosign,
        "expired",
        &leaf,
        Some(&platform.chain_pem()),
        &pinned,
    );
    refused_with(
        &radwasm_verify(&registry, &pinned, &[&ca], SUBJECT, ISSUER),
        "CertificateExpired",
    );
    assert!(
        !cosign_verify(&cosign, &chain, SUBJECT, ISSUER, &pinned)
            .status
            .success()
    );

    // A leaf for server authentication only (cosign sign refuses it with a
    // chain, so it is stored without one; the intermediate comes from the
    // roots given).
    let pinned = cli_push_default(&registry, "policies/server:v1");
    let leaf = platform.leaf(&LeafSpec {
        code_signing: false,
        ..LeafSpec::new(SUBJECT, ISSUER)
    });
    work.cosign_sign(&cosign, "server", &leaf, None, &pinned);
    refused_with(
        &radwasm_verify(&registry, &pinned, &[&ca, &intermediate], SUBJECT, ISSUER),
        "CertificateUsageMismatch",
    );
    assert!(
        !cosign_verify(&cosign, &chain, SUBJECT, ISSUER, &pinned)
            .status
            .success()
    );
    let refused: TrustError = verify_certificate(
        &oci::certified_signatures(&pinned, pinned.rsplit_once('@').expect("d").1, &options)
            .await
            .expect("signatures"),
        &Claims {
            digest: pinned.rsplit_once('@').expect("d").1,
            repository: pinned.rsplit_once('@').expect("r").0,
            annotations: &none,
        },
        &trust,
        SystemTime::now(),
    )
    .unwrap_err();
    // The library too; a leaf's usage is refused before any path to a root
    // is looked for (here there is none: no intermediate beside the root).
    assert_eq!(refused.reason(), "CertificateUsageMismatch", "{refused}");
}
