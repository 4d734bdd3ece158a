//! A test-only guest for the shadow canary e2e test
//! (`tests/e2e/policies.rs`,
//! `a_canary_differing_on_one_annotation_disagrees_only_there_and_changes_nothing`):
//! the default policy, except for one annotation the default does not read.
//!
//! On a `DeploymentTemplate` annotated `canary.radwasm.io/quiet: "true"`
//! its plan is the default policy's without the `emitEvent` actions.
//! Everywhere else (other templates, every `DeploymentResource`) its plans
//! are exactly the default's, so run as a `Shadow` policy beside the default
//! it disagrees on the annotated templates' decisions that emit an event,
//! and nowhere else. Never ship this guest.

use radwasm_policy_sdk::Policy;
use radwasm_policy_sdk::model::{
    AnnotationDoc, Description, PolicyError, TemplateAction, TemplateObservation, TemplatePlan,
};

/// The one annotation the canary reads, and the value that makes it differ.
const QUIET: &str = "canary.radwasm.io/quiet";

struct AnnotationCanary;

impl Policy for AnnotationCanary {
    fn describe() -> Description {
        let mut description = radwasm_policy_core::describe();
        description.name = "annotation-canary".to_string();
        description.version = env!("CARGO_PKG_VERSION").to_string();
        description.summary =
            "Test only: the default policy, minus the events of templates annotated quiet."
                .to_string();
        description.annotations.push(AnnotationDoc {
            name: QUIET.to_string(),
            description: "true: the template's plans emit no events; anything else: the default"
                .to_string(),
        });
        description
    }

    fn decide_template(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
        let mut plan = radwasm_policy_core::decide_template(observation)?;
        if observation.meta.annotations.get(QUIET).map(String::as_str) == Some("true") {
            plan.actions
                .retain(|action| !matches!(action, TemplateAction::EmitEvent(_)));
        }
        Ok(plan)
    }
}

radwasm_policy_sdk::export_policy!(AnnotationCanary);
