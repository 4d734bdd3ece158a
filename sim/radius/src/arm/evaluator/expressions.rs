//! Values and expressions: every string of a JSON value evaluated, copy
//! arrays, property access and indexing, and calls dispatched to the
//! template's functions.

use serde_json::{Map, Value};

use super::{CopyFrame, Evaluator, MAX_NESTING, MAX_PRODUCED, object, weight};
use crate::arm::expr::{Expr, TemplateString, parse_template_string};
use crate::arm::functions::{self, stringify, type_name};
use crate::error::ArmError;

impl<'a> Evaluator<'a> {
    /// Evaluate every expression inside a JSON value. `at` names the place
    /// for error messages.
    pub(super) fn eval_value(&mut self, value: &Value, at: &str) -> Result<Value, ArmError> {
        // Every recursion of the evaluator (JSON nesting, and each variable,
        // parameter, resource or function an expression leads to) passes
        // here; a bound turns a hostile chain into an error, not a stack
        // overflow that aborts the process.
        if self.nesting >= MAX_NESTING {
            return Err(ArmError::invalid_template(format!(
                "The template nests values, expressions, variables, parameters, functions or references more than {MAX_NESTING} levels deep (at {at})"
            )));
        }
        self.nesting += 1;
        let result = self.eval_value_at(value, at);
        self.nesting -= 1;
        result
    }

    fn eval_value_at(&mut self, value: &Value, at: &str) -> Result<Value, ArmError> {
        match value {
            Value::String(text) => self.eval_string(text).map_err(|e| e.at(at)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.eval_value(item, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Value::Array),
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, item) in map {
                    if key == "copy"
                        && let Value::Array(entries) = item
                        && entries.iter().all(is_copy_entry)
                    {
                        for entry in entries {
                            let entry = object(entry, &format!("{at}.copy entry"))?;
                            let name =
                                entry.get("name").and_then(Value::as_str).ok_or_else(|| {
                                    ArmError::invalid_template(format!(
                                        "A 'copy' entry at {at} has no 'name'"
                                    ))
                                })?;
                            let items = self.copy_array(entry, &format!("{at}.{name}"))?;
                            out.insert(name.to_string(), items);
                        }
                        continue;
                    }
                    out.insert(key.clone(), self.eval_value(item, &format!("{at}.{key}"))?);
                }
                Ok(Value::Object(out))
            }
            other => Ok(other.clone()),
        }
    }

    /// `{"name", "count", "input"}`: an array of `count` evaluations of
    /// `input`, with `copyIndex('name')` counting.
    pub(super) fn copy_array(
        &mut self,
        entry: &Map<String, Value>,
        at: &str,
    ) -> Result<Value, ArmError> {
        let name = entry
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let count = match entry.get("count") {
            Some(count) => self.eval_value(count, &format!("{at}.count"))?,
            None => {
                return Err(ArmError::invalid_template(format!(
                    "The copy loop '{name}' has no 'count' (at {at})"
                )));
            }
        };
        let count = count.as_u64().filter(|c| *c <= 800).ok_or_else(|| {
            ArmError::invalid_template(format!(
                "The 'count' of copy loop '{name}' must be an integer from 0 to 800 (at {at})"
            ))
        })?;
        let input = entry.get("input").ok_or_else(|| {
            ArmError::invalid_template(format!("The copy loop '{name}' has no 'input' (at {at})"))
        })?;
        let mut items = Vec::new();
        for index in 0..count as usize {
            self.copy_frames.push(CopyFrame {
                name: Some(name.clone()),
                index,
            });
            let item = self.eval_value(input, &format!("{at}[{index}]"));
            self.copy_frames.pop();
            items.push(self.produce(item?, at)?);
        }
        Ok(Value::Array(items))
    }

    fn eval_string(&mut self, text: &str) -> Result<Value, ArmError> {
        match parse_template_string(text)? {
            TemplateString::Literal(literal) => Ok(Value::String(literal)),
            TemplateString::Expression(expr) => self.eval_expr(&expr),
        }
    }

    fn eval_expr(&mut self, expr: &Expr) -> Result<Value, ArmError> {
        if self.nesting >= MAX_NESTING {
            return Err(ArmError::invalid_template(format!(
                "The template nests values, expressions, variables, parameters, functions or references more than {MAX_NESTING} levels deep"
            )));
        }
        self.nesting += 1;
        let result = self.eval_expr_nested(expr);
        self.nesting -= 1;
        self.produce(result?, "an expression")
    }

    /// Count `value` against [`MAX_PRODUCED`].
    pub(super) fn produce(&mut self, value: Value, at: &str) -> Result<Value, ArmError> {
        self.produced = self.produced.saturating_add(weight(&value));
        if self.produced > MAX_PRODUCED {
            return Err(ArmError::invalid_template(format!(
                "The template's expressions and copy loops produce more than {} MiB of values (at {at})",
                MAX_PRODUCED >> 20
            )));
        }
        Ok(value)
    }

    fn eval_expr_nested(&mut self, expr: &Expr) -> Result<Value, ArmError> {
        match expr {
            Expr::String(text) => Ok(Value::String(text.clone())),
            Expr::Int(value) => Ok(Value::from(*value)),
            Expr::Property { target, name } => {
                let value = self.eval_expr(target)?;
                property(&value, name)
            }
            Expr::Index { target, index } => {
                let value = self.eval_expr(target)?;
                let index = self.eval_expr(index)?;
                index_into(&value, &index)
            }
            Expr::Call {
                namespace: Some(namespace),
                name,
                args,
            } => {
                let args = self.eval_args(args)?;
                self.call_user_function(namespace, name, args)
            }
            Expr::Call {
                namespace: None,
                name,
                args,
            } => self.call(name, args),
        }
    }

    fn eval_args(&mut self, args: &[Expr]) -> Result<Vec<Value>, ArmError> {
        args.iter().map(|a| self.eval_expr(a)).collect()
    }

    fn call(&mut self, name: &str, args: &[Expr]) -> Result<Value, ArmError> {
        let lower = name.to_ascii_lowercase();
        if lower == "if" {
            // Only the chosen branch is evaluated, as in ARM.
            if args.len() != 3 {
                return Err(ArmError::invalid_template(format!(
                    "Unable to evaluate template language function 'if': expects 3 arguments but got {}",
                    args.len()
                )));
            }
            return match self.eval_expr(&args[0])? {
                Value::Bool(true) => self.eval_expr(&args[1]),
                Value::Bool(false) => self.eval_expr(&args[2]),
                other => Err(ArmError::invalid_template(format!(
                    "Unable to evaluate template language function 'if': the condition must be a boolean but is {}",
                    type_name(&other)
                ))),
            };
        }
        let values = self.eval_args(args)?;
        match lower.as_str() {
            "parameters" => self.fn_parameters(&values),
            "variables" => self.fn_variables(&values),
            "reference" => self.fn_reference(&values),
            "resourceinfo" => self.fn_resource_info(&values),
            "resourceid" => self.fn_resource_id(&values),
            "copyindex" => self.fn_copy_index(&values),
            "resourcegroup" => self.fn_resource_group(&values),
            "deployment" => self.fn_deployment(&values),
            _ => functions::call(&lower, &values).unwrap_or_else(|| {
                Err(ArmError::invalid_template(format!(
                    "The template function '{name}' is not valid or not supported by the Radius simulator"
                )))
            }),
        }
    }
}

