//! Scenarios on a real Kubernetes node (`radwasm_test_support::node`): the
//! chart in `deploy/chart` installed with helm as an operator installs it,
//! the controller image from `deploy/image/build.sh` run by kubelet and
//! containerd, Radius reached over the node's bridge. One node per test
//! process, shared: every scenario uses a namespace and a Helm release of
//! its own. Run just these with
//! `cargo test --locked -p radwasm --test e2e node::` (as root); see
//! docs/node-tests.md.

mod failover;
mod install;
mod limits;
mod operator;
mod policy;
mod upgrade;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ObjectMeta, PostParams};

pub use radwasm_test_support::node::{
    BRIDGE_ADDRESS, IMAGE_REPOSITORY, IMAGE_TAGS, Node, start_radius,
};

/// The shared node with the controller image built from this test
/// binary's `radwasm`; `None` (after saying so) when skipped with
/// `RADWASM_SKIP_NODE=1`. Panics, saying why, when it cannot come up.
pub async fn node() -> Option<Node> {
    if radwasm_test_support::node::skip_requested() {
        return None;
    }
    match radwasm_test_support::node::shared(Path::new(env!("CARGO_BIN_EXE_radwasm"))).await {
        Ok(node) => Some(node),
        Err(e) => panic!("the Kubernetes node did not come up: {e:#}"),
    }
}

/// Create `name` with the `restricted` Pod Security Standard enforced (as
/// an operator hardening the controller's namespace would).
pub async fn restricted_namespace(node: &Node, name: &str) {
    let namespaces: Api<Namespace> = Api::all(node.client().await.expect("client"));
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(
                [(
                    "pod-security.kubernetes.io/enforce".to_string(),
                    "restricted".to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
}

/// The `helm install`/`upgrade` arguments that point a release named
/// `release` in `namespace` at the node's image `tag` and at the Radius
/// simulator `radius_url`, watching its own namespace only (so releases
/// sharing the node never reconcile each other's templates). Every object
/// is named after the release (`name`), since ClusterRoles are global.
pub fn chart_values(release: &str, namespace: &str, tag: &str, radius_url: &str) -> Vec<String> {
    vec![
        "--set".to_string(),
        format!("name={release}"),
        "--set".to_string(),
        format!("image.repository={IMAGE_REPOSITORY}"),
        "--set".to_string(),
        format!("image.tag={tag}"),
        "--set".to_string(),
        "image.pullPolicy=Never".to_string(),
        "--set".to_string(),
        format!("watchNamespace={namespace}"),
        "--set".to_string(),
        format!("radius.url={radius_url}"),
    ]
}

/// Poll `check` (every 250 ms) until it yields a value; after `within`,
/// panic with `what` and the node's diagnostics for `namespace`.
pub async fn wait_for<T, F, Fut>(
    node: &Node,
    namespace: &str,
    what: &str,
    within: Duration,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + within;
    let mut last = None;
    loop {
        match check().await {
            Ok(Some(value)) => return value,
            Ok(None) => {}
            Err(e) => last = Some(format!("{e:#}")),
        }
        if Instant::now() > deadline {
            panic!(
                "{what}: not within {within:?} (last error: {last:?}){}",
                node.diagnostics(namespace).await
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// kubectl's output as text, or a panic with it and the diagnostics.
pub async fn kubectl_ok(node: &Node, namespace: &str, args: &[&str]) -> String {
    let out = node.kubectl(args).await.expect("run kubectl");
    if !out.status.success() {
        panic!(
            "kubectl {args:?} failed ({}):\n{}{}",
            out.status,
            radwasm_test_support::output_text(&out),
            node.diagnostics(namespace).await
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// helm's output as text (bounded to 5 minutes), or a panic with it and
/// the diagnostics.
pub async fn helm_ok(node: &Node, namespace: &str, args: &[&str]) -> String {
    let out = node
        .helm(args, Duration::from_secs(300))
        .await
        .expect("run helm");
    if !out.status.success() {
        panic!(
            "helm {args:?} failed ({}):\n{}{}",
            out.status,
            radwasm_test_support::output_text(&out),
            node.diagnostics(namespace).await
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}
