//! The policy runtime against real guests: the embedded default policy, the
//! example guardrail, and a misbehaving guest that loops, allocates without
//! bound, traps, floods the log and reads the clock.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::collections::BTreeMap;
use std::path::PathBuf;

use radwasm::policy::{DecisionError, Limits, LoadError, PolicyEngine, embedded};
use radwasm_policy_model::{
    ObjectMeta, ResourcePhase, TemplateAction, TemplateObservation, TemplatePhase,
};

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

fn template(name: &str, annotations: &[(&str, &str)]) -> TemplateObservation {
    TemplateObservation {
        meta: ObjectMeta {
            name: name.to_string(),
            namespace: "default".to_string(),
            uid: format!("uid-{name}"),
            generation: 1,
            annotations: annotations
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect::<BTreeMap<_, _>>(),
            ..ObjectMeta::default()
        },
        spec_hash: "hash-1".to_string(),
        ..TemplateObservation::default()
    }
}

fn misbehaving(mode: &str) -> TemplateObservation {
    template("bad", &[("radwasm.test/misbehave", mode)])
}

#[test]
fn the_embedded_default_policy_loads_and_describes_itself() {
    let engine = engine();
    let policy = embedded::load_default(&engine).expect("default policy loads");
    assert_eq!(policy.description().name, "default");
    assert!(policy.worlds().template && policy.worlds().resource);
    let annotations: Vec<&str> = policy
        .description()
        .annotations
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    for expected in [
        "radapp.io/reconcile-policy",
        "radapp.io/hold",
        "radapp.io/depends-on",
    ] {
        assert!(
            annotations.contains(&expected),
            "{expected} missing from {annotations:?}"
        );
    }
    assert_eq!(policy.digest().len(), 64);
}

#[test]
fn a_new_template_first_gets_the_finalizer() {
    let engine = engine();
    let policy = embedded::load_default(&engine).expect("default policy loads");
    let decision = policy
        .decide_template(&template("app", &[]))
        .expect("decides");
    assert_eq!(
        decision.plan.actions.first(),
        Some(&TemplateAction::AddFinalizer)
    );
    assert!(decision.fuel_used > 0);
}

#[test]
fn a_guest_that_loops_forever_runs_out_of_fuel_and_the_host_carries_on() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    let error = policy
        .decide_template(&misbehaving("loop"))
        .expect_err("must not finish");
    assert!(matches!(error, DecisionError::OutOfFuel { .. }), "{error}");
    assert!(error.to_string().contains("CPU budget"), "{error}");
    // The same policy and engine still decide for a well-behaved object.
    policy
        .decide_template(&template("fine", &[]))
        .expect("next decision works");
}

#[test]
fn a_guest_that_allocates_without_bound_hits_the_memory_cap() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    let error = policy
        .decide_template(&misbehaving("allocate"))
        .expect_err("must hit the cap");
    assert!(
        matches!(error, DecisionError::MemoryLimit { limit_bytes, .. } if limit_bytes == 16 << 20),
        "{error}"
    );
    policy
        .decide_template(&template("fine", &[]))
        .expect("next decision works");
}

#[test]
fn a_trap_fails_that_decision_only() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    let error = policy
        .decide_template(&misbehaving("trap"))
        .expect_err("traps");
    assert!(matches!(error, DecisionError::Trap { .. }), "{error}");
    let default = embedded::load_default(&engine).expect("default loads");
    default
        .decide_template(&template("app", &[]))
        .expect("other policies unaffected");
}

#[test]
fn a_policy_error_is_reported_with_its_code() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    match policy.decide_template(&misbehaving("error")) {
        Err(DecisionError::Policy { error, .. }) => assert!(!error.code.is_empty()),
        other => panic!("expected a policy error, got {other:?}"),
    }
}

#[test]
fn guest_logging_is_capped_per_decision() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    let decision = policy
        .decide_template(&misbehaving("log-flood"))
        .expect("decides");
    assert_eq!(decision.logs.len(), radwasm::policy::MAX_LOG_MESSAGES);
    assert!(decision.dropped_logs > 0);
}

#[test]
fn clocks_and_randomness_are_deterministic_so_decisions_replay() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    let first = policy
        .decide_template(&misbehaving("clock"))
        .expect("decides");
    let second = policy
        .decide_template(&misbehaving("clock"))
        .expect("decides");
    assert_eq!(first.plan, second.plan, "same observation, same plan");
    let text = serde_json::to_string(&first.plan).expect("serialises");
    assert!(
        text.contains("1577836800"),
        "the guest sees the fixed clock: {text}"
    );
}

#[test]
fn decisions_run_concurrently_from_many_threads() {
    let engine = engine();
    let policy = embedded::load_default(&engine).expect("default policy loads");
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let policy = policy.clone();
            scope.spawn(move || {
                for round in 0..25 {
                    let observation = template(&format!("app-{thread}-{round}"), &[]);
                    policy.decide_template(&observation).expect("decides");
                }
            });
        }
    });
}

