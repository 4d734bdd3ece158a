//! Every trust refusal is loud and counted, including those a registry or
//! the API server causes without a signature being wrong: an image index
//! stored at a digest's signature tag, a signature layer larger than a
//! payload may be, and a keys ConfigMap the controller cannot read. Each
//! makes the policy `Ready=False` with its own reason, an Event and the
//! verification metric, while the verified version keeps deciding. A
//! plain-HTTP registry off loopback is warned about at start.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use radwasm::policy::source::oci::{self, OciOptions};
use radwasm::policy::trust;
use serde_json::json;

use crate::harness::System;
use crate::policies::{create_policy, guest, wait_policy};
use crate::trust::{refused_and_guardrail_keeps_deciding, variant};
use crate::trust_fixture::{TrustedKeys, push_signed, signing_key, start_with_registry};

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// Store `manifest` at the signature tag of `pinned`'s digest, with `blobs`
/// (as a registry with hostile content would hold them).
async fn put_at_signature_tag(
    pinned: &str,
    manifest: &serde_json::Value,
    media_type: &'static str,
    blobs: &[Vec<u8>],
    options: &OciOptions,
) {
    let (repository, digest) = pinned.split_once('@').expect("a pinned reference");
    let target: Reference = format!("{repository}:{}", trust::signature_tag(digest))
        .parse()
        .expect("a reference");
    let client = Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(options.insecure_registries.clone()),
        ..ClientConfig::default()
    });
    client
        .auth(&target, &RegistryAuth::Anonymous, RegistryOperation::Push)
        .await
        .expect("log in to push");
    for blob in blobs {
        let digest = oci::sha256_digest(blob);
        client
            .push_blob(&target, blob.clone(), &digest)
            .await
            .expect("push a blob");
    }
    client
        .push_manifest_raw(
            &target,
            serde_json::to_vec(manifest).expect("JSON"),
            http::HeaderValue::from_static(media_type),
        )
        .await
        .expect("push the manifest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signature_tag_that_cannot_be_read_and_unreadable_keys_are_trust_refusals() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let trusted = signing_key(21);
    let tag = registry.reference("policies/refusals:stable");
    let guardrail = push_signed(&tag, &guest("image-tag-guardrail"), &trusted, &options).await;

    let far = "registry.example.invalid:5000";
    let system = start_with_registry(
        &registry,
        &[
            "--policy-insecure-registry",
            far,
            "--policy-tag-interval",
            "500ms",
        ],
    )
    .await;
    // Plain HTTP off loopback is warned about at start; on loopback it is not.
    system
        .wait_for_log(&format!("registry {far} is reached over plain HTTP"))
        .await;
    assert!(
        !system
            .logs()
            .contains(&format!("registry {} is reached", registry.addr))
    );
    let trust = TrustedKeys::cosign_pub(&system, "refusals", &trusted).await;
    let (select, keys) = (&trust.select, &trust.keys);
    let policy = create_policy(&system, "refusals", trust.oci_spec(&system, &tag)).await;
    wait_policy(&system, &policy, "True", "Loaded").await;
    let default = guest("default-policy");

    // An image index where the signatures of the new digest belong.
    let indexed = oci::push(&tag, &variant(&default, "index"), &options)
        .await
        .expect("push");
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": guardrail.digest, "size": 10}],
    });
    put_at_signature_tag(
        &indexed.reference,
        &index,
        "application/vnd.oci.image.index.v1+json",
        &[],
        &options,
    )
    .await;
    refused_and_guardrail_keeps_deciding(&system, &policy, "SignatureInvalid", select, "t-index")
        .await;
    let refused = wait_policy(&system, &policy, "False", "SignatureInvalid").await;
    let message = ready_message(&refused);
    assert!(message.contains("image index"), "{message}");

    // A signature layer of 100 KiB: more than any payload; not downloaded.
    let oversized = oci::push(&tag, &variant(&default, "oversized"), &options)
        .await
        .expect("push");
    let layer = vec![b' '; 100 << 10];
    let config = b"{}".to_vec();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": oci::sha256_digest(&config), "size": config.len()},
        "layers": [{"mediaType": trust::SIMPLE_SIGNING_MEDIA_TYPE,
                    "digest": oci::sha256_digest(&layer), "size": layer.len(),
                    "annotations": {trust::SIGNATURE_ANNOTATION: "MEUCIQ=="}}],
    });
    put_at_signature_tag(
        &oversized.reference,
        &manifest,
        OCI_MANIFEST,
        &[layer, config],
        &options,
    )
    .await;
    crate::realkube::eventually(
        "the oversized signature layer refused",
        Duration::from_secs(60),
        || async {
            let policy = wait_policy(&system, &policy, "False", "SignatureInvalid").await;
            Ok(ready_message(&policy)
                .contains("declares 102400 bytes")
                .then_some(()))
        },
    )
    .await;

    // The keys ConfigMap refused by the API server (as RBAC refuses an
    // object the controller may not read): nothing is trusted.
    if let Some(apiserver) = &system.apiserver {
        let faults = apiserver.faults();
        faults.forbid(Some(&format!("/configmaps/{keys}")));
        refused_and_guardrail_keeps_deciding(
            &system,
            &policy,
            "VerifyKeysUnreadable",
            select,
            "t-keys",
        )
        .await;
        let refused = wait_policy(&system, &policy, "False", "VerifyKeysUnreadable").await;
        assert!(
            ready_message(&refused).contains("forbidden"),
            "{}",
            ready_message(&refused)
        );
        faults.forbid(None);
    } else {
        eprintln!(
            "the unreadable keys are checked on the embedded API server only (it refuses one object by name)"
        );
    }

    // The tag back at the verified digest: Ready again, nothing refused.
    oci::push(&tag, &guest("image-tag-guardrail"), &options)
        .await
        .expect("push the guardrail again");
    wait_policy(&system, &policy, "True", "Loaded").await;
    system.shutdown().await;
}

