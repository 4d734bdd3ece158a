//! Evaluation of Bicep-compiled ARM templates, far enough to know which
//! resources a deployment creates, with which ids, bodies and order.
//!
//! Both template shapes Bicep emits are understood: `languageVersion` 2.x
//! with a map of symbolic names to resources (Radius resources carry
//! `import`/`extension` and keep their `name` inside `properties`), and the
//! older array of resources. Bicep modules (nested
//! `Microsoft.Resources/deployments` with an inline template evaluated in the
//! `inner` scope) are evaluated as deployments of their own and flattened
//! into the result. See `docs/radius-simulator.md` for the subset.

mod evaluator;
pub mod expr;
mod functions;

use serde::Serialize;
use serde_json::{Map, Value};

pub use crate::error::ArmError;
pub(crate) use functions::type_name as expr_type_name;

/// One resource of an evaluated template.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvaluatedResource {
    /// The symbolic name (`env`, or `env[2]` for a copy); for templates with
    /// a resource array, the resource's name.
    pub symbolic_name: String,
    /// `{scope}/providers/{Namespace}/{type}/{name}`.
    pub id: String,
    pub name: String,
    /// The type without the API version (`Applications.Core/environments`).
    pub resource_type: String,
    pub api_version: Option<String>,
    /// Declared `existing`: referenced, never deployed, not an output resource.
    pub existing: bool,
    /// The evaluated body sent to the resource provider
    /// (`{"name", "location", "properties": {...}}`).
    pub body: Value,
    /// Ids of the resources this one waits for (`dependsOn` and references).
    /// A dependency on a module stands for the resources that module deploys.
    pub depends_on: Vec<String>,
    /// The names of the nested deployments (Bicep modules) that deploy this
    /// resource, outermost first; empty for the template's own resources.
    pub module_path: Vec<String>,
}

impl EvaluatedResource {
    /// The evaluated `properties` object (an empty object if none).
    pub fn properties(&self) -> Value {
        self.body
            .get("properties")
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()))
    }
}

/// One nested deployment (a Bicep module) of an evaluated template.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModuleDeployment {
    /// The module's symbolic name (`backend`, `workers[1]`); for templates
    /// with a resource array, the deployment name.
    pub symbolic_name: String,
    /// `{scope}/providers/Microsoft.Resources/deployments/{name}`.
    pub id: String,
    /// The deployment name, which is what `deployment().name` answers inside.
    pub name: String,
    /// The names of the deployments from the outermost module down to this
    /// one (`["infra", "network"]`).
    pub path: Vec<String>,
    /// The parameters passed in, evaluated in the declaring template:
    /// `{"name": {"value": ...}}`.
    pub parameters: Value,
    /// The module's `outputs` as ARM reports them: `{"name": {"type", "value"}}`.
    pub outputs: Map<String, Value>,
    /// Ids of the resources the module (and the modules inside it) deploys.
    pub output_resources: Vec<String>,
}

/// Everything a deployment of a template produces.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// All resources that are not switched off by `condition`, in an order
    /// that honours every dependency. `existing` ones are included, flagged.
    /// Resources deployed by modules are included where the module is
    /// deployed (see [`EvaluatedResource::module_path`]); the nested
    /// deployments themselves are not resources, they are listed in
    /// [`Evaluation::modules`].
    pub resources: Vec<EvaluatedResource>,
    /// `outputs` as ARM reports them: `{"name": {"type", "value"}}`.
    pub outputs: Map<String, Value>,
    /// The nested deployments, each before the modules it contains.
    pub modules: Vec<ModuleDeployment>,
}

impl Evaluation {
    /// Ids of the resources the deployment creates or updates, in order: what
    /// Radius lists as `properties.outputResources`. Resources deployed by
    /// modules count (as in the Radius deployment engine); the modules'
    /// `Microsoft.Resources/deployments` records do not. An id deployed twice
    /// (by the template and by a module) is listed once.
    pub fn output_resource_ids(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        self.resources
            .iter()
            .filter(|r| !r.existing && seen.insert(crate::ids::key(&r.id)))
            .map(|r| r.id.clone())
            .collect()
    }
}

/// Looks up the current body of a resource (for `existing` resources).
/// `Sync`: the evaluation runs on a thread of its own (see [`evaluate`]).
pub type ExistingLookup<'a> = &'a (dyn Fn(&str) -> Option<Value> + Sync);

/// Inputs of one evaluation.
pub struct EvaluationRequest<'a> {
    /// Where resources are created: `/planes/radius/local/resourceGroups/rg`.
    pub scope: &'a str,
    pub template: &'a Value,
    /// The ARM parameters object: `{"name": {"value": ...}}`.
    pub parameters: &'a Value,
    /// What `deployment().name` answers.
    pub deployment_name: &'a str,
    /// Current bodies for `reference()` on `existing` resources; without it
    /// the declared body stands in.
    pub existing: Option<ExistingLookup<'a>>,
}

/// Stack of the thread an evaluation runs on. The evaluator recurses per
/// nested value, expression level and link of a chain (bounded by
/// [`expr::MAX_DEPTH`] and the evaluator's nesting limit); a request
/// handler's 2 MiB would overflow, in a debug build, on a chain of under a
/// hundred references. Only the pages used are ever committed.
const EVALUATION_STACK_BYTES: usize = 256 << 20;

/// Evaluate a template: resources, their ids and order, and outputs.
pub fn evaluate(request: &EvaluationRequest<'_>) -> Result<Evaluation, ArmError> {
    std::thread::scope(|scope| {
        let evaluation = std::thread::Builder::new()
            .name("arm-evaluate".to_string())
            .stack_size(EVALUATION_STACK_BYTES)
            .spawn_scoped(scope, || evaluator::Evaluator::run(request))
            .map_err(|error| {
                ArmError::new(
                    crate::error::codes::INTERNAL_SERVER_ERROR,
                    format!("The template evaluation could not be started: {error}"),
                )
            })?;
        evaluation
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Evaluate a template in `scope` with ARM `parameters` (pure: nothing is
/// looked up). Returns every resource not switched off by a `condition`, in
/// dependency order; `existing` resources are included with
/// [`EvaluatedResource::existing`] set.
pub fn evaluate_template(
    scope: &str,
    template: &Value,
    parameters: &Value,
) -> Result<Vec<EvaluatedResource>, ArmError> {
    evaluate(&EvaluationRequest {
        scope,
        template,
        parameters,
        deployment_name: "deployment",
        existing: None,
    })
    .map(|evaluation| evaluation.resources)
}

#[cfg(test)]
mod tests;
