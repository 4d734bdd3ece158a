//! Parameters: the supplied values matched to their declarations, defaults
//! evaluated lazily, and each value checked against its declaration.

use serde_json::{Map, Value};

use super::{Evaluator, Parameter, Slot, object};
use crate::arm::functions::{stringify, type_name};
use crate::error::ArmError;

impl<'a> Evaluator<'a> {
    pub(super) fn declare_parameters(&mut self, supplied: &Value) -> Result<(), ArmError> {
        let mut supplied_values: Vec<(String, Value)> = Vec::new();
        match supplied {
            Value::Null => {}
            Value::Object(map) => {
                for (name, entry) in map {
                    let value = match entry {
                        Value::Object(entry) if entry.contains_key("value") => {
                            entry.get("value").cloned().unwrap_or(Value::Null)
                        }
                        Value::Object(entry) if entry.contains_key("reference") => {
                            return Err(ArmError::invalid_request_content(format!(
                                "The parameter '{name}' uses a Key Vault 'reference', which the Radius simulator does not support"
                            )));
                        }
                        _ => {
                            return Err(ArmError::invalid_request_content(format!(
                                "The parameter '{name}' is not an ARM parameter value: expected {{\"{name}\": {{\"value\": ...}}}} but got {}",
                                type_name(entry)
                            )));
                        }
                    };
                    supplied_values.push((name.clone(), value));
                }
            }
            other => {
                return Err(ArmError::invalid_request_content(format!(
                    "'parameters' must be an ARM parameters object ({{\"name\": {{\"value\": ...}}}}) but is {}",
                    type_name(other)
                )));
            }
        }
        let declarations = match self.template.get("parameters") {
            None | Some(Value::Null) => None,
            Some(value) => Some(object(value, "The template's 'parameters'")?),
        };
        if let Some(declarations) = declarations {
            for (name, declaration) in declarations {
                let declaration = object(declaration, &format!("The parameter '{name}'"))?;
                let supplied = supplied_values
                    .iter()
                    .position(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|at| supplied_values.remove(at).1);
                self.parameters.push(Parameter {
                    name: name.clone(),
                    declaration,
                    supplied,
                    slot: Slot::Pending,
                });
            }
        }
        if !supplied_values.is_empty() {
            let names: Vec<String> = supplied_values.into_iter().map(|(n, _)| n).collect();
            return Err(ArmError::invalid_template(format!(
                "The template parameters '{}' in the parameters are not valid; they are not present in the original template and can therefore not be provided at deployment time",
                names.join(", ")
            )));
        }
        Ok(())
    }

    pub(super) fn parameter_value(&mut self, index: usize) -> Result<Value, ArmError> {
        match &self.parameters[index].slot {
            Slot::Done(value) => return Ok(value.clone()),
            Slot::Busy => {
                return Err(ArmError::invalid_template(format!(
                    "The default value of parameter '{}' refers to itself (circular reference)",
                    self.parameters[index].name
                )));
            }
            Slot::Pending => {}
        }
        self.parameters[index].slot = Slot::Busy;
        let result = self.compute_parameter(index);
        self.parameters[index].slot = match &result {
            Ok(value) => Slot::Done(value.clone()),
            Err(_) => Slot::Pending,
        };
        result
    }

    fn compute_parameter(&mut self, index: usize) -> Result<Value, ArmError> {
        let name = self.parameters[index].name.clone();
        let declaration = self.parameters[index].declaration;
        let value = match self.parameters[index].supplied.clone() {
            Some(value) => value,
            None => match declaration.get("defaultValue") {
                Some(default) => {
                    self.eval_value(default, &format!("parameters.{name}.defaultValue"))?
                }
                None if declaration
                    .get("nullable")
                    .and_then(Value::as_bool)
                    .unwrap_or(false) =>
                {
                    Value::Null
                }
                None => {
                    return Err(ArmError::invalid_template(format!(
                        "The value for the template parameter '{name}' is not provided and it has no defaultValue"
                    )));
                }
            },
        };
        check_parameter(&name, declaration, &value)?;
        Ok(value)
    }
}

/// Check a parameter value against its declaration (`type`,
/// `allowedValues`, length and value limits).
fn check_parameter(
    name: &str,
    declaration: &Map<String, Value>,
    value: &Value,
) -> Result<(), ArmError> {
    if value.is_null()
        && declaration
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    {
        return Ok(());
    }
    let declared = declaration
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let fits = match declared.as_deref() {
        Some("string") | Some("securestring") => value.is_string(),
        Some("int") => value.is_i64() || value.is_u64(),
        Some("bool") => value.is_boolean(),
        Some("object") | Some("secureobject") => value.is_object(),
        Some("array") => value.is_array(),
        _ => true,
    };
    if !fits {
        return Err(ArmError::invalid_template(format!(
            "The template parameter '{name}' is declared as '{}' but its value is {}",
            declared.unwrap_or_default(),
            type_name(value)
        )));
    }
    if let Some(Value::Array(allowed)) = declaration.get("allowedValues") {
        let ok = match value {
            Value::Array(items) => items.iter().all(|i| allowed.contains(i)),
            other => allowed.contains(other),
        };
        if !ok {
            return Err(ArmError::invalid_template(format!(
                "The value '{}' of template parameter '{name}' is not one of the allowed values {}",
                stringify(value),
                Value::Array(allowed.clone())
            )));
        }
    }
    let length = match value {
        Value::String(s) => Some(s.chars().count() as i64),
        Value::Array(a) => Some(a.len() as i64),
        _ => None,
    };
    let limit = |key: &str| declaration.get(key).and_then(Value::as_i64);
    if let (Some(length), Some(min)) = (length, limit("minLength"))
        && length < min
    {
        return Err(ArmError::invalid_template(format!(
            "The template parameter '{name}' is shorter than its minLength {min}"
        )));
    }
    if let (Some(length), Some(max)) = (length, limit("maxLength"))
        && length > max
    {
        return Err(ArmError::invalid_template(format!(
            "The template parameter '{name}' is longer than its maxLength {max}"
        )));
    }
    if let Some(number) = value.as_i64() {
        if let Some(min) = limit("minValue")
            && number < min
        {
            return Err(ArmError::invalid_template(format!(
                "The template parameter '{name}' is {number}, less than its minValue {min}"
            )));
        }
        if let Some(max) = limit("maxValue")
            && number > max
        {
            return Err(ArmError::invalid_template(format!(
                "The template parameter '{name}' is {number}, more than its maxValue {max}"
            )));
        }
    }
    Ok(())
}
