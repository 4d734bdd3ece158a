//! Only trusted policies decide: a `ReconcilePolicy` with `spec.verify`
//! follows an OCI tag, and each digest behind it must carry a cosign
//! signature by a key in its keys ConfigMap before it decides. With a
//! verified version running, every refusal (unsigned, unknown key, a
//! signature for another digest, tampered content) makes the policy
//! `Ready=False` with its own reason, an Event and a metric, while the
//! running version keeps deciding; keys missing or malformed stop it; and
//! after a
//! restart with an unverifiable module, objects selecting it are decided by
//! nothing. The simulator's counters show what reached Radius.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use p256::ecdsa::SigningKey;
use p256::pkcs8::{EncodePublicKey, LineEnding};
use radwasm::policy::source::oci::{self, OciOptions};
use radwasm::policy::trust;
use serde_json::json;

use crate::harness::{System, metric_sum};
use crate::policies::{create_policy, delete_policies, guest, labelled, wait_policy};
use crate::realkube::eventually;
use crate::trust_fixture::{TrustedKeys, push_signed, signing_key, start_with_registry};
use crate::trust_revocation::refused_and_nothing_decides;

/// `component` with a custom section holding `tag`: the same policy under
/// another digest.
pub(crate) fn variant(component: &[u8], tag: &str) -> Vec<u8> {
    let name = b"radwasm-test";
    let mut section = vec![name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    out.push(u8::try_from(section.len()).expect("a short section"));
    out.extend_from_slice(&section);
    out
}

pub(crate) async fn sign(pinned: &str, key: &SigningKey, options: &OciOptions) {
    let (repository, digest) = pinned.split_once('@').expect("a pinned reference");
    let payload = trust::payload(repository, digest);
    let signature = trust::sign(&payload, key);
    oci::push_signature(pinned, digest, payload, signature, options)
        .await
        .expect("push the signature");
}

pub(crate) fn public_pem(key: &SigningKey) -> String {
    key.verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .expect("public key PEM")
}

pub(crate) async fn put_keys(system: &System, name: &str, data: &[(&str, String)]) {
    let api: Api<ConfigMap> = Api::namespaced(system.client.clone(), system.policy_namespace());
    let _ = api.delete(name, &DeleteParams::default()).await;
    let object = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    };
    eventually(
        &format!("ConfigMap {name} created"),
        Duration::from_secs(30),
        || async {
            Ok(api
                .create(&PostParams::default(), &object)
                .await
                .ok()
                .map(|_| ()))
        },
    )
    .await;
}

/// Events about the cluster-scoped policy, whatever namespace holds them.
pub(crate) async fn policy_events(system: &System, policy: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::all(system.client.clone());
    let list = api.list(&ListParams::default()).await.expect("list events");
    list.items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(policy))
        .map(|e| e.reason.unwrap_or_default())
        .collect()
}

