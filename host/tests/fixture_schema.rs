//! The JSON Schemas in `docs/schema/` describe the fixture files policy
//! authors write: every case file in the repository validates against them
//! (its observation against `observation.schema.json`, an exact expected
//! action list against `plan.schema.json`), in the inline form the docs
//! recommend as well as the JSON-text form, and what the schema refuses the
//! loader refuses too.
//!
//! There is no JSON Schema crate among the dependencies, so this file has a
//! small validator of its own for the keywords the generated schemas use; a
//! keyword it does not know fails the test rather than being ignored.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf()
}

fn schema(which: &str) -> Value {
    let path = repo().join(format!("docs/schema/{which}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Keywords that only annotate.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$defs",
    "title",
    "description",
    "default",
    "examples",
];

/// Validates instances against one JSON Schema (draft 2020-12), for the
/// keywords `schemars` generates for the model.
struct Validator {
    root: Value,
}

impl Validator {
    fn new(root: Value) -> Self {
        Self { root }
    }

    /// Every violation, each with the instance path; empty if valid.
    fn errors(&self, instance: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        self.check(&self.root, instance, "", &mut errors);
        errors
    }

    fn check(&self, schema: &Value, instance: &Value, at: &str, errors: &mut Vec<String>) {
        let schema = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                errors.push(format!("{at}: no value is allowed here"));
                return;
            }
            Value::Object(schema) => schema,
            other => panic!("not a schema: {other}"),
        };
        for (keyword, value) in schema {
            match keyword.as_str() {
                k if ANNOTATIONS.contains(&k) => {}
                "$ref" => {
                    let reference = value.as_str().expect("$ref is a string");
                    let target = reference
                        .strip_prefix('#')
                        .and_then(|pointer| self.root.pointer(pointer))
                        .unwrap_or_else(|| panic!("$ref {reference} does not resolve"));
                    self.check(target, instance, at, errors);
                }
                "type" => {
                    let types: Vec<&str> = match value {
                        Value::String(one) => vec![one.as_str()],
                        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                        other => panic!("type {other}"),
                    };
                    if !types.iter().any(|t| has_type(instance, t)) {
                        errors.push(format!(
                            "{at}: {} is not of type {}",
                            brief(instance),
                            types.join(" or ")
                        ));
                    }
                }
                "enum" => {
                    let allowed = value.as_array().expect("enum is an array");
                    if !allowed.contains(instance) {
                        errors.push(format!("{at}: {} is not one of {value}", brief(instance)));
                    }
                }
                "const" => {
                    if instance != value {
                        errors.push(format!("{at}: {} is not {value}", brief(instance)));
                    }
                }
                "properties" => {
                    if let Value::Object(object) = instance {
                        for (name, property) in value.as_object().expect("properties") {
                            if let Some(field) = object.get(name) {
                                self.check(property, field, &format!("{at}/{name}"), errors);
                            }
                        }
                    }
                }
                "additionalProperties" => {
                    if let Value::Object(object) = instance {
                        let known = schema.get("properties").and_then(Value::as_object);
                        for (name, field) in object {
                            if known.is_some_and(|known| known.contains_key(name)) {
                                continue;
                            }
                            if value == &Value::Bool(false) {
                                errors.push(format!("{at}: unknown field {name:?}"));
                            } else {
                                self.check(value, field, &format!("{at}/{name}"), errors);
                            }
                        }
                    }
                }
                "required" => {
                    if let Value::Object(object) = instance {
                        for name in value.as_array().expect("required").iter() {
                            let name = name.as_str().expect("required names");
                            if !object.contains_key(name) {
                                errors.push(format!("{at}: missing field {name:?}"));
                            }
                        }
                    }
                }
                "items" => {
                    if let Value::Array(items) = instance {
                        for (i, item) in items.iter().enumerate() {
                            self.check(value, item, &format!("{at}/{i}"), errors);
                        }
                    }
                }
                "anyOf" | "oneOf" | "allOf" => {
                    let branches = value.as_array().expect("a list of schemas");
                    let mut failures = Vec::new();
                    let mut matched = 0;
                    for branch in branches {
                        let mut branch_errors = Vec::new();
                        self.check(branch, instance, at, &mut branch_errors);
                        if branch_errors.is_empty() {
                            matched += 1;
                        } else {
                            failures.push(branch_errors.join("; "));
                        }
                    }
                    let ok = match keyword.as_str() {
                        "anyOf" => matched >= 1,
                        "oneOf" => matched == 1,
                        _ => matched == branches.len(),
                    };
                    if !ok {
                        errors.push(format!(
                            "{at}: {} matches {matched} of the {keyword} schemas ({})",
                            brief(instance),
                            failures.join(" | ")
                        ));
                    }
                }
                "minimum" | "maximum" => {
                    if let (Some(number), Some(bound)) = (instance.as_f64(), value.as_f64()) {
                        let ok = if keyword == "minimum" {
                            number >= bound
                        } else {
                            number <= bound
                        };
                        if !ok {
                            errors.push(format!("{at}: {number} is outside its {keyword} {bound}"));
                        }
                    }
                }
                "format" => {
                    if instance.is_number() {
                        let (min, max) = match value.as_str().expect("format") {
                            "int32" => (i128::from(i32::MIN), i128::from(i32::MAX)),
                            "uint32" => (0, i128::from(u32::MAX)),
                            "int64" => (i128::from(i64::MIN), i128::from(i64::MAX)),
                            "uint64" => (0, i128::from(u64::MAX)),
                            other => panic!("the validator does not know format {other:?}"),
                        };
                        let integer = instance
                            .as_i64()
                            .map(i128::from)
                            .or_else(|| instance.as_u64().map(i128::from));
                        if !integer.is_some_and(|n| (min..=max).contains(&n)) {
                            errors.push(format!("{at}: {instance} is not a {value} integer"));
                        }
                    }
                }
                other => panic!(
                    "the schema uses the keyword {other:?}, which this test's validator does not know: extend it"
                ),
            }
        }
    }
}

