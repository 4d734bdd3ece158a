//! The Radius simulator's template evaluation (`radwasm_sim_radius::
//! evaluate`): any JSON as a template and as its ARM parameters, in the
//! shapes a deployment sends (the template itself, as `resources`, and as a
//! variable read by an output).
//!
//! - A result or an error, never a panic, a stack overflow or unbounded
//!   memory.
//! - What evaluates is consistent: every resource id lies in the scope, a
//!   resource comes after the resources it depends on, and the output
//!   resources are deployed resources, each once.
//!
//! Input: `template NUL parameters` (JSON texts; missing parameters are
//! `{}`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::split_nul;
use radwasm_sim_radius::{Evaluation, EvaluationRequest, evaluate};
use serde_json::{Value, json};

const SCOPE: &str = "/planes/radius/local/resourceGroups/rg";

fn run(template: &Value, parameters: &Value) {
    let Ok(evaluation) = evaluate(&EvaluationRequest {
        scope: SCOPE,
        template,
        parameters,
        deployment_name: "d",
        existing: None,
    }) else {
        return;
    };
    check(&evaluation);
}

fn check(evaluation: &Evaluation) {
    let scope = format!("{}/", SCOPE.to_ascii_lowercase());
    let mut seen: Vec<String> = Vec::new();
    for resource in &evaluation.resources {
        assert!(
            resource.id.to_ascii_lowercase().starts_with(&scope),
            "{} outside the scope",
            resource.id
        );
        for dependency in &resource.depends_on {
            assert!(
                seen.iter().any(|id| id.eq_ignore_ascii_case(dependency)),
                "{} before {}",
                resource.id,
                dependency
            );
        }
        seen.push(resource.id.clone());
    }
    let outputs = evaluation.output_resource_ids();
    for (n, id) in outputs.iter().enumerate() {
        assert!(
            evaluation
                .resources
                .iter()
                .any(|r| !r.existing && &r.id == id),
            "{id}"
        );
        assert!(
            !outputs[..n]
                .iter()
                .any(|other| other.eq_ignore_ascii_case(id)),
            "{id} twice"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let parts = split_nul(data, 2);
    let Ok(template) = serde_json::from_slice::<Value>(parts[0]) else {
        return;
    };
    let parameters = if parts[1].is_empty() {
        json!({})
    } else {
        match serde_json::from_slice::<Value>(parts[1]) {
            Ok(parameters) => parameters,
            Err(_) => return,
        }
    };
    run(&template, &parameters);
    run(&json!({"resources": template.clone()}), &json!({}));
    run(
        &json!({"variables": {"v0": template}, "outputs": {"o": {"value": "[variables('v0')]"}}}),
        &parameters,
    );
});
