//! `ReconcilePolicy` objects, end to end through the real binary: which
//! policy decides for which template (annotation, selectors, priority), what
//! happens when the named one is missing or refused, hot swap from a
//! ConfigMap, fixture cases and digests as gates, and shadow policies that
//! only compare. Every policy a scenario creates selects only its own
//! namespace (`kubernetes.io/metadata.name`), since policies are
//! cluster-scoped and the real cluster is shared by scenarios.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use radwasm::crd::DeploymentTemplate;
use radwasm::reconcile_policy::ReconcilePolicy;
use serde_json::{Value, json};

use crate::harness::{System, app_template, own_app_template};
use crate::realkube::eventually;

/// A ReconcilePolicy deciding for the scenario's namespace with the default
/// policy's component from a ConfigMap, once it is Ready: what the
/// controller needs to read policies and write their status.
pub async fn install_configmap_policy(system: &System) -> String {
    let name = create_configmap_policy(system).await;
    wait_policy(system, &name, "True", "Loaded").await;
    name
}

/// [`install_configmap_policy`] without waiting for it to be Ready.
pub async fn create_configmap_policy(system: &System) -> String {
    put_module(system, "policy-module", guest("default-policy")).await;
    create_policy(
        system,
        "from-configmap",
        json!({"module": module_from(system, "policy-module")}),
    )
    .await
}

