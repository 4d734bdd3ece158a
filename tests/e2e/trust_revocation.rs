//! What a signature must claim, and what removing a key does. A manifest
//! and its signature copied into another repository are refused
//! (`SignatureReferenceMismatch`); `spec.verify.annotations` refuses a
//! signature without the release's annotation, so a tag moved back to a
//! digest signed for another release does not decide
//! (`SignatureAnnotationMismatch`); and a key removed from the keys
//! ConfigMap stops the running version it verified: its templates are
//! decided by nothing until a key that verifies it is trusted again. The
//! simulator's counters show what reached Radius.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use p256::ecdsa::SigningKey;
use radwasm::policy::source::oci::{self, OciOptions};
use radwasm::policy::trust;
use serde_json::json;

use crate::harness::System;
use crate::policies::{create_policy, delete_policies, guest, labelled, wait_policy};
use crate::realkube::eventually;
use crate::trust::{
    public_pem, refusal_evented_and_counted, refused_and_guardrail_keeps_deciding, sign, variant,
};
use crate::trust_fixture::{TrustedKeys, push_signed, signing_key, start_with_registry};

/// Sign `pinned` with `annotations` in the payload's `optional`, as `cosign
/// sign -a` does.
async fn sign_with(
    pinned: &str,
    key: &SigningKey,
    annotations: &[(&str, &str)],
    options: &OciOptions,
) {
    let (repository, digest) = pinned.split_once('@').expect("a pinned reference");
    let annotations: BTreeMap<String, String> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let payload = trust::payload_with(repository, digest, &annotations);
    let signature = trust::sign(&payload, key);
    oci::push_signature(pinned, digest, payload, signature, options)
        .await
        .expect("push the signature");
}

/// Replace the keys ConfigMap's data in place (one update, as `kubectl
/// edit` makes it).
async fn replace_keys(system: &System, name: &str, data: &[(&str, String)]) {
    let api: Api<ConfigMap> = Api::namespaced(system.client.clone(), system.policy_namespace());
    let mut current = api.get(name).await.expect("the keys ConfigMap");
    current.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    );
    api.replace(name, &PostParams::default(), &current)
        .await
        .expect("replace the keys");
}

