//! The third world: the real `radwasm run` on the real Kubernetes API server
//! against Radius's own control plane (UCP, applications-rp, dynamic-rp and
//! PostgreSQL, built from Radius's source; the simulator stands in only for
//! the deployment engine). See `docs/radius-real.md`.
//!
//! Each scenario has a namespace and a resource group of its own (named
//! after the namespace) and puts a recording proxy between its controller
//! and UCP, so it counts exactly what its controller sent to Radius. The
//! templates hold environments and applications: a container's operation
//! ends only when its pod runs, which needs a node: [`pod`] runs one on
//! the node of the node scenarios.

mod pod;
mod takeover;

use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams};
use radwasm::crd::DeploymentTemplate;
use serde_json::{Value, json};

use crate::harness::{System, template_in};
use crate::realradius::{RadiusHandle, Recorder};

const API_VERSION: &str = "2023-10-01-preview";

/// A scenario on real Radius: the system, and the proxy its controller
/// reaches UCP through.
pub(crate) struct World {
    system: System,
    recorder: Recorder,
}

impl World {
    async fn start() -> World {
        let system = System::start_real_radius(&["--drift-resync", "0"]).await;
        World::behind_recorder(system).await
    }

    /// A world on another cluster and Radius (the node's).
    async fn start_on(cluster: crate::realkube::ClusterHandle, radius: RadiusHandle) -> World {
        let system = System::start_real_radius_on(cluster, radius, &["--drift-resync", "0"]).await;
        World::behind_recorder(system).await
    }

    async fn start_with(args: &[&str]) -> World {
        let system = System::start_real_radius(args).await;
        World::behind_recorder(system).await
    }

    /// Restart the controller pointed at a recording proxy in front of UCP.
    async fn behind_recorder(mut system: System) -> World {
        system.kill_controller();
        let recorder = Recorder::start(&system.radius_url())
            .await
            .expect("the recording proxy");
        system.point_radius_at(recorder.url());
        system.start_controller();
        World { system, recorder }
    }

    fn radius(&self) -> &RadiusHandle {
        self.system.real_radius.as_ref().expect("real Radius")
    }

    /// `/planes/radius/local/resourceGroups/<namespace>`.
    fn scope(&self) -> String {
        format!(
            "/planes/radius/local/resourceGroups/{}",
            self.system.namespace
        )
    }

    fn id(&self, kind: &str, name: &str) -> String {
        format!("{}/providers/Applications.Core/{kind}/{name}", self.scope())
    }

    /// The Kubernetes namespace an environment of this scenario renders
    /// into (unique: the scenario's own namespace, shortened so that
    /// `<it>-<application>` stays a valid namespace name).
    fn compute_namespace(&self) -> String {
        let ns: String = self.system.namespace.chars().take(40).collect();
        ns.trim_end_matches('-').to_string()
    }

