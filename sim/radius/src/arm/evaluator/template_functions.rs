//! Template functions that need the template or the deployment
//! (`parameters`, `variables`, `reference`, `resourceInfo`, `resourceId`,
//! `copyIndex`, `resourceGroup`, `deployment`); the pure ones are in
//! [`crate::arm::functions`].

use serde_json::{Map, Value};

use super::Evaluator;
use crate::arm::functions;
use crate::error::ArmError;
use crate::ids;

impl<'a> Evaluator<'a> {
    pub(super) fn fn_parameters(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("parameters", args, 1, 1)?;
        let name = functions::string_arg("parameters", args, 0)?;
        if let Some(frame) = self.function_frames.last() {
            return frame
                .get(&name.to_ascii_lowercase())
                .cloned()
                .ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "The function parameter '{name}' is not defined"
                    ))
                });
        }
        let index = self
            .parameters
            .iter()
            .position(|p| p.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                ArmError::invalid_template(format!("The template parameter '{name}' is not found"))
            })?;
        self.parameter_value(index)
    }

    pub(super) fn fn_variables(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("variables", args, 1, 1)?;
        let name = functions::string_arg("variables", args, 0)?;
        if !self.function_frames.is_empty() {
            return Err(ArmError::invalid_template(format!(
                "The template function 'variables' cannot be used inside a user-defined function (variable '{name}')"
            )));
        }
        let index = self
            .variables
            .iter()
            .position(|v| v.name.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                ArmError::invalid_template(format!("The template variable '{name}' is not found"))
            })?;
        self.variable_value(index)
    }

    pub(super) fn fn_reference(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("reference", args, 1, 3)?;
        let target = functions::string_arg("reference", args, 0)?;
        let full = args
            .get(2)
            .and_then(Value::as_str)
            .is_some_and(|mode| mode.eq_ignore_ascii_case("full"));
        let index = self.resolve_one("reference", target)?;
        self.note_reference(index);
        let state = self.runtime_state(index)?;
        if full || self.instances[index].extensible {
            Ok(state)
        } else {
            Ok(state
                .get("properties")
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())))
        }
    }

    pub(super) fn fn_resource_info(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("resourceInfo", args, 1, 1)?;
        let target = functions::string_arg("resourceInfo", args, 0)?;
        let index = self.resolve_one("resourceInfo", target)?;
        self.note_reference(index);
        let identity = self.identity(index)?;
        let mut info = Map::new();
        info.insert("id".into(), Value::String(identity.id));
        info.insert("name".into(), Value::String(identity.name));
        info.insert("type".into(), Value::String(identity.resource_type));
        if let Some(version) = identity.api_version {
            info.insert("apiVersion".into(), Value::String(version));
        }
        Ok(Value::Object(info))
    }

    /// `resourceId([subscriptionId,] [resourceGroup,] type, name1, name2...)`.
    pub(super) fn fn_resource_id(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("resourceId", args, 2, usize::MAX)?;
        let texts = (0..args.len())
            .map(|i| functions::string_arg("resourceId", args, i).map(str::to_string))
            .collect::<Result<Vec<_>, _>>()?;
        let type_at = texts.iter().position(|t| t.contains('/')).ok_or_else(|| {
            ArmError::invalid_template(
                "Unable to evaluate template language function 'resourceId': no argument is a resource type like 'Namespace/type'",
            )
        })?;
        let scope = match type_at {
            0 => self.scope.clone(),
            1 | 2 => {
                let group = &texts[type_at - 1];
                let (plane, _) = ids::resource_group_of(&self.scope).ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "Unable to evaluate template language function 'resourceId': the scope '{}' has no resource group to replace with '{group}'",
                        self.scope
                    ))
                })?;
                ids::resource_group_id(&plane, group)
            }
            _ => {
                return Err(ArmError::invalid_template(
                    "Unable to evaluate template language function 'resourceId': too many arguments before the resource type",
                ));
            }
        };
        let names: Vec<String> = texts[type_at + 1..].to_vec();
        ids::resource_id(&scope, &texts[type_at], &names)
            .map(Value::String)
            .map_err(|e| {
                ArmError::invalid_template(format!(
                    "Unable to evaluate template language function 'resourceId': {e}"
                ))
            })
    }

    pub(super) fn fn_copy_index(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("copyIndex", args, 0, 2)?;
        let (loop_name, offset) = match args {
            [] => (None, 0),
            [Value::String(name)] => (Some(name.as_str()), 0),
            [offset] => (None, offset.as_i64().unwrap_or(0)),
            [Value::String(name), offset] => (Some(name.as_str()), offset.as_i64().unwrap_or(0)),
            _ => {
                return Err(ArmError::invalid_template(
                    "Unable to evaluate template language function 'copyIndex': expected ([loopName], [offset])",
                ));
            }
        };
        let frame = match loop_name {
            None => self.copy_frames.last(),
            Some(wanted) => self.copy_frames.iter().rev().find(|f| {
                f.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(wanted))
            }),
        };
        let frame = frame.ok_or_else(|| {
            ArmError::invalid_template(match loop_name {
                Some(name) => format!(
                    "The template function 'copyIndex' names the loop '{name}', which is not being evaluated here"
                ),
                None => "The template function 'copyIndex' is not expected at this location (not inside a copy loop)".to_string(),
            })
        })?;
        (frame.index as i64)
            .checked_add(offset)
            .map(Value::from)
            .ok_or_else(|| {
                ArmError::invalid_template(
                    "Unable to evaluate template language function 'copyIndex': the index plus the offset overflows a 64-bit integer",
                )
            })
    }

    pub(super) fn fn_resource_group(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        if !args.is_empty() {
            return Err(ArmError::invalid_template(
                "The template function 'resourceGroup' with arguments is not supported by the Radius simulator",
            ));
        }
        let (plane, name) = ids::resource_group_of(&self.scope).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "The template function 'resourceGroup' is not valid: the deployment scope '{}' is not a resource group",
                self.scope
            ))
        })?;
        Ok(serde_json::json!({
            "id": ids::resource_group_id(&plane, &name),
            "name": name,
            "type": "System.Resources/resourceGroups",
            "location": "global",
            "properties": {"provisioningState": "Succeeded"},
        }))
    }

    pub(super) fn fn_deployment(&mut self, args: &[Value]) -> Result<Value, ArmError> {
        functions::arity("deployment", args, 0, 0)?;
        let content_version = self
            .template
            .get("contentVersion")
            .cloned()
            .unwrap_or(Value::Null);
        Ok(serde_json::json!({
            "name": self.deployment_name,
            "location": "global",
            "properties": {
                "template": {"contentVersion": content_version},
                "mode": "Incremental",
                "provisioningState": "Accepted",
            },
        }))
    }
}
