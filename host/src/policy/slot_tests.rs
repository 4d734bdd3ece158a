//! The policy slot's signature gate (`--policy` with
//! `--policy-verify-keys`), on the built-in default policy under other
//! digests.
use std::sync::{Arc, Mutex};

use p256::ecdsa::SigningKey;
use p256::pkcs8::{EncodePublicKey, LineEnding};

use crate::policy::trust::blob::{KeyFiles, sign_blob};
use crate::policy::{FileGate, Limits, PolicySlot, Reload, Source, embedded};

/// The default policy under another digest: a custom section appended.
fn variant(tag: &str) -> Vec<u8> {
    let name = b"radwasm-test";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(tag.as_bytes());
    let mut out = embedded::DEFAULT_POLICY.to_vec();
    out.push(0);
    out.push(u8::try_from(section.len()).expect("a short section"));
    out.extend_from_slice(&section);
    out
}

#[test]
fn a_gated_file_loads_signed_and_an_unsigned_replacement_is_refused_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = SigningKey::from_slice(&[31; 32]).expect("key");
    let keys = dir.path().join("cosign.pub");
    let pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .expect("pem");
    std::fs::write(&keys, pem).expect("write key");
    let path = dir.path().join("policy.wasm");
    let signature = dir.path().join("policy.wasm.sig");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let counted = seen.clone();
    let gate = FileGate {
        keys: KeyFiles(keys),
        observe: Arc::new(move |result| counted.lock().expect("lock").push(result)),
    };
    let engine = crate::policy::engine(Limits {
        concurrent_decisions: 2,
        ..Limits::default()
    })
    .expect("engine");

    let first = variant("one");
    std::fs::write(&path, &first).expect("write");
    let error = PolicySlot::load_gated(
        engine.clone(),
        Source::File(path.clone()),
        Some(gate.clone()),
    )
    .err()
    .expect("unsigned: refused at start");
    assert!(
        error.to_string().contains("policy.wasm.sig beside it"),
        "{error}"
    );

    std::fs::write(&signature, sign_blob(&first, &key)).expect("sign");
    let slot = PolicySlot::load_gated(engine, Source::File(path.clone()), Some(gate))
        .expect("signed: loads");
    let digest = slot.current().digest().to_string();

    // An unsigned replacement (the signature is the old bytes'): refused
    // and counted once, however often the file is looked at.
    std::fs::write(&path, variant("two")).expect("replace");
    let error = slot.reload().expect_err("refused");
    assert!(error.to_string().contains("is refused"), "{error}");
    assert_eq!(slot.reload().expect("said already"), Reload::Unchanged);
    assert_eq!(slot.current().digest(), digest, "the signed one stays");

    // Signed: swapped in.
    std::fs::write(&signature, sign_blob(&variant("two"), &key)).expect("sign");
    assert!(matches!(
        slot.reload().expect("swapped"),
        Reload::Swapped { .. }
    ));
    assert_ne!(slot.current().digest(), digest);
    assert_eq!(
        *seen.lock().expect("lock"),
        [
            "SignatureMissing",
            "Verified",
            "SignatureUntrusted",
            "Verified"
        ]
    );
}
