//! Unit tests of the records module. They span its files: the format tests
//! and the recorder tests share the same records, and rotation is tested
//! through the recorder's writer thread, the way it runs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use super::recorder::{QUEUE_FULL, Settings, WRITE_ERROR};
use super::*;
use crate::policy::{Limits, PolicyEngine};

const WAIT: Duration = Duration::from_secs(10);

fn template(name: &str) -> model::TemplateObservation {
    model::TemplateObservation {
        meta: model::ObjectMeta {
            name: name.into(),
            namespace: "default".into(),
            generation: 1,
            ..Default::default()
        },
        spec: model::TemplateSpec {
            template: r#"{"resources":{}}"#.into(),
            parameters: "{}".into(),
            provider_config: String::new(),
        },
        spec_hash: "abc".into(),
        ..Default::default()
    }
}

/// A record without a loaded policy (cheap; for the sink tests). Every
/// one has the same time, so lines differ in length only by `name`.
fn record(name: &str) -> DecisionRecord {
    DecisionRecord {
        at: "2026-11-24T10:15:00.123456789Z".parse().expect("a time"),
        kind: RecordKind::DeploymentTemplate,
        object: format!("default/{name}"),
        policy: PolicyIdentity {
            name: "default".into(),
            version: "0.1.0".into(),
            digest: "00".repeat(32),
        },
        role: Role::Enforce,
        observation: model::Observation::DeploymentTemplate(template(name)),
        plan: Some(vec![
            Value::from("addFinalizer"),
            serde_json::json!({"requeueAfter": 200}),
        ]),
        error: None,
        below: Vec::new(),
        duration_us: 42,
        fuel: 1000,
        outcome: Outcome::Ok,
    }
}

fn settings(directory: Option<PathBuf>) -> Settings {
    Settings {
        directory,
        max_file_bytes: 16 << 20,
        max_files: 8,
        ring: 0,
        queue: QUEUE_CAPACITY,
    }
}

