//! Unit tests of the records module. They span its files: the format tests
//! and the recorder tests share the same records, and rotation is tested
//! through the recorder's writer thread, the way it runs.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use super::recorder::{QUEUE_FULL, WRITE_ERROR};
use super::*;

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

fn settings(directory: Option<PathBuf>) -> RecorderSettings {
    RecorderSettings {
        directory,
        ..RecorderSettings::default()
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let recorder = Recorder::start_gated(
        RecorderSettings {
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
    let error = Recorder::start(settings(Some(file.join("records")))).expect_err("not a directory");
    assert!(
        format!("{error:#}").contains("decision-record directory"),
        "{error:#}"
    );
}

#[test]
fn no_directory_and_no_ring_is_disabled() {
    let recorder = Recorder::start(settings(None)).expect("recorder");
    assert!(!recorder.is_enabled());
    recorder.record(record("a"));
    assert!(recorder.flush(WAIT));
    assert_eq!(recorder.written() + recorder.dropped(), 0);
    assert_eq!(recorder.recent(None), None);
    assert!(!Recorder::disabled().is_enabled());
}
