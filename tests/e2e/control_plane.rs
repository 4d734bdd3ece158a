//! The product on the real Kubernetes control plane (see [`crate::realkube`]):
//! its CRDs, manifests and kubectl views, garbage collection by the real
//! controller manager, ServiceAccount tokens, and the whole scenario suite
//! run a second time against the real API server.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::realkube::{
    CONTROLLER_NAMESPACE, ClusterHandle, client_for, eventually, kubectl, ok_stdout, repo_root,
    shared, skip_requested,
};

/// The product's CRDs and example on the real API server, garbage collection
/// by the real controller manager, a TokenRequest-minted identity that RBAC
/// refuses, `kubectl apply -k deploy/`, and kubectl's views of the product's
/// objects while the controller (a process, as the deployed ServiceAccount)
/// reconciles them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_control_plane_serves_product_crds_gc_and_service_account_tokens() {
    if skip_requested() {
        return;
    }
    let cluster = shared().await.unwrap_or_else(|e| panic!("{e:#}"));
    let client = cluster.client().await.unwrap();
    let root = repo_root();

    // The product's generated CRDs, applied as a user would, become
    // Established.
    let crds_dir = root.join("deploy/crds");
    let out = cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "-f",
            &crds_dir.display().to_string(),
        ])
        .await
        .unwrap();
    ok_stdout(&out, "kubectl apply --server-side -f deploy/crds/");
    crate::realkube::product_crds_established(&client)
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));

    // kubectl explain reads the CRD's schema from the published OpenAPI,
    // which the server updates shortly after the CRD is Established.
    let explained = eventually(
        "kubectl explain deploymenttemplates.spec",
        Duration::from_secs(60),
        || async {
            let out = cluster
                .kubectl(&["explain", "deploymenttemplates.spec"])
                .await?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok((out.status.success() && text.contains("FIELDS")).then_some(text))
        },
    )
    .await;
    assert!(explained.contains("template"), "{explained}");

    // The bundled example validates against the CRD schema (strict field
    // validation) in a namespace of its own.
    let ns = "realkube";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(ns.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut example: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("deploy/examples/app.yaml")).unwrap(),
    )
    .unwrap();
    example["metadata"]["namespace"] = ns.into();
    let example_path = cluster.dir.join("app.yaml");
    std::fs::write(&example_path, serde_yaml::to_string(&example).unwrap()).unwrap();
    let out = cluster
        .kubectl(&[
            "apply",
            "--server-side",
            "--validate=strict",
            "-f",
            &example_path.display().to_string(),
        ])
        .await
        .unwrap();
    ok_stdout(
        &out,
        "kubectl apply --server-side -f deploy/examples/app.yaml",
    );
    let templates: Api<radwasm::crd::DeploymentTemplate> = Api::namespaced(client.clone(), ns);
    let demo = templates.get("demo").await.unwrap();
    assert!(
        demo.spec
            .template
            .contains("Applications.Core/applications"),
        "the stored template is the example's"
    );

    // Garbage collection by kube-controller-manager: deleting the owner
    // removes the ConfigMap that names it in ownerReferences.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let owner = cms
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some("owner".to_string()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    cms.create(
        &PostParams::default(),
        &ConfigMap {
            metadata: ObjectMeta {
                name: Some("dependent".to_string()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".to_string(),
                    kind: "ConfigMap".to_string(),
                    name: "owner".to_string(),
                    uid: owner.metadata.uid.clone().unwrap(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    cms.delete("owner", &DeleteParams::default()).await.unwrap();
    eventually(
        "the garbage collector deletes the dependent ConfigMap",
        Duration::from_secs(90),
        || {
            let cms = cms.clone();
            async move { Ok(cms.get_opt("dependent").await?.is_none().then_some(())) }
        },
    )
    .await;

    // A token minted through the TokenRequest API authenticates as the
    // ServiceAccount, and RBAC (which grants it nothing) forbids listing
    // Secrets.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    sas.create(
        &PostParams::default(),
        &ServiceAccount {
            metadata: ObjectMeta {
                name: Some("reader".to_string()),
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let sa_kubeconfig = cluster
        .kubeconfig_for_service_account(&client, ns, "reader", None)
        .await
        .unwrap();
    let sa_client = client_for(&sa_kubeconfig).await.unwrap();
    let review = Api::<SelfSubjectReview>::all(sa_client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let user = review.status.and_then(|s| s.user_info).unwrap_or_default();
    assert_eq!(
        user.username.as_deref(),
        Some("system:serviceaccount:realkube:reader")
    );
    assert!(
        user.groups
            .unwrap_or_default()
            .contains(&"system:serviceaccounts:realkube".to_string())
    );
    match Api::<Secret>::namespaced(sa_client, ns)
        .list(&ListParams::default())
        .await
    {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
        other => panic!("listing Secrets as the ServiceAccount must be forbidden: {other:?}"),
    }
    // The same through kubectl with the written kubeconfig.
    let out = kubectl(
        &sa_kubeconfig,
        &["auth", "can-i", "list", "secrets", "-n", ns],
    )
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "no");
    assert!(cluster.server.starts_with("https://127.0.0.1:"));

    kustomization_applies_but_its_pods_never_run(&cluster).await;
    kubectl_views_the_objects_the_controller_reconciles(&cluster).await;
    eprintln!("realkube: startup took {:?}", cluster.startup);
}

/// `kubectl apply -k deploy/` as an operator would run it: every object is
/// accepted (CRDs, namespace, RBAC, policy ConfigMap, Deployment); the
/// Deployment's Pods are created by the controller manager but never
/// scheduled or run (there are no nodes, scheduler or kubelet here, so the
/// image is never pulled).
async fn kustomization_applies_but_its_pods_never_run(cluster: &ClusterHandle) {
    let deploy = repo_root().join("deploy").display().to_string();
    let out = cluster.kubectl(&["apply", "-k", &deploy]).await.unwrap();
    let applied = ok_stdout(&out, "kubectl apply -k deploy/");
    for object in [
        "customresourcedefinition.apiextensions.k8s.io/deploymenttemplates.radapp.io",
        "customresourcedefinition.apiextensions.k8s.io/deploymentresources.radapp.io",
        "namespace/radwasm-system",
        "serviceaccount/radwasm",
        "role.rbac.authorization.k8s.io/radwasm",
        "clusterrole.rbac.authorization.k8s.io/radwasm",
        "rolebinding.rbac.authorization.k8s.io/radwasm",
        "clusterrolebinding.rbac.authorization.k8s.io/radwasm",
        "configmap/radwasm-policy",
        "deployment.apps/radwasm",
    ] {
        assert!(applied.contains(object), "{object} not applied:\n{applied}");
    }
    // The ReplicaSet's two Pods exist, with the ServiceAccount's token
    // mounted by admission, and stay Pending on no node.
    let client = cluster.client().await.unwrap();
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, CONTROLLER_NAMESPACE);
    let listed = eventually(
        "the Deployment's two Pods are created",
        Duration::from_secs(60),
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app.kubernetes.io/name=radwasm"))
                    .await?;
                Ok((list.items.len() == 2).then_some(list.items))
            }
        },
    )
    .await;
    for pod in listed {
        let spec = pod.spec.unwrap_or_default();
        assert_eq!(spec.service_account_name.as_deref(), Some("radwasm"));
        assert!(spec.node_name.is_none(), "no node to run on");
        assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Pending"));
    }
}

/// With the controller running (`radwasm run`, as the ServiceAccount of
/// deploy/rbac.yaml) the bundled example goes Ready, and kubectl's `get`,
/// `describe`, `wait` and `explain` show what it did.
async fn kubectl_views_the_objects_the_controller_reconciles(cluster: &ClusterHandle) {
    use crate::harness::{Backend, System};
    let system = System::start_on(Backend::Real, &[], Duration::from_millis(300)).await;
    let ns = system.namespace.clone();
    let mut example: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("deploy/examples/app.yaml")).unwrap(),
    )
    .unwrap();
    example["metadata"]["namespace"] = ns.clone().into();
    let example_path = system.dir.path().join("example.yaml");
    std::fs::write(&example_path, serde_yaml::to_string(&example).unwrap()).unwrap();
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cluster.kubectl(&args).await.unwrap();
        ok_stdout(&out, &format!("kubectl {}", args.join(" ")))
    };
    let args = |text: &str| -> Vec<String> {
        text.split_whitespace()
            .map(|a| a.replace("{ns}", &ns))
            .chain([format!("--namespace={ns}")])
            .collect()
    };
    run(vec![
        "apply".into(),
        "-f".into(),
        example_path.display().to_string(),
    ])
    .await;
    run(args(
        "wait --for=condition=Ready deploymenttemplate/demo --timeout=60s",
    ))
    .await;
    let got = run(args("get deploymenttemplates")).await;
    assert!(
        got.contains("PHASE") && got.contains("POLICY") && got.contains("demo"),
        "{got}"
    );
    let row = got
        .lines()
        .find(|l| l.starts_with("demo"))
        .unwrap_or_default();
    assert!(row.contains("Ready") && row.contains("default"), "{got}");
    let got = run(args("get radius -o wide")).await;
    assert_eq!(
        got.lines()
            .filter(|l| l.starts_with("deploymentresource.radapp.io/"))
            .count(),
        3,
        "one DeploymentResource per Radius resource:\n{got}"
    );
    assert!(got.contains("/providers/Applications.Core/"), "{got}");
    let described = eventually(
        "kubectl describe shows the controller's Events",
        Duration::from_secs(30),
        || {
            let args = args("describe deploymenttemplate demo");
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = cluster.kubectl(&args).await?;
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                Ok((out.status.success() && text.contains("DeploymentSucceeded")).then_some(text))
            }
        },
    )
    .await;
    for text in ["Phrase:", "Ready", "Output Resources:", "Events:"] {
        assert!(described.contains(text), "{text} missing:\n{described}");
    }
    // A manifest in the shape Radius's CLI writes (parameters a map of text,
    // providerConfig JSON text) is accepted as it is and deployed.
    let scope = crate::harness::SCOPE;
    let radius_shaped = serde_json::json!({
        "apiVersion": "radapp.io/v1alpha3",
        "kind": "DeploymentTemplate",
        "metadata": {"name": "from-rad-cli", "namespace": ns},
        "spec": {
            "template": crate::harness::fixture("cli-deploymenttemplate.json"),
            "parameters": {"tag": "v1.0.0", "kubernetesNamespace": "apps"},
            "providerConfig": serde_json::to_string_pretty(&serde_json::json!({
                "radius": {"type": "Radius", "value": {"scope": scope}},
                "deployments": {"type": "Microsoft.Resources", "value": {"scope": scope}},
            })).unwrap(),
        },
    });
    let radius_shaped_path = system.dir.path().join("from-rad-cli.yaml");
    std::fs::write(
        &radius_shaped_path,
        serde_yaml::to_string(&radius_shaped).unwrap(),
    )
    .unwrap();
    run(vec![
        "apply".into(),
        "-f".into(),
        radius_shaped_path.display().to_string(),
    ])
    .await;
    run(args(
        "wait --for=condition=Ready deploymenttemplate/from-rad-cli --timeout=60s",
    ))
    .await;
    run(args("delete deploymenttemplate from-rad-cli --timeout=60s")).await;
    let explained = run(vec!["explain".into(), "deploymenttemplates.status".into()]).await;
    assert!(explained.contains("phrase"), "{explained}");
    let explained = run(vec!["explain".into(), "deploymentresources.spec".into()]).await;
    assert!(explained.contains("id"), "{explained}");
    // Deleting waits for the controller to remove its finalizer after the
    // Radius resources are gone.
    run(args("delete deploymenttemplate demo --timeout=60s")).await;
    assert!(system.radius().resource_ids().is_empty());
    let left = run(args("get deploymentresources -o name")).await;
    assert!(left.trim().is_empty(), "{left}");
    system.shutdown().await;
}

