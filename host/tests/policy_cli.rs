//! `radwasm policy ...` as a user runs it: the real binary, real files, exit
//! codes and messages.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

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
    assert!(all.contains("world radapp:policy/layer@0.6.0"), "{all}");
    assert!(all.contains("layers on:   default@"), "{all}");
    let cases = repo().join("guests/team-label-layer/cases");
    let output = radwasm(&["policy", "test", &layer, &cases.display().to_string()]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains(", 0 failed"), "{all}");
}

/// A case that only a stack with the team-label layer in it passes: a
/// template without a `team` label, refused.
const REFUSED_WITHOUT_A_TEAM: &str = r#"{"description": "no team label: refused",
    "observation": {"deploymentTemplate": {"meta": {"name": "app", "namespace": "default", "generation": 1}}},
    "expect": {"error": {"code": "MissingTeamLabel"}}}"#;

#[test]
fn a_layer_over_a_layer_is_checked_and_tested_over_the_base_chain() {
    let (keep, team) = (guest("keep-data-stores"), guest("team-label-layer"));
    let output = radwasm(&["policy", "check", &keep, "--base", &team]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(
        all.contains("layers on:   team-label-layer@0.1.0 over default@"),
        "{all}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("refused.json"), REFUSED_WITHOUT_A_TEAM).expect("write");
    let kept = "guests/keep-data-stores/cases/01-deletion-detaches-the-data-store-and-deletes-the-container.json";
    std::fs::copy(repo().join(kept), dir.path().join("kept.json")).expect("copy");
    let cases = dir.path().display().to_string();
    let output = radwasm(&["policy", "test", &keep, "--base", &team, &cases]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("2 passed, 0 failed"), "{all}");
    // Over the default alone, the refusal is not there.
    let output = radwasm(&["policy", "test", &keep, &cases]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(
        all.contains("FAIL") && all.contains("refused.json"),
        "{all}"
    );
}

#[test]
fn a_base_chain_that_cannot_stack_is_refused_naming_why() {
    let (keep, team) = (guest("keep-data-stores"), guest("team-label-layer"));
    let cases = path("guests/keep-data-stores/cases");
    let output = radwasm(&["policy", "test", "default", "--base", &team, &cases]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("--base is for a layer"), "{all}");
    let output = radwasm(&[
        "policy", "test", &keep, "--base", &team, "--base", "default", &cases,
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains("--base default") && all.contains("only be the first --base"),
        "{all}"
    );
}

#[test]
fn an_unreadable_case_or_an_unknown_action_fails_that_case_and_the_rest_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::copy(
        repo().join("guests/keep-data-stores/cases/01-deletion-detaches-the-data-store-and-deletes-the-container.json"),
        dir.path().join("1-good.json"),
    )
    .expect("copy");
    std::fs::write(dir.path().join("2-broken.json"), "{ not json").expect("write");
    let good = std::fs::read_to_string(dir.path().join("1-good.json")).expect("read");
    let typo = good.replace("\"detachResource\"", "\"detach_resource\"");
    assert_ne!(typo, good);
    std::fs::write(dir.path().join("3-typo.json"), typo).expect("write");
    let cases = dir.path().display().to_string();
    let output = radwasm(&["policy", "test", &guest("keep-data-stores"), &cases]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(all.contains("1 passed, 2 failed"), "{all}");
    let line = |name: &str| {
        all.lines()
            .find(|l| l.starts_with("FAIL") && l.contains(name))
            .unwrap_or_else(|| panic!("no FAIL line for {name}\n{all}"))
            .to_string()
    };
    assert!(line("2-broken.json").contains("not a valid case"), "{all}");
    let typo = line("3-typo.json");
    assert!(
        typo.contains("\"detach_resource\" is not a DeploymentTemplate action")
            && typo.contains("detachResource")
            && !typo.contains("not found"),
        "{typo}"
    );
}

#[test]
fn check_prints_the_description_and_worlds() {
    let output = radwasm(&["policy", "check", "default"]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(all.contains("policy:      default@"), "{all}");
    assert!(all.contains("world radapp:policy/policy@0.6.0"), "{all}");
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
    assert_eq!(output.status.code(), Some(1), "{all}");
    assert!(all.contains("FAIL") && all.contains("case.json"), "{all}");

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
        ("policy.wit", "package radapp:policy@0.6.0;"),
        ("v0.5/policy.wit", "package radapp:policy@0.5.0;"),
        ("v0.4/policy.wit", "package radapp:policy@0.4.0;"),
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

/// Every `*.json` under `dir`, as `/`-separated paths relative to it, sorted.
fn json_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let relative = path.strip_prefix(dir).expect("under dir");
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_binary_writes_the_default_policys_cases_and_they_pass_against_it() {
    // A user with only the binary: the cases come out of it, not this tree.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("examples");
    let output = radwasm(&["policy", "cases", "--write", &out.display().to_string()]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");

    let source = repo().join("guests/default-policy/cases");
    let written = json_files(&out);
    assert_eq!(
        written,
        json_files(&source),
        "the embedded set is the repository's"
    );
    for file in &written {
        assert_eq!(
            std::fs::read_to_string(out.join(file)).expect("written"),
            std::fs::read_to_string(source.join(file)).expect("source"),
            "{file}"
        );
    }
    assert!(
        all.contains(&format!("wrote {} cases", written.len())),
        "{all}"
    );
    // What the guide sends readers to: a template being deleted, a resource
    // with its owner.
    let texts: Vec<String> = written
        .iter()
        .map(|file| std::fs::read_to_string(out.join(file)).expect("written"))
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("\"deletionRequested\": true")
                && t.contains("\"deploymentTemplate\"")),
        "no template being deleted"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("\"deploymentResource\"") && t.contains("\"owner\"")),
        "no resource with its owner"
    );

    let tested = radwasm(&["policy", "test", "default", &out.display().to_string()]);
    let all = text(&tested);
    assert!(tested.status.success(), "{all}");
    assert!(
        all.contains(&format!("{} passed, 0 failed", written.len())),
        "{all}"
    );

    // Listed without --write: one line per case with its description.
    let listed = radwasm(&["policy", "cases"]);
    let all = text(&listed);
    assert!(listed.status.success(), "{all}");
    assert!(all.contains("template/01-"), "{all}");
    assert!(all.contains(&format!("{} cases", written.len())), "{all}");
}

/// `bytes` with a custom section of `size` bytes appended (a valid
/// component still: custom sections may come anywhere).
fn with_custom_section(mut bytes: Vec<u8>, size: usize) -> Vec<u8> {
    let name = b"padding";
    let mut payload = vec![name.len() as u8];
    payload.extend_from_slice(name);
    payload.resize(payload.len() + size, 0);
    bytes.push(0); // custom section id
    let mut length = payload.len();
    loop {
        let byte = (length & 0x7f) as u8;
        length >>= 7;
        if length == 0 {
            bytes.push(byte);
            break;
        }
        bytes.push(byte | 0x80);
    }
    bytes.extend_from_slice(&payload);
    bytes
}

#[test]
fn check_says_which_sources_can_ship_a_component_of_its_size() {
    let output = radwasm(&["policy", "check", &guest("team-label-layer")]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(
        all.contains("a ConfigMap, an OCI registry or an HTTPS URL can serve it"),
        "{all}"
    );

    // The size of an interpreted guest: more than a ConfigMap holds.
    let dir = tempfile::tempdir().expect("tempdir");
    let large = dir.path().join("large.wasm");
    let bytes = std::fs::read(guest("team-label-layer")).expect("the layer");
    std::fs::write(&large, with_custom_section(bytes, 1_200_000)).expect("write");
    let output = radwasm(&["policy", "check", &large.display().to_string()]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(
        all.contains("over the 1 MiB a ConfigMap source holds")
            && all.contains("radwasm policy push")
            && all.contains("spec.module.url"),
        "{all}"
    );
}
