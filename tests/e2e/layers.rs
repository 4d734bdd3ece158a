//! Layers (`docs/layers.md`) end to end through the real binary: a
//! one-rule layer (refuse templates without a `team` label, the default
//! policy otherwise), written in Rust (`guests/team-label-layer`, stacked by
//! the controller and linked over the default), Python
//! and JavaScript (scaffolded by `radwasm policy new --lang python|js` and
//! built with the scaffolds' own commands), pulled from a loopback OCI registry as a `Shadow`
//! canary, then enforcing; and a layer over another `ReconcilePolicy` named
//! by `spec.base`, refused while that base is missing and healed when it
//! appears; and a layer that keeps a deleted template's data store in
//! Radius (`detach-resource`). Counts what reaches Radius. A restarted
//! controller maps the layer from its compile cache instead of compiling
//! it again.

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::harness::System;
use crate::policies::{
    create_policy, decided_by, delete_policies, deployments_of, guest, labelled, log_lines,
    module_from, policies, put_module, wait_decided_by, wait_log_lines, wait_policy,
};
use crate::realkube::eventually;
use radwasm_test_support::scaffold::Scaffold;

/// Decisions decided twice (out of fuel on the worker, then on the
/// blocking pool) so far, over every policy.
fn reruns(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("radwasm_policy_decision_reruns_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// The reason and message of the template's `Ready` condition.
fn ready_condition(template: &radwasm::crd::DeploymentTemplate) -> (String, String) {
    template
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_from_a_registry_shadows_then_enforces_its_one_rule() {
    shadow_then_enforce(guest("team-label-layer")).await;
}

/// The same layer built with the default policy linked in
/// (`export_linked_layer!`): a policy to the controller, deciding the same
/// in one instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_linked_over_the_default_shadows_then_enforces_its_one_rule() {
    shadow_then_enforce(guest("team-label-linked")).await;
}

/// The same layer written in Python: scaffolded by `radwasm policy new
/// --lang python` outside the repository and built with the scaffold's own
/// command and pinned componentize-py. An interpreted guest's decisions
/// fit the fuel slice the controller learns for it: in steady state none
/// is decided twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_layer_from_a_registry_shadows_then_enforces_its_one_rule() {
    let wasm = tokio::task::spawn_blocking(|| {
        let binary = std::path::Path::new(env!("CARGO_BIN_EXE_radwasm"));
        Scaffold::new(binary, "team-py", "python").build_python()
    })
    .await
    .expect("build the Python layer");
    shadow_then_enforce(wasm).await;
}

/// The same layer in JavaScript, built by jco with the QuickJS engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_js_layer_from_a_registry_shadows_then_enforces_its_one_rule() {
    let wasm = tokio::task::spawn_blocking(|| {
        let binary = std::path::Path::new(env!("CARGO_BIN_EXE_radwasm"));
        Scaffold::new(binary, "team-js", "js").build_js()
    })
    .await
    .expect("build the JavaScript layer");
    shadow_then_enforce(wasm).await;
}

