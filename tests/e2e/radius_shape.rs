//! Manifests in the shape Radius's own CLI and controller write them:
//! `spec.parameters` a map of text, `spec.providerConfig` JSON text, and
//! objects Radius's controller already made `Ready`, taken over unchanged.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use radwasm::crd::{DeploymentResource, DeploymentResourceSpec, DeploymentTemplate};
use serde_json::{Value, json};

use crate::harness::{SCOPE, System, fixture, id};

/// `env.json` with three more parameters, of types Radius's text values
/// must be converted to, used in the environment's properties.
fn typed_template() -> String {
    let mut template: Value = serde_json::from_str(&fixture("env.json")).expect("env.json");
    template["parameters"]["replicas"] = json!({"type": "int"});
    template["parameters"]["debug"] = json!({"type": "bool"});
    template["parameters"]["labels"] = json!({"type": "object"});
    let properties = &mut template["resources"]["env"]["properties"]["properties"];
    properties["replicas"] = json!("[parameters('replicas')]");
    properties["debug"] = json!("[parameters('debug')]");
    properties["labels"] = json!("[parameters('labels')]");
    template.to_string()
}

/// A template with these spec fields as a user's manifest gives them.
fn manifest(name: &str, spec: Value) -> DeploymentTemplate {
    serde_json::from_value(json!({
        "apiVersion": "radapp.io/v1alpha3",
        "kind": "DeploymentTemplate",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a DeploymentTemplate")
}

/// A template as Radius's CLI writes it.
fn radius_shaped(name: &str, template: &str, parameters: Value) -> DeploymentTemplate {
    manifest(
        name,
        json!({
            "template": template,
            "parameters": parameters,
            "providerConfig": json!({
                "radius": {"type": "Radius", "value": {"scope": SCOPE}},
                "deployments": {"type": "Microsoft.Resources", "value": {"scope": SCOPE}},
            }).to_string(),
            "repository": "https://example.com/team/app.git",
        }),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_in_radius_shape_deploys_its_text_parameters_as_the_declared_types() {
    let system = System::start(&[]).await;
    system
        .create(&radius_shaped(
            "typed",
            &typed_template(),
            json!({
                "name": "typed",
                "namespace": "apps",
                "replicas": "3",
                "debug": "true",
                "labels": "{\"team\": \"a\"}",
            }),
        ))
        .await;
    system.wait_phase("typed", "Ready").await;
    let environment = system
        .radius()
        .resource(&id("environments", "typed-env"))
        .expect("the environment is deployed");
    let properties = &environment["properties"];
    assert_eq!(properties["replicas"], json!(3), "{environment}");
    assert_eq!(properties["debug"], json!(true), "{environment}");
    assert_eq!(properties["labels"], json!({"team": "a"}), "{environment}");
    assert_eq!(properties["compute"]["namespace"], json!("apps"));

    // A value that does not fit its declared type fails the template,
    // naming the parameter, and reaches no deployment endpoint.
    let puts = system.radius().stats().deployment_puts;
    system
        .templates()
        .patch(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": {"replicas": "three"}}})),
        )
        .await
        .expect("patch");
    let failed = system.wait_phase("typed", "Failed").await;
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains("\"replicas\"") && message.contains("int"),
        "{message}"
    );
    assert_eq!(system.radius().stats().deployment_puts, puts);
    system.shutdown().await;
}

/// One of the vectors `tests/radius-hash/main.go` computed with Go, the way
/// Radius's controller hashes a spec.
fn go_vector(name: &str) -> Value {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/radius-hash/vectors.json");
    let vectors: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("vectors.json"))
            .expect("vectors");
    vectors
        .into_iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no vector {name:?}"))
}

/// Make `name` look as Radius's controller leaves a template it deployed:
/// status Ready with its hash, and one DeploymentResource per output
/// resource, named after the resource, with Radius's finalizer.
pub(crate) async fn as_radius_left_it(system: &System, name: &str, hash: &str, ids: &[String]) {
    let object = system.templates().get(name).await.expect("get");
    let owner = OwnerReference {
        api_version: "radapp.io/v1alpha3".into(),
        kind: "DeploymentTemplate".into(),
        name: name.into(),
        uid: object.uid().expect("uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    for id in ids {
        let mut resource = DeploymentResource::new(
            id.rsplit('/').next().expect("name"),
            DeploymentResourceSpec {
                id: id.clone(),
                provider_config: None,
            },
        );
        resource.metadata.owner_references = Some(vec![owner.clone()]);
        resource.metadata.finalizers = Some(vec!["radapp.io/deployment-resource-finalizer".into()]);
        system
            .resources()
            .create(&PostParams::default(), &resource)
            .await
            .expect("create a DeploymentResource as Radius does");
    }
    let status = json!({"status": {
        "observedGeneration": object.meta().generation,
        "statusHash": hash,
        "outputResources": ids,
        "phrase": "Ready",
    }});
    system
        .templates()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("status as Radius writes it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_radius_made_ready_is_taken_over_without_a_redeploy() {
    let mut system = System::start(&[]).await;
    // Radius's controller ran until now; radwasm is installed next.
    system.stop_controller();
    let vector = go_vector("a real template with parameters and provider config");
    let spec = vector["spec"].clone();
    let object = |name: &str| manifest(name, spec.clone());
    let ids = [
        id("environments", "output-resources-environment"),
        id("applications", "output-resources-application"),
        id("containers", "output-resources-container"),
    ];
    system.create(&object("taken-over")).await;
    let sha256 = vector["sha256"].as_str().expect("sha256");
    as_radius_left_it(&system, "taken-over", sha256, &ids).await;
    // The same spec with a hash of another spec: out of date.
    system.create(&object("stale")).await;
    let other = go_vector("template only");
    let stale_hash = other["sha256"].as_str().expect("sha256");
    as_radius_left_it(&system, "stale", stale_hash, &[]).await;

    system.start_controller();
    // Reconciled: the condition radwasm keeps, which Radius never writes.
    system
        .wait_template("taken-over", "Ready condition", |t| {
            t.and_then(|t| t.status.as_ref()).is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .await;
    let taken_over = system.templates().get("taken-over").await.expect("get");
    assert_eq!(
        taken_over.status.and_then(|s| s.phrase).as_deref(),
        Some("Ready")
    );
    // The stale one is deployed; by then the other had every chance to be.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !system
        .radius()
        .stats()
        .deployment_puts_by_name
        .keys()
        .any(|name| name.starts_with("stale"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the stale template was never deployed\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let puts = system.radius().stats().deployment_puts_by_name;
    assert!(
        !puts.keys().any(|name| name.starts_with("taken-over")),
        "redeployed: {puts:?}"
    );
    // Radius's DeploymentResources are adopted, not duplicated.
    let owned = system.owned("taken-over").await;
    assert_eq!(
        owned.len(),
        3,
        "{:?}",
        owned.iter().map(|r| r.name_any()).collect::<Vec<_>>()
    );
    let taken_over = system.templates().get("taken-over").await.expect("get");
    assert!(
        taken_over
            .finalizers()
            .iter()
            .any(|f| f == "radapp.io/deployment-template-finalizer"),
        "{:?}",
        taken_over.finalizers()
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_manifests_in_either_shape_fail_naming_the_field_with_no_radius_call() {
    let system = System::start(&[]).await;
    let good = fixture("env.json");
    let scope_config =
        |scope: &str| json!({"radius": {"type": "Radius", "value": {"scope": scope}}});
    let deep = format!(
        "{{\"resources\": {{\"a\": {}1{}}}}}",
        "[".repeat(200),
        "]".repeat(200)
    );
    // (name, template, parameters, providerConfig, the field the message names)
    let cases: Vec<(&str, String, Value, Value, &str)> = vec![
        ("template-not-json", "{ not json".into(), json!(null), scope_config(SCOPE), "spec.template"),
        ("template-array", "[1, 2]".into(), json!(null), scope_config(SCOPE), "spec.template"),
        ("template-empty", "".into(), json!(null), scope_config(SCOPE), "spec.template"),
        ("template-resources-text", r#"{"resources": "x"}"#.into(), json!(null), scope_config(SCOPE), "spec.template"),
        ("template-nul", "\u{0}".into(), json!(null), scope_config(SCOPE), "spec.template"),
        ("template-too-deep", deep, json!(null), scope_config(SCOPE), "spec.template"),
        ("params-text-not-json", good.clone(), json!("{oops"), scope_config(SCOPE), "spec.parameters"),
        ("params-text-array", good.clone(), json!("[1]"), scope_config(SCOPE), "spec.parameters"),
        ("params-text-bare-value", good.clone(), json!(r#"{"name": "blue"}"#), scope_config(SCOPE), "spec.parameters"),
        ("params-text-number-entry", good.clone(), json!(r#"{"name": 5}"#), scope_config(SCOPE), "spec.parameters"),
        ("params-bool", good.clone(), json!(true), scope_config(SCOPE), "spec.parameters"),
        ("params-list", good.clone(), json!(["name"]), scope_config(SCOPE), "spec.parameters"),
        ("provider-missing", good.clone(), json!(null), json!(null), "spec.providerConfig"),
        ("provider-no-radius", good.clone(), json!(null), json!({"deployments": {"type": "Microsoft.Resources", "value": {"scope": SCOPE}}}), "spec.providerConfig"),
        ("provider-radius-no-value", good.clone(), json!(null), json!({"radius": {"type": "Radius"}}), "spec.providerConfig"),
        ("provider-plane-only", good.clone(), json!(null), scope_config("/planes/radius/local"), "spec.providerConfig"),
        ("provider-azure-scope", good.clone(), json!(null), scope_config("/subscriptions/0/resourceGroups/rg"), "spec.providerConfig"),
        ("provider-list", good.clone(), json!(null), json!([1]), "spec.providerConfig"),
        ("provider-text-not-json", good.clone(), json!(null), json!("{ not json"), "spec.providerConfig"),
        ("provider-text-list", good.clone(), json!(null), json!("[]"), "spec.providerConfig"),
        ("provider-text-empty-object", good.clone(), json!(null), json!("{}"), "spec.providerConfig"),
        ("provider-text-no-radius", good.clone(), json!(null), json!(json!({"az": {"type": "AzureResourceManager", "value": {"scope": "/subscriptions/0"}}}).to_string()), "spec.providerConfig"),
    ];
    for (name, template, parameters, provider_config, _) in &cases {
        let spec = json!({
            "template": template,
            "parameters": parameters,
            "providerConfig": provider_config,
        });
        system.create(&manifest(name, spec)).await;
    }
    for (name, _, _, _, field) in &cases {
        let failed = system.wait_phase(name, "Failed").await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains(field), "{name}: {message}");
        system.wait_event(name, "InvalidSpec").await;
    }
    assert_eq!(
        system.radius().stats().requests,
        0,
        "no Radius call for bad input"
    );
    system.shutdown().await;
}

/// `deploymenttemplate-outputresources-1.json` with its three resources
/// named by parameters, as Bicep compiles `param`s.
fn named_by_parameters() -> String {
    let mut template: Value =
        serde_json::from_str(&fixture("deploymenttemplate-outputresources-1.json"))
            .expect("the fixture");
    template["parameters"] = json!({
        "environment": {"type": "string"},
        "application": {"type": "string"},
        "container": {"type": "string"},
    });
    let resources = &mut template["resources"];
    for (resource, parameter) in [
        ("outputResourcesEnvironment", "environment"),
        ("outputResourcesApplication", "application"),
        ("outputResourcesContainer", "container"),
    ] {
        resources[resource]["properties"]["name"] = json!(format!("[parameters('{parameter}')]"));
    }
    template.to_string()
}

/// The names of the three resources a template made by
/// [`named_by_parameters`] deploys.
struct Names {
    environment: String,
    application: String,
    container: String,
}

impl Names {
    fn new(environment: String, application: String, container: String) -> Self {
        Names {
            environment,
            application,
            container,
        }
    }

    /// The template's parameters, in Radius's shape (a map of text).
    fn parameters(&self) -> Value {
        json!({
            "environment": self.environment,
            "application": self.application,
            "container": self.container,
        })
    }

    /// Their Radius ids, lower-cased.
    fn ids(&self) -> Vec<String> {
        [
            id("environments", &self.environment),
            id("applications", &self.application),
            id("containers", &self.container),
        ]
        .map(|id| id.to_ascii_lowercase())
        .to_vec()
    }
}

fn lower_sorted<'a>(ids: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut ids: Vec<String> = ids.into_iter().map(|id| id.to_ascii_lowercase()).collect();
    ids.sort();
    ids
}

/// When a scenario deletes the template it edited.
#[derive(PartialEq)]
enum Deleted {
    /// Once the edit has settled: the old resources are gone.
    AfterCleanup,
    /// As soon as the new deployment is recorded, while the old resources'
    /// deletions still run (the first of them takes 5 s in Radius).
    DuringCleanup,
}

/// Radius's controller deployed `name` (its three resources are in
/// Radius, its status and `DeploymentResource`s as that controller writes
/// them, with the hash it computes); radwasm takes it over without
/// deploying it, then the template is edited so that it deploys `after`.
/// Exactly one deployment; exactly one DELETE of each old resource that
/// `after` drops, none of one it keeps; the old `DeploymentResource`s go;
/// and deleting the template (`when`) leaves nothing in Radius, with no
/// DELETE sent twice.
async fn taken_over_then_renamed(name: &str, after: impl Fn(&Names) -> Names, when: Deleted) {
    let mut system = System::start(&[]).await;
    system.stop_controller();
    let before = Names::new(
        format!("{name}-env"),
        format!("{name}-app"),
        format!("{name}-web"),
    );
    let after = after(&before);
    for radius_id in before.ids() {
        crate::ownership::put_in_radius(&system, &radius_id).await;
    }
    let mut object = radius_shaped(name, &named_by_parameters(), before.parameters());
    object.metadata.finalizers = Some(vec!["radapp.io/deployment-template-finalizer".into()]);
    system.create(&object).await;
    let hash = radwasm::controller::radius_hash::radius_status_hash(&object.spec)
        .expect("a spec in Radius's shape");
    as_radius_left_it(&system, name, &hash, &before.ids()).await;

    // Taken over: Ready, nothing deployed, Radius's objects adopted.
    system.start_controller();
    system
        .wait_template(name, "the Ready condition", |t| {
            t.and_then(|t| t.status.as_ref()).is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .await;
    assert_eq!(system.radius().stats().deployment_puts, 0, "redeployed");
    assert_eq!(system.owned(name).await.len(), 3);

    if when == Deleted::DuringCleanup {
        system
            .radius()
            .faults()
            .set_delete_duration(Duration::from_secs(5));
    }
    // Edited: the parameters name other resources.
    let patch = json!({"spec": {"parameters": after.parameters()}});
    system
        .templates()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit");
    let dropped: Vec<String> = before
        .ids()
        .into_iter()
        .filter(|id| !after.ids().contains(id))
        .collect();
    let wanted = lower_sorted(&after.ids());
    if when == Deleted::DuringCleanup {
        system
            .wait_template(name, "the new deployment recorded", |t| {
                t.and_then(|t| t.status.as_ref())
                    .is_some_and(|s| lower_sorted(&s.output_resources) == wanted)
            })
            .await;
        assert!(
            dropped
                .iter()
                .any(|id| system.radius().resource(id).is_some()),
            "the old resources went before the template was deleted"
        );
        // The DELETEs still to come answer at the usual pace.
        system
            .radius()
            .faults()
            .set_delete_duration(Duration::from_millis(100));
        deleted_leaves_nothing(&system, name).await;
        system.shutdown().await;
        return;
    }
    crate::ownership::wait_until(
        &system,
        "the new resources are tracked and the dropped ones deleted",
        || async {
            let template = system.templates().get(name).await.expect("get");
            let settled = template.status.as_ref().is_some_and(|s| {
                s.phrase.as_deref() == Some("Ready")
                    && s.observed_generation == template.metadata.generation
                    && lower_sorted(&s.output_resources) == wanted
            });
            let owned = system.owned(name).await;
            settled
                && lower_sorted(owned.iter().map(|r| &r.spec.id)) == wanted
                && dropped
                    .iter()
                    .all(|id| system.radius().resource(id).is_none())
        },
    )
    .await;
    let stats = system.radius().stats();
    assert_eq!(
        stats.deployment_puts, 1,
        "{:?}",
        stats.deployment_puts_by_name
    );
    for radius_id in before.ids() {
        let expected = u64::from(dropped.contains(&radius_id));
        assert_eq!(
            stats.deletes_for(&radius_id),
            expected,
            "DELETEs of {radius_id}: {:?}",
            stats.deleted
        );
    }
    for radius_id in after.ids() {
        assert!(
            system.radius().resource(&radius_id).is_some(),
            "{radius_id} is not in Radius"
        );
    }

    deleted_leaves_nothing(&system, name).await;
    system.shutdown().await;
}

/// Delete template `name`: every resource it ever deployed goes from
/// Radius, each with one DELETE, and nothing was deployed but the edit.
async fn deleted_leaves_nothing(system: &System, name: &str) {
    system
        .templates()
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone(name).await;
    let left = system.radius().resource_ids();
    assert!(
        left.is_empty(),
        "left in Radius: {left:?}\n{}",
        system.logs()
    );
    let stats = system.radius().stats();
    let twice: Vec<_> = stats
        .deletes_by_id
        .iter()
        .filter(|(_, count)| **count != 1)
        .collect();
    assert!(twice.is_empty(), "DELETEs not sent exactly once: {twice:?}");
    assert_eq!(
        stats.deployment_puts, 1,
        "{:?}",
        stats.deployment_puts_by_name
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_over_template_edited_to_rename_some_resources_deletes_exactly_those() {
    // The environment stays; the application and the container are new.
    let some_renamed = |before: &Names| {
        Names::new(
            before.environment.clone(),
            format!("{}-2", before.application),
            format!("{}-2", before.container),
        )
    };
    taken_over_then_renamed("some", some_renamed, Deleted::AfterCleanup).await;
}

/// Every name of `before`, with `-2` added.
fn all_renamed(before: &Names) -> Names {
    Names::new(
        format!("{}-2", before.environment),
        format!("{}-2", before.application),
        format!("{}-2", before.container),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_over_template_edited_to_rename_every_resource_deletes_all_the_old_ones() {
    taken_over_then_renamed("all", all_renamed, Deleted::AfterCleanup).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_over_template_deleted_while_its_old_resources_go_deletes_them_too() {
    // The new output list no longer names the old resources: they are
    // still the template's own, and deleted in Radius, not released.
    taken_over_then_renamed("gone", all_renamed, Deleted::DuringCleanup).await;
}