#[test]
fn the_guardrail_fails_a_latest_image_and_the_default_does_not() {
    let engine = engine();
    let guardrail = engine
        .load_file(&guest("image-tag-guardrail"))
        .expect("guardrail loads");
    let default = embedded::load_default(&engine).expect("default loads");
    let mut observation = template("app", &[]);
    observation.meta.finalizers = vec![radwasm_policy_model::TEMPLATE_FINALIZER.to_string()];
    observation.spec.template = serde_json::json!({
        "resources": {
            "frontend": {
                "type": "Applications.Core/containers@2023-10-01-preview",
                "properties": {"name": "frontend", "container": {"image": "nginx:latest"}}
            }
        }
    })
    .to_string();
    observation.spec.parameters = "{}".to_string();
    observation.spec.provider_config = serde_json::json!({
        "radius": {"type": "Radius", "value": {"scope": "/planes/radius/local/resourceGroups/default"}}
    })
    .to_string();

    let guarded = guardrail.decide_template(&observation).expect("decides");
    let failed = guarded.plan.actions.iter().any(|action| {
        matches!(action, TemplateAction::SetStatus(update)
            if update.phase == Some(TemplatePhase::Failed)
                && update.message.as_deref().is_some_and(|m| m.contains("nginx:latest")))
    });
    assert!(
        failed,
        "guardrail must fail the template: {:?}",
        guarded.plan
    );

    let plain = default.decide_template(&observation).expect("decides");
    assert!(
        plain
            .plan
            .actions
            .iter()
            .any(|action| matches!(action, TemplateAction::StartDeployment(_))),
        "the default policy deploys it: {:?}",
        plain.plan
    );
}

#[test]
fn bad_files_give_one_clear_error_naming_the_file() {
    let engine = engine();
    let dir = tempfile::tempdir().expect("tempdir");

    let core = dir.path().join("core.wasm");
    std::fs::write(&core, wat::parse_str("(module)").expect("wat")).expect("write");
    let error = engine.load_file(&core).err().expect("core module rejected");
    assert!(matches!(error, LoadError::CoreModule { .. }), "{error}");
    assert!(error.to_string().contains("core.wasm"), "{error}");

    let empty = dir.path().join("empty.wasm");
    std::fs::write(&empty, wat::parse_str("(component)").expect("wat")).expect("write");
    let error = engine
        .load_file(&empty)
        .err()
        .expect("empty component rejected");
    assert!(
        error
            .to_string()
            .contains("does not export radapp:policy/metadata@0.6.0"),
        "{error}"
    );

    let text = dir.path().join("notes.wasm");
    std::fs::write(&text, "hello").expect("write");
    let error = engine.load_file(&text).err().expect("text rejected");
    assert!(matches!(error, LoadError::NotWasm { .. }), "{error}");

    let missing = dir.path().join("missing.wasm");
    let error = engine
        .load_file(&missing)
        .err()
        .expect("missing file rejected");
    assert!(error.to_string().contains("missing.wasm"), "{error}");
}

#[test]
fn a_policy_file_is_swapped_at_run_time_and_a_broken_replacement_is_refused() {
    use radwasm::policy::{PolicySlot, Reload, Source};

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("policy.wasm");
    std::fs::copy(guest("default-policy"), &path).expect("copy default");
    let slot = PolicySlot::load(engine(), Source::File(path.clone())).expect("loads");
    assert_eq!(slot.current().description().name, "default");
    assert_eq!(slot.reload().expect("reload"), Reload::Unchanged);

    std::fs::copy(guest("image-tag-guardrail"), &path).expect("copy guardrail");
    let in_flight = slot.current();
    assert!(matches!(
        slot.reload().expect("reload"),
        Reload::Swapped { .. }
    ));
    assert_eq!(slot.current().description().name, "image-tag-guardrail");
    assert_eq!(
        in_flight.description().name,
        "default",
        "a decision in flight keeps its policy"
    );

    std::fs::write(&path, b"not wasm").expect("break the file");
    let error = slot.reload().expect_err("broken policy refused");
    assert!(error.to_string().contains("policy.wasm"), "{error}");
    assert_eq!(
        slot.current().description().name,
        "image-tag-guardrail",
        "old policy stays in charge"
    );
}

#[test]
fn every_decision_gets_a_fresh_instance_so_no_state_leaks() {
    let engine = engine();
    let policy = engine
        .load_file(&guest("misbehaving-policy"))
        .expect("loads");
    for _ in 0..3 {
        let decision = policy
            .decide_template(&misbehaving("count"))
            .expect("decides");
        let text = serde_json::to_string(&decision.plan).expect("serialises");
        assert!(text.contains("decisions in this instance: 1"), "{text}");
    }
}

