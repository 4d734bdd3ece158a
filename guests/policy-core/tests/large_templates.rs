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

/// A template deleted while its deployment of more outputs than a plan holds
/// finishes: it adopts the outputs over several decisions, keeping the
/// operation until every output has its `DeploymentResource` (one plan
/// adopting them all was more than the host accepts, and the template was
/// stuck in deletion).
#[test]
fn a_deletion_adopts_more_outputs_than_a_plan_holds_over_several_decisions() {
    let outputs = 2 * MAX_CHANGES_PER_PLAN + 200;
    let ids: Vec<String> = (0..outputs).map(id).collect();
    let mut owned = 0;
    let mut decisions = 0;
    loop {
        let mut observation = observation(outputs, owned, TemplatePhase::Ready);
        observation.meta.deletion_requested = true;
        observation.status.status_hash = None;
        observation.status.output_resources.clear();
        observation.operation = Some(
            serde_json::from_value(json!({
                "kind": "deployment", "subject": "h1",
                "result": {"succeeded": {"outputResources": ids}}
            }))
            .expect("operation"),
        );
        let plan = radwasm_policy_core::decide_template(&observation).expect("decides");
        assert!(plan.actions.len() <= 1024, "{} actions", plan.actions.len());
        decisions += 1;
        let created = creates(&plan.actions);
        let cleared = plan
            .actions
            .iter()
            .any(|a| matches!(a, TemplateAction::SetStatus(update) if update.clear_operation));
        owned += created;
        if owned < outputs {
            assert_eq!(created, MAX_CHANGES_PER_PLAN);
            assert!(!cleared, "keeps the operation until all are adopted");
        } else {
            assert!(cleared, "clears the operation once all are adopted");
            break;
        }
        assert!(decisions < 10, "does not converge");
    }
    assert_eq!(owned, outputs);
    assert_eq!(decisions, 3);
}

/// A detached deletion (`skip`, `detach-on-delete`) of more
/// `DeploymentResource`s than a plan holds deletes them over several
/// decisions (one plan deleting them all was more than the host accepts).
#[test]
fn a_detached_deletion_of_more_resources_than_a_plan_holds_takes_several_decisions() {
    let outputs = 2 * MAX_CHANGES_PER_PLAN + 200;
    for mode in ["skip", "detach-on-delete"] {
        let mut observation = observation(outputs, outputs, TemplatePhase::Ready);
        observation.meta.deletion_requested = true;
        observation
            .meta
            .annotations
            .insert("radapp.io/reconcile-policy".to_string(), mode.to_string());
        let plan = radwasm_policy_core::decide_template(&observation).expect("decides");
        let deletes = plan
            .actions
            .iter()
            .filter(|a| matches!(a, TemplateAction::DeleteResource(_)))
            .count();
        assert_eq!(deletes, MAX_CHANGES_PER_PLAN, "{mode}");
        assert!(plan.actions.len() <= 1024, "{} actions", plan.actions.len());
    }
}
