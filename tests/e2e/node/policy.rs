//! A `ReconcilePolicy` pulled from an OCI registry by the controller in its
//! pod: the registry listens on the bridge address (pods cannot reach the
//! host's loopback), the component is compiled into the chart's emptyDir
//! while the container's root file system stays read-only, and the
//! template the policy selects is decided by it while another is decided
//! by the built-in default.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams, PostParams};
use radwasm::crd::DeploymentTemplate;
use radwasm::reconcile_policy::ReconcilePolicy;
use serde_json::json;

use super::operator::{HEAVY, Release, container_id, container_pid, in_phase, node_access};
use crate::harness::own_app_template;
use crate::policies::guest;
use crate::registry::Registry;

/// Where the chart mounts the controller's compile cache.
const CACHE: &str = "/var/cache/radwasm";

/// The mount options of `mount_point` in the mount namespace of `pid`,
/// and the path of the host's file system it shows (its root field).
fn mount(pid: u32, mount_point: &str) -> Option<(String, String)> {
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).ok()?;
    // Fields: id parent major:minor root mount-point options ...; the
    // last mount on a point is the one in use.
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            if fields.get(4) != Some(&mount_point) {
                return None;
            }
            Some((fields.get(5)?.to_string(), fields.get(3)?.to_string()))
        })
        .next_back()
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_from_a_registry_on_the_bridge_decides_in_the_pod() {
    let _node = HEAVY.read().await;
    let Some(node) = node_access().await else {
        return;
    };
    let registry = Registry::start_on(node.bridge, false);
    let pushed = radwasm::policy::source::oci::push(
        &registry.reference("policies/guardrail:v1"),
        &guest("image-tag-guardrail"),
        &registry.options(),
    )
    .await
    .expect("push the guardrail to the registry");
    let tag = node.tags[0].clone();
    let mut release = Release::install(
        node,
        "node-policy",
        &tag,
        &[format!(
            "extraArgs={{--policy-insecure-registry={}}}",
            registry.addr
        )],
    )
    .await;
    release.wait_rollout().await;

    // Cluster-scoped: named after the scenario's namespace, selecting in
    // it only the templates labelled for it.
    let name = format!("{}-from-registry", release.namespace);
    let policies: Api<ReconcilePolicy> = Api::all(release.client.clone());
    let policy: ReconcilePolicy = serde_json::from_value(json!({
        "apiVersion": "radwasm.io/v1alpha1",
        "kind": "ReconcilePolicy",
        "metadata": {"name": name},
        "spec": {
            "module": {"oci": pushed.reference},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": release.namespace}},
            "objectSelector": {"matchLabels": {"policy": "guardrail"}},
        }
    }))
    .expect("ReconcilePolicy object");
    policies
        .create(&PostParams::default(), &policy)
        .await
        .expect("create the ReconcilePolicy");
    let deadline = Instant::now() + Duration::from_secs(180);
    let loaded = loop {
        let current = policies.get(&name).await.expect("get the ReconcilePolicy");
        let ready = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .is_some_and(|c| c.status == "True" && c.reason == "Loaded");
        if ready {
            break current;
        }
        if Instant::now() > deadline {
            release
                .fail(&format!(
                    "{name} not Loaded within 180 s: {:?}",
                    current.status
                ))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let status = loaded.status.unwrap_or_default();
    assert_eq!(status.name.as_deref(), Some("image-tag-guardrail"));
    println!(
        "{name} loaded from {}: {:?}",
        pushed.reference, status.digest
    );

    // The selected template is decided by the guardrail (it refuses the
    // app's image tag); the other one by the built-in default.
    let templates: Api<DeploymentTemplate> =
        Api::namespaced(release.client.clone(), &release.namespace);
    let mut guarded = own_app_template("guarded");
    guarded.metadata.namespace = Some(release.namespace.clone());
    guarded.metadata.labels = Some([("policy".to_string(), "guardrail".to_string())].into());
    let mut free = own_app_template("free");
    free.metadata.namespace = Some(release.namespace.clone());
    for template in [&guarded, &free] {
        templates
            .create(&PostParams::default(), template)
            .await
            .expect("create a template");
    }
    release.created.push("free".to_string());
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let guarded = templates.get("guarded").await.expect("get guarded");
        let free = templates.get("free").await.expect("get free");
        let by = |t: &DeploymentTemplate| {
            t.status
                .as_ref()
                .and_then(|s| s.policy.as_ref())
                .map(|p| p.reconcile_policy.clone())
        };
        if in_phase(&guarded, "Failed")
            && by(&guarded) == Some(Some(name.clone()))
            && in_phase(&free, "Ready")
            && by(&free) == Some(None)
        {
            break;
        }
        if Instant::now() > deadline {
            release
                .fail(&format!(
                    "not decided as expected within 120 s: guarded {:?}, free {:?}",
                    guarded.status, free.status
                ))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    release.assert_one_deployment_each().await;

    // In the leader's container: the root file system is read-only, the
    // compile cache is the emptyDir and holds the compiled guardrail.
    let Some(leader) = release.holder().await else {
        release.fail("no leader").await
    };
    let pod = release
        .pods_api()
        .get(&leader)
        .await
        .expect("the leader pod");
    let Some(pid) = container_id(&pod).and_then(|id| container_pid(&id)) else {
        release
            .fail(&format!("no process on the host for {leader}"))
            .await
    };
    let root = mount(pid, "/");
    let cache = mount(pid, CACHE);
    let cached = files(&PathBuf::from(format!("/proc/{pid}/root{CACHE}")));
    println!("in {leader}: / mounted {root:?}; {CACHE} mounted {cache:?}, holding {cached:?}");
    let read_only = |m: &Option<(String, String)>| {
        m.as_ref()
            .is_some_and(|(options, _)| options.split(',').any(|o| o == "ro"))
    };
    if !read_only(&root) {
        release
            .fail(&format!("the root file system is {root:?}"))
            .await;
    }
    if read_only(&cache)
        || !cache
            .as_ref()
            .is_some_and(|(_, host)| host.contains("empty-dir"))
    {
        release
            .fail(&format!("{CACHE} is not a writable emptyDir: {cache:?}"))
            .await;
    }
    if cached.is_empty() {
        release
            .fail(&format!("nothing compiled into {CACHE}"))
            .await;
    }

    policies
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the ReconcilePolicy");
    release.uninstall().await;
    drop(registry);
}