    /// A template in the scenario's namespace deploying `resources` (ARM
    /// `languageVersion` 2 symbolic resources) into its resource group.
    fn template(&self, name: &str, resources: Value) -> DeploymentTemplate {
        let arm = json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.1-experimental",
            "contentVersion": "1.0.0.0",
            "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
            "resources": resources,
        });
        let mut template = template_in(&self.system.namespace, name, &arm.to_string(), "");
        template.spec.provider_config = radwasm::crd::ProviderConfig::radius(&self.scope()).into();
        template
    }

    /// An environment `env` and applications `apps` in it.
    fn env_and_apps(&self, name: &str, apps: &[&str]) -> DeploymentTemplate {
        let mut resources = serde_json::Map::new();
        resources.insert("env".into(), environment("env", &self.compute_namespace()));
        for app in apps {
            resources.insert((*app).into(), application(app, "env"));
        }
        self.template(name, Value::Object(resources))
    }

    /// Give template `name` the ARM template of `with` (a new generation).
    async fn replace_template(&self, name: &str, with: DeploymentTemplate) {
        self.system
            .templates()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": with.spec.template}})),
            )
            .await
            .expect("patch the template");
    }

    /// GET a resource through UCP (not through the proxy): its status code
    /// and body.
    async fn get(&self, id: &str) -> (u16, Value) {
        let answer = reqwest::Client::new()
            .get(self.radius().url(id, API_VERSION))
            .send()
            .await
            .expect("GET through UCP");
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    async fn exists(&self, id: &str) -> bool {
        match self.get(id).await {
            (200, _) => true,
            (404, _) => false,
            (status, body) => panic!("GET {id} answered {status}: {body}"),
        }
    }

    /// Deployment PUTs this scenario's controller sent for template `name`
    /// (deployments are named `<template>-<spec hash>`).
    fn deployment_puts(&self, name: &str) -> usize {
        self.recorder
            .count("PUT", &format!("/Microsoft.Resources/deployments/{name}-"))
    }

    async fn status_message(&self, name: &str) -> String {
        let template = self.system.templates().get(name).await.expect("template");
        template.status.and_then(|s| s.message).unwrap_or_default()
    }

    async fn shutdown(self) {
        self.system.shutdown().await;
    }
}

fn environment(name: &str, namespace: &str) -> Value {
    json!({
        "import": "Radius",
        "type": "Applications.Core/environments@2023-10-01-preview",
        "properties": {
            "name": name,
            "properties": {"compute": {"kind": "kubernetes", "namespace": namespace}},
        },
    })
}

fn application(name: &str, environment: &str) -> Value {
    json!({
        "import": "Radius",
        "type": "Applications.Core/applications@2023-10-01-preview",
        "properties": {
            "name": name,
            "properties": {"environment": format!("[reference('{environment}').id]")},
        },
        "dependsOn": [environment],
    })
}

/// The product's CRDs on a cluster not prepared by the shared harness, as
/// `kubectl apply` installs them (the chart's `crds/` holds the same files,
/// and Helm leaves CRDs that exist alone).
async fn install_crds(cluster: &crate::realkube::ClusterHandle) {
    let root = crate::realkube::repo_root();
    let out = cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &root
                .join("deploy/crds/radapp.io_v1alpha3.yaml")
                .display()
                .to_string(),
            "-f",
            &root
                .join("deploy/crds/radwasm.io_v1alpha1.yaml")
                .display()
                .to_string(),
        ])
        .await
        .expect("kubectl apply the CRDs");
    crate::realkube::ok_stdout(&out, "kubectl apply the CRDs");
    let client = cluster.client().await.expect("client");
    crate::realkube::product_crds_established(&client)
        .await
        .expect("the CRDs are served");
}

