//! An example custom policy: a guardrail that refuses to deploy any
//! `DeploymentTemplate` whose container images have no tag or use `latest`,
//! and otherwise behaves exactly like the default policy (deletion included).
//!
//! It shows the point of the product: a platform team changes one decision,
//! reuses the rest of `radwasm-policy-core`, ships a `.wasm`, and the host
//! loads it without being rebuilt.

use radwasm_policy_core::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
use radwasm_policy_sdk::model::{
    ConditionStatus, Description, EventType, PolicyError, TEMPLATE_FINALIZER, TemplateAction,
    TemplateObservation, TemplatePhase, TemplatePlan,
};
use radwasm_policy_sdk::{Level, Policy, log};
use serde_json::Value;

struct ImageTagGuardrail;

impl Policy for ImageTagGuardrail {
    fn describe() -> Description {
        let mut description = radwasm_policy_core::describe();
        description.name = "image-tag-guardrail".to_string();
        description.version = env!("CARGO_PKG_VERSION").to_string();
        description.summary =
            "The default policy, plus: a template whose container images have no tag or use \
                               :latest is marked Failed instead of deployed."
                .to_string();
        description
    }

    fn decide_template(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
        if observation.meta.deletion_requested || observation.operation.is_some() {
            return radwasm_policy_core::decide_template(observation);
        }
        let violations = unpinned_images(observation);
        if violations.is_empty() {
            return radwasm_policy_core::decide_template(observation);
        }
        let message = format!(
            "{}; pin a version (guardrail image-tag-guardrail)",
            violations.join("; ")
        );
        let mut plan = TemplatePlanner::new();
        if !observation
            .meta
            .finalizers
            .iter()
            .any(|f| f == TEMPLATE_FINALIZER)
        {
            plan.push(TemplateAction::AddFinalizer);
        }
        let changed = plan.status(
            &observation.status,
            DesiredTemplateStatus {
                phase: Some(TemplatePhase::Failed),
                message: Some(message.clone()),
                observed_generation: Some(observation.meta.generation),
                ready: Some(ready_condition(
                    ConditionStatus::False,
                    "UnpinnedImage",
                    &message,
                )),
                ..Default::default()
            },
        );
        if changed {
            plan.event(EventType::Warning, "UnpinnedImage", message);
        }
        Ok(plan.finish())
    }
}

/// One line per container image without a usable tag.
fn unpinned_images(observation: &TemplateObservation) -> Vec<String> {
    let Ok(template) = serde_json::from_str::<Value>(&observation.spec.template) else {
        // Not JSON: the default policy reports that precisely.
        return Vec::new();
    };
    let parameters: Value =
        serde_json::from_str(&observation.spec.parameters).unwrap_or(Value::Null);
    let resources: Vec<(String, &Value)> = match template.get("resources") {
        Some(Value::Object(map)) => map.iter().map(|(name, r)| (name.clone(), r)).collect(),
        Some(Value::Array(list)) => list
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("#{i}"), r))
            .collect(),
        _ => Vec::new(),
    };
    let mut violations = Vec::new();
    for (symbol, resource) in resources {
        let properties = resource.get("properties");
        // Bicep's Radius extensibility nests the resource body under
        // properties.properties; plain ARM uses properties directly.
        let image = properties
            .and_then(|p| p.pointer("/properties/container/image"))
            .or_else(|| properties.and_then(|p| p.pointer("/container/image")))
            .and_then(Value::as_str);
        let Some(image) = image else { continue };
        let name = properties
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or(&symbol)
            .to_string();
        let Some(image) = resolve(image, &template, &parameters) else {
            log(
                Level::Warn,
                &format!("cannot resolve image expression {image:?} of {name}; not checked"),
            );
            continue;
        };
        if let Some(problem) = tag_problem(&image) {
            violations.push(format!("container {name:?} uses image {image:?} {problem}"));
        }
    }
    violations
}

/// A literal image, or `[parameters('x')]` resolved from the spec's
/// parameters or the template's default; `None` for other expressions.
fn resolve(image: &str, template: &Value, parameters: &Value) -> Option<String> {
    let Some(expression) = image
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    else {
        return Some(image.to_string());
    };
    if image.starts_with("[[") {
        return Some(image[1..].to_string());
    }
    let name = expression
        .trim()
        .strip_prefix("parameters('")?
        .strip_suffix("')")?;
    parameters
        .pointer(&format!("/{name}/value"))
        .or_else(|| template.pointer(&format!("/parameters/{name}/defaultValue")))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Why an image reference is not pinned, or `None` if it is.
fn tag_problem(image: &str) -> Option<&'static str> {
    if image.contains('@') {
        return None; // pinned by digest
    }
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    match last_segment.rsplit_once(':') {
        None => Some("with no tag"),
        Some((_, "")) => Some("with an empty tag"),
        Some((_, "latest")) => Some("with the tag latest"),
        Some(_) => None,
    }
}

radwasm_policy_sdk::export_policy!(ImageTagGuardrail);
