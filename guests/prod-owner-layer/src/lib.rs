//! A template layer with one rule on the template's namespace (contract
//! 0.6): a template in a namespace labelled `env=prod` that has no `owner`
//! annotation is refused; deleting one never is. The base policy decides
//! everything else. It is the Rust form of the rule `docs/layers.md` ("A
//! rule on the namespace") shows: `decide_template` below is that block
//! (`host/tests/policy_namespace.rs` compares the two).

use radwasm_policy_sdk::Layer;
use radwasm_policy_sdk::model::{Description, PolicyError, TemplateObservation, TemplatePlan};

struct ProdOwner;

impl Layer for ProdOwner {
    fn describe() -> Description {
        Description {
            name: "prod-owner-layer".to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            summary: "Refuses DeploymentTemplates in namespaces labelled env=prod that have no owner annotation; the base policy decides everything else."
                .to_string(),
            annotations: Vec::new(),
        }
    }

    fn decide_template(
        observation: &TemplateObservation,
        base: TemplatePlan,
    ) -> Result<TemplatePlan, PolicyError> {
        let namespace = &observation.namespace;
        let prod = namespace.labels.get("env").is_some_and(|env| env == "prod");
        if prod
            && !namespace.annotations.contains_key("owner")
            && !observation.meta.deletion_requested
        {
            let message = format!(
                "namespace {} is labelled env=prod and has no owner annotation",
                observation.meta.namespace
            );
            return Err(PolicyError {
                code: "MissingNamespaceOwner".into(),
                message,
            });
        }
        Ok(base)
    }
}

radwasm_policy_sdk::export_layer!(ProdOwner);
