//! Module files signed as blobs (a ConfigMap module, the `--policy` file)
//! against the real cosign, both ways: what `cosign sign-blob` writes
//! verifies with `radwasm policy verify` and the controller's check
//! (`trust::blob::verify_blob`), and what `radwasm policy sign` writes
//! verifies with `cosign verify-blob`. cosign runs offline, as in
//! `signatures.rs`.

use std::path::Path;

use radwasm::policy::trust::{self, blob};

use super::signatures::{Cosign, PASSWORD};
use super::*;

fn radwasm_sign_file(module: &Path, key: &Path) -> Output {
    radwasm_with(
        &["policy", "sign", &path_arg(module), "--key", &path_arg(key)],
        &[("COSIGN_PASSWORD", PASSWORD)],
        None,
    )
}

fn cosign_verify_blob(cosign: &Cosign, key: &Path, module: &Path, signature: &Path) -> Output {
    cosign.run(&[
        "verify-blob",
        "--key",
        &path_arg(key),
        "--signature",
        &path_arg(signature),
        "--insecure-ignore-tlog=true",
        &path_arg(module),
    ])
}

#[test]
fn cosign_blob_signatures_verify_here_and_radwasm_blob_signatures_verify_with_cosign() {
    let cosign = Cosign::new();
    let (private, public) = cosign.generate_key_pair();
    let dir = tempfile::tempdir().expect("temp dir");
    let module = dir.path().join("policy.wasm");
    let bytes =
        std::fs::read(Path::new(env!("RADWASM_GUEST_DIR")).join("image-tag-guardrail.wasm"))
            .expect("a guest");
    std::fs::write(&module, &bytes).expect("write the module");
    let signature = dir.path().join("policy.wasm.sig");

    // cosign signs the file (no transparency log); radwasm verifies it.
    let signed = cosign.run(&[
        "sign-blob",
        "--key",
        &path_arg(&private),
        "--tlog-upload=false",
        "--output-signature",
        &path_arg(&signature),
        &path_arg(&module),
    ]);
    assert!(
        signed.status.success(),
        "cosign sign-blob: {}",
        text(&signed)
    );
    let written = std::fs::read(&signature).expect("cosign wrote the signature");
    let pem = std::fs::read_to_string(&public).expect("cosign.pub");
    let key = trust::public_key_from_pem("cosign.pub", &pem).expect("cosign's public key");
    let verified = blob::verify_blob(
        "policy.wasm",
        &bytes,
        "policy.wasm.sig",
        Some(&written),
        std::slice::from_ref(&key),
    )
    .expect("cosign's blob signature verifies");
    assert_eq!(verified.digest, sha256(&bytes));
    let out = radwasm(&[
        "policy",
        "verify",
        &path_arg(&module),
        "--key",
        &path_arg(&public),
    ]);
    assert!(
        out.status.success(),
        "radwasm policy verify: {}",
        text(&out)
    );
    assert!(text(&out).contains("verified: "), "{}", text(&out));
    // The same signature over other bytes is refused, by both.
    let mut altered = bytes.clone();
    altered.push(0);
    let refused = blob::verify_blob(
        "policy.wasm",
        &altered,
        "policy.wasm.sig",
        Some(&written),
        &[key],
    )
    .expect_err("other bytes are refused");
    assert_eq!(refused.reason(), "SignatureUntrusted");
    let other = dir.path().join("other.wasm");
    std::fs::write(&other, &altered).expect("write");
    let out = radwasm(&[
        "policy",
        "verify",
        &path_arg(&other),
        "--key",
        &path_arg(&public),
        "--signature",
        &path_arg(&signature),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("refused (SignatureUntrusted)"),
        "{}",
        text(&out)
    );

    // radwasm signs the file with cosign's encrypted key; cosign verifies.
    std::fs::remove_file(&signature).expect("remove cosign's signature");
    let out = radwasm_sign_file(&module, &private);
    assert!(out.status.success(), "radwasm policy sign: {}", text(&out));
    assert!(signature.exists(), "radwasm wrote <file>.sig");
    let out = cosign_verify_blob(&cosign, &public, &module, &signature);
    assert!(out.status.success(), "cosign verify-blob: {}", text(&out));
    let out = cosign_verify_blob(&cosign, &public, &other, &signature);
    assert!(
        !out.status.success(),
        "cosign refuses other bytes: {}",
        text(&out)
    );

    // An unsigned file is refused, naming the signature it looked for.
    let unsigned = dir.path().join("unsigned.wasm");
    std::fs::write(&unsigned, &bytes).expect("write");
    let out = radwasm(&[
        "policy",
        "verify",
        &path_arg(&unsigned),
        "--key",
        &path_arg(&public),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("refused (SignatureMissing)")
            && text(&out).contains("unsigned.wasm.sig"),
        "{}",
        text(&out)
    );
}
