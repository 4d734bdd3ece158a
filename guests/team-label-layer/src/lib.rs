//! A layer over the default policy with one rule: a `DeploymentTemplate`
//! without a `team` label is refused (nothing is deployed; its status says
//! why), and everything else is the base policy's plan, unchanged. It is the
//! Rust form of the layer `radwasm policy new` scaffolds in every language,
//! and the layer the host's tests and benchmarks run over the default.

use radwasm_policy_sdk::Layer;
use radwasm_policy_sdk::model::{Description, PolicyError, TemplateObservation, TemplatePlan};

/// The label every template must carry.
const TEAM: &str = "team";

struct TeamLabel;

impl Layer for TeamLabel {
    fn describe() -> Description {
        Description {
            name: "team-label-layer".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            summary: "Refuses DeploymentTemplates without a team label; the base policy decides everything else."
                .to_string(),
            annotations: Vec::new(),
        }
    }

    fn decide_template(
        observation: &TemplateObservation,
        base: TemplatePlan,
    ) -> Result<TemplatePlan, PolicyError> {
        // A template being deleted is never refused: the base removes what
        // it deployed and then its finalizer.
        if !observation.meta.deletion_requested && !observation.meta.labels.contains_key(TEAM) {
            return Err(PolicyError {
                code: "MissingTeamLabel".to_string(),
                message: format!(
                    "DeploymentTemplate {}/{} has no `{TEAM}` label; add one to deploy it",
                    observation.meta.namespace, observation.meta.name
                ),
            });
        }
        Ok(base)
    }
}

// Built twice: as a layer the host runs over any base, and (feature
// `linked`, `team-label-linked.wasm` among the built guests) with the
// default policy linked in as its base.
#[cfg(not(feature = "linked"))]
radwasm_policy_sdk::export_layer!(TeamLabel);
#[cfg(feature = "linked")]
radwasm_policy_sdk::export_linked_layer!(TeamLabel);
