//! The parameters as given: `--parameters` arguments, ARM parameter files,
//! `.bicepparam` files (through `bicep build-params`) and `--environment`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use super::template::{declared_parameters, run_bicep_cli};

/// One `--parameters` argument, in the forms `rad deploy` accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParameterArg {
    /// `@FILE`: an ARM parameter file (`.json`) or a `.bicepparam` file.
    File(PathBuf),
    /// `NAME=VALUE`: text, converted to the declared type.
    Text { name: String, value: String },
    /// `NAME=@FILE`: the value is the JSON in FILE.
    ValueFile { name: String, path: PathBuf },
}

/// Read one `--parameters` argument.
pub fn parse_parameter_arg(arg: &str) -> Result<ParameterArg, String> {
    let expected = "expected @FILE, NAME=VALUE or NAME=@FILE";
    if let Some(path) = arg.strip_prefix('@') {
        if path.is_empty() {
            return Err(format!(
                "--parameters {arg:?}: no file after '@'; {expected}"
            ));
        }
        return Ok(ParameterArg::File(PathBuf::from(path)));
    }
    let Some((name, value)) = arg.split_once('=') else {
        return Err(format!("--parameters {arg:?}: {expected}"));
    };
    if name.trim().is_empty() {
        return Err(format!(
            "--parameters {arg:?}: no parameter name before '='; {expected}"
        ));
    }
    let name = name.to_string();
    match value.strip_prefix('@') {
        Some("") => Err(format!(
            "--parameters {arg:?}: no file after '@'; {expected}"
        )),
        Some(path) => Ok(ParameterArg::ValueFile {
            name,
            path: PathBuf::from(path),
        }),
        None => Ok(ParameterArg::Text {
            name,
            value: value.to_string(),
        }),
    }
}

/// A parameter value as given, before it is checked against the template.
#[derive(Debug, Clone, PartialEq)]
pub enum GivenValue {
    /// Text from the command line (`NAME=VALUE`, `--environment`).
    Text(String),
    /// A JSON value from a parameter file or `NAME=@FILE`.
    Json(Value),
}

#[derive(Debug, Clone, PartialEq)]
pub struct GivenParameter {
    pub name: String,
    pub value: GivenValue,
    /// Where it came from, for messages: a file or the argument.
    pub source: String,
}

/// Add a parameter; it replaces an earlier one of the same name (ARM names
/// are case-insensitive).
pub fn merge_parameter(given: &mut Vec<GivenParameter>, parameter: GivenParameter) {
    given.retain(|earlier| !earlier.name.eq_ignore_ascii_case(&parameter.name));
    given.push(parameter);
}

/// Give `name` the text `value` when the template declares it and nothing
/// else did (as `rad deploy` does for `environment`).
pub(super) fn inject_parameter(
    template: &Value,
    given: &mut Vec<GivenParameter>,
    name: &str,
    value: &str,
    source: &str,
) {
    let declared = declared_parameters(template)
        .iter()
        .any(|(declared, _)| declared.eq_ignore_ascii_case(name));
    let already = given.iter().any(|p| p.name.eq_ignore_ascii_case(name));
    if declared && !already {
        given.push(GivenParameter {
            name: name.to_string(),
            value: GivenValue::Text(value.to_string()),
            source: source.to_string(),
        });
    }
}

/// The parameters one `--parameters` argument gives.
pub(super) fn read_parameters(arg: ParameterArg) -> anyhow::Result<Vec<GivenParameter>> {
    match arg {
        ParameterArg::Text { name, value } => Ok(vec![GivenParameter {
            source: format!("--parameters {name}={value}"),
            name,
            value: GivenValue::Text(value),
        }]),
        ParameterArg::ValueFile { name, path } => {
            let text = read_file(&path)?;
            let value = serde_json::from_str(&text).map_err(|error| {
                anyhow::anyhow!(
                    "{} (value of parameter {name:?}): not JSON: {error}; the file must hold \
                     one JSON value, for example \"text\", 3 or {{\"key\": \"value\"}}",
                    path.display()
                )
            })?;
            Ok(vec![GivenParameter {
                name,
                value: GivenValue::Json(value),
                source: path.display().to_string(),
            }])
        }
        ParameterArg::File(path) => {
            let is_bicepparam = path
                .extension()
                .is_some_and(|extension| extension.eq_ignore_ascii_case("bicepparam"));
            let entries = if is_bicepparam {
                let printed = run_bicep_cli("build-params", &path)?;
                parse_build_params_output(&printed)
            } else {
                parse_parameter_file(&read_file(&path)?)
            }
            .map_err(|problem| anyhow::anyhow!("{}: {problem}", path.display()))?;
            let source = path.display().to_string();
            Ok(entries
                .into_iter()
                .map(|(name, value)| GivenParameter {
                    name,
                    value: GivenValue::Json(value),
                    source: source.clone(),
                })
                .collect())
        }
    }
}

