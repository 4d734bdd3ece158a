//! Drift repair and disaster recovery: a Radius that lost what the
//! controller deployed is found out by the drift check (`--drift-resync`)
//! and each template is deployed again, once; with `radapp.io/drift: report`
//! it is only reported.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::ListParams;
use radwasm::crd::DeploymentTemplate;

use crate::harness::{Backend, System, own_app_template};

/// Templates the simulator forgets at once: 50, or 20 on the shared real
/// cluster, whose control plane shares the two cores with every scenario.
fn templates() -> usize {
    match Backend::from_env() {
        Backend::Embedded => 50,
        Backend::Real => 20,
    }
}
/// The drift check's interval in these tests.
const RESYNC: &str = "3s";

fn ready_condition(template: &DeploymentTemplate) -> Option<(String, String)> {
    template
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_radius_that_lost_everything_is_repaired_with_one_deployment_per_template() {
    let system = System::start(&["--drift-resync", RESYNC]).await;
    let templates_count = templates();
    let name = |at: usize| format!("d{at:02}");
    for at in 0..templates_count {
        system.create(&own_app_template(&name(at))).await;
    }
    // One more, that only reports drift.
    let mut reporting = own_app_template("reporting");
    reporting.metadata.annotations = Some(BTreeMap::from([(
        "radapp.io/drift".to_string(),
        "report".to_string(),
    )]));
    system.create(&reporting).await;
    for at in 0..templates_count {
        system.wait_phase(&name(at), "Ready").await;
    }
    system.wait_phase("reporting", "Ready").await;
    let resources_before = system.radius().stats().resources;
    assert_eq!(resources_before, 3 * (templates_count + 1));

    // Disaster: Radius forgets everything (and its request counters).
    system.radius().reset();
    let lost = Instant::now();

    // Within a resync interval plus the deployments, everything the
    // redeploying templates own is back and every one of them is Ready.
    let deadline = lost + Duration::from_secs(90);
    loop {
        let stats = system.radius().stats();
        let listed = system
            .templates()
            .list(&ListParams::default())
            .await
            .expect("list templates");
        let ready = listed
            .items
            .iter()
            .filter(|t| t.metadata.name.as_deref() != Some("reporting"))
            .filter(|t| {
                t.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready")
                    && ready_condition(t).is_some_and(|(status, _)| status == "True")
            })
            .count();
        let resources = system
            .resources()
            .list(&ListParams::default())
            .await
            .expect("list resources");
        let missing = resources
            .items
            .iter()
            .filter(|r| {
                !r.metadata
                    .name
                    .as_deref()
                    .unwrap_or("")
                    .starts_with("reporting")
            })
            .filter(|r| r.status.as_ref().and_then(|s| s.phrase.as_deref()) != Some("Ready"))
            .count();
        if stats.resources == 3 * templates_count && ready == templates_count && missing == 0 {
            println!(
                "repaired {templates_count} templates {:.1} s after Radius lost them (drift resync {RESYNC})",
                lost.elapsed().as_secs_f64()
            );
            break;
        }
        if Instant::now() > deadline {
            let metrics = system.metrics().await;
            let drift: Vec<&str> = metrics
                .lines()
                .filter(|l| l.starts_with("radwasm_drift_checks_total"))
                .collect();
            panic!(
                "not repaired in time: {} of {} resources back in Radius, {ready} of {templates_count} templates Ready, {missing} DeploymentResources not Ready; drift checks: {drift:?}\n--- controller log ---\n{}",
                stats.resources,
                3 * templates_count,
                system.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Exactly one new deployment per redeploying template, none for the
    // one that reports, and nothing deleted. The client took the resource
    // group to exist (docs/radius.md): the PUTs sent into the lost group
    // before it was made again (the first, and any sent alongside it) were
    // refused 404 and each sent once more.
    let stats = system.radius().stats();
    for at in 0..templates_count {
        let puts = stats.deployment_puts_of_template(&name(at));
        assert!(
            (1..=2).contains(&puts),
            "deployments of {} after the loss: {puts} ({:?})",
            name(at),
            stats.deployment_puts_by_name
        );
    }
    assert_eq!(
        stats.deployments_succeeded, templates_count as u64,
        "one deployment made per template: {stats:?}"
    );
    assert_eq!(
        stats.deployment_puts_of_template("reporting"),
        0,
        "the reporting template deployed: {:?}",
        stats.deployment_puts_by_name
    );
    assert_eq!(stats.deletes, 0, "deleted: {:?}", stats.deleted);
    let events = system.events_for(&name(0)).await;
    assert!(
        events.iter().any(|e| e.starts_with("DriftDetected")),
        "{events:?}"
    );

    // The reporting template says so, and its resources say Missing.
    system
        .wait_template("reporting", "drift reported", |t| {
            t.and_then(ready_condition) == Some(("False".to_string(), "DriftDetected".to_string()))
        })
        .await;
    let owned = system.owned("reporting").await;
    assert_eq!(owned.len(), 3);
    for resource in &owned {
        assert_eq!(
            resource.status.as_ref().and_then(|s| s.phrase.as_deref()),
            Some("Missing"),
            "{resource:?}"
        );
        assert!(
            resource
                .status
                .as_ref()
                .and_then(|s| s.missing_since.as_ref())
                .is_some()
        );
    }

    // Settled: two more intervals bring no deployment.
    let puts = system.radius().stats().deployment_puts;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(system.radius().stats().deployment_puts, puts);
    let metrics = system.metrics().await;
    assert!(
        metrics.contains("radwasm_drift_checks_total{result=\"missing\"}"),
        "{metrics}"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_drift_checks_off_a_lost_resource_is_not_noticed() {
    let system = System::start(&["--drift-resync", "0"]).await;
    system.create(&own_app_template("quiet")).await;
    system.wait_phase("quiet", "Ready").await;
    system.radius().reset();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let stats = system.radius().stats();
    assert_eq!(stats.requests, 0, "{stats:?}");
    let template = system.templates().get("quiet").await.expect("template");
    assert_eq!(
        template.status.as_ref().and_then(|s| s.phrase.as_deref()),
        Some("Ready")
    );
    system.shutdown().await;
}
