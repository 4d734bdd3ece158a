//! The controller's Events as `kubectl get events` shows them: with a last
//! timestamp (so `--sort-by=.lastTimestamp`, a common habit, lists them)
//! and a count that grows when an Event repeats.

use std::time::Duration;

use crate::harness::{System, app_template};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sorted_by_last_timestamp_lists_the_controllers_events_with_their_count() {
    let system = System::start(&[]).await;
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    system.wait_event("app", "DeploymentSucceeded").await;
    // The admin's view (the controller's ServiceAccount may not list Events).
    let kubeconfig = system
        .cluster
        .as_ref()
        .map_or_else(|| system.kubeconfig.clone(), |c| c.kubeconfig.clone());
    let kubeconfig = kubeconfig.display().to_string();
    let out = crate::realkube::kubectl(
        std::path::Path::new(&kubeconfig),
        &[
            "get",
            "events",
            "-n",
            &system.namespace,
            "--sort-by=.lastTimestamp",
            "-o",
            "custom-columns=REASON:.reason,COUNT:.count,LAST:.lastTimestamp,FIRST:.firstTimestamp,OBJECT:.involvedObject.name",
        ],
    )
    .await
    .expect("kubectl");
    let text = crate::realkube::ok_stdout(&out, "kubectl get events --sort-by=.lastTimestamp");
    let line = text
        .lines()
        .find(|l| l.starts_with("DeploymentSucceeded"))
        .unwrap_or_else(|| panic!("the controller's Event is listed:\n{text}"));
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(columns.get(1), Some(&"1"), "a count: {line}");
    assert!(
        columns.get(2).is_some_and(|t| t.ends_with('Z'))
            && columns.get(3).is_some_and(|t| t.ends_with('Z')),
        "first and last timestamps: {line}"
    );
    assert_eq!(columns.get(4), Some(&"app"), "{line}");
    // The default table (no custom columns) shows an age for it.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let out = crate::realkube::kubectl(
        std::path::Path::new(&kubeconfig),
        &[
            "get",
            "events",
            "-n",
            &system.namespace,
            "--sort-by=.lastTimestamp",
        ],
    )
    .await
    .expect("kubectl");
    let text = crate::realkube::ok_stdout(&out, "kubectl get events");
    assert!(
        text.lines()
            .any(|l| l.contains("DeploymentSucceeded") && !l.trim_start().starts_with("<unknown>")),
        "{text}"
    );
    system.shutdown().await;
}
