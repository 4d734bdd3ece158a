//! Modules: nested deployments with an inline template, evaluated by an
//! evaluator of their own.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::resources::provider_state;
use super::{Evaluator, Identity};
use crate::arm::functions::stringify;
use crate::arm::{Evaluation, EvaluationRequest};
use crate::error::ArmError;
use crate::ids;

/// Fields of a nested deployment's `properties` the simulator cannot honour.
const UNSUPPORTED_MODULE_PROPERTIES: &[&str] =
    &["templateLink", "parametersLink", "onErrorDeployment"];

impl<'a> Evaluator<'a> {
    /// Evaluate a module: its parameters here, its template by an evaluator
    /// of its own. The body is the deployment as ARM reports it once it has
    /// succeeded, so `reference()` finds `outputs` in its properties.
    pub(super) fn compute_module(
        &mut self,
        index: usize,
        identity: &Identity,
    ) -> Result<Value, ArmError> {
        let declaration = self.instances[index].declaration;
        let location = self.instances[index].location.clone();
        let module = self.instances[index].instance_name.clone();
        let properties = module_properties(declaration, &module, &location)?;
        self.check_module_options(properties, &module, &location)?;
        let template = properties
            .get("template")
            .filter(|template| template.is_object())
            .ok_or_else(|| {
                ArmError::invalid_template(format!(
                    "The module '{module}' has no inline template: 'properties.template' must be a JSON object"
                ))
            })?;
        let parameters = match properties.get("parameters") {
            Some(parameters) => {
                self.eval_value(parameters, &format!("{location}.properties.parameters"))?
            }
            None => Value::Null,
        };
        let planned = self.planned_before(index)?;
        let nested = self
            .evaluate_module_template(template, &parameters, &identity.name, &planned)
            .map_err(|mut error| {
                error.message = format!("In module '{module}': {}", error.message);
                error
            })?;
        let body = module_body(&identity.name, parameters, &nested);
        self.instances[index].nested = Some(nested);
        Ok(body)
    }

    /// Refuse a module evaluated in the `outer` scope or in a mode other
    /// than `Incremental`.
    fn check_module_options(
        &mut self,
        properties: &Map<String, Value>,
        module: &str,
        location: &str,
    ) -> Result<(), ArmError> {
        let evaluation_scope = match properties
            .get("expressionEvaluationOptions")
            .and_then(|options| options.get("scope"))
        {
            Some(scope) => self.eval_value(
                scope,
                &format!("{location}.properties.expressionEvaluationOptions.scope"),
            )?,
            None => Value::Null,
        };
        if !evaluation_scope
            .as_str()
            .is_some_and(|scope| scope.eq_ignore_ascii_case("inner"))
        {
            return Err(ArmError::invalid_template(format!(
                "The module '{module}' is evaluated in the '{}' scope, which the Radius simulator does not support; set 'properties.expressionEvaluationOptions.scope' to 'inner' (as Bicep does)",
                evaluation_scope.as_str().unwrap_or("outer")
            )));
        }
        if let Some(mode) = properties.get("mode") {
            let mode = self.eval_value(mode, &format!("{location}.properties.mode"))?;
            if !mode
                .as_str()
                .is_some_and(|mode| mode.eq_ignore_ascii_case("Incremental"))
            {
                return Err(ArmError::invalid_template(format!(
                    "The module '{module}' has the deployment mode '{}'; the Radius simulator supports only 'Incremental'",
                    stringify(&mode)
                )));
            }
        }
        Ok(())
    }

    /// The resources this template deploys before the module at `index`
    /// starts, as their providers will return them, by [`ids::key`]: the
    /// module's `existing` resources may be among them.
    fn planned_before(&mut self, index: usize) -> Result<HashMap<String, Value>, ArmError> {
        let mut planned: HashMap<String, Value> = HashMap::new();
        for before in self.deployed_before(index)? {
            if let Some(nested) = &self.instances[before].nested {
                for resource in nested.resources.iter().filter(|r| !r.existing) {
                    let state = provider_state(
                        &resource.id,
                        &resource.name,
                        &resource.resource_type,
                        resource.api_version.as_deref(),
                        resource.body.clone(),
                    );
                    planned.insert(ids::key(&resource.id), state);
                }
            } else if !self.instances[before].existing {
                let state = self.runtime_state(before)?;
                let id = self.identity(before)?.id;
                planned.insert(ids::key(&id), state);
            }
        }
        Ok(planned)
    }

    /// Evaluate a module's template as the deployment `deployment_name`, its
    /// `existing` resources found among `planned` first, then as this
    /// evaluation finds them; it shares this evaluation's bounds.
    fn evaluate_module_template(
        &mut self,
        template: &Value,
        parameters: &Value,
        deployment_name: &str,
        planned: &HashMap<String, Value>,
    ) -> Result<Evaluation, ArmError> {
        let outer = self.existing;
        let lookup = |id: &str| {
            planned
                .get(&ids::key(id))
                .cloned()
                .or_else(|| outer.and_then(|lookup| lookup(id)))
        };
        let request = EvaluationRequest {
            scope: &self.scope,
            template,
            parameters,
            deployment_name,
            existing: Some(&lookup),
        };
        let mut produced = self.produced;
        let nested = Evaluator::run_nested(&request, self.nesting, &mut produced);
        self.produced = produced;
        nested
    }
}

/// A module's `properties`, refusing those the simulator cannot honour.
fn module_properties<'m>(
    declaration: &'m Map<String, Value>,
    module: &str,
    location: &str,
) -> Result<&'m Map<String, Value>, ArmError> {
    let Some(Value::Object(properties)) = declaration.get("properties") else {
        return Err(ArmError::invalid_template(format!(
            "The module '{module}' (at {location}) has no 'properties' object"
        )));
    };
    for unsupported in UNSUPPORTED_MODULE_PROPERTIES {
        if properties.contains_key(*unsupported) {
            return Err(ArmError::invalid_template(format!(
                "The module '{module}' uses 'properties.{unsupported}', which the Radius simulator does not support; Bicep compiles a module to an inline 'properties.template'"
            )));
        }
    }
    Ok(properties)
}

/// A module's body: the deployment `name` as ARM reports it once it has
/// succeeded, with the `parameters` passed in and what `nested` deployed.
fn module_body(name: &str, parameters: Value, nested: &Evaluation) -> Value {
    let output_resources: Vec<Value> = nested
        .output_resource_ids()
        .into_iter()
        .map(|id| serde_json::json!({ "id": id }))
        .collect();
    serde_json::json!({
        "name": name,
        "properties": {
            "mode": "Incremental",
            "parameters": parameters,
            "outputs": nested.outputs,
            "outputResources": output_resources,
            "provisioningState": "Succeeded",
        },
    })
}
