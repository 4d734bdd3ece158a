//! Checking the given parameters against the ones the template declares:
//! names, types, allowed values and required parameters.

use serde_json::Value;

use super::parameters::{GivenParameter, GivenValue};
use super::template::declared_parameters;
use crate::radius::parameters::text_as_declared_type;

/// The parameters a manifest carries, as text, and which of them are secure.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckedParameters {
    /// Declared name (the template's spelling) and the value as text.
    pub values: Vec<(String, String)>,
    pub secure: Vec<String>,
}

/// Check every given parameter against the template's declarations: known
/// name, right type, an allowed value; and that every required parameter has
/// a value. Returns the values as the manifest's text, or every problem.
pub fn check_parameters(
    template: &Value,
    given: &[GivenParameter],
) -> Result<CheckedParameters, Vec<String>> {
    let declared = declared_parameters(template);
    let mut problems = Vec::new();
    let mut checked = CheckedParameters::default();

    for parameter in given {
        let Some((name, declaration)) = declared
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(&parameter.name))
        else {
            let names: Vec<&str> = declared.iter().map(|(name, _)| name.as_str()).collect();
            let known = if names.is_empty() {
                "it declares no parameters".to_string()
            } else {
                format!("it declares {}", names.join(", "))
            };
            problems.push(format!(
                "parameter {:?} (from {}) is not declared by the template ({known})",
                parameter.name, parameter.source
            ));
            continue;
        };
        match check_value(name, declaration, parameter) {
            Ok(Some(text)) => {
                if is_secure(declaration) {
                    checked.secure.push(name.to_string());
                }
                checked.values.push((name.to_string(), text));
            }
            Ok(None) => {}
            Err(problem) => problems.push(problem),
        }
    }

    for (name, declaration) in &declared {
        let given = given.iter().any(|p| p.name.eq_ignore_ascii_case(name));
        let optional = declaration.get("defaultValue").is_some()
            || declaration.get("nullable") == Some(&Value::Bool(true));
        if !given && !optional {
            let how = if name.eq_ignore_ascii_case("environment") {
                "--environment".to_string()
            } else {
                format!("--parameters {name}=VALUE")
            };
            problems.push(format!(
                "parameter {name:?} is required (declared {} with no defaultValue) but has no \
                 value; give it with {how}",
                declared_type(declaration).unwrap_or("without a type")
            ));
        }
    }

    if problems.is_empty() {
        Ok(checked)
    } else {
        Err(problems)
    }
}

fn declared_type(declaration: &Value) -> Option<&str> {
    declaration.get("type").and_then(Value::as_str)
}

fn is_secure(declaration: &Value) -> bool {
    declared_type(declaration).is_some_and(|kind| kind.to_ascii_lowercase().starts_with("secure"))
}

