//! Layers (contract 0.4): a guest decides over the plan of the policy below
//! it. Against real guests: the embedded default policy, the Rust
//! `team-label-layer`, and the default policy as built against contract 0.3.
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use radwasm::policy::{DecisionError, Limits, LoadedPolicy, PolicyEngine, check_case, embedded};
use radwasm_policy_model::cases::load_cases;
use radwasm_policy_model::{ObjectMeta, Observation, ResourceObservation, TemplateObservation};
use radwasm_test_support::{kept_guest_passes_cases, repository};

fn guest(name: &str) -> PathBuf {
    PathBuf::from(env!("RADWASM_GUEST_DIR")).join(format!("{name}.wasm"))
}

fn engine() -> PolicyEngine {
    radwasm::policy::engine(Limits {
        fuel: 20_000_000,
        memory_bytes: 16 << 20,
        concurrent_decisions: 8,
    })
    .expect("engine")
}

fn team_label(engine: &PolicyEngine) -> LoadedPolicy {
    engine
        .load_file(&guest("team-label-layer"))
        .expect("the layer loads")
}

fn template(labels: &[(&str, &str)]) -> TemplateObservation {
    let case = repository().join(
        "guests/team-label-layer/cases/02-template-with-team-label-deploys-like-the-default.json",
    );
    let loaded = radwasm_policy_model::cases::load_case(&case).expect("case");
    let Observation::DeploymentTemplate(mut observation) = loaded.case.observation else {
        panic!("a template case");
    };
    observation.meta.labels = labels
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect::<BTreeMap<_, _>>();
    observation
}

/// Run every case under `dir` against `policy`; panics naming the first
/// that fails.
fn passes_cases(policy: &LoadedPolicy, dir: &std::path::Path) -> usize {
    let cases = load_cases(dir).expect("cases");
    for loaded in &cases {
        if let Err(failed) = check_case(policy, &loaded.case) {
            panic!("{}: {failed}", loaded.path.display());
        }
    }
    cases.len()
}

#[test]
fn a_layer_loads_over_the_built_in_default_policy() {
    let engine = engine();
    let layer = team_label(&engine);
    assert!(layer.is_layer());
    assert_eq!(
        layer.worlds().to_string(),
        "world radapp:policy/layer@0.6.0"
    );
    let base = layer.base().expect("a layer has a base");
    assert_eq!(base.description().name, "default");
    assert!(!base.is_layer());
    assert_eq!(layer.stack().len(), 2, "{:?}", layer.stack());
    assert!(layer.stack()[0].starts_with("team-label-layer@"));
}

#[test]
fn a_layer_keeps_the_base_plan_and_records_it_below_its_own() {
    let engine = engine();
    let layer = team_label(&engine);
    let default = embedded::load_default(&engine).expect("default");
    let observation = template(&[("team", "payments")]);

    let alone = default
        .decide_template(&observation)
        .expect("default decides");
    let layered = layer.decide_template(&observation).expect("layer decides");
    assert_eq!(layered.plan, alone.plan, "one rule, default otherwise");
    assert_eq!(layered.below.len(), 1);
    assert!(layered.below[0].policy.starts_with("default"));
    assert_eq!(layered.below[0].plan, alone.plan);
    assert!(
        layered.fuel_used > alone.fuel_used,
        "a layer's fuel adds the base's: {} vs {}",
        layered.fuel_used,
        alone.fuel_used
    );
    assert!(alone.below.is_empty());
}

#[test]
fn a_layer_refuses_through_a_policy_error_and_never_blocks_deletion() {
    let engine = engine();
    let layer = team_label(&engine);
    let error = layer
        .decide_template(&template(&[]))
        .expect_err("an unlabelled template is refused");
    match &error {
        DecisionError::Policy { error, .. } => assert_eq!(error.code, "MissingTeamLabel"),
        other => panic!("{other}"),
    }
    let mut deleting = template(&[]);
    deleting.meta.deletion_requested = true;
    deleting.meta.finalizers = vec![radwasm_policy_model::TEMPLATE_FINALIZER.to_string()];
    let plan = layer
        .decide_template(&deleting)
        .expect("deletion decides")
        .plan;
    let default = embedded::load_default(&engine).expect("default");
    assert_eq!(
        plan,
        default.decide_template(&deleting).expect("default").plan
    );
}

