//! `helm upgrade` to another image and `helm rollback`, while templates
//! keep coming: every rollout finishes (the replicas' readiness lets the
//! rolling update through), every template reaches `Ready`, and Radius sees
//! one deployment per template, whichever replica led when.

use std::time::Duration;

use kube::ResourceExt;

use super::operator::{HEAVY, Release, create_all, node_access};

/// The image the release's pods run now, each once.
async fn images(release: &Release) -> Vec<String> {
    let mut images: Vec<String> = release
        .pods()
        .await
        .iter()
        .filter_map(|pod| {
            pod.spec
                .as_ref()?
                .containers
                .iter()
                .find(|c| c.name == "controller")?
                .image
                .clone()
        })
        .collect();
    images.sort();
    images.dedup();
    images
}

/// Start creating 50 templates `{prefix}-N`, five every half second.
fn start_creating(release: &mut Release, prefix: &str) -> tokio::task::JoinHandle<()> {
    let names: Vec<String> = (0..50).map(|i| format!("{prefix}-{i}")).collect();
    release.created.extend(names.iter().cloned());
    let client = release.client.clone();
    let namespace = release.namespace.clone();
    tokio::spawn(async move {
        for batch in names.chunks(5) {
            create_all(&client, &namespace, batch).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
}

async fn finish_creating(release: &Release, creator: tokio::task::JoinHandle<()>) {
    if let Err(error) = creator.await {
        release
            .fail(&format!("creating the templates: {error}"))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_and_a_rollback_under_load_lose_and_repeat_no_deployment() {
    let _alone = HEAVY.write().await;
    let Some(node) = node_access().await else {
        return;
    };
    let [first, second] = node.tags.clone();
    let mut release = Release::install(node, "node-upgrade", &first, &[]).await;
    release.wait_rollout().await;
    let original = images(&release).await;

    // 100 templates: 50 created a few at a time while the upgrade rolls
    // the replicas over, 50 while the rollback does.
    let name = release.name.clone();
    let creator = start_creating(&mut release, "upgrading");
    let mut upgrade = vec![
        "upgrade".to_string(),
        name.clone(),
        "deploy/chart".to_string(),
    ];
    upgrade.extend(release.values(&second));
    release.helm(&upgrade).await;
    release.wait_rollout().await;
    let upgraded = images(&release).await;
    println!("upgraded from {original:?} to {upgraded:?}");
    if upgraded.len() != 1 || !upgraded[0].ends_with(&format!(":{second}")) {
        release
            .fail(&format!("after the upgrade the pods run {upgraded:?}"))
            .await;
    }
    finish_creating(&release, creator).await;

    let creator = start_creating(&mut release, "rolling-back");
    release
        .helm(&["rollback".to_string(), name.clone(), "1".to_string()])
        .await;
    release.wait_rollout().await;
    let rolled_back = images(&release).await;
    println!("rolled back to {rolled_back:?}");
    if rolled_back != original {
        release
            .fail(&format!(
                "after the rollback the pods run {rolled_back:?}, not {original:?}"
            ))
            .await;
    }
    finish_creating(&release, creator).await;
    let history = release.helm(&["history".to_string(), name]).await;
    println!("{history}");

    release.wait_all_ready(Duration::from_secs(300)).await;
    release.assert_one_deployment_each().await;
    let restarts: Vec<(String, i32)> = release
        .pods()
        .await
        .iter()
        .flat_map(|pod| {
            let name = pod.name_any();
            pod.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(move |s| (name.clone(), s.restart_count))
                .collect::<Vec<_>>()
        })
        .filter(|(_, count)| *count > 0)
        .collect();
    if !restarts.is_empty() {
        release
            .fail(&format!("containers restarted: {restarts:?}"))
            .await;
    }
    release.uninstall().await;
}
