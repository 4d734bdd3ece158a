//! Decision records as an operator uses them: records made by deciding the
//! default policy's fixture cases through the library's recorder, then
//! `radwasm policy replay` and `radwasm policy record-to-case` run as the
//! real binary.
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use radwasm_test_support::{output_text as text, repository as repo};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use radwasm::policy::records::{self, DecisionRecord, Recorder, RecorderSettings, Role};
use radwasm::policy::{Limits, LoadedPolicy, PolicyEngine};
use radwasm_policy_model::{Observation, cases};
use serde_json::Value;

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

fn engine() -> PolicyEngine {
    radwasm::policy::engine(Limits::default()).expect("engine")
}

fn default_policy() -> LoadedPolicy {
    radwasm::policy::embedded::load_default(&engine()).expect("default policy")
}

/// The image every default-policy case deploys.
const PINNED: &str = "ghcr.io/radius-project/samples/demo:0.42";

/// Every default-policy case's observation, and for each template that
/// deploys [`PINNED`] two more: the same image as `:latest` and untagged.
fn observations() -> Vec<Observation> {
    let loaded =
        cases::load_cases(&repo().join("guests/default-policy/cases")).expect("default cases");
    assert!(loaded.len() > 40, "{} cases", loaded.len());
    let mut observations = Vec::new();
    for case in loaded {
        let observation = case.case.observation;
        if let Observation::DeploymentTemplate(template) = &observation
            && template.spec.template.contains(PINNED)
        {
            for image in [
                "ghcr.io/radius-project/samples/demo:latest",
                "ghcr.io/radius-project/samples/demo",
            ] {
                let mut variant = template.clone();
                variant.spec.template = variant.spec.template.replace(PINNED, image);
                observations.push(Observation::DeploymentTemplate(variant));
            }
        }
        observations.push(observation);
    }
    observations
}

/// Decide each observation with `policy` and record it through a recorder
/// writing to `directory` (small files, so there are several).
fn record_all(policy: &LoadedPolicy, observations: &[Observation], directory: &Path) {
    let recorder = Recorder::start(RecorderSettings {
        directory: Some(directory.to_path_buf()),
        max_file_bytes: 64 << 10,
        max_files: 1000,
        ..RecorderSettings::default()
    })
    .expect("recorder");
    for observation in observations {
        let started = Instant::now();
        let decision = policy.decide(observation);
        let record = DecisionRecord::new(
            policy,
            Role::Enforce,
            observation,
            &decision,
            started.elapsed(),
        );
        recorder.record(record);
    }
    assert!(recorder.flush(Duration::from_secs(30)), "records written");
    assert_eq!(recorder.written(), observations.len() as u64);
    assert_eq!(recorder.dropped(), 0);
}

/// `file:line` of every record in the directory, with the record as plain
/// JSON.
fn record_lines(directory: &Path) -> Vec<(String, Value)> {
    let mut lines = Vec::new();
    for file in records::record_files_in(directory).expect("list records") {
        let content = std::fs::read_to_string(&file).expect("read records");
        for (index, line) in content.lines().enumerate() {
            let value: Value = serde_json::from_str(line).expect("a JSON line");
            lines.push((format!("{}:{}", file.display(), index + 1), value));
        }
    }
    lines
}

/// Whether the image-tag guardrail refuses what a record observed, worked
/// out from the record's JSON alone: a template not being deleted, with no
/// operation under way, whose template has a container image without a tag
/// or tagged `latest`.
fn guardrail_refuses(record: &Value) -> bool {
    let Some(template) = record.pointer("/observation/deploymentTemplate") else {
        return false;
    };
    if template
        .pointer("/meta/deletionRequested")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        || template.get("operation").is_some_and(|op| !op.is_null())
    {
        return false;
    }
    let Some(text) = template.pointer("/spec/template").and_then(Value::as_str) else {
        return false;
    };
    let Ok(arm) = serde_json::from_str::<Value>(text) else {
        return false;
    };
    let mut images = Vec::new();
    collect_images(&arm, &mut images);
    images.iter().any(|image| {
        let last = image.rsplit('/').next().unwrap_or(image);
        !image.contains('@') && (!last.contains(':') || last.ends_with(":latest"))
    })
}

fn collect_images(value: &Value, images: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(image) = map
                .get("container")
                .and_then(|container| container.get("image"))
                .and_then(Value::as_str)
            {
                images.push(image.to_string());
            }
            for child in map.values() {
                collect_images(child, images);
            }
        }
        Value::Array(list) => list.iter().for_each(|child| collect_images(child, images)),
        _ => {}
    }
}