fn lines_of(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_decided_record_round_trips_through_its_json_line() {
    let engine = PolicyEngine::new(Limits::default()).expect("engine");
    let policy = crate::policy::embedded::load_default(&engine).expect("default policy");
    let observation = template("app");
    let decision = policy
        .decide_template(&observation)
        .map(|decision| decision.map_plan(|plan| plan.actions));
    let record = DecisionRecord::new(
        &policy,
        Role::Shadow,
        &observation,
        &decision,
        Duration::from_micros(1234),
    );
    assert_eq!(record.object, "default/app");
    assert_eq!(record.kind, RecordKind::DeploymentTemplate);
    assert_eq!(record.outcome, Outcome::Ok);
    assert_eq!(record.duration_us, 1234);
    assert!(record.fuel > 0);
    assert_eq!(record.policy.digest, policy.digest());
    let line = record.to_json_line();
    assert!(!line.contains('\n'), "{line}");
    let value: Value = serde_json::from_str(&line).expect("JSON");
    for key in [
        "at",
        "kind",
        "object",
        "policy",
        "role",
        "observation",
        "plan",
        "durationUs",
        "fuel",
        "outcome",
    ] {
        assert!(value.get(key).is_some(), "{key} missing from {line}");
    }
    assert_eq!(value["role"], "shadow");
    assert_eq!(value["kind"], "DeploymentTemplate");
    assert!(
        value["observation"]["deploymentTemplate"].is_object(),
        "{line}"
    );
    assert_eq!(value["plan"][0], "addFinalizer", "{line}");
    assert!(
        DateTime::parse_from_rfc3339(value["at"].as_str().expect("at")).is_ok(),
        "{line}"
    );
    // The observation is exactly the observation-file form.
    let observation_file: model::Observation =
        serde_json::from_value(value["observation"].clone()).expect("observation form");
    assert_eq!(observation_file, record.observation);
    let again = DecisionRecord::from_json_line(&line).expect("parses back");
    assert_eq!(again, record);
}

#[test]
fn errors_are_recorded_with_reason_code_and_message() {
    let refused: Result<Decision<Vec<model::TemplateAction>>, DecisionError> =
        Err(DecisionError::Policy {
            policy: "p".into(),
            error: model::PolicyError {
                code: "Invalid".into(),
                message: "bad spec".into(),
            },
        });
    let engine = PolicyEngine::new(Limits::default()).expect("engine");
    let policy = crate::policy::embedded::load_default(&engine).expect("default policy");
    let record = DecisionRecord::new(
        &policy,
        Role::Enforce,
        &template("x"),
        &refused,
        Duration::ZERO,
    );
    assert_eq!(record.outcome, Outcome::Error);
    assert_eq!(record.plan, None);
    let error = record.error.clone().expect("error");
    assert!(error.is_policy_error());
    assert_eq!(error.code.as_deref(), Some("Invalid"));
    assert_eq!(error.message, "bad spec");
    let line = record.to_json_line();
    assert!(!line.contains("\"plan\""), "{line}");
    assert_eq!(
        DecisionRecord::from_json_line(&line).expect("parses"),
        record
    );

    let fuel: Result<Decision<Vec<model::TemplateAction>>, DecisionError> =
        Err(DecisionError::OutOfFuel {
            policy: "p".into(),
            fuel: 7,
        });
    let record = DecisionRecord::new(
        &policy,
        Role::Enforce,
        &template("x"),
        &fuel,
        Duration::ZERO,
    );
    let error = record.error.expect("error");
    assert_eq!(error.reason, "OutOfFuel");
    assert_eq!(error.code, None);
    assert!(error.message.contains("CPU budget"), "{}", error.message);
    assert_eq!(record.fuel, 7);
}

#[test]
fn inconsistent_lines_are_refused_with_the_reason() {
    let mut value = serde_json::to_value(record("a")).expect("value");
    value["kind"] = "DeploymentResource".into();
    let error = DecisionRecord::from_json_line(&value.to_string()).expect_err("kind");
    assert!(
        error.contains("observation is a DeploymentTemplate"),
        "{error}"
    );
    let mut value = serde_json::to_value(record("a")).expect("value");
    value["outcome"] = "error".into();
    let error = DecisionRecord::from_json_line(&value.to_string()).expect_err("outcome");
    assert!(error.contains("outcome is error"), "{error}");
    let error = DecisionRecord::from_json_line("{\"at\": 1").expect_err("cut short");
    assert!(error.contains("not a decision record"), "{error}");
}

#[test]
fn files_rotate_by_size_and_names_sort_by_age() {
    let dir = tempfile::tempdir().expect("tempdir");
    let line_bytes = record("app-00").to_json_line().len() as u64 + 1;
    let recorder = Recorder::start(
        Settings {
            // Three records per file.
            max_file_bytes: line_bytes * 3 + 1,
            max_files: 100,
            ..settings(Some(dir.path().to_path_buf()))
        },
        None,
    )
    .expect("recorder");
    for index in 0..10 {
        recorder.record(record(&format!("app-{index:02}")));
    }
    assert!(recorder.flush(WAIT), "flushed");
    assert_eq!(recorder.written(), 10);
    assert_eq!(recorder.dropped(), 0);
    let files = record_files_in(dir.path()).expect("list");
    assert_eq!(files.len(), 4, "{files:?}");
    let mut objects = Vec::new();
    for (index, file) in files.iter().enumerate() {
        let size = std::fs::metadata(file).expect("size").len();
        assert!(
            size <= line_bytes * 3 + 1,
            "{} is {size} bytes",
            file.display()
        );
        let lines = lines_of(file);
        assert_eq!(
            lines.len(),
            if index < 3 { 3 } else { 1 },
            "{}",
            file.display()
        );
        for line in lines {
            objects.push(
                DecisionRecord::from_json_line(&line)
                    .expect("record")
                    .object,
            );
        }
    }
    // Sorted file names give the records in the order they were made.
    let expected: Vec<String> = (0..10).map(|i| format!("default/app-{i:02}")).collect();
    assert_eq!(objects, expected);
}

#[test]
fn a_record_larger_than_the_file_size_gets_a_file_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::start(
        Settings {
            max_file_bytes: 10,
            ..settings(Some(dir.path().to_path_buf()))
        },
        None,
    )
    .expect("recorder");
    recorder.record(record("a"));
    recorder.record(record("b"));
    assert!(recorder.flush(WAIT));
    let files = record_files_in(dir.path()).expect("list");
    assert_eq!(files.len(), 2);
    assert!(files.iter().all(|file| lines_of(file).len() == 1));
}

