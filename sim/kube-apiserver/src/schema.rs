//! Structural-schema checks for custom resources: types, `required`, `enum`,
//! and pruning of fields the schema does not declare (unless
//! `x-kubernetes-preserve-unknown-fields`). What is not checked is listed in
//! docs/apiserver.md.

use serde_json::{Map, Value};

/// Validate `value` against `schema`; each problem is (field path, message).
pub fn validate(schema: &Value, value: &Value, path: &str, problems: &mut Vec<(String, String)>) {
    if value.is_null() {
        if schema.get("nullable").and_then(Value::as_bool) != Some(true) && !path.is_empty() {
            // Kubernetes drops nulls for non-nullable fields rather than failing.
        }
        return;
    }
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            problems.push((
                path.to_string(),
                format!(
                    "Invalid value: {}: must be an integer or a string",
                    short(value)
                ),
            ));
        }
        return;
    }
    if let Some(problem) = type_problem(schema, value, path) {
        problems.push(problem);
        return;
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let allowed: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        problems.push((
            path.to_string(),
            format!(
                "Unsupported value: {}: supported values: {}",
                short(value),
                allowed.join(", ")
            ),
        ));
    }
    validate_members(schema, value, path, problems);
}

/// The problem with `value` if it is not of the schema's `type`.
fn type_problem(schema: &Value, value: &Value, path: &str) -> Option<(String, String)> {
    let expected = schema.get("type").and_then(Value::as_str)?;
    let ok = match expected {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => true,
    };
    (!ok).then(|| {
        (
            path.to_string(),
            format!(
                "Invalid value: \"{}\": {path} in body must be of type {expected}: \"{}\"",
                type_name(value),
                type_name(value)
            ),
        )
    })
}

/// Validate what `value` holds: an object's `required` fields and each
/// field against its property (or `additionalProperties`) schema, an
/// array's items against `items`.
fn validate_members(
    schema: &Value,
    value: &Value,
    path: &str,
    problems: &mut Vec<(String, String)>,
) {
    match value {
        Value::Object(object) => {
            for name in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                if !object.contains_key(name) || object[name].is_null() {
                    problems.push((join(path, name), "Required value".to_string()));
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (name, child) in object {
                if let Some(child_schema) = properties.and_then(|p| p.get(name)).or(additional) {
                    validate(child_schema, child, &join(path, name), problems);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    validate(item_schema, item, &format!("{path}[{index}]"), problems);
                }
            }
        }
        _ => {}
    }
}

/// Drop fields the schema does not declare; `metadata` at the top is kept.
/// The paths of dropped fields are added to `removed`.
pub fn prune(schema: &Value, value: &mut Value, top: bool, path: &str, removed: &mut Vec<String>) {
    if schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        && schema.get("properties").is_none()
    {
        return;
    }
    match value {
        Value::Object(object) => {
            let preserve = schema
                .get("x-kubernetes-preserve-unknown-fields")
                .and_then(Value::as_bool)
                == Some(true);
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .cloned();
            let empty = Map::new();
            let declared = properties.unwrap_or(&empty);
            let names: Vec<String> = object.keys().cloned().collect();
            for name in names {
                if top && (name == "metadata" || name == "apiVersion" || name == "kind") {
                    continue;
                }
                match declared.get(&name).or(additional.as_ref()) {
                    Some(child_schema) => {
                        if let Some(child) = object.get_mut(&name) {
                            prune(child_schema, child, false, &join(path, &name), removed);
                        }
                    }
                    None if preserve => {}
                    None => {
                        object.remove(&name);
                        removed.push(join(path, &name));
                    }
                }
            }
            // Nulls of non-nullable fields are dropped, as the real server does.
            object.retain(|name, child| {
                !child.is_null()
                    || declared
                        .get(name)
                        .and_then(|s| s.get("nullable"))
                        .and_then(Value::as_bool)
                        == Some(true)
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter_mut().enumerate() {
                    prune(
                        item_schema,
                        item,
                        false,
                        &format!("{path}[{index}]"),
                        removed,
                    );
                }
            }
        }
        _ => {}
    }
}

/// The fields of `object` (a whole custom resource) its schema does not
/// declare: what `fieldValidation=Strict` refuses and `Warn` warns about.
pub fn unknown_fields(schema: &Value, object: &Value) -> Vec<String> {
    let mut copy = object.clone();
    let mut removed = Vec::new();
    prune(schema, &mut copy, true, "", &mut removed);
    removed
}

/// Fill in `default`s the schema declares for absent fields, as the real
/// server does on every write (after pruning, before validation).
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(object) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, child_schema) in properties {
                    if let Some(default) = child_schema.get("default")
                        && !object.contains_key(name)
                    {
                        object.insert(name.clone(), default.clone());
                    }
                }
                for (name, child) in object.iter_mut() {
                    if let Some(child_schema) = properties.get(name) {
                        apply_defaults(child_schema, child);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in object.values_mut() {
                    apply_defaults(additional, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 64 {
        format!(
            "{}...",
            &text[..text.char_indices().nth(60).map(|(i, _)| i).unwrap_or(0)]
        )
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["template"], "properties": {
                "template": {"type": "string"},
                "replicas": {"type": "integer"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }})
    }

    #[test]
    fn wrong_types_missing_required_fields_and_enums_are_named() {
        let mut problems = Vec::new();
        validate(
            &schema(),
            &json!({"spec": {"replicas": "x", "mode": "c"}}),
            "",
            &mut problems,
        );
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert!(fields.contains(&"spec.template"), "{problems:?}");
        assert!(fields.contains(&"spec.replicas"), "{problems:?}");
        assert!(fields.contains(&"spec.mode"), "{problems:?}");
    }

    #[test]
    fn defaults_fill_absent_fields_at_every_depth() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "mode": {"type": "string", "default": "a"},
            "target": {"type": "object", "properties": {"scope": {"type": "string", "default": ""}}}
        }}}});
        let mut object = json!({"spec": {"target": {}}});
        apply_defaults(&schema, &mut object);
        assert_eq!(
            object,
            json!({"spec": {"mode": "a", "target": {"scope": ""}}})
        );
        let mut given = json!({"spec": {"mode": "b"}});
        apply_defaults(&schema, &mut given);
        assert_eq!(
            given,
            json!({"spec": {"mode": "b"}}),
            "absent parents are not created"
        );
    }

    #[test]
    fn unknown_fields_are_pruned_unless_preserved() {
        let mut object = json!({"metadata": {"name": "x"}, "spec": {"template": "t", "extra": 1, "free": {"any": 1}}, "junk": true});
        let mut removed = Vec::new();
        prune(&schema(), &mut object, true, "", &mut removed);
        assert_eq!(
            object,
            json!({"metadata": {"name": "x"}, "spec": {"template": "t", "free": {"any": 1}}})
        );
        removed.sort();
        assert_eq!(removed, ["junk", "spec.extra"]);
    }
}
