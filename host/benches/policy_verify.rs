//! What signature verification adds to a policy's activation: the fetch a
//! `ReconcilePolicy` does (pull the artifact by its tag, check its digests)
//! against the same plus what `spec.verify` adds (reading the keys, looking
//! for both of cosign's formats, fetching what is there, checking the ECDSA
//! signature and the claims), against a CNCF distribution registry on
//! loopback (`docker-registry`, started and stopped here). Once for a
//! module signed in cosign 2's format (the `sha256-<hex>.sig` manifest and
//! its payload) and once for one signed in cosign 3's (a sigstore bundle as
//! an OCI referrer, written here as `cosign sign` of cosign 3 writes it:
//! the referrers index at the tag `sha256-<hex>`, since this registry has
//! no referrers API). Medians of `--reps` runs each (default 50), and each
//! check alone.
//!
//! ```sh
//! cargo bench -p radwasm --bench policy_verify -- [--reps 50]
//! ```
//!
//! Figures are in `docs/benchmarks-policy-activation.md`, "Verifying a
//! signed policy".
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{DerSignature, SigningKey};
use p256::pkcs8::{EncodePublicKey, LineEnding};
use radwasm::policy::embedded::DEFAULT_POLICY;
use radwasm::policy::source::{oci, signatures_verify};
use radwasm::policy::trust::{self, Claims, bundle};
use radwasm_test_support::registry::Registry;
use sha2::{Digest, Sha256};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1000.0)
}

/// Upload `data` as a blob of `repository` (POST, then PUT with the digest).
async fn upload(
    http: &reqwest::Client,
    registry: &Registry,
    repository: &str,
    data: &[u8],
) -> Result<String, Box<dyn std::error::Error>> {
    let digest = format!("sha256:{}", hex::encode(Sha256::digest(data)));
    let started = http
        .post(format!(
            "http://{}/v2/{repository}/blobs/uploads/",
            registry.addr
        ))
        .send()
        .await?
        .error_for_status()?;
    let location = started
        .headers()
        .get("Location")
        .ok_or("no upload location")?
        .to_str()?
        .to_string();
    let location = match location.starts_with("http") {
        true => location,
        false => format!("http://{}{location}", registry.addr),
    };
    let separator = if location.contains('?') { '&' } else { '?' };
    http.put(format!("{location}{separator}digest={digest}"))
        .header("Content-Type", "application/octet-stream")
        .body(data.to_vec())
        .send()
        .await?
        .error_for_status()?;
    Ok(digest)
}

async fn put_manifest(
    http: &reqwest::Client,
    registry: &Registry,
    repository: &str,
    reference: &str,
    media_type: &str,
    body: &[u8],
) -> Result<(), Box<dyn std::error::Error>> {
    http.put(format!(
        "http://{}/v2/{repository}/manifests/{reference}",
        registry.addr
    ))
    .header("Content-Type", media_type)
    .body(body.to_vec())
    .send()
    .await?
    .error_for_status()?;
    Ok(())
}

/// Store, as cosign 3's `cosign sign --key` does, a sigstore bundle signing
/// `digest` of `repository` with `key`: a DSSE envelope over the in-toto
/// statement, in a referrer manifest listed by the index at `sha256-<hex>`.
async fn push_bundle(
    registry: &Registry,
    repository: &str,
    digest: &str,
    key: &SigningKey,
) -> Result<(), Box<dyn std::error::Error>> {
    let http = reqwest::Client::new();
    let statement = serde_json::to_vec(&serde_json::json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"digest": {"sha256": digest.trim_start_matches("sha256:")}}],
        "predicateType": bundle::SIGN_PREDICATE_TYPE,
        "predicate": {},
    }))?;
    let signature: DerSignature = key.sign(&bundle::pae(bundle::IN_TOTO_PAYLOAD_TYPE, &statement));
    let bundle_json = serde_json::to_vec(&serde_json::json!({
        "mediaType": bundle::BUNDLE_MEDIA_TYPE,
        "verificationMaterial": {"publicKey": {"hint": ""}},
        "dsseEnvelope": {
            "payload": STANDARD.encode(&statement),
            "payloadType": bundle::IN_TOTO_PAYLOAD_TYPE,
            "signatures": [{"sig": STANDARD.encode(signature.as_bytes())}],
        },
    }))?;
    let empty = b"{}";
    let config = upload(&http, registry, repository, empty).await?;
    let layer = upload(&http, registry, repository, &bundle_json).await?;
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": oci::OCI_MANIFEST_MEDIA_TYPE,
        "artifactType": bundle::BUNDLE_MEDIA_TYPE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": config,
                   "size": empty.len()},
        "layers": [{"mediaType": bundle::BUNDLE_MEDIA_TYPE, "digest": layer,
                    "size": bundle_json.len()}],
    }))?;
    let manifest_digest = format!("sha256:{}", hex::encode(Sha256::digest(&manifest)));
    put_manifest(
        &http,
        registry,
        repository,
        &manifest_digest,
        oci::OCI_MANIFEST_MEDIA_TYPE,
        &manifest,
    )
    .await?;
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": oci::OCI_MANIFEST_MEDIA_TYPE, "digest": manifest_digest,
                       "size": manifest.len(), "artifactType": bundle::BUNDLE_MEDIA_TYPE}],
    }))?;
    put_manifest(
        &http,
        registry,
        repository,
        &oci::referrers_tag(digest),
        OCI_INDEX,
        &index,
    )
    .await?;
    Ok(())
}

