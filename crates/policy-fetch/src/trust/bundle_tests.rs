use std::collections::BTreeMap;

use p256::ecdsa::signature::Signer;
use p256::ecdsa::signature::hazmat::PrehashSigner;
use p256::ecdsa::{DerSignature, SigningKey};

use super::*;
use crate::trust::{SignatureLayer, keys, payload, sign, verify};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const OTHER: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
const REPOSITORY: &str = "127.0.0.1:5000/p";

fn key(seed: u8) -> (SigningKey, PublicKey) {
    let signing = SigningKey::from_slice(&[seed; 32]).expect("key");
    let public = PublicKey {
        name: format!("key{seed}"),
        fingerprint: keys::fingerprint(signing.verifying_key()),
        key: *signing.verifying_key(),
    };
    (signing, public)
}

/// The statement `cosign sign` of cosign 3 writes for `digest`.
fn statement(digest: &str, annotations: &[(&str, &str)], predicate_type: &str) -> Vec<u8> {
    let mut subject = serde_json::json!({"digest": {"sha256": &digest[7..]}});
    if !annotations.is_empty() {
        subject["annotations"] = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    serde_json::to_vec(&serde_json::json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [subject],
        "predicateType": predicate_type,
        "predicate": {},
    }))
    .expect("json")
}

/// A bundle of `statement` in a DSSE envelope, its signature `sig`.
fn envelope(statement: &[u8], sig: String) -> BundleLayer {
    let bundle = serde_json::json!({
        "mediaType": BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": "aGludA=="}, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": STANDARD.encode(statement),
            "payloadType": IN_TOTO_PAYLOAD_TYPE,
            "signatures": [{"sig": sig, "keyid": ""}],
        },
    });
    BundleLayer {
        referrer: OTHER.to_string(),
        bundle: serde_json::to_vec(&bundle).expect("json"),
    }
}

fn signed(statement: &[u8], key: &SigningKey) -> BundleLayer {
    let signature: DerSignature = key.sign(&pae(IN_TOTO_PAYLOAD_TYPE, statement));
    envelope(statement, STANDARD.encode(signature.as_bytes()))
}

fn claims<'a>(digest: &'a str, annotations: &'a BTreeMap<String, String>) -> Claims<'a> {
    Claims {
        digest,
        repository: REPOSITORY,
        annotations,
    }
}

static NONE: BTreeMap<String, String> = BTreeMap::new();

#[test]
fn pae_is_dsses() {
    // The example of the DSSE protocol's specification.
    assert_eq!(
        pae("http://example.com/HelloWorld", b"hello world"),
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
    );
}

#[test]
fn a_cosign_3_statement_verifies_with_the_key_that_signed_it() {
    let (signer, signer_pub) = key(1);
    let (_, other_pub) = key(2);
    let bundle = signed(&statement(DIGEST, &[], SIGN_PREDICATE_TYPE), &signer);
    let verified = verify_bundles(&[bundle], &claims(DIGEST, &NONE), &[other_pub, signer_pub])
        .expect("verifies");
    assert_eq!(verified.digest, DIGEST);
    assert!(
        verified.key.starts_with("key1 (sha256:"),
        "{}",
        verified.key
    );
}

#[test]
fn each_bundle_refusal_has_its_reason_and_names_the_format() {
    let (signer, signer_pub) = key(1);
    let (stranger, _) = key(2);
    let keys = std::slice::from_ref(&signer_pub);
    let none = verify_bundles(&[], &claims(DIGEST, &NONE), keys).unwrap_err();
    assert_eq!(none.reason(), "SignatureMissing");
    assert!(none.to_string().contains("OCI referrers"), "{none}");

    let ours = statement(DIGEST, &[], SIGN_PREDICATE_TYPE);
    let foreign =
        verify_bundles(&[signed(&ours, &stranger)], &claims(DIGEST, &NONE), keys).unwrap_err();
    assert_eq!(foreign.reason(), "SignatureUntrusted");
    assert!(
        foreign.to_string().contains("1 sigstore bundle (cosign 3)"),
        "{foreign}"
    );

    let elsewhere = signed(&statement(OTHER, &[], SIGN_PREDICATE_TYPE), &signer);
    let other = verify_bundles(&[elsewhere], &claims(DIGEST, &NONE), keys).unwrap_err();
    assert_eq!(other.reason(), "SignatureDigestMismatch");
    assert!(other.to_string().contains(OTHER), "{other}");
    assert!(other.to_string().contains("sigstore bundle"), "{other}");

    let required = BTreeMap::from([("env".to_string(), "prod".to_string())]);
    let refused =
        verify_bundles(&[signed(&ours, &signer)], &claims(DIGEST, &required), keys).unwrap_err();
    assert_eq!(refused.reason(), "SignatureAnnotationMismatch");
    assert!(refused.to_string().contains("env=prod"), "{refused}");
    let annotated = statement(DIGEST, &[("env", "prod")], SIGN_PREDICATE_TYPE);
    verify_bundles(
        &[signed(&annotated, &signer)],
        &claims(DIGEST, &required),
        keys,
    )
    .expect("the annotation is on the subject");

    // A statement changed after signing verifies with no key.
    let mut tampered = signed(&ours, &signer);
    let text = String::from_utf8(tampered.bundle).expect("utf8");
    let forged = STANDARD.encode(statement(DIGEST, &[("env", "prod")], SIGN_PREDICATE_TYPE));
    tampered.bundle = text.replace(&STANDARD.encode(&ours), &forged).into_bytes();
    let refused = verify_bundles(&[tampered], &claims(DIGEST, &required), keys).unwrap_err();
    assert_eq!(refused.reason(), "SignatureUntrusted");

    let garbage = BundleLayer {
        referrer: OTHER.to_string(),
        bundle: b"{\"mediaType\": 7}".to_vec(),
    };
    let invalid = verify_bundles(&[garbage], &claims(DIGEST, &NONE), keys).unwrap_err();
    assert_eq!(invalid.reason(), "SignatureInvalid");
    assert!(invalid.to_string().contains(OTHER), "{invalid}");
    assert!(invalid.to_string().contains("sigstore bundle"), "{invalid}");
}