/// A property `copy` entry: `{"name", "count", "input"}`.
fn is_copy_entry(entry: &Value) -> bool {
    entry
        .as_object()
        .is_some_and(|e| e.contains_key("name") && e.contains_key("input"))
}

/// `value.name`, case-insensitive like ARM.
fn property(value: &Value, name: &str) -> Result<Value, ArmError> {
    let Value::Object(map) = value else {
        return Err(ArmError::invalid_template(format!(
            "The language expression property '{name}' can't be evaluated: the value is {}, not an object",
            type_name(value)
        )));
    };
    if let Some(found) = map.get(name) {
        return Ok(found.clone());
    }
    if let Some((_, found)) = map.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)) {
        return Ok(found.clone());
    }
    let available: Vec<&str> = map.keys().map(String::as_str).collect();
    Err(ArmError::invalid_template(format!(
        "The language expression property '{name}' doesn't exist, available properties are '{}'",
        available.join(", ")
    )))
}

/// `value[index]`: arrays by integer, objects by (case-insensitive) key.
fn index_into(value: &Value, index: &Value) -> Result<Value, ArmError> {
    match (value, index) {
        (Value::Array(items), Value::Number(n)) => {
            let at = n.as_i64().unwrap_or(-1);
            usize::try_from(at)
                .ok()
                .and_then(|at| items.get(at))
                .cloned()
                .ok_or_else(|| {
                    ArmError::invalid_template(format!(
                        "The language expression index {at} is out of range for an array of length {}",
                        items.len()
                    ))
                })
        }
        (Value::Object(_), Value::String(key)) => property(value, key),
        (value, index) => Err(ArmError::invalid_template(format!(
            "The language expression cannot index {} with {} ('{}')",
            type_name(value),
            type_name(index),
            stringify(index)
        ))),
    }
}
