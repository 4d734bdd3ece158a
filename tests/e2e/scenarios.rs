//! The product's main scenarios, each a story: given these objects and this
//! Radius behaviour, the controller ends in this state.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use radwasm::crd::{DeploymentTemplate, ProviderConfig};
use serde_json::json;

use crate::harness::{System, app_template, fixture, id, own_app_template, template, template_in};

const TEMPLATE_FINALIZER: &str = "radapp.io/deployment-template-finalizer";
const RESOURCE_FINALIZER: &str = "radapp.io/deployment-resource-finalizer";

fn env_parameters(name: &str) -> String {
    json!({"name": {"value": name}, "namespace": {"value": "default"}}).to_string()
}

fn radius_ids(system: &System) -> Vec<String> {
    let mut ids: Vec<String> = system
        .radius()
        .resource_ids()
        .into_iter()
        .map(|id| id.to_ascii_lowercase())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_becomes_ready_with_one_owned_resource_per_output() {
    let system = System::start(&[]).await;
    system.create(&app_template("app")).await;
    let ready = system.wait_phase("app", "Ready").await;

    let status = ready.status.clone().expect("status");
    let expected = vec![
        id("environments", "output-resources-environment"),
        id("applications", "output-resources-application"),
        id("containers", "output-resources-container"),
    ];
    let mut outputs = status.output_resources.clone();
    outputs.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(outputs, want);
    assert!(ready.finalizers().iter().any(|f| f == TEMPLATE_FINALIZER));
    assert_eq!(
        status
            .conditions
            .iter()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.as_str()),
        Some("True")
    );
    assert_eq!(
        status.policy.as_ref().map(|p| p.name.as_str()),
        Some("default")
    );

    // One DeploymentResource per output, owned (controller ref), with the
    // finalizer, each Ready.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let owned = system.owned("app").await;
        let ready = owned
            .iter()
            .filter(|r| r.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready"))
            .filter(|r| r.finalizers().iter().any(|f| f == RESOURCE_FINALIZER))
            .count();
        if owned.len() == 3 && ready == 3 {
            let mut ids: Vec<String> = owned.iter().map(|r| r.spec.id.clone()).collect();
            ids.sort();
            assert_eq!(ids, want);
            // Ready, each also names its id in status, as Radius's
            // controller writes it.
            for resource in &owned {
                assert_eq!(
                    resource.status.as_ref().and_then(|s| s.id.as_deref()),
                    Some(resource.spec.id.as_str())
                );
            }
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "resources not ready: {owned:#?}\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(system.radius().stats().deployment_puts, 1);
    // Progress is reported through Kubernetes Events.
    for reason in ["DeploymentStarted", "DeploymentSucceeded"] {
        system.wait_event("app", reason).await;
    }
    // The real API server names the controller's field manager `radwasm`
    // (from its User-Agent): the finalizer and the status are its own.
    // (The embedded one keeps no managedFields.)
    if crate::harness::Backend::from_env() == crate::harness::Backend::Real {
        let template = system.templates().get("app").await.expect("get app");
        let managers: Vec<(String, Option<String>, String)> = template
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|entry| {
                (
                    entry.manager.clone().unwrap_or_default(),
                    entry.subresource.clone(),
                    serde_json::to_string(&entry.fields_v1).unwrap_or_default(),
                )
            })
            .collect();
        let owns = |subresource: Option<&str>, field: &str| {
            managers.iter().any(|(manager, sub, fields)| {
                manager == "radwasm" && sub.as_deref() == subresource && fields.contains(field)
            })
        };
        assert!(
            owns(None, "f:finalizers") && owns(Some("status"), "f:status"),
            "managedFields name radwasm as the manager of the finalizer and the status: {managers:#?}"
        );
    }
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_parameters_redeploy_once_and_the_diff_is_cleaned_up() {
    let system = System::start(&[]).await;
    system
        .create(&template(
            "env",
            &fixture("env.json"),
            &env_parameters("blue"),
        ))
        .await;
    system.wait_phase("env", "Ready").await;
    let before = system.owned("env").await;
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].spec.id, id("environments", "blue-env"));
    let blue_object = before[0].metadata.name.clone().expect("name");

    // A slow Radius delete keeps the removed resource draining for a while.
    system
        .radius()
        .faults()
        .set_delete_duration(Duration::from_secs(1));
    let phases = system.record_phases("env");
    system
        .templates()
        .patch(
            "env",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": env_parameters("green")}})),
        )
        .await
        .expect("patch parameters");
    system
        .wait_template("env", "Ready with only green owned", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.phrase.as_deref())
                == Some("Ready")
                && t.is_some_and(|t| {
                    t.metadata.generation == t.status.as_ref().and_then(|s| s.observed_generation)
                })
                && phases.phases().iter().any(|p| p == "ReadyPendingCleanup")
        })
        .await;
    let ready = system.templates().get("env").await.expect("template");
    assert_eq!(
        ready.status.expect("status").output_resources,
        vec![id("environments", "green-env")]
    );
    // The diff: green's DeploymentResource was added, blue's removed (its
    // deletion deleted the Radius resource), and the template reported
    // ReadyPendingCleanup while blue drained, then Ready.
    let owned = system.owned("env").await;
    assert_eq!(owned.len(), 1, "{owned:#?}");
    assert_eq!(owned[0].spec.id, id("environments", "green-env"));
    assert!(
        system
            .resources()
            .get_opt(&blue_object)
            .await
            .expect("get")
            .is_none()
    );
    assert_eq!(
        radius_ids(&system),
        vec![id("environments", "green-env").to_ascii_lowercase()]
    );
    let seen = phases.phases();
    let cleanup = seen
        .iter()
        .position(|p| p == "ReadyPendingCleanup")
        .expect("ReadyPendingCleanup observed");
    assert_eq!(
        seen.last().map(String::as_str),
        Some("Ready"),
        "phases after the change: {seen:?}"
    );
    assert!(
        !seen[..cleanup].iter().any(|p| p == "Failed"),
        "phases after the change: {seen:?}"
    );
    assert_eq!(
        system.radius().stats().deployment_puts,
        2,
        "exactly one new deployment"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_spec_after_a_restart_deploys_nothing() {
    let mut system = System::start(&[]).await;
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    system.wait_phase("app", "Ready").await;
    let status = system.stop_controller();
    assert!(
        status.success(),
        "SIGTERM must stop the controller cleanly: {status:?}\n{}",
        system.logs()
    );

    // Apply the same spec again (a no-op update) and start a new controller.
    system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await
        .expect("touch");
    system.start_controller();
    tokio::time::sleep(Duration::from_secs(2)).await;
    system.wait_phase("app", "Ready").await;
    assert_eq!(
        system.radius().stats().deployment_puts,
        1,
        "no new deployment\n{}",
        system.logs()
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_deployment_is_reported_and_a_fixed_spec_recovers() {
    let system = System::start(&[]).await;
    system.radius().faults().fail_next_deployments(
        1,
        "DeploymentFailed",
        "the container image could not be pulled",
    );
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    let failed = system.wait_phase("app", "Failed").await;
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains("DeploymentFailed") && message.contains("could not be pulled"),
        "{message}"
    );
    let events = system.wait_event("app", "DeploymentFailed").await;
    assert!(
        events.iter().any(|e| e.contains("could not be pulled")),
        "the Radius error is in the event: {events:?}"
    );

    // Fixing the spec (any change: a new generation) deploys again.
    system
        .templates()
        .patch(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"parameters": "{}"}})),
        )
        .await
        .expect("fix");
    system.wait_phase("app", "Ready").await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_template_deletes_radius_resources_in_a_safe_order() {
    let system = System::start(&[]).await;
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    assert_eq!(radius_ids(&system).len(), 3);

    // Someone removes the container from Radius behind the controller's back:
    // its DELETE will answer 404, which counts as done.
    let container = id("containers", "output-resources-container");
    system.radius().faults().set_delete_duration(Duration::ZERO);
    let response = reqwest::Client::new()
        .delete(format!(
            "{}{container}?api-version=2023-10-01-preview",
            system.radius().base_url()
        ))
        .send()
        .await
        .expect("out-of-band delete");
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(radius_ids(&system).len(), 2);
    system
        .radius()
        .faults()
        .set_delete_duration(Duration::from_millis(100));
    let deletes_before = system.radius().stats().deleted.len();
    let template_writes = |metrics: &str| {
        crate::harness::metric_sum(
            metrics,
            "radwasm_kube_requests_total{verb=\"patch\",resource=\"deploymenttemplates\"",
        ) + crate::harness::metric_sum(
            metrics,
            "radwasm_kube_requests_total{verb=\"get\",resource=\"deploymenttemplates\"",
        )
    };
    let writes_before = template_writes(&system.metrics().await);

    system
        .templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("app").await;
    assert!(
        radius_ids(&system).is_empty(),
        "left in Radius: {:?}",
        radius_ids(&system)
    );
    // Three waves, and the final event counts all three resources; the
    // count is kept in memory (nothing is kept in Radius), so the only
    // template write besides status is the finalizer's removal, and no
    // template is read one by one.
    let events = system.wait_event("app", "Deleted").await;
    assert!(
        events
            .iter()
            .any(|e| e == "Deleted all resources deleted (3 resources)"),
        "{events:?}"
    );
    assert_eq!(
        template_writes(&system.metrics().await) - writes_before,
        1.0,
        "template patches and gets while deleting"
    );
    assert!(system.owned("app").await.is_empty());
    let stats = system.radius().stats();
    assert!(
        stats.deletes_for(&container) >= 2,
        "the controller asked Radius to delete the gone container too (and got 404)"
    );
    // The controller's deletes, in the order Radius received them.
    let order: Vec<String> = stats.deleted[deletes_before..]
        .iter()
        .map(|id| id.to_ascii_lowercase())
        .collect();
    let position = |kind: &str| {
        order
            .iter()
            .position(|id| id.contains(kind))
            .unwrap_or(usize::MAX)
    };
    assert!(
        position("/containers/") < position("/applications/"),
        "{order:?}"
    );
    assert!(
        position("/applications/") < position("/environments/"),
        "{order:?}"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_controller_resumes_the_same_operation() {
    // A slow deployment, so the kill lands while it is in flight.
    let mut system = System::start_with(&[], Duration::from_secs(3)).await;
    system
        .create(&template(
            "app",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    // The deployment is recorded in status before it is sent (write-ahead):
    // wait until Radius has it, and status too.
    system
        .wait_template("app", "an operation recorded in status", |t| {
            t.and_then(|t| t.status.as_ref())
                .is_some_and(|s| s.operation.is_some())
        })
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while system.radius().stats().deployment_puts == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no deployment reached Radius"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    system.kill_controller();
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.start_controller();
    system.wait_phase("app", "Ready").await;
    assert_eq!(
        system.radius().stats().deployment_puts,
        1,
        "exactly one deployment\n{}",
        system.logs()
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_fails_the_template_naming_the_field_without_calling_radius() {
    let system = System::start(&[]).await;
    let good_template = fixture("deploymenttemplate-withresources.json");
    let with_scope = |name: &str, scope: &str| {
        let mut object = template(name, &good_template, "");
        object.spec.provider_config = ProviderConfig::radius(scope).into();
        object
    };
    // Values of a shape neither manifest shape has (the API server keeps
    // them: the schema of both fields is open).
    let with_spec = |name: &str, parameters: serde_json::Value, provider: serde_json::Value| {
        let mut object = template(name, &good_template, "");
        if !parameters.is_null() {
            object.spec.parameters = parameters;
        }
        if !provider.is_null() {
            object.spec.provider_config = provider;
        }
        object
    };
    let mut no_provider = template("no-provider", &good_template, "");
    no_provider.spec.provider_config = serde_json::Value::Null;
    let cases = [
        (template("broken", "{ not json", ""), "spec.template"),
        (
            template("params", &fixture("env.json"), r#"{"name": "blue"}"#),
            "spec.parameters",
        ),
        (
            template("params-array", &fixture("env.json"), r#"["blue"]"#),
            "spec.parameters",
        ),
        (no_provider, "spec.providerConfig"),
        (
            with_spec("params-list", json!(["blue"]), json!(null)),
            "spec.parameters",
        ),
        (
            with_spec("params-number", json!(42), json!(null)),
            "spec.parameters",
        ),
        (
            with_spec("provider-number", json!(null), json!(42)),
            "spec.providerConfig",
        ),
        (
            with_spec("provider-text", json!(null), json!("{ not json")),
            "spec.providerConfig",
        ),
        (with_scope("no-scope", ""), "spec.providerConfig"),
        (
            with_scope("bad-scope", "/planes/radius/local/groups/default"),
            "spec.providerConfig",
        ),
        (
            with_scope("outside", "/subscriptions/0000/resourceGroups/prod"),
            "spec.providerConfig",
        ),
    ];
    for (object, _) in &cases {
        system.create(object).await;
    }
    for (object, field) in &cases {
        let name = object.metadata.name.clone().expect("name");
        let failed = system.wait_phase(&name, "Failed").await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        assert!(message.contains(field), "{name}: {message}");
        system.wait_event(&name, "InvalidSpec").await;
    }
    assert_eq!(
        system.radius().stats().requests,
        0,
        "no Radius call for bad input"
    );

    // The controller keeps serving: a good template next to them deploys.
    system.create(&template("good", &good_template, "")).await;
    system.wait_phase("good", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 1);
    for (object, _) in &cases {
        let name = object.metadata.name.clone().expect("name");
        let still = system.templates().get(&name).await.expect("get");
        assert_eq!(
            still.status.and_then(|s| s.phrase).as_deref(),
            Some("Failed"),
            "{name}"
        );
    }
    system.shutdown().await;
}

async fn annotated(
    system: &System,
    name: &str,
    annotations: &[(&str, &str)],
) -> DeploymentTemplate {
    let mut object = own_app_template(name);
    object.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    system.create(&object).await;
    object
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_policy_skip_never_touches_radius() {
    let system = System::start(&[]).await;
    annotated(
        &system,
        "observed",
        &[("radapp.io/reconcile-policy", "skip")],
    )
    .await;
    system
        .wait_template("observed", "skip reported", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.contains("reconcile-policy is skip"))
        })
        .await;
    system
        .templates()
        .delete("observed", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("observed").await;
    assert_eq!(system.radius().stats().deployment_puts, 0);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_on_delete_leaves_radius_resources_in_place() {
    let system = System::start(&[]).await;
    annotated(
        &system,
        "kept",
        &[("radapp.io/reconcile-policy", "detach-on-delete")],
    )
    .await;
    system.wait_phase("kept", "Ready").await;
    system
        .templates()
        .delete("kept", &DeleteParams::default())
        .await
        .expect("delete");
    system.wait_gone("kept").await;
    assert_eq!(radius_ids(&system).len(), 3, "Radius resources must stay");
    assert!(system.owned("kept").await.is_empty());
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_pauses_until_removed_and_depends_on_waits_for_ready() {
    let system = System::start(&[]).await;
    annotated(&system, "base", &[("radapp.io/hold", "true")]).await;
    annotated(&system, "dependent", &[("radapp.io/depends-on", "base")]).await;
    system.wait_phase("base", "Held").await;
    system
        .wait_template("dependent", "waiting for base", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                .is_some_and(|m| m.contains("waiting for dependencies: base"))
        })
        .await;
    assert_eq!(system.radius().stats().deployment_puts, 0);

    system
        .templates()
        .patch(
            "base",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"radapp.io/hold": null}}})),
        )
        .await
        .expect("remove hold");
    system.wait_phase("base", "Ready").await;
    system.wait_phase("dependent", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 2);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_file_replaced_under_the_running_controller_takes_over() {
    // The policy file as a mounted ConfigMap would be: replaced whole.
    let dir = tempfile::tempdir().expect("temp dir");
    let policy_file = dir.path().join("policy.wasm");
    let guest = |name: &str| format!("{}/{name}.wasm", env!("RADWASM_GUEST_DIR"));
    let replace = |bytes: &[u8]| {
        let staged = dir.path().join("staged.wasm");
        std::fs::write(&staged, bytes).expect("stage policy");
        std::fs::rename(&staged, &policy_file).expect("replace policy");
    };
    replace(&std::fs::read(guest("default-policy")).expect("default guest"));
    let policy_arg = policy_file.display().to_string();
    let mut system =
        System::start(&["--policy", &policy_arg, "--policy-reload-interval", "200ms"]).await;

    // Under the default policy an untagged image ("nginx") deploys.
    let fixture_text = fixture("deploymenttemplate-outputresources-1.json");
    system.create(&template("before", &fixture_text, "")).await;
    let ready = system.wait_phase("before", "Ready").await;
    assert_eq!(
        ready.status.and_then(|s| s.policy).map(|p| p.name),
        Some("default".to_string())
    );

    // Same process, new file: the guardrail policy takes over.
    replace(&std::fs::read(guest("image-tag-guardrail")).expect("guardrail guest"));
    system.wait_for_log("policy replaced at run time").await;
    system.create(&template("after", &fixture_text, "")).await;
    let failed = system.wait_phase("after", "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );

    // A broken replacement is refused; the guardrail stays in charge.
    replace(b"not a wasm component");
    system
        .wait_for_log("new policy refused; keeping the current one")
        .await;
    system.create(&template("later", &fixture_text, "")).await;
    let failed = system.wait_phase("later", "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );
    assert!(system.controller_running(), "{}", system.logs());
    assert_eq!(
        system.radius().stats().deployment_puts,
        1,
        "only \"before\" deployed"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_leader_election_one_replica_reconciles_and_a_standby_takes_over() {
    let mut system =
        System::start(&["--leader-elect", "--leader-election-lease-duration", "2s"]).await;
    system.wait_for_log("became the leader").await;
    let mut standby = system.spawn_controller();
    system.wait_for_log("waiting for the leader lease").await;

    system.create(&app_template("first")).await;
    system.wait_phase("first", "Ready").await;

    // The leader dies without releasing the Lease; once it expires (2 s)
    // the standby leads and reconciles what comes next.
    system.kill_controller();
    let killed = std::time::Instant::now();
    system
        .create(&template(
            "second",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    while system.all_logs().matches("became the leader").count() < 2 {
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "the standby never took over:\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The standby judges the Lease expired a lease duration (2 s) after it
    // last saw it renewed, and looks every third of one: it leads within
    // the lease duration plus one look (and two seconds for two processes
    // sharing two cores with the rest of the suite).
    let failover = killed.elapsed();
    eprintln!("failover after the leader was killed: {failover:?}");
    assert!(
        failover < Duration::from_millis(2_000 + 667 + 2_000),
        "the standby took over only after {failover:?}"
    );
    system.wait_phase("second", "Ready").await;
    let lease = system.leader_lease().await;
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity),
        Some(format!("radwasm-{}", standby.id()))
    );
    assert_eq!(system.all_logs().matches("became the leader").count(), 2);
    assert_eq!(
        system.radius().stats().deployment_puts,
        2,
        "one per template"
    );
    let _ = standby.kill();
    let _ = standby.wait();
    system.shutdown().await;
}

/// Wait until `/readyz` of the controller at `address` answers 200 (and
/// says so), within 30 s.
async fn ready_within(system: &System, address: &str) {
    crate::realkube::eventually(
        &format!("/readyz of the controller at {address} answers 200"),
        Duration::from_secs(30),
        || async {
            let (code, body) = System::probe(address, "/readyz").await;
            Ok((code == 200).then_some(body))
        },
    )
    .await;
    let (code, body) = System::probe(address, "/readyz").await;
    assert_eq!((code, body.as_str()), (200, "ready"), "{}", system.logs());
}

/// `/readyz` follows the first sync of the controllers' watch caches: 200
/// once both kinds are listed, with or without leader election, and on a
/// standby that does not lead (it keeps its caches warm to take over).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_ready_once_the_caches_have_synced_with_or_without_leader_election() {
    let system = System::start(&[]).await;
    system.create(&app_template("app")).await;
    system.wait_for_log("metrics and probes").await;
    let address = system.probe_addresses().remove(0);
    ready_within(&system, &address).await;
    assert_eq!(system.all_logs().matches("caches synced").count(), 1);
    system.wait_phase("app", "Ready").await;
    system.shutdown().await;

    let mut system =
        System::start(&["--leader-elect", "--leader-election-lease-duration", "2s"]).await;
    system.wait_for_log("became the leader").await;
    let mut standby = system.spawn_controller();
    system.wait_for_log("waiting for the leader lease").await;
    let addresses = crate::realkube::eventually(
        "both controllers serve their probes",
        Duration::from_secs(30),
        || async { Ok(Some(system.probe_addresses()).filter(|a| a.len() == 2)) },
    )
    .await;
    for address in &addresses {
        ready_within(&system, address).await;
    }
    // Each became ready through its own caches, the standby without leading.
    assert_eq!(
        system.all_logs().matches("caches synced").count(),
        2,
        "{}",
        system.logs()
    );
    assert_eq!(system.all_logs().matches("became the leader").count(), 1);
    // With a standby watching, a template still deploys exactly once.
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 1);
    assert!(system.controller_running());
    let _ = standby.kill();
    let _ = standby.wait();
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guardrail_policy_changes_the_outcome_with_the_same_binary() {
    let guardrail = format!("{}/image-tag-guardrail.wasm", env!("RADWASM_GUEST_DIR"));
    let system = System::start(&["--policy", &guardrail]).await;
    // outputresources-1 runs image "nginx" (no tag): refused.
    system.create(&app_template("unpinned")).await;
    let failed = system.wait_phase("unpinned", "Failed").await;
    let status = failed.status.expect("status");
    assert!(status.message.unwrap_or_default().contains("nginx"));
    assert_eq!(
        status.policy.map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );
    // A template without containers deploys as with the default policy.
    system
        .create(&template(
            "env",
            &fixture("deploymenttemplate-withresources.json"),
            "",
        ))
        .await;
    system.wait_phase("env", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_for_one_namespace_leaves_the_others_alone() {
    let system = System::start(&["--namespace", "team-a"]).await;
    system.create_namespace("team-a").await;
    system.create_namespace("team-b").await;
    let body = fixture("deploymenttemplate-withresources.json");
    // team-b's template first: by the time team-a's is Ready, the controller
    // would long since have touched team-b's had it been watching it.
    system
        .templates_in("team-b")
        .create(
            &PostParams::default(),
            &template_in("team-b", "other", &body, ""),
        )
        .await
        .expect("create in team-b");
    system
        .templates_in("team-a")
        .create(
            &PostParams::default(),
            &template_in("team-a", "mine", &body, ""),
        )
        .await
        .expect("create in team-a");

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mine = system
            .templates_in("team-a")
            .get("mine")
            .await
            .expect("get");
        if mine.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "team-a/mine not Ready: {:?}\n{}",
            mine.status,
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let other = system
        .templates_in("team-b")
        .get("other")
        .await
        .expect("get");
    assert!(other.status.is_none(), "{:?}", other.status);
    assert!(other.finalizers().is_empty(), "{:?}", other.finalizers());
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misbehaving_policy_fails_only_the_objects_it_misjudged() {
    let misbehaving = format!("{}/misbehaving-policy.wasm", env!("RADWASM_GUEST_DIR"));
    let mut system = System::start(&["--policy", &misbehaving]).await;
    annotated(&system, "spins", &[("radwasm.test/misbehave", "loop")]).await;
    annotated(&system, "traps", &[("radwasm.test/misbehave", "trap")]).await;
    for (name, said) in [("spins", "used its whole CPU budget"), ("traps", "trapped")] {
        let failed = system.wait_phase(name, "Failed").await;
        let status = failed.status.expect("status");
        let message = status.message.unwrap_or_default();
        // Said once, naming the policy: not "policy … could not decide:
        // policy … trapped".
        assert!(
            message.starts_with("policy misbehaving@0.0.0 ")
                && message.contains(said)
                && message.matches("policy misbehaving").count() == 1,
            "{name}: {message}"
        );
        assert_eq!(
            status.policy.map(|p| p.name),
            Some("misbehaving".to_string())
        );
        system.wait_event(name, "PolicyFailed").await;
    }
    // The host survived both, and still decides for other objects.
    assert!(system.controller_running(), "{}", system.logs());
    annotated(&system, "counts", &[("radwasm.test/misbehave", "count")]).await;
    system
        .wait_template("counts", "a decision from a fresh instance", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                == Some("decisions in this instance: 1")
        })
        .await;
    assert_eq!(system.radius().stats().requests, 0);
    let metrics = system.metrics().await;
    for line in [
        r#"radwasm_policy_decision_failures_total{kind="DeploymentTemplate",reason="OutOfFuel"}"#,
        r#"radwasm_policy_decision_failures_total{kind="DeploymentTemplate",reason="Trap"}"#,
        r#"radwasm_policy_decisions_total{kind="DeploymentTemplate",policy="misbehaving",version="0.0.0",outcome="error"}"#,
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_left_running_before_its_status_write_is_followed_not_failed() {
    // As if a controller PUT the deployment and died before recording it:
    // Radius is still running this spec's deployment when the template is
    // reconciled, and answers the new PUT 409 DeploymentActive. Long
    // enough that the controller's PUT surely lands while it still runs.
    let system = System::start_with(&[], Duration::from_secs(10)).await;
    let object = template("app", &fixture("deploymenttemplate-withresources.json"), "");
    let spec = radwasm::controller::observe::spec_texts(&object);
    let hash = radwasm::controller::observe::spec_hash(&spec);
    let name = format!("app-{}", &hash[..12]);
    system.radius().ensure_resource_group("default");
    let template: serde_json::Value = serde_json::from_str(&spec.template).expect("template");
    let provider: serde_json::Value =
        serde_json::from_str(&spec.provider_config).expect("provider config");
    let response = reqwest::Client::new()
        .put(format!(
            "{}{}/providers/Microsoft.Resources/deployments/{name}?api-version=2020-10-01",
            system.radius().base_url(),
            crate::harness::SCOPE
        ))
        .json(&json!({"properties": {
            "template": template,
            "parameters": {},
            "providerConfig": provider,
            "mode": "Incremental",
        }}))
        .send()
        .await
        .expect("PUT the deployment");
    assert!(response.status().is_success(), "{}", response.status());

    let phases = system.record_phases("app");
    system.create(&object).await;
    system.wait_phase("app", "Ready").await;
    assert!(
        !phases.phases().iter().any(|p| p == "Failed"),
        "{:?}\n{}",
        phases.phases(),
        system.logs()
    );
    let stats = system.radius().stats();
    assert_eq!(stats.deployments_succeeded, 1, "one deployment ran");
    assert_eq!(
        stats.deployment_puts_for(&name),
        stats.deployment_puts,
        "every PUT was of this spec's deployment"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_plan_is_rejected_before_any_effect_and_fails_only_its_template() {
    // The misbehaving guest answers `oversized-plan` with 1,100 actions,
    // past the guard rails' bound of 1,024.
    let misbehaving = format!("{}/misbehaving-policy.wasm", env!("RADWASM_GUEST_DIR"));
    let system = System::start(&["--policy", &misbehaving]).await;
    annotated(
        &system,
        "huge",
        &[("radwasm.test/misbehave", "oversized-plan")],
    )
    .await;
    let failed = system.wait_phase("huge", "Failed").await;
    let message = failed
        .status
        .as_ref()
        .and_then(|s| s.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("returned a rejected plan: plan rejected at action 1024")
            && message.contains("at most 1024 actions"),
        "{message}"
    );
    system.wait_event("huge", "PlanRejected").await;
    // Nothing of the rejected plan was carried out: no finalizer was added.
    assert!(
        failed.metadata.finalizers.unwrap_or_default().is_empty(),
        "the plan's AddFinalizer actions were not applied"
    );
    // Other objects are still decided for.
    annotated(&system, "counts", &[("radwasm.test/misbehave", "count")]).await;
    system
        .wait_template("counts", "a decision for another object", |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.message.as_deref())
                == Some("decisions in this instance: 1")
        })
        .await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_with_more_outputs_than_one_plan_holds_converges_to_ready() {
    // 1,100 output resources: more DeploymentResources than one plan may
    // create (the guard rails allow 1,024 actions), so the default policy
    // creates them over several decisions.
    let loop_of = |name: &str, prefix: &str| {
        json!({
            "copy": {"name": name, "count": 550},
            "import": "Radius",
            "type": "Applications.Core/containers@2023-10-01-preview",
            "properties": {
                "name": format!("[format('{prefix}-{{0}}', copyIndex())]"),
                "properties": {"container": {"image": "nginx:1.27"}}
            }
        })
    };
    let huge = json!({
        "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
        "languageVersion": "2.1-experimental",
        "contentVersion": "1.0.0.0",
        "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
        "resources": {"first": loop_of("first", "a"), "second": loop_of("second", "b")}
    });
    let system = System::start(&[]).await;
    system
        .create(&template("huge", &huge.to_string(), ""))
        .await;
    system.wait_phase("huge", "Ready").await;
    assert_eq!(system.owned("huge").await.len(), 1_100);
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_radius_url_the_controller_uses_the_aggregated_path_with_cluster_credentials() {
    if crate::harness::embedded_only("the aggregation proxy is the harness's stand-in") {
        return;
    }
    let system = System::start_aggregated().await;
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    assert_eq!(system.radius().stats().deployment_puts, 1);
    let authorizations = system.radius_authorizations();
    assert!(
        !authorizations.is_empty(),
        "no Radius request went through the API server path"
    );
    assert!(
        authorizations.iter().all(|a| a == "Bearer radwasm-dev"),
        "Radius requests carry the kubeconfig's credentials: {authorizations:?}"
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_named_at_the_length_limit_deploys_and_its_events_are_recorded() {
    // 253 characters, the most a Kubernetes object name may have: the Event
    // about it cannot be named `{object}.{suffix}` as kube's recorder names
    // events, and must still be recorded.
    let system = System::start(&[]).await;
    let name = format!("{}-end", "a".repeat(249));
    assert_eq!(name.len(), 253);
    system.create(&app_template(&name)).await;
    system.wait_phase(&name, "Ready").await;
    let events = system.wait_event(&name, "DeploymentSucceeded").await;
    assert!(!events.is_empty());
    assert_eq!(system.owned(&name).await.len(), 3);
    assert!(
        !system.all_logs().contains("could not record an event"),
        "{}",
        system.logs()
    );
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_templates_deploying_the_same_radius_resource_do_not_share_its_tracker() {
    // Both deploy the same three resources (the same ids). The second may
    // not take over the first one's DeploymentResources: it fails naming
    // the conflict. Deleting it does not adopt them either (it would delete
    // them behind the first one's back): it stays, Failed, until the
    // conflict is gone.
    let system = System::start(&[]).await;
    system.ready_app().await;
    system.create(&app_template("copy")).await;
    let failed = system.wait_phase("copy", "Failed").await;
    let status = failed.status.expect("status");
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("already tracked by DeploymentResource")
            && message.contains("DeploymentTemplate app controls"),
        "{message}"
    );
    let ready = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("Ready condition");
    assert_eq!(ready.reason, "ResourceConflict");
    assert_eq!(system.owned("app").await.len(), 3);
    assert!(system.owned("copy").await.is_empty());
    system.wait_event("copy", "ResourceConflict").await;

    system
        .templates()
        .delete("copy", &DeleteParams::default())
        .await
        .expect("delete copy");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let copy = system.templates().get("copy").await.expect("copy stays");
    assert_eq!(
        copy.status.and_then(|s| s.phrase),
        Some("Failed".to_string())
    );
    assert_eq!(
        radius_ids(&system).len(),
        3,
        "the first template's resources stay"
    );
    assert_eq!(system.radius().stats().deletes, 0);
    assert_eq!(system.owned("app").await.len(), 3);
    let app = system.wait_phase("app", "Ready").await;
    assert_eq!(app.status.expect("status").output_resources.len(), 3);
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_held_to_a_request_rate_converges_and_a_bad_rate_is_refused() {
    // Held to 10 requests a second (its watches' first requests included),
    // the controller still deploys and tracks, only at that pace.
    let system = System::start(&["--kube-api-qps", "10", "--kube-api-burst", "2"]).await;
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while system.owned("app").await.len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "resources: {:?}\n{}",
            system.owned("app").await,
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(system.radius().stats().deployment_puts, 1);
    system.shutdown().await;

    // A rate that is not one stops the controller before it starts, naming
    // the flag.
    for bad in ["fast", "-1", "inf"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_radwasm"))
            .args(["run".to_string(), format!("--kube-api-qps={bad}")])
            .output()
            .expect("run radwasm");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("--kube-api-qps") && stderr.contains("not a request rate"),
            "{bad}: {stderr}"
        );
    }
}