/// How long the whole scenario suite may take on the real API server before
/// the run is stopped and reported as failed.
const REAL_SUITE_BOUND: Duration = Duration::from_secs(30 * 60);

/// The scenario suite again, on the real API server: this test binary runs
/// itself once more with `RADWASM_E2E_APISERVER=real`, so that
/// `cargo test --locked` runs every scenario on both servers. Skipped in
/// that second run: this test, the tests of this module and of `rbac` (they
/// use the real server in both runs), `dev` and `modules` (`radwasm dev`
/// brings its own embedded server), `churn` (it injects the embedded
/// server's faults, so it runs on that one whatever the backend) and `helm`
/// (it installs onto the real server in both runs) and `crd_schema` (each
/// of its tests picks its server, the real one a cluster of its own). The
/// second run's output is printed when it fails.
#[test]
fn every_scenario_also_passes_on_the_real_api_server() {
    use crate::harness::{BACKEND_ENV, Backend};
    if Backend::from_env() == Backend::Real || skip_requested() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let log = tempfile::NamedTempFile::new().expect("a temp file for the run's output");
    let mut child = Command::new(exe)
        .env(BACKEND_ENV, "real")
        .args([
            "--skip",
            "control_plane::",
            "--skip",
            "rbac::",
            "--skip",
            "dev::",
            "--skip",
            "modules::",
            "--skip",
            "churn::",
            "--skip",
            "helm::",
            "--skip",
            "crd_schema::",
            "--skip",
            "image::",
            "--test-threads",
            "2",
        ])
        .stdin(Stdio::null())
        .stdout(log.reopen().expect("log"))
        .stderr(log.reopen().expect("log"))
        .spawn()
        .expect("run the e2e binary again");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the real-server run") {
            break Some(status);
        }
        if started.elapsed() > REAL_SUITE_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let output = std::fs::read_to_string(log.path()).unwrap_or_default();
    let summary: Vec<&str> = output
        .lines()
        .filter(|l| l.starts_with("test result:") || l.contains("SKIPPED on the real"))
        .collect();
    eprintln!(
        "the scenarios on the real API server took {:?}:\n{}",
        started.elapsed(),
        summary.join("\n")
    );
    match status {
        Some(status) if status.success() => {}
        Some(status) => panic!("the scenarios failed on the real API server ({status}):\n{output}"),
        None => panic!(
            "the scenarios on the real API server did not finish within {REAL_SUITE_BOUND:?}:\n{output}"
        ),
    }
}
