//! `radwasm policy ...` as a user runs it: the real binary, real files, exit
//! codes and messages.

use radwasm_test_support::{output_text as text, repository as repo};
use std::path::Path;
use std::process::{Command, Output};

fn radwasm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(args)
        .output()
        .expect("run radwasm")
}

fn guest(name: &str) -> String {
    Path::new(env!("RADWASM_GUEST_DIR"))
        .join(format!("{name}.wasm"))
        .display()
        .to_string()
}

fn path(relative: &str) -> String {
    repo().join(relative).display().to_string()
}

#[test]
fn the_default_policy_passes_its_whole_case_set_through_the_wasm_guest() {
    let output = radwasm(&[
        "policy",
        "test",
        "default",
        &path("guests/default-policy/cases"),
    ]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains(" passed, 0 failed"), "{all}");
    assert!(!all.contains("FAIL"), "{all}");
}

#[test]
fn the_guardrail_passes_its_cases() {
    let output = radwasm(&[
        "policy",
        "test",
        &guest("image-tag-guardrail"),
        &path("guests/image-tag-guardrail/cases"),
    ]);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn a_deliberately_wrong_case_fails_loudly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let case = dir.path().join("wrong.json");
    // A brand-new template gets the finalizer first; this case claims it is
    // deployed straight away with nothing else, which is wrong.
    std::fs::write(
        &case,
        r#"{"description": "deliberately wrong",
            "observation": {"deploymentTemplate": {"meta": {"name": "app", "namespace": "default", "generation": 1}}},
            "expect": {"match": "exact", "actions": [{"requeueAfter": 1}]}}"#,
    )
    .expect("write case");
    let output = radwasm(&["policy", "test", "default", &case.display().to_string()]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(all.contains("FAIL"), "{all}");
    assert!(all.contains("wrong.json"), "{all}");
    assert!(all.contains("0 passed, 1 failed"), "{all}");
}

#[test]
fn a_layer_is_checked_and_tested_over_the_default_policy() {
    let layer = guest("team-label-layer");
    let output = radwasm(&["policy", "check", &layer]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("world radapp:policy/layer@0.4.0"), "{all}");
    assert!(all.contains("layers on:   default@"), "{all}");
    let cases = repo().join("guests/team-label-layer/cases");
    let output = radwasm(&["policy", "test", &layer, &cases.display().to_string()]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains(", 0 failed"), "{all}");
}

#[test]
fn check_prints_the_description_and_worlds() {
    let output = radwasm(&["policy", "check", "default"]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("policy:      default@"), "{all}");
    assert!(all.contains("world radapp:policy/policy@0.4.0"), "{all}");
    assert!(!all.contains("layers on:"), "{all}");
    assert!(all.contains("radapp.io/depends-on"), "{all}");
}

