//! What a signature claims besides the digest, against the real cosign:
//! annotations (`cosign sign -a` required by `radwasm policy verify -a`,
//! `radwasm policy sign -a` required by `cosign verify -a`) and the
//! repository (`critical.identity.docker-reference`): a manifest and its
//! signature copied into another repository by `cosign copy` are refused
//! here, where cosign 2.6's own `verify` accepts them. cosign runs
//! offline, as in `signatures.rs`.

use std::path::Path;

use super::signatures::{Cosign, PASSWORD};
use super::*;

const REGISTRY_FLAGS: [&str; 2] = ["--allow-insecure-registry", "--allow-http-registry"];

fn cosign_sign(cosign: &Cosign, key: &Path, reference: &str, annotations: &[&str]) -> Output {
    let key = path_arg(key);
    let mut args = vec!["sign", "--key", &key, "--tlog-upload=false", "--yes"];
    args.extend(REGISTRY_FLAGS);
    for annotation in annotations {
        args.extend(["-a", annotation]);
    }
    args.push(reference);
    cosign.run(&args)
}

fn cosign_verify(cosign: &Cosign, key: &Path, reference: &str, annotations: &[&str]) -> Output {
    let key = path_arg(key);
    let mut args = vec!["verify", "--key", &key, "--insecure-ignore-tlog=true"];
    args.extend(REGISTRY_FLAGS);
    for annotation in annotations {
        args.extend(["-a", annotation]);
    }
    args.push(reference);
    cosign.run(&args)
}

fn radwasm_policy(
    registry: &Registry,
    command: &str,
    reference: &str,
    key: &Path,
    annotations: &[&str],
) -> Output {
    let key = path_arg(key);
    let mut args = vec![
        "policy",
        command,
        reference,
        "--key",
        &key,
        "--insecure-registry",
        &registry.addr,
    ];
    for annotation in annotations {
        args.extend(["-a", annotation]);
    }
    radwasm_with(&args, &[("COSIGN_PASSWORD", PASSWORD)], None)
}

fn refused(output: &Output, reason: &str) -> String {
    let all = text(output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains(&format!("refused ({reason})")), "{all}");
    all
}

