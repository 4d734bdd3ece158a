//! Validation of a `DeploymentTemplate` spec before anything is sent to
//! Radius. Every error names the field (`spec.template`, `spec.parameters`,
//! `spec.providerConfig`) and says what is wrong.

use radwasm_policy_model::TemplateSpec;
use serde_json::Value;

/// A spec problem, naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub field: &'static str,
    pub problem: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

/// What a valid spec yields: the Radius scope to deploy into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidSpec {
    pub scope: String,
}

/// Check the three JSON texts of a spec.
pub fn validate(spec: &TemplateSpec) -> Result<ValidSpec, SpecError> {
    validate_template(&spec.template)?;
    validate_parameters(&spec.parameters)?;
    let scope = deployment_scope(&spec.provider_config)?;
    Ok(ValidSpec { scope })
}

fn parse(field: &'static str, text: &str) -> Result<Value, SpecError> {
    serde_json::from_str(text).map_err(|error| SpecError {
        field,
        problem: json_problem(&error),
    })
}

/// Deepest nesting of arrays and objects a JSON text may have: serde_json's
/// recursion limit (128) refuses one level more. The host parses the
/// template with serde_json before sending it to Radius, so a template the
/// policy accepts is one the host can send.
pub const MAX_JSON_DEPTH: usize = 127;

/// What is wrong with a JSON text serde_json refused, for a [`SpecError`].
fn json_problem(error: &serde_json::Error) -> String {
    let text = error.to_string();
    // serde_json has no public error code for this; its message is stable.
    if text.starts_with("recursion limit exceeded") {
        format!(
            "is nested too deeply: arrays and objects may nest at most {MAX_JSON_DEPTH} levels ({text})"
        )
    } else {
        format!("not valid JSON ({text})")
    }
}

/// The ARM template must be a JSON object whose `resources`, if present, is
/// an object (symbolic names) or an array.
pub fn validate_template(text: &str) -> Result<(), SpecError> {
    const FIELD: &str = "spec.template";
    if text.trim().is_empty() {
        return Err(SpecError {
            field: FIELD,
            problem: "is empty; it must hold a compiled ARM template".to_string(),
        });
    }
    // Check the shape while scanning, without building a JSON tree: templates
    // are large and this runs on every decision (docs/benchmarks.md). The
    // scan counts nesting like serde_json's parser does (`Skip`).
    match serde_json::from_str::<TemplateShape>(text) {
        Ok(TemplateShape::Object { resources_ok: true }) => Ok(()),
        Ok(TemplateShape::Object {
            resources_ok: false,
        }) => Err(SpecError {
            field: FIELD,
            problem: "\"resources\" must be an object or an array".to_string(),
        }),
        Ok(TemplateShape::NotObject) => Err(SpecError {
            field: FIELD,
            problem: "must be a JSON object (a compiled ARM template)".to_string(),
        }),
        Err(error) => Err(SpecError {
            field: FIELD,
            problem: json_problem(&error),
        }),
    }
}

/// What [`validate_template`] needs to know about a template's JSON.
enum TemplateShape {
    Object { resources_ok: bool },
    NotObject,
}

impl<'de> serde::Deserialize<'de> for TemplateShape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor { top: true })
    }
}

/// Visits a value; at the top it reports the template's shape, below it
/// reports (as `resources_ok`) whether the value is an object or an array.
struct ShapeVisitor {
    top: bool,
}

struct ResourcesShape(bool);

/// Any JSON value, skipped. Unlike `serde::de::IgnoredAny` (which serde_json
/// skips without counting levels) it goes through `deserialize_any`, so
/// serde_json holds its nesting to the same recursion limit as parsing it
/// into a `serde_json::Value` ([`MAX_JSON_DEPTH`]).
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ShapeVisitor { top: false })?;
        Ok(Skip)
    }
}

