//! A template with more outputs than one plan may carry (the host refuses
//! plans of more than 1,024 actions) converges over several decisions, and
//! is not Ready until every output has its `DeploymentResource`.

use radwasm_policy_core::template::MAX_CHANGES_PER_PLAN;
use radwasm_policy_model::{TemplateAction, TemplateObservation, TemplatePhase};
use serde_json::json;

const SCOPE: &str = "/planes/radius/local/resourceGroups/default";
const FINALIZER: &str = "radapp.io/deployment-template-finalizer";

fn id(n: usize) -> String {
    format!("{SCOPE}/providers/Applications.Core/containers/c{n}")
}

/// A deployed, up-to-date template with `outputs` output resources, of which
/// the first `owned` already have their `DeploymentResource`.
fn observation(outputs: usize, owned: usize, phase: TemplatePhase) -> TemplateObservation {
    let ids: Vec<String> = (0..outputs).map(id).collect();
    let owned: Vec<_> = (0..owned)
        .map(|n| json!({"name": format!("c{n}"), "radiusId": id(n), "phase": "Ready"}))
        .collect();
    serde_json::from_value(json!({
        "meta": {"name": "big", "namespace": "default", "uid": "uid-big", "generation": 1,
                 "finalizers": [FINALIZER]},
        "spec": {
            "template": {"resources": {}},
            "parameters": {},
            "providerConfig": {"radius": {"type": "Radius", "value": {"scope": SCOPE}}}
        },
        "specHash": "h1",
        "status": {"phase": phase, "observedGeneration": 1, "statusHash": "h1",
                   "outputResources": ids},
        "ownedResources": owned
    }))
    .expect("observation")
}

fn creates(actions: &[TemplateAction]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, TemplateAction::CreateResource(_)))
        .count()
}

fn phase(actions: &[TemplateAction]) -> Option<TemplatePhase> {
    actions.iter().find_map(|a| match a {
        TemplateAction::SetStatus(update) => update.phase,
        _ => None,
    })
}

#[test]
fn more_outputs_than_a_plan_holds_are_created_over_several_decisions() {
    let outputs = 2 * MAX_CHANGES_PER_PLAN + 200;
    let mut owned = 0;
    let mut decisions = 0;
    // The status phase as the host writes it back between decisions.
    let mut status_phase = TemplatePhase::Ready;
    loop {
        let plan = radwasm_policy_core::decide_template(&observation(outputs, owned, status_phase))
            .expect("decides");
        if let Some(phase) = phase(&plan.actions) {
            status_phase = phase;
        }
        assert!(plan.actions.len() <= 1024, "{} actions", plan.actions.len());
        let created = creates(&plan.actions);
        decisions += 1;
        if owned + created < outputs {
            assert_eq!(created, MAX_CHANGES_PER_PLAN);
            assert_eq!(status_phase, TemplatePhase::Updating);
            assert!(
                plan.actions
                    .iter()
                    .any(|a| matches!(a, TemplateAction::RequeueAfter(_))),
                "comes back for the rest"
            );
        }
        owned += created;
        if created == 0 {
            assert_eq!(status_phase, TemplatePhase::Ready);
            break;
        }
        assert!(decisions < 10, "does not converge");
    }
    assert_eq!(owned, outputs);
    assert_eq!(decisions, 4, "three creating decisions, then Ready");
}