#[test]
fn the_oldest_files_are_deleted_past_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Somebody else's file in the directory is left alone.
    std::fs::write(dir.path().join("notes.txt"), "keep me").expect("write");
    let line_bytes = record("app-00").to_json_line().len() as u64 + 1;
    let recorder = Recorder::start(
        Settings {
            max_file_bytes: line_bytes,
            max_files: 3,
            ..settings(Some(dir.path().to_path_buf()))
        },
        None,
    )
    .expect("recorder");
    for index in 0..7 {
        recorder.record(record(&format!("app-{index:02}")));
    }
    assert!(recorder.flush(WAIT));
    let files = record_files_in(dir.path()).expect("list");
    assert_eq!(files.len(), 3, "{files:?}");
    let objects: Vec<String> = files
        .iter()
        .flat_map(|file| lines_of(file))
        .map(|line| {
            DecisionRecord::from_json_line(&line)
                .expect("record")
                .object
        })
        .collect();
    assert_eq!(
        objects,
        ["default/app-04", "default/app-05", "default/app-06"]
    );
    assert!(dir.path().join("notes.txt").exists());
    // A restart keeps to the cap too, counting the files already there.
    drop(recorder);
    let recorder = Recorder::start(
        Settings {
            max_file_bytes: line_bytes,
            max_files: 3,
            ..settings(Some(dir.path().to_path_buf()))
        },
        None,
    )
    .expect("recorder");
    recorder.record(record("app-07"));
    assert!(recorder.flush(WAIT));
    let files = record_files_in(dir.path()).expect("list");
    assert_eq!(files.len(), 3, "{files:?}");
    let last = lines_of(files.last().expect("newest"));
    assert!(last[0].contains("app-07"), "{last:?}");
}

#[test]
fn the_ring_keeps_the_last_n_newest_last() {
    let recorder = Recorder::start(
        Settings {
            ring: 5,
            ..settings(None)
        },
        None,
    )
    .expect("recorder");
    assert!(recorder.is_enabled());
    for index in 0..12 {
        recorder.record(record(&format!("app-{index:02}")));
    }
    assert!(recorder.flush(WAIT));
    assert_eq!(recorder.written(), 12);
    let objects = |text: String| -> Vec<String> {
        text.lines()
            .map(|line| DecisionRecord::from_json_line(line).expect("record").object)
            .collect()
    };
    let all = recorder.recent(None).expect("ring on");
    assert_eq!(
        objects(all),
        (7..12)
            .map(|i| format!("default/app-{i:02}"))
            .collect::<Vec<_>>()
    );
    let two = recorder.recent(Some(2)).expect("ring on");
    assert_eq!(objects(two), ["default/app-10", "default/app-11"]);
    assert_eq!(recorder.recent(Some(0)).expect("ring on"), "");
}

#[test]
fn a_full_queue_drops_and_counts_without_waiting() {
    let (open, gate) = mpsc::channel();
    let recorder = Recorder::start(
        Settings {
            ring: 100,
            queue: 4,
            ..settings(None)
        },
        Some(gate),
    )
    .expect("recorder");
    let started = Instant::now();
    for index in 0..10 {
        recorder.record(record(&format!("app-{index:02}")));
    }
    assert!(started.elapsed() < Duration::from_secs(1), "record waited");
    assert_eq!(recorder.dropped(), 6);
    assert_eq!(
        recorder.counters().dropped.get_or_create(&QUEUE_FULL).get(),
        6
    );
    // A flush cannot get into a full queue before its time is up.
    assert!(!recorder.flush(Duration::from_millis(20)));
    open.send(()).expect("open the gate");
    assert!(recorder.flush(WAIT));
    assert_eq!(recorder.written(), 4);
    let kept = recorder.recent(None).expect("ring").lines().count();
    assert_eq!(kept, 4);
}

#[test]
fn a_failing_directory_counts_write_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let records = dir.path().join("records");
    let recorder = Recorder::start(
        Settings {
            ring: 10,
            ..settings(Some(records.clone()))
        },
        None,
    )
    .expect("recorder");
    // The directory disappears and a file takes its place.
    std::fs::remove_dir_all(&records).expect("remove");
    std::fs::write(&records, "not a directory").expect("write");
    recorder.record(record("a"));
    assert!(recorder.flush(WAIT));
    assert_eq!(recorder.written(), 0);
    assert_eq!(
        recorder
            .counters()
            .dropped
            .get_or_create(&WRITE_ERROR)
            .get(),
        1
    );
    // The ring still has it.
    assert_eq!(recorder.recent(None).expect("ring").lines().count(), 1);
}