impl<'de> serde::Deserialize<'de> for ResourcesShape {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match deserializer.deserialize_any(ShapeVisitor { top: false })? {
            TemplateShape::Object { resources_ok } => Ok(ResourcesShape(resources_ok)),
            TemplateShape::NotObject => Ok(ResourcesShape(false)),
        }
    }
}

impl<'de> serde::de::Visitor<'de> for ShapeVisitor {
    type Value = TemplateShape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut resources_ok = true;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if self.top && key == "resources" {
                resources_ok = map.next_value::<ResourcesShape>()?.0;
            } else {
                map.next_value::<Skip>()?;
            }
        }
        Ok(TemplateShape::Object { resources_ok })
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        // An array is a valid `resources` but not a valid template.
        Ok(if self.top {
            TemplateShape::NotObject
        } else {
            TemplateShape::Object { resources_ok: true }
        })
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(TemplateShape::NotObject)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(TemplateShape::NotObject)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(TemplateShape::NotObject)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(TemplateShape::NotObject)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(TemplateShape::NotObject)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(TemplateShape::NotObject)
    }
}

/// Parameters must be an ARM parameters object, `{"name": {"value": ...}}`
/// (or `{"reference": ...}`); an empty text means no parameters.
pub fn validate_parameters(text: &str) -> Result<(), SpecError> {
    const FIELD: &str = "spec.parameters";
    if text.trim().is_empty() {
        return Ok(());
    }
    let value = parse(FIELD, text)?;
    let Some(object) = value.as_object() else {
        return Err(SpecError {
            field: FIELD,
            problem: "must be a JSON object of ARM parameters, {\"name\": {\"value\": ...}}"
                .to_string(),
        });
    };
    for (name, parameter) in object {
        let well_formed = parameter
            .as_object()
            .is_some_and(|entry| entry.contains_key("value") || entry.contains_key("reference"));
        if !well_formed {
            return Err(SpecError {
                field: FIELD,
                problem: format!(
                    "parameter {name:?} must be an object with \"value\" (or \"reference\"), like {{\"{name}\": {{\"value\": ...}}}}"
                ),
            });
        }
    }
    Ok(())
}

/// The Radius resource-group scope in `radius.value.scope` of the provider
/// config, checked to be `/planes/radius/{plane}/resourceGroups/{group}`.
pub fn deployment_scope(provider_config: &str) -> Result<String, SpecError> {
    const FIELD: &str = "spec.providerConfig";
    if provider_config.trim().is_empty() {
        return Err(SpecError {
            field: FIELD,
            problem: "is missing; it must name the Radius scope in radius.value.scope".to_string(),
        });
    }
    // Fast path: the usual shape read straight into borrowed fields. Any
    // other shape goes through the JSON tree below, which names the problem.
    if let Ok(ProviderConfigScope {
        radius:
            Some(RadiusProvider {
                value: Some(RadiusValue { scope: Some(scope) }),
            }),
    }) = serde_json::from_str::<ProviderConfigScope<'_>>(provider_config)
        && is_radius_group_scope(&scope)
    {
        return Ok(scope.into_owned());
    }
    let value = parse(FIELD, provider_config)?;
    let scope = match value.pointer("/radius/value/scope") {
        Some(Value::String(scope)) => scope.clone(),
        Some(_) => {
            return Err(SpecError {
                field: FIELD,
                problem: "radius.value.scope must be a string".to_string(),
            });
        }
        None => {
            return Err(SpecError {
                field: FIELD,
                problem: "radius.value.scope is missing".to_string(),
            });
        }
    };
    if !is_radius_group_scope(&scope) {
        return Err(SpecError {
            field: FIELD,
            problem: format!(
                "radius.value.scope {scope:?} is not a Radius resource group scope (/planes/radius/{{plane}}/resourceGroups/{{group}})"
            ),
        });
    }
    Ok(scope)
}

