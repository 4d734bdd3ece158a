//! `radwasm manifest generate` (and `radwasm bicep generate-kubernetes-manifest`)
//! as a user runs it: the real binary, real files, a PATH with or without a
//! `bicep`, exit codes and messages.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

fn fixture(name: &str) -> String {
    repo()
        .join("tests/fixtures/arm-templates")
        .join(name)
        .display()
        .to_string()
}

/// Run radwasm in `dir`; `path` replaces PATH when given.
fn radwasm_in(dir: &Path, args: &[&str], path: Option<&OsString>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_radwasm"));
    command.args(args).current_dir(dir);
    if let Some(path) = path {
        command.env("PATH", path);
    }
    command.output().expect("run radwasm")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path.display().to_string()
}

fn read_json(path: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

/// The block scalar `key: |-` at two spaces in `yaml`, its lines un-indented.
fn block(yaml: &str, key: &str) -> String {
    let header = format!("\n  {key}: |-\n");
    let start = yaml
        .find(&header)
        .unwrap_or_else(|| panic!("no {key} block in\n{yaml}"))
        + header.len();
    yaml[start..]
        .lines()
        .take_while(|line| line.starts_with("    "))
        .map(|line| &line[4..])
        .collect::<Vec<_>>()
        .join("\n")
}

fn spec_parameters(yaml: &str) -> serde_yaml::Mapping {
    let document: serde_yaml::Value = serde_yaml::from_str(yaml).expect("manifest is YAML");
    document["spec"]["parameters"]
        .as_mapping()
        .cloned()
        .unwrap_or_else(|| panic!("spec.parameters is not a map in\n{yaml}"))
}

fn parameter(yaml: &str, name: &str) -> String {
    spec_parameters(yaml)
        .get(name)
        .and_then(serde_yaml::Value::as_str)
        .unwrap_or_else(|| panic!("no text parameter {name} in\n{yaml}"))
        .to_string()
}

#[test]
fn the_fixture_comes_out_in_radius_shape_field_for_field() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = fixture("cli-deploymenttemplate.json");
    let parameters = format!("@{}", fixture("cli-deploymenttemplate-parameters.json"));
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            &template,
            "--group",
            "default",
            "--parameters",
            &parameters,
            "--name",
            "deploymenttemplate.bicep",
            "--outfile",
            "deploymenttemplate.yaml",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("Next: kubectl apply -f deploymenttemplate.yaml"),
        "{}",
        stdout(&output)
    );
    let yaml =
        std::fs::read_to_string(dir.path().join("deploymenttemplate.yaml")).expect("written");

    // Field order, indentation and the parameters map, as Radius's CLI writes
    // them: keys sorted, two spaces, parameters as text, both JSON fields as
    // literal blocks without a final newline.
    let expected_head = "apiVersion: radapp.io/v1alpha3\n\
                         kind: DeploymentTemplate\n\
                         metadata:\n  name: deploymenttemplate.bicep\n\
                         spec:\n  parameters:\n    tag: v1.0.0\n  providerConfig: |-\n    {\n";
    assert!(yaml.starts_with(expected_head), "{yaml}");
    let top_level: Vec<&str> = yaml.lines().filter(|line| !line.starts_with(' ')).collect();
    assert_eq!(
        top_level,
        [
            "apiVersion: radapp.io/v1alpha3",
            "kind: DeploymentTemplate",
            "metadata:",
            "spec:"
        ]
    );
    let spec_keys: Vec<&str> = yaml
        .lines()
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .collect();
    assert_eq!(
        spec_keys,
        [
            "  name: deploymenttemplate.bicep",
            "  parameters:",
            "  providerConfig: |-",
            "  template: |-"
        ]
    );

    // providerConfig: Go's MarshalIndent of Radius's struct, radius first.
    assert_eq!(
        block(&yaml, "providerConfig"),
        r#"{
  "radius": {
    "type": "Radius",
    "value": {
      "scope": "/planes/radius/local/resourceGroups/default"
    }
  },
  "deployments": {
    "type": "Microsoft.Resources",
    "value": {
      "scope": "/planes/radius/local/resourceGroups/default"
    }
  }
}"#
    );

    // template: the input template, pretty-printed with every object's keys
    // sorted (the fixture's own order is not sorted), arrays one item a line.
    let template_text = block(&yaml, "template");
    let parsed: Value = serde_json::from_str(&template_text).expect("template is JSON");
    assert_eq!(parsed, read_json(&template));
    let top_keys: Vec<&str> = template_text
        .lines()
        .filter(|line| line.starts_with("  \"") && !line.starts_with("   "))
        .map(|line| line.trim_start().split('"').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(
        top_keys,
        [
            "$schema",
            "contentVersion",
            "imports",
            "languageVersion",
            "metadata",
            "parameters",
            "resources"
        ]
    );
    assert!(
        template_text
            .contains("    \"_EXPERIMENTAL_FEATURES_ENABLED\": [\n      \"Extensibility\"\n    ],"),
        "{template_text}"
    );
    assert!(
        template_text.contains("\"kubernetesNamespace\": {\n      \"defaultValue\": \"default\",\n      \"type\": \"string\"\n    },"),
        "{template_text}"
    );
    assert!(yaml.ends_with("\n    }\n"), "{yaml}");

    // And nothing else: the whole document as data.
    let document: serde_yaml::Value = serde_yaml::from_str(&yaml).expect("YAML");
    let expected: serde_yaml::Value = serde_yaml::to_value(json!({
        "apiVersion": "radapp.io/v1alpha3",
        "kind": "DeploymentTemplate",
        "metadata": {"name": "deploymenttemplate.bicep"},
        "spec": {
            "parameters": {"tag": "v1.0.0"},
            "providerConfig": block(&yaml, "providerConfig"),
            "template": template_text,
        }
    }))
    .expect("value");
    assert_eq!(document, expected);
}

