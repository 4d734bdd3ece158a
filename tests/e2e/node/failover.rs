//! Two replicas with leader election on the node, as the chart installs
//! them: the leader pod deleted, the leader's process killed without
//! notice, and a leader stopped while its deployments are in flight. Each
//! time another process leads soon enough, what was created meanwhile
//! reaches `Ready`, and Radius sees one deployment per template.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::{WatchStreamExt, watcher};

use super::operator::{
    GRACE_PERIOD, HEAVY, LEASE, LEASE_DURATION, RENEW_EVERY, Release, container_id, container_pid,
    node_access, renewed_at, unix_now,
};

/// Install a release of two replicas, wait for its rollout and for one of
/// its pods to lead; the release and the leader's pod name (None when the
/// node tests are skipped).
async fn two_replicas(name: &str) -> Option<(Release, String)> {
    let node = node_access().await?;
    let tag = node.tags[0].clone();
    let release = Release::install(node, name, &tag, &["replicas=2".to_string()]).await;
    release.wait_rollout().await;
    let pods: Vec<String> = release.pods().await.iter().map(|p| p.name_any()).collect();
    let leader = release
        .wait_holder("among the release's pods", Duration::from_secs(60), |h| {
            pods.iter().any(|p| p == h)
        })
        .await;
    Some((release, leader))
}

