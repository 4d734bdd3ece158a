//! kubectl's typed imperative commands against the embedded server:
//! `kubectl create namespace|configmap|secret` send their objects as
//! protobuf (checked in kubectl's own `-v=8` log), and what is stored must
//! be what kubectl reads back with `get -o json`: the bytes of a binary
//! file exactly, and the same object as the JSON manifest kubectl prints
//! for the same command (`--dry-run=client -o json`) when that is created.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod kubectl_harness;

use base64::Engine as _;
use kubectl_harness::Cluster;
use serde_json::Value;

impl Cluster {
    /// Run a `kubectl create ...` command with `-v=8`, and check that it
    /// sent its object as protobuf and the server created it.
    async fn create_as_protobuf(&self, args: &[&str]) -> String {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        all.push("-v=8");
        let run = self.run(&all).await;
        let log = run.stderr.clone();
        let out = run.ok(&all.join(" "));
        assert!(
            log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
            "kubectl {all:?} did not send protobuf:\n{log}"
        );
        assert!(log.contains("201 Created"), "{log}");
        out
    }

    /// The same command's object created from the JSON manifest kubectl
    /// prints for it (the path that worked before protobuf was read).
    async fn create_from_json_manifest(&self, args: &[&str]) {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--dry-run=client", "-o", "json"]);
        let manifest = self.ok(&all).await;
        self.run_with_stdin(&["create", "-f", "-"], Some(&manifest))
            .await
            .ok("create -f - of the JSON manifest");
    }
}

/// A stored object without what differs between two objects created the
/// same way under two names.
fn comparable(mut object: Value) -> Value {
    let metadata = object["metadata"].as_object_mut().expect("metadata");
    for field in ["name", "uid", "resourceVersion", "creationTimestamp"] {
        metadata.remove(field);
    }
    if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        labels.remove("kubernetes.io/metadata.name");
    }
    object
}

fn decoded(value: &Value) -> Vec<u8> {
    base64::prelude::BASE64_STANDARD
        .decode(
            value
                .as_str()
                .unwrap_or_else(|| panic!("base64 text: {value}")),
        )
        .expect("base64")
}

#[tokio::test]
async fn kubectl_create_namespace_configmap_and_secret_work_as_on_a_cluster() {
    let Some(cluster) =
        Cluster::start("kubectl_create_namespace_configmap_and_secret_work_as_on_a_cluster").await
    else {
        return;
    };
    let out = cluster.create_as_protobuf(&["namespace", "team-a"]).await;
    assert_eq!(out.trim(), "namespace/team-a created");
    let namespace = cluster.get_json(&["namespace", "team-a"]).await;
    assert_eq!(
        namespace["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );
    // What the real server's strategy fills in.
    assert_eq!(namespace["status"]["phase"], "Active");
    assert_eq!(
        namespace["spec"]["finalizers"],
        serde_json::json!(["kubernetes"])
    );
    cluster
        .create_from_json_manifest(&["namespace", "team-b"])
        .await;
    let from_json = cluster.get_json(&["namespace", "team-b"]).await;
    assert_eq!(comparable(namespace), comparable(from_json));

    // A policy component: every byte value, and bytes that are not UTF-8.
    let dir = tempfile::tempdir().expect("tempdir");
    let component = dir.path().join("policy.wasm");
    let mut bytes: Vec<u8> = b"\0asm\x01\0\0\0".to_vec();
    bytes.extend((0..=255u8).rev());
    bytes.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    std::fs::write(&component, &bytes).expect("write component");
    let from_file = format!("--from-file=policy.wasm={}", component.display());
    let args = [
        "configmap",
        "guardrail",
        "-n",
        "team-a",
        from_file.as_str(),
        "--from-literal=mode=Enforce",
    ];
    let out = cluster.create_as_protobuf(&args).await;
    assert_eq!(out.trim(), "configmap/guardrail created");
    let config_map = cluster
        .get_json(&["configmap", "guardrail", "-n", "team-a"])
        .await;
    assert_eq!(decoded(&config_map["binaryData"]["policy.wasm"]), bytes);
    assert_eq!(config_map["data"]["mode"], "Enforce");
    let mut args = args;
    args[1] = "guardrail-json";
    cluster.create_from_json_manifest(&args).await;
    let from_json = cluster
        .get_json(&["configmap", "guardrail-json", "-n", "team-a"])
        .await;
    assert_eq!(comparable(config_map), comparable(from_json));

    let args = [
        "secret",
        "generic",
        "db",
        "-n",
        "team-a",
        "--from-literal=user=admin",
        "--from-literal=password=s3cr=t ü",
    ];
    let out = cluster.create_as_protobuf(&args).await;
    assert_eq!(out.trim(), "secret/db created");
    let secret = cluster.get_json(&["secret", "db", "-n", "team-a"]).await;
    assert_eq!(decoded(&secret["data"]["user"]), b"admin");
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(decoded(&secret["data"]["password"]), "s3cr=t ü".as_bytes());
    let mut args = args;
    args[2] = "db-json";
    cluster.create_from_json_manifest(&args).await;
    let from_json = cluster
        .get_json(&["secret", "db-json", "-n", "team-a"])
        .await;
    assert_eq!(comparable(secret), comparable(from_json));

    // What the real server refuses is refused the same way through protobuf.
    let refused = cluster
        .run(&["create", "namespace", "team-a"])
        .await
        .failed("create of an existing namespace");
    assert!(
        refused.contains("namespaces \"team-a\" already exists"),
        "{refused}"
    );
    let refused = cluster
        .run(&["create", "configmap", "Bad_Name", "--from-literal=a=b"])
        .await
        .failed("create of a ConfigMap with an invalid name");
    assert!(refused.contains("Bad_Name"), "{refused}");
    cluster.stop().await;
}

#[tokio::test]
async fn a_watch_sees_objects_kubectl_creates_as_protobuf() {
    let Some(cluster) = Cluster::start("a_watch_sees_objects_kubectl_creates_as_protobuf").await
    else {
        return;
    };
    let mut watch = cluster.spawn(&["get", "configmaps", "-w", "-o", "name"]);
    cluster
        .create_as_protobuf(&["configmap", "watched", "--from-literal=a=b"])
        .await;
    let line = watch
        .line_matching(|line| line.contains("configmap/watched"))
        .await;
    assert_eq!(line.trim(), "configmap/watched");
    assert!(watch.still_running());
    cluster.stop().await;
}
