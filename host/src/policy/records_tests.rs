//! Decision records of a loaded policy (the built-in default policy).

use std::time::Duration;

use chrono::DateTime;
use radwasm_policy_model as model;
use serde_json::Value;

use crate::policy::records::{DecisionRecord, Outcome, RecordKind, Role};
use crate::policy::{Decision, DecisionError, Limits, embedded};

fn template(name: &str) -> model::TemplateObservation {
    let mut observation = model::TemplateObservation::default();
    observation.meta.name = name.into();
    observation.meta.namespace = "default".into();
    observation.meta.generation = 1;
    observation.spec.template = r#"{"resources":{}}"#.into();
    observation.spec.parameters = "{}".into();
    observation.spec_hash = "abc".into();
    observation
}

fn default_policy() -> crate::policy::LoadedPolicy {
    let engine = crate::policy::engine(Limits::default()).expect("engine");
    embedded::load_default(&engine).expect("default policy")
}

/// A record of the default policy's decision for the template `name`
/// (the metrics server's tests serve it too).
pub(crate) fn record(name: &str) -> DecisionRecord {
    let policy = default_policy();
    let observation = template(name);
    let decision = policy
        .decide_template(&observation)
        .map(|decision| decision.map_plan(|plan| plan.actions));
    DecisionRecord::new(
        &policy,
        Role::Enforce,
        &observation,
        &decision,
        Duration::ZERO,
    )
}

#[test]
fn a_decided_record_round_trips_through_its_json_line() {
    let policy = default_policy();
    let observation = template("app");
    let decision = policy
        .decide_template(&observation)
        .map(|decision| decision.map_plan(|plan| plan.actions));
    let record = DecisionRecord::new(
        &policy,
        Role::Shadow,
        &observation,
        &decision,
        Duration::from_micros(1234),
    );
    assert_eq!(record.object, "default/app");
    assert_eq!(record.kind, RecordKind::DeploymentTemplate);
    assert_eq!(record.outcome, Outcome::Ok);
    assert_eq!(record.duration_us, 1234);
    assert!(record.fuel > 0);
    assert_eq!(record.policy.digest, policy.digest());
    let line = record.to_json_line();
    assert!(!line.contains('\n'), "{line}");
    let value: Value = serde_json::from_str(&line).expect("JSON");
    for key in [
        "at",
        "kind",
        "object",
        "policy",
        "role",
        "observation",
        "plan",
        "durationUs",
        "fuel",
        "outcome",
    ] {
        assert!(value.get(key).is_some(), "{key} missing from {line}");
    }
    assert_eq!(value["role"], "shadow");
    assert_eq!(value["kind"], "DeploymentTemplate");
    assert!(
        value["observation"]["deploymentTemplate"].is_object(),
        "{line}"
    );
    assert_eq!(value["plan"][0], "addFinalizer", "{line}");
    assert!(
        DateTime::parse_from_rfc3339(value["at"].as_str().expect("at")).is_ok(),
        "{line}"
    );
    // The observation is exactly the observation-file form.
    let observation_file: model::Observation =
        serde_json::from_value(value["observation"].clone()).expect("observation form");
    assert_eq!(observation_file, record.observation);
    let again = DecisionRecord::from_json_line(&line).expect("parses back");
    assert_eq!(again, record);
}

#[test]
fn errors_are_recorded_with_reason_code_and_message() {
    let refused: Result<Decision<Vec<model::TemplateAction>>, DecisionError> =
        Err(DecisionError::Policy {
            policy: "p".into(),
            error: model::PolicyError {
                code: "Invalid".into(),
                message: "bad spec".into(),
            },
        });
    let policy = default_policy();
    let record = DecisionRecord::new(
        &policy,
        Role::Enforce,
        &template("x"),
        &refused,
        Duration::ZERO,
    );
    assert_eq!(record.outcome, Outcome::Error);
    assert_eq!(record.plan, None);
    let error = record.error.clone().expect("error");
    assert!(error.is_policy_error());
    assert_eq!(error.code.as_deref(), Some("Invalid"));
    assert_eq!(error.message, "bad spec");
    let line = record.to_json_line();
    assert!(!line.contains("\"plan\""), "{line}");
    assert_eq!(
        DecisionRecord::from_json_line(&line).expect("parses"),
        record
    );

    let fuel: Result<Decision<Vec<model::TemplateAction>>, DecisionError> =
        Err(DecisionError::OutOfFuel {
            policy: "p".into(),
            fuel: 7,
        });
    let record = DecisionRecord::new(
        &policy,
        Role::Enforce,
        &template("x"),
        &fuel,
        Duration::ZERO,
    );
    let error = record.error.expect("error");
    assert_eq!(error.reason, "OutOfFuel");
    assert_eq!(error.code, None);
    assert!(error.message.contains("CPU budget"), "{}", error.message);
    assert_eq!(record.fuel, 7);
}