#[test]
fn the_radius_command_name_and_flags_work_and_stdout_is_the_default() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = fixture("cli-deploymenttemplate.json");
    let output = radwasm_in(
        dir.path(),
        &[
            "bicep",
            "generate-kubernetes-manifest",
            &template,
            "-g",
            "team",
            "-p",
            "tag=v2",
            "--namespace",
            "apps",
            "--azure-scope",
            "/subscriptions/sub/resourceGroups/rg",
            "--aws-scope",
            "/planes/aws/aws/accounts/123/regions/us-west-2",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let yaml = stdout(&output);
    assert!(
        yaml.starts_with("apiVersion: radapp.io/v1alpha3\nkind: DeploymentTemplate\nmetadata:\n  name: cli-deploymenttemplate.json\n  namespace: apps\nspec:\n"),
        "{yaml}"
    );
    assert!(
        stderr(&output).contains("kubectl apply -f"),
        "{}",
        stderr(&output)
    );
    assert!(!yaml.contains("Next:"), "the hint goes to stderr: {yaml}");
    assert_eq!(parameter(&yaml, "tag"), "v2");
    let providers: Value = serde_json::from_str(&block(&yaml, "providerConfig")).expect("json");
    let names: Vec<&String> = providers.as_object().expect("object").keys().collect();
    assert_eq!(names.len(), 4);
    assert_eq!(
        providers["az"],
        json!({"type": "AzureResourceManager", "value": {"scope": "/subscriptions/sub/resourceGroups/rg"}})
    );
    assert_eq!(
        providers["aws"],
        json!({"type": "AWS", "value": {"scope": "/planes/aws/aws/accounts/123/regions/us-west-2"}})
    );
    assert_eq!(
        providers["radius"]["value"]["scope"],
        "/planes/radius/local/resourceGroups/team"
    );
    let order: Vec<usize> = ["\"radius\"", "\"az\"", "\"aws\"", "\"deployments\""]
        .iter()
        .map(|key| block(&yaml, "providerConfig").find(key).expect("key"))
        .collect();
    assert!(order.is_sorted(), "radius, az, aws, deployments: {order:?}");

    // -d / --destination-file are Radius's names for --outfile.
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            &template,
            "-g",
            "team",
            "-d",
            "radius-name.yml",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(dir.path().join("radius-name.yml").exists());
}

/// A template declaring one parameter of every type.
fn typed_template(dir: &Path) -> String {
    write(
        dir,
        "typed.json",
        &json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "contentVersion": "1.0.0.0",
            "parameters": {
                "tag": {"type": "string", "defaultValue": "latest"},
                "replicas": {"type": "int", "defaultValue": 1},
                "enabled": {"type": "bool", "defaultValue": true},
                "labels": {"type": "object", "defaultValue": {}},
                "ports": {"type": "array", "defaultValue": [80], "allowedValues": [80, 443, 8080]},
                "size": {"type": "string", "defaultValue": "small", "allowedValues": ["small", "large"]},
                "password": {"type": "secureString", "defaultValue": ""},
                "image": {"type": "string"},
            },
            "resources": {},
        })
        .to_string(),
    )
}

