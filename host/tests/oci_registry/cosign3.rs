//! cosign 3's signatures (a sigstore bundle stored as an OCI referrer of the
//! signed manifest) against the real cosign 3 (built from its Go module by
//! `tests/cosign/build.sh 3`), beside cosign 2's: what `cosign sign --key`
//! of cosign 3 writes verifies with `radwasm policy verify` and the library,
//! and is refused for the wrong key, for another digest and without the
//! annotations required. cosign runs fully offline (no transparency log, no
//! signing config from Sigstore's TUF repository, the loopback registry over
//! plain HTTP); CNCF distribution 2.8 has no referrers API, so cosign stores
//! the referrers index at the tag `sha256-<hex>`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use radwasm::policy::source::signatures_verify;
use radwasm::policy::trust::{self, Claims, bundle};

use super::signatures::{
    Cosign, another_component, pkcs8_key_pair, push_file, radwasm_sign, radwasm_verify,
};
use super::*;

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// `cosign sign --key` of cosign 3, offline, with `-a` annotations.
fn sign3(cosign: &Cosign, key: &Path, reference: &str, annotations: &[&str]) -> Output {
    let key = path_arg(key);
    let mut args = vec![
        "sign",
        "--key",
        &key,
        "--tlog-upload=false",
        "--use-signing-config=false",
        "--allow-insecure-registry",
        "--allow-http-registry",
        "--yes",
    ];
    for annotation in annotations {
        args.extend(["-a", annotation]);
    }
    args.push(reference);
    cosign.run(&args)
}

/// `cosign verify --key` of cosign 3, offline.
fn verify3(cosign: &Cosign, key: &Path, reference: &str) -> Output {
    cosign.run(&[
        "verify",
        "--key",
        &path_arg(key),
        "--insecure-ignore-tlog=true",
        "--allow-insecure-registry",
        "--allow-http-registry",
        reference,
    ])
}

fn referrers_tag(pinned: &str) -> String {
    digest_of(pinned).replacen(':', "-", 1)
}

/// The referrers index cosign wrote at the referrers tag of `pinned`.
async fn referrers_index(registry: &Registry, repository: &str, pinned: &str) -> serde_json::Value {
    let url = format!(
        "http://{}/v2/{repository}/manifests/{}",
        registry.addr,
        referrers_tag(pinned)
    );
    let response = reqwest::Client::new()
        .get(&url)
        .header("Accept", OCI_INDEX)
        .send()
        .await
        .expect("GET index");
    assert_eq!(response.status(), 200, "{url}");
    serde_json::from_slice(&response.bytes().await.expect("body")).expect("index JSON")
}

async fn put_index(registry: &Registry, repository: &str, tag: &str, index: &serde_json::Value) {
    let url = format!("http://{}/v2/{repository}/manifests/{tag}", registry.addr);
    let put = reqwest::Client::new()
        .put(&url)
        .header("Content-Type", OCI_INDEX)
        .body(serde_json::to_vec(index).expect("json"))
        .send()
        .await
        .expect("PUT index");
    assert!(put.status().is_success(), "{url}: {}", put.status());
}

fn refused(output: &Output, reason: &str) -> String {
    let all = text(output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains(&format!("refused ({reason})")),
        "{reason}: {all}"
    );
    all
}