#[test]
fn an_attestation_is_not_a_signature() {
    let (signer, signer_pub) = key(1);
    let provenance = statement(DIGEST, &[], "https://slsa.dev/provenance/v1");
    let refused = verify_bundles(
        &[signed(&provenance, &signer)],
        &claims(DIGEST, &NONE),
        &[signer_pub],
    )
    .unwrap_err();
    assert_eq!(refused.reason(), "SignatureMissing", "{refused}");
}

#[test]
fn a_raw_r_s_envelope_signature_is_refused_as_cosign_refuses_it() {
    let (signer, signer_pub) = key(1);
    let ours = statement(DIGEST, &[], SIGN_PREDICATE_TYPE);
    let raw: Signature = signer.sign(&pae(IN_TOTO_PAYLOAD_TYPE, &ours));
    let bundle = envelope(&ours, STANDARD.encode(raw.to_bytes()));
    let refused = verify_bundles(&[bundle], &claims(DIGEST, &NONE), &[signer_pub]).unwrap_err();
    assert_eq!(refused.reason(), "SignatureUntrusted", "{refused}");
}

#[test]
fn a_message_signature_signs_the_manifest_digest() {
    let (signer, signer_pub) = key(1);
    let keys = std::slice::from_ref(&signer_pub);
    let message = |digest: &str| {
        let bytes = hex::decode(&digest[7..]).expect("hex");
        let signature: Signature = signer.sign_prehash(&bytes).expect("sign");
        let bundle = serde_json::json!({
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": ""}},
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": STANDARD.encode(&bytes)},
                "signature": STANDARD.encode(signature.to_der().as_bytes()),
            },
        });
        BundleLayer {
            referrer: OTHER.to_string(),
            bundle: serde_json::to_vec(&bundle).expect("json"),
        }
    };
    verify_bundles(&[message(DIGEST)], &claims(DIGEST, &NONE), keys).expect("verifies");
    let refused = verify_bundles(&[message(OTHER)], &claims(DIGEST, &NONE), keys).unwrap_err();
    assert_eq!(refused.reason(), "SignatureDigestMismatch");
}

#[test]
fn either_format_verifies_and_the_closest_refusal_is_reported() {
    let (signer, signer_pub) = key(1);
    let (stranger, _) = key(2);
    let keys = std::slice::from_ref(&signer_pub);
    let cosign2 = |digest: &str, key: &SigningKey| {
        let payload = payload(REPOSITORY, digest);
        SignatureLayer {
            signature: Some(sign(&payload, key)),
            payload,
        }
    };
    let cosign3 =
        |digest: &str, key: &SigningKey| signed(&statement(digest, &[], SIGN_PREDICATE_TYPE), key);
    let c = claims(DIGEST, &NONE);
    let both = |two: &[SignatureLayer], three: &[BundleLayer]| {
        either(verify(two, &c, keys), verify_bundles(three, &c, keys))
    };
    both(&[], &[cosign3(DIGEST, &signer)]).expect("cosign 3 alone");
    both(&[cosign2(DIGEST, &signer)], &[]).expect("cosign 2 alone");
    both(&[cosign2(DIGEST, &stranger)], &[cosign3(DIGEST, &signer)]).expect("either");

    let none = both(&[], &[]).unwrap_err();
    assert_eq!(none.reason(), "SignatureMissing");
    let untrusted = both(&[cosign2(DIGEST, &stranger)], &[cosign3(DIGEST, &stranger)]).unwrap_err();
    assert_eq!(untrusted.reason(), "SignatureUntrusted");
    let text = untrusted.to_string();
    assert!(
        text.contains(".sig") && text.contains("sigstore bundle"),
        "{text}"
    );
    let other = both(&[cosign2(DIGEST, &stranger)], &[cosign3(OTHER, &signer)]).unwrap_err();
    assert_eq!(other.reason(), "SignatureDigestMismatch");
}