const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Medians of `reps` runs for the module at `tag`: the pull alone, the pull
/// and the verification of both formats, what that adds, and `check` (the
/// signature check alone, given what was fetched).
async fn measure(
    tag: &str,
    pem: &str,
    options: &oci::OciOptions,
    reps: usize,
) -> Result<[Duration; 3], Box<dyn std::error::Error>> {
    let mut fetch = Vec::new();
    let mut verified = Vec::new();
    let mut added = Vec::new();
    let none = BTreeMap::new();
    for _ in 0..reps {
        let started = Instant::now();
        oci::pull(tag, options).await?;
        fetch.push(started.elapsed());

        let started = Instant::now();
        let pulled = oci::pull(tag, options).await?;
        let after_pull = started.elapsed();
        let keys = vec![trust::public_key_from_pem("cosign.pub", pem)?];
        let claims = Claims {
            digest: &pulled.digest,
            repository: pulled.reference.split_once('@').ok_or("pinned")?.0,
            annotations: &none,
        };
        signatures_verify(&pulled.reference, &claims, &keys, options).await??;
        let total = started.elapsed();
        verified.push(total);
        added.push(total.saturating_sub(after_pull));
    }
    Ok([median(fetch), median(verified), median(added)])
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let reps = args
        .iter()
        .position(|a| a == "--reps")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse::<usize>())
        .transpose()?
        .unwrap_or(50)
        .max(1);
    let registry = Registry::start();
    let options = registry.options();
    let key = SigningKey::from_slice(&[42; 32])?;
    let pem = key.verifying_key().to_public_key_pem(LineEnding::LF)?;
    let none = BTreeMap::new();
    let keys = vec![trust::public_key_from_pem("cosign.pub", &pem)?];

    // cosign 2's format.
    let sig_tag = registry.reference("policies/default:bench");
    let pushed = oci::push(&sig_tag, DEFAULT_POLICY, &options).await?;
    let (repository, digest) = pushed
        .reference
        .split_once('@')
        .ok_or("a pinned reference")?;
    let payload = trust::payload(repository, digest);
    let signature = trust::sign(&payload, &key);
    oci::push_signature(&pushed.reference, digest, payload, signature, &options).await?;
    let layers = oci::signatures(&pushed.reference, digest, &options).await?;
    let claims = Claims {
        digest,
        repository,
        annotations: &none,
    };
    let mut sig_check = Vec::new();
    for _ in 0..reps {
        let started = Instant::now();
        trust::verify(&layers, &claims, &keys)?;
        sig_check.push(started.elapsed());
    }

    // cosign 3's format, for the same component in another repository.
    let bundle_tag = registry.reference("policies/bundled:bench");
    let pushed = oci::push(&bundle_tag, DEFAULT_POLICY, &options).await?;
    let (repository, digest) = pushed
        .reference
        .split_once('@')
        .ok_or("a pinned reference")?;
    push_bundle(&registry, "policies/bundled", digest, &key).await?;
    let bundles = oci::bundles(&pushed.reference, digest, &options).await?;
    let claims = Claims {
        digest,
        repository,
        annotations: &none,
    };
    let mut bundle_check = Vec::new();
    for _ in 0..reps {
        let started = Instant::now();
        bundle::verify_bundles(&bundles, &claims, &keys)?;
        bundle_check.push(started.elapsed());
    }

    let [fetch, sig_verified, sig_added] = measure(&sig_tag, &pem, &options, reps).await?;
    let [_, bundle_verified, bundle_added] = measure(&bundle_tag, &pem, &options, reps).await?;
    println!(
        "{reps} runs, default policy ({} bytes), registry on loopback",
        DEFAULT_POLICY.len()
    );
    println!(
        "fetch (pull by tag, digests checked):  median {}",
        ms(fetch)
    );
    println!(
        "fetch + verify, cosign 2 (.sig):       median {}",
        ms(sig_verified)
    );
    println!(
        "fetch + verify, cosign 3 (bundle):     median {}",
        ms(bundle_verified)
    );
    println!(
        "added by verification, .sig:           median {}",
        ms(sig_added)
    );
    println!(
        "added by verification, bundle:         median {}",
        ms(bundle_added)
    );
    println!(
        "check alone, .sig payload:             median {}",
        ms(median(sig_check))
    );
    println!(
        "check alone, bundle (DSSE):            median {}",
        ms(median(bundle_check))
    );
    Ok(())
}