#[test]
fn every_parameter_form_is_read_and_later_ones_win() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = typed_template(dir.path());
    let full = write(
        dir.path(),
        "full.json",
        r#"{"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
            "contentVersion": "1.0.0.0",
            "parameters": {"tag": {"value": "from-full"}, "replicas": {"value": 2}, "image": {"value": "nginx"}}}"#,
    );
    let bare = write(
        dir.path(),
        "bare.json",
        r#"{"tag": {"value": "from-bare"}, "enabled": {"value": false}, "ports": {"value": [80, 443]}}"#,
    );
    write(dir.path(), "labels.json", r#"{"team": "a", "tier": "web"}"#);
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            &template,
            "-g",
            "default",
            "-p",
            &format!("@{full}"),
            "-p",
            "tag=from-command-line",
            "-p",
            &format!("@{bare}"),
            "-p",
            "labels=@labels.json",
            "-p",
            "REPLICAS=3",
            "-p",
            "size=large",
            "-p",
            "password=s3cret",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let yaml = stdout(&output);
    // The file read last gives tag; replicas from the command line replaces
    // the file's 2 (names match whatever their case, the template's spelling
    // is written); typed values from files are written as text.
    assert_eq!(parameter(&yaml, "tag"), "from-bare");
    assert_eq!(parameter(&yaml, "replicas"), "3");
    assert_eq!(parameter(&yaml, "image"), "nginx");
    assert_eq!(parameter(&yaml, "enabled"), "false");
    assert_eq!(parameter(&yaml, "ports"), "[80,443]");
    assert_eq!(parameter(&yaml, "size"), "large");
    assert_eq!(parameter(&yaml, "password"), "s3cret");
    let labels: Value = serde_json::from_str(&parameter(&yaml, "labels")).expect("json text");
    assert_eq!(labels, json!({"team": "a", "tier": "web"}));
    assert_eq!(spec_parameters(&yaml).len(), 8, "{yaml}");
    // Text that reads as a number or boolean is quoted (serde_yaml's single
    // quotes where yaml.v3 writes double; the same string either way).
    assert!(yaml.contains("\n    replicas: '3'\n"), "{yaml}");
    assert!(yaml.contains("\n    enabled: 'false'\n"), "{yaml}");
    assert!(
        stderr(&output).contains("parameter \"password\" is secure"),
        "{}",
        stderr(&output)
    );

    // The other way round: the command line last wins over the files.
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            &template,
            "-g",
            "default",
            "-p",
            &format!("@{bare}"),
            "-p",
            &format!("@{full}"),
            "-p",
            "tag=last",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(parameter(&stdout(&output), "tag"), "last");
    assert_eq!(parameter(&stdout(&output), "replicas"), "2");
}

