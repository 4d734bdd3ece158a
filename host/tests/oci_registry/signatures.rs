//! `radwasm policy sign|verify` against the real cosign (built from its Go
//! module by tests/cosign/build.sh), both ways: what `cosign sign --key`
//! writes verifies here, and what `radwasm policy sign` writes verifies with
//! `cosign verify --key`. cosign runs fully offline: no transparency log
//! (`--tlog-upload=false`, `--insecure-ignore-tlog`), no Fulcio, the
//! loopback registry over plain HTTP, HOME and its caches in a temp dir.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use p256::ecdsa::SigningKey;
use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};

use super::*;

pub(super) const PASSWORD: &str = "correct horse battery staple";

/// The path of `cosign` of major version `major` (2 or 3), built (or
/// reused) by tests/cosign/build.sh.
fn cosign_binary(major: u8) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cosign/build.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(major.to_string())
        .output()
        .expect("run tests/cosign/build.sh");
    assert!(
        out.status.success(),
        "tests/cosign/build.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("the cosign path").trim())
}

/// cosign with everything it writes in `home`, offline: whatever it asks
/// outside loopback (Sigstore's TUF repository, which `verify-blob` asks
/// for even with `--insecure-ignore-tlog`) goes to a proxy address on
/// loopback where nothing listens, and fails there.
pub(super) struct Cosign {
    binary: PathBuf,
    home: tempfile::TempDir,
}

impl Cosign {
    /// cosign 2.
    pub(super) fn new() -> Self {
        Self::major(2)
    }

    /// cosign `major` (2 or 3).
    pub(super) fn major(major: u8) -> Self {
        Self {
            binary: cosign_binary(major),
            home: tempfile::tempdir().expect("cosign home"),
        }
    }

    pub(super) fn run(&self, args: &[&str]) -> Output {
        let home = self.home.path();
        Command::new(&self.binary)
            .args(args)
            .current_dir(home)
            .env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/bin:/bin")
            .env("TUF_ROOT", home.join("tuf"))
            .env("SIGSTORE_NO_CACHE", "true")
            .env("COSIGN_PASSWORD", PASSWORD)
            .env("COSIGN_YES", "true")
            .env("COSIGN_EXPERIMENTAL", "0")
            .env("DOCKER_CONFIG", home.join("docker"))
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .output()
            .expect("run cosign")
    }

    /// `cosign generate-key-pair`: `cosign.key` (encrypted) and `cosign.pub`.
    pub(super) fn generate_key_pair(&self) -> (PathBuf, PathBuf) {
        let output = self.run(&["generate-key-pair"]);
        assert!(
            output.status.success(),
            "generate-key-pair: {}",
            text(&output)
        );
        (
            self.home.path().join("cosign.key"),
            self.home.path().join("cosign.pub"),
        )
    }

    pub(super) fn sign(&self, key: &Path, reference: &str) -> Output {
        self.run(&[
            "sign",
            "--key",
            &path_arg(key),
            "--tlog-upload=false",
            "--allow-insecure-registry",
            "--allow-http-registry",
            "--yes",
            reference,
        ])
    }

    pub(super) fn verify(&self, key: &Path, reference: &str) -> Output {
        self.run(&[
            "verify",
            "--key",
            &path_arg(key),
            "--insecure-ignore-tlog=true",
            "--allow-insecure-registry",
            "--allow-http-registry",
            reference,
        ])
    }
}

pub(super) fn radwasm_verify(registry: &Registry, reference: &str, keys: &[&Path]) -> Output {
    let mut args = vec![
        "policy",
        "verify",
        reference,
        "--insecure-registry",
        &registry.addr,
    ];
    let keys: Vec<String> = keys.iter().map(|k| path_arg(k)).collect();
    for key in &keys {
        args.extend(["--key", key]);
    }
    radwasm(&args)
}