/// The `file:line` of every `DIFF` line of a replay's output.
fn diff_locations(output: &str) -> BTreeSet<String> {
    output
        .lines()
        .filter_map(|line| line.strip_prefix("DIFF "))
        .map(|rest| rest.split(' ').next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn replay_agrees_with_the_recording_policy_and_finds_what_the_guardrail_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let observations = observations();
    record_all(&default_policy(), &observations, dir.path());
    let files = records::record_files_in(dir.path()).expect("list");
    assert!(files.len() > 1, "expected rotation into several files");
    let records_dir = dir.path().display().to_string();

    // The policy that made the records agrees with all of them.
    let output = radwasm(&[
        "policy",
        "replay",
        "default",
        &records_dir,
        "--fail-on-diff",
    ]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    let total = observations.len();
    assert!(
        all.contains(&format!(
            "{total} records from {} files: {total} agree, 0 disagree (100.0 % agree); 0 unreadable lines",
            files.len()
        )),
        "{all}"
    );
    assert!(!all.contains("DIFF"), "{all}");

    // The guardrail disagrees exactly where it refuses the image.
    let expected: BTreeSet<String> = record_lines(dir.path())
        .into_iter()
        .filter(|(_, record)| guardrail_refuses(record))
        .map(|(location, _)| location)
        .collect();
    assert!(
        !expected.is_empty() && expected.len() < total,
        "{expected:?}"
    );
    let guardrail = guest("image-tag-guardrail");
    let output = radwasm(&["policy", "replay", &guardrail, &records_dir]);
    let all = text(&output);
    assert!(output.status.success(), "without --fail-on-diff: {all}");
    assert_eq!(diff_locations(&all), expected, "{all}");
    let disagree = expected.len();
    assert!(
        all.contains(&format!("{} agree, {disagree} disagree", total - disagree)),
        "{all}"
    );
    // Grouped by action kind: the guardrail marks each refused template
    // Failed instead of deploying it.
    assert!(
        all.contains("records disagreeing, by action kind:"),
        "{all}"
    );
    let count_of = |kind: &str| -> Option<usize> {
        all.lines()
            .skip_while(|line| !line.starts_with("records disagreeing"))
            .find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some(kind))
                    .then(|| words.next().and_then(|n| n.parse().ok()))
                    .flatten()
            })
    };
    assert_eq!(count_of("setStatus"), Some(disagree), "{all}");
    assert!(count_of("startDeployment").is_some_and(|n| n > 0), "{all}");
    assert!(
        all.contains("recorded: ") && all.contains("replayed: "),
        "{all}"
    );
    assert!(all.contains("first difference, action "), "{all}");

    let output = radwasm(&[
        "policy",
        "replay",
        &guardrail,
        &records_dir,
        "--fail-on-diff",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));

    // record-to-case on a refused record: the case passes with the policy
    // that recorded it and fails with the guardrail.
    let refused = expected.iter().next().expect("a refused record");
    let case = dir.path().join("refused-case.json");
    let output = radwasm(&[
        "policy",
        "record-to-case",
        refused,
        "--output",
        &case.display().to_string(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&case).expect("case")).expect("JSON");
    assert_eq!(written["expect"]["match"], "exact", "{written}");
    let description = written["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("default@") && description.contains("DeploymentTemplate default/"),
        "{description}"
    );
    let output = radwasm(&["policy", "test", "default", &case.display().to_string()]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(text(&output).contains("1 passed, 0 failed"));
    let output = radwasm(&["policy", "test", &guardrail, &case.display().to_string()]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
}

#[test]
fn every_record_becomes_a_case_the_recording_policy_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records_dir = dir.path().join("records");
    record_all(&default_policy(), &observations(), &records_dir);
    let cases_dir = dir.path().join("cases");
    std::fs::create_dir(&cases_dir).expect("cases dir");
    let lines = record_lines(&records_dir);
    for (index, (location, _)) in lines.iter().enumerate() {
        let case = cases_dir.join(format!("{index:03}.json"));
        let output = radwasm(&[
            "policy",
            "record-to-case",
            location,
            "--output",
            &case.display().to_string(),
        ]);
        assert!(output.status.success(), "{location}: {}", text(&output));
    }
    let output = radwasm(&[
        "policy",
        "test",
        "default",
        &cases_dir.display().to_string(),
    ]);
    let all = text(&output);
    assert!(output.status.success(), "{all}");
    assert!(
        all.contains(&format!("{} passed, 0 failed", lines.len())),
        "{all}"
    );

    // Without a line number, the file's last record; to stdout without -o;
    // JSON text that reads back identically is written inline.
    let last_file = records::record_files_in(&records_dir)
        .expect("list")
        .pop()
        .expect("a file");
    let output = radwasm(&[
        "policy",
        "record-to-case",
        &last_file.display().to_string(),
        "--match",
        "partial",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let case: Value = serde_json::from_slice(&output.stdout).expect("case on stdout");
    let last_record = std::fs::read_to_string(&last_file).expect("read");
    let last_record: Value =
        serde_json::from_str(last_record.lines().last().expect("a line")).expect("JSON");
    assert_eq!(case["expect"]["match"], "partial");
    assert_eq!(case["expect"]["actions"], last_record["plan"]);
    assert!(
        case.pointer("/observation/deploymentTemplate/spec/template")
            .is_some_and(Value::is_object),
        "{case}"
    );
}

#[test]
fn policy_errors_replay_and_become_expected_errors_sandbox_failures_do_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let misbehaving = radwasm::policy::engine(Limits {
        fuel: 2_000_000,
        ..Limits::default()
    })
    .expect("engine")
    .load_file(Path::new(&guest("misbehaving-policy")))
    .expect("misbehaving guest");
    let observation = |mode: &str| -> Observation {
        serde_json::from_value(serde_json::json!({"deploymentTemplate": {"meta": {
            "name": format!("app-{mode}"), "namespace": "default", "generation": 1,
            "annotations": {"radwasm.test/misbehave": mode}
        }}}))
        .expect("observation")
    };
    record_all(
        &misbehaving,
        &[observation("error"), observation("loop")],
        dir.path(),
    );
    let file = records::record_files_in(dir.path())
        .expect("list")
        .pop()
        .expect("a file");
    let file = file.display().to_string();

    // Replayed with the same guest, both failures agree; the default policy
    // decides both, so both disagree under `(error)`.
    let guest_path = guest("misbehaving-policy");
    let output = radwasm(&[
        "policy",
        "replay",
        &guest_path,
        "--fuel",
        "2000000",
        &file,
        "--fail-on-diff",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let output = radwasm(&["policy", "replay", "default", &file]);
    let all = text(&output);
    assert!(all.contains("0 agree, 2 disagree"), "{all}");
    assert!(all.contains("(error)  2"), "{all}");
    assert!(
        all.contains("recorded: error PolicyError Misbehaving"),
        "{all}"
    );
    assert!(all.contains("recorded: error OutOfFuel"), "{all}");

    let case = dir.path().join("refusal.json");
    let output = radwasm(&[
        "policy",
        "record-to-case",
        &format!("{file}:1"),
        "--output",
        &case.display().to_string(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&case).expect("case")).expect("JSON");
    assert_eq!(
        written["expect"],
        serde_json::json!({"error": {"code": "Misbehaving", "messageContains": "asked to refuse"}})
    );
    let output = radwasm(&["policy", "test", &guest_path, &case.display().to_string()]);
    assert!(output.status.success(), "{}", text(&output));

    // Running out of fuel is not something a case can expect.
    let output = radwasm(&[
        "policy",
        "record-to-case",
        &format!("{file}:2"),
        "--output",
        &dir.path().join("fuel.json").display().to_string(),
    ]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains(":2") && all.contains("OutOfFuel"), "{all}");
    assert!(!dir.path().join("fuel.json").exists());
}

#[test]
fn corrupted_lines_are_reported_with_their_line_number_and_unreadable_files_fail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records_dir = dir.path().join("records");
    let observations: Vec<Observation> = observations().into_iter().take(5).collect();
    record_all(&default_policy(), &observations, &records_dir);
    let source = records::record_files_in(&records_dir)
        .expect("list")
        .pop()
        .expect("a file");
    let content = std::fs::read_to_string(&source).expect("read");
    let mut lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), 5);
    // Line 3 cut short (as a crash mid-write leaves it), line 6 not JSON,
    // line 7 blank (skipped), line 8 a record of the wrong shape.
    let whole: &str = lines[2];
    let half = (0..=whole.len() / 2)
        .rev()
        .find(|at| whole.is_char_boundary(*at))
        .unwrap_or(0);
    lines[2] = &whole[..half];
    lines.push("garbage");
    lines.push("");
    lines.push(r#"{"kind": "DeploymentTemplate"}"#);
    let corrupted = dir.path().join("corrupted.jsonl");
    std::fs::write(&corrupted, lines.join("\n") + "\n").expect("write");
    let corrupted_name = corrupted.display().to_string();

    let output = radwasm(&[
        "policy",
        "replay",
        "default",
        &corrupted_name,
        "--fail-on-diff",
    ]);
    let all = text(&output);
    assert!(output.status.success(), "bad lines are not fatal: {all}");
    for line in [3, 6, 8] {
        assert!(
            all.contains(&format!("BAD  {corrupted_name}:{line}: ")),
            "line {line}: {all}"
        );
    }
    assert!(!all.contains(&format!("{corrupted_name}:7")), "{all}");
    assert!(
        all.contains(
            "4 records from 1 file: 4 agree, 0 disagree (100.0 % agree); 3 unreadable lines"
        ),
        "{all}"
    );

    // record-to-case names the bad line too.
    let output = radwasm(&["policy", "record-to-case", &format!("{corrupted_name}:3")]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains(&format!("{corrupted_name}:3")), "{all}");
    let output = radwasm(&["policy", "record-to-case", &format!("{corrupted_name}:99")]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));

    // A file that cannot be read stops the replay with exit code 2.
    let missing = dir.path().join("missing.jsonl").display().to_string();
    let output = radwasm(&["policy", "replay", "default", &corrupted_name, &missing]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(all.contains("missing.jsonl"), "{all}");
    // So does a file with nothing that reads as a record.
    let junk = dir.path().join("junk.jsonl");
    std::fs::write(&junk, "junk\n").expect("write");
    let output = radwasm(&["policy", "replay", "default", &junk.display().to_string()]);
    let all = text(&output);
    assert_eq!(output.status.code(), Some(2), "{all}");
    assert!(
        all.contains("BAD ") && all.contains("junk.jsonl:1"),
        "{all}"
    );
}