/// Check one value against its declaration; the text the manifest carries,
/// or `None` for a null given to a nullable parameter (the same as none).
fn check_value(
    name: &str,
    declaration: &Value,
    parameter: &GivenParameter,
) -> Result<Option<String>, String> {
    let kind = declared_type(declaration).unwrap_or("");
    let secure = is_secure(declaration);
    // Values are shown as JSON (text in quotes), secure ones not at all.
    let shown = |value: &Value| {
        if secure {
            return "(hidden, the parameter is secure)".to_string();
        }
        let json = value.to_string();
        let mut shown: String = json.chars().take(80).collect();
        if shown.len() < json.len() {
            shown.push('…');
        }
        shown
    };
    let refuse = |value: &Value, what: &str| {
        Err(format!(
            "parameter {name:?} (from {}) is declared {kind} but its value {} is not {what}",
            parameter.source,
            shown(value)
        ))
    };
    let typed = match (&parameter.value, kind.to_ascii_lowercase().as_str()) {
        (GivenValue::Json(Value::Null), _) => {
            if declaration.get("nullable") == Some(&Value::Bool(true)) {
                return Ok(None);
            }
            return Err(format!(
                "parameter {name:?} (from {}) is null, but it is not declared nullable",
                parameter.source
            ));
        }
        // Text, converted the way the controller converts it when it deploys.
        (GivenValue::Text(text), _) => match text_as_declared_type(kind, text) {
            Ok(Some(converted)) => converted,
            Ok(None) => Value::String(text.clone()),
            Err(what) => return refuse(&Value::String(text.clone()), what),
        },
        // JSON from a file must already have the declared type.
        (GivenValue::Json(value), kind) => {
            let fits = match kind {
                "int" => value.is_i64() || value.is_u64(),
                "bool" => value.is_boolean(),
                "string" | "securestring" => value.is_string(),
                "object" | "secureobject" => value.is_object(),
                "array" => value.is_array(),
                _ => true,
            };
            if !fits {
                let what = match kind {
                    "int" => "a whole number",
                    "bool" => "true or false",
                    "string" | "securestring" => "a JSON string",
                    "object" | "secureobject" => "a JSON object",
                    _ => "a JSON array",
                };
                return refuse(value, what);
            }
            value.clone()
        }
    };

    if let Some(Value::Array(allowed)) = declaration.get("allowedValues") {
        // For an array parameter ARM checks every element against the list.
        let candidates: Vec<&Value> = match (&typed, kind.eq_ignore_ascii_case("array")) {
            (Value::Array(elements), true) => elements.iter().collect(),
            _ => vec![&typed],
        };
        if let Some(outside) = candidates.iter().find(|value| !allowed.contains(value)) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!(
                "parameter {name:?} (from {}): value {} is not one of the allowed values {}",
                parameter.source,
                shown(outside),
                list.join(", ")
            ));
        }
    }

    Ok(Some(match (&parameter.value, typed) {
        (GivenValue::Text(text), _) => text.clone(),
        (GivenValue::Json(_), Value::String(text)) => text,
        (GivenValue::Json(_), other) => other.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::manifest::parameters::tests::text;

    fn from_file(name: &str, value: Value) -> GivenParameter {
        GivenParameter {
            name: name.to_string(),
            value: GivenValue::Json(value),
            source: "params.json".to_string(),
        }
    }

    fn template() -> Value {
        json!({
            "resources": {},
            "parameters": {
                "tag": {"type": "string", "defaultValue": "latest"},
                "replicas": {"type": "int"},
                "enabled": {"type": "bool", "defaultValue": true},
                "labels": {"type": "object", "defaultValue": {}},
                "ports": {"type": "array", "defaultValue": [], "allowedValues": [80, 443, 8080]},
                "size": {"type": "string", "defaultValue": "small", "allowedValues": ["small", "large"]},
                "password": {"type": "secureString", "defaultValue": ""},
                "note": {"type": "string", "nullable": true},
            }
        })
    }

    fn values(checked: CheckedParameters) -> Vec<(String, String)> {
        checked.values
    }

    #[test]
    fn values_of_the_declared_type_become_the_manifest_text() {
        let given = [
            text("replicas", " 3"),
            text("ENABLED", "False"),
            from_file("labels", json!({"team": "a"})),
            from_file("ports", json!([80, 443])),
            text("size", "large"),
            from_file("tag", json!("v1")),
            from_file("note", Value::Null),
        ];
        let checked = check_parameters(&template(), &given).expect("fits");
        assert_eq!(
            values(checked),
            [
                ("replicas".to_string(), " 3".to_string()),
                ("enabled".to_string(), "False".to_string()),
                ("labels".to_string(), r#"{"team":"a"}"#.to_string()),
                ("ports".to_string(), "[80,443]".to_string()),
                ("size".to_string(), "large".to_string()),
                ("tag".to_string(), "v1".to_string()),
            ]
        );
        let checked = check_parameters(
            &template(),
            &[text("replicas", "1"), text("password", "s3cret")],
        )
        .expect("fits");
        assert_eq!(checked.secure, ["password"]);
    }

    #[test]
    fn every_problem_is_reported_by_name() {
        let given = [
            text("replicas", "three"),
            text("unknown", "x"),
            text("enabled", "yes"),
            from_file("tag", json!(5)),
            from_file("labels", json!([1])),
            text("ports", "[80, 22]"),
            text("size", "huge"),
            from_file("password", json!(1)),
            text("replicas", "4.5"),
        ];
        let problems = check_parameters(&template(), &given).expect_err("problems");
        let expected = [
            "parameter \"replicas\" (from --parameters replicas=three) is declared int but its value \"three\" is not a whole number",
            "parameter \"unknown\" (from --parameters unknown=x) is not declared by the template (it declares enabled, labels, note, password, ports, replicas, size, tag)",
            "parameter \"enabled\" (from --parameters enabled=yes) is declared bool but its value \"yes\" is not true or false",
            "parameter \"tag\" (from params.json) is declared string but its value 5 is not a JSON string",
            "parameter \"labels\" (from params.json) is declared object but its value [1] is not a JSON object",
            "parameter \"ports\" (from --parameters ports=[80, 22]): value 22 is not one of the allowed values 80, 443, 8080",
            "parameter \"size\" (from --parameters size=huge): value \"huge\" is not one of the allowed values \"small\", \"large\"",
            "parameter \"password\" (from params.json) is declared secureString but its value (hidden, the parameter is secure) is not a JSON string",
            "parameter \"replicas\" (from --parameters replicas=4.5) is declared int but its value \"4.5\" is not a whole number",
        ];
        assert_eq!(problems, expected);
    }

    #[test]
    fn required_parameters_need_a_value_and_null_needs_nullable() {
        let problems = check_parameters(&template(), &[]).expect_err("replicas missing");
        assert_eq!(
            problems,
            [
                "parameter \"replicas\" is required (declared int with no defaultValue) but has no value; give it with --parameters replicas=VALUE"
            ]
        );
        let problems = check_parameters(
            &template(),
            &[text("replicas", "1"), from_file("tag", Value::Null)],
        )
        .expect_err("null tag");
        assert_eq!(
            problems,
            ["parameter \"tag\" (from params.json) is null, but it is not declared nullable"]
        );
        let environment =
            json!({"resources": {}, "parameters": {"environment": {"type": "string"}}});
        let problems = check_parameters(&environment, &[]).expect_err("environment missing");
        assert!(
            problems[0].ends_with("give it with --environment"),
            "{problems:?}"
        );
    }
}
