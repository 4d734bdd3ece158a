//! The whole path a Radius user takes: a template with an environment
//! (Kubernetes compute), an application and a container, deployed through
//! Radius's own control plane, whose applications-rp renders the container
//! as a Kubernetes Deployment that kubelet runs on the real node of the node
//! scenarios (`radwasm_test_support::node`); deleting the template removes
//! the pod and every object Radius made for it.
//!
//! The container's image is the node's pause image (`tests/node/pause/`,
//! built by the tests and imported into containerd): nothing is pulled.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

use super::{World, application, environment};
use crate::realradius::RealRadius;

/// The image the container runs: the node's pause image, already in
/// containerd (`tests/node/build.sh`).
const IMAGE: &str = "localhost/radwasm-pause:1";

/// Objects Radius made in `namespace`, as `kind/name` (the namespace's own
/// `default` ServiceAccount is Kubernetes's).
async fn radius_objects(client: &kube::Client, namespace: &str) -> Vec<String> {
    let lp = ListParams::default();
    let mut found = Vec::new();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for d in deployments.list(&lp).await.expect("list Deployments").items {
        found.push(format!(
            "Deployment/{}",
            d.metadata.name.unwrap_or_default()
        ));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for p in pods.list(&lp).await.expect("list Pods").items {
        found.push(format!("Pod/{}", p.metadata.name.unwrap_or_default()));
    }
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    for s in services.list(&lp).await.expect("list Services").items {
        found.push(format!("Service/{}", s.metadata.name.unwrap_or_default()));
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    for a in accounts
        .list(&lp)
        .await
        .expect("list ServiceAccounts")
        .items
    {
        let name = a.metadata.name.unwrap_or_default();
        if name != "default" {
            found.push(format!("ServiceAccount/{name}"));
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_templates_container_runs_as_a_pod_on_the_node_and_goes_with_the_template() {
    let Some(node) = crate::node::node().await else {
        return;
    };
    super::install_crds(&node.cluster).await;
    let radius = RealRadius::start(&node.cluster)
        .await
        .unwrap_or_else(|e| panic!("Radius on the node's cluster: {e:#}"));
    let world = World::start_on(node.cluster.clone(), radius.handle()).await;
    let compute = world.compute_namespace();
    let mut resources = serde_json::Map::new();
    resources.insert("env".into(), environment("env", &compute));
    resources.insert("app".into(), application("web", "env"));
    resources.insert(
        "container".into(),
        json!({
            "import": "Radius",
            "type": "Applications.Core/containers@2023-10-01-preview",
            "properties": {
                "name": "web",
                "properties": {
                    "application": "[reference('app').id]",
                    "container": {"image": IMAGE},
                },
            },
            "dependsOn": ["app"],
        }),
    );
    world
        .system
        .create(&world.template("app", Value::Object(resources)))
        .await;
    // The container's operation ends when its Deployment is ready: Ready
    // means the pod runs.
    world.system.wait_phase("app", "Ready").await;
    let client = node.client().await.expect("client");
    let app_namespace = format!("{compute}-web");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &app_namespace);
    let running: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .map(|p| p.metadata.name.unwrap_or_default())
        .collect();
    assert_eq!(
        running.len(),
        1,
        "one Running pod for the container in {app_namespace}: {running:?}\n{}",
        node.diagnostics(&app_namespace).await
    );
    assert_eq!(world.system.owned("app").await.len(), 3);
    let made = radius_objects(&client, &app_namespace).await;
    assert!(
        made.iter().any(|o| o.starts_with("Deployment/")),
        "Radius rendered a Deployment: {made:?}"
    );

    world
        .system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    world.system.wait_gone("app").await;
    super::until(
        "the pod and every object Radius made are gone",
        Duration::from_secs(120),
        async || radius_objects(&client, &app_namespace).await.is_empty(),
    )
    .await;
    for (kind, name) in [
        ("containers", "web"),
        ("applications", "web"),
        ("environments", "env"),
    ] {
        assert!(
            !world.exists(&world.id(kind, name)).await,
            "{kind}/{name} is gone"
        );
    }
    world.shutdown().await;
    drop(radius);
}