/// The refusal `result` of `policy` was reported: an Event about it, and
/// `radwasm_policy_verifications_total` counting it.
pub(crate) async fn refusal_evented_and_counted(system: &System, policy: &str, result: &str) {
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

/// The refusal is loud (status reason, Event, metric) and changes nothing:
/// a new template selecting the policy is still decided by the guardrail,
/// and nothing reaches Radius.
pub(crate) async fn refused_and_guardrail_keeps_deciding(
    system: &System,
    policy: &str,
    reason: &str,
    select: &str,
    template: &str,
) {
    let refused = wait_policy(system, policy, "False", reason).await;
    let status = refused.status.expect("status");
    assert_eq!(
        status.name.as_deref(),
        Some("image-tag-guardrail"),
        "{status:?}"
    );
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert!(
        condition.message.contains("keeps deciding"),
        "{}",
        condition.message
    );
    refusal_evented_and_counted(system, policy, reason).await;
    system
        .create(&labelled(template, &[("policy", select)]))
        .await;
    let failed = system.wait_phase(template, "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string()),
        "{template} is decided by the verified guardrail"
    );
    assert_eq!(system.radius().stats().deployment_puts, 0, "after {reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_verified_digests_behind_a_tag_decide_and_every_refusal_keeps_the_running_one() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let trusted = signing_key(11);
    let stranger = signing_key(12);
    let tag = registry.reference("policies/trusted:stable");

    // The guardrail (fails every template it decides: nothing reaches
    // Radius), signed, behind the tag.
    let guardrail = push_signed(&tag, &guest("image-tag-guardrail"), &trusted, &options).await;

    let system = start_with_registry(
        &registry,
        &["--require-signatures", "--policy-tag-interval", "500ms"],
    )
    .await;
    let trust = TrustedKeys::cosign_pub(&system, "trusted", &trusted).await;
    let select = &trust.select;

    // Without spec.verify the controller refuses a registry module.
    let unverified = create_policy(
        &system,
        "unverified",
        json!({"module": {"oci": guardrail.reference},
               "objectSelector": {"matchLabels": {"policy": "nothing"}}}),
    )
    .await;
    wait_policy(&system, &unverified, "False", "SignatureRequired").await;

    let policy = create_policy(&system, "signed", trust.oci_spec(&system, &tag)).await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    let verified = loaded
        .status
        .and_then(|s| s.verified)
        .expect("status.verified");
    assert_eq!(verified.reference, guardrail.reference);
    assert!(
        verified.key.contains("cosign.pub (sha256:"),
        "{}",
        verified.key
    );
    system
        .create(&labelled("first", &[("policy", select)]))
        .await;
    system.wait_phase("first", "Failed").await;

    // The default policy (which would deploy) moves behind the tag, unsigned.
    let default = guest("default-policy");
    let unsigned = oci::push(&tag, &variant(&default, "unsigned"), &options)
        .await
        .expect("push");
    refused_and_guardrail_keeps_deciding(
        &system,
        &policy,
        "SignatureMissing",
        select,
        "t-unsigned",
    )
    .await;

    // Signed, but by a key that is not trusted.
    sign(&unsigned.reference, &stranger, &options).await;
    refused_and_guardrail_keeps_deciding(
        &system,
        &policy,
        "SignatureUntrusted",
        select,
        "t-unknown",
    )
    .await;

    // A trusted signature of the guardrail's digest copied to another's tag.
    let copied = oci::push(&tag, &variant(&default, "copied"), &options)
        .await
        .expect("push");
    let sig = |digest: &str| format!("{}.sig", digest.replacen(':', "-", 1));
    let http = reqwest::Client::new();
    let base = format!("http://{}/v2/policies/trusted/manifests", registry.addr);
    let manifest = http
        .get(format!("{base}/{}", sig(&guardrail.digest)))
        .header("Accept", oci::OCI_MANIFEST_MEDIA_TYPE)
        .send()
        .await
        .expect("GET")
        .bytes()
        .await
        .expect("body");
    let put = http
        .put(format!("{base}/{}", sig(&copied.digest)))
        .header("Content-Type", oci::OCI_MANIFEST_MEDIA_TYPE)
        .body(manifest)
        .send()
        .await
        .expect("PUT");
    assert!(put.status().is_success(), "{}", put.status());
    refused_and_guardrail_keeps_deciding(
        &system,
        &policy,
        "SignatureDigestMismatch",
        select,
        "t-copied",
    )
    .await;

    // Altered in the registry, then signed by the trusted key (in this
    // order: signed and intact, it would rightly be loaded).
    let tampered_bytes = variant(&default, "tampered");
    let tampered = oci::push(&tag, &tampered_bytes, &options)
        .await
        .expect("push");
    let stored = registry.blob_path(&oci::sha256_digest(&tampered_bytes));
    let mut altered = std::fs::read(&stored).expect("stored layer");
    let middle = altered.len() / 2;
    altered[middle] ^= 0xff;
    std::fs::write(&stored, &altered).expect("alter the layer");
    sign(&tampered.reference, &trusted, &options).await;
    refused_and_guardrail_keeps_deciding(&system, &policy, "DigestMismatch", select, "t-tampered")
        .await;

    // The tag back on the guardrail; then the keys go, then come back
    // broken. Without its keys, no key verifies the guardrail either: it
    // stops deciding (trust_revocation.rs shows a single key removed).
    oci::push(&tag, &guest("image-tag-guardrail"), &options)
        .await
        .expect("push");
    wait_policy(&system, &policy, "True", "Loaded").await;
    let api: Api<ConfigMap> = Api::namespaced(system.client.clone(), system.policy_namespace());
    api.delete(&trust.keys, &DeleteParams::default())
        .await
        .expect("delete the keys");
    let message =
        refused_and_nothing_decides(&system, &policy, "VerifyKeysMissing", select, "t-nokeys")
            .await;
    assert!(message.contains("no longer decides"), "{message}");
    put_keys(
        &system,
        &trust.keys,
        &[("cosign.pub", "not a key".to_string())],
    )
    .await;
    refused_and_nothing_decides(&system, &policy, "VerifyKeysInvalid", select, "t-badkeys").await;

    // A restart with an unverifiable module behind the tag: nothing decides
    // for the objects selecting it (they fail, naming the refusal), and
    // nothing reaches Radius.
    put_keys(
        &system,
        &trust.keys,
        &[("cosign.pub", public_pem(&trusted))],
    )
    .await;
    oci::push(&tag, &variant(&default, "before-restart"), &options)
        .await
        .expect("push");
    wait_policy(&system, &policy, "False", "SignatureMissing").await;
    let mut system = system;
    system.stop_controller();
    system.start_controller();
    system
        .create(&labelled("after-restart", &[("policy", select)]))
        .await;
    let failed = system.wait_phase("after-restart", "Failed").await;
    let message = format!("{:?}", failed.status);
    assert!(message.contains("SignatureMissing"), "{message}");
    assert_eq!(system.radius().stats().deployment_puts, 0);

    // A new digest signed by the trusted key replaces it: now it decides.
    let next = oci::push(&tag, &variant(&default, "next"), &options)
        .await
        .expect("push");
    sign(&next.reference, &trusted, &options).await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    assert_eq!(
        loaded.status.and_then(|s| s.verified).map(|v| v.reference),
        Some(next.reference.clone())
    );

    delete_policies(&system, &[&policy, &unverified]).await;
    let _ = api.delete(&trust.keys, &DeleteParams::default()).await;
    system.shutdown().await;
}

/// A version loaded before the policy asked for signatures was never
/// verified: once `spec.verify` is added and the module does not verify,
/// it stops deciding (objects selecting the policy wait, naming the
/// refusal) instead of deciding on until the next restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_verify_stops_a_version_that_was_never_verified() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let trusted = signing_key(13);
    let pushed = oci::push(
        &registry.reference("policies/unsigned:v1"),
        &guest("image-tag-guardrail"),
        &options,
    )
    .await
    .expect("push the guardrail");
    let system = start_with_registry(&registry, &[]).await;
    let trust = TrustedKeys::cosign_pub(&system, "late", &trusted).await;
    // Nothing asks for a signature yet.
    let policy = create_policy(
        &system,
        "late",
        json!({"module": {"oci": pushed.reference},
               "objectSelector": {"matchLabels": {"policy": trust.select}}}),
    )
    .await;
    wait_policy(&system, &policy, "True", "Loaded").await;
    system
        .create(&labelled("before", &[("policy", &trust.select)]))
        .await;
    let decided = system.wait_phase("before", "Failed").await;
    assert_eq!(
        decided.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string()),
        "the unverified guardrail decides while nothing asks for a signature"
    );

    // The admin now asks for signatures; the module has none.
    crate::policies::policies(&system.client)
        .patch(
            &policy,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"verify": trust.verify(&system)}})),
        )
        .await
        .expect("add spec.verify");
    let refused = wait_policy(&system, &policy, "False", "SignatureMissing").await;
    let status = refused.status.expect("status");
    assert_eq!(status.name, None, "no version is in charge: {status:?}");
    assert!(status.verified.is_none());
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert!(
        condition
            .message
            .contains("never verified and no longer decides"),
        "{}",
        condition.message
    );
    system
        .create(&labelled("after", &[("policy", &trust.select)]))
        .await;
    let failed = system.wait_phase("after", "Failed").await;
    let status = failed.status.expect("status");
    assert_eq!(status.policy, None, "nothing decided it: {status:?}");
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready");
    assert_eq!(ready.reason, "PolicyNotReady", "{ready:?}");
    assert!(
        ready.message.contains("SignatureMissing"),
        "{}",
        ready.message
    );
    assert_eq!(system.radius().stats().deployment_puts, 0);
    delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}
