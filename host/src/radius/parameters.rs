//! Parameter values given as text, converted to the type the template
//! declares. Radius's CLI writes every parameter of a `DeploymentTemplate` as
//! text (`replicas: "3"`); ARM expects `3` for a parameter declared `int`.
//! Each text value is converted here, once, just before the deployment is
//! sent, so the two manifest shapes deploy the same thing.

use serde_json::{Map, Value};

/// Convert, in place, every `{"value": "<text>"}` entry whose parameter the
/// template declares as `int`, `bool`, `object`, `secureObject` or `array`.
/// Values that already have a JSON type, parameters the template does not
/// declare, and text for `string`/`secureString` are left as they are.
/// The error names the parameter, its declared type and the value.
pub fn convert_to_declared_types(
    template: &Value,
    parameters: &mut Map<String, Value>,
) -> Result<(), String> {
    let Some(declared) = template.get("parameters").and_then(Value::as_object) else {
        return Ok(());
    };
    for (name, entry) in parameters.iter_mut() {
        let Some(Value::String(text)) = entry.get("value") else {
            continue;
        };
        // ARM parameter names are case-insensitive.
        let Some(kind) = declared
            .iter()
            .find(|(declared_name, _)| declared_name.eq_ignore_ascii_case(name))
            .and_then(|(_, declaration)| declaration.get("type"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        match text_as_declared_type(kind, text) {
            Ok(Some(converted)) => entry["value"] = converted,
            Ok(None) => {}
            Err(what) => {
                let mut shown: String = text.chars().take(80).collect();
                if shown.len() < text.len() {
                    shown.push('…');
                }
                return Err(format!(
                    "parameter {name:?} is declared {kind} but its value {shown:?} is not {what}"
                ));
            }
        }
    }
    Ok(())
}

/// The value `text` stands for as a parameter declared `kind`: `Ok(None)`
/// when text is right as it is (`string`, `secureString`, a type this does
/// not convert), `Err` with what the text is not (`"a whole number"`,
/// `"true or false"`, `"a JSON object"`, `"a JSON array"`). The one rule for
/// text parameter values, shared by the controller and `radwasm manifest`.
pub fn text_as_declared_type(kind: &str, text: &str) -> Result<Option<Value>, &'static str> {
    match kind.to_ascii_lowercase().as_str() {
        "int" => match text.trim().parse::<i64>() {
            Ok(number) => Ok(Some(Value::from(number))),
            Err(_) => Err("a whole number"),
        },
        "bool" => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(Some(Value::Bool(true))),
            "false" => Ok(Some(Value::Bool(false))),
            _ => Err("true or false"),
        },
        "object" | "secureobject" => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => Ok(Some(object)),
            _ => Err("a JSON object"),
        },
        "array" => match serde_json::from_str::<Value>(text) {
            Ok(array @ Value::Array(_)) => Ok(Some(array)),
            _ => Err("a JSON array"),
        },
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn template() -> Value {
        json!({"parameters": {
            "replicas": {"type": "int"},
            "Enabled": {"type": "bool"},
            "tags": {"type": "object"},
            "secret": {"type": "secureObject"},
            "ports": {"type": "array"},
            "name": {"type": "string"},
            "password": {"type": "securestring"},
        }})
    }

    fn converted(parameters: Value) -> Result<Value, String> {
        let mut map = parameters.as_object().cloned().unwrap_or_default();
        convert_to_declared_types(&template(), &mut map)?;
        Ok(Value::Object(map))
    }

    #[test]
    fn text_becomes_the_declared_type() {
        let out = converted(json!({
            "replicas": {"value": "3"},
            "enabled": {"value": "True"},
            "tags": {"value": "{\"team\":\"a\"}"},
            "secret": {"value": "{}"},
            "ports": {"value": "[80, 443]"},
            "name": {"value": "007"},
            "password": {"value": "true"},
        }))
        .expect("converts");
        assert_eq!(
            out,
            json!({
                "replicas": {"value": 3},
                "enabled": {"value": true},
                "tags": {"value": {"team": "a"}},
                "secret": {"value": {}},
                "ports": {"value": [80, 443]},
                "name": {"value": "007"},
                "password": {"value": "true"},
            })
        );
    }

    #[test]
    fn typed_values_references_and_undeclared_names_are_left_alone() {
        let parameters = json!({
            "replicas": {"value": 3},
            "tags": {"reference": {"keyVault": {"id": "x"}, "secretName": "s"}},
            "unknown": {"value": "3"},
        });
        assert_eq!(converted(parameters.clone()).expect("ok"), parameters);
        let mut map = parameters.as_object().cloned().unwrap_or_default();
        convert_to_declared_types(&json!({}), &mut map).expect("no declarations");
    }

    #[test]
    fn a_value_that_does_not_fit_is_named() {
        for (parameters, expected) in [
            (
                json!({"replicas": {"value": "three"}}),
                "parameter \"replicas\" is declared int but its value \"three\" is not a whole number",
            ),
            (
                json!({"replicas": {"value": "2.5"}}),
                "is not a whole number",
            ),
            (
                json!({"Enabled": {"value": "yes"}}),
                "parameter \"Enabled\" is declared bool but its value \"yes\" is not true or false",
            ),
            (json!({"tags": {"value": "[1]"}}), "is not a JSON object"),
            (json!({"ports": {"value": "80"}}), "is not a JSON array"),
        ] {
            let error = converted(parameters).expect_err("refused");
            assert!(error.contains(expected), "{error}");
        }
        let long = "x".repeat(500);
        let error = converted(json!({"replicas": {"value": long}})).expect_err("refused");
        assert!(error.len() < 200, "{error}");
    }
}