#[tokio::test]
async fn cosign_3_bundles_verify_and_are_refused_for_the_wrong_key_or_digest() {
    let registry = Registry::start();
    let cosign = Cosign::major(3);
    let work = tempfile::tempdir().expect("temp dir");
    let (key, public) = cosign.generate_key_pair();
    let pinned = cli_push_default(&registry, "policies/three:v1");
    let signed = sign3(&cosign, &key, &pinned, &["env=prod"]);
    assert!(signed.status.success(), "cosign sign: {}", text(&signed));

    // What cosign 3 wrote: no `.sig` tag, a referrer whose one layer is a
    // sigstore bundle holding a DSSE envelope.
    let sig_tag = format!("{}.sig", referrers_tag(&pinned));
    let url = format!(
        "http://{}/v2/policies/three/manifests/{sig_tag}",
        registry.addr
    );
    let status = reqwest::get(&url).await.expect("GET .sig").status();
    assert_eq!(status, 404, "cosign 3 wrote a cosign 2 signature");
    let index = referrers_index(&registry, "policies/three", &pinned).await;
    let listed = index["manifests"].as_array().expect("manifests");
    assert_eq!(listed.len(), 1, "{index}");
    assert_eq!(listed[0]["artifactType"], bundle::BUNDLE_MEDIA_TYPE);

    // radwasm verifies it, and cosign 3 itself does.
    let output = radwasm_verify(&registry, &pinned, &[&public]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains(&format!("verified: {pinned}")), "{all}");
    let checked = verify3(&cosign, &public, &pinned);
    assert!(
        checked.status.success(),
        "cosign verify: {}",
        text(&checked)
    );

    // The library reads the bundle and verifies it, annotations included.
    let options = registry.options();
    let bundles = oci::bundles(&pinned, &digest_of(&pinned), &options)
        .await
        .expect("bundles");
    assert_eq!(bundles.len(), 1);
    let text_of = String::from_utf8_lossy(&bundles[0].bundle).to_string();
    assert!(text_of.contains("\"dsseEnvelope\""), "{text_of}");
    let keys = [trust::public_key_from_pem(
        "cosign.pub",
        &std::fs::read_to_string(&public).expect("pub"),
    )
    .expect("key")];
    let required = BTreeMap::from([("env".to_string(), "prod".to_string())]);
    let digest = digest_of(&pinned);
    let claims = Claims {
        digest: &digest,
        repository: pinned.rsplit_once('@').expect("pinned").0,
        annotations: &required,
    };
    bundle::verify_bundles(&bundles, &claims, &keys).expect("the bundle verifies");
    signatures_verify(&pinned, &claims, &keys, &options)
        .await
        .expect("read")
        .expect("verified");
    let wrong = BTreeMap::from([("env".to_string(), "dev".to_string())]);
    let refusal = bundle::verify_bundles(
        &bundles,
        &Claims {
            annotations: &wrong,
            ..claims
        },
        &keys,
    )
    .unwrap_err();
    assert_eq!(refusal.reason(), "SignatureAnnotationMismatch");

    // The wrong key: refused, naming the format found.
    let (_, stranger) = pkcs8_key_pair(work.path(), "stranger", 9);
    let all = refused(
        &radwasm_verify(&registry, &pinned, &[&stranger]),
        "SignatureUntrusted",
    );
    assert!(all.contains("sigstore bundle (cosign 3)"), "{all}");

    // The bundle of this digest listed as a referrer of another digest.
    let other = push_file(
        &registry,
        &another_component(work.path(), "other"),
        "policies/three:other",
    );
    put_index(&registry, "policies/three", &referrers_tag(&other), &index).await;
    let all = refused(
        &radwasm_verify(&registry, &other, &[&public]),
        "SignatureDigestMismatch",
    );
    assert!(all.contains(&digest), "{all}");
    assert!(all.contains("sigstore bundle"), "{all}");
}

#[tokio::test]
async fn cosign_2_signatures_still_verify_beside_cosign_3_bundles() {
    let registry = Registry::start();
    let cosign2 = Cosign::new();
    let cosign3 = Cosign::major(3);
    let (key2, public2) = cosign2.generate_key_pair();
    let (key3, public3) = cosign3.generate_key_pair();
    let pinned = cli_push_default(&registry, "policies/both:v1");
    let signed = cosign2.sign(&key2, &pinned);
    assert!(signed.status.success(), "cosign 2 sign: {}", text(&signed));
    let signed = sign3(&cosign3, &key3, &pinned, &[]);
    assert!(signed.status.success(), "cosign 3 sign: {}", text(&signed));
    for public in [&public2, &public3] {
        let output = radwasm_verify(&registry, &pinned, &[public]);
        assert!(output.status.success(), "{}", text(&output));
    }
    // Neither key: both formats were found, and the refusal says so.
    let work = tempfile::tempdir().expect("temp dir");
    let (_, stranger) = pkcs8_key_pair(work.path(), "stranger", 9);
    let all = refused(
        &radwasm_verify(&registry, &pinned, &[&stranger]),
        "SignatureUntrusted",
    );
    assert!(
        all.contains("1 cosign signature at tag") && all.contains("1 sigstore bundle"),
        "{all}"
    );
}

#[tokio::test]
async fn more_referrers_than_are_read_are_refused_unread() {
    let registry = Registry::start();
    let cosign = Cosign::major(3);
    let (key, public) = cosign.generate_key_pair();
    let pinned = cli_push_default(&registry, "policies/many:v1");
    let signed = sign3(&cosign, &key, &pinned, &[]);
    assert!(signed.status.success(), "cosign sign: {}", text(&signed));
    // cosign's one bundle, listed once more than is read.
    let mut index = referrers_index(&registry, "policies/many", &pinned).await;
    let listed = index["manifests"][0].clone();
    index["manifests"] = serde_json::Value::Array(vec![listed; oci::MAX_REFERRERS + 1]);
    put_index(&registry, "policies/many", &referrers_tag(&pinned), &index).await;
    let all = refused(
        &radwasm_verify(&registry, &pinned, &[&public]),
        "SignatureInvalid",
    );
    assert!(all.contains("at most 64 are read"), "{all}");
}

#[tokio::test]
async fn policy_sign_by_tag_warns_and_names_the_digest_signed() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("temp dir");
    let (key, _) = pkcs8_key_pair(work.path(), "signer", 5);
    let pinned = cli_push_default(&registry, "policies/tagged:v1");
    let output = radwasm_sign(&registry, &registry.reference("policies/tagged:v1"), &key);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: ") && stderr.contains("is a tag"),
        "{stderr}"
    );
    assert!(stderr.contains(&pinned), "{stderr}");
    let output = radwasm_sign(&registry, &pinned, &key);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
}