#[test]
fn a_guest_built_against_contract_0_1_still_loads_and_decides_like_before() {
    // The default policy as built while the contract was 0.1 (see the
    // fixture's README): a platform team's older policy keeps working.
    let engine = engine();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/contract-0.1/default-policy.wasm");
    let old = engine.load_file(&path).expect("a 0.1 guest loads");
    assert_eq!(old.worlds().to_string(), "world radapp:policy/policy@0.1.0");
    let current = embedded::load_default(&engine).expect("default policy");
    assert_eq!(
        current.worlds().to_string(),
        "world radapp:policy/policy@0.6.0"
    );

    // A new template: both add the finalizer and deploy the same way.
    let mut observation = template("app", &[]);
    observation.spec = radwasm_policy_model::TemplateSpec {
        template: r#"{"resources":{}}"#.to_string(),
        parameters: String::new(),
        provider_config: r#"{"radius":{"type":"Radius","value":{"scope":"/planes/radius/local/resourceGroups/default"}}}"#.to_string(),
    };
    let before = old.decide_template(&observation).expect("0.1 decides").plan;
    let now = current
        .decide_template(&observation)
        .expect("the current policy decides")
        .plan;
    assert_eq!(before, now);
    assert!(matches!(before.actions[0], TemplateAction::AddFinalizer));

    // A refusal (new in 0.2) reaches the 0.1 guest as the failed operation
    // it was always shown: it fails the template with Radius's words.
    observation.meta.finalizers = vec!["radapp.io/deployment-template-finalizer".to_string()];
    observation.operation = Some(radwasm_policy_model::OperationObservation {
        kind: radwasm_policy_model::OperationKind::Deployment,
        subject: observation.spec_hash.clone(),
        result: radwasm_policy_model::OperationResult::Refused(radwasm_policy_model::RadiusError {
            code: "InvalidTemplate".to_string(),
            message: "no such type".to_string(),
        }),
    });
    let plan = old.decide_template(&observation).expect("0.1 decides").plan;
    let failed = plan.actions.iter().any(|action| {
        matches!(action, TemplateAction::SetStatus(update)
            if update.phase == Some(TemplatePhase::Failed)
                && update.message.as_deref().is_some_and(|m| m.contains("InvalidTemplate: no such type")))
    });
    assert!(failed, "{plan:?}");
}

#[test]
fn a_guest_built_against_contract_0_2_still_loads_and_decides_its_cases() {
    // The default policy as built while the contract was 0.2 (see the
    // fixture's README), with cases of that time and one for a resource in
    // the Missing phase (added in 0.3), which it is shown as Failed.
    let engine = engine();
    let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/contract-0.2");
    let old = engine
        .load_file(&fixture.join("default-policy.wasm"))
        .expect("a 0.2 guest loads");
    assert_eq!(old.worlds().to_string(), "world radapp:policy/policy@0.2.0");
    assert_eq!(old.description().name, "default");

    let cases = radwasm_policy_model::cases::load_cases(&fixture.join("cases")).expect("cases");
    assert!(cases.len() >= 5, "{} cases", cases.len());
    for loaded in &cases {
        let outcome = old
            .decide(&loaded.case.observation)
            .map(|decision| decision.plan);
        let outcome = match outcome {
            Ok(plan) => Ok(plan),
            Err(DecisionError::Policy { error, .. }) => Err(error),
            Err(error) => panic!("{}: {error}", loaded.path.display()),
        };
        if let Err(mismatch) = radwasm_policy_model::cases::check(&loaded.case, &outcome) {
            panic!("{}: {mismatch}", loaded.path.display());
        }
    }

    // Missing reaches it as Failed: its plan is the one for a Failed
    // resource (and it may plan nothing 0.2 cannot say).
    let missing = cases
        .iter()
        .find_map(|loaded| match &loaded.case.observation {
            radwasm_policy_model::Observation::DeploymentResource(observation)
                if observation.status.phase == Some(ResourcePhase::Missing) =>
            {
                Some(observation.clone())
            }
            _ => None,
        })
        .expect("a case with a Missing resource");
    let mut failed = missing.clone();
    failed.status.phase = Some(ResourcePhase::Failed);
    failed.missing_age_ms = None;
    assert_eq!(
        old.decide_resource(&missing).expect("decides").plan,
        old.decide_resource(&failed).expect("decides").plan
    );
}

/// `component` with a custom section appended: the same policy, another
/// digest (as a new version pushed during a rollout would have).
fn with_custom_section(component: &[u8], tag: u8) -> Vec<u8> {
    let name = b"radwasm-test";
    let mut out = component.to_vec();
    out.push(0); // custom section
    out.push(u8::try_from(1 + name.len() + 1).expect("small"));
    out.push(u8::try_from(name.len()).expect("small"));
    out.extend_from_slice(name);
    out.push(tag);
    out
}

#[test]
fn compiled_components_are_kept_up_to_a_bound_across_many_versions() {
    let engine = engine();
    let default = radwasm::policy::embedded::DEFAULT_POLICY;
    let versions = radwasm::policy::COMPILED_KEPT + 4;
    let mut loaded = Vec::new();
    for tag in 0..versions {
        let bytes = with_custom_section(default, u8::try_from(tag).expect("small"));
        let policy = engine
            .load_bytes(&format!("version {tag}"), &bytes)
            .expect("a new version loads");
        loaded.push(policy);
    }
    assert_eq!(engine.compiled_kept(), radwasm::policy::COMPILED_KEPT);
    // A version evicted from the cache still decides: it holds its own.
    let oldest = &loaded[0];
    assert!(oldest.decide_template(&template("app", &[])).is_ok());
}
