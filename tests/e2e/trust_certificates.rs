//! `spec.verify.certificate`: a module signed with a certificate of the
//! platform's own CA (a root and an intermediate made here, the leaf's
//! certificate and chain stored beside the signature as `cosign sign
//! --certificate --certificate-chain` stores them) loads when its identity
//! matches; a policy naming another identity is refused with
//! `CertificateIdentityMismatch`, an Event and the metric, and nothing it
//! would decide reaches Radius; and once the root is replaced by another
//! CA's, the running version stops deciding.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use radwasm::policy::source::oci;
use radwasm::policy::trust;
use radwasm_test_support::pki::{Ca, LeafSpec};
use serde_json::json;

use radwasm::reconcile_policy::ReconcilePolicy;

use crate::harness::{Backend, metric_sum};
use crate::policies::{
    SYSTEM_LABEL, create_policy, delete_policies, guest, policies, short, wait_policy,
};
use crate::realkube::eventually;
use crate::trust::{policy_events, variant};
use crate::trust_fixture::{TrustedKeys, start_with_registry};
use crate::trust_revocation::refused_and_nothing_decides;

const SUBJECT: &str = "release@platform.example";
const ISSUER: &str = "https://issuer.platform.example";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_signed_module_loads_for_its_identity_and_is_refused_for_another() {
    let registry = crate::registry::Registry::start();
    let options = registry.options();
    let module = variant(&guest("default-policy"), "certified");
    let pushed = oci::push(
        &registry.reference("policies/certified:v1"),
        &module,
        &options,
    )
    .await
    .expect("push the module");
    let platform = Ca::new("Platform");
    let leaf = platform.leaf(&LeafSpec::new(SUBJECT, ISSUER));
    let key = trust::signing_key_from_pem("leaf", &leaf.key, None).expect("the leaf's key");
    let (repository, digest) = pushed.reference.split_once('@').expect("pinned");
    let payload = trust::payload(repository, digest);
    // First signed with the key alone, as `cosign sign --key` without a
    // certificate signs.
    oci::push_signature(
        &pushed.reference,
        digest,
        payload.clone(),
        trust::sign(&payload, &key),
        &options,
    )
    .await
    .expect("push the bare signature");

    let system = start_with_registry(&registry, &["--require-signatures"]).await;
    // The platform's CA root, in a ConfigMap as keys are.
    let trust = TrustedKeys::put(&system, "cert", &[("ca.pem", platform.root_pem())]).await;
    let (roots, select) = (&trust.keys, &trust.select);
    let verify = |subject: &str| {
        json!({"certificate": {
            "roots": {"configMap": {"namespace": system.policy_namespace(), "name": roots}},
            "identities": [{"subject": subject, "issuer": ISSUER}]
        }})
    };
    let trusted = create_policy(
        &system,
        "certified",
        json!({"module": {"oci": pushed.reference},
               "verify": verify(SUBJECT),
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    wait_policy(&system, &trusted, "False", "CertificateMissing").await;
    // The certificate-made signature pushed: the refused policy is looked
    // at again with the fetch backoff, and loads.
    oci::push_certified_signature(
        &pushed.reference,
        digest,
        payload.clone(),
        trust::sign(&payload, &key),
        leaf.certificate.clone(),
        Some(platform.chain_pem()),
        &options,
    )
    .await
    .expect("push the signature");
    let loaded = wait_policy(&system, &trusted, "True", "Loaded").await;
    let verified = loaded.status.and_then(|s| s.verified).expect("verified");
    assert_eq!(verified.reference, pushed.reference);
    assert!(
        verified.key.contains(SUBJECT) && verified.key.contains("Platform Root"),
        "{verified:?}"
    );

    // The same module for another identity: refused, loudly.
    let other_select = format!("other-{}", short(&system));
    let refused = create_policy(
        &system,
        "someone-else",
        json!({"module": {"oci": pushed.reference},
               "verify": verify("someone@platform.example"),
               "objectSelector": {"matchLabels": {"policy": other_select}}}),
    )
    .await;
    let reason = "CertificateIdentityMismatch";
    let message =
        refused_and_nothing_decides(&system, &refused, reason, &other_select, "t-other").await;
    assert!(
        message.contains(SUBJECT) && message.contains("someone@platform.example"),
        "{message}"
    );
    eventually(
        &format!("a {reason} Event and count"),
        Duration::from_secs(30),
        || async {
            let metrics = system.metrics().await;
            let prefix = format!(
                "radwasm_policy_verifications_total{{reconcile_policy=\"{refused}\",result=\"{reason}\"}}"
            );
            let counted = metric_sum(&metrics, &prefix) >= 1.0;
            let evented = policy_events(&system, &refused)
                .await
                .iter()
                .any(|r| r == reason);
            Ok((counted && evented).then_some(()))
        },
    )
    .await;
    // The platform's root replaced by another CA's: the running version no
    // longer verifies, and stops deciding.
    let stranger = Ca::new("Stranger");
    // In one update, as `kubectl edit` makes it.
    let config_maps: Api<ConfigMap> =
        Api::namespaced(system.client.clone(), system.policy_namespace());
    let mut current = config_maps.get(roots).await.expect("the roots ConfigMap");
    current.data = Some([("ca.pem".to_string(), stranger.root_pem())].into());
    config_maps
        .replace(roots, &PostParams::default(), &current)
        .await
        .expect("replace the roots");
    let message = refused_and_nothing_decides(
        &system,
        &trusted,
        "CertificateUntrusted",
        select,
        "t-certified",
    )
    .await;
    assert!(
        message.contains("no longer verifies") && message.contains("does not chain to a root"),
        "{message}"
    );
    // Keys and a certificate both: the real API server refuses the object
    // (the CRD's validation rule); the embedded one, which checks no rules,
    // stores it, and the controller refuses it (InvalidSpec).
    let mut both = verify(SUBJECT);
    both["configMap"] = json!({"namespace": system.policy_namespace(), "name": roots});
    let spec = json!({"module": {"oci": pushed.reference}, "verify": both,
                      "objectSelector": {"matchLabels": {"policy": "none"}}});
    let mut created = vec![trusted.clone(), refused.clone()];
    match Backend::from_env() {
        Backend::Real => {
            let name = format!("{}-both", system.namespace);
            let object: ReconcilePolicy = serde_json::from_value(json!({
                "apiVersion": "radwasm.io/v1alpha1", "kind": "ReconcilePolicy",
                "metadata": {"name": name, "labels": {SYSTEM_LABEL: system.namespace}},
                "spec": spec,
            }))
            .expect("a ReconcilePolicy");
            let error = policies(&system.client)
                .create(&PostParams::default(), &object)
                .await
                .expect_err("refused by the CRD's validation");
            assert!(
                error.to_string().contains("exactly one of configMap"),
                "{error}"
            );
        }
        Backend::Embedded => {
            let name = create_policy(&system, "both", spec).await;
            let invalid = wait_policy(&system, &name, "False", "InvalidSpec").await;
            let message = invalid
                .status
                .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
                .map(|c| c.message)
                .unwrap_or_default();
            assert!(message.contains("exactly one of configMap"), "{message}");
            created.push(name);
        }
    }
    let created: Vec<&str> = created.iter().map(String::as_str).collect();
    delete_policies(&system, &created).await;
    system.shutdown().await;
}
