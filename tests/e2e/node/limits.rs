//! The chart's default resources hold 1,000 templates: both replicas (the
//! leader reconciling them, the standby caching them) stay within the
//! memory limit with no restart and no OOM kill. Prints the figures
//! docs/benchmarks.md quotes: pod start to Ready, and each container's
//! memory idle and with 1,000 templates Ready, read from its cgroup (v1)
//! on the host.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::operator::{
    HEAVY, Release, cgroup_number, container_id, container_pid, is_ready, memory_cgroup, mib,
    node_access, working_set,
};

const TEMPLATES: usize = 1_000;

/// One line of memory figures for each of the release's containers.
async fn memory(release: &Release, when: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let leader = release.holder().await;
    for pod in release.pods().await {
        let name = pod.name_any();
        let role = if leader.as_deref() == Some(name.as_str()) {
            "leader"
        } else {
            "standby"
        };
        let Some(dir) = container_id(&pod)
            .and_then(|id| container_pid(&id))
            .and_then(memory_cgroup)
        else {
            release
                .fail(&format!("no memory cgroup for the container of {name}"))
                .await
        };
        let usage = cgroup_number(&dir, "memory.usage_in_bytes");
        let peak = cgroup_number(&dir, "memory.max_usage_in_bytes");
        let limit = cgroup_number(&dir, "memory.limit_in_bytes");
        let working = working_set(&dir);
        println!(
            "memory {when}, {name} ({role}): working set {:.1} MiB, usage {:.1} MiB, peak {:.1} MiB, limit {:.0} MiB",
            mib(working),
            mib(usage),
            mib(peak),
            mib(limit)
        );
        out.push((name, peak));
    }
    out
}

/// Restarts and OOM kills of the release's containers, as kubelet reports
/// them; empty when there were none.
fn troubles(pods: &[Pod]) -> Vec<String> {
    let mut out = Vec::new();
    for pod in pods {
        for status in pod
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
        {
            let oom = [status.state.as_ref(), status.last_state.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|state| state.terminated.as_ref())
                .any(|t| t.reason.as_deref() == Some("OOMKilled"));
            if status.restart_count != 0 || oom {
                out.push(format!(
                    "{}: restartCount {}, OOMKilled {oom}, last state {:?}",
                    pod.name_any(),
                    status.restart_count,
                    status.last_state
                ));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_limits_hold_a_thousand_templates_without_a_restart() {
    let _alone = HEAVY.write().await;
    let Some(node) = node_access().await else {
        return;
    };
    let tag = node.tags[0].clone();
    let installed = Instant::now();
    let mut release = Release::install(node, "node-limits", &tag, &[]).await;

    // Pod start to Ready, as a poll every 100 ms sees them.
    let mut running: Vec<(String, Duration)> = Vec::new();
    let mut ready: Vec<(String, Duration)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    while ready.len() < 2 {
        for pod in release.pods().await {
            let name = pod.name_any();
            let started = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .any(|s| s.state.as_ref().is_some_and(|s| s.running.is_some()));
            if started && !running.iter().any(|(n, _)| *n == name) {
                running.push((name.clone(), installed.elapsed()));
            }
            if is_ready(&pod) && !ready.iter().any(|(n, _)| *n == name) {
                ready.push((name, installed.elapsed()));
            }
        }
        if Instant::now() > deadline {
            release
                .fail("the two replicas were not Ready within 180 s")
                .await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (name, at) in &ready {
        let started = running
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        println!(
            "{name}: container running {started:.2?} after helm install, Ready {at:.2?} after (start to Ready {:.2?})",
            at.saturating_sub(started)
        );
    }
    release.wait_rollout().await;
    // Idle: caches synced, nothing to reconcile.
    tokio::time::sleep(Duration::from_secs(5)).await;
    memory(&release, "idle").await;

    let created = Instant::now();
    release.create_templates("load", TEMPLATES).await;
    println!("{TEMPLATES} templates created in {:.2?}", created.elapsed());
    release.wait_all_ready(Duration::from_secs(1_200)).await;
    println!(
        "{TEMPLATES} templates Ready {:.2?} after the first was created",
        created.elapsed()
    );
    let peaks = memory(&release, &format!("with {TEMPLATES} templates Ready")).await;
    release.assert_one_deployment_each().await;
    let problems = troubles(&release.pods().await);
    if !problems.is_empty() {
        release.fail(&format!("under load: {problems:?}")).await;
    }
    // The same two pods as at the start: none was replaced.
    let names: Vec<String> = peaks.into_iter().map(|(n, _)| n).collect();
    let originals: Vec<&String> = ready.iter().map(|(n, _)| n).collect();
    if names.len() != 2 || !names.iter().all(|n| originals.contains(&n)) {
        release
            .fail(&format!(
                "the pods are {names:?}, not the original {originals:?}"
            ))
            .await;
    }
    release.uninstall().await;
}
