//! What an evaluation reports: the outputs, and the resources and modules
//! in deployment order.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{CopyFrame, Evaluator, Slot, object};
use crate::arm::{EvaluatedResource, ModuleDeployment};
use crate::error::ArmError;

impl<'a> Evaluator<'a> {
    pub(super) fn outputs(&mut self) -> Result<Map<String, Value>, ArmError> {
        let mut out = Map::new();
        let Some(outputs) = self.template.get("outputs").filter(|o| !o.is_null()) else {
            return Ok(out);
        };
        for (name, output) in object(outputs, "The template's 'outputs'")? {
            let output = object(output, &format!("The output '{name}'"))?;
            if let Some(condition) = output.get("condition")
                && self.eval_value(condition, &format!("outputs.{name}.condition"))?
                    == Value::Bool(false)
            {
                continue;
            }
            let value = match (output.get("copy"), output.get("value")) {
                (Some(copy), _) => self.output_copy(name, copy)?,
                (None, Some(value)) => self.eval_value(value, &format!("outputs.{name}.value"))?,
                (None, None) => Value::Null,
            };
            let mut entry = Map::new();
            if let Some(t) = output.get("type") {
                entry.insert("type".into(), t.clone());
            }
            entry.insert("value".into(), value);
            out.insert(name.clone(), Value::Object(entry));
        }
        Ok(out)
    }

    /// An output with `copy` (`{"count", "input"}`): an array of `count`
    /// evaluations of `input`, with `copyIndex()` counting.
    fn output_copy(&mut self, name: &str, copy: &Value) -> Result<Value, ArmError> {
        let at = format!("outputs.{name}.copy");
        let copy = object(copy, &format!("'copy' of output '{name}'"))?;
        let count = copy.get("count").ok_or_else(|| {
            ArmError::invalid_template(format!("'copy' of output '{name}' has no 'count'"))
        })?;
        let count = self.eval_value(count, &format!("{at}.count"))?;
        let count = count.as_u64().filter(|c| *c <= 800).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "'copy.count' of output '{name}' must be an integer from 0 to 800"
            ))
        })?;
        let input = copy.get("input").ok_or_else(|| {
            ArmError::invalid_template(format!("'copy' of output '{name}' has no 'input'"))
        })?;
        let mut items = Vec::new();
        for index in 0..count as usize {
            let frame = Some(CopyFrame { name: None, index });
            let at = format!("{at}.input[{index}]");
            let item = self.with_copy(frame, |this| this.eval_value(input, &at))?;
            items.push(self.produce(item, &at)?);
        }
        Ok(Value::Array(items))
    }

    /// The resources in deployment order, with each module replaced by what
    /// it deploys, and the modules themselves.
    pub(super) fn results(
        &self,
        order: &[usize],
    ) -> (Vec<EvaluatedResource>, Vec<ModuleDeployment>) {
        let position: HashMap<usize, usize> = order
            .iter()
            .enumerate()
            .map(|(at, index)| (*index, at))
            .collect();
        let mut resources = Vec::new();
        let mut modules = Vec::new();
        for &index in order {
            let instance = &self.instances[index];
            let Some(identity) = instance.identity.as_ref() else {
                continue;
            };
            let mut depends: Vec<usize> = instance.references.iter().copied().collect();
            depends.sort_by_key(|d| position.get(d).copied().unwrap_or(usize::MAX));
            let depends_on: Vec<String> =
                depends.iter().flat_map(|d| self.deployed_ids(*d)).collect();
            let body = match &instance.body {
                Slot::Done(body) => body.clone(),
                _ => Value::Null,
            };
            let Some(nested) = &instance.nested else {
                resources.push(EvaluatedResource {
                    symbolic_name: instance.instance_name.clone(),
                    id: identity.id.clone(),
                    name: identity.name.clone(),
                    resource_type: identity.resource_type.clone(),
                    api_version: identity.api_version.clone(),
                    existing: instance.existing,
                    body,
                    depends_on,
                    module_path: Vec::new(),
                });
                continue;
            };
            // The module's deployment starts once what it waits for is done,
            // so each of its resources waits for that too.
            for resource in &nested.resources {
                let mut resource = resource.clone();
                resource.module_path.insert(0, identity.name.clone());
                let mut waits_for = depends_on.clone();
                for id in resource.depends_on {
                    if !waits_for.contains(&id) {
                        waits_for.push(id);
                    }
                }
                resource.depends_on = waits_for;
                resources.push(resource);
            }
            modules.push(ModuleDeployment {
                symbolic_name: instance.instance_name.clone(),
                id: identity.id.clone(),
                name: identity.name.clone(),
                path: vec![identity.name.clone()],
                parameters: body
                    .pointer("/properties/parameters")
                    .cloned()
                    .unwrap_or(Value::Null),
                outputs: nested.outputs.clone(),
                output_resources: nested.output_resource_ids(),
            });
            for inner in &nested.modules {
                let mut inner = inner.clone();
                inner.path.insert(0, identity.name.clone());
                modules.push(inner);
            }
        }
        (resources, modules)
    }

    /// The ids an instance stands for in `depends_on`: its own, or for a
    /// module the resources it deploys.
    fn deployed_ids(&self, index: usize) -> Vec<String> {
        let instance = &self.instances[index];
        match (&instance.nested, &instance.identity) {
            (Some(nested), _) => nested.output_resource_ids(),
            (None, Some(identity)) => vec![identity.id.clone()],
            (None, None) => Vec::new(),
        }
    }
}