#[test]
fn an_unwritable_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("file");
    std::fs::write(&file, "x").expect("write");
    let args = RecordArgs {
        decision_records_dir: Some(file.join("records")),
        ..RecordArgs::default()
    };
    let error = Recorder::from_args(&args).expect_err("not a directory");
    assert!(
        format!("{error:#}").contains("decision-record directory"),
        "{error:#}"
    );
}

#[test]
fn no_directory_and_no_ring_is_disabled() {
    let recorder = Recorder::from_args(&RecordArgs {
        decision_ring: 0,
        ..RecordArgs::default()
    })
    .expect("recorder");
    assert!(!recorder.is_enabled());
    recorder.record(record("a"));
    assert!(recorder.flush(WAIT));
    assert_eq!(recorder.written() + recorder.dropped(), 0);
    assert_eq!(recorder.recent(None), None);
    assert!(!Recorder::disabled().is_enabled());
}

#[test]
fn sizes_parse_with_binary_suffixes() {
    assert_eq!(parse_size("16MiB"), Ok(16 << 20));
    assert_eq!(parse_size("512KiB"), Ok(512 << 10));
    assert_eq!(parse_size("1G"), Ok(1 << 30));
    assert_eq!(parse_size("1048576"), Ok(1 << 20));
    assert!(parse_size("0").is_err());
    assert!(parse_size("12 parsecs").is_err());
    assert!(parse_size("MiB").is_err());
}

#[test]
fn the_counters_are_exported_as_metrics() {
    let (open, gate) = mpsc::channel();
    let recorder = Recorder::start(
        Settings {
            ring: 10,
            queue: 1,
            ..settings(None)
        },
        Some(gate),
    )
    .expect("recorder");
    let metrics = crate::metrics::Metrics::default().with_decision_records(&recorder);
    recorder.record(record("a"));
    recorder.record(record("b"));
    open.send(()).expect("open");
    assert!(recorder.flush(WAIT));
    let text = metrics.encode();
    for line in [
        "radwasm_decision_records_written_total 1",
        r#"radwasm_decision_records_dropped_total{reason="queue_full"} 1"#,
        r#"radwasm_decision_records_dropped_total{reason="write_error"} 0"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test]
async fn the_metrics_server_serves_the_ring() {
    let recorder = Recorder::start(
        Settings {
            ring: 10,
            ..settings(None)
        },
        None,
    )
    .expect("recorder");
    for index in 0..3 {
        recorder.record(record(&format!("app-{index}")));
    }
    assert!(recorder.flush(WAIT));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let address = crate::metrics::serve(
        "127.0.0.1:0".parse().expect("address"),
        Arc::new(crate::metrics::Metrics::default().with_decision_records(&recorder)),
        crate::metrics::Readiness::default(),
        shutdown.clone(),
    )
    .await
    .expect("serves");
    let get = |path: &str| reqwest::get(format!("http://{address}{path}"));
    let response = get("/debug/decisions").await.expect("decisions");
    assert_eq!(response.status(), 200);
    let body = response.text().await.expect("body");
    let objects: Vec<String> = body
        .lines()
        .map(|line| DecisionRecord::from_json_line(line).expect("record").object)
        .collect();
    assert_eq!(objects, ["default/app-0", "default/app-1", "default/app-2"]);
    let body = get("/debug/decisions?limit=1")
        .await
        .expect("limited")
        .text()
        .await
        .expect("body");
    assert_eq!(body.lines().count(), 1);
    assert!(body.contains("default/app-2"), "{body}");
    let bad = get("/debug/decisions?limit=many").await.expect("bad limit");
    assert_eq!(bad.status(), 400);
    shutdown.cancel();

    // Without a ring the endpoint says so.
    let shutdown = tokio_util::sync::CancellationToken::new();
    let address = crate::metrics::serve(
        "127.0.0.1:0".parse().expect("address"),
        Arc::new(crate::metrics::Metrics::default()),
        crate::metrics::Readiness::default(),
        shutdown.clone(),
    )
    .await
    .expect("serves");
    let response = reqwest::get(format!("http://{address}/debug/decisions"))
        .await
        .expect("decisions");
    assert_eq!(response.status(), 404);
    shutdown.cancel();
}
