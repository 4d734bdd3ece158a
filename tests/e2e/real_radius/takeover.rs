//! Switching from Radius's own controller, both against the same real
//! Radius: Radius's controller (built from Radius's source) deploys a
//! template written in the shape Radius's CLI writes; it is stopped; this
//! controller takes the template over without sending a deployment and
//! keeps Radius's DeploymentResources. Radius's controller watches every
//! namespace, so this scenario has a cluster and a Radius of its own.

use std::time::Duration;

use serde_json::json;

use super::{World, application, environment};
use crate::realkube::RealCluster;
use crate::realradius::{RadiusController, RealRadius, Recorder};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn radius_own_controller_deploys_and_this_one_takes_over_without_redeploying() {
    let cluster = RealCluster::start().await.expect("a cluster of its own");
    let kube = cluster.handle();
    super::install_crds(&kube).await;
    RadiusController::install_crds(&kube)
        .await
        .expect("Radius's Recipe CRD");
    let radius = RealRadius::start(&kube)
        .await
        .unwrap_or_else(|e| panic!("Radius: {e:#}"));

    // This controller's world, its controller stopped until the takeover.
    let mut world = World::start_on(kube.clone(), radius.handle()).await;
    world.system.kill_controller();

    let theirs_recorder = Recorder::start(&radius.handle().ucp_url)
        .await
        .expect("proxy");
    let theirs = RadiusController::start(&kube, &theirs_recorder.url())
        .await
        .unwrap_or_else(|e| panic!("Radius's controller: {e:#}"));
    let arm = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.1-experimental",
        "contentVersion": "1.0.0.0",
        "parameters": {"namespace": {"type": "string"}},
        "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
        "resources": {
            "env": environment("env", "[parameters('namespace')]"),
            "frontend": application("frontend", "env"),
        },
    });
    let scope = world.scope();
    let manifest = json!({
        "apiVersion": "radapp.io/v1alpha3",
        "kind": "DeploymentTemplate",
        "metadata": {"name": "app", "namespace": world.system.namespace},
        "spec": {
            "template": arm.to_string(),
            "parameters": {"namespace": world.compute_namespace()},
            "providerConfig": json!({
                "radius": {"type": "Radius", "value": {"scope": scope}},
                "deployments": {"type": "Microsoft.Resources", "value": {"scope": scope}},
            }).to_string(),
        },
    });
    let path = world.system.dir.path().join("app.yaml");
    std::fs::write(&path, serde_yaml::to_string(&manifest).expect("yaml")).expect("write");
    let out = kube
        .kubectl(&["apply", "-f", &path.display().to_string()])
        .await
        .expect("kubectl");
    crate::realkube::ok_stdout(&out, "kubectl apply the template");
    super::until(
        "Radius's controller makes the template Ready",
        Duration::from_secs(120),
        async || {
            world
                .system
                .templates()
                .get_opt("app")
                .await
                .ok()
                .flatten()
                .and_then(|t| t.status)
                .and_then(|s| s.phrase)
                .as_deref()
                == Some("Ready")
        },
    )
    .await;
    // Radius's controller may send the same template more than once (a
    // second PUT before its first status write lands; seen here): at least
    // one reached Radius.
    let their_puts = theirs_recorder.count("PUT", "/Microsoft.Resources/deployments/");
    assert!(their_puts >= 1, "{:?}", theirs_recorder.requests());
    eprintln!("Radius's controller sent {their_puts} deployment(s) for one template");
    let their_resources = world.system.owned("app").await.len();
    assert_eq!(
        their_resources, 2,
        "Radius's controller made a DeploymentResource each"
    );
    drop(theirs);

    // The switch: this controller starts, takes the template over, and
    // sends no deployment for a spec Radius already deployed.
    world.system.start_controller();
    world
        .system
        .wait_template("app", "taken over (Ready condition)", |t| {
            t.and_then(|t| t.status.as_ref()).is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            })
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        world.deployment_puts("app"),
        0,
        "no deployment after the takeover: {:?}",
        world.recorder.requests()
    );
    assert_eq!(world.system.owned("app").await.len(), 2);
    assert!(world.exists(&world.id("applications", "frontend")).await);

    // And it owns what Radius's controller deployed: deleting the template
    // deletes both resources.
    world
        .system
        .templates()
        .delete("app", &Default::default())
        .await
        .expect("delete");
    world.system.wait_gone("app").await;
    assert!(!world.exists(&world.id("applications", "frontend")).await);
    assert!(!world.exists(&world.id("environments", "env")).await);
    world.shutdown().await;
    drop(radius);
    drop(cluster);
}