fn read_file(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read the file", path.display()))
}

/// The name and value of every parameter in an ARM parameter file: either
/// the deployment-parameters document (`{"$schema": ..., "parameters":
/// {...}}`) or its bare `parameters` object (`{"name": {"value": ...}}`).
pub fn parse_parameter_file(text: &str) -> Result<Vec<(String, Value)>, String> {
    let expected = "expected an ARM parameter file: {\"parameters\": {\"NAME\": {\"value\": ...}}} \
                    or {\"NAME\": {\"value\": ...}}";
    let document: Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON ({error}); {expected}"))?;
    let Some(object) = document.as_object() else {
        return Err(format!("not a JSON object; {expected}"));
    };
    let is_document = object.contains_key("$schema")
        || (matches!(object.get("parameters"), Some(Value::Object(_)))
            && !is_entry(&object["parameters"])
            && object.keys().all(|key| {
                matches!(
                    key.as_str(),
                    "$schema" | "contentVersion" | "metadata" | "parameters"
                )
            }));
    let entries = if is_document {
        match object.get("parameters") {
            Some(Value::Object(entries)) => entries,
            _ => return Err(format!("no \"parameters\" object; {expected}")),
        }
    } else {
        object
    };
    entries
        .iter()
        .map(|(name, entry)| match entry.as_object() {
            Some(entry) if entry.contains_key("value") => {
                Ok((name.clone(), entry["value"].clone()))
            }
            Some(entry) if entry.contains_key("reference") => Err(format!(
                "parameter {name:?} is a Key Vault reference, which a DeploymentTemplate \
                 cannot carry; give its value instead"
            )),
            _ => Err(format!(
                "parameter {name:?} is not {{\"value\": ...}}; {expected}"
            )),
        })
        .collect()
}

/// An ARM parameter entry: `{"value": ...}` or `{"reference": ...}`.
fn is_entry(value: &Value) -> bool {
    value.as_object().is_some_and(|entry| {
        (entry.contains_key("value") || entry.contains_key("reference"))
            && entry
                .keys()
                .all(|key| matches!(key.as_str(), "value" | "reference" | "metadata"))
    })
}