fn has_type(instance: &Value, kind: &str) -> bool {
    match kind {
        "null" => instance.is_null(),
        "boolean" => instance.is_boolean(),
        "string" => instance.is_string(),
        "array" => instance.is_array(),
        "object" => instance.is_object(),
        "number" => instance.is_number(),
        "integer" => {
            instance.is_i64()
                || instance.is_u64()
                || instance.as_f64().is_some_and(|n| n.fract() == 0.0)
        }
        other => panic!("unknown type {other:?}"),
    }
}

fn brief(instance: &Value) -> String {
    let text = instance.to_string();
    match text.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

fn case_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            case_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "json") {
            found.push(path);
        }
    }
    found.sort();
}

#[test]
fn every_fixture_case_validates_against_the_committed_schemas() {
    let observations = Validator::new(schema("observation"));
    let plans = Validator::new(schema("plan"));
    let mut problems = Vec::new();
    let mut inline_spec_fields = 0;
    let mut exact_plans = 0;
    for dir in [
        "guests/default-policy/cases",
        "guests/image-tag-guardrail/cases",
        "guests/team-label-layer/cases",
    ] {
        let mut files = Vec::new();
        case_files(&repo().join(dir), &mut files);
        assert!(!files.is_empty(), "no case files in {dir}");
        for file in files {
            let name = file
                .strip_prefix(repo())
                .unwrap_or(&file)
                .display()
                .to_string();
            let text = std::fs::read_to_string(&file).expect("read case");
            let case: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
            let observation = &case["observation"];
            for error in observations.errors(observation) {
                problems.push(format!("{name}: observation{error}"));
            }
            if let Some(spec) = observation.pointer("/deploymentTemplate/spec") {
                inline_spec_fields += ["template", "parameters", "providerConfig"]
                    .iter()
                    .filter(|field| spec.get(**field).is_some_and(|v| !v.is_string()))
                    .count();
            }
            let expect = &case["expect"];
            let exact = expect.get("match").is_none_or(|m| m == "exact");
            if let (true, Some(actions)) = (exact, expect.get("actions")) {
                let kind = observation
                    .as_object()
                    .and_then(|o| o.keys().next())
                    .expect("an observation is tagged with its kind");
                let plan = json!({ kind.as_str(): {"actions": actions} });
                exact_plans += 1;
                for error in plans.errors(&plan) {
                    problems.push(format!("{name}: expected plan{error}"));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "case files the schemas refuse:\n{}",
        problems.join("\n")
    );
    // The inline form is the one the cases use: it must have been checked.
    assert!(
        inline_spec_fields > 50,
        "{inline_spec_fields} inline spec fields"
    );
    assert!(exact_plans > 20, "{exact_plans} exact plans");
}

/// Whether the loader (the model's serde form) accepts an observation.
fn loader_accepts(observation: &Value) -> bool {
    serde_json::from_value::<radwasm_policy_model::Observation>(observation.clone()).is_ok()
}

#[test]
fn json_text_fields_validate_inline_and_as_text_and_the_schema_refuses_what_the_loader_refuses() {
    let observations = Validator::new(schema("observation"));
    let template = json!({"languageVersion": "2.0", "resources": {}});
    let parameters = json!({"image": {"value": "nginx:1.27"}});
    let provider = json!({"radius": {"type": "Radius", "value": {"scope": "/planes/radius/local/resourceGroups/default"}}});
    let accepted = [
        // Inline, as the docs recommend for fixture files.
        json!({"deploymentTemplate": {"meta": {"name": "app"}, "spec": {
            "template": template, "parameters": parameters, "providerConfig": provider}}}),
        // JSON text, as the host passes them.
        json!({"deploymentTemplate": {"meta": {"name": "app"}, "spec": {
            "template": template.to_string(), "parameters": parameters.to_string(),
            "providerConfig": provider.to_string()}}}),
        json!({"deploymentResource": {"meta": {"name": "r"}, "radiusId": "/planes/radius/local/x",
            "owner": {"name": "app", "referenceUid": "u", "providerConfig": provider}}}),
        json!({"deploymentResource": {"owner": {"name": "app", "referenceUid": "u",
            "providerConfig": provider.to_string()}}}),
    ];
    for observation in &accepted {
        assert!(
            loader_accepts(observation),
            "the loader refuses {observation}"
        );
        let errors = observations.errors(observation);
        assert!(errors.is_empty(), "{observation}: {errors:?}");
    }
    let refused = [
        json!({"deploymentTemplate": {"meta": {"name": "app", "nmae": "typo"}}}),
        json!({"deploymentTemplate": {"meta": {"generation": "1"}}}),
        json!({"deploymentTemplate": {"spec": {"template": {}, "extra": 1}}}),
        json!({"deploymentResource": {"owner": {"referenceUid": "u"}}}),
        json!({"deploymentTemplate": {"operation": {"kind": "deployment", "subject": "x", "result": "later"}}}),
        json!({"somethingElse": {}}),
    ];
    for observation in &refused {
        assert!(
            !loader_accepts(observation),
            "the loader accepts {observation}"
        );
        assert!(
            !observations.errors(observation).is_empty(),
            "the schema accepts {observation}, which the loader refuses"
        );
    }
}
