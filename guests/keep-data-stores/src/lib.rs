//! A template layer with one rule: when a `DeploymentTemplate` is deleted,
//! its data stores (Radius types `Applications.Datastores/*`) are kept in
//! Radius. Where the base plans `DeleteResource` for one, the layer plans
//! `DetachResource` instead; the base completes the deletion around it.
//! It is the Rust form of the rule `docs/layers.md` shows in every language.

use radwasm_policy_sdk::Layer;
use radwasm_policy_sdk::model::{
    Description, PolicyError, TemplateAction, TemplateObservation, TemplatePlan,
};

struct KeepDataStores;

impl Layer for KeepDataStores {
    fn describe() -> Description {
        Description {
            name: "keep-data-stores".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            summary: "Keeps a deleted template's data stores in Radius; the base policy decides everything else."
                .to_string(),
            annotations: Vec::new(),
        }
    }

    fn decide_template(
        observation: &TemplateObservation,
        base: TemplatePlan,
    ) -> Result<TemplatePlan, PolicyError> {
        // Only a deletion keeps them: an update that drops a data store
        // from the template deletes it, as the base planned.
        if !observation.meta.deletion_requested {
            return Ok(base);
        }
        let data_store = |name: &str| {
            observation.owned_resources.iter().any(|owned| {
                owned.name == name
                    && owned
                        .radius_id
                        .to_ascii_lowercase()
                        .contains("/providers/applications.datastores/")
            })
        };
        let actions = base
            .actions
            .into_iter()
            .map(|action| match action {
                TemplateAction::DeleteResource(name) if data_store(&name) => {
                    TemplateAction::DetachResource(name)
                }
                other => other,
            })
            .collect();
        Ok(TemplatePlan { actions })
    }
}

radwasm_policy_sdk::export_layer!(KeepDataStores);