pub(super) fn radwasm_sign(registry: &Registry, reference: &str, key: &Path) -> Output {
    radwasm_with(
        &[
            "policy",
            "sign",
            reference,
            "--key",
            &path_arg(key),
            "--insecure-registry",
            &registry.addr,
        ],
        &[("COSIGN_PASSWORD", PASSWORD)],
        None,
    )
}

/// A plain PKCS#8 P-256 key pair written to `dir` as `NAME.pem` and `NAME.pub`.
pub(super) fn pkcs8_key_pair(dir: &Path, name: &str, seed: u8) -> (PathBuf, PathBuf) {
    let key = SigningKey::from_slice(&[seed; 32]).expect("key");
    let private = dir.join(format!("{name}.pem"));
    let public = dir.join(format!("{name}.pub"));
    std::fs::write(
        &private,
        key.to_pkcs8_pem(LineEnding::LF).expect("pem").as_bytes(),
    )
    .expect("write key");
    std::fs::write(
        &public,
        key.verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .expect("pub"),
    )
    .expect("write pub");
    (private, public)
}

/// The default policy with a custom section: the same policy, another digest.
pub(super) fn another_component(dir: &Path, tag: &str) -> PathBuf {
    let name = b"radwasm-test";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(tag.as_bytes());
    let mut bytes = DEFAULT_POLICY.to_vec();
    bytes.push(0);
    bytes.push(u8::try_from(section.len()).expect("short section"));
    bytes.extend_from_slice(&section);
    let path = dir.join(format!("{tag}.wasm"));
    std::fs::write(&path, bytes).expect("write component");
    path
}

pub(super) fn push_file(registry: &Registry, file: &Path, repository_and_tag: &str) -> String {
    let output = radwasm(&[
        "policy",
        "push",
        &path_arg(file),
        &registry.reference(repository_and_tag),
        "--insecure-registry",
        &registry.addr,
    ]);
    assert!(output.status.success(), "push: {}", text(&output));
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[tokio::test]
async fn cosign_signatures_verify_here_and_radwasm_signatures_verify_with_cosign() {
    let registry = Registry::start();
    let cosign = Cosign::new();
    let work = tempfile::tempdir().expect("temp dir");
    let (cosign_key, cosign_pub) = cosign.generate_key_pair();

    // cosign signs the digest behind a tag; radwasm verifies it offline.
    let pinned = cli_push_default(&registry, "policies/default:v1");
    let signed = cosign.sign(&cosign_key, &pinned);
    assert!(signed.status.success(), "cosign sign: {}", text(&signed));
    let output = radwasm_verify(
        &registry,
        &registry.reference("policies/default:v1"),
        &[&cosign_pub],
    );
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains(&format!("verified: {pinned}")), "{all}");
    assert!(all.contains("cosign.pub (sha256:"), "{all}");

    // radwasm signs with cosign's own encrypted key; cosign verifies it.
    let other = push_file(
        &registry,
        &another_component(work.path(), "two"),
        "policies/two:v1",
    );
    let output = radwasm_sign(
        &registry,
        &registry.reference("policies/two:v1"),
        &cosign_key,
    );
    assert!(output.status.success(), "radwasm sign: {}", text(&output));
    let checked = cosign.verify(&cosign_pub, &other);
    assert!(
        checked.status.success(),
        "cosign verify: {}",
        text(&checked)
    );
    let verified = radwasm_verify(&registry, &other, &[&cosign_pub]);
    assert!(verified.status.success(), "{}", text(&verified));

    // And with a plain PKCS#8 key, appended beside cosign's signature.
    let (plain_key, plain_pub) = pkcs8_key_pair(work.path(), "plain", 7);
    let output = radwasm_sign(&registry, &other, &plain_key);
    assert!(output.status.success(), "radwasm sign: {}", text(&output));
    let checked = cosign.verify(&plain_pub, &other);
    assert!(
        checked.status.success(),
        "cosign verify: {}",
        text(&checked)
    );
    let checked = cosign.verify(&cosign_pub, &other);
    assert!(
        checked.status.success(),
        "the first signature stays: {}",
        text(&checked)
    );

    // cosign refuses a key that did not sign, as radwasm does.
    let (_, stranger_pub) = pkcs8_key_pair(work.path(), "stranger", 9);
    assert!(!cosign.verify(&stranger_pub, &pinned).status.success());
    assert!(
        !radwasm_verify(&registry, &pinned, &[&stranger_pub])
            .status
            .success()
    );
}

