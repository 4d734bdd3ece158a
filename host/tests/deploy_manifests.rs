//! `deploy/` stays in sync with the code: the CRDs are exactly what
//! `radwasm crds` generates from the Rust types, the example in Radius's
//! shape is what `radwasm manifest generate` writes, and every manifest parses.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
}

#[test]
fn the_committed_crds_are_generated_from_the_rust_types() {
    for (group, file) in [
        ("radapp.io", "radapp.io_v1alpha3.yaml"),
        ("radwasm.io", "radwasm.io_v1alpha1.yaml"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_radwasm"))
            .args(["crds", "--group", group])
            .output()
            .expect("run radwasm crds");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        // The kustomize base and the Helm chart carry the same file.
        for file in [
            format!("deploy/crds/{file}"),
            format!("deploy/chart/crds/{file}"),
        ] {
            let committed = std::fs::read_to_string(repo().join(&file)).unwrap_or_default();
            assert!(
                committed == String::from_utf8_lossy(&output.stdout),
                "{file} is out of date: run `cargo run -p radwasm -- crds --group {group} > {file}`"
            );
        }
    }
    let all = Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .arg("crds")
        .output()
        .expect("run radwasm crds");
    let all = String::from_utf8_lossy(&all.stdout);
    assert_eq!(
        all.matches("kind: CustomResourceDefinition").count(),
        3,
        "`radwasm crds` prints every CRD"
    );
}

#[test]
fn every_manifest_in_deploy_is_valid_yaml_with_a_kind() {
    let mut checked = 0;
    for dir in ["deploy", "deploy/crds", "deploy/examples"] {
        let Ok(entries) = std::fs::read_dir(repo().join(dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            for document in serde_yaml::Deserializer::from_str(&text) {
                let value = serde_yaml::Value::deserialize(document)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                if value.is_null() {
                    continue;
                }
                assert!(
                    value.get("kind").is_some(),
                    "{}: a document has no kind",
                    path.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 6, "only {checked} manifests found under deploy/");
}

#[test]
fn the_controller_deployment_passes_only_arguments_radwasm_accepts() {
    let text = std::fs::read_to_string(repo().join("deploy/controller.yaml")).expect("readable");
    let deployment: serde_yaml::Value = serde_yaml::from_str(&text).expect("yaml");
    let args: Vec<String> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_sequence()
        .expect("the controller container has args")
        .iter()
        .map(|a| a.as_str().expect("string argument").to_string())
        .collect();
    assert_eq!(args.first().map(String::as_str), Some("run"));
    // Clap reads arguments in order, so an unknown one fails before --help.
    let output = Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(&args)
        .arg("--help")
        .output()
        .expect("run radwasm");
    assert!(
        output.status.success(),
        "deploy/controller.yaml passes {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

use serde::Deserialize;

#[test]
fn the_radius_shape_example_is_what_radwasm_manifest_generate_writes() {
    let output = Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .current_dir(repo())
        .args([
            "manifest",
            "generate",
            "tests/fixtures/arm-templates/cli-deploymenttemplate.json",
            "-p",
            "@tests/fixtures/arm-templates/cli-deploymenttemplate-parameters.json",
            "-g",
            "default",
            "--name",
            "demo-from-rad-cli",
            "--namespace",
            "default",
        ])
        .output()
        .expect("run radwasm manifest generate");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let committed = std::fs::read_to_string(repo().join("deploy/examples/app-radius-shape.yaml"))
        .expect("readable");
    // The committed file is the command's output after a comment header.
    let body: String = committed
        .lines()
        .skip_while(|line| line.starts_with('#'))
        .map(|line| format!("{line}\n"))
        .collect();
    assert!(
        body == String::from_utf8_lossy(&output.stdout),
        "deploy/examples/app-radius-shape.yaml is out of date: regenerate it with the command in its header"
    );
}
