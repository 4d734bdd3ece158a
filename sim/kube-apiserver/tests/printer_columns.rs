//! `kubectl get` of the product's custom resources prints every printer
//! column of `deploy/crds` filled in from the object, as the real API
//! server prints it: plain paths (`.status.phrase`), and the filter of
//! `ReconcilePolicy`'s `READY` column
//! (`.status.conditions[?(@.type=="Ready")].status`), which once printed
//! empty while `Ready` was `True`.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod kubectl_harness;

use std::collections::BTreeMap;

use kubectl_harness::{Cluster, product_crd_files};
use serde_json::Value;

/// `(plural, name, namespace)` of an object, its manifest, its status, and
/// the cell each printer column must show (by column name, `AGE` aside).
struct Sample {
    resource: &'static str,
    name: &'static str,
    namespace: Option<&'static str>,
    manifest: &'static str,
    status: &'static str,
    cells: &'static [(&'static str, &'static str)],
}

/// One per CRD of `deploy/crds`, in the order of their names.
const SAMPLES: &[Sample] = &[
    Sample {
        resource: "deploymentresources.radapp.io",
        name: "demo-frontend",
        namespace: Some("default"),
        manifest: r#"{"apiVersion": "radapp.io/v1alpha3", "kind": "DeploymentResource",
            "metadata": {"name": "demo-frontend", "namespace": "default"},
            "spec": {"id": "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/frontend"}}"#,
        status: r#"{"status": {"phrase": "Ready", "policy": {"name": "default", "version": "0.1.0", "digest": "sha256:0a1b"}}}"#,
        cells: &[
            ("NAME", "demo-frontend"),
            ("PHASE", "Ready"),
            (
                "RESOURCE",
                "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/frontend",
            ),
            ("POLICY", "default"),
        ],
    },
    Sample {
        resource: "deploymenttemplates.radapp.io",
        name: "demo",
        namespace: Some("default"),
        manifest: r#"{"apiVersion": "radapp.io/v1alpha3", "kind": "DeploymentTemplate",
            "metadata": {"name": "demo", "namespace": "default"},
            "spec": {"template": "{}", "providerConfig": {"radius": {"type": "Radius",
                "value": {"scope": "/planes/radius/local/resourceGroups/default"}}}}}"#,
        status: r#"{"status": {"phrase": "Ready", "message": "deployed 3 resources",
            "policy": {"name": "team-label", "version": "0.1.0", "digest": "sha256:0a1b"},
            "conditions": [
                {"type": "Progressing", "status": "False", "reason": "Done", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "Deployed", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#,
        cells: &[
            ("NAME", "demo"),
            ("PHASE", "Ready"),
            ("MESSAGE", "deployed 3 resources"),
            ("POLICY", "team-label"),
        ],
    },
    Sample {
        resource: "reconcilepolicies.radwasm.io",
        name: "team-label",
        namespace: None,
        manifest: r#"{"apiVersion": "radwasm.io/v1alpha1", "kind": "ReconcilePolicy",
            "metadata": {"name": "team-label"},
            "spec": {"mode": "Enforce", "priority": 10, "module": {"builtin": "default"}}}"#,
        // `Ready` is not the first condition: the filter, not an index,
        // must find it.
        status: r#"{"status": {"version": "0.1.0", "digest": "sha256:0a1b",
            "conditions": [
                {"type": "Shadowing", "status": "False", "reason": "Enforcing", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "Loaded", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}"#,
        cells: &[
            ("NAME", "team-label"),
            ("MODE", "Enforce"),
            ("PRIORITY", "10"),
            ("READY", "True"),
            ("VERSION", "0.1.0"),
            ("DIGEST", "sha256:0a1b"),
        ],
    },
];

/// The printer column names (upper case, as kubectl heads them) of every
/// CRD in `files`, by `plural.group`.
fn printer_columns(files: &[std::path::PathBuf]) -> BTreeMap<String, Vec<String>> {
    let mut columns = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("a CRD file");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let crd: Value = serde::Deserialize::deserialize(document).expect("YAML");
            if crd.is_null() {
                continue;
            }
            let name = crd["metadata"]["name"].as_str().expect("a CRD name");
            let names: Vec<String> = crd["spec"]["versions"][0]["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| c["name"].as_str().expect("a column name").to_uppercase())
                .collect();
            columns.insert(name.to_string(), names);
        }
    }
    columns
}