/// A one-rule layer (refuse templates without a `team` label with
/// `MissingTeamLabel`) pushed to a loopback registry and selected for one
/// namespace: as a `Shadow` it only counts, enforcing it refuses and then
/// deploys once when labelled; a restarted controller maps it from the
/// compile cache. No decision of the layer is decided twice after its
/// first.
async fn shadow_then_enforce(wasm: Vec<u8>) {
    let registry = crate::registry::Registry::start();
    let pushed = radwasm::policy::source::oci::push(
        &registry.reference("policies/team-label:v1"),
        &wasm,
        &registry.options(),
    )
    .await
    .expect("push the layer");
    let cache = tempfile::tempdir().expect("compile cache dir");
    let cache_arg = format!("--compile-cache={}", cache.path().display());
    let mut system =
        System::start(&["--policy-insecure-registry", &registry.addr, &cache_arg]).await;
    let layer = create_policy(
        &system,
        "team-label",
        json!({"module": {"oci": pushed.reference}, "mode": "Shadow"}),
    )
    .await;
    // Not its status: on the shared real cluster, another scenario's
    // controller (without this registry as insecure) fails to fetch the
    // module and says so in the same status. Activating it compiles it
    // first: the Python layer's 18 MB take seconds alone, and far longer
    // while the other scenarios share the two cores.
    system
        .wait_for_log_within(
            &format!("policy version activated reconcile_policy={layer} "),
            Duration::from_secs(180),
        )
        .await;
    let digest = radwasm::policy::digest(&wasm);
    let digest_field = format!("digest=\"{digest}\"");
    assert_eq!(
        log_lines(&system, &["policy compiled", &digest_field]),
        1,
        "the first controller compiles the layer once"
    );

    // As a shadow it changes nothing: both templates are deployed by the
    // controller's default policy; the layer's refusal of the unlabelled
    // one is counted, its agreement on the labelled one too.
    system
        .create(&labelled("labelled", &[("team", "payments")]))
        .await;
    system.create(&labelled("unlabelled", &[])).await;
    for name in ["labelled", "unlabelled"] {
        let ready = system.wait_phase(name, "Ready").await;
        assert_eq!(decided_by(&ready), None, "{name}: the default decided");
        assert_eq!(deployments_of(&system, name), 1, "{name}");
    }
    let metrics = eventually(
        "the layer's shadow decisions in the metrics",
        Duration::from_secs(60),
        || async {
            let metrics = system.metrics().await;
            let has = |outcome: &str| {
                metrics.lines().any(|l| {
                    l.starts_with("radwasm_shadow_decisions_total")
                        && l.contains("kind=\"DeploymentTemplate\"")
                        && l.contains(&format!("outcome=\"{outcome}\""))
                        && l.contains(&format!("shadow=\"{layer}\""))
                })
            };
            Ok((has("failed") && has("agreed")).then_some(metrics))
        },
    )
    .await;
    assert!(metrics.contains("radwasm_shadow_decisions_total"));

    // Enforcing: a new unlabelled template is refused, nothing reaches
    // Radius; labelled, it deploys once, with no spec change.
    policies(&system.client)
        .patch(
            &layer,
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"mode": "Enforce"}})),
        )
        .await
        .expect("enforce");
    wait_decided_by(&system, "labelled", Some(&layer)).await;
    let reruns_before = reruns(&system.metrics().await);
    system.create(&labelled("refused", &[])).await;
    let failed = system.wait_phase("refused", "Failed").await;
    let (reason, message) = ready_condition(&failed);
    assert_eq!(reason, "PolicyFailed", "{message}");
    assert!(message.contains("MissingTeamLabel"), "{message}");
    assert_eq!(
        deployments_of(&system, "refused"),
        0,
        "nothing reached Radius"
    );

    let mut template = system.templates().get("refused").await.expect("get");
    template
        .metadata
        .labels
        .get_or_insert_default()
        .insert("team".into(), "payments".into());
    template.metadata.managed_fields = None;
    system
        .templates()
        .replace("refused", &Default::default(), &template)
        .await
        .expect("label it");
    let ready = system.wait_phase("refused", "Ready").await;
    assert_eq!(ready.metadata.generation, Some(1), "no spec change");
    assert_eq!(decided_by(&ready).as_deref(), Some(layer.as_str()));
    assert_eq!(deployments_of(&system, "refused"), 1);
    assert_eq!(deployments_of(&system, "labelled"), 1, "not deployed again");
    assert_eq!(
        reruns(&system.metrics().await),
        reruns_before,
        "a decision of the layer was decided twice in steady state"
    );

    // A restarted controller maps the layer from its compile cache; it
    // does not compile it again.
    system.kill_controller();
    let mut restarted = system.spawn_controller();
    wait_log_lines(
        &system,
        &["policy loaded from the compile cache", &digest_field],
        1,
    )
    .await;
    assert_eq!(
        log_lines(&system, &["policy compiled", &digest_field]),
        1,
        "compiled by the first controller only"
    );

    // Deleting a labelled template goes through the default's deletion.
    system
        .templates()
        .delete("refused", &Default::default())
        .await
        .expect("delete");
    system.wait_gone("refused").await;
    let _ = restarted.kill();
    let _ = restarted.wait();
    delete_policies(&system, &[&layer]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_waits_for_its_named_base_and_decides_over_it() {
    let system = System::start(&[]).await;
    put_module(&system, "team-label", guest("team-label-layer")).await;
    let base = format!("{}-platform", system.namespace);
    let layer = create_policy(
        &system,
        "team-label",
        json!({"module": module_from(&system, "team-label"), "base": base}),
    )
    .await;
    let refused = wait_policy(&system, &layer, "False", "BaseNotFound").await;
    let error = refused
        .status
        .and_then(|s| s.last_error)
        .unwrap_or_default();
    assert!(error.contains(&base), "{error}");
    system
        .create(&labelled("app", &[("team", "payments")]))
        .await;
    let failed = system.wait_phase("app", "Failed").await;
    assert_eq!(ready_condition(&failed).0, "PolicyNotReady");
    assert_eq!(deployments_of(&system, "app"), 0);

    // The base appears (selecting nothing itself): the layer is retried
    // with backoff, loads over it, and the template deploys once.
    let created = create_policy(
        &system,
        "platform",
        json!({"module": {"builtin": "default"},
               "objectSelector": {"matchLabels": {"nothing": "matches-this"}}}),
    )
    .await;
    assert_eq!(created, base);
    wait_policy(&system, &base, "True", "Loaded").await;
    let loaded = wait_policy(&system, &layer, "True", "Loaded").await;
    let status = loaded.status.expect("status");
    assert_eq!(status.name.as_deref(), Some("team-label-layer"));
    assert!(
        status.worlds.iter().any(|w| w == "template-layer@0.6.0"),
        "{:?}",
        status.worlds
    );
    let ready = system.wait_phase("app", "Ready").await;
    assert_eq!(decided_by(&ready).as_deref(), Some(layer.as_str()));
    assert_eq!(deployments_of(&system, "app"), 1);
    delete_policies(&system, &[&layer, &base]).await;
    system.shutdown().await;
}

/// The `keep-data-stores` layer (`guests/keep-data-stores`), pulled from a
/// loopback registry and enforcing: a template with a data store and a
/// container is deleted; the container (and the application and
/// environment after it) get one DELETE each, the data store none and
/// stays in Radius, the template goes, and its `Deleted` event says what
/// was deleted and what kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_keeps_the_data_store_of_a_deleted_template() {
    let registry = crate::registry::Registry::start();
    let pushed = radwasm::policy::source::oci::push(
        &registry.reference("policies/keep-data-stores:v1"),
        &guest("keep-data-stores"),
        &registry.options(),
    )
    .await
    .expect("push the layer");
    let system = System::start(&["--policy-insecure-registry", &registry.addr]).await;
    let layer = create_policy(
        &system,
        "keep-data-stores",
        json!({"module": {"oci": pushed.reference}}),
    )
    .await;
    system
        .wait_for_log_within(
            &format!("policy version activated reconcile_policy={layer} "),
            Duration::from_secs(180),
        )
        .await;

    let mut arm: serde_json::Value = serde_json::from_str(&crate::harness::fixture(
        "deploymenttemplate-outputresources-1.json",
    ))
    .expect("fixture");
    arm["resources"]["cache"] = json!({
        "import": "Radius",
        "type": "Applications.Datastores/redisCaches@2023-10-01-preview",
        "properties": {
            "name": "kept-cache",
            "properties": {
                "application": "[reference('outputResourcesApplication').id]",
                "environment": "[reference('outputResourcesEnvironment').id]"
            }
        },
        "dependsOn": ["outputResourcesApplication"]
    });
    system
        .create(&crate::harness::template("app", &arm.to_string(), ""))
        .await;
    let ready = system.wait_phase("app", "Ready").await;
    assert_eq!(decided_by(&ready).as_deref(), Some(layer.as_str()));
    let ids = system.radius().resource_ids();
    let id_of = |kind: &str| {
        ids.iter()
            .find(|id| id.to_ascii_lowercase().contains(kind))
            .cloned()
            .unwrap_or_else(|| panic!("no {kind} in {ids:?}"))
    };
    let cache = id_of("/applications.datastores/rediscaches/kept-cache");
    let container = id_of("/applications.core/containers/");

    system
        .templates()
        .delete("app", &Default::default())
        .await
        .expect("delete the template");
    system.wait_gone("app").await;
    let stats = system.radius().stats();
    assert_eq!(
        stats.deletes_for(&container),
        1,
        "one DELETE for the container"
    );
    assert_eq!(stats.deletes_for(&cache), 0, "none for the data store");
    assert!(
        system.radius().resource(&cache).is_some(),
        "the data store is still in Radius"
    );
    let events = system.events_for("app").await;
    assert!(
        events
            .iter()
            .any(|e| e == "Deleted 3 resources deleted, 1 kept in Radius (detached by the policy)"),
        "{events:?}"
    );
    delete_policies(&system, &[&layer]).await;
    system.shutdown().await;
}