#[test]
fn run_prints_the_plan_as_json() {
    let output = radwasm(&[
        "policy",
        "run",
        "default",
        "--observation",
        &path("host/fixtures/bench/template-10-resources.json"),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let plan: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    let actions = plan
        .pointer("/deploymentTemplate/actions")
        .and_then(|actions| actions.as_array())
        .expect("a template plan");
    assert!(!actions.is_empty(), "{plan}");
}

#[test]
fn bad_files_get_one_clear_error_and_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");

    let not_json = dir.path().join("broken.json");
    std::fs::write(&not_json, "{ this is not json").expect("write");
    let output = radwasm(&[
        "policy",
        "run",
        "default",
        "--observation",
        &not_json.display().to_string(),
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("broken.json"), "{all}");

    let unknown_field = dir.path().join("typo.json");
    std::fs::write(
        &unknown_field,
        r#"{"deploymentTemplate": {"meta": {"nmae": "app"}}}"#,
    )
    .expect("write");
    let output = radwasm(&[
        "policy",
        "run",
        "default",
        "--observation",
        &unknown_field.display().to_string(),
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("typo.json") && all.contains("nmae"), "{all}");

    let bad_case = dir.path().join("case.json");
    std::fs::write(
        &bad_case,
        r#"{"observation": {}, "expect": {"match": "sometimes", "actions": []}}"#,
    )
    .expect("write");
    let output = radwasm(&["policy", "test", "default", &bad_case.display().to_string()]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("case.json"), "{all}");

    let core = dir.path().join("core.wasm");
    std::fs::write(&core, wat::parse_str("(module)").expect("wat")).expect("write");
    let output = radwasm(&["policy", "check", &core.display().to_string()]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains("core.wasm") && all.contains("not a component"),
        "{all}"
    );
}

#[test]
fn the_sandbox_limits_are_reported_by_the_cli() {
    let dir = tempfile::tempdir().expect("tempdir");
    let observation = dir.path().join("loop.json");
    std::fs::write(
        &observation,
        r#"{"deploymentTemplate": {"meta": {"name": "x", "annotations": {"radwasm.test/misbehave": "loop"}}}}"#,
    )
    .expect("write");
    let output = radwasm(&[
        "policy",
        "run",
        &guest("misbehaving-policy"),
        "--fuel",
        "1000000",
        "--observation",
        &observation.display().to_string(),
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("CPU budget"), "{all}");
}

#[test]
fn the_committed_json_schemas_match_the_model() {
    for which in ["observation", "plan"] {
        let output = radwasm(&["policy", "schema", which]);
        assert!(output.status.success(), "{}", text(&output));
        let file = repo().join(format!("docs/schema/{which}.schema.json"));
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            committed == String::from_utf8_lossy(&output.stdout),
            "{} is out of date; regenerate it with `cargo run -p radwasm -- policy schema {which} > {}`",
            file.display(),
            file.display()
        );
    }
}

#[test]
fn policy_wit_writes_every_contract_version_the_binary_loads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("wit");
    let output = radwasm(&["policy", "wit", &out.display().to_string()]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    for (file, package) in [
        ("policy.wit", "package radapp:policy@0.4.0;"),
        ("v0.3/policy.wit", "package radapp:policy@0.3.0;"),
        ("v0.2/policy.wit", "package radapp:policy@0.2.0;"),
        ("v0.1/policy.wit", "package radapp:policy@0.1.0;"),
    ] {
        let written = std::fs::read_to_string(out.join(file)).expect(file);
        assert!(written.contains(package), "{file}: {package} missing");
        let source = std::fs::read_to_string(repo().join("wit").join(file)).expect(file);
        assert_eq!(written, source, "{file} differs from the repository's");
        assert!(all.contains(file), "{all}");
    }
    // Written again over itself: the same files, no error.
    let again = radwasm(&["policy", "wit", &out.display().to_string()]);
    assert!(again.status.success(), "{}", text(&again));
}
/// The subcommands `radwasm policy --help` lists.
fn policy_subcommands() -> Vec<String> {
    let output = radwasm(&["policy", "--help"]);
    assert!(output.status.success(), "{}", text(&output));
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    help.split("Commands:")
        .nth(1)
        .and_then(|rest| rest.split("Options:").next())
        .expect("a Commands: section")
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn dash_o_is_the_observation_in_every_policy_command_and_nothing_else() {
    let commands = policy_subcommands();
    assert!(
        ["run", "bench", "pull", "record-to-case"]
            .iter()
            .all(|c| commands.iter().any(|listed| listed == c)),
        "{commands:?}"
    );
    for command in &commands {
        let output = radwasm(&["policy", command, "--help"]);
        let help = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{command}: {}", text(&output));
        for line in help.lines().filter(|l| l.trim_start().starts_with("-o")) {
            assert!(
                line.contains("-o, --observation <FILE>"),
                "policy {command}: -o is not --observation: {line}"
            );
        }
        if ["run", "bench"].contains(&command.as_str()) {
            // Described, not just listed.
            let lines: Vec<&str> = help.lines().collect();
            let at = lines
                .iter()
                .position(|l| l.contains("-o, --observation <FILE>"))
                .unwrap_or_else(|| panic!("policy {command}: no -o, --observation:\n{help}"));
            let described = lines[at..(at + 2).min(lines.len())].join(" ");
            assert!(
                described.contains("deploymentTemplate"),
                "policy {command} --help does not describe --observation:\n{help}"
            );
        }
    }
    // The output file keeps its long flag: `pull` and `record-to-case`
    // accept `--output`, and refuse `-o` for it.
    for command in ["pull", "record-to-case"] {
        let output = radwasm(&["policy", command, "--help"]);
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("--output <FILE>"),
            "{command}"
        );
        let refused = radwasm(&["policy", command, "x", "-o", "out.wasm"]);
        assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
        assert!(text(&refused).contains("'-o'"), "{}", text(&refused));
    }
}
