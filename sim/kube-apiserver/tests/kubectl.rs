//! Conformance against the real `kubectl`: each scenario starts the embedded
//! server on an ephemeral loopback port, writes a kubeconfig into a temp dir
//! and drives the kubectl binary on PATH with `--kubeconfig`, the way a person
//! would. Every kubectl process is killed if it outlives its time bound, so a
//! broken server fails a test instead of hanging it. Without kubectl on PATH
//! each test prints why it is skipped and passes.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod kubectl_harness;

use std::time::Duration;

use kubectl_harness::{Cluster, product_crds, product_example, widget_yaml};

#[tokio::test]
async fn the_product_crds_and_example_apply_and_read_back_as_yaml() {
    let Some(cluster) =
        Cluster::start("the_product_crds_and_example_apply_and_read_back_as_yaml").await
    else {
        return;
    };
    let crds = product_crds();
    let out = cluster
        .ok(&["apply", "-f", crds.to_str().expect("utf-8 path")])
        .await;
    assert!(
        out.contains("deploymenttemplates.radapp.io created")
            && out.contains("deploymentresources.radapp.io created"),
        "{out}"
    );
    cluster
        .ok(&[
            "wait",
            "--for=condition=Established",
            "crd/deploymenttemplates.radapp.io",
            "crd/deploymentresources.radapp.io",
            "--timeout=30s",
        ])
        .await;
    // Applying the same files again changes nothing.
    let again = cluster
        .ok(&["apply", "-f", crds.to_str().expect("utf-8 path")])
        .await;
    assert!(
        again.contains("deploymenttemplates.radapp.io unchanged"),
        "{again}"
    );

    let example = product_example();
    let out = cluster
        .ok(&["apply", "-f", example.to_str().expect("utf-8 path")])
        .await;
    assert!(
        out.contains("deploymenttemplate.radapp.io/demo created"),
        "{out}"
    );

    let yaml = cluster
        .ok(&["get", "deploymenttemplate", "demo", "-o", "yaml"])
        .await;
    let object: serde_json::Value = serde_yaml::from_str(&yaml).expect("yaml");
    assert_eq!(object["apiVersion"], "radapp.io/v1alpha3");
    assert_eq!(object["metadata"]["generation"], 1);
    assert!(object["metadata"]["uid"].is_string());
    assert!(
        object["spec"]["template"]
            .as_str()
            .is_some_and(|t| t.contains("Applications.Core/containers")),
        "{yaml}"
    );
    // Defaults from the schema are applied, as the real server does.
    assert_eq!(object["spec"]["providerConfig"]["radius"]["type"], "Radius");

    // Short name and category from the CRD, and the printer columns.
    let table = cluster.ok(&["get", "dt"]).await;
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME") && header.contains("PHASE") && header.contains("POLICY"),
        "{table}"
    );
    assert!(table.contains("demo"), "{table}");
    let by_category = cluster.ok(&["get", "radius", "-o", "name"]).await;
    assert!(
        by_category.contains("deploymenttemplate.radapp.io/demo"),
        "{by_category}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn invalid_objects_are_refused_naming_the_field() {
    let Some(cluster) = Cluster::start("invalid_objects_are_refused_naming_the_field").await else {
        return;
    };
    cluster.with_widgets().await;
    let bad =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  size: big\n";
    let error = cluster
        .run_with_stdin(&["apply", "-f", "-"], Some(bad))
        .await
        .failed("apply of an invalid widget");
    assert!(
        error.contains("spec.size") && error.contains("integer"),
        "{error}"
    );
    let missing =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: bad\nspec:\n  color: red\n";
    let error = cluster
        .run_with_stdin(&["create", "-f", "-"], Some(missing))
        .await
        .failed("create of a widget without its required size");
    assert!(
        error.contains("spec.size") && error.contains("Required value"),
        "{error}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn apply_configures_changes_and_server_side_apply_is_accepted() {
    let Some(cluster) =
        Cluster::start("apply_configures_changes_and_server_side_apply_is_accepted").await
    else {
        return;
    };
    cluster.with_widgets().await;
    let out = cluster.apply(&widget_yaml("w1", 1)).await;
    assert!(out.contains("widget.example.com/w1 created"), "{out}");
    let out = cluster.apply(&widget_yaml("w1", 1)).await;
    assert!(out.contains("widget.example.com/w1 unchanged"), "{out}");
    let out = cluster.apply(&widget_yaml("w1", 2)).await;
    assert!(out.contains("widget.example.com/w1 configured"), "{out}");
    let object = cluster.get_json(&["widget", "w1"]).await;
    assert_eq!(object["spec"]["size"], 2);
    assert_eq!(object["spec"]["color"], "blue", "schema default applied");
    assert_eq!(object["metadata"]["generation"], 2);

    let out = cluster
        .run_with_stdin(
            &["apply", "--server-side", "--field-manager=test", "-f", "-"],
            Some(&widget_yaml("w1", 3)),
        )
        .await
        .ok("apply --server-side");
    assert!(
        out.contains("widget.example.com/w1 serverside-applied"),
        "{out}"
    );
    let object = cluster.get_json(&["widget", "w1"]).await;
    assert_eq!(object["spec"]["size"], 3);
    assert_eq!(object["metadata"]["generation"], 3);

    // ConfigMaps (a built-in kind: kubectl sends a strategic merge patch).
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n  b: \"2\"\n";
    assert!(
        cluster
            .apply(cm)
            .await
            .contains("configmap/settings created")
    );
    let changed =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  a: \"1\"\n";
    assert!(
        cluster
            .apply(changed)
            .await
            .contains("configmap/settings configured")
    );
    let object = cluster.get_json(&["configmap", "settings"]).await;
    assert_eq!(
        object["data"],
        serde_json::json!({"a": "1"}),
        "b was removed by apply"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn get_watch_sees_a_merge_patch() {
    let Some(cluster) = Cluster::start("get_watch_sees_a_merge_patch").await else {
        return;
    };
    cluster.with_widgets().await;
    cluster.apply(&widget_yaml("w1", 1)).await;
    let mut watch = cluster.spawn(&[
        "get",
        "widget",
        "w1",
        "-w",
        "-o",
        "jsonpath={.metadata.name} size={.spec.size}{\"\\n\"}",
    ]);
    let first = watch.next_line().await;
    assert_eq!(first.trim(), "w1 size=1");

    let out = cluster
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":7}}"#,
        ])
        .await;
    assert!(out.contains("widget.example.com/w1 patched"), "{out}");
    let seen = watch.line_matching(|line| line.contains("size=7")).await;
    assert_eq!(seen.trim(), "w1 size=7");
    drop(watch);

    // The table form of a watch too (what `kubectl get -w` prints by default).
    let mut table = cluster.spawn(&["get", "widgets", "-w"]);
    let header = table.next_line().await;
    assert!(
        header.contains("SIZE") && header.contains("PHASE"),
        "{header}"
    );
    cluster
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"size":8}}"#,
        ])
        .await;
    let row = table
        .line_matching(|line| line.starts_with("w1") && line.contains(" 8 "))
        .await;
    assert!(row.starts_with("w1"), "{row}");
    drop(table);

    // A strategic merge patch (kubectl's default) is refused for custom
    // resources, exactly as the real server refuses it.
    let error = cluster
        .run(&["patch", "widget", "w1", "-p", r#"{"spec":{"size":9}}"#])
        .await
        .failed("strategic merge patch of a custom resource");
    assert!(
        error.contains("UnsupportedMediaType") || error.contains("unknown format"),
        "{error}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn delete_waits_for_the_finalizer_to_be_removed() {
    let Some(cluster) = Cluster::start("delete_waits_for_the_finalizer_to_be_removed").await else {
        return;
    };
    cluster.with_widgets().await;
    let held = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: held\n  finalizers: [example.com/hold]\nspec:\n  size: 1\n";
    cluster.apply(held).await;

    let mut deleting = cluster.spawn(&["delete", "widget", "held", "--timeout=50s"]);
    // The object is marked, not removed, while its finalizer is there.
    let mut attempts = 0;
    loop {
        let object = cluster.get_json(&["widget", "held"]).await;
        if object["metadata"]["deletionTimestamp"].is_string() {
            break;
        }
        attempts += 1;
        assert!(
            attempts < 300,
            "kubectl delete never marked the object: {object}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        deleting.still_running(),
        "kubectl delete must wait while the finalizer holds the object"
    );
    let out = cluster
        .ok(&[
            "patch",
            "widget",
            "held",
            "--type",
            "json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ])
        .await;
    assert!(out.contains("patched"), "{out}");
    let (success, rest, err) = deleting.finish().await;
    assert!(success, "kubectl delete failed: {rest} {err}");
    assert!(
        rest.contains("widget.example.com \"held\" deleted"),
        "{rest}"
    );
    let error = cluster
        .run(&["get", "widget", "held"])
        .await
        .failed("get of a deleted widget");
    assert!(
        error.contains("NotFound") || error.contains("not found"),
        "{error}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn wait_for_jsonpath_and_condition_returns_once_status_says_so() {
    let Some(cluster) =
        Cluster::start("wait_for_jsonpath_and_condition_returns_once_status_says_so").await
    else {
        return;
    };
    cluster.with_widgets().await;
    cluster.apply(&widget_yaml("w1", 1)).await;
    let by_path = cluster.spawn(&[
        "wait",
        "widget/w1",
        "--for=jsonpath={.status.phase}=Ready",
        "--timeout=50s",
    ]);
    let by_condition = cluster.spawn(&[
        "wait",
        "widget/w1",
        "--for=condition=Ready",
        "--timeout=50s",
    ]);
    let out = cluster
        .ok(&[
            "patch",
            "widget",
            "w1",
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True"}]}}"#,
        ])
        .await;
    assert!(out.contains("patched"), "{out}");
    for waiter in [by_path, by_condition] {
        let (success, rest, err) = waiter.finish().await;
        assert!(success, "kubectl wait failed: {rest} {err}");
        assert!(
            rest.contains("widget.example.com/w1 condition met"),
            "{rest}"
        );
    }
    cluster.stop().await;
}

#[tokio::test]
async fn explain_describes_custom_resource_fields_from_the_crd_schema() {
    let Some(cluster) =
        Cluster::start("explain_describes_custom_resource_fields_from_the_crd_schema").await
    else {
        return;
    };
    cluster.with_widgets().await;
    let out = cluster.ok(&["explain", "widgets.spec"]).await;
    assert!(out.contains("KIND:") && out.contains("Widget"), "{out}");
    assert!(out.contains("What the widget should be."), "{out}");
    assert!(
        out.contains("size") && out.contains("How big the widget is."),
        "{out}"
    );
    let crds = product_crds();
    cluster
        .ok(&["apply", "-f", crds.to_str().expect("utf-8 path")])
        .await;
    let out = cluster
        .ok(&["explain", "deploymenttemplate.spec.template"])
        .await;
    assert!(out.contains("FIELD: template"), "{out}");
    cluster.stop().await;
}

#[tokio::test]
async fn events_from_the_events_api_show_up_in_kubectl_get_events() {
    let Some(cluster) =
        Cluster::start("events_from_the_events_api_show_up_in_kubectl_get_events").await
    else {
        return;
    };
    let event = "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: demo.1\n  namespace: default\neventTime: \"2026-01-01T00:00:00.000000Z\"\nreportingController: radwasm\nreportingInstance: radwasm-0\naction: Deploy\nreason: Deploying\ntype: Normal\nnote: started a Radius deployment\nregarding:\n  apiVersion: radapp.io/v1alpha3\n  kind: DeploymentTemplate\n  name: demo\n  namespace: default\n";
    cluster
        .run_with_stdin(&["create", "-f", "-"], Some(event))
        .await
        .ok("create of an events.k8s.io/v1 Event");
    let core = cluster.get_json(&["events"]).await;
    let items = core["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 1, "{core}");
    assert_eq!(items[0]["apiVersion"], "v1");
    assert_eq!(items[0]["message"], "started a Radius deployment");
    assert_eq!(items[0]["involvedObject"]["name"], "demo");
    assert_eq!(items[0]["reportingComponent"], "radwasm");
    let table = cluster.ok(&["get", "events"]).await;
    assert!(table.contains("Deploying"), "{table}");
    cluster.stop().await;
}

#[tokio::test]
async fn describe_shows_the_events_about_an_object() {
    let Some(cluster) = Cluster::start("describe_shows_the_events_about_an_object").await else {
        return;
    };
    cluster
        .apply("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\ndata:\n  a: b\n")
        .await;
    let object = cluster.get_json(&["configmap", "settings"]).await;
    let uid = object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!uid.is_empty(), "{object}");
    for (name, about, uid) in [
        ("settings.1", "settings", uid.as_str()),
        ("other.1", "other", "x"),
    ] {
        let event = format!(
            "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: {name}\n  namespace: default\neventTime: \"2026-01-01T00:00:00.000000Z\"\nreportingController: radwasm\nreportingInstance: radwasm-0\naction: Check\nreason: Checked{about}\ntype: Normal\nnote: looked at {about}\nregarding:\n  apiVersion: v1\n  kind: ConfigMap\n  name: {about}\n  namespace: default\n  uid: {uid}\n"
        );
        cluster
            .run_with_stdin(&["create", "-f", "-"], Some(&event))
            .await
            .ok("create of an Event");
    }
    // kubectl describe lists events with involvedObject.* field selectors.
    let described = cluster.ok(&["describe", "configmap", "settings"]).await;
    assert!(
        described.contains("Checkedsettings") && described.contains("looked at settings"),
        "{described}"
    );
    assert!(!described.contains("Checkedother"), "{described}");
    cluster.stop().await;
}

#[tokio::test]
async fn get_in_chunks_lists_each_kind_completely() {
    let Some(cluster) = Cluster::start("get_in_chunks_lists_each_kind_completely").await else {
        return;
    };
    cluster.with_widgets().await;
    let mut yaml = String::new();
    for i in 0..7 {
        yaml.push_str(&widget_yaml(&format!("w-{i}"), i));
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: default\n  labels: {{parity: {}}}\n---\n",
            if i % 2 == 0 { "even" } else { "odd" }
        ));
    }
    cluster.apply(&yaml).await;
    let widgets: Vec<String> = (0..7)
        .map(|i| format!("widget.example.com/w-{i}"))
        .collect();
    let configmaps: Vec<String> = (0..7).map(|i| format!("configmap/cm-{i}")).collect();

    // kubectl lists the two kinds one after the other, each in pages of 2,
    // with nothing written in between: both lists start at one
    // resourceVersion and each must still get only its own objects.
    let out = cluster
        .ok(&["get", "widgets,configmaps", "--chunk-size=2", "-o", "name"])
        .await;
    let names: Vec<&str> = out.lines().collect();
    let expected: Vec<&str> = widgets
        .iter()
        .chain(configmaps.iter())
        .map(String::as_str)
        .collect();
    assert_eq!(names, expected, "{out}");

    // The same as tables, and with a label selector.
    let out = cluster
        .ok(&["get", "widgets,configmaps", "--chunk-size=2"])
        .await;
    for i in 0..7 {
        assert!(out.contains(&format!("w-{i} ")), "{out}");
        assert!(out.contains(&format!("cm-{i} ")), "{out}");
    }
    let out = cluster
        .ok(&[
            "get",
            "configmaps",
            "-l",
            "parity=even",
            "--chunk-size=1",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "configmap/cm-0",
            "configmap/cm-2",
            "configmap/cm-4",
            "configmap/cm-6"
        ],
        "{out}"
    );
    cluster.stop().await;
}

#[tokio::test]
async fn a_configmap_over_one_mib_is_refused_as_the_real_server_refuses_it() {
    let Some(cluster) =
        Cluster::start("a_configmap_over_one_mib_is_refused_as_the_real_server_refuses_it").await
    else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // The size of an interpreted policy component: more than a ConfigMap
    // holds, created as the docs say (`kubectl create configmap
    // --from-file`, which sends protobuf).
    let component = dir.path().join("policy.wasm");
    let from_file = format!("--from-file=policy.wasm={}", component.display());
    for (name, size, stored) in [
        ("team-py", (1 << 20) + 1, false),
        ("team-rs", 1 << 20, true),
    ] {
        std::fs::write(&component, vec![7u8; size]).expect("write");
        let created = cluster
            .run(&["create", "configmap", name, &from_file])
            .await;
        if stored {
            created.ok("create of a ConfigMap of 1 MiB");
        } else {
            let refused = created.failed("create of a ConfigMap of 1 MiB + 1 byte");
            assert!(
                refused.contains(
                    "ConfigMap \"team-py\" is invalid: []: Too long: may not be more than 1048576 bytes"
                ),
                "{refused}"
            );
        }
    }
    cluster.stop().await;
}
