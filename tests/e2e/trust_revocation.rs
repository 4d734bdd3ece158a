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

use crate::harness::{System, metric_sum};
use crate::policies::{create_policy, delete_policies, guest, labelled, short, wait_policy};
use crate::realkube::eventually;
use crate::trust::{
    policy_events, public_pem, put_keys, refused_and_guardrail_keeps_deciding, sign, variant,
};

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

async fn counted(system: &System, policy: &str, result: &str) {
    eventually(
        &format!("radwasm_policy_verifications_total{{result=\"{result}\"}}"),
        Duration::from_secs(30),
        || async {
            let metrics = system.metrics().await;
            let prefix = format!(
                "radwasm_policy_verifications_total{{reconcile_policy=\"{policy}\",result=\"{result}\"}}"
            );
            Ok((metric_sum(&metrics, &prefix) >= 1.0).then_some(()))
        },
    )
    .await;
    eventually(
        &format!("a {result} Event about {policy}"),
        Duration::from_secs(30),
        || async {
            Ok(policy_events(system, policy)
                .await
                .iter()
                .any(|r| r == result)
                .then_some(()))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_and_signature_copied_from_another_repository_are_refused() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let key = SigningKey::from_slice(&[21; 32]).expect("key");
    let module = variant(&guest("default-policy"), "replayed");
    let original = oci::push(
        &registry.reference("policies/original:v1"),
        &module,
        &options,
    )
    .await
    .expect("push the original");
    sign(&original.reference, &key, &options).await;
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

    let system = System::start(&[
        "--policy-insecure-registry",
        &registry.addr,
        "--require-signatures",
    ])
    .await;
    let select = format!("replay-{}", short(&system));
    let keys = format!("{}-replay-keys", system.namespace);
    put_keys(&system, &keys, &[("cosign.pub", public_pem(&key))]).await;
    let policy = create_policy(
        &system,
        "replayed",
        json!({"module": {"oci": copy.reference},
               "verify": {"configMap": {"namespace": system.policy_namespace(), "name": keys}},
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    let message = refused_and_nothing_decides(
        &system,
        &policy,
        "SignatureReferenceMismatch",
        &select,
        "t-copied",
    )
    .await;
    assert!(
        message.contains("policies/original") && message.contains("policies/copy"),
        "{message}"
    );
    counted(&system, &policy, "SignatureReferenceMismatch").await;

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
    let key = SigningKey::from_slice(&[22; 32]).expect("key");
    let tag = registry.reference("policies/released:stable");
    // Release 1.4 is the guardrail (fails every template it decides:
    // nothing reaches Radius); release 1.3 is the default policy.
    let release_14 = oci::push(&tag, &guest("image-tag-guardrail"), &options)
        .await
        .expect("push 1.4");
    sign(&release_14.reference, &key, &options).await;

    let system = System::start(&[
        "--policy-insecure-registry",
        &registry.addr,
        "--policy-tag-interval",
        "500ms",
    ])
    .await;
    let select = format!("release-{}", short(&system));
    let keys = format!("{}-release-keys", system.namespace);
    put_keys(&system, &keys, &[("cosign.pub", public_pem(&key))]).await;
    let policy = create_policy(
        &system,
        "released",
        json!({"module": {"oci": tag},
               "verify": {"configMap": {"namespace": system.policy_namespace(), "name": keys},
                          "annotations": {"version": "1.4", "env": "prod"}},
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    // Signed by the trusted key, but without the annotations.
    let message = refused_and_nothing_decides(
        &system,
        &policy,
        "SignatureAnnotationMismatch",
        &select,
        "t-plain",
    )
    .await;
    assert!(
        message.contains("env=prod") && message.contains("version=1.4"),
        "{message}"
    );
    counted(&system, &policy, "SignatureAnnotationMismatch").await;

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
        &select,
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
        &select,
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
    let leaked = SigningKey::from_slice(&[23; 32]).expect("key");
    let other_team = SigningKey::from_slice(&[24; 32]).expect("key");
    let fresh = SigningKey::from_slice(&[25; 32]).expect("key");
    // The default policy (it deploys), pinned by digest, signed by the key
    // that will leak.
    let module = oci::push(
        &registry.reference("policies/deploys:v1"),
        &variant(&guest("default-policy"), "revocation"),
        &options,
    )
    .await
    .expect("push");
    sign(&module.reference, &leaked, &options).await;

    let system = System::start(&["--policy-insecure-registry", &registry.addr]).await;
    let select = format!("revoke-{}", short(&system));
    let keys = format!("{}-revoke-keys", system.namespace);
    put_keys(
        &system,
        &keys,
        &[
            ("leaked.pub", public_pem(&leaked)),
            ("other-team.pub", public_pem(&other_team)),
        ],
    )
    .await;
    let policy = create_policy(
        &system,
        "revoked",
        json!({"module": {"oci": module.reference},
               "verify": {"configMap": {"namespace": system.policy_namespace(), "name": keys}},
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    let verified = loaded.status.and_then(|s| s.verified).expect("verified");
    assert!(verified.key.contains("leaked.pub"), "{}", verified.key);
    system
        .create(&labelled("before", &[("policy", &select)]))
        .await;
    system.wait_phase("before", "Ready").await;

    // The key leaked: removed from the ConfigMap. The running version,
    // verified only by it, stops deciding.
    let removed = Instant::now();
    replace_keys(
        &system,
        &keys,
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
    counted(&system, &policy, "SignatureUntrusted").await;
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
    refused_and_nothing_decides(&system, &policy, "SignatureUntrusted", &select, "during").await;

    // Re-signed with a new key: not trusted yet, so nothing changes.
    sign(&module.reference, &fresh, &options).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    wait_policy(&system, &policy, "False", "SignatureUntrusted").await;
    // The new key added: the same digest verifies again and the templates
    // are decided afresh.
    let added = Instant::now();
    replace_keys(
        &system,
        &keys,
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
