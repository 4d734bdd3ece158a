//! The default radwasm reconcile policy as pure Rust functions: no clock, no
//! randomness, no I/O, no global state. The default policy guest wraps these;
//! a platform team's custom policy can call them and change only what it
//! needs (see `guests/image-tag-guardrail`).
//!
//! Start at [`decide_template`] and [`decide_resource`]; the modules hold the
//! reusable pieces (spec validation, annotation knobs, naming, plan builders).

pub mod annotations;
pub mod naming;
pub mod plan;
pub mod resource;
pub mod spec;
pub mod template;
pub mod timing;

use radwasm_policy_model::{
    AnnotationDoc, Description, PolicyError, ResourceObservation, ResourcePlan,
    TemplateObservation, TemplatePlan,
    annotations::{DEPENDS_ON, DEPLOYMENT_RETRY, DRIFT, HOLD, RECONCILE_POLICY},
};

/// Version of the default policy (this crate's version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The default policy's self-description.
pub fn describe() -> Description {
    Description {
        name: "default".to_string(),
        version: VERSION.to_string(),
        summary: "Deploys DeploymentTemplates through Radius, keeps one DeploymentResource per output resource, \
                  repairs drift, retries failed deployments with backoff and deletes in a safe order."
            .to_string(),
        annotations: vec![
            AnnotationDoc {
                name: RECONCILE_POLICY.to_string(),
                description: "manage (default) | skip: observe and report only, never change Radius | \
                              detach-on-delete: on deletion remove the Kubernetes objects, keep the Radius resources; \
                              any other value fails the object and nothing is changed in Radius"
                    .to_string(),
            },
            AnnotationDoc {
                name: HOLD.to_string(),
                description: "true | false (default): true pauses the object: phase Held, nothing else is done \
                              until it is removed or false; any other value is false, with a Warning event"
                    .to_string(),
            },
            AnnotationDoc {
                name: DEPLOYMENT_RETRY.to_string(),
                description: "never | a first delay such as 30s (default) or 2m: a deployment Radius failed is \
                              retried after that delay, doubling per failure up to 10m; never waits for a spec change; \
                              any other value is 30s, with a Warning event"
                    .to_string(),
            },
            AnnotationDoc {
                name: DRIFT.to_string(),
                description: "redeploy (default) | report: when the controller's drift check finds resources this \
                              template deployed missing in Radius, redeploy the template once, or only say so in \
                              status and an Event; any other value is redeploy, with a Warning event"
                    .to_string(),
            },
            AnnotationDoc {
                name: DEPENDS_ON.to_string(),
                description: "comma-separated DeploymentTemplate names in the same namespace that must be Ready \
                              before this one deploys"
                    .to_string(),
            },
        ],
    }
}

/// Decide what to do next for a `DeploymentTemplate`.
pub fn decide_template(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
    template::decide(observation)
}

/// Decide what to do next for a `DeploymentResource`.
pub fn decide_resource(observation: &ResourceObservation) -> Result<ResourcePlan, PolicyError> {
    resource::decide(observation)
}