/// One row of `kubectl get -o wide`, cut at the header's column starts
/// (kubectl aligns each cell under its heading).
fn row_cells(table: &str, name: &str) -> BTreeMap<String, String> {
    let mut lines = table.lines();
    let header = lines.next().expect("a header");
    let row = lines
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no row for {name} in\n{table}"));
    let mut starts: Vec<(usize, &str)> = Vec::new();
    let mut at = 0;
    for word in header.split("   ").filter(|w| !w.trim().is_empty()) {
        let start = header[at..].find(word.trim()).expect("in the header") + at;
        starts.push((start, word.trim()));
        at = start + word.trim().len();
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, (start, title))| {
            let end = starts.get(i + 1).map_or(row.len(), |(next, _)| *next);
            let cell = row.get(*start..end.min(row.len())).unwrap_or("").trim();
            (title.to_string(), cell.to_string())
        })
        .collect()
}

#[tokio::test]
async fn every_printer_column_of_the_product_crds_shows_what_the_object_holds() {
    let test = "every_printer_column_of_the_product_crds_shows_what_the_object_holds";
    let Some(cluster) = Cluster::start(test).await else {
        return;
    };
    let files = product_crd_files();
    let columns = printer_columns(&files);
    assert_eq!(
        columns.keys().collect::<Vec<_>>(),
        SAMPLES.iter().map(|s| s.resource).collect::<Vec<_>>(),
        "every CRD of deploy/crds needs a sample here"
    );
    for file in &files {
        cluster
            .ok(&["apply", "-f", file.to_str().expect("utf-8 path")])
            .await;
    }
    let mut wait = vec!["wait", "--for=condition=Established", "--timeout=30s"];
    let crds: Vec<String> = columns.keys().map(|name| format!("crd/{name}")).collect();
    wait.extend(crds.iter().map(String::as_str));
    cluster.ok(&wait).await;

    for sample in SAMPLES {
        cluster.apply(sample.manifest).await;
        let mut scope = match sample.namespace {
            Some(namespace) => vec!["-n", namespace],
            None => vec![],
        };
        let mut patch = vec![
            "patch",
            sample.resource,
            sample.name,
            "--subresource=status",
            "--type=merge",
            "-p",
            sample.status,
        ];
        patch.append(&mut scope.clone());
        cluster.ok(&patch).await;

        let mut get = vec!["get", sample.resource, "-o", "wide"];
        get.append(&mut scope);
        let table = cluster.ok(&get).await;
        let cells = row_cells(&table, sample.name);
        let mut expected: Vec<String> = vec!["NAME".to_string()];
        expected.extend(columns[sample.resource].iter().cloned());
        assert_eq!(
            cells
                .keys()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            expected.into_iter().collect(),
            "{}: the columns of\n{table}",
            sample.resource
        );
        for (column, want) in sample.cells {
            assert_eq!(
                cells.get(*column).map(String::as_str),
                Some(*want),
                "{}: column {column} of\n{table}",
                sample.resource
            );
        }
        for column in cells.keys() {
            assert!(
                column == "AGE" || sample.cells.iter().any(|(c, _)| c == column),
                "{}: column {column} is not checked",
                sample.resource
            );
        }
        assert!(
            !cells["AGE"].is_empty() && cells["AGE"] != "<invalid>",
            "{table}"
        );
    }
    cluster.stop().await;
}

#[tokio::test]
async fn a_printer_column_path_the_real_server_refuses_is_refused() {
    let test = "a_printer_column_path_the_real_server_refuses_is_refused";
    let Some(cluster) = Cluster::start(test).await else {
        return;
    };
    for (path, problem) in [
        ("status.phase", "must be a simple json path starting with ."),
        ("'.status.conditions[?('", "Invalid value"),
    ] {
        // (quoted in YAML where it has to be)
        let crd = kubectl_harness::WIDGET_CRD.replace(".status.phase", path);
        let refused = cluster
            .run_with_stdin(&["apply", "-f", "-"], Some(&crd))
            .await
            .failed("apply of a CRD with a bad printer column");
        assert!(
            refused.contains("additionalPrinterColumns[1].jsonPath") && refused.contains(problem),
            "{path}: {refused}"
        );
    }
    cluster.stop().await;
}
