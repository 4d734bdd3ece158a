//! A module signed only by cosign 3 (`cosign sign --key`, the real cosign
//! 3.1 built by `tests/cosign/build.sh 3`: a sigstore bundle stored as an
//! OCI referrer, no `.sig` tag, no transparency log) loads under
//! `spec.verify` with the annotations it was signed with, and decides; the
//! same module under a policy trusting another key is refused
//! (`SignatureUntrusted`, naming the bundle found) and decides nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use radwasm::policy::source::oci;
use serde_json::json;

use crate::policies::{create_policy, delete_policies, guest, labelled, wait_policy};
use crate::trust::variant;
use crate::trust_fixture::{TrustedKeys, signing_key, start_with_registry};
use crate::trust_revocation::refused_and_nothing_decides;

/// cosign 3, built (or reused) by tests/cosign/build.sh, run offline with
/// everything it writes in a temporary HOME.
struct Cosign3 {
    binary: PathBuf,
    home: tempfile::TempDir,
}

impl Cosign3 {
    fn new() -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/cosign/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg("3")
            .output()
            .expect("run tests/cosign/build.sh 3");
        assert!(
            out.status.success(),
            "tests/cosign/build.sh 3 failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        Self {
            binary: PathBuf::from(stdout.lines().last().expect("the cosign path").trim()),
            home: tempfile::tempdir().expect("cosign home"),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let home = self.home.path();
        let output = Command::new(&self.binary)
            .args(args)
            .current_dir(home)
            .env_clear()
            .env("HOME", home)
            .env("PATH", "/usr/bin:/bin")
            .env("TUF_ROOT", home.join("tuf"))
            .env("SIGSTORE_NO_CACHE", "true")
            .env("COSIGN_PASSWORD", "e2e")
            .env("COSIGN_YES", "true")
            .env("DOCKER_CONFIG", home.join("docker"))
            // Nothing leaves loopback: any other address goes to a proxy
            // where nothing listens.
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .output()
            .expect("run cosign");
        assert!(
            output.status.success(),
            "cosign {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_signed_only_by_cosign_3_loads_under_spec_verify() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    // The guardrail fails every template it decides: what it decides is
    // seen, and nothing reaches Radius.
    let module = variant(&guest("image-tag-guardrail"), "cosign3");
    let pushed = oci::push(&registry.reference("policies/three:v1"), &module, &options)
        .await
        .expect("push the module");
    let cosign = Cosign3::new();
    cosign.run(&["generate-key-pair"]);
    cosign.run(&[
        "sign",
        "--key",
        "cosign.key",
        "--tlog-upload=false",
        "--use-signing-config=false",
        "--allow-insecure-registry",
        "--allow-http-registry",
        "--yes",
        "-a",
        "env=prod",
        &pushed.reference,
    ]);
    let public =
        std::fs::read_to_string(cosign.home.path().join("cosign.pub")).expect("cosign.pub");

    let system = start_with_registry(&registry, &["--require-signatures"]).await;
    let trust = TrustedKeys::put(&system, "cosign3", &[("cosign.pub", public)]).await;
    let mut spec = trust.oci_spec(&system, &pushed.reference);
    spec["verify"]["annotations"] = json!({"env": "prod"});
    let policy = create_policy(&system, "cosign3", spec).await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    let verified = loaded
        .status
        .and_then(|s| s.verified)
        .expect("status.verified");
    assert_eq!(verified.reference, pushed.reference);
    assert!(
        verified.key.contains("cosign.pub (sha256:"),
        "{}",
        verified.key
    );
    system
        .create(&labelled("t-cosign3", &[("policy", &trust.select)]))
        .await;
    let failed = system.wait_phase("t-cosign3", "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string()),
        "decided by the module cosign 3 signed"
    );

    // The same module under a policy trusting another key: refused.
    let other = TrustedKeys::cosign_pub(&system, "stranger", &signing_key(31)).await;
    let refused = create_policy(
        &system,
        "stranger",
        other.oci_spec(&system, &pushed.reference),
    )
    .await;
    let message = refused_and_nothing_decides(
        &system,
        &refused,
        "SignatureUntrusted",
        &other.select,
        "t-stranger",
    )
    .await;
    assert!(message.contains("sigstore bundle (cosign 3)"), "{message}");
    delete_policies(&system, &[&policy, &refused]).await;
    system.shutdown().await;
}