#[tokio::test]
async fn every_refusal_exits_non_zero_naming_its_reason() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("temp dir");
    let (key, public) = pkcs8_key_pair(work.path(), "trusted", 3);
    let (stranger, _) = pkcs8_key_pair(work.path(), "stranger", 4);
    let refused = |output: &Output, reason: &str| {
        let all = text(output);
        assert_eq!(output.status.code(), Some(2), "{all}");
        assert!(
            all.contains(&format!("refused ({reason})")),
            "{reason}: {all}"
        );
        all
    };

    // Unsigned.
    let unsigned = push_file(
        &registry,
        &another_component(work.path(), "unsigned"),
        "policies/unsigned:v1",
    );
    let all = refused(
        &radwasm_verify(&registry, &unsigned, &[&public]),
        "SignatureMissing",
    );
    assert!(all.contains(".sig"), "{all}");

    // Signed by a key that is not trusted.
    let foreign = push_file(
        &registry,
        &another_component(work.path(), "foreign"),
        "policies/foreign:v1",
    );
    assert!(
        radwasm_sign(&registry, &foreign, &stranger)
            .status
            .success()
    );
    refused(
        &radwasm_verify(&registry, &foreign, &[&public]),
        "SignatureUntrusted",
    );

    // A trusted signature of one digest stored under another's tag.
    let first = push_file(
        &registry,
        &another_component(work.path(), "first"),
        "policies/pair:first",
    );
    let second = push_file(
        &registry,
        &another_component(work.path(), "second"),
        "policies/pair:second",
    );
    assert!(radwasm_sign(&registry, &first, &key).status.success());
    let sig_tag = |pinned: &str| format!("{}.sig", digest_of(pinned).replacen(':', "-", 1));
    let (manifest, _) = raw_manifest(&registry, "policies/pair", &sig_tag(&first)).await;
    let url = format!(
        "http://{}/v2/policies/pair/manifests/{}",
        registry.addr,
        sig_tag(&second)
    );
    let put = reqwest::Client::new()
        .put(&url)
        .header("Content-Type", OCI_MANIFEST)
        .body(manifest)
        .send()
        .await
        .expect("PUT manifest");
    assert!(put.status().is_success(), "{url}: {}", put.status());
    let all = refused(
        &radwasm_verify(&registry, &second, &[&public]),
        "SignatureDigestMismatch",
    );
    assert!(all.contains(&digest_of(&first)), "{all}");

    // Tampered content: the signed digest's layer altered in the registry.
    let (tampered_file, bytes) = {
        let path = another_component(work.path(), "tampered");
        let bytes = std::fs::read(&path).expect("component");
        (path, bytes)
    };
    let tampered = push_file(&registry, &tampered_file, "policies/tampered:v1");
    assert!(radwasm_sign(&registry, &tampered, &key).status.success());
    assert!(
        radwasm_verify(&registry, &tampered, &[&public])
            .status
            .success()
    );
    let stored = registry.blob_path(&sha256(&bytes));
    let mut altered = std::fs::read(&stored).expect("stored layer");
    let middle = altered.len() / 2;
    altered[middle] ^= 0xff;
    std::fs::write(&stored, &altered).expect("alter layer");
    refused(
        &radwasm_verify(&registry, &tampered, &[&public]),
        "DigestMismatch",
    );

    // A key file that is not a key.
    let garbage = work.path().join("garbage.pub");
    std::fs::write(&garbage, "not a key").expect("write");
    let output = radwasm_verify(&registry, &unsigned, &[&garbage]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains("garbage.pub: not a PEM ECDSA P-256 public key"),
        "{all}"
    );
}