#[test]
fn parameters_that_do_not_fit_the_template_are_all_reported_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = typed_template(dir.path());
    let wrong_types = write(
        dir.path(),
        "wrong.json",
        r#"{"tag": {"value": 5}, "labels": {"value": [1]}}"#,
    );
    let wrong_types = format!("@{wrong_types}");
    let args = [
        "manifest",
        "generate",
        &template,
        "-g",
        "default",
        "-o",
        "out.yaml",
        "-p",
        "replicas=three",
        "-p",
        "colour=blue",
        "-p",
        "enabled=maybe",
        "-p",
        &wrong_types,
        "-p",
        "ports=[80, 22]",
        "-p",
        "size=huge",
        "-p",
        "password=@secret.json",
    ];
    let output = radwasm_in(dir.path(), &args, None);
    // password=@secret.json names a file that does not exist: that is the
    // first error, before the template is compared.
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("secret.json: cannot read the file"),
        "{}",
        stderr(&output)
    );
    assert!(!dir.path().join("out.yaml").exists());

    write(dir.path(), "secret.json", "42");
    let output = radwasm_in(dir.path(), &args, None);
    assert!(!output.status.success());
    let message = stderr(&output);
    for expected in [
        "the parameters do not fit the template:",
        "parameter \"replicas\" (from --parameters replicas=three) is declared int but its value \"three\" is not a whole number",
        "parameter \"colour\" (from --parameters colour=blue) is not declared by the template (it declares ",
        "parameter \"enabled\" (from --parameters enabled=maybe) is declared bool but its value \"maybe\" is not true or false",
        "parameter \"tag\" (from ",
        "is declared string but its value 5 is not a JSON string",
        "parameter \"labels\" (from ",
        "is declared object but its value [1] is not a JSON object",
        "parameter \"ports\" (from --parameters ports=[80, 22]): value 22 is not one of the allowed values 80, 443, 8080",
        "parameter \"size\" (from --parameters size=huge): value \"huge\" is not one of the allowed values \"small\", \"large\"",
        "parameter \"password\" (from secret.json) is declared secureString but its value (hidden, the parameter is secure) is not a JSON string",
        "parameter \"image\" is required (declared string with no defaultValue) but has no value; give it with --parameters image=VALUE",
    ] {
        assert!(
            message.contains(expected),
            "missing {expected:?} in\n{message}"
        );
    }
    assert!(
        !message.contains("42"),
        "a secure value is never shown: {message}"
    );
    assert!(!dir.path().join("out.yaml").exists());
    assert!(output.stdout.is_empty(), "{}", stdout(&output));
}