/// Delete the ReconcilePolicies a scenario created (they are cluster-scoped).
pub fn guest(name: &str) -> Vec<u8> {
    let path = format!("{}/{name}.wasm", env!("RADWASM_GUEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

pub(crate) fn policies(client: &Client) -> Api<ReconcilePolicy> {
    Api::all(client.clone())
}

/// The label naming the scenario (its namespace) a ReconcilePolicy belongs
/// to; on the real API server each scenario's controller loads only its own
/// (`--policy-label-selector`, set by the harness).
pub(crate) const SYSTEM_LABEL: &str = "e2e.radwasm.io/system";

/// A policy named `{namespace}-{suffix}` for this scenario's namespace only,
/// with the rest of its spec from `spec` (merged over the namespace selector).
pub(crate) async fn create_policy(system: &System, suffix: &str, spec: Value) -> String {
    let name = format!("{}-{suffix}", system.namespace);
    let mut full = json!({
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": system.namespace}}
    });
    if let (Some(full), Some(spec)) = (full.as_object_mut(), spec.as_object()) {
        for (key, value) in spec {
            full.insert(key.clone(), value.clone());
        }
    }
    let object: ReconcilePolicy = serde_json::from_value(json!({
        "apiVersion": "radwasm.io/v1alpha1",
        "kind": "ReconcilePolicy",
        "metadata": {"name": name, "labels": {SYSTEM_LABEL: system.namespace}},
        "spec": full,
    }))
    .expect("a ReconcilePolicy");
    policies(&system.client)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("create ReconcilePolicy {name}: {e}"));
    name
}

/// Delete the ReconcilePolicies a scenario created (they are cluster-scoped).
pub async fn delete_policies(system: &System, names: &[&str]) {
    for name in names {
        let _ = policies(&system.client)
            .delete(name, &DeleteParams::default())
            .await;
    }
}

/// The ConfigMaps the controller reads policies from (names are prefixed
/// with the scenario's namespace: the real cluster is shared).
fn config_maps(system: &System) -> Api<ConfigMap> {
    Api::namespaced(system.client.clone(), system.policy_namespace())
}

fn config_map_name(system: &System, name: &str) -> String {
    format!("{}-{name}", system.namespace)
}

/// Create or replace ConfigMap `name` holding `bytes` under `policy.wasm`.
pub(crate) async fn put_module(system: &System, name: &str, bytes: Vec<u8>) {
    let name = &config_map_name(system, name);
    let object = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        binary_data: Some(BTreeMap::from([(
            "policy.wasm".to_string(),
            ByteString(bytes),
        )])),
        ..Default::default()
    };
    let api = config_maps(system);
    match api.get_opt(name).await.expect("get ConfigMap") {
        Some(mut current) => {
            current.binary_data = object.binary_data;
            api.replace(name, &PostParams::default(), &current)
                .await
                .unwrap_or_else(|e| panic!("replace ConfigMap {name}: {e}"));
        }
        None => {
            api.create(&PostParams::default(), &object)
                .await
                .unwrap_or_else(|e| panic!("create ConfigMap {name}: {e}"));
        }
    }
}

pub(crate) fn module_from(system: &System, config_map: &str) -> Value {
    json!({"configMap": {"namespace": system.policy_namespace(),
        "name": config_map_name(system, config_map), "key": "policy.wasm"}})
}

/// Wait until the policy's `Ready` condition has `status` and `reason`; for
/// a loaded one, also until this scenario's controller has loaded it (on
/// the shared real cluster another scenario's controller may write the
/// status first).
pub(crate) async fn wait_policy(
    system: &System,
    name: &str,
    status: &str,
    reason: &str,
) -> ReconcilePolicy {
    let policy = eventually(
        &format!("ReconcilePolicy {name} Ready={status} ({reason})"),
        Duration::from_secs(60),
        || async {
            let policy = policies(&system.client).get(name).await?;
            let ready = policy
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                .is_some_and(|c| c.status == status && c.reason == reason);
            Ok(ready.then_some(policy))
        },
    )
    .await;
    if reason == "Loaded" {
        system
            .wait_for_log(&format!(
                "policy version activated reconcile_policy={name} "
            ))
            .await;
    }
    policy
}

pub(crate) fn labelled(name: &str, labels: &[(&str, &str)]) -> DeploymentTemplate {
    let mut template = own_app_template(name);
    template.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    template
}

fn annotated(name: &str, policy: &str) -> DeploymentTemplate {
    let mut template = own_app_template(name);
    template.metadata.annotations = Some(BTreeMap::from([(
        "radapp.io/policy".to_string(),
        policy.to_string(),
    )]));
    template
}

/// A label value unique to the scenario (its namespace's numbered prefix:
/// label values are at most 63 characters).
pub(crate) fn short(system: &System) -> String {
    system
        .namespace
        .chars()
        .take(24)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

pub(crate) fn decided_by(template: &DeploymentTemplate) -> Option<String> {
    template
        .status
        .as_ref()?
        .policy
        .as_ref()?
        .reconcile_policy
        .clone()
}

/// Wait until the template's status names `policy` (`None`: `--policy`)
/// as the one that decided.
pub(crate) async fn wait_decided_by(
    system: &System,
    name: &str,
    policy: Option<&str>,
) -> DeploymentTemplate {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let template = system.templates().get(name).await.expect("get template");
        if decided_by(&template).as_deref() == policy {
            return template;
        }
        if std::time::Instant::now() > deadline {
            let logs = system.logs();
            let tail: Vec<&str> = logs.lines().rev().take(60).collect();
            panic!(
                "{name} decided by {:?}, not {policy:?}, after 60 s; status {:?}\ncontroller log (last lines, newest first):\n{}",
                decided_by(&template),
                template.status,
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub(crate) fn deployments_of(system: &System, template: &str) -> u64 {
    system
        .radius()
        .stats()
        .deployment_puts_of_template(template)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_annotation_then_priority_then_the_controllers_policy_decide() {
    let system = System::start(&[]).await;
    let team = format!("team-{}", short(&system));
    let low = create_policy(
        &system,
        "team-low",
        json!({"module": {"builtin": "default"}, "priority": 10,
               "objectSelector": {"matchLabels": {"team": team}}}),
    )
    .await;
    let high = create_policy(
        &system,
        "team-high",
        json!({"module": {"builtin": "default"}, "priority": 20,
               "objectSelector": {"matchLabels": {"team": team}}}),
    )
    .await;
    let named = create_policy(
        &system,
        "named",
        json!({"module": {"builtin": "default"},
               "objectSelector": {"matchLabels": {"nothing": "matches-this"}}}),
    )
    .await;
    for name in [&low, &high, &named] {
        wait_policy(&system, name, "True", "Loaded").await;
    }

    system
        .create(&labelled("by-labels", &[("team", &team)]))
        .await;
    system.create(&own_app_template("by-default")).await;
    // The annotation chooses among the policies that admit the template:
    // the lower-priority team policy here.
    let mut by_annotation = annotated("by-annotation", &low);
    by_annotation.metadata.labels = Some(BTreeMap::from([("team".to_string(), team.clone())]));
    system.create(&by_annotation).await;
    // A policy whose selectors do not admit the template cannot be named.
    system.create(&annotated("escape", &named)).await;
    let missing = format!("{}-missing", system.namespace);
    system.create(&annotated("unknown", &missing)).await;

    for (template, policy) in [
        ("by-labels", Some(high.as_str())),
        ("by-default", None),
        ("by-annotation", Some(low.as_str())),
    ] {
        system.wait_phase(template, "Ready").await;
        let ready = wait_decided_by(&system, template, policy).await;
        assert_eq!(decided_by(&ready).as_deref(), policy, "{template}");
    }
    let failed = system.wait_phase("unknown", "Failed").await;
    let message = failed.status.and_then(|s| s.message).unwrap_or_default();
    // On the shared real cluster other scenarios' policies are listed too,
    // and another controller may have made `named` Ready first.
    let lists_named = system.cluster.is_some() || message.contains(&named);
    assert!(
        message.contains(&format!("\"{missing}\""))
            && message.contains("Ready policies: ")
            && lists_named,
        "the message names the missing policy and lists the Ready ones: {message}"
    );
    assert_eq!(
        deployments_of(&system, "unknown"),
        0,
        "nothing reached Radius"
    );
    let escaped = system.wait_phase("escape", "Failed").await;
    let message = escaped.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.contains(&format!(
            "\"{named}\", whose selectors do not admit this object"
        )),
        "{message}"
    );
    assert_eq!(
        deployments_of(&system, "escape"),
        0,
        "nothing reached Radius"
    );

    // The higher-priority policy goes: its templates move to the next one
    // without any change to them, and are not deployed again.
    delete_policies(&system, &[&high]).await;
    wait_decided_by(&system, "by-labels", Some(&low)).await;
    // The missing policy appears: the failed template is decided again.
    // It admits the template (no object selector); a shadow, so that it
    // decides for no template that does not name it.
    let created = create_policy(
        &system,
        "missing",
        json!({"module": {"builtin": "default"}, "mode": "Shadow"}),
    )
    .await;
    assert_eq!(created, missing);
    let recovered = wait_decided_by(&system, "unknown", Some(&missing)).await;
    assert_eq!(recovered.metadata.generation, Some(1));
    system.wait_phase("unknown", "Ready").await;

    // The last team policy goes: the controller's own decides, and status
    // names no ReconcilePolicy any more.
    delete_policies(&system, &[&low]).await;
    wait_decided_by(&system, "by-labels", None).await;

    for template in ["by-labels", "by-default", "by-annotation", "unknown"] {
        assert_eq!(
            deployments_of(&system, template),
            1,
            "{template} deployed once"
        );
    }
    delete_policies(&system, &[&named, &missing]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_in_a_configmap_is_swapped_live_and_a_broken_one_never_decides() {
    let system = System::start(&[]).await;
    let select = format!("swap-{}", short(&system));
    put_module(&system, "policy-module", guest("default-policy")).await;
    let policy = create_policy(
        &system,
        "swap",
        json!({"module": module_from(&system, "policy-module"),
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    let status = loaded.status.expect("status");
    assert_eq!(status.name.as_deref(), Some("default"));
    let default_digest = status.digest.clone().expect("digest");

    system
        .create(&labelled("app", &[("policy", &select)]))
        .await;
    system.wait_phase("app", "Ready").await;
    wait_decided_by(&system, "app", Some(&policy)).await;

    // The guardrail replaces it in the ConfigMap: the template, unchanged,
    // is decided again by it (its image has no tag, so it is refused).
    put_module(&system, "policy-module", guest("image-tag-guardrail")).await;
    let swapped = eventually(
        "the guardrail is loaded",
        Duration::from_secs(60),
        || async {
            let object = policies(&system.client).get(&policy).await?;
            Ok(object
                .status
                .filter(|s| s.name.as_deref() == Some("image-tag-guardrail")))
        },
    )
    .await;
    assert_ne!(swapped.digest, Some(default_digest));
    let failed = system.wait_phase("app", "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );

    // A broken candidate is refused; the guardrail stays in charge.
    put_module(&system, "policy-module", b"not a wasm component".to_vec()).await;
    let refused = wait_policy(&system, &policy, "True", "CandidateRefused").await;
    let status = refused.status.expect("status");
    assert_eq!(status.name.as_deref(), Some("image-tag-guardrail"));
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("not a WebAssembly file")),
        "{:?}",
        status.last_error
    );
    system
        .create(&labelled("later", &[("policy", &select)]))
        .await;
    let later = system.wait_phase("later", "Failed").await;
    assert_eq!(
        later.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );
    assert_eq!(deployments_of(&system, "app"), 1);
    assert_eq!(deployments_of(&system, "later"), 0);
    assert!(system.all_logs().contains("policy candidate refused"));
    delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_and_fixture_cases_gate_a_policy_before_it_decides() {
    let system = System::start(&[]).await;
    put_module(&system, "policy-module", guest("default-policy")).await;
    let wrong = "0".repeat(64);
    let pinned_wrong = create_policy(
        &system,
        "pinned-wrong",
        json!({"module": {"configMap": module_from(&system, "policy-module")["configMap"], "sha256": wrong},
               "objectSelector": {"matchLabels": {"gate": "digest"}}}),
    )
    .await;
    let refused = wait_policy(&system, &pinned_wrong, "False", "DigestMismatch").await;
    assert!(
        refused.status.and_then(|s| s.digest).is_none(),
        "nothing loaded"
    );

    // Fixture cases: one of the default policy's own passes, the same with
    // a wrong expectation fails.
    let case_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../guests/default-policy/cases/template/01-new-template-gets-finalizer-and-deploys.json",
    );
    let passing = std::fs::read_to_string(&case_path).expect("case file");
    let failing = passing.replace("app-abc123", "app-other");
    assert_ne!(passing, failing);
    for (name, text) in [("good-cases", &passing), ("bad-cases", &failing)] {
        let object = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(config_map_name(&system, name)),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("case.json".to_string(), text.clone())])),
            ..Default::default()
        };
        config_maps(&system)
            .create(&PostParams::default(), &object)
            .await
            .expect("cases ConfigMap");
    }
    let cases = |config_map: &str| {
        json!({"configMap": {"namespace": system.policy_namespace(),
            "name": config_map_name(&system, config_map)}})
    };
    let good = create_policy(
        &system,
        "good-cases",
        json!({"module": {"builtin": "default"}, "cases": cases("good-cases"),
               "objectSelector": {"matchLabels": {"gate": "good"}}}),
    )
    .await;
    let bad = create_policy(
        &system,
        "bad-cases",
        json!({"module": {"builtin": "default"}, "cases": cases("bad-cases"),
               "objectSelector": {"matchLabels": {"gate": "cases"}}}),
    )
    .await;
    wait_policy(&system, &good, "True", "Loaded").await;
    let bad_status = wait_policy(&system, &bad, "False", "CasesFailed").await;
    let message = bad_status
        .status
        .and_then(|s| s.last_error)
        .unwrap_or_default();
    assert!(message.contains("case.json"), "{message}");

    // Templates these refused policies select fail, naming why; nothing
    // reaches Radius for them.
    system
        .create(&labelled("digest-gated", &[("gate", "digest")]))
        .await;
    system
        .create(&labelled("cases-gated", &[("gate", "cases")]))
        .await;
    system
        .create(&labelled("passed", &[("gate", "good")]))
        .await;
    for (template, reason) in [
        ("digest-gated", "DigestMismatch"),
        ("cases-gated", "CasesFailed"),
    ] {
        let failed = system.wait_phase(template, "Failed").await;
        let message = failed.status.and_then(|s| s.message).unwrap_or_default();
        // On the shared real cluster other scenarios' policies are listed
        // too, and may come first.
        let lists_good = system.cluster.is_some() || message.contains(&good);
        assert!(
            message.contains(reason) && lists_good,
            "{template}: {message}"
        );
        assert_eq!(deployments_of(&system, template), 0);
    }
    system.wait_phase("passed", "Ready").await;
    wait_decided_by(&system, "passed", Some(&good)).await;

    // An Event on the refused policy says why (cluster-scoped objects'
    // Events go to the default namespace).
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(system.client.clone(), "default");
    let reasons = eventually(
        "a Warning Event for the refused candidate",
        Duration::from_secs(30),
        || async {
            let list = events.list(&Default::default()).await?;
            let reasons: Vec<String> = list
                .items
                .iter()
                .filter(|e| {
                    e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(bad.as_str())
                })
                .filter_map(|e| e.reason.clone())
                .collect();
            Ok((!reasons.is_empty()).then_some(reasons))
        },
    )
    .await;
    assert!(reasons.iter().any(|r| r == "CasesFailed"), "{reasons:?}");
    delete_policies(&system, &[&pinned_wrong, &good, &bad]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_policy_only_counts_where_it_would_decide_otherwise() {
    let system = System::start(&[]).await;
    let select = format!("shadow-{}", short(&system));
    put_module(&system, "guardrail", guest("image-tag-guardrail")).await;
    let disagreeing = create_policy(
        &system,
        "shadow-guardrail",
        json!({"module": module_from(&system, "guardrail"), "mode": "Shadow",
               "objectSelector": {"matchLabels": {"canary": select}}}),
    )
    .await;
    let agreeing = create_policy(
        &system,
        "shadow-default",
        json!({"module": {"builtin": "default"}, "mode": "Shadow",
               "objectSelector": {"matchLabels": {"canary": select}}}),
    )
    .await;
    // A shadow that runs out of fuel on every decision (the annotation
    // below makes the test guest spin) never affects the object.
    put_module(&system, "misbehaving", guest("misbehaving-policy")).await;
    let failing = create_policy(
        &system,
        "shadow-failing",
        json!({"module": module_from(&system, "misbehaving"), "mode": "Shadow",
               "objectSelector": {"matchLabels": {"canary": select}}}),
    )
    .await;
    for name in [&disagreeing, &agreeing, &failing] {
        wait_policy(&system, name, "True", "Loaded").await;
    }
    let mut canaried = labelled("canaried", &[("canary", &select)]);
    canaried.metadata.annotations = Some(BTreeMap::from([(
        "radwasm.test/misbehave".to_string(),
        "loop".to_string(),
    )]));
    system.create(&canaried).await;
    system.create(&own_app_template("not-canaried")).await;
    let ready = system.wait_phase("canaried", "Ready").await;
    assert_eq!(decided_by(&ready), None, "the controller's policy decided");
    system.wait_phase("not-canaried", "Ready").await;

    // The guardrail would have refused the untagged image: it disagreed
    // (on the first decision at least); the default never did.
    let counted = eventually(
        "the shadow's disagreements in its status",
        Duration::from_secs(60),
        || async {
            let object = policies(&system.client).get(&disagreeing).await?;
            Ok(object.status.filter(|s| s.shadow_disagreements > 0))
        },
    )
    .await;
    assert!(counted.decisions >= counted.shadow_disagreements);
    let metrics = system.metrics().await;
    // The first line counting `shadow`'s decisions with `outcome`, of one
    // kind of object or of any.
    let line_of = |kind: Option<&str>, outcome: &str, shadow: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("radwasm_shadow_decisions_total")
                    && kind.is_none_or(|kind| l.contains(&format!("kind=\"{kind}\"")))
                    && l.contains(&format!("outcome=\"{outcome}\""))
                    && l.contains(&format!("shadow=\"{shadow}\""))
            })
            .map(str::to_string)
    };
    let line = |outcome: &str, shadow: &str| line_of(None, outcome, shadow);
    assert!(line("disagreed", &disagreeing).is_some(), "{metrics}");
    assert!(line("disagreed", &agreeing).is_none(), "{metrics}");
    assert!(line("agreed", &agreeing).is_some(), "{metrics}");
    // The failing shadow spins on every template decision; its resource
    // decisions return an empty plan, which agrees whenever the enforcing
    // plan is empty too. A template decision it failed is never counted as
    // agreeing.
    let template = Some("DeploymentTemplate");
    assert!(line_of(template, "failed", &failing).is_some(), "{metrics}");
    assert!(line_of(template, "agreed", &failing).is_none(), "{metrics}");
    let agreeing_status = policies(&system.client)
        .get(&agreeing)
        .await
        .expect("get")
        .status
        .expect("status");
    assert_eq!(agreeing_status.shadow_disagreements, 0);

    // Another controller starting (a shard that selects none of these
    // templates) loads the same policies and writes their status: it
    // decided nothing, so it leaves the counts of the one that decides.
    let activated = [
        "policy version activated",
        &format!("reconcile_policy={disagreeing} "),
    ];
    let before = log_lines(&system, &activated);
    let mut other = system.spawn_controller_as(
        Some("another-shard"),
        &["--watch-label-selector", "radwasm.test/shard=none"],
    );
    wait_log_lines(&system, &activated, before + 1).await;
    let watched_until = std::time::Instant::now() + Duration::from_secs(3);
    while std::time::Instant::now() < watched_until {
        let status = policies(&system.client)
            .get(&disagreeing)
            .await
            .expect("get")
            .status
            .expect("status");
        assert!(
            status.shadow_disagreements >= counted.shadow_disagreements
                && status.decisions >= counted.decisions,
            "a controller that decided nothing reset the counts: {status:?}, were {counted:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = other.kill();
    let _ = other.wait();
    // Nothing the shadows decided was carried out.
    assert_eq!(deployments_of(&system, "canaried"), 1);
    assert_eq!(
        system.radius().stats().deployment_puts,
        2,
        "one deployment per template, none from a shadow"
    );
    delete_policies(&system, &[&disagreeing, &agreeing, &failing]).await;
    system.shutdown().await;
}

/// The annotation the `annotation-canary` guest reads (and the default
/// policy does not): on a template set to `true`, the canary's plans drop
/// the default's `emitEvent` actions.
const QUIET: &str = "canary.radwasm.io/quiet";

/// A plan (a record's `plan`) without its `emitEvent` actions.
fn without_events(plan: &Value) -> Vec<Value> {
    plan.as_array()
        .into_iter()
        .flatten()
        .filter(|action| action.get("emitEvent").is_none())
        .cloned()
        .collect()
}

/// The spec's shadow scenario: a candidate that differs from the enforcing
/// policy on exactly one annotation reports exactly those disagreements and
/// changes nothing in Kubernetes or Radius.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_canary_differing_on_one_annotation_disagrees_only_there_and_changes_nothing() {
    let system = System::start(&["--decision-ring", "10000"]).await;
    put_module(&system, "canary", guest("annotation-canary")).await;
    // The controller's own policy (the default) enforces; the canary
    // watches every object of the scenario's namespace.
    let canary = create_policy(
        &system,
        "canary",
        json!({"module": module_from(&system, "canary"), "mode": "Shadow"}),
    )
    .await;
    let loaded = wait_policy(&system, &canary, "True", "Loaded").await;
    assert_eq!(
        loaded.status.and_then(|s| s.name).as_deref(),
        Some("annotation-canary")
    );

    let quiet = ["quiet-0", "quiet-1"];
    let plain = ["plain-0", "plain-1", "plain-2", "plain-3"];
    for name in quiet {
        let mut template = own_app_template(name);
        template.metadata.annotations =
            Some(BTreeMap::from([(QUIET.to_string(), "true".to_string())]));
        system.create(&template).await;
    }
    for name in plain {
        system.create(&own_app_template(name)).await;
    }
    let all: Vec<&str> = quiet.iter().chain(&plain).copied().collect();
    for name in &all {
        let ready = system.wait_phase(name, "Ready").await;
        assert_eq!(decided_by(&ready), None, "{name}: the default decided");
        assert_eq!(
            ready
                .status
                .and_then(|s| s.policy)
                .map(|p| p.name)
                .as_deref(),
            Some("default"),
            "{name}"
        );
    }

    // Settled: the status (written every 10 s when the counts moved) and
    // the metric count exactly the shadow decisions the ring holds, twice
    // in a row a second apart.
    let prefix = format!("{}/", system.namespace);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let mut previous = None;
    let (records, status) = loop {
        let ring = system.scrape("/debug/decisions").await;
        let records: Vec<Value> = ring
            .lines()
            .map(|line| serde_json::from_str(line).expect("a decision record"))
            .filter(|r: &Value| r["object"].as_str().is_some_and(|o| o.starts_with(&prefix)))
            .collect();
        let shadows = records.iter().filter(|r| r["role"] == "shadow").count() as u64;
        let status = policies(&system.client)
            .get(&canary)
            .await
            .expect("get the canary")
            .status
            .expect("status");
        let metrics = system.metrics().await;
        let metric = |outcome: &str| -> u64 {
            metrics
                .lines()
                .filter(|l| {
                    l.starts_with("radwasm_shadow_decisions_total{")
                        && l.contains(&format!("shadow=\"{canary}\""))
                        && l.contains(&format!("outcome=\"{outcome}\""))
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .sum()
        };
        let counts = (
            shadows,
            status.decisions,
            status.shadow_disagreements,
            metric("agreed") + metric("disagreed") + metric("failed"),
            metric("disagreed"),
        );
        if counts.0 == counts.1
            && counts.1 == counts.3
            && counts.2 == counts.4
            && previous == Some(counts)
        {
            break (records, status);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the shadow counts did not settle in 90 s: (ring, status decisions, status disagreements, metric decisions, metric disagreements) = {counts:?}\n{}",
            system.logs()
        );
        previous = Some(counts);
        tokio::time::sleep(Duration::from_secs(1)).await;
    };

    // Every shadow record, paired with the enforcing decision on the same
    // observation.
    let mut shadowed = std::collections::BTreeSet::new();
    let mut disagreeing: BTreeMap<String, usize> = BTreeMap::new();
    for shadow in records.iter().filter(|r| r["role"] == "shadow") {
        let object = shadow["object"].as_str().expect("object").to_string();
        assert_eq!(shadow["outcome"], "ok", "the canary decided: {shadow}");
        assert_eq!(shadow["policy"]["name"], "annotation-canary");
        let enforced = records
            .iter()
            .find(|r| {
                r["role"] == "enforce"
                    && r["kind"] == shadow["kind"]
                    && r["object"] == shadow["object"]
                    && r["observation"] == shadow["observation"]
            })
            .unwrap_or_else(|| panic!("no enforcing decision for the shadow's {shadow}"));
        assert_eq!(enforced["policy"]["name"], "default");
        if shadow["kind"] == "DeploymentTemplate" {
            shadowed.insert(object.clone());
        }
        if enforced["plan"] != shadow["plan"] {
            // The one difference the annotation makes, and nothing else.
            assert_eq!(shadow["kind"], "DeploymentTemplate", "{object}");
            assert_eq!(
                Value::Array(without_events(&enforced["plan"])),
                shadow["plan"],
                "{object}: the canary's plan is the default's without its events"
            );
            *disagreeing.entry(object).or_default() += 1;
        }
    }
    let named =
        |names: &[&str]| -> Vec<String> { names.iter().map(|n| format!("{prefix}{n}")).collect() };
    assert_eq!(
        shadowed.into_iter().collect::<Vec<_>>(),
        {
            let mut every = named(&all);
            every.sort();
            every
        },
        "the canary watched every template"
    );
    assert_eq!(
        disagreeing.keys().cloned().collect::<Vec<_>>(),
        named(&quiet),
        "disagreements on the annotated templates, on each of them, and nowhere else"
    );
    let recorded: u64 = disagreeing.values().map(|n| *n as u64).sum();
    assert_eq!(status.shadow_disagreements, recorded, "{status:?}");
    assert!(recorded >= quiet.len() as u64);
    // The controller's log names the same objects, as often.
    let logged: Vec<String> = system
        .all_logs()
        .lines()
        .filter(|l| l.contains("shadow policy disagrees") && l.contains(&canary))
        .filter_map(|l| {
            l.split("object=")
                .nth(1)?
                .split_whitespace()
                .next()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(logged.len() as u64, recorded, "{logged:?}");
    assert!(
        logged.iter().all(|o| o
            .strip_prefix("DeploymentTemplate:")
            .is_some_and(|o| disagreeing.contains_key(o))),
        "{logged:?}"
    );

    // Nothing the canary decided was carried out: one deployment per
    // template, and the annotated templates have the default's Events.
    for name in &all {
        assert_eq!(deployments_of(&system, name), 1, "{name} deployed once");
    }
    assert_eq!(system.radius().stats().deployment_puts, all.len() as u64);
    let reasons = |events: Vec<String>| -> Vec<String> {
        let mut reasons: Vec<String> = events
            .iter()
            .filter_map(|e| e.split(' ').next().map(str::to_string))
            .collect();
        reasons.sort();
        reasons.dedup();
        reasons
    };
    let expected = reasons(system.wait_event("plain-0", "DeploymentSucceeded").await);
    assert!(
        expected.iter().any(|r| r == "DeploymentStarted"),
        "{expected:?}"
    );
    for name in quiet {
        let events = reasons(system.wait_event(name, "DeploymentSucceeded").await);
        assert_eq!(events, expected, "{name}: the enforcing policy's Events");
    }
    delete_policies(&system, &[&canary]).await;
    system.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_recorded_in_a_run_replay_in_full_agreement_with_the_same_policy() {
    let records = tempfile::tempdir().expect("tempdir");
    let dir = records.path().display().to_string();
    let system = System::start(&["--decision-records-dir", &dir, "--decision-ring", "100"]).await;
    system.create(&app_template("app")).await;
    system.wait_phase("app", "Ready").await;
    let ring = system.scrape("/debug/decisions").await;
    assert!(
        ring.lines()
            .any(|l| l.contains("\"object\":\"") && l.contains("/app\"")),
        "the ring serves the template's decisions: {ring}"
    );
    system.shutdown().await;

    let replay = |policy: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_radwasm"))
            .args(["policy", "replay", policy, &dir, "--fail-on-diff"])
            .output()
            .expect("run radwasm policy replay")
    };
    let same = replay("default");
    let text = String::from_utf8_lossy(&same.stdout);
    assert!(
        same.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&same.stderr)
    );
    assert!(text.contains("0 disagree"), "{text}");
    // The guardrail would have refused the untagged image the app runs.
    let guardrail = format!("{}/image-tag-guardrail.wasm", env!("RADWASM_GUEST_DIR"));
    let other = replay(&guardrail);
    let text = String::from_utf8_lossy(&other.stdout);
    assert_eq!(other.status.code(), Some(1), "{text}");
    assert!(text.contains("startDeployment"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_pulled_from_a_registry_decides_and_stays_when_the_registry_goes() {
    let mut registry = crate::registry::Registry::start();
    let options = registry.options();
    let pushed = radwasm::policy::source::oci::push(
        &registry.reference("policies/guardrail:v1"),
        &guest("image-tag-guardrail"),
        &options,
    )
    .await
    .expect("push the guardrail");
    let system = System::start(&["--policy-insecure-registry", &registry.addr]).await;
    let select = format!("oci-{}", short(&system));
    let policy = create_policy(
        &system,
        "from-registry",
        json!({"module": {"oci": pushed.reference},
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    let loaded = wait_policy(&system, &policy, "True", "Loaded").await;
    assert_eq!(
        loaded.status.and_then(|s| s.name).as_deref(),
        Some("image-tag-guardrail")
    );
    system
        .create(&labelled("first", &[("policy", &select)]))
        .await;
    let failed = system.wait_phase("first", "Failed").await;
    assert_eq!(
        failed
            .status
            .and_then(|s| s.policy)
            .and_then(|p| p.reconcile_policy),
        Some(policy.clone())
    );

    // A digest the registry does not hold: refused, nothing loaded.
    let unknown = create_policy(
        &system,
        "unknown-digest",
        json!({"module": {"oci": registry.reference(&format!("policies/guardrail@sha256:{}", "0".repeat(64)))},
               "objectSelector": {"matchLabels": {"policy": "nothing"}}}),
    )
    .await;
    wait_policy(&system, &unknown, "False", "FetchFailed").await;

    // The registry goes away; the policy is pointed at another version.
    // The fetch fails, the status says so, and the guardrail stays.
    let default_digest = radwasm::policy::source::oci::sha256_digest(&guest("default-policy"));
    registry.stop();
    let patch = json!({"spec": {"module": {"oci": registry.reference(&format!("policies/default@{default_digest}"))}}});
    policies(&system.client)
        .patch(
            &policy,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("point the policy elsewhere");
    let refused = wait_policy(&system, &policy, "True", "CandidateRefused").await;
    let status = refused.status.expect("status");
    assert_eq!(status.name.as_deref(), Some("image-tag-guardrail"));
    assert!(
        status
            .last_error
            .as_deref()
            .is_some_and(|e| e.starts_with("FetchFailed")),
        "{:?}",
        status.last_error
    );
    system
        .create(&labelled("second", &[("policy", &select)]))
        .await;
    let failed = system.wait_phase("second", "Failed").await;
    assert_eq!(
        failed.status.and_then(|s| s.policy).map(|p| p.name),
        Some("image-tag-guardrail".to_string())
    );
    assert_eq!(system.radius().stats().deployment_puts, 0);
    delete_policies(&system, &[&policy, &unknown]).await;
    system.shutdown().await;
}

/// `component` with a custom section appended (named `radwasm-test`,
/// holding `tag`): the same policy, another digest.
fn with_custom_section(component: &[u8], tag: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"radwasm-test";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.extend_from_slice(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    leb(payload.len(), &mut out);
    out.extend_from_slice(&payload);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_swaps_under_load_lose_no_reconcile_and_a_bad_candidate_never_decides() {
    let system = System::start(&[]).await;
    let count = if system.cluster.is_some() { 60 } else { 200 };
    let select = format!("load-{}", short(&system));
    let versions: Vec<Vec<u8>> = (0..=10)
        .map(|i| with_custom_section(&guest("default-policy"), &format!("version {i}")))
        .collect();
    let digests: Vec<String> = versions
        .iter()
        .map(|v| radwasm::policy::digest(v))
        .collect();
    put_module(&system, "swapped", versions[0].clone()).await;
    let policy = create_policy(
        &system,
        "swapped",
        json!({"module": module_from(&system, "swapped"),
               "objectSelector": {"matchLabels": {"policy": select}}}),
    )
    .await;
    wait_policy(&system, &policy, "True", "Loaded").await;
    // Every digest any template's status ever names, from a watch.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let watch = {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let seen = seen.clone();
        let stream = watcher(system.templates(), watcher::Config::default())
            .default_backoff()
            .applied_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Some(digest) = event
                    .ok()
                    .and_then(|t| t.status)
                    .and_then(|s| s.policy)
                    .map(|p| p.digest)
                    && let Ok(mut seen) = seen.lock()
                {
                    seen.insert(digest);
                }
            }
        })
    };
    for i in 0..count {
        system
            .create(&labelled(&format!("t{i:03}"), &[("policy", &select)]))
            .await;
    }
    // Twenty swaps while the templates deploy and are woken again: good
    // versions and broken candidates alternate.
    let mut good = 0;
    for round in 0..20 {
        // This scenario's controller's own log says when it took up each
        // candidate (on the shared real cluster other controllers write
        // the policy's status too).
        if round % 2 == 0 {
            good = round / 2 + 1;
            put_module(&system, "swapped", versions[good].clone()).await;
            wait_log_lines(
                &system,
                &[
                    "policy version activated",
                    &format!("reconcile_policy={policy} "),
                    &digests[good],
                ],
                1,
            )
            .await;
        } else {
            let refused_before = log_lines(
                &system,
                &[
                    "policy candidate refused",
                    &format!("reconcile_policy={policy} "),
                ],
            );
            put_module(
                &system,
                "swapped",
                format!("broken candidate {round}").into_bytes(),
            )
            .await;
            wait_log_lines(
                &system,
                &[
                    "policy candidate refused",
                    &format!("reconcile_policy={policy} "),
                ],
                refused_before + 1,
            )
            .await;
        }
        // Wake a tenth of the templates with a label change.
        for i in (round..count).step_by(10) {
            let patch = json!({"metadata": {"labels": {"round": round.to_string()}}});
            system
                .templates()
                .patch(
                    &format!("t{i:03}"),
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .expect("label a template");
        }
    }
    // The last good version decides for every template, each deployed once.
    let last = digests[good].clone();
    assert_eq!(good, 10);
    for i in 0..count {
        let name = format!("t{i:03}");
        system.wait_phase(&name, "Ready").await;
        let template = eventually(
            &format!("{name} decided by the last good version"),
            Duration::from_secs(60),
            || async {
                let template = system.templates().get(&name).await?;
                let digest = template
                    .status
                    .as_ref()
                    .and_then(|s| s.policy.as_ref())
                    .map(|p| p.digest.clone());
                Ok((digest.as_deref() == Some(last.as_str())).then_some(template))
            },
        )
        .await;
        assert_eq!(deployments_of(&system, &name), 1, "{name}");
        drop(template);
    }
    watch.abort();
    let seen = seen.lock().expect("seen").clone();
    let known: std::collections::BTreeSet<String> = digests.iter().cloned().collect();
    assert!(
        seen.is_subset(&known),
        "a digest that is not a good version decided: {:?}",
        seen.difference(&known).collect::<Vec<_>>()
    );
    let metrics = system.metrics().await;
    let failed = crate::harness::failed_reconciles(&metrics);
    let logs = system.all_logs();
    let why: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("reconcile failed"))
        .collect();
    assert!(
        failed.is_empty(),
        "reconciles failed: {failed:?}\n{}",
        why.join("\n")
    );
    let failures: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("radwasm_decision_failures_total") && !l.ends_with(" 0"))
        .collect();
    assert!(failures.is_empty(), "decisions failed: {failures:?}");
    delete_policies(&system, &[&policy]).await;
    system.shutdown().await;
}

/// Lines of the controller's log containing every one of `needles`.
pub(crate) fn log_lines(system: &System, needles: &[&str]) -> usize {
    system
        .all_logs()
        .lines()
        .filter(|line| needles.iter().all(|n| line.contains(n)))
        .count()
}

/// Wait (60 s at most) until at least `count` lines of the controller's log
/// contain every one of `needles`.
pub(crate) async fn wait_log_lines(system: &System, needles: &[&str], count: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while log_lines(system, needles) < count {
        assert!(
            std::time::Instant::now() < deadline,
            "the controller did not log {count} lines with {needles:?}:\n{}",
            system.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
