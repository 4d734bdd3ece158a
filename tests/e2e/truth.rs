//! Scenarios replayed from what users hit, black box: Radius refusing or
//! failing deletes, 5xx on DELETE, a spec changed while a deployment runs,
//! a policy that names its deployments its own way. Each counts what reached
//! Radius and reads status from a watch, as a GitOps health check would.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use radwasm::crd::DeploymentTemplate;
use serde_json::json;

use crate::harness::{System, app_template, fixture, id, template};

/// Every status a watch saw for one template: (generation, observed
/// generation, phase, Ready status, status hash).
type Seen = Arc<Mutex<Vec<(i64, i64, String, String, String)>>>;

fn watch_statuses(system: &System, name: &str) -> (Seen, tokio::task::JoinHandle<()>) {
    let seen: Seen = Arc::default();
    let stream = watcher(
        system.templates(),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .applied_objects();
    let task = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(template) = event else { continue };
                let status = template.status.clone().unwrap_or_default();
                let ready = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| c.status.clone())
                    .unwrap_or_default();
                if let Ok(mut seen) = seen.lock() {
                    seen.push((
                        template.metadata.generation.unwrap_or_default(),
                        status.observed_generation.unwrap_or_default(),
                        status.phrase.unwrap_or_default(),
                        ready,
                        status.status_hash.unwrap_or_default(),
                    ));
                }
            }
        })
    };
    (seen, task)
}

fn hash_of(object: &DeploymentTemplate) -> String {
    radwasm::controller::observe::spec_hash(&radwasm::controller::observe::spec_texts(object))
}

