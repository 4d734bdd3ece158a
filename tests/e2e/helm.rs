//! The Helm chart in `deploy/chart`, with the real `helm` (built from its Go
//! module by `tests/helm/build.sh`): it lints, renders exactly the objects
//! `kubectl kustomize deploy/` renders, turns its values into the
//! controller's arguments, and installs onto (and uninstalls from) the real
//! Kubernetes API server.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use serde::Deserialize;

use crate::realkube::{ok_stdout, shared, skip_requested};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

/// The path of `helm`, built (or reused) by tests/helm/build.sh.
fn helm_binary() -> PathBuf {
    let out = Command::new("bash")
        .arg(repo_root().join("tests/helm/build.sh"))
        .output()
        .expect("run tests/helm/build.sh");
    assert!(
        out.status.success(),
        "tests/helm/build.sh failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(stdout.lines().last().expect("the helm path").trim())
}

fn helm(args: &[&str]) -> Output {
    Command::new(helm_binary())
        .args(args)
        .current_dir(repo_root())
        .output()
        .expect("run helm")
}

/// `value` with every number as a float: Helm writes the CRDs' `minimum: 0`
/// back as `0.0` (it reads YAML through JSON), the same value.
fn numbers_as_floats(value: serde_yaml::Value) -> serde_yaml::Value {
    use serde_yaml::Value;
    match value {
        Value::Number(number) => Value::from(number.as_f64().unwrap_or(f64::NAN)),
        Value::Sequence(items) => {
            Value::Sequence(items.into_iter().map(numbers_as_floats).collect())
        }
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(k, v)| (k, numbers_as_floats(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Every object of a multi-document YAML text, by kind and name.
pub(crate) fn objects(yaml: &str) -> BTreeMap<(String, String), serde_yaml::Value> {
    let mut out = BTreeMap::new();
    for document in serde_yaml::Deserializer::from_str(yaml) {
        let value = serde_yaml::Value::deserialize(document).expect("YAML");
        if value.is_null() {
            continue;
        }
        let kind = value["kind"].as_str().expect("kind").to_string();
        let name = value["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        out.insert((kind, name), numbers_as_floats(value));
    }
    out
}

pub(crate) fn rendered(values: &[&str]) -> String {
    let mut args = vec![
        "template",
        "radwasm",
        "deploy/chart",
        "--namespace",
        "radwasm-system",
        "--include-crds",
    ];
    args.extend(values);
    ok_stdout(&helm(&args), "helm template")
}

/// Objects `helm uninstall` leaves behind (`helm.sh/resource-policy: keep`),
/// by kind and name; the annotation is taken off each, as Helm's alone.
fn take_kept(chart: &mut BTreeMap<(String, String), serde_yaml::Value>) -> Vec<(String, String)> {
    let mut kept = Vec::new();
    for (key, object) in chart.iter_mut() {
        let Some(annotations) = object["metadata"]
            .get_mut("annotations")
            .and_then(|a| a.as_mapping_mut())
        else {
            continue;
        };
        if let Some(policy) = annotations.remove("helm.sh/resource-policy") {
            assert_eq!(policy.as_str(), Some("keep"), "{key:?}");
            kept.push(key.clone());
        }
        if annotations.is_empty()
            && let Some(metadata) = object["metadata"].as_mapping_mut()
        {
            metadata.remove("annotations");
        }
    }
    kept
}

#[test]
fn the_chart_lints_and_renders_what_kustomize_renders() {
    ok_stdout(&helm(&["lint", "--strict", "deploy/chart"]), "helm lint");
    let mut chart = objects(&rendered(&[]));
    // What the pods need to release the leader Lease outlives `helm
    // uninstall`: Helm deletes the Deployment and the RBAC together, and the
    // pods stop afterwards (docs/install.md, "Uninstall").
    assert_eq!(
        take_kept(&mut chart),
        [
            ("Role".to_string(), "radwasm".to_string()),
            ("RoleBinding".to_string(), "radwasm".to_string()),
            ("ServiceAccount".to_string(), "radwasm".to_string()),
        ]
    );
    let kustomize = Command::new("kubectl")
        .args(["kustomize", "deploy/"])
        .current_dir(repo_root())
        .output()
        .expect("run kubectl kustomize (kubectl on PATH)");
    let mut kustomized = objects(&ok_stdout(&kustomize, "kubectl kustomize deploy/"));
    // Helm leaves the namespace to `--create-namespace`.
    assert!(
        kustomized
            .remove(&("Namespace".to_string(), "radwasm-system".to_string()))
            .is_some()
    );
    assert_eq!(
        chart.keys().collect::<Vec<_>>(),
        kustomized.keys().collect::<Vec<_>>()
    );
    for (key, object) in &kustomized {
        assert_eq!(
            &chart[key], object,
            "{key:?} differs between the chart and deploy/"
        );
    }
}

#[test]
fn the_charts_values_become_the_controllers_arguments() {
    let chart = objects(&rendered(&[
        "--set",
        "name=shard-a",
        "--set",
        "replicas=1",
        "--set",
        "leaderElection.lease=radwasm-shard-a",
        "--set",
        "watchLabelSelector=radapp.io/shard=a",
        "--set",
        "watchNamespace=team",
        "--set",
        "policy=configmap",
        "--set",
        "image.tag=0.2.0",
        "--set",
        "image.pullPolicy=Never",
        "--set",
        "radius.url=http://10.233.0.1:7443",
        "--set",
        "probes.startup.failureThreshold=120",
        "--set",
        "policyLabelSelector=radwasm.io/controller=a",
        "--set",
        "kubeApi.qps=50",
        "--set",
        "kubeApi.burst=100",
        "--set",
        "extraArgs={--concurrency=4}",
    ]));
    let deployment = &chart[&("Deployment".to_string(), "shard-a".to_string())];
    assert_eq!(deployment["spec"]["replicas"].as_f64(), Some(1.0));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "localhost/radwasm:0.2.0");
    assert_eq!(container["imagePullPolicy"], "Never");
    let args: Vec<&str> = container["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert_eq!(
        args,
        [
            "run",
            "--policy=/etc/radwasm/policy/policy.wasm",
            "--metrics-address=0.0.0.0:8080",
            "--log-format=json",
            "--compile-cache=/var/cache/radwasm",
            "--leader-elect",
            "--leader-election-lease=radwasm-shard-a",
            "--namespace=team",
            "--watch-label-selector=radapp.io/shard=a",
            "--policy-label-selector=radwasm.io/controller=a",
            "--kube-api-qps=50",
            "--kube-api-burst=100",
            "--radius-url=http://10.233.0.1:7443",
            "--concurrency=4",
        ]
    );
    assert_eq!(
        container["startupProbe"]["failureThreshold"].as_f64(),
        Some(120.0)
    );
    // Every object is named after `name`, so a second release fits beside.
    for (kind, name) in chart.keys() {
        if kind != "CustomResourceDefinition" {
            assert!(name.starts_with("shard-a"), "{kind} {name}");
        }
    }
    // The arguments are ones the controller accepts.
    let help = Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(["run", "--help"])
        .output()
        .expect("radwasm run --help");
    let help = String::from_utf8_lossy(&help.stdout);
    for arg in &args[1..] {
        let flag = arg.split('=').next().unwrap_or(arg);
        assert!(help.contains(flag), "radwasm run does not know {flag}");
    }
}

#[test]
fn the_default_install_names_a_loadable_image_and_probes_each_question_apart() {
    let chart = objects(&rendered(&[]));
    let deployment = &chart[&("Deployment".to_string(), "radwasm".to_string())];
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    // The name deploy/image/build.sh gives the image it builds, run from
    // the node once loaded there.
    assert_eq!(container["image"], "localhost/radwasm:0.1.0");
    assert_eq!(container["imagePullPolicy"], "IfNotPresent");
    let path = |probe: &str| {
        container[probe]["httpGet"]["path"]
            .as_str()
            .map(str::to_string)
    };
    assert_eq!(path("startupProbe").as_deref(), Some("/startupz?wait=9s"));
    assert_eq!(path("livenessProbe").as_deref(), Some("/healthz"));
    assert_eq!(path("readinessProbe").as_deref(), Some("/readyz"));
    // No --radius-url: the API server's aggregated path.
    let args = container["args"].as_sequence().expect("args");
    assert!(
        !args
            .iter()
            .any(|a| a.as_str().is_some_and(|a| a.starts_with("--radius-url"))),
        "{args:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_installs_on_the_real_api_server_and_uninstalls() {
    if skip_requested() {
        return;
    }
    let cluster = shared().await.unwrap_or_else(|e| panic!("{e:#}"));
    let kubeconfig = cluster.kubeconfig.display().to_string();
    let release = "radwasm-helm";
    let name = format!("name={release}");
    let install_args = [
        "install",
        release,
        "deploy/chart",
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        release,
        "--create-namespace",
        "--set",
        &name,
        "--wait=false",
    ];
    let notes = ok_stdout(&helm(&install_args), "helm install");
    // What to check next (NOTES.txt), shown after `helm install`.
    for text in [
        "published anywhere",
        "rollout status deployment/radwasm-helm",
        "/apis/api.ucp.dev/v1alpha3",
        "get lease radwasm-controller",
        "docs/install.md",
    ] {
        assert!(notes.contains(text), "NOTES lack {text:?}:\n{notes}");
    }
    let listed = ok_stdout(
        &helm(&["list", "--kubeconfig", &kubeconfig, "--namespace", release]),
        "helm list",
    );
    assert!(
        listed.contains(release) && listed.contains("deployed"),
        "{listed}"
    );
    for object in [
        "deployment/radwasm-helm",
        "serviceaccount/radwasm-helm",
        "role/radwasm-helm",
        "rolebinding/radwasm-helm",
        "configmap/radwasm-helm-policy",
    ] {
        let out = cluster
            .kubectl(&["get", object, "--namespace", release, "-o", "name"])
            .await
            .expect("kubectl");
        ok_stdout(&out, &format!("kubectl get {object}"));
    }
    for object in [
        "clusterrole/radwasm-helm",
        "clusterrolebinding/radwasm-helm",
    ] {
        let out = cluster
            .kubectl(&["get", object, "-o", "name"])
            .await
            .expect("kubectl");
        ok_stdout(&out, &format!("kubectl get {object}"));
    }
    // The CRDs the chart carries are the product's (already there in this
    // cluster, so Helm leaves them as they are).
    let out = cluster
        .kubectl(&["get", "crd", "deploymenttemplates.radapp.io", "-o", "name"])
        .await
        .expect("kubectl");
    ok_stdout(&out, "kubectl get crd");

    let uninstall = || {
        helm(&[
            "uninstall",
            release,
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            release,
            "--wait",
            "--timeout",
            "60s",
        ])
    };
    let said = ok_stdout(&uninstall(), "helm uninstall");
    // What the stopping pods need to release the leader Lease stays, and
    // Helm says so.
    assert!(said.contains("kept due to the resource policy"), "{said}");
    let kept = ["serviceaccount", "role", "rolebinding"].map(|kind| format!("{kind}/{release}"));
    for object in &kept {
        let out = cluster
            .kubectl(&["get", object, "--namespace", release, "-o", "name"])
            .await
            .expect("kubectl");
        ok_stdout(&out, &format!("kubectl get {object} after helm uninstall"));
    }
    // Installing again adopts them (they still carry the release's name).
    ok_stdout(&helm(&install_args), "helm install again");
    ok_stdout(&uninstall(), "helm uninstall again");
    // docs/install.md, "Uninstall": removed by hand once the pods are gone.
    let mut delete = vec!["delete", "--namespace", release];
    delete.extend(kept.iter().map(String::as_str));
    let out = cluster.kubectl(&delete).await.expect("kubectl");
    ok_stdout(&out, "kubectl delete the kept objects");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = cluster
            .kubectl(&["get", "clusterrole/radwasm-helm", "-o", "name"])
            .await
            .expect("kubectl");
        if !out.status.success() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the ClusterRole outlived helm uninstall"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
