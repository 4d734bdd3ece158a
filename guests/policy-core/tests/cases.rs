//! The default policy's fixture case set, run natively against
//! `radwasm-policy-core`. The same files run through the wasm guest in
//! `radwasm policy test` (host/tests/policy_cli.rs); both must agree.

use std::path::Path;

use radwasm_policy_model::cases::{check, load_cases};
use radwasm_policy_model::{Observation, Plan};

#[test]
fn every_default_policy_case_passes_natively() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../default-policy/cases");
    let cases = load_cases(&dir).unwrap_or_else(|error| panic!("{error}"));
    assert!(
        cases.len() >= 60,
        "the case set shrank to {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for loaded in &cases {
        let outcome = match &loaded.case.observation {
            Observation::DeploymentTemplate(o) => {
                radwasm_policy_core::decide_template(o).map(Plan::DeploymentTemplate)
            }
            Observation::DeploymentResource(o) => {
                radwasm_policy_core::decide_resource(o).map(Plan::DeploymentResource)
            }
        };
        if let Err(mismatch) = check(&loaded.case, &outcome) {
            failures.push(format!("{}: {mismatch}", loaded.path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn both_kinds_and_every_template_phase_are_covered() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../default-policy/cases");
    let text: String = load_cases(&dir)
        .unwrap_or_else(|error| panic!("{error}"))
        .iter()
        .map(|loaded| serde_json::to_string(&loaded.case.expect.actions).unwrap_or_default())
        .collect();
    for needle in [
        "\"Updating\"",
        "\"Ready\"",
        "\"ReadyPendingCleanup\"",
        "\"Deleting\"",
        "\"Failed\"",
        "\"Held\"",
        "addFinalizer",
        "removeFinalizer",
        "ensureResourceGroup",
        "startDeployment",
        "createResource",
        "deleteResource",
        "startRadiusDelete",
        "emitEvent",
        "requeueAfter",
        "clearOperation",
    ] {
        assert!(text.contains(needle), "no case expects {needle}");
    }
}
