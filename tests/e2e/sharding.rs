//! Two controllers splitting the templates by label
//! (`--watch-label-selector`), as several shards of one fleet: every
//! template is deployed by exactly one of them, and deleted by the same one.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams};

use crate::harness::{System, app_template, fixture, template};

const TEMPLATES: usize = 24;

fn shard_of(at: usize) -> &'static str {
    if at.is_multiple_of(2) { "a" } else { "b" }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shards_deploy_and_delete_each_template_exactly_once() {
    let mut system = System::start(&[]).await;
    system.stop_controller();
    let mut shards = Vec::new();
    for shard in ["a", "b"] {
        shards.push(system.spawn_controller_as(
            Some(&format!("shard-{shard}")),
            &[
                "--watch-label-selector",
                &format!("radapp.io/shard={shard}"),
            ],
        ));
    }
    let name = |at: usize| format!("t{at:02}");
    for at in 0..TEMPLATES {
        let mut object = template(
            &name(at),
            &fixture("deploymenttemplate-outputresources-1.json").replace(
                "output-resources-",
                &format!("{}-output-resources-", name(at)),
            ),
            "",
        );
        object.metadata.labels = Some(BTreeMap::from([(
            "radapp.io/shard".to_string(),
            shard_of(at).to_string(),
        )]));
        system.create(&object).await;
    }
    // A template in no shard is left alone by both.
    system.create(&app_template("unsharded")).await;
    for at in 0..TEMPLATES {
        system.wait_phase(&name(at), "Ready").await;
    }
    let stats = system.radius().stats();
    let puts = &stats.deployment_puts_by_name;
    for at in 0..TEMPLATES {
        assert_eq!(
            stats.deployment_puts_of_template(&name(at)),
            1,
            "{}: {puts:?}",
            name(at)
        );
    }
    assert!(
        !puts.keys().any(|d| d.starts_with("unsharded")),
        "a template outside every shard was deployed: {puts:?}"
    );
    // Every Event about a template came from its own shard.
    let events: Api<Event> = Api::namespaced(system.client.clone(), &system.namespace);
    let by_template = |events: &[Event]| {
        let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for event in events {
            let regarding = event
                .regarding
                .as_ref()
                .and_then(|r| r.name.clone())
                .unwrap_or_default();
            seen.entry(regarding)
                .or_default()
                .push(event.reporting_instance.clone().unwrap_or_default());
        }
        seen
    };
    let listed = events
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items;
    let seen = by_template(&listed);
    for at in 0..TEMPLATES {
        let reporters = seen.get(&name(at)).cloned().unwrap_or_default();
        assert!(!reporters.is_empty(), "no Event about {}", name(at));
        let expected = format!("shard-{}", shard_of(at));
        assert!(
            reporters.iter().all(|r| *r == expected),
            "{}: events from {reporters:?}, expected only {expected}",
            name(at)
        );
    }
    assert!(!seen.contains_key("unsharded"), "{seen:?}");

    // Deleting: each Radius resource gets one DELETE, from its own shard
    // (the other shard never sees the resources, so never detaches them).
    for at in 0..TEMPLATES {
        system
            .templates()
            .delete(&name(at), &DeleteParams::default())
            .await
            .expect("delete");
    }
    for at in 0..TEMPLATES {
        system.wait_gone(&name(at)).await;
    }
    let stats = system.radius().stats();
    let deletes = stats
        .deletes_by_id
        .iter()
        .filter(|(id, _)| id.contains("-output-resources-"))
        .collect::<Vec<_>>();
    assert_eq!(deletes.len(), TEMPLATES * 3, "{deletes:?}");
    assert!(deletes.iter().all(|(_, count)| **count == 1), "{deletes:?}");
    let left: Vec<String> = system
        .radius()
        .resource_ids()
        .into_iter()
        .filter(|id| id.contains("-output-resources-"))
        .collect();
    assert!(left.is_empty(), "left in Radius: {left:?}");
    for mut shard in shards {
        let _ = shard.kill();
        let _ = shard.wait();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_the_api_server_cannot_read_stops_the_controller_naming_it() {
    let mut system = System::start(&[]).await;
    system.stop_controller();
    // Each flag on its own, so the message can only come from its check.
    for flag in ["--watch-label-selector", "--policy-label-selector"] {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_radwasm"));
        command
            .args(["run", "--kubeconfig"])
            .arg(&system.kubeconfig)
            .args(["--radius-url", &system.radius().base_url()])
            .args(["--metrics-address", "127.0.0.1:0"])
            .args(["--namespace", &system.namespace])
            .args([flag, "radapp.io/shard in (a"])
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut controller = command.spawn().expect("start radwasm run");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = controller.try_wait().expect("wait") {
                break status;
            }
            if std::time::Instant::now() >= deadline {
                let _ = controller.kill();
                panic!("{flag}: still running with a bad selector");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut controller.stderr.take().expect("stderr"), &mut stderr)
            .expect("read stderr");
        assert!(!status.success(), "{flag}: {stderr}");
        let expected = format!("{flag} \"radapp.io/shard in (a\" is not a valid label selector");
        assert!(stderr.contains(&expected), "{flag}: {stderr}");
    }
    system.shutdown().await;
}