#[tokio::test]
async fn annotations_cosign_signs_are_required_here_and_those_radwasm_signs_by_cosign() {
    let registry = Registry::start();
    let cosign = Cosign::new();
    let (private, public) = cosign.generate_key_pair();

    // cosign sign -a; radwasm policy verify -a requires them.
    let by_cosign = cli_push_default(&registry, "policies/by-cosign:v1");
    let signed = cosign_sign(&cosign, &private, &by_cosign, &["version=1.4", "env=prod"]);
    assert!(signed.status.success(), "cosign sign: {}", text(&signed));
    let output = radwasm_policy(
        &registry,
        "verify",
        &by_cosign,
        &public,
        &["version=1.4", "env=prod"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let all = refused(
        &radwasm_policy(&registry, "verify", &by_cosign, &public, &["version=1.5"]),
        "SignatureAnnotationMismatch",
    );
    assert!(all.contains("version=1.5"), "{all}");
    // Without -a nothing is required, as with cosign.
    let output = radwasm_policy(&registry, "verify", &by_cosign, &public, &[]);
    assert!(output.status.success(), "{}", text(&output));

    // radwasm policy sign -a (repeated, and comma-separated as cosign takes
    // them); cosign verify -a requires them.
    let by_radwasm = cli_push_default(&registry, "policies/by-radwasm:v1");
    let output = radwasm_policy(
        &registry,
        "sign",
        &by_radwasm,
        &private,
        &["version=2.0,env=staging", "team=a"],
    );
    assert!(output.status.success(), "radwasm sign: {}", text(&output));
    let checked = cosign_verify(
        &cosign,
        &public,
        &by_radwasm,
        &["version=2.0", "env=staging", "team=a"],
    );
    assert!(
        checked.status.success(),
        "cosign verify: {}",
        text(&checked)
    );
    let checked = cosign_verify(&cosign, &public, &by_radwasm, &["version=2.1"]);
    assert!(
        !checked.status.success(),
        "cosign refuses another value: {}",
        text(&checked)
    );
    let output = radwasm_policy(&registry, "verify", &by_radwasm, &public, &["env=staging"]);
    assert!(output.status.success(), "{}", text(&output));

    // An annotation that is not key=value is refused before any request.
    let output = radwasm_policy(&registry, "sign", &by_radwasm, &private, &["a=b=c"]);
    assert!(!output.status.success());
    assert!(text(&output).contains("key=value"), "{}", text(&output));
}

#[tokio::test]
async fn a_manifest_and_signature_cosign_copies_to_another_repository_are_refused_here() {
    let registry = Registry::start();
    let cosign = Cosign::new();
    let (private, public) = cosign.generate_key_pair();
    let origin = cli_push_default(&registry, "policies/origin:v1");
    let signed = cosign_sign(&cosign, &private, &origin, &[]);
    assert!(signed.status.success(), "cosign sign: {}", text(&signed));

    // `cosign copy` copies the image and its signatures as they are.
    let mut args = vec!["copy"];
    args.extend(REGISTRY_FLAGS);
    let target = registry.reference("policies/mirror:v1");
    args.extend([origin.as_str(), target.as_str()]);
    let copied = cosign.run(&args);
    assert!(copied.status.success(), "cosign copy: {}", text(&copied));
    let mirror = format!("{}/policies/mirror@{}", registry.addr, digest_of(&origin));

    let all = refused(
        &radwasm_policy(&registry, "verify", &mirror, &public, &[]),
        "SignatureReferenceMismatch",
    );
    assert!(
        all.contains("policies/origin") && all.contains("policies/mirror"),
        "{all}"
    );
    // cosign 2.6 itself does not compare the payload's docker-reference.
    let checked = cosign_verify(&cosign, &public, &mirror, &[]);
    assert!(
        checked.status.success(),
        "cosign verify accepts the copy: {}",
        text(&checked)
    );
    let output = radwasm_policy(&registry, "verify", &origin, &public, &[]);
    assert!(output.status.success(), "{}", text(&output));

    // Signed for the mirror itself, the copy verifies here too.
    let signed = cosign_sign(&cosign, &private, &mirror, &[]);
    assert!(signed.status.success(), "cosign sign: {}", text(&signed));
    let output = radwasm_policy(&registry, "verify", &mirror, &public, &[]);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn annotations_on_a_module_file_are_refused_naming_why() {
    use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let dir = tempfile::tempdir().expect("temp dir");
    let key = p256::ecdsa::SigningKey::from_slice(&[31; 32]).expect("key");
    let private = dir.path().join("k.pem");
    let public = dir.path().join("k.pub");
    std::fs::write(
        &private,
        key.to_pkcs8_pem(LineEnding::LF).expect("pem").as_bytes(),
    )
    .expect("write key");
    let pem = key.verifying_key().to_public_key_pem(LineEnding::LF);
    std::fs::write(&public, pem.expect("pub")).expect("write pub");
    let module = dir.path().join("policy.wasm");
    std::fs::write(&module, DEFAULT_POLICY).expect("write module");
    for (command, key) in [("sign", &private), ("verify", &public)] {
        let output = radwasm(&[
            "policy",
            command,
            &path_arg(&module),
            "--key",
            &path_arg(key),
            "-a",
            "version=1.4",
        ]);
        let all = text(&output);
        assert!(!output.status.success(), "{command}: {all}");
        assert!(
            all.contains("-a/--annotation applies to OCI artifacts"),
            "{command}: {all}"
        );
    }
    assert!(
        !dir.path().join("policy.wasm.sig").exists(),
        "nothing signed"
    );
}
