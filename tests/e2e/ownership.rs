//! What is a template's own: it deletes only what its deployments produced,
//! whoever else points at it; deletions keep their order whoever started
//! them; a lost deletion is said aloud; and switching between Radius's
//! controller and radwasm, either way and again, redeploys nothing
//! unchanged and leaks nothing.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use radwasm::crd::{DeploymentResource, DeploymentResourceSpec};
use serde_json::json;

use crate::harness::{SCOPE, System, app_template, fixture, id};

/// A `DeploymentResource` for `radius_id` controlled by template `owner`,
/// without labels, as someone writes one by hand (or Radius's controller
/// creates one).
async fn controlled_resource(system: &System, owner: &str, name: &str, radius_id: &str) {
    let template = system.templates().get(owner).await.expect("owner");
    let mut resource = DeploymentResource::new(
        name,
        DeploymentResourceSpec {
            id: radius_id.to_string(),
            provider_config: None,
        },
    );
    resource.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "radapp.io/v1alpha3".into(),
        kind: "DeploymentTemplate".into(),
        name: owner.into(),
        uid: template.uid().expect("uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    system
        .resources()
        .create(&PostParams::default(), &resource)
        .await
        .expect("create a DeploymentResource by hand");
}

/// Wait (at most 60 s) until `done` says so; fail naming `what`.
pub(crate) async fn wait_until<F, Fut>(system: &System, what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done().await {
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// True once the `DeploymentResource` `name` is gone from the API server.
async fn resource_gone(system: &System, name: &str) -> bool {
    system
        .resources()
        .get_opt(name)
        .await
        .expect("get")
        .is_none()
}

/// PUT a resource into Radius directly, as another tool would.
pub(crate) async fn put_in_radius(system: &System, radius_id: &str) {
    system.radius().ensure_resource_group("default");
    let response = reqwest::Client::new()
        .put(format!(
            "{}{radius_id}?api-version=2023-10-01-preview",
            system.radius().base_url()
        ))
        .json(&json!({"location": "global", "properties": {}}))
        .send()
        .await
        .expect("PUT into Radius");
    assert!(response.status().is_success(), "{}", response.status());
    wait_until(system, "the resource is in Radius", || async {
        system.radius().resource(radius_id).is_some()
    })
    .await;
}

async fn wait_resource_phase(system: &System, name: &str, phase: &str) {
    wait_until(system, &format!("{name} is {phase}"), || async {
        let current = system.resources().get_opt(name).await.expect("get");
        current
            .and_then(|r| r.status)
            .and_then(|s| s.phrase)
            .is_some_and(|now| now == phase)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_the_template_never_deployed_is_tracked_and_never_deleted_by_it() {
    let system = System::start(&[]).await;
    system.ready_app().await;
    let own = system.owned("app").await;
    assert_eq!(own.len(), 3);

    // A DeploymentResource applied by hand: controlled by `app`, no labels,
    // naming a Radius resource inside the template's scope that it never
    // deployed.
    let by_hand = id("containers", "by-hand");
    put_in_radius(&system, &by_hand).await;
    controlled_resource(&system, "app", "by-hand", &by_hand).await;

    // Tracked, as Radius tracks it, and said to be no output of the template.
    wait_resource_phase(&system, "by-hand", "Ready").await;
    let events = system.wait_event("by-hand", "NotATemplateOutput").await;
    assert!(
        events
            .iter()
            .any(|e| e.contains("not one of the outputs of template app")),
        "{events:?}"
    );
    // The template settles again and deletes nothing: give the two loops
    // every chance to race.
    tokio::time::sleep(Duration::from_secs(3)).await;
    system.wait_phase("app", "Ready").await;
    assert!(
        system
            .resources()
            .get_opt("by-hand")
            .await
            .expect("get")
            .is_some()
    );
    assert_eq!(system.radius().stats().deletes_for(&by_hand), 0);

    // Deleting the template deletes its own three resources in Radius, and
    // not the one it never deployed.
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    for resource in &own {
        assert!(
            system.radius().resource(&resource.spec.id).is_none(),
            "{} left in Radius",
            resource.spec.id
        );
    }
    assert_eq!(system.radius().stats().deletes_for(&by_hand), 0);
    assert!(system.radius().resource(&by_hand).is_some());

    // Deleted by hand now (or collected once its owner is gone, where a
    // garbage collector runs): its owner is gone, so it is released as
    // Radius's controller releases it, and the resource stays in Radius.
    let _ = system
        .resources()
        .delete("by-hand", &DeleteParams::default())
        .await;
    wait_until(&system, "by-hand is gone", || {
        resource_gone(&system, "by-hand")
    })
    .await;
    assert_eq!(system.radius().stats().deletes_for(&by_hand), 0);
    assert!(system.radius().resource(&by_hand).is_some());
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_applied_by_hand_and_deleted_by_hand_is_deleted_in_radius() {
    // As Radius's DeploymentResource does: its owner lives and the
    // resource is inside its scope.
    let system = System::start(&[]).await;
    system.ready_app().await;
    let by_hand = id("containers", "by-hand");
    put_in_radius(&system, &by_hand).await;
    controlled_resource(&system, "app", "by-hand", &by_hand).await;
    wait_resource_phase(&system, "by-hand", "Ready").await;
    system
        .resources()
        .delete("by-hand", &DeleteParams::default())
        .await
        .expect("delete");
    wait_until(&system, "by-hand is deleted in Radius and gone", || async {
        system.radius().resource(&by_hand).is_none() && resource_gone(&system, "by-hand").await
    })
    .await;
    assert_eq!(system.radius().stats().deletes_for(&by_hand), 1);
    // The template's own resources are untouched.
    system.wait_phase("app", "Ready").await;
    assert_eq!(system.owned("app").await.len(), 3);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_started_by_another_controller_keep_the_order() {
    let mut system = System::start(&[]).await;
    system.ready_app().await;
    let container = id("containers", "output-resources-container");
    let application = id("applications", "output-resources-application");
    let environment = id("environments", "output-resources-environment");

    // Radius's controller was running and had marked the template and all
    // three of its DeploymentResources for deletion at once.
    system.stop_controller();
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete template");
    system
        .resources()
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete every DeploymentResource");
    system
        .radius()
        .faults()
        .set_delete_duration(Duration::from_millis(1500));

    // radwasm takes over: the container's DELETE goes first, and the
    // application's and environment's wait until what comes before is gone
    // from Radius.
    system.start_controller();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = system.radius().stats();
        let present = |radius_id: &str| system.radius().resource(radius_id).is_some();
        if stats.deletes_for(&application) > 0 {
            assert!(
                !present(&container),
                "the application's DELETE was sent while the container was still in Radius: {:?}",
                stats.deleted
            );
        }
        if stats.deletes_for(&environment) > 0 {
            assert!(
                !present(&application) && !present(&container),
                "the environment's DELETE was sent while other resources were still in Radius: {:?}",
                stats.deleted
            );
        }
        if !present(&container) && !present(&application) && !present(&environment) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all deleted: {:?}\n{}",
            stats.deleted,
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    system.wait_gone("app").await;
    let metrics = system.metrics().await;
    assert!(
        crate::harness::metric_sum(&metrics, "radwasm_radius_deletions_held_for_order_total") > 0.0,
        "no deletion was held: {metrics}"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_radius_forgot_is_said_in_an_event_and_sent_again() {
    let system = System::start(&[]).await;
    system.ready_app().await;
    let container = id("containers", "output-resources-container");
    let tracker = system
        .owned("app")
        .await
        .into_iter()
        .find(|r| r.spec.id.eq_ignore_ascii_case(&container))
        .expect("the container's DeploymentResource")
        .name_any();
    system
        .radius()
        .faults()
        .set_delete_duration(Duration::from_millis(500));
    // The first deletion Radius starts from here on (the container's: it
    // goes first) fails, and its operation is forgotten: the container is
    // still there with no deletion running.
    system.radius().faults().fail_next_deletes(1);
    system.radius().faults().vanish_next_operations(1);
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    let events = system.events_for(&tracker).await;
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("OperationLost") && e.contains("no longer knows the deletion")),
        "{events:?}"
    );
    assert!(system.radius().resource(&container).is_none());
    system.shutdown().await;
}

/// Write status as Radius's controller writes it: its own fields only, the
/// whole status replaced (so the fields only radwasm writes are gone).
async fn status_as_radius_writes_it(system: &System, name: &str) {
    let mut template = system.templates().get(name).await.expect("get");
    let status = template.status.take().unwrap_or_default();
    template.status = Some(radwasm::crd::DeploymentTemplateStatus {
        observed_generation: status.observed_generation,
        status_hash: status.status_hash,
        output_resources: status.output_resources,
        phrase: Some("Ready".into()),
        ..Default::default()
    });
    system
        .templates()
        .replace_status(name, &PostParams::default(), &template)
        .await
        .expect("status as Radius writes it");
}

/// Edit `app` to its `n`th spec and wait for it to be Ready: the same ARM
/// template followed by `n` spaces, so each is a new spec (the hash is of
/// the text) deploying the same resources.
async fn edit(system: &System, n: usize) {
    let text = format!(
        "{}{}",
        fixture("deploymenttemplate-outputresources-1.json"),
        " ".repeat(n)
    );
    let patch = json!({"spec": {"template": text}});
    system
        .templates()
        .patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit");
    system.wait_phase("app", "Ready").await;
}

/// The ids of every deployment record Radius was sent.
fn deployment_records(system: &System) -> Vec<String> {
    system
        .radius()
        .stats()
        .deployment_puts_by_name
        .keys()
        .map(|name| format!("{SCOPE}/providers/Microsoft.Resources/deployments/{name}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_to_radius_and_back_twice_redeploys_nothing_and_leaks_nothing() {
    let mut system = System::start(&[]).await;
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    // A second generation, so the template has two deployment records.
    edit(&system, 1).await;
    assert_eq!(deployment_records(&system).len(), 2);

    for round in 0..2 {
        // To Radius's controller: it rewrites status with its own fields.
        system.stop_controller();
        status_as_radius_writes_it(&system, "app").await;
        let stripped = system.templates().get("app").await.expect("get");
        assert!(
            stripped
                .status
                .as_ref()
                .is_some_and(|s| s.deployments.is_empty()),
            "round {round}: status still lists the records"
        );
        // And back to radwasm: nothing redeployed, nothing recreated.
        let puts = system.radius().stats().deployment_puts;
        system.start_controller();
        system
            .wait_template("app", "the Ready condition again", |t| {
                t.and_then(|t| t.status.as_ref()).is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .await;
        assert_eq!(
            system.radius().stats().deployment_puts,
            puts,
            "round {round}: redeployed"
        );
        assert_eq!(system.owned("app").await.len(), 3, "round {round}");
        // Edited under radwasm: one deployment, and the records beyond the
        // two kept are deleted in Radius.
        edit(&system, round + 2).await;
        assert_eq!(
            system.radius().stats().deployment_puts,
            puts + 1,
            "round {round}"
        );
    }
    let records = deployment_records(&system);
    assert_eq!(records.len(), 4, "{records:?}");
    let kept = records
        .iter()
        .filter(|record| system.radius().deployment(record).is_some())
        .count();
    assert_eq!(kept, 2, "the template keeps its last two records");

    // Deleted: every resource and every deployment record go.
    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    let left: Vec<String> = system.radius().resource_ids();
    assert!(left.is_empty(), "left in Radius: {left:?}");
    for record in &records {
        assert!(
            system.radius().deployment(record).is_none(),
            "deployment record {record} leaked"
        );
    }
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_radius_made_are_adopted_and_deleted_when_a_new_spec_drops_them() {
    let mut system = System::start(&[]).await;
    // Radius's controller deployed `app` and left three unlabelled
    // DeploymentResources that only its `outputResources` ties to it.
    system.stop_controller();
    let ids = [
        id("environments", "output-resources-environment"),
        id("applications", "output-resources-application"),
        id("containers", "output-resources-container"),
    ];
    for radius_id in &ids {
        put_in_radius(&system, radius_id).await;
    }
    system.create(&app_template("app")).await;
    crate::radius_shape::as_radius_left_it(&system, "app", "a hash of another spec", &ids).await;
    system.start_controller();
    system
        .wait_template("app", "the Ready condition", |t| {
            t.and_then(|t| t.status.as_ref()).is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .await;
    // Adopted, not duplicated.
    let owned = system.owned("app").await;
    assert_eq!(
        owned.len(),
        3,
        "{:?}",
        owned.iter().map(|r| r.name_any()).collect::<Vec<_>>()
    );

    // A spec that makes none of them: all three are the template's own
    // (its last output listed them), so all three go, every wave of them.
    let patch = json!({"spec": {
        "template": fixture("env.json"),
        "parameters": json!({"name": {"value": "blue"}, "namespace": {"value": "default"}}).to_string(),
    }});
    system
        .templates()
        .patch("app", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit");
    wait_until(&system, "the three are deleted in Radius", || async {
        ids.iter()
            .all(|radius_id| system.radius().resource(radius_id).is_none())
    })
    .await;
    system.wait_phase("app", "Ready").await;
    let owned = system.owned("app").await;
    assert_eq!(
        owned
            .iter()
            .map(|r| r.spec.id.to_ascii_lowercase())
            .collect::<Vec<_>>(),
        vec![id("environments", "blue-env").to_ascii_lowercase()]
    );

    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    let left = system.radius().resource_ids();
    assert!(left.is_empty(), "left in Radius: {left:?}");
    system.shutdown().await;
}
