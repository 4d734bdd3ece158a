//! The decision recorder's counters and ring, as the metrics server
//! serves them.

use std::sync::{Arc, mpsc};
use std::time::Duration;

use crate::policy::records::{DecisionRecord, Recorder, RecorderSettings};
use crate::policy::records_tests::record;

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn the_counters_are_exported_as_metrics() {
    let (open, gate) = mpsc::channel();
    let recorder = Recorder::start_gated(
        RecorderSettings {
            ring: 10,
            queue: 1,
            ..RecorderSettings::default()
        },
        Some(gate),
    )
    .expect("recorder");
    let metrics = super::Metrics::default().with_decision_records(&recorder);
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
    let recorder = Recorder::start(RecorderSettings {
        ring: 10,
        ..RecorderSettings::default()
    })
    .expect("recorder");
    for index in 0..3 {
        recorder.record(record(&format!("app-{index}")));
    }
    assert!(recorder.flush(WAIT));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let address = super::serve(
        "127.0.0.1:0".parse().expect("address"),
        Arc::new(super::Metrics::default().with_decision_records(&recorder)),
        super::Readiness::default(),
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
    let address = super::serve(
        "127.0.0.1:0".parse().expect("address"),
        Arc::new(super::Metrics::default()),
        super::Readiness::default(),
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
