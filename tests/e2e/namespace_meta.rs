//! The namespace's labels and annotations in the observation (contract
//! 0.6), end to end through the real binary: the one-layer rule of
//! `docs/layers.md` ("refuse templates in namespaces labelled `env=prod`
//! that have no `owner` annotation", `guests/prod-owner-layer`) run by the
//! controller as its `--policy`. A template in the labelled namespace is
//! refused and nothing reaches Radius; relabelling the namespace, with no
//! change to the template, reconciles it again and it deploys; labelled
//! `env=prod` again it is refused again; an `owner` annotation on the
//! namespace lets it pass. Each change is taken up by the namespace watch,
//! long before the minute after which a refused decision is retried anyway.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::harness::System;
use crate::policies::{deployments_of, labelled};

/// The reason and message of the template's `Ready` condition.
fn ready_condition(template: &radwasm::crd::DeploymentTemplate) -> (String, String) {
    template
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

/// Merge `metadata` into the scenario's namespace (as a user with
/// `kubectl label` / `kubectl annotate` would).
async fn patch_namespace(system: &System, metadata: serde_json::Value) {
    Api::<Namespace>::all(system.client.clone())
        .patch(
            &system.namespace,
            &PatchParams::default(),
            &Patch::Merge(&json!({ "metadata": metadata })),
        )
        .await
        .expect("patch the namespace");
}

/// A refused decision is retried a minute later (`REJECTED_RETRY`); a
/// reconcile well before that was started by the namespace's change.
const WELL_BEFORE_THE_RETRY: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_refuses_in_a_prod_namespace_and_relabelling_the_namespace_lets_it_deploy() {
    let layer = format!("{}/prod-owner-layer.wasm", env!("RADWASM_GUEST_DIR"));
    let mut system = System::start(&["--policy", &layer]).await;
    // Labelled while no controller runs: the next one lists the namespaces
    // before it decides anything, so its first decision sees the label.
    system.kill_controller();
    patch_namespace(&system, json!({"labels": {"env": "prod"}})).await;
    system.create(&labelled("shop", &[("app", "web")])).await;
    system.start_controller();

    let failed = system.wait_phase("shop", "Failed").await;
    let (reason, message) = ready_condition(&failed);
    assert_eq!(reason, "PolicyFailed", "{message}");
    assert!(message.contains("MissingNamespaceOwner"), "{message}");
    assert!(
        message.contains(&format!(
            "namespace {} is labelled env=prod and has no owner annotation",
            system.namespace
        )),
        "{message}"
    );
    assert_eq!(deployments_of(&system, "shop"), 0, "nothing reached Radius");

    // Relabelled: the template itself does not change, the namespace's
    // change reconciles it, and it deploys once.
    let relabelled = Instant::now();
    patch_namespace(&system, json!({"labels": {"env": "staging"}})).await;
    let ready = system.wait_phase("shop", "Ready").await;
    eprintln!("relabelled namespace to Ready: {:?}", relabelled.elapsed());
    assert!(
        relabelled.elapsed() < WELL_BEFORE_THE_RETRY,
        "Ready {:?} after the relabel: the namespace's change did not reconcile it",
        relabelled.elapsed()
    );
    assert_eq!(
        ready.metadata.generation,
        Some(1),
        "no change to the template"
    );
    assert_eq!(deployments_of(&system, "shop"), 1);
    system
        .wait_for_log(
            "the namespace's labels or annotations changed; reconciling its objects again",
        )
        .await;

    // Labelled prod again, the deployed template is refused again (nothing
    // is deleted: a refusal only marks the decision failed).
    patch_namespace(&system, json!({"labels": {"env": "prod"}})).await;
    let failed = system.wait_phase("shop", "Failed").await;
    assert!(ready_condition(&failed).1.contains("MissingNamespaceOwner"));

    // An annotation alone (no label changes) is a change too: with an
    // owner the template passes, Ready without deploying again.
    let annotated = Instant::now();
    patch_namespace(&system, json!({"annotations": {"owner": "team-shop"}})).await;
    system.wait_phase("shop", "Ready").await;
    eprintln!("annotated namespace to Ready: {:?}", annotated.elapsed());
    assert!(
        annotated.elapsed() < WELL_BEFORE_THE_RETRY,
        "Ready {:?} after the annotation",
        annotated.elapsed()
    );
    assert_eq!(deployments_of(&system, "shop"), 1, "not deployed again");

    system
        .templates()
        .delete("shop", &Default::default())
        .await
        .expect("delete");
    system.wait_gone("shop").await;
    system.shutdown().await;
}