#[test]
fn a_layer_leaves_resources_it_does_not_change_to_its_base() {
    let engine = engine();
    let layer = team_label(&engine);
    let default = embedded::load_default(&engine).expect("default");
    let observation = ResourceObservation {
        meta: ObjectMeta {
            name: "r".into(),
            namespace: "default".into(),
            uid: "uid-r".into(),
            generation: 1,
            ..ObjectMeta::default()
        },
        radius_id:
            "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/c"
                .into(),
        ..ResourceObservation::default()
    };
    assert_eq!(
        layer.decide_resource(&observation).expect("decides").plan,
        default.decide_resource(&observation).expect("decides").plan
    );
}

#[test]
fn layers_stack_and_every_layer_plan_is_kept() {
    let engine = engine();
    let layer = team_label(&engine);
    let twice = layer.on_base(layer.clone());
    assert_eq!(twice.stack().len(), 3, "{:?}", twice.stack());
    let decision = twice
        .decide_template(&template(&[("team", "a")]))
        .expect("decides");
    assert_eq!(decision.below.len(), 2);
    assert!(decision.below[0].policy.starts_with("default"));
    assert!(decision.below[1].policy.starts_with("team-label-layer"));
    // A policy that decides alone takes no base.
    let default = embedded::load_default(&engine).expect("default");
    assert!(default.on_base(layer.clone()).base().is_none());
}

#[test]
fn the_rust_layer_passes_its_cases() {
    let engine = engine();
    let passed = passes_cases(
        &team_label(&engine),
        &repository().join("guests/team-label-layer/cases"),
    );
    assert!(passed >= 6, "{passed} cases");
}

#[test]
fn a_layer_linked_over_the_default_decides_as_the_host_stacks_it() {
    // `team-label-layer` built with `export_linked_layer!`: a policy (one
    // instance) that runs the default it links and then the layer. Over
    // every observation of the layer's and the default's cases it decides
    // exactly what the host's stack of the two decides.
    let engine = engine();
    let stacked = team_label(&engine);
    let linked = engine
        .load_file(&guest("team-label-linked"))
        .expect("the linked layer loads");
    assert!(!linked.is_layer());
    assert_eq!(
        linked.worlds().to_string(),
        "world radapp:policy/policy@0.6.0"
    );
    assert_eq!(linked.stack().len(), 1, "{:?}", linked.stack());
    assert!(passes_cases(&linked, &repository().join("guests/team-label-layer/cases")) >= 6);

    let outcome =
        |policy: &LoadedPolicy, observation: &Observation| match policy.decide(observation) {
            Ok(decision) => Ok(decision.plan),
            Err(DecisionError::Policy { error, .. }) => Err(error),
            Err(error) => panic!("{error}"),
        };
    let mut compared = 0;
    for dir in [
        "guests/team-label-layer/cases",
        "guests/default-policy/cases",
    ] {
        for loaded in load_cases(&repository().join(dir)).expect("cases") {
            let observation = &loaded.case.observation;
            assert_eq!(
                outcome(&linked, observation),
                outcome(&stacked, observation),
                "{}",
                loaded.path.display()
            );
            compared += 1;
        }
    }
    assert!(compared >= 100, "{compared} observations");
}

#[test]
fn a_guest_built_against_contract_0_3_decides_every_default_case_the_same() {
    // 0.4 changed no record: a 0.3 guest sees exactly what a 0.4 policy
    // sees, so the default policy as built against 0.3 passes every case of
    // today's default policy but those changed since.
    let engine = engine();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/contract-0.3");
    let old = engine
        .load_file(&fixture.join("default-policy.wasm"))
        .expect("a 0.3 guest loads");
    assert_eq!(old.worlds().to_string(), "world radapp:policy/policy@0.3.0");
    let passed = kept_guest_passes_cases(&old, &repository().join("guests/default-policy/cases"));
    assert!(passed >= 100, "{passed} cases");
}