/// The parameters in what `bicep build-params --stdout` prints: an object
/// whose `parametersJson` is the parameter document as text.
pub fn parse_build_params_output(printed: &str) -> Result<Vec<(String, Value)>, String> {
    let envelope: Value = serde_json::from_str(printed)
        .map_err(|error| format!("`bicep build-params` printed no JSON ({error})"))?;
    match envelope.get("parametersJson") {
        Some(Value::String(document)) => parse_parameter_file(document),
        _ => Err("`bicep build-params` printed no \"parametersJson\" text".to_string()),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::*;

    /// A parameter given as `--parameters NAME=VALUE` (also used by the
    /// tests of `check.rs`).
    pub(in crate::manifest) fn text(name: &str, value: &str) -> GivenParameter {
        GivenParameter {
            name: name.to_string(),
            value: GivenValue::Text(value.to_string()),
            source: format!("--parameters {name}={value}"),
        }
    }

    #[test]
    fn parameter_arguments_in_every_form() {
        assert_eq!(
            parse_parameter_arg("@params.json"),
            Ok(ParameterArg::File("params.json".into()))
        );
        assert_eq!(
            parse_parameter_arg("tag=v1=x"),
            Ok(ParameterArg::Text {
                name: "tag".into(),
                value: "v1=x".into()
            })
        );
        assert_eq!(
            parse_parameter_arg("tag="),
            Ok(ParameterArg::Text {
                name: "tag".into(),
                value: String::new()
            })
        );
        assert_eq!(
            parse_parameter_arg("labels=@labels.json"),
            Ok(ParameterArg::ValueFile {
                name: "labels".into(),
                path: "labels.json".into()
            })
        );
        for bad in ["invalid-format", "=value", "@", "tag=@"] {
            let error = parse_parameter_arg(bad).expect_err(bad);
            assert!(error.contains(&format!("{bad:?}")), "{error}");
        }
    }

    #[test]
    fn later_parameters_replace_earlier_ones_whatever_their_case() {
        let mut given = Vec::new();
        merge_parameter(&mut given, text("tag", "a"));
        merge_parameter(&mut given, text("replicas", "1"));
        merge_parameter(&mut given, text("Tag", "b"));
        let names: Vec<(&str, &GivenValue)> =
            given.iter().map(|p| (p.name.as_str(), &p.value)).collect();
        assert_eq!(
            names,
            [
                ("replicas", &GivenValue::Text("1".into())),
                ("Tag", &GivenValue::Text("b".into()))
            ]
        );
    }

    #[test]
    fn parameter_files_in_both_shapes() {
        let full = r#"{"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#",
                      "contentVersion": "1.0.0.0", "parameters": {"tag": {"value": "v1"}, "replicas": {"value": 3}}}"#;
        let mut entries = parse_parameter_file(full).expect("full document");
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            entries,
            [
                ("replicas".to_string(), json!(3)),
                ("tag".to_string(), json!("v1"))
            ]
        );
        let bare = r#"{"tag": {"value": "v1"}, "parameters": {"value": "p"}}"#;
        let mut entries = parse_parameter_file(bare).expect("bare object");
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            entries,
            [
                ("parameters".to_string(), json!("p")),
                ("tag".to_string(), json!("v1"))
            ]
        );
        // Without $schema, {"parameters": {...entries}} is still the document.
        let no_schema = r#"{"parameters": {"tag": {"value": "v2"}}}"#;
        assert_eq!(
            parse_parameter_file(no_schema).expect("document"),
            [("tag".to_string(), json!("v2"))]
        );
    }

    #[test]
    fn files_that_are_not_arm_parameter_files_are_refused() {
        for (text, expected) in [
            ("not json", "not JSON"),
            ("[1, 2]", "not a JSON object"),
            (
                r#"{"tag": "v1"}"#,
                "parameter \"tag\" is not {\"value\": ...}",
            ),
            (
                r#"{"$schema": "x", "contentVersion": "1.0.0.0"}"#,
                "no \"parameters\" object",
            ),
            (
                r#"{"secret": {"reference": {"keyVault": {"id": "x"}, "secretName": "s"}}}"#,
                "Key Vault reference",
            ),
        ] {
            let error = parse_parameter_file(text).expect_err(text);
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn build_params_output_is_unwrapped() {
        let printed = json!({
            "parametersJson": r#"{"$schema": "x", "contentVersion": "1.0.0.0", "parameters": {"tag": {"value": "v3"}}}"#,
            "templateJson": "{}",
        })
        .to_string();
        assert_eq!(
            parse_build_params_output(&printed).expect("parameters"),
            [("tag".to_string(), json!("v3"))]
        );
        let error = parse_build_params_output("{}").expect_err("no parametersJson");
        assert!(error.contains("parametersJson"), "{error}");
    }

    #[test]
    fn environment_is_injected_only_when_declared_and_not_given() {
        let declared = json!({"resources": {}, "parameters": {"Environment": {"type": "string"}}});
        let mut given = Vec::new();
        inject_parameter(
            &json!({"resources": {}}),
            &mut given,
            "environment",
            "/e",
            "-e",
        );
        assert!(given.is_empty());
        inject_parameter(&declared, &mut given, "environment", "/e", "-e");
        assert_eq!(given[0].value, GivenValue::Text("/e".into()));
        let mut given = vec![text("environment", "/mine")];
        inject_parameter(&declared, &mut given, "environment", "/e", "-e");
        assert_eq!(given, [text("environment", "/mine")]);
    }
}