/// `{"radius": {"value": {"scope": "..."}}}`, other fields ignored.
#[derive(serde::Deserialize)]
struct ProviderConfigScope<'a> {
    #[serde(borrow)]
    radius: Option<RadiusProvider<'a>>,
}

#[derive(serde::Deserialize)]
struct RadiusProvider<'a> {
    #[serde(borrow)]
    value: Option<RadiusValue<'a>>,
}

#[derive(serde::Deserialize)]
struct RadiusValue<'a> {
    #[serde(borrow)]
    scope: Option<std::borrow::Cow<'a, str>>,
}

use radwasm_policy_model::scope::is_radius_group_scope;
pub use radwasm_policy_model::scope::scope_contains;

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDER: &str = r#"{"radius":{"type":"Radius","value":{"scope":"/planes/radius/local/resourceGroups/default"}}}"#;

    fn spec(template: &str, parameters: &str, provider_config: &str) -> TemplateSpec {
        TemplateSpec {
            template: template.to_string(),
            parameters: parameters.to_string(),
            provider_config: provider_config.to_string(),
        }
    }

    #[test]
    fn a_valid_spec_yields_its_scope() {
        let valid = validate(&spec(r#"{"resources":{}}"#, "", PROVIDER)).expect("valid");
        assert_eq!(valid.scope, "/planes/radius/local/resourceGroups/default");
    }

    #[test]
    fn each_bad_field_is_named() {
        let error = validate(&spec("{oops", "{}", PROVIDER)).expect_err("bad template");
        assert_eq!(error.field, "spec.template");
        let error = validate(&spec("{}", r#"{"tag":"v1"}"#, PROVIDER)).expect_err("bad parameters");
        assert_eq!(error.field, "spec.parameters");
        assert!(error.problem.contains("\"tag\""), "{error}");
        let error = validate(&spec(
            "{}",
            "{}",
            r#"{"radius":{"value":{"scope":"/planes/aws/x"}}}"#,
        ))
        .expect_err("bad scope");
        assert_eq!(error.field, "spec.providerConfig");
        let error = validate(&spec("{}", "{}", "")).expect_err("missing provider config");
        assert!(error.problem.contains("missing"), "{error}");
    }

    /// `levels` nested arrays as the value of `"x"` in a template object
    /// (which is one level itself).
    fn nested_template(levels: usize) -> String {
        format!(
            r#"{{"resources":{{}},"x":{}{}}}"#,
            "[".repeat(levels - 1),
            "]".repeat(levels - 1)
        )
    }

    #[test]
    fn templates_nest_as_deep_as_serde_json_parses() {
        for levels in [
            MAX_JSON_DEPTH - 1,
            MAX_JSON_DEPTH,
            MAX_JSON_DEPTH + 1,
            1_000,
        ] {
            let text = nested_template(levels);
            let parses = serde_json::from_str::<Value>(&text).is_ok();
            assert_eq!(parses, levels <= MAX_JSON_DEPTH, "{levels} levels");
            match validate_template(&text) {
                Ok(()) => assert!(parses, "{levels} levels accepted"),
                Err(error) => {
                    assert!(!parses, "{levels} levels refused: {error}");
                    assert!(error.problem.contains("nested too deeply"), "{error}");
                }
            }
        }
    }

    #[test]
    fn a_template_nested_100000_levels_deep_says_so() {
        for text in [
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            nested_template(100_000),
            format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(100_000)),
        ] {
            let error = validate(&spec(&text, "", PROVIDER)).expect_err("too deep");
            assert_eq!(error.field, "spec.template");
            assert!(
                error.problem.starts_with("is nested too deeply") && error.problem.len() < 200,
                "{error}"
            );
        }
        let deep_parameters = format!(
            r#"{{"a":{{"value":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let error = validate(&spec("{}", &deep_parameters, PROVIDER)).expect_err("too deep");
        assert_eq!(error.field, "spec.parameters");
        assert!(error.problem.starts_with("is nested too deeply"), "{error}");
    }
}