#[test]
fn bad_files_and_arguments_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = typed_template(dir.path());
    write(dir.path(), "list.json", "[1, 2]");
    write(dir.path(), "broken.json", "{\"tag\": ");
    write(dir.path(), "plain.json", r#"{"tag": "v1"}"#);
    write(dir.path(), "text.txt", "not json");
    write(dir.path(), "not-arm.json", r#"{"resource": {}}"#);
    let cases: &[(&[&str], &str)] = &[
        (
            &["-p", "@list.json"],
            "list.json: not a JSON object; expected an ARM parameter file",
        ),
        (&["-p", "@broken.json"], "broken.json: not JSON ("),
        (
            &["-p", "@plain.json"],
            "plain.json: parameter \"tag\" is not {\"value\": ...}",
        ),
        (
            &["-p", "@missing.json"],
            "missing.json: cannot read the file",
        ),
        (
            &["-p", "invalid-format"],
            "--parameters \"invalid-format\": expected @FILE, NAME=VALUE or NAME=@FILE",
        ),
        (
            &["-p", "=v"],
            "--parameters \"=v\": no parameter name before '='",
        ),
        (
            &["-p", "tag=@"],
            "--parameters \"tag=@\": no file after '@'",
        ),
        (
            &["-p", "labels=@text.txt"],
            "text.txt (value of parameter \"labels\"): not JSON",
        ),
        (
            &["-p", "image=x", "--scope", "/planes/radius/local"],
            "--scope \"/planes/radius/local\": expected /planes/radius/PLANE/resourceGroups/GROUP",
        ),
        (
            &["-p", "image=x", "--name", "My_App"],
            "name \"My_App\" is not a valid Kubernetes object name",
        ),
        (
            &["-p", "image=x", "--namespace", "a.b"],
            "--namespace \"a.b\" is not a valid namespace",
        ),
        (
            &["-p", "image=x", "-o", "out.json"],
            "--outfile out.json: the manifest file must end in .yaml or .yml",
        ),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["manifest", "generate", template.as_str()];
        if !extra.contains(&"--scope") {
            args.extend(["-g", "default"]);
        }
        args.extend(*extra);
        if !extra.contains(&"-o") {
            args.extend(["-o", "out.yaml"]);
        }
        let output = radwasm_in(dir.path(), &args, None);
        assert!(!output.status.success(), "{args:?} succeeded");
        assert!(
            stderr(&output).contains(expected),
            "{args:?}: missing {expected:?} in\n{}",
            stderr(&output)
        );
        assert!(
            !dir.path().join("out.yaml").exists(),
            "{args:?} wrote a file"
        );
        assert!(
            !dir.path().join("out.json").exists(),
            "{args:?} wrote a file"
        );
    }

    for (file, expected) in [
        (
            "not-arm.json",
            "not-arm.json: not an ARM template: it has no \"resources\"",
        ),
        (
            "text.txt",
            "text.txt: expected a .bicep file or a compiled ARM template (.json)",
        ),
        ("absent.json", "absent.json: cannot read the file"),
    ] {
        let output = radwasm_in(
            dir.path(),
            &["manifest", "generate", file, "-g", "default"],
            None,
        );
        assert!(!output.status.success(), "{file}");
        assert!(stderr(&output).contains(expected), "{}", stderr(&output));
    }

    let output = radwasm_in(
        dir.path(),
        &["manifest", "generate", &template, "-p", "image=x"],
        None,
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("a Radius resource group is required: pass --group (-g) GROUP"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn the_environment_flag_fills_the_environment_parameter_and_can_give_the_scope() {
    let dir = tempfile::tempdir().expect("temp dir");
    let template = write(
        dir.path(),
        "app.json",
        &json!({"parameters": {"environment": {"type": "string"}}, "resources": {}}).to_string(),
    );
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest", "generate", &template, "-g", "prod", "-e", "main",
        ],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        parameter(&stdout(&output), "environment"),
        "/planes/radius/local/resourceGroups/prod/providers/Applications.Core/environments/main"
    );

    let id =
        "/planes/radius/local/resourceGroups/shared/providers/Applications.Core/environments/e1";
    let output = radwasm_in(
        dir.path(),
        &["manifest", "generate", &template, "-e", id],
        None,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let yaml = stdout(&output);
    assert_eq!(parameter(&yaml, "environment"), id);
    assert!(
        block(&yaml, "providerConfig")
            .contains("\"scope\": \"/planes/radius/local/resourceGroups/shared\""),
        "{yaml}"
    );

    let output = radwasm_in(
        dir.path(),
        &["manifest", "generate", &template, "-g", "prod"],
        None,
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("parameter \"environment\" is required (declared string with no defaultValue) but has no value; give it with --environment"),
        "{}",
        stderr(&output)
    );
}

/// A PATH holding only `dir` and the system directories a shell script needs.
fn path_with(dir: &Path) -> OsString {
    std::env::join_paths([dir, Path::new("/usr/bin"), Path::new("/bin")]).expect("PATH")
}

/// Put an executable `bicep` shell script into `bin`. The file is copied by a
/// child process so this test process never holds a writable handle to it
/// (a fork in a parallel test could otherwise keep it open and make running
/// it fail with "Text file busy").
fn install_bicep(bin: &Path, script: &str) {
    let source = write(bin, "bicep.sh", script);
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg("cp \"$0\" \"$1\" && chmod 755 \"$1\"")
        .arg(&source)
        .arg(bin.join("bicep"))
        .status()
        .expect("install bicep");
    assert!(status.success());
}

#[test]
fn a_bicep_file_without_bicep_on_path_says_what_to_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = tempfile::tempdir().expect("empty dir");
    write(dir.path(), "app.bicep", "param tag string = 'latest'\n");
    write(
        dir.path(),
        "app.bicepparam",
        "using 'app.bicep'\nparam tag = 'v1'\n",
    );
    let path = std::env::join_paths([empty.path()]).expect("PATH");
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            "app.bicep",
            "-g",
            "default",
            "-o",
            "app.yaml",
        ],
        Some(&path),
    );
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains(
            "app.bicep: compiling Bicep needs the Bicep CLI, and there is no `bicep` on PATH"
        ),
        "{message}"
    );
    assert!(
        message.contains("pass the compiled ARM JSON file instead"),
        "{message}"
    );
    assert!(!dir.path().join("app.yaml").exists());

    let template = fixture("cli-deploymenttemplate.json");
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            &template,
            "-g",
            "default",
            "-p",
            "@app.bicepparam",
        ],
        Some(&path),
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(
            "app.bicepparam: compiling Bicep needs the Bicep CLI, and there is no `bicep` on PATH"
        ),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_bicep_on_path_compiles_bicep_and_bicepparam_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = tempfile::tempdir().expect("bin dir");
    let template = fixture("cli-deploymenttemplate.json");
    let parameters_document = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
        "contentVersion": "1.0.0.0",
        "parameters": {"tag": {"value": "from-bicepparam"}, "kubernetesNamespace": {"value": "apps"}},
    });
    let build_params = write(
        bin.path(),
        "build-params.json",
        &json!({
            "parametersJson": parameters_document.to_string(),
            "templateJson": std::fs::read_to_string(&template).expect("fixture"),
        })
        .to_string(),
    );
    let calls = bin.path().join("calls.log");
    install_bicep(
        bin.path(),
        &format!(
            "#!/bin/sh\n\
             echo \"$@\" >> '{calls}'\n\
             case \"$1 $2\" in\n\
             'build --stdout') [ -f \"$3\" ] || {{ echo \"no file $3\" >&2; exit 1; }}; cat '{template}' ;;\n\
             'build-params --stdout') [ -f \"$3\" ] || {{ echo \"no file $3\" >&2; exit 1; }}; cat '{build_params}' ;;\n\
             *) echo \"unexpected arguments: $*\" >&2; exit 64 ;;\n\
             esac\n",
            calls = calls.display(),
        ),
    );
    write(
        dir.path(),
        "app.bicep",
        "extension radius\nparam tag string = 'latest'\n",
    );
    write(
        dir.path(),
        "app.bicepparam",
        "using 'app.bicep'\nparam tag = 'from-bicepparam'\n",
    );

    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            "app.bicep",
            "-g",
            "default",
            "-p",
            "@app.bicepparam",
            "-o",
            "app.yaml",
        ],
        Some(&path_with(bin.path())),
    );
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(&calls).expect("bicep was run"),
        "build --stdout app.bicep\nbuild-params --stdout app.bicepparam\n"
    );
    let yaml = std::fs::read_to_string(dir.path().join("app.yaml")).expect("written");
    assert!(yaml.contains("\nmetadata:\n  name: app.bicep\n"), "{yaml}");
    let compiled: Value = serde_json::from_str(&block(&yaml, "template")).expect("json");
    assert_eq!(compiled, read_json(&template));
    assert_eq!(parameter(&yaml, "tag"), "from-bicepparam");
    assert_eq!(parameter(&yaml, "kubernetesNamespace"), "apps");

    // A failing compile reports Bicep's own diagnostics and writes nothing.
    install_bicep(
        bin.path(),
        "#!/bin/sh\necho \"app.bicep(1,1) : Error BCP007: This declaration type is not recognized.\" >&2\nexit 1\n",
    );
    let output = radwasm_in(
        dir.path(),
        &[
            "manifest",
            "generate",
            "app.bicep",
            "-g",
            "default",
            "-o",
            "broken.yaml",
        ],
        Some(&path_with(bin.path())),
    );
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(
        message.contains("app.bicep: `bicep build` failed"),
        "{message}"
    );
    assert!(message.contains("Error BCP007"), "{message}");
    assert!(!dir.path().join("broken.yaml").exists());
}