/// `policy`'s Ready condition says no version decides, with `reason`; a new
/// template selecting it fails with `PolicyNotReady` naming `reason`, and
/// nothing reaches Radius for it.
pub(crate) async fn refused_and_nothing_decides(
    system: &System,
    policy: &str,
    reason: &str,
    select: &str,
    template: &str,
) -> String {
    let refused = wait_policy(system, policy, "False", reason).await;
    let status = refused.status.expect("status");
    assert_eq!(status.name, None, "no version is in charge: {status:?}");
    assert!(status.verified.is_none(), "{status:?}");
    let message = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    let puts = system.radius().stats().deployment_puts;
    system
        .create(&labelled(template, &[("policy", select)]))
        .await;
    let failed = system.wait_phase(template, "Failed").await;
    let status = failed.status.expect("status");
    assert_eq!(
        status.policy, None,
        "nothing decided {template}: {status:?}"
    );
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.reason, "PolicyNotReady", "{ready:?}");
    assert!(ready.message.contains(reason), "{}", ready.message);
    assert_eq!(
        system.radius().stats().deployment_puts,
        puts,
        "nothing reached Radius for {template}"
    );
    message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_and_signature_copied_from_another_repository_are_refused() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let key = signing_key(21);
    let module = variant(&guest("default-policy"), "replayed");
    let original = push_signed(
        &registry.reference("policies/original:v1"),
        &module,
        &key,
        &options,
    )
    .await;
    // The same manifest in another repository (its digest is the same),
    // with the original's signature layers copied beside it unchanged, as
    // `cosign copy` copies them.
    let copy = oci::push(&registry.reference("policies/copy:v1"), &module, &options)
        .await
        .expect("push the copy");
    assert_eq!(copy.digest, original.digest);
    let layers = oci::signatures(&original.reference, &original.digest, &options)
        .await
        .expect("the original's signatures");
    assert_eq!(layers.len(), 1);
    for layer in layers {
        let signature = layer.signature.expect("a signature annotation");
        oci::push_signature(
            &copy.reference,
            &copy.digest,
            layer.payload,
            signature,
            &options,
        )
        .await
        .expect("copy the signature");
    }

    let system = start_with_registry(&registry, &["--require-signatures"]).await;
    let trust = TrustedKeys::cosign_pub(&system, "replay", &key).await;
    let select = &trust.select;
    let policy = create_policy(
        &system,
        "replayed",
        trust.oci_spec(&system, &copy.reference),
    )
    .await;
    let message = refused_and_nothing_decides(
        &system,
        &policy,
        "SignatureReferenceMismatch",
        select,
        "t-copied",
    )
    .await;
    assert!(
        message.contains("policies/original") && message.contains("policies/copy"),
        "{message}"
    );
    refusal_evented_and_counted(&system, &policy, "SignatureReferenceMismatch").await;

    // Signed for the repository it is in, the same digest loads.
    sign(&copy.reference, &key, &options).await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    assert_eq!(
        loaded.status.and_then(|s| s.verified).map(|v| v.reference),
        Some(copy.reference.clone())
    );
    system.wait_phase("t-copied", "Ready").await;
    delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_annotations_refuse_a_signature_without_them_and_a_tag_moved_back() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let key = signing_key(22);
    let tag = registry.reference("policies/released:stable");
    // Release 1.4 is the guardrail (fails every template it decides:
    // nothing reaches Radius); release 1.3 is the default policy.
    let release_14 = push_signed(&tag, &guest("image-tag-guardrail"), &key, &options).await;

    let system = start_with_registry(&registry, &["--policy-tag-interval", "500ms"]).await;
    let trust = TrustedKeys::cosign_pub(&system, "release", &key).await;
    let select = &trust.select;
    let mut spec = trust.oci_spec(&system, &tag);
    spec["verify"]["annotations"] = json!({"version": "1.4", "env": "prod"});
    let policy = create_policy(&system, "released", spec).await;
    // Signed by the trusted key, but without the annotations.
    let message = refused_and_nothing_decides(
        &system,
        &policy,
        "SignatureAnnotationMismatch",
        select,
        "t-plain",
    )
    .await;
    assert!(
        message.contains("env=prod") && message.contains("version=1.4"),
        "{message}"
    );
    refusal_evented_and_counted(&system, &policy, "SignatureAnnotationMismatch").await;

    // Signed for release 1.4 in prod: it decides.
    sign_with(
        &release_14.reference,
        &key,
        &[("version", "1.4"), ("env", "prod")],
        &options,
    )
    .await;
    wait_policy(&system, &policy, "True", "Loaded").await;

    // The tag moved back to release 1.3, signed by the same key for 1.3:
    // refused, and 1.4 keeps deciding.
    let release_13 = oci::push(&tag, &variant(&guest("default-policy"), "1.3"), &options)
        .await
        .expect("push 1.3");
    sign_with(
        &release_13.reference,
        &key,
        &[("version", "1.3"), ("env", "prod")],
        &options,
    )
    .await;
    refused_and_guardrail_keeps_deciding(
        &system,
        &policy,
        "SignatureAnnotationMismatch",
        select,
        "t-rollback",
    )
    .await;

    // The platform now requires release 1.5: the running 1.4 is checked
    // again with the annotations of now, and stops deciding.
    crate::policies::policies(&system.client)
        .patch(
            &policy,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"spec": {"verify": {"annotations": {"version": "1.5"}}}}),
            ),
        )
        .await
        .expect("require 1.5");
    eventually(
        "the status describes the new spec.verify",
        Duration::from_secs(60),
        || async {
            let current = crate::policies::policies(&system.client)
                .get(&policy)
                .await?;
            let status = current.status.unwrap_or_default();
            let seen = status.observed_generation == current.metadata.generation;
            Ok((seen && status.name.is_none()).then_some(()))
        },
    )
    .await;
    let message = refused_and_nothing_decides(
        &system,
        &policy,
        "SignatureAnnotationMismatch",
        select,
        "t-after-1.5",
    )
    .await;
    assert!(
        message.contains("version=1.5") && message.contains("no longer decides"),
        "{message}"
    );
    delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_key_stops_the_version_it_verified_until_a_trusted_key_verifies_it_again() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let leaked = signing_key(23);
    let other_team = signing_key(24);
    let fresh = signing_key(25);
    // The default policy (it deploys), pinned by digest, signed by the key
    // that will leak.
    let module = push_signed(
        &registry.reference("policies/deploys:v1"),
        &variant(&guest("default-policy"), "revocation"),
        &leaked,
        &options,
    )
    .await;

    let system = start_with_registry(&registry, &[]).await;
    let trust = TrustedKeys::put(
        &system,
        "revoke",
        &[
            ("leaked.pub", public_pem(&leaked)),
            ("other-team.pub", public_pem(&other_team)),
        ],
    )
    .await;
    let (select, keys) = (&trust.select, &trust.keys);
    let policy = create_policy(
        &system,
        "revoked",
        trust.oci_spec(&system, &module.reference),
    )
    .await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    let verified = loaded.status.and_then(|s| s.verified).expect("verified");
    assert!(verified.key.contains("leaked.pub"), "{}", verified.key);
    system
        .create(&labelled("before", &[("policy", select)]))
        .await;
    system.wait_phase("before", "Ready").await;

    // The key leaked: removed from the ConfigMap. The running version,
    // verified only by it, stops deciding.
    let removed = Instant::now();
    replace_keys(
        &system,
        keys,
        &[("other-team.pub", public_pem(&other_team))],
    )
    .await;
    let refused = wait_policy(&system, &policy, "False", "SignatureUntrusted").await;
    eprintln!(
        "revocation: Ready=False {} ms after the key was removed",
        removed.elapsed().as_millis()
    );
    let message = refused
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("no longer decides"), "{message}");
    refusal_evented_and_counted(&system, &policy, "SignatureUntrusted").await;
    // The template it decided waits, failed with PolicyNotReady (its Radius
    // resources stay as they are); a new one is decided by nothing.
    let before = eventually(
        "the template the revoked version decided fails with PolicyNotReady",
        Duration::from_secs(60),
        || async {
            let template = system.templates().get("before").await?;
            let ready = template.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "Ready" && c.reason == "PolicyNotReady")
                    .cloned()
            });
            Ok(ready)
        },
    )
    .await;
    assert!(
        before.message.contains("SignatureUntrusted"),
        "{}",
        before.message
    );
    refused_and_nothing_decides(&system, &policy, "SignatureUntrusted", select, "during").await;

    // Re-signed with a new key: not trusted yet, so nothing changes.
    sign(&module.reference, &fresh, &options).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    wait_policy(&system, &policy, "False", "SignatureUntrusted").await;
    // The new key added: the same digest verifies again and the templates
    // are decided afresh.
    let added = Instant::now();
    replace_keys(
        &system,
        keys,
        &[
            ("other-team.pub", public_pem(&other_team)),
            ("fresh.pub", public_pem(&fresh)),
        ],
    )
    .await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    eprintln!(
        "revocation: Loaded again {} ms after the new key was added",
        added.elapsed().as_millis()
    );
    let verified = loaded.status.and_then(|s| s.verified).expect("verified");
    assert!(verified.key.contains("fresh.pub"), "{}", verified.key);
    system.wait_phase("before", "Ready").await;
    system.wait_phase("during", "Ready").await;
    delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}