#[test]
fn a_decision_record_of_a_layer_holds_the_plan_below_it() {
    use radwasm::policy::records::{DecisionRecord, Role};
    let engine = engine();
    let layer = team_label(&engine);
    let observation = template(&[("team", "payments")]);
    let result = layer.decide_template(&observation);
    let record = DecisionRecord::new(
        &layer,
        Role::Enforce,
        &observation,
        &result,
        std::time::Duration::from_micros(10),
    );
    assert_eq!(record.below.len(), 1);
    assert!(record.below[0].policy.starts_with("default@"));
    assert_eq!(Some(&record.below[0].plan), record.plan.as_ref());
    let line = serde_json::to_string(&record).expect("json");
    assert!(line.contains("\"below\":[{\"policy\":\"default@"), "{line}");
    let back: DecisionRecord = serde_json::from_str(&line).expect("reads back");
    assert_eq!(back, record);
}

fn keep_data_stores(engine: &PolicyEngine) -> LoadedPolicy {
    engine
        .load_file(&guest("keep-data-stores"))
        .expect("the layer loads")
}

fn contract_0_4(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contract-0.4")
        .join(format!("{name}.wasm"))
}

/// The first case of `keep-data-stores`: a template being deleted that
/// owns a container and a data store.
fn deleting_with_a_data_store() -> Observation {
    let case = repository().join(
        "guests/keep-data-stores/cases/01-deletion-detaches-the-data-store-and-deletes-the-container.json",
    );
    radwasm_policy_model::cases::load_case(&case)
        .expect("case")
        .case
        .observation
}

#[test]
fn a_layer_has_its_base_detach_the_data_stores_it_keeps() {
    let engine = engine();
    let layer = keep_data_stores(&engine);
    assert_eq!(
        layer.worlds().to_string(),
        "world radapp:policy/layer@0.6.0"
    );
    let passed = passes_cases(&layer, &repository().join("guests/keep-data-stores/cases"));
    assert_eq!(
        passed, 4,
        "its cases, the update that drops a data store among them"
    );
    let decision = layer
        .decide(&deleting_with_a_data_store())
        .expect("decides");
    use radwasm_policy_model::{Plan, TemplateAction};
    let (Plan::DeploymentTemplate(plan), Plan::DeploymentTemplate(below)) =
        (&decision.plan, &decision.below[0].plan)
    else {
        panic!("template plans");
    };
    // The base deleted both; the layer turned the data store's into a detach.
    assert!(
        below
            .actions
            .contains(&TemplateAction::DeleteResource("cache".into()))
    );
    assert!(
        plan.actions
            .contains(&TemplateAction::DetachResource("cache".into()))
    );
    assert!(
        plan.actions
            .contains(&TemplateAction::DeleteResource("frontend".into()))
    );
    assert!(!plan.actions.contains(&TemplateAction::RemoveFinalizer));
}

#[test]
fn guests_built_against_contract_0_4_load_and_decide_as_before() {
    let engine = engine();
    let default = engine
        .load_file(&contract_0_4("default-policy"))
        .expect("a 0.4 policy loads");
    assert_eq!(
        default.worlds().to_string(),
        "world radapp:policy/policy@0.4.0"
    );
    let passed =
        kept_guest_passes_cases(&default, &repository().join("guests/default-policy/cases"));
    assert!(passed >= 100, "{passed} cases");

    let layer = engine
        .load_file(&contract_0_4("team-label-layer"))
        .expect("a 0.4 layer loads");
    assert_eq!(
        layer.worlds().to_string(),
        "world radapp:policy/layer@0.4.0"
    );
    let passed =
        kept_guest_passes_cases(&layer, &repository().join("guests/team-label-layer/cases"));
    assert!(passed >= 6, "{passed} cases");
}

#[test]
fn a_0_4_layer_is_never_shown_a_detach_it_cannot_read() {
    // Shown as a `delete-resource`, a detach would come back from a 0.4
    // layer as a deletion: the stack fails instead, naming the action.
    let engine = engine();
    let old = engine
        .load_file(&contract_0_4("team-label-layer"))
        .expect("a 0.4 layer loads");
    let stacked = old.on_base(keep_data_stores(&engine));
    let mut observation = deleting_with_a_data_store();
    if let Observation::DeploymentTemplate(template) = &mut observation {
        template.meta.labels.insert("team".into(), "a".into());
    }
    match stacked.decide(&observation) {
        Err(DecisionError::Policy { error, .. }) => {
            assert_eq!(error.code, "BaseNotShowable");
            assert!(
                error.message.contains("detachResource cache"),
                "{}",
                error.message
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