/// Wait (bounded) until `check` holds, polling every 250 ms.
async fn until(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_deploys_to_ready_through_real_radius_and_an_update_adds_a_resource() {
    let world = World::start().await;
    world
        .system
        .create(&world.env_and_apps("app", &["frontend"]))
        .await;
    let ready = world.system.wait_phase("app", "Ready").await;
    let outputs = ready.status.map(|s| s.output_resources).unwrap_or_default();
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert!(world.exists(&world.id("environments", "env")).await);
    let (_, app) = world.get(&world.id("applications", "frontend")).await;
    assert_eq!(
        app["properties"]["provisioningState"], "Succeeded",
        "the application as Radius has it: {app}"
    );
    assert_eq!(world.system.owned("app").await.len(), 2);
    assert_eq!(
        world.deployment_puts("app"),
        1,
        "{:?}",
        world.recorder.requests()
    );

    // An update that adds an application: one more deployment, three
    // resources, nothing deleted.
    world
        .replace_template("app", world.env_and_apps("app", &["frontend", "backend"]))
        .await;
    world
        .system
        .wait_template("app", "generation 2 Ready", |t| {
            t.and_then(|t| t.status.as_ref()).is_some_and(|s| {
                s.observed_generation == Some(2) && s.phrase.as_deref() == Some("Ready")
            })
        })
        .await;
    assert!(world.exists(&world.id("applications", "backend")).await);
    assert_eq!(world.deployment_puts("app"), 2);
    assert_eq!(
        world
            .recorder
            .count("DELETE", "/providers/Applications.Core/"),
        0
    );
    world.shutdown().await;
}

/// A resource Radius refuses: the template is Failed with Radius's code and
/// message, the controller does not deploy the same spec again, and a fixed
/// spec recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_the_provider_rejects_fails_the_template_with_radius_error_then_a_fix_recovers()
{
    let world = World::start().await;
    // An application without its required `environment`.
    let mut resources = serde_json::Map::new();
    resources.insert("env".into(), environment("env", &world.compute_namespace()));
    resources.insert(
        "broken".into(),
        json!({
            "import": "Radius",
            "type": "Applications.Core/applications@2023-10-01-preview",
            "properties": {"name": "broken", "properties": {}},
            "dependsOn": ["env"],
        }),
    );
    world
        .system
        .create(&world.template("app", Value::Object(resources)))
        .await;
    world.system.wait_phase("app", "Failed").await;
    let message = world.status_message("app").await;
    eprintln!("the rejected template's status: {message}");
    assert!(
        message.contains("HttpRequestPayloadAPISpecValidationFailed"),
        "Radius's code in the status: {message}"
    );
    // What the engine created before the failure stays.
    assert!(world.exists(&world.id("environments", "env")).await);
    // No redeploy loop: the same spec is not sent again.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        world.deployment_puts("app"),
        1,
        "{:?}",
        world.recorder.requests()
    );

    world
        .replace_template("app", world.env_and_apps("app", &["broken"]))
        .await;
    world.system.wait_phase("app", "Ready").await;
    assert!(world.exists(&world.id("applications", "broken")).await);
    assert_eq!(world.deployment_puts("app"), 2);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_naming_a_missing_environment_fails_with_radius_error() {
    let world = World::start().await;
    let missing = world.id("environments", "nowhere");
    let resources = json!({
        "orphan": {
            "import": "Radius",
            "type": "Applications.Core/applications@2023-10-01-preview",
            "properties": {"name": "orphan", "properties": {"environment": missing}},
        },
    });
    world.system.create(&world.template("app", resources)).await;
    world.system.wait_phase("app", "Failed").await;
    let message = world.status_message("app").await;
    assert!(
        message.contains("nowhere"),
        "Radius's message names the environment: {message}"
    );
    assert!(!world.exists(&world.id("applications", "orphan")).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(world.deployment_puts("app"), 1);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_resource_type_and_a_provider_that_is_down_fail_with_radius_errors() {
    let world = World::start().await;
    let unknown = json!({
        "gadget": {
            "import": "Radius",
            "type": "Applications.Core/gadgets@2023-10-01-preview",
            "properties": {"name": "gadget", "properties": {}},
        },
    });
    world
        .system
        .create(&world.template("unknown", unknown))
        .await;
    // Applications.Messaging is routed to a closed port (realradius).
    let down = json!({
        "queue": {
            "import": "Radius",
            "type": "Applications.Messaging/rabbitMQQueues@2023-10-01-preview",
            "properties": {"name": "queue", "properties": {"environment": world.id("environments", "env")}},
        },
    });
    world.system.create(&world.template("down", down)).await;
    world.system.wait_phase("unknown", "Failed").await;
    world.system.wait_phase("down", "Failed").await;
    let unknown_message = world.status_message("unknown").await;
    let down_message = world.status_message("down").await;
    assert!(
        unknown_message.contains("gadgets"),
        "the unknown type is named: {unknown_message}"
    );
    assert!(
        !down_message.is_empty() && down_message.contains("queue"),
        "the resource the provider could not take is named: {down_message}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(world.deployment_puts("unknown"), 1);
    assert_eq!(world.deployment_puts("down"), 1);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_template_deletes_its_resources_dependents_first_and_leaves_nothing() {
    let world = World::start().await;
    world
        .system
        .create(&world.env_and_apps("app", &["frontend", "backend"]))
        .await;
    world.system.wait_phase("app", "Ready").await;
    world
        .system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    world.system.wait_gone("app").await;
    for id in [
        world.id("applications", "frontend"),
        world.id("applications", "backend"),
        world.id("environments", "env"),
    ] {
        assert!(!world.exists(&id).await, "{id} is gone from Radius");
    }
    assert!(world.system.owned("app").await.is_empty());
    // The environment's DELETE came after both applications' DELETEs.
    let deletes: Vec<String> = world
        .recorder
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.path.contains("/Applications.Core/"))
        .map(|r| r.path)
        .collect();
    let position = |fragment: &str| deletes.iter().position(|p| p.contains(fragment));
    let env = position("/environments/env").expect("an environment DELETE");
    assert!(
        position("/applications/frontend").is_some_and(|at| at < env)
            && position("/applications/backend").is_some_and(|at| at < env),
        "applications before their environment: {deletes:?}"
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_deleted_through_ucp_is_put_back_by_one_deployment() {
    let world = World::start_with(&["--drift-resync", "3s"]).await;
    world
        .system
        .create(&world.env_and_apps("app", &["frontend"]))
        .await;
    world.system.wait_phase("app", "Ready").await;
    let app = world.id("applications", "frontend");
    let deleted = reqwest::Client::new()
        .delete(world.radius().url(&app, API_VERSION))
        .send()
        .await
        .expect("DELETE through UCP");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    until(
        "the application is gone",
        Duration::from_secs(30),
        async || !world.exists(&app).await,
    )
    .await;
    until(
        "the drift check puts the application back",
        Duration::from_secs(60),
        async || world.exists(&app).await,
    )
    .await;
    world.system.wait_phase("app", "Ready").await;
    assert_eq!(
        world.deployment_puts("app"),
        2,
        "{:?}",
        world.recorder.requests()
    );
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_mid_deployment_follows_the_same_deployment_after_restart() {
    let mut world = World::start().await;
    world
        .system
        .create(&world.env_and_apps("app", &["frontend"]))
        .await;
    // The engine spends 2 s on each deployment before its first resource:
    // kill the controller as soon as the PUT reached Radius.
    until(
        "the deployment reaches Radius",
        Duration::from_secs(60),
        async || world.deployment_puts("app") == 1,
    )
    .await;
    world.system.kill_controller();
    world.system.start_controller();
    world.system.wait_phase("app", "Ready").await;
    assert_eq!(
        world.deployment_puts("app"),
        1,
        "exactly one deployment: {:?}",
        world.recorder.requests()
    );
    assert!(world.exists(&world.id("applications", "frontend")).await);
    world.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_the_template_did_not_deploy_is_never_deleted() {
    let world = World::start().await;
    world
        .system
        .create(&world.env_and_apps("app", &["frontend"]))
        .await;
    world.system.wait_phase("app", "Ready").await;
    // Someone else's application in the same group, in the template's
    // environment, PUT straight to UCP.
    let other = world.id("applications", "someone-else");
    let put = reqwest::Client::new()
        .put(world.radius().url(&other, API_VERSION))
        .json(&json!({
            "location": "global",
            "properties": {"environment": world.id("environments", "env")},
        }))
        .send()
        .await
        .expect("PUT through UCP");
    assert!(put.status().is_success(), "{}", put.status());
    world
        .system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    world.system.wait_gone("app").await;
    assert!(!world.exists(&world.id("applications", "frontend")).await);
    assert!(
        world.exists(&other).await,
        "the application the template did not deploy is still there"
    );
    assert_eq!(world.recorder.count("DELETE", "someone-else"), 0);
    world.shutdown().await;
}
