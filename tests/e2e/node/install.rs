//! Installing the chart on a node as an operator does: `helm install` into a
//! namespace that enforces the `restricted` Pod Security Standard, the
//! controller pods Ready through their own probes under the chart's own
//! ServiceAccount, a template applied with kubectl deployed once through
//! Radius, then `helm uninstall` releasing the leader Lease and leaving the
//! CRDs and the user's templates alone.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use kube::api::{Api, ListParams, ObjectMeta, PostParams};

use super::{
    BRIDGE_ADDRESS, IMAGE_TAGS, chart_values, helm_ok, kubectl_ok, node, restricted_namespace,
    start_radius, wait_for,
};

const NAMESPACE: &str = "node-install";
const RELEASE: &str = "radwasm-install";
const PODS: Duration = Duration::from_secs(240);

/// The `restricted` standard is enforced in the namespace: a pod that
/// sets no securityContext (allowed by `baseline`) is refused (a
/// server-side dry run, nothing is created).
async fn assert_restricted_enforced(pods: &Api<Pod>) {
    let unhardened = Pod {
        metadata: ObjectMeta {
            name: Some("unhardened".to_string()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".to_string(),
                image: Some(format!("{}:{}", super::IMAGE_REPOSITORY, IMAGE_TAGS[0])),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let refused = match pods.create(&dry_run, &unhardened).await {
        Err(kube::Error::Api(status)) => status.message,
        other => format!("{other:?}"),
    };
    assert!(
        refused.contains("violates PodSecurity \"restricted:latest\""),
        "a pod without a securityContext was not refused by PodSecurity admission: {refused}"
    );
}

/// The Deployment's pod template as the chart renders it for this release.
async fn rendered_pod_spec(node: &super::Node) -> serde_json::Value {
    let manifest = helm_ok(
        node,
        NAMESPACE,
        &["get", "manifest", RELEASE, "-n", NAMESPACE],
    )
    .await;
    for document in serde_yaml::Deserializer::from_str(&manifest) {
        let value: serde_json::Value =
            serde::Deserialize::deserialize(document).expect("the release's manifest is YAML");
        if value["kind"] == "Deployment" {
            return value["spec"]["template"]["spec"].clone();
        }
    }
    panic!("the release's manifest has no Deployment:\n{manifest}");
}

fn ready_at(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(ready.last_transition_time.as_ref()?.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_installs_on_a_node_deploys_once_and_uninstalls_cleanly() {
    let Some(node) = node().await else { return };
    eprintln!("node up in {:.1} s", node.up_time.as_secs_f64());
    let radius = start_radius(radwasm_sim_radius::SimConfig {
        deploy_duration: Duration::from_millis(300),
        retry_after_secs: 0,
        ..Default::default()
    })
    .await
    .expect("start the Radius simulator on the bridge");
    assert_eq!(radius.addr().ip(), std::net::IpAddr::V4(BRIDGE_ADDRESS));
    let client = node.client().await.expect("client");
    restricted_namespace(&node, NAMESPACE).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    assert_restricted_enforced(&pods).await;

    let mut install = vec!["install", RELEASE, "deploy/chart", "--namespace", NAMESPACE];
    let values = chart_values(RELEASE, NAMESPACE, IMAGE_TAGS[0], &radius.base_url());
    install.extend(values.iter().map(String::as_str));
    helm_ok(&node, NAMESPACE, &install).await;
    let installed = Instant::now();

    // Ready through their own probes: the Deployment's replicas all ready.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(
        &node,
        NAMESPACE,
        "both controller replicas Ready",
        PODS,
        || async {
            let deployment = deployments.get(RELEASE).await?;
            let ready = deployment
                .status
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0);
            Ok((ready == 2).then_some(()))
        },
    )
    .await;
    let all_ready = installed.elapsed();
    let selector = format!("app.kubernetes.io/name={RELEASE}");
    let running = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("list the controller's pods");
    assert_eq!(
        running.items.len(),
        2,
        "two replicas, no restarts or extras"
    );
    for pod in &running.items {
        let created = pod.metadata.creation_timestamp.as_ref().expect("created").0;
        let ready = ready_at(pod).expect("Ready");
        eprintln!(
            "pod {}: created to Ready {:.0} s (server clock, 1 s resolution)",
            pod.metadata.name.as_deref().unwrap_or("?"),
            (ready - created)
                .total(k8s_openapi::jiff::Unit::Second)
                .unwrap_or(f64::NAN)
        );
    }
    eprintln!(
        "helm install returned to both replicas Ready: {:.1} s",
        all_ready.as_secs_f64()
    );

    // Admitted unchanged: the pod runs as the chart rendered it, under the
    // chart's own ServiceAccount.
    let rendered = rendered_pod_spec(&node).await;
    for pod in &running.items {
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.service_account_name.as_deref(), Some(RELEASE));
        assert_eq!(
            serde_json::to_value(&spec.security_context).expect("JSON"),
            rendered["securityContext"],
            "the pod's securityContext differs from the rendered one"
        );
        assert_eq!(
            serde_json::to_value(&spec.containers[0].security_context).expect("JSON"),
            rendered["containers"][0]["securityContext"],
            "the container's securityContext differs from the rendered one"
        );
        let restarts = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|c| c.iter().map(|c| c.restart_count).sum::<i32>())
            .unwrap_or(0);
        assert_eq!(restarts, 0, "a controller container restarted");
    }

    // A template applied with kubectl, as in the docs, reaches Ready with
    // exactly one deployment in Radius.
    let example = std::fs::read_to_string(
        radwasm_test_support::repository().join("deploy/examples/app.yaml"),
    )
    .expect("read deploy/examples/app.yaml");
    let example = example.replace("namespace: default\n", &format!("namespace: {NAMESPACE}\n"));
    let file = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(file.path(), example).expect("write the template");
    let path = file.path().display().to_string();
    kubectl_ok(&node, NAMESPACE, &["apply", "-f", &path]).await;
    let applied = Instant::now();
    wait_for(&node, NAMESPACE, "the template Ready", PODS, || async {
        let out = node
            .kubectl(&[
                "-n",
                NAMESPACE,
                "get",
                "deploymenttemplate",
                "demo",
                "-o",
                "jsonpath={.status.phrase}",
            ])
            .await?;
        Ok((String::from_utf8_lossy(&out.stdout) == "Ready").then_some(()))
    })
    .await;
    eprintln!(
        "template applied to Ready: {:.1} s",
        applied.elapsed().as_secs_f64()
    );
    assert_eq!(
        radius.stats().deployment_puts,
        1,
        "one deployment reached Radius"
    );

    // No probe failed while the controllers started (the events up to now).
    let events = kubectl_ok(
        &node,
        NAMESPACE,
        &["-n", NAMESPACE, "get", "events", "-o", "json"],
    )
    .await;
    let events: serde_json::Value = serde_json::from_str(&events).expect("events JSON");
    let unhealthy: Vec<String> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["type"] == "Warning" && e["reason"] == "Unhealthy")
        .map(|e| format!("{}: {}", e["involvedObject"]["name"], e["message"]))
        .collect();
    // Asserted at the end, so that a failed probe does not hide the rest.

    // JSON logs with no Rust debug text in any field.
    for pod in &running.items {
        let name = pod.metadata.name.as_deref().expect("name");
        let logs = kubectl_ok(&node, NAMESPACE, &["-n", NAMESPACE, "logs", name]).await;
        assert!(!logs.trim().is_empty(), "pod {name} logged nothing");
        for line in logs.lines().filter(|l| !l.trim().is_empty()) {
            let record: Result<serde_json::Value, _> = serde_json::from_str(line);
            assert!(
                record.as_ref().is_ok_and(serde_json::Value::is_object),
                "pod {name} logged a line that is not a JSON object: {line}"
            );
            assert!(
                !line.contains("Some(") && !line.contains("None\""),
                "pod {name} logged Rust debug text: {line}"
            );
        }
    }

    // The leader holds the Lease; uninstalling stops the pods and releases
    // it, and leaves the CRDs and the user's template.
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let holder = leases
        .get("radwasm-controller")
        .await
        .expect("the leader Lease")
        .spec
        .and_then(|s| s.holder_identity);
    assert!(
        running
            .items
            .iter()
            .any(|p| p.metadata.name.is_some() && p.metadata.name == holder),
        "the Lease is held by {holder:?}, not a controller pod"
    );
    helm_ok(&node, NAMESPACE, &["uninstall", RELEASE, "-n", NAMESPACE]).await;
    wait_for(
        &node,
        NAMESPACE,
        "the controller pods gone",
        PODS,
        || async {
            let left = pods.list(&ListParams::default().labels(&selector)).await?;
            Ok(left.items.is_empty().then_some(()))
        },
    )
    .await;
    let lease = leases
        .get("radwasm-controller")
        .await
        .expect("the Lease stays")
        .spec
        .unwrap_or_default();
    assert_eq!(
        lease.holder_identity, None,
        "the Lease was not released on uninstall: {lease:?}"
    );
    kubectl_ok(
        &node,
        NAMESPACE,
        &[
            "get",
            "crd",
            "deploymenttemplates.radapp.io",
            "deploymentresources.radapp.io",
        ],
    )
    .await;
    kubectl_ok(
        &node,
        NAMESPACE,
        &["-n", NAMESPACE, "get", "deploymenttemplate", "demo"],
    )
    .await;
    assert_eq!(radius.stats().deployment_puts, 1);

    // A reinstall leads with a new pod.
    helm_ok(&node, NAMESPACE, &install).await;
    wait_for(
        &node,
        NAMESPACE,
        "a reinstalled replica leading",
        PODS,
        || async {
            let now = pods.list(&ListParams::default().labels(&selector)).await?;
            let holder = leases
                .get("radwasm-controller")
                .await?
                .spec
                .and_then(|s| s.holder_identity);
            Ok(now
                .items
                .iter()
                .any(|p| p.metadata.name.is_some() && p.metadata.name == holder)
                .then_some(()))
        },
    )
    .await;
    helm_ok(&node, NAMESPACE, &["uninstall", RELEASE, "-n", NAMESPACE]).await;
    assert!(
        unhealthy.is_empty(),
        "probes failed while the controller started (kubelet's Unhealthy events): {unhealthy:#?}"
    );
    let _ = node
        .kubectl(&["delete", "namespace", NAMESPACE, "--wait=false"])
        .await;
}
