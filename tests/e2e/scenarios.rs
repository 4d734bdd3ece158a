//! The scenarios of issue 5, each a story: given these objects and this Radius
//! behaviour, the controller ends in this state.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use radwasm::crd::DeploymentTemplate;
use serde_json::json;

use crate::harness::{System, fixture, id, template};

const TEMPLATE_FINALIZER: &str = "radapp.io/deployment-template-finalizer";
const RESOURCE_FINALIZER: &str = "radapp.io/deployment-resource-finalizer";

fn env_parameters(name: &str) -> String {
    json!({"name": {"value": name}, "namespace": {"value": "default"}}).to_string()
}

fn radius_ids(system: &System) -> Vec<String> {
    let mut ids: Vec<String> = system
        .radius()
        .resource_ids()
        .into_iter()
        .map(|id| id.to_ascii_lowercase())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_becomes_ready_with_one_owned_resource_per_output() {
    let system = System::start(&[]).await;
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-outputresources-1.json"),
            "",
        ))
        .await;
    let ready = system.wait_phase("app", "Ready").await;

    let status = ready.status.clone().expect("status");
    let expected = vec![
        id("environments", "output-resources-environment"),
        id("applications", "output-resources-application"),
        id("containers", "output-resources-container"),
    ];
    let mut outputs = status.output_resources.clone();
    outputs.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(outputs, want);
    assert!(ready.finalizers().iter().any(|f| f == TEMPLATE_FINALIZER));
    assert_eq!(
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        status.policy.as_ref().map(|p| p.name.as_str()),
        Some("default")
    );

    // One DeploymentResource per output, owned (controller ref), with the
    // finalizer, each Ready.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let owned = system.owned("app").await;
        let ready = owned
            .iter()
            .filter(|r| r.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready"))
            .filter(|r| r.finalizers().iter().any(|f| f == RESOURCE_FINALIZER))
            .count();
        if owned.len() == 3 && ready == 3 {
            let mut ids: Vec<String> = owned.iter().map(|r| r.spec.id.clone()).collect();
            ids.sort();
            assert_eq!(ids, want);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "resources not ready: {owned:#?}\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_parameters_redeploy_once_and_the_diff_is_cleaned_up() {
    let system = System::start(&[]).await;
    system
        .create(&template(
            "env",
            &fixture("env.json"),
            &env_parameters("blue"),
        ))
        .await;
    system.wait_phase("env", "Ready").await;
    assert_eq!(system.owned("env").await.len(), 1);

    system
        .templates()
        .patch(
            "env",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": env_parameters("green")}})),
        )
        .await
        .expect("patch parameters");
    let ready = system.wait_phase("env", "Ready").await;
    assert_eq!(
        ready.status.expect("status").output_resources,
        vec![id("environments", "green-env")]
    );
    // The blue environment's DeploymentResource drains (deleting it deletes
    // the Radius resource), then only green is left.
    system
        .wait_template("env", "one owned resource", |_| true)
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let owned = system.owned("env").await;
        if owned.len() == 1 && owned[0].spec.id == id("environments", "green-env") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{owned:#?}\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        system.radius().stats().deployment_puts,
        2,
        "exactly one new deployment"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_spec_after_a_restart_deploys_nothing() {
    let mut system = System::start(&[]).await;
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    system.wait_phase("app", "Ready").await;
    let status = system.stop_controller();
    assert!(
        status.success(),
        "SIGTERM must stop the controller cleanly: {status:?}\n{}",
        system.logs()
    );

    // Apply the same spec again (a no-op update) and start a new controller.
    system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("touch");
    system.start_controller();
    tokio::time::sleep(Duration::from_secs(2)).await;
    system.wait_phase("app", "Ready").await;
    assert_eq!(
        system.radius().stats().deployment_puts,
        1,
        "no new deployment\n{}",
        system.logs()
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_deployment_is_reported_and_a_fixed_spec_recovers() {
    let system = System::start(&[]).await;
    system.radius().faults().fail_next_deployments(
        1,
        "DeploymentFailed",
        "the container image could not be pulled",
    );
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    let failed = system.wait_phase("app", "Failed").await;
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains("DeploymentFailed") && message.contains("could not be pulled"),
        "{message}"
    );
    let events = system.events_for("app").await;
    assert!(
        events.iter().any(|e| e.contains("DeploymentFailed")),
        "{events:?}"
    );

    // Fixing the spec (any change: a new generation) deploys again.
    system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": "{}"}})),
        )
        .await
        .expect("fix");
    system.wait_phase("app", "Ready").await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_template_deletes_radius_resources_in_a_safe_order() {
    let system = System::start(&[]).await;
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-outputresources-1.json"),
            "",
        ))
        .await;
    system.wait_phase("app", "Ready").await;
    assert_eq!(radius_ids(&system).len(), 3);

    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    assert!(
        radius_ids(&system).is_empty(),
        "left in Radius: {:?}",
        radius_ids(&system)
    );
    assert!(system.owned("app").await.is_empty());
    let order: Vec<String> = system
        .radius()
        .stats()
        .deleted
        .iter()
        .map(|id| id.to_ascii_lowercase())
        .collect();
    let position = |kind: &str| {
        order
            .iter()
            .position(|id| id.contains(kind))
            .unwrap_or(usize::MAX)
    };
    assert!(
        position("/containers/") < position("/applications/"),
        "{order:?}"
    );
    assert!(
        position("/applications/") < position("/environments/"),
        "{order:?}"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_controller_resumes_the_same_operation() {
    // A slow deployment, so the kill lands while it is in flight.
    let mut system = System::start_with(&[], Duration::from_secs(3)).await;
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    system
        .wait_template("app", "an operation recorded in status", |t| {
            t.and_then(|t| t.status.as_ref())
                .is_some_and(|s| s.operation.is_some())
        })
        .await;
    system.kill_controller();
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.start_controller();
    system.wait_phase("app", "Ready").await;
    assert_eq!(
        system.radius().stats().deployment_puts,
        1,
        "exactly one deployment\n{}",
        system.logs()
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_the_template_naming_the_field_without_calling_radius() {
    let system = System::start(&[]).await;
    system.create(&template("broken", "{ not json", "")).await;
    let mut bad_params = template("params", &fixture("env.json"), r#"{"name": "blue"}"#);
    bad_params.metadata.name = Some("params".into());
    system.create(&bad_params).await;
    let mut outside = template(
        "outside",
        &fixture("deploymenttemplate-withresources.json"),
        "",
    );
    if let Some(radius) = outside
        .spec
        .provider_config
        .as_mut()
        .and_then(|p| p.radius.as_mut())
    {
        radius.value.scope = "/subscriptions/0000/resourceGroups/prod".into();
    }
    system.create(&outside).await;
    // A good template next to them still works.
    system
        .create(&template(
            "good",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;

    for (name, field) in [
        ("broken", "spec.template"),
        ("params", "spec.parameters"),
        ("outside", "spec.providerConfig"),
    ] {
        let failed = system.wait_phase(name, "Failed").await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains(field), "{name}: {message}");
        let events = system.events_for(name).await;
        assert!(
            events.iter().any(|e| e.contains("InvalidSpec")),
            "{name}: {events:?}"
        );
    }
    system.wait_phase("good", "Ready").await;
    assert_eq!(
        system.radius().stats().deployment_puts,
        1,
        "only the good template reached Radius"
    );
    system.shutdown().await;
}

async fn annotated(
    system: &System,
    name: &str,
    annotations: &[(&str, &str)],
) -> DeploymentTemplate {
    let mut object = template(
        name,
        &fixture("deploymenttemplate-outputresources-1.json"),
        "",
    );
    object.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    system.create(&object).await;
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_policy_skip_never_touches_radius() {
    let system = System::start(&[]).await;
    annotated(
        &system,
        "observed",
        &[("radapp.io/reconcile-policy", "skip")],
    )
    .await;
    system
        .wait_template("observed", "skip reported", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.contains("reconcile-policy is skip"))
        })
        .await;
    system
        .templates()
        .delete("observed", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("observed").await;
    assert_eq!(system.radius().stats().deployment_puts, 0);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_on_delete_leaves_radius_resources_in_place() {
    let system = System::start(&[]).await;
    annotated(
        &system,
        "kept",
        &[("radapp.io/reconcile-policy", "detach-on-delete")],
    )
    .await;
    system.wait_phase("kept", "Ready").await;
    system
        .templates()
        .delete("kept", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("kept").await;
    assert_eq!(radius_ids(&system).len(), 3, "Radius resources must stay");
    assert!(system.owned("kept").await.is_empty());
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_pauses_until_removed_and_depends_on_waits_for_ready() {
    let system = System::start(&[]).await;
    annotated(&system, "base", &[("radapp.io/hold", "true")]).await;
    annotated(&system, "dependent", &[("radapp.io/depends-on", "base")]).await;
    system.wait_phase("base", "Held").await;
    system
        .wait_template("dependent", "waiting for base", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.contains("waiting for dependencies: base"))
        })
        .await;
    assert_eq!(system.radius().stats().deployment_puts, 0);

    system
        .templates()
        .patch(
            "base",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"radapp.io/hold": null}}})),
        )
        .await
        .expect("remove hold");
    system.wait_phase("base", "Ready").await;
    system.wait_phase("dependent", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 2);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guardrail_policy_changes_the_outcome_with_the_same_binary() {
    let guardrail = format!("{}/image-tag-guardrail.wasm", env!("RADWASM_GUEST_DIR"));
    let system = System::start(&["--policy", &guardrail]).await;
    // outputresources-1 runs image "nginx" (no tag): refused.
    system
        .create(&template(
            "unpinned",
            &fixture("deploymenttemplate-outputresources-1.json"),
            "",
        ))
        .await;
    let failed = system.wait_phase("unpinned", "Failed").await;
    let status = failed.status.expect("status");
    assert!(status.message.unwrap_or_default().contains("nginx"));
    assert_eq!(
        status.policy.map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );
    // A template without containers deploys as with the default policy.
    system
        .create(&template(
            "env",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    system.wait_phase("env", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.shutdown().await;
}
