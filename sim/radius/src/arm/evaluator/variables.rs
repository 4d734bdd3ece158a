//! Variables (plain and `copy` arrays) and user-defined functions.

use serde_json::Value;

use super::{Evaluator, Slot, Variable, VariableSource, object};
use crate::error::ArmError;

impl<'a> Evaluator<'a> {
    pub(super) fn declare_variables(&mut self) -> Result<(), ArmError> {
        let Some(variables) = self.template.get("variables").filter(|v| !v.is_null()) else {
            return Ok(());
        };
        for (name, value) in object(variables, "The template's 'variables'")? {
            if name == "copy" {
                let Value::Array(entries) = value else {
                    return Err(ArmError::invalid_template(
                        "The variables' 'copy' must be an array",
                    ));
                };
                for entry in entries {
                    let entry = object(entry, "A variables 'copy' entry")?;
                    let copy_name = entry.get("name").and_then(Value::as_str).ok_or_else(|| {
                        ArmError::invalid_template("A variables 'copy' entry has no 'name'")
                    })?;
                    self.variables.push(Variable {
                        name: copy_name.to_string(),
                        source: VariableSource::Copy(entry),
                        slot: Slot::Pending,
                    });
                }
                continue;
            }
            self.variables.push(Variable {
                name: name.clone(),
                source: VariableSource::Plain(value),
                slot: Slot::Pending,
            });
        }
        Ok(())
    }

    pub(super) fn variable_value(&mut self, index: usize) -> Result<Value, ArmError> {
        match &self.variables[index].slot {
            Slot::Done(value) => return Ok(value.clone()),
            Slot::Busy => {
                return Err(ArmError::invalid_template(format!(
                    "The variable '{}' refers to itself (circular reference)",
                    self.variables[index].name
                )));
            }
            Slot::Pending => {}
        }
        self.variables[index].slot = Slot::Busy;
        let at = format!("variables.{}", self.variables[index].name);
        let result = match self.variables[index].source {
            VariableSource::Plain(value) => self.eval_value(value, &at),
            VariableSource::Copy(entry) => self.copy_array(entry, &at),
        };
        self.variables[index].slot = match &result {
            Ok(value) => Slot::Done(value.clone()),
            Err(_) => Slot::Pending,
        };
        result
    }

    pub(super) fn declare_functions(&mut self) -> Result<(), ArmError> {
        let Some(namespaces) = self.template.get("functions").filter(|v| !v.is_null()) else {
            return Ok(());
        };
        let Value::Array(namespaces) = namespaces else {
            return Err(ArmError::invalid_template(
                "The template's 'functions' must be an array of namespaces",
            ));
        };
        for namespace in namespaces {
            let namespace = object(namespace, "A 'functions' namespace")?;
            let prefix = namespace
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_ascii_lowercase();
            if let Some(members) = namespace.get("members") {
                for (name, member) in object(members, "A namespace's 'members'")? {
                    let member = object(member, &format!("The function '{name}'"))?;
                    self.functions
                        .insert(format!("{prefix}.{}", name.to_ascii_lowercase()), member);
                }
            }
        }
        Ok(())
    }

    pub(super) fn call_user_function(
        &mut self,
        namespace: &str,
        name: &str,
        args: Vec<Value>,
    ) -> Result<Value, ArmError> {
        let key = format!(
            "{}.{}",
            namespace.to_ascii_lowercase(),
            name.to_ascii_lowercase()
        );
        let Some(member) = self.functions.get(&key).copied() else {
            return Err(ArmError::invalid_template(format!(
                "The template function '{namespace}.{name}' is not defined in the template"
            )));
        };
        let declared: Vec<&str> = member
            .get("parameters")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(|p| p.get("name").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default();
        if declared.len() != args.len() {
            return Err(ArmError::invalid_template(format!(
                "The template function '{namespace}.{name}' expects {} argument(s) but got {}",
                declared.len(),
                args.len()
            )));
        }
        if self.function_frames.len() > 32 {
            return Err(ArmError::invalid_template(format!(
                "The template function '{namespace}.{name}' recurses too deeply"
            )));
        }
        let output = member
            .get("output")
            .and_then(|o| o.get("value"))
            .ok_or_else(|| {
                ArmError::invalid_template(format!(
                    "The template function '{namespace}.{name}' has no output value"
                ))
            })?;
        let frame = declared
            .iter()
            .map(|n| n.to_ascii_lowercase())
            .zip(args)
            .collect();
        self.function_frames.push(frame);
        let saved_copies = std::mem::take(&mut self.copy_frames);
        let result = self.eval_value(output, &format!("functions.{namespace}.{name}"));
        self.copy_frames = saved_copies;
        self.function_frames.pop();
        result
    }
}