/// Every holder the Lease had, in order, with when the change was seen
/// (an empty string: released).
struct LeaseHistory {
    changes: Arc<Mutex<Vec<(Instant, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseHistory {
    fn start(release: &Release) -> LeaseHistory {
        let changes = Arc::new(Mutex::new(Vec::<(Instant, String)>::new()));
        let leases: Api<Lease> = Api::namespaced(release.client.clone(), &release.namespace);
        let stream = watcher(
            leases,
            watcher::Config::default().fields(&format!("metadata.name={LEASE}")),
        )
        .default_backoff()
        .applied_objects();
        let task = {
            let changes = changes.clone();
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    let Ok(lease) = event else { continue };
                    let holder = lease
                        .spec
                        .and_then(|s| s.holder_identity)
                        .unwrap_or_default();
                    if let Ok(mut changes) = changes.lock()
                        && changes.last().map(|(_, h)| h) != Some(&holder)
                    {
                        changes.push((Instant::now(), holder));
                    }
                }
            })
        };
        LeaseHistory { changes, task }
    }

    fn changes(&self) -> Vec<(Instant, String)> {
        self.changes.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Drop for LeaseHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_leader_pod_hands_over_to_another_replica() {
    let _node = HEAVY.read().await;
    let Some((mut release, leader)) = two_replicas("node-failover-delete").await else {
        return;
    };
    release.create_templates("before", 5).await;
    release.wait_all_ready(Duration::from_secs(120)).await;

    let deleted = Instant::now();
    release
        .pods_api()
        .delete(&leader, &DeleteParams::default())
        .await
        .expect("delete the leader pod");
    release.create_templates("during", 10).await;
    let next = release
        .wait_holder("other than the deleted pod", LEASE_DURATION, |h| {
            h != leader
        })
        .await;
    let handover = deleted.elapsed();
    println!("leader pod {leader} deleted: {next} leads after {handover:.2?}");
    release.wait_all_ready(Duration::from_secs(180)).await;
    release.assert_one_deployment_each().await;
    // The replacement pod joins; the Deployment is whole again.
    release.wait_rollout().await;
    release.uninstall().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_without_notice_is_replaced_within_the_lease_duration() {
    let _node = HEAVY.read().await;
    let Some((mut release, leader)) = two_replicas("node-failover-kill").await else {
        return;
    };
    release.create_templates("before", 5).await;
    release.wait_all_ready(Duration::from_secs(120)).await;

    let pod = release
        .pods_api()
        .get(&leader)
        .await
        .expect("the leader pod");
    let Some(id) = container_id(&pod) else {
        release
            .fail(&format!("{leader} has no controller container id"))
            .await
    };
    let Some(pid) = container_pid(&id) else {
        release
            .fail(&format!("no radwasm process on the host in container {id}"))
            .await
    };
    let last_renewal = release.lease().await.as_ref().and_then(renewed_at);
    // SIGKILL: no handler runs, nothing is released; the Lease stays
    // with the dead process until it expires.
    let killed_at = unix_now();
    let killed = Instant::now();
    // SAFETY: kill(2) with a pid read from /proc; it touches no memory.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) } != 0 {
        let error = std::io::Error::last_os_error();
        release.fail(&format!("kill -KILL {pid}: {error}")).await;
    }
    release.create_templates("during", 10).await;
    // A live process leads once the Lease is written after the kill: the
    // standby once it judges the Lease expired (a lease duration after it
    // last saw it renewed, looking every renew interval), or the killed
    // pod's container restarted by kubelet, which holds the pod's name as
    // its identity and so renews the Lease as its own at once.
    let bound = LEASE_DURATION + RENEW_EVERY + Duration::from_secs(5);
    let deadline = Instant::now() + bound;
    let (holder, renewed) = loop {
        let lease = release.lease().await;
        let renewed = lease.as_ref().and_then(renewed_at).unwrap_or(0.0);
        let holder = lease
            .and_then(|l| l.spec?.holder_identity)
            .unwrap_or_default();
        if renewed > killed_at && !holder.is_empty() {
            break (holder, renewed);
        }
        if Instant::now() > deadline {
            release
                .fail(&format!(
                    "no process renewed the Lease within {bound:?} of the kill"
                ))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let who = if holder == leader {
        "the killed pod's restarted container"
    } else {
        "the standby"
    };
    println!(
        "leader {leader} (pid {pid}) killed: {holder} ({who}) leads after {:.2?}; \
         {:.2} s after the dead leader's last renewal",
        killed.elapsed(),
        renewed - last_renewal.unwrap_or(killed_at)
    );
    release.wait_all_ready(Duration::from_secs(180)).await;
    release.assert_one_deployment_each().await;
    release.wait_rollout().await;
    release.uninstall().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_leader_stops_in_its_grace_period_and_hands_its_deployments_over() {
    let _node = HEAVY.read().await;
    let Some((mut release, leader)) = two_replicas("node-failover-inflight").await else {
        return;
    };
    // Slow deployments, so the leader goes while they are in flight.
    release
        .radius
        .faults()
        .set_deploy_duration(Duration::from_secs(10));
    release.create_templates("inflight", 5).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while release.radius.stats().deployment_puts < 5 {
        if Instant::now() > deadline {
            release
                .fail("the 5 deployments never all reached Radius")
                .await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let history = LeaseHistory::start(&release);
    let deleted = Instant::now();
    release
        .pods_api()
        .delete(&leader, &DeleteParams::default())
        .await
        .expect("delete the leader pod");
    // The pod object goes once kubelet has seen its containers stop: on
    // their own after SIGTERM, or killed when the grace period ends.
    let mut exit_code = None;
    loop {
        match release.pods_api().get_opt(&leader).await {
            Ok(None) => break,
            Ok(Some(pod)) => {
                let terminated = pod
                    .status
                    .and_then(|s| s.container_statuses)
                    .into_iter()
                    .flatten()
                    .filter(|s| s.name == "controller")
                    .find_map(|s| s.state?.terminated);
                if let Some(terminated) = terminated {
                    exit_code = Some(terminated.exit_code);
                }
            }
            Err(error) => release.fail(&format!("get pod {leader}: {error}")).await,
        }
        if deleted.elapsed() > GRACE_PERIOD + Duration::from_secs(30) {
            release
                .fail(&format!("{leader} still there long after its grace period"))
                .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stopped = deleted.elapsed();
    let changes = history.changes();
    let released = changes
        .iter()
        .find(|(_, holder)| holder.is_empty())
        .map(|(at, _)| at.duration_since(deleted));
    let next = changes
        .iter()
        .find(|(at, holder)| *at > deleted && !holder.is_empty() && *holder != leader)
        .map(|(at, holder)| (at.duration_since(deleted), holder.clone()));
    let seen: Vec<(Duration, &str)> = changes
        .iter()
        .map(|(at, h)| (at.saturating_duration_since(deleted), h.as_str()))
        .collect();
    println!(
        "leader {leader} deleted: pod gone after {stopped:.2?} (exit code seen: {exit_code:?}), \
         Lease released after {released:.2?}, next leader {next:.2?}; Lease holders: {seen:?}"
    );
    if stopped >= GRACE_PERIOD {
        release
            .fail(&format!(
                "the pod took {stopped:?}, not less than its grace period {GRACE_PERIOD:?}"
            ))
            .await;
    }
    if exit_code.is_some_and(|code| code != 0) {
        release
            .fail(&format!(
                "the controller exited with {exit_code:?} on SIGTERM"
            ))
            .await;
    }
    if released.is_none() {
        release
            .fail(&format!("the Lease was never released: {seen:?}"))
            .await;
    }
    // Released, a standby takes it at its next look (every renew
    // interval) rather than after a lease duration: wait for it, then
    // check it came well before expiry could have let anyone in.
    let next = match next {
        Some(next) => next,
        None => {
            let holder = release
                .wait_holder("after the release", LEASE_DURATION, |h| h != leader)
                .await;
            (deleted.elapsed(), holder)
        }
    };
    if next.0 >= stopped + RENEW_EVERY + Duration::from_secs(3) {
        release
            .fail(&format!(
                "{} led only {:?} after the deletion",
                next.1, next.0
            ))
            .await;
    }
    // The deployments started by the old leader are followed, not sent
    // again.
    release.wait_all_ready(Duration::from_secs(180)).await;
    release.assert_one_deployment_each().await;
    drop(history);
    release.wait_rollout().await;
    release.uninstall().await;
}
