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
        problem: format!("not valid JSON ({error})"),
    })
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
    // are large and this runs on every decision (docs/benchmarks.md).
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
            problem: format!("not valid JSON ({error})"),
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
                map.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        Ok(TemplateShape::Object { resources_ok })
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
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
}