fn ready_message(policy: &radwasm::reconcile_policy::crd::ReconcilePolicy) -> String {
    policy
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

/// Kill a controller this scenario started itself.
fn kill(mut child: std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The artifact files the compile cache in `dir` keeps for component
/// `digest`: `(<digest>-<engine>.cwasm, its .sha256)`.
fn cache_files(dir: &std::path::Path, digest: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let artifact = std::fs::read_dir(dir)
        .expect("read the cache")
        .flatten()
        .map(|entry| entry.path())
        .find(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            name.starts_with(&format!("{digest}-")) && name.ends_with(".cwasm")
        })
        .unwrap_or_else(|| panic!("no compiled artifact of {digest} in {}", dir.display()));
    let checksum = artifact.with_extension("cwasm.sha256");
    (artifact, checksum)
}

/// Native code planted in the compile cache under the built-in default's
/// name decides when the cache is used (the attack is real), and never
/// under `--require-signatures`, which compiles every module from its
/// verified bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_planted_in_the_compile_cache_never_decides_under_require_signatures() {
    use sha2::Digest as _;

    let cache = tempfile::tempdir().expect("compile cache dir");
    let cache_arg = format!("--compile-cache={}", cache.path().display());
    let guardrail = guest("image-tag-guardrail");
    let guardrail_file = cache.path().join("guardrail.wasm.src");
    std::fs::write(&guardrail_file, &guardrail).expect("write the guardrail");
    let guardrail_arg = guardrail_file.display().to_string();

    // The controller compiles the built-in default into the cache, then one
    // run with the guardrail compiles that too, with the same engine.
    let mut system = System::start(&[&cache_arg]).await;
    // Compiling takes seconds in a debug build, far longer while other
    // scenarios share the cores.
    let compile = Duration::from_secs(180);
    system
        .wait_for_log_within("policy loaded policy=", compile)
        .await;
    system.kill_controller();
    let compiler = system.spawn_controller_as(None, &["--policy", &guardrail_arg]);
    system
        .wait_for_log_within("policy loaded policy=image-tag-guardrail", compile)
        .await;
    kill(compiler);

    // Plant the guardrail's native code under the default's name, with a
    // checksum that matches it.
    let default_digest = radwasm::policy::digest(radwasm::policy::embedded::DEFAULT_POLICY);
    let (planted, checksum) = cache_files(cache.path(), &default_digest);
    let (code, _) = cache_files(cache.path(), &radwasm::policy::digest(&guardrail));
    let bytes = std::fs::read(&code).expect("read the guardrail's code");
    std::fs::write(&planted, &bytes).expect("plant");
    std::fs::write(&checksum, hex::encode(sha2::Sha256::digest(&bytes))).expect("checksum");

    // Using the cache, the planted code decides for the default: the
    // template fails as the guardrail fails everything.
    let used = system.spawn_controller_as(None, &[]);
    system
        .create(&crate::harness::app_template("planted"))
        .await;
    system.wait_phase("planted", "Failed").await;
    kill(used);

    // Under --require-signatures the cache is not read: the default
    // compiled from its own bytes deploys the template the planted code
    // failed. (A second template of the same fixture would race it for the
    // same Radius resources: the default retries "planted" at once.)
    let checked = system.spawn_controller_as(None, &["--require-signatures"]);
    system
        .wait_for_log_within("the compile cache on disk is not used", compile)
        .await;
    // Loaded by all four controllers, this one after its compile.
    crate::realkube::eventually("the fourth policy load", compile, || async {
        Ok((system.all_logs().matches("policy loaded policy=").count() >= 4).then_some(()))
    })
    .await;
    system.wait_phase("planted", "Ready").await;
    assert_eq!(
        std::fs::read(&planted).expect("the planted file"),
        bytes,
        "the cache was not even written"
    );
    kill(checked);
    system.shutdown().await;
}