/// Delete the template and return the DeploymentResource of its container,
/// which is deleted first (the others wait for it).
async fn delete_and_count_container_deletes(system: &System, window: Duration) -> u64 {
    let container = id("containers", "output-resources-container");
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    tokio::time::sleep(window).await;
    system.radius().stats().deletes_for(&container)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delete_is_retried_on_the_policys_interval_not_in_a_storm() {
    let system = System::start(&[]).await;
    system.ready_app().await;
    // Radius answers every DELETE 409 Conflict for now.
    system.radius().faults().refuse_next_deletes(1_000);
    // The default policy retries a failed delete after 10 s: in 12 s, the
    // first attempt and at most one retry (before the fix: 251 in 13 s).
    let deletes = delete_and_count_container_deletes(&system, Duration::from_secs(12)).await;
    assert!(
        (1..=2).contains(&deletes),
        "{deletes} DELETEs of the container in 12 s\n{}",
        system.logs()
    );
    // The resource being deleted says what is failing.
    let resources = system.owned("app").await;
    let container = resources
        .iter()
        .find(|r| r.spec.id.contains("/containers/"))
        .expect("the container's DeploymentResource is still there");
    let status = container.status.clone().unwrap_or_default();
    let message = status.message.unwrap_or_default();
    assert!(message.contains("Conflict"), "{message}");
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "False" && c.reason == "DeleteFailed"),
        "{:?}",
        status.conditions
    );
    let version: u64 = container
        .resource_version()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    let created: u64 = system
        .resources()
        .list(&Default::default())
        .await
        .expect("list")
        .metadata
        .resource_version
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(version <= created, "resourceVersions are comparable here");

    // Radius accepts deletes again: everything goes.
    system.radius().faults().refuse_next_deletes(0);
    system.wait_gone("app").await;
    assert!(system.radius().resource_ids().is_empty());
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delete_operation_is_paced_like_a_refused_one() {
    let system = System::start(&[]).await;
    system.ready_app().await;
    system.radius().faults().fail_next_deletes(1_000);
    let deletes = delete_and_count_container_deletes(&system, Duration::from_secs(12)).await;
    assert!(
        (1..=2).contains(&deletes),
        "{deletes} DELETEs of the container in 12 s (before the fix: 129 in 5 s)\n{}",
        system.logs()
    );
    system.radius().faults().fail_next_deletes(0);
    system.wait_gone("app").await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_meeting_server_errors_says_so_in_status_and_is_paced() {
    let system = System::start(&[]).await;
    system.ready_app().await;
    system.radius().faults().set_error_rate(1.0);
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    // The client's own retries take a few seconds; then the status says it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let message = loop {
        let container = system
            .owned("app")
            .await
            .into_iter()
            .find(|r| r.spec.id.contains("/containers/"));
        let status = container.and_then(|c| c.status).unwrap_or_default();
        if status.phrase.as_deref() == Some("Failed") {
            break status.message.unwrap_or_default();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the failing DELETE never showed in status: {status:?}\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        message.contains("deleting") && message.contains("failed"),
        "{message}"
    );
    system.radius().faults().set_error_rate(0.0);
    system.wait_gone("app").await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_changed_during_a_deployment_is_ready_only_once_it_is_deployed() {
    let system = System::start_with(&[], Duration::from_secs(2)).await;
    let first = app_template("app");
    let (seen, watch) = watch_statuses(&system, "app");
    system.create(&first).await;
    system
        .wait_template("app", "a deployment in flight", |t| {
            t.and_then(|t| t.status.as_ref())
                .is_some_and(|s| s.operation.is_some())
        })
        .await;
    let changed = system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": "{}"}})),
        )
        .await
        .expect("change the spec");
    let new_hash = hash_of(&changed);
    let new_generation = changed.metadata.generation.unwrap_or_default();
    system.wait_phase("app", "Ready").await;
    let ready = system.templates().get("app").await.expect("template");
    assert_eq!(
        ready.status.as_ref().and_then(|s| s.status_hash.clone()),
        Some(new_hash.clone())
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    watch.abort();
    let seen = seen.lock().expect("seen").clone();
    for (generation, observed, phase, ready, hash) in &seen {
        if *observed == new_generation && (ready == "True" || phase == "Ready") {
            assert_eq!(
                hash, &new_hash,
                "Ready at generation {generation} with another spec's hash: {seen:?}"
            );
        }
    }
    // Every DeploymentResource blocks its owner's foreground deletion.
    for resource in system.owned("app").await {
        let owner = resource.owner_references().first().cloned().expect("owner");
        assert_eq!(owner.block_owner_deletion, Some(true), "{owner:?}");
        assert_eq!(owner.controller, Some(true));
    }
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_specs_failed_deployment_does_not_fail_the_new_generation() {
    let system = System::start_with(&[], Duration::from_secs(2)).await;
    system
        .radius()
        .faults()
        .fail_next_deployments(1, "RecipeFailed", "a transient cloud error");
    let (seen, watch) = watch_statuses(&system, "app");
    system.create(&app_template("app")).await;
    system
        .wait_template("app", "a deployment in flight", |t| {
            t.and_then(|t| t.status.as_ref())
                .is_some_and(|s| s.operation.is_some())
        })
        .await;
    let changed = system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": "{}"}})),
        )
        .await
        .expect("change the spec");
    let new_generation = changed.metadata.generation.unwrap_or_default();
    // Before the fix: Failed at the new generation for ever, 0 PUTs for it.
    system.wait_phase("app", "Ready").await;
    watch.abort();
    let seen = seen.lock().expect("seen").clone();
    assert!(
        !seen
            .iter()
            .any(|(_, observed, phase, _, _)| *observed == new_generation && phase == "Failed"),
        "an older spec's failure was recorded against generation {new_generation}: {seen:?}"
    );
    let events = system.events_for("app").await;
    assert!(
        events.iter().any(|e| e.contains("a transient cloud error")),
        "the failure is still reported: {events:?}"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_naming_its_deployments_differently_survives_a_restart_mid_deployment() {
    // The test guest's rename-deployments mode decides as the default policy
    // but names deployments `renamed-{hash}`: the host must follow exactly
    // the name the plan gave, not assume the default policy's naming.
    // The deployment runs 10 s: the restart must come while it runs, and a
    // loaded machine (the shared real cluster) can take seconds to restart.
    let misbehaving = format!("{}/misbehaving-policy.wasm", env!("RADWASM_GUEST_DIR"));
    let mut system = System::start_with(&["--policy", &misbehaving], Duration::from_secs(10)).await;
    let mut object = app_template("app");
    object.metadata.annotations = Some(
        [(
            "radwasm.test/misbehave".to_string(),
            "rename-deployments".to_string(),
        )]
        .into(),
    );
    let hash = hash_of(&object);
    let name = format!("renamed-{}", &hash[..10]);
    let phases = system.record_phases("app");
    system.create(&object).await;
    system
        .wait_template("app", "the renamed deployment in flight", |t| {
            t.and_then(|t| t.status.as_ref())
                .is_some_and(|s| s.operation.is_some())
        })
        .await;
    // Killed mid-deployment, and its record of the operation lost with it.
    system.kill_controller();
    system
        .templates()
        .patch_status(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"operation": null}})),
        )
        .await
        .expect("lose the operation record");
    system.start_controller();
    system.wait_phase("app", "Ready").await;
    assert!(
        !phases.phases().iter().any(|p| p == "Failed"),
        "{:?}\n{}",
        phases.phases(),
        system.logs()
    );
    let stats = system.radius().stats();
    assert_eq!(
        stats.deployment_puts_for(&name),
        1,
        "the running deployment was followed, not sent again: {stats:?}"
    );
    assert_eq!(stats.deployment_puts, 1);
    let ready = system.templates().get("app").await.expect("template");
    assert!(
        ready
            .status
            .and_then(|s| s.resource)
            .is_some_and(|r| r.ends_with(&name)),
        "status names the deployment the policy chose"
    );
    // Every metric the controller registers has moved by now.
    let metrics = system.metrics().await;
    for family in [
        "radwasm_reconciles_total",
        "radwasm_reconcile_seconds_count",
        "radwasm_policy_decisions_total",
        "radwasm_policy_decision_seconds_count",
        "radwasm_policy_decision_fuel_count",
        "radwasm_policy_loads_total",
        "radwasm_radius_requests_total",
        "radwasm_radius_request_seconds_count",
    ] {
        assert!(
            metrics.lines().any(|line| line.starts_with(family)
                && !line.ends_with(" 0")
                && !line.ends_with(" 0.0")),
            "{family} never moved:\n{metrics}"
        );
    }
    // The Kubernetes requests are counted by what they did: the watches,
    // the status writes, and the three DeploymentResources created.
    for (verb, resource, at_least) in [
        ("watch", "deploymenttemplates", 1.0),
        ("patch", "deploymenttemplates/status", 1.0),
        ("create", "deploymentresources", 3.0),
    ] {
        let count = crate::harness::metric_sum(
            &metrics,
            &format!(r#"radwasm_kube_requests_total{{verb="{verb}",resource="{resource}",code="2"#),
        );
        assert!(
            count >= at_least,
            "{verb} {resource}: {count} answered 2xx, expected at least {at_least}:\n{metrics}"
        );
    }
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_that_retries_at_once_is_held_to_the_hosts_floor() {
    // The test guest's `hasty` mode decides as the default policy but asks
    // to be requeued at once whatever happened: the host still spaces a
    // failed Radius mutation by at least 1 s per object.
    let misbehaving = format!("{}/misbehaving-policy.wasm", env!("RADWASM_GUEST_DIR"));
    let system = System::start(&["--policy", &misbehaving]).await;
    let mut object = app_template("app");
    object.metadata.annotations =
        Some([("radwasm.test/misbehave".to_string(), "hasty".to_string())].into());
    system.create(&object).await;
    system.wait_phase("app", "Ready").await;
    system.radius().faults().refuse_next_deletes(1_000);
    let deletes = delete_and_count_container_deletes(&system, Duration::from_secs(6)).await;
    assert!(
        (2..=8).contains(&deletes),
        "{deletes} DELETEs in 6 s: at most about one a second\n{}",
        system.logs()
    );
    let metrics = system.metrics().await;
    for family in [
        "radwasm_radius_mutations_held_back_total",
        "radwasm_remembered_objects",
    ] {
        assert!(
            metrics.lines().any(|line| line.starts_with(family)
                && !line.ends_with(" 0")
                && !line.ends_with(" 0.0")),
            "{family} did not move:\n{metrics}"
        );
    }
    assert!(
        metrics.contains(
            r#"radwasm_radius_requests_total{method="DELETE",outcome="client_error",code="409"}"#
        ),
        "{metrics}"
    );
    system.radius().faults().refuse_next_deletes(0);
    system.wait_gone("app").await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_built_against_contract_0_1_still_runs_the_controller() {
    // The default policy as built for contract 0.1: an older custom policy
    // keeps working on a host that speaks 0.2.
    let old = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/contract-0.1/default-policy.wasm"
    );
    let system = System::start(&["--policy", old]).await;
    system.ready_app().await;
    let ready = system.templates().get("app").await.expect("template");
    assert_eq!(
        ready.status.and_then(|s| s.policy).map(|p| p.name),
        Some("default".to_string())
    );
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    assert!(system.radius().resource_ids().is_empty());
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_radius_failed_is_retried_with_backoff_and_its_records_go_with_the_template() {
    let system = System::start(&[]).await;
    system
        .radius()
        .faults()
        .fail_next_deployments(2, "RecipeFailed", "a transient cloud error");
    let mut object = app_template("app");
    // First retry after 1 s, then 2 s.
    object.metadata.annotations =
        Some([("radapp.io/deployment-retry".to_string(), "1s".to_string())].into());
    let phases = system.record_phases("app");
    system.create(&object).await;
    system.wait_phase("app", "Ready").await;
    assert!(
        phases.phases().iter().any(|p| p == "Failed"),
        "it failed first: {:?}",
        phases.phases()
    );
    let stats = system.radius().stats();
    assert_eq!(
        stats.deployment_puts, 3,
        "two failures, then success: one deployment per backoff step ({stats:?})"
    );
    let ready = system.templates().get("app").await.expect("template");
    let status = ready.status.expect("status");
    assert!(status.last_failure.is_none(), "cleared by the success");
    assert_eq!(status.deployments.len(), 1, "{:?}", status.deployments);
    let record = status.deployments[0].clone();
    assert!(system.radius().deployment(&record).is_some());

    // Deleting the template removes its deployment record from Radius too.
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    assert!(
        system.radius().deployment(&record).is_none(),
        "the deployment record {record} was left behind"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_that_depend_on_each_other_fail_naming_the_cycle() {
    let system = System::start(&[]).await;
    for (name, other) in [("left", "right"), ("right", "left")] {
        let mut object = template(name, &fixture("deploymenttemplate-withresources.json"), "");
        object.metadata.annotations =
            Some([("radapp.io/depends-on".to_string(), other.to_string())].into());
        system.create(&object).await;
    }
    for (name, cycle) in [
        ("left", "left -> right -> left"),
        ("right", "right -> left -> right"),
    ] {
        let failed = system.wait_phase(name, "Failed").await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains(cycle), "{name}: {message}");
    }
    assert_eq!(system.radius().stats().deployment_puts, 0);
    system.shutdown().await;
}

/// The value of the `radwasm_remembered_objects` gauge.
async fn remembered_objects(system: &System) -> u64 {
    let metrics = system.metrics().await;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("radwasm_remembered_objects "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or_else(
            || panic!("no radwasm_remembered_objects in:\n{metrics}"),
            |v| v as u64,
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_is_remembered_of_failing_objects_goes_when_they_are_deleted() {
    // Every deployment fails, so each template is paced (remembered) after
    // its failure; deleting them all must leave nothing remembered, well
    // before the idle time-out (15 minutes).
    const COUNT: usize = 40;
    let system = System::start(&[]).await;
    system
        .radius()
        .faults()
        .fail_next_deployments(10_000, "RecipeFailed", "the cloud said no");
    for at in 0..COUNT {
        let mut object = template(
            &format!("failing-{at}"),
            &fixture("deploymenttemplate-outputresources-1.json"),
            "",
        );
        object.metadata.annotations = Some(
            [(
                "radapp.io/deployment-retry".to_string(),
                "never".to_string(),
            )]
            .into(),
        );
        system.create(&object).await;
    }
    for at in 0..COUNT {
        system.wait_phase(&format!("failing-{at}"), "Failed").await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while remembered_objects(&system).await < COUNT as u64 {
        assert!(
            std::time::Instant::now() < deadline,
            "the failing templates are not remembered (pacing): {}",
            remembered_objects(&system).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for at in 0..COUNT {
        system
            .templates()
            .delete(&format!("failing-{at}"), &DeleteParams::default())
            .await
            .expect("delete");
    }
    for at in 0..COUNT {
        system.wait_gone(&format!("failing-{at}")).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = remembered_objects(&system).await;
        if left == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{left} objects still remembered after all were deleted\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    system.shutdown().await;
}

/// Each DeploymentResource's name and finalizers as a watch first saw it.
type FirstVersions = Arc<Mutex<Vec<(String, Vec<String>)>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_deleted_as_soon_as_its_resources_appear_leaves_nothing_in_radius() {
    // Every DeploymentResource carries its finalizer from the version that
    // created it, so a watch started before the template sees it on each
    // resource's first version. Without that, a template deleted before the
    // resource controller first saw its resources took them away with no
    // Radius DELETE, leaving the Radius resources behind.
    let system = System::start(&[]).await;
    let first_versions: FirstVersions = Arc::default();
    let task = {
        let first_versions = first_versions.clone();
        let stream = watcher(system.resources(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let Ok(resource) = event else { continue };
                if let Ok(mut seen) = first_versions.lock()
                    && !seen.iter().any(|(name, _)| *name == resource.name_any())
                {
                    seen.push((resource.name_any(), resource.finalizers().to_vec()));
                }
            }
        })
    };
    system.create(&app_template("app")).await;
    // Delete the template as soon as its resources exist.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while system.owned("app").await.len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "no resources\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    task.abort();
    let first_versions = first_versions.lock().expect("lock").clone();
    assert_eq!(first_versions.len(), 3, "{first_versions:?}");
    for (name, finalizers) in &first_versions {
        assert_eq!(
            finalizers,
            &vec![radwasm_policy_model::RESOURCE_FINALIZER.to_string()],
            "{name} was created without its finalizer"
        );
    }
    let stats = system.radius().stats();
    assert_eq!(
        stats.resources,
        0,
        "Radius resources left behind: {:?}\n{}",
        system.radius().resource_ids(),
        system.logs()
    );
    system.shutdown().await;
}

/// A real API server's watch cache can lag behind its store under load, so
/// the controller decides on an object older than the one on the server.
/// A user's edit landing in that window is neither overwritten nor a
/// failed reconcile: the precondition on the controller's first write
/// refuses the write, and the controller decides again on the newer object
/// when the watch brings it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_the_lagging_watch_has_not_shown_yet_is_decided_on_not_failed() {
    if crate::harness::embedded_only("a lagging watch is a fault of the embedded API server") {
        return;
    }
    let system = System::start(&[]).await;
    // The controller's watches are up once it has made one template Ready.
    system
        .create(&crate::harness::own_app_template("first"))
        .await;
    system.wait_phase("first", "Ready").await;
    let faults = system.apiserver.as_ref().expect("embedded").faults();
    faults.set_watch_lag(Duration::from_millis(1_500));
    let names: Vec<String> = (0..5).map(|i| format!("edited-{i}")).collect();
    for name in &names {
        system.create(&crate::harness::own_app_template(name)).await;
    }
    // Labelled after the creations, before the controller's watch shows
    // them: it will decide on each created object while the server holds
    // the labelled one.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for name in &names {
        system
            .templates()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"edited": "yes"}}})),
            )
            .await
            .expect("label the template");
    }
    for name in &names {
        let ready = system.wait_phase(name, "Ready").await;
        assert_eq!(
            ready.labels().get("edited").map(String::as_str),
            Some("yes"),
            "{name}: the user's label was overwritten"
        );
        assert!(
            ready
                .finalizers()
                .iter()
                .any(|f| f == "radapp.io/deployment-template-finalizer"),
            "{name}: {:?}",
            ready.finalizers()
        );
    }
    assert_eq!(
        system.radius().stats().deployment_puts,
        names.len() as u64 + 1,
        "one deployment per template"
    );
    let metrics = system.metrics().await;
    // The conflict did happen (the scenario tested what it says).
    let refused = crate::harness::metric_sum(
        &metrics,
        r#"radwasm_kube_requests_total{verb="patch",resource="deploymenttemplates",code="409"}"#,
    );
    assert!(refused >= 1.0, "no write met the user's edit:\n{metrics}");

    // Deleted while the watch still lags (less, to keep the waves short):
    // the controller may see a template it has already let go.
    faults.set_watch_lag(Duration::from_millis(400));
    for name in &names {
        system
            .templates()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for name in &names {
        system.wait_gone(name).await;
    }
    faults.set_watch_lag(Duration::ZERO);
    assert!(
        system.radius().resource_ids().len() <= 3,
        "only the first template's resources are left: {:?}",
        system.radius().resource_ids()
    );
    // No reconcile failed for any of it.
    let metrics = system.metrics().await;
    let failed = crate::harness::failed_reconciles(&metrics);
    assert!(failed.is_empty(), "{failed:?}\n{}", system.logs());
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_costs_two_status_writes() {
    // The deployment is recorded in status before it is sent, together with
    // everything the plan says (phase, message, Ready): that one write
    // stands while Radius deploys (the operation's own URLs, from the PUT's
    // answer, are kept in memory). The second write is Ready.
    let system = System::start_with(&[], Duration::from_secs(1)).await;
    let statuses = watch_statuses(&system, "app");
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    let metrics = system.metrics().await;
    let writes = crate::harness::metric_sum(
        &metrics,
        r#"radwasm_kube_requests_total{verb="patch",resource="deploymenttemplates/status",code="2"#,
    );
    assert_eq!(writes, 2.0, "status writes:\n{metrics}\n{}", system.logs());
    assert_eq!(system.radius().stats().deployment_puts, 1);
    // While it ran, status said it was deploying this generation.
    let seen = statuses.0.lock().expect("statuses").clone();
    assert!(
        seen.iter()
            .any(|(generation, _, phase, ready, _)| *generation == 1
                && phase == "Updating"
                && ready == "False"),
        "{seen:?}"
    );
    statuses.1.abort();
    system.shutdown().await;
}
