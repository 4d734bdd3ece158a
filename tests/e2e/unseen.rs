//! A change no decision has seen always leads to a reconcile: a child
//! deleted while its own status write is in flight, when the watch then
//! loses its history (410 Gone) and the re-list shows only the version
//! that write left. Found by the churn test (a template waiting in
//! `WaitingForCleanup` for a child nobody deleted, until the 5-minute
//! resync); see `host/src/controller/unseen.rs`.

use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::DeleteParams;
use radwasm::crd::DeploymentResource;

use crate::harness::{System, own_app_template};

/// Poll `check` every 50 ms for at most `bound`; false if it never held.
async fn eventually(bound: Duration, mut check: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_deleted_under_its_in_flight_status_write_is_reconciled_after_a_relist() {
    if crate::harness::embedded_only(
        "held status writes and forgotten history are faults of the embedded API server",
    ) {
        return;
    }
    // No drift checks: nothing but the watch wakes a tracked child.
    let system = System::start(&["--drift-resync", "0"]).await;
    let faults = system.apiserver.as_ref().expect("embedded").faults();
    // Each child's first reconcile decides on the version the template
    // created and writes its status: held here, in flight.
    faults.hold_status_writes("deploymentresources");
    system.create(&own_app_template("held")).await;
    assert!(
        eventually(Duration::from_secs(60), async || faults
            .held_status_writes()
            >= 3)
        .await,
        "the three children's first status writes were never sent:\n{}",
        system.logs()
    );
    // From here the watch shows nothing for 10 s (ample for the steps up
    // to the re-list, on a loaded machine too): the user's deletion below
    // is never delivered as an event of its own.
    faults.set_watch_lag(Duration::from_secs(10));
    let container = system
        .owned("held")
        .await
        .into_iter()
        .find(|r| r.spec.id.contains("/containers/"))
        .expect("the container's DeploymentResource");
    let name = container.name_any();
    let uid = container.uid();
    system
        .resources()
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the child");
    // The held write lands on the deletion: the version it leaves carries
    // a change its decision did not see.
    faults.release_status_writes();
    let landed = eventually(Duration::from_secs(10), async || {
        system
            .resources()
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .is_some_and(|r: DeploymentResource| {
                r.metadata.deletion_timestamp.is_some() && r.status.is_some()
            })
    })
    .await;
    assert!(landed, "the status write did not land on the deletion");
    // The controller has its answer; then the watch is lost with its
    // history, and the re-list shows only that version.
    tokio::time::sleep(Duration::from_millis(500)).await;
    faults.expire_history();
    faults.drop_watches();
    faults.set_watch_lag(Duration::ZERO);

    // Reconciled, its Radius resource deleted, its finalizer removed: gone
    // (the template may recreate one of the same name, with another uid),
    // well before the template's waiting would wake it (30 s, `nudge.rs`).
    let gone = eventually(Duration::from_secs(20), async || {
        system
            .resources()
            .get_opt(&name)
            .await
            .expect("read the child")
            .is_none_or(|r| r.uid() != uid)
    })
    .await;
    assert!(
        gone,
        "child {name} was deleted but never reconciled after the re-list:\n{:#?}\n--- controller log ---\n{}",
        system
            .resources()
            .get_opt(&name)
            .await
            .ok()
            .flatten()
            .map(|r| (r.metadata.deletion_timestamp, r.status)),
        system.logs()
    );
    // What the controller did about the child (shown with --nocapture).
    for line in system.all_logs().lines().filter(|l| l.contains(&name)) {
        eprintln!("{}", line.chars().take(300).collect::<String>());
    }
    system.shutdown().await;
}
