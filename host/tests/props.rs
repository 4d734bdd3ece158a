//! Property tests of the host's own readers and writers of user input: the
//! two manifest shapes turned into one form, text parameter values turned
//! into their declared types, Go's JSON layout, and the manifest YAML that
//! `radwasm manifest generate` writes. See docs/reliability.md.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use radwasm::crd::DeploymentTemplateSpec;
use radwasm::go_text;
use radwasm::manifest::render::{Manifest, render_manifest};
use radwasm::radius::parameters::text_as_declared_type;
use serde_json::{Map, Value, json};

/// Any JSON value, strings and keys drawn from any Unicode (and the
/// characters Go escapes), up to a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let text = prop_oneof![".{0,12}", "[<>&\u{2028}\u{2029}\u{0}-\u{1f}\"\\\\a]{0,8}",];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(text.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// `cases` unless `PROPTEST_CASES` says otherwise; failures are kept in
/// `tests/regressions/props.txt` and replayed first.
fn config(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(
        "tests/regressions/props.txt",
    )));
    config
}

/// Equal as JSON documents, numbers by their value (Go writes the float
/// `0.0` as `0`, which reads back as an integer).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

fn spec(parameters: Value, provider_config: Value) -> DeploymentTemplateSpec {
    DeploymentTemplateSpec {
        template: "{}".into(),
        parameters,
        provider_config,
        repository: None,
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Whatever the API server kept in `parameters` or `providerConfig`,
    /// the one form is computed without a panic; text is kept as it is.
    #[test]
    fn any_shape_normalises_without_a_panic(parameters in any_json(), provider in any_json()) {
        let spec = spec(parameters.clone(), provider.clone());
        let text = spec.parameters_text();
        let provider_text = spec.provider_config_text();
        let _ = spec.provider_config();
        if let Value::String(given) = &parameters {
            prop_assert_eq!(&text, given);
        }
        if let Value::String(given) = &provider {
            prop_assert_eq!(&provider_text, given);
        }
        if parameters.is_object() {
            // A map becomes ARM's parameter object, one entry a name.
            let parsed: Value = serde_json::from_str(&text).expect("JSON");
            let entries = parsed.as_object().expect("an object");
            prop_assert_eq!(entries.len(), parameters.as_object().map_or(0, Map::len));
            for (name, given) in parameters.as_object().into_iter().flatten() {
                let entry = &entries[name];
                match given {
                    Value::Object(_) => prop_assert_eq!(entry, given),
                    other => prop_assert_eq!(entry, &json!({ "value": other })),
                }
            }
        }
    }

    /// Radius's shape (a map of text) and the first shape (ARM JSON text)
    /// give the policy the same parameters.
    #[test]
    fn both_shapes_give_the_same_parameters(values in prop::collection::btree_map("[a-zA-Z][a-zA-Z0-9]{0,8}", ".{0,16}", 0..6)) {
        let map: Map<String, Value> = values.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        let arm: Map<String, Value> = values.iter().map(|(k, v)| (k.clone(), json!({"value": v}))).collect();
        let radius_shape = spec(Value::Object(map), Value::Null).parameters_text();
        let first_shape = spec(Value::String(Value::Object(arm).to_string()), Value::Null).parameters_text();
        let a: Value = serde_json::from_str(&radius_shape).expect("JSON");
        let b: Value = if values.is_empty() { json!({}) } else { serde_json::from_str(&first_shape).expect("JSON") };
        prop_assert_eq!(a, b);
    }

    /// Text for `int`, `bool`, `object` and `array` parameters: the value
    /// it stands for, or a refusal; never a panic, for any text.
    #[test]
    fn text_parameters_convert_or_are_refused(text in ".{0,40}", kind in prop_oneof![
        Just("int"), Just("INT"), Just("bool"), Just("object"), Just("secureObject"),
        Just("array"), Just("string"), Just("securestring"), Just("other")
    ]) {
        match text_as_declared_type(kind, &text) {
            Ok(Some(value)) => match kind.to_ascii_lowercase().as_str() {
                "int" => prop_assert_eq!(value.as_i64(), text.trim().parse::<i64>().ok()),
                "bool" => prop_assert!(value.is_boolean()),
                "object" | "secureobject" => prop_assert!(value.is_object()),
                "array" => prop_assert!(value.is_array()),
                other => prop_assert!(false, "converted for {other}"),
            },
            Ok(None) => prop_assert!(matches!(kind, "string" | "securestring" | "other")),
            Err(what) => prop_assert!(!what.is_empty()),
        }
    }

    /// Any whole number, and any JSON object or array written as text, comes
    /// back as itself.
    #[test]
    fn typed_values_written_as_text_come_back(number in any::<i64>(), value in any_json()) {
        prop_assert_eq!(text_as_declared_type("int", &number.to_string()), Ok(Some(Value::from(number))));
        let written = value.to_string();
        let back = match &value {
            Value::Object(_) => text_as_declared_type("object", &written),
            Value::Array(_) => text_as_declared_type("array", &written),
            _ => return Ok(()),
        };
        prop_assert_eq!(back, Ok(Some(value)));
    }

    /// Go's layout reads back as the same JSON, and has none of the
    /// characters Go escapes left raw.
    #[test]
    fn go_layout_reads_back_the_same(value in any_json()) {
        for text in [go_text::to_string_compact(&value), go_text::to_string_indent(&value)] {
            let back: Value = serde_json::from_str(&text).expect("JSON");
            prop_assert!(same_json(&back, &value), "{} from {}", text, value);
            prop_assert!(!text.contains(['<', '>', '&', '\u{2028}', '\u{2029}']), "{}", text);
        }
    }

    /// The manifest YAML reads back (as YAML 1.2 does) with every name and
    /// value as given, as text.
    #[test]
    fn manifest_yaml_reads_back_the_same(
        parameters in prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_.-]{0,10}", ".{0,24}", 0..6),
        name in "[a-z0-9][a-z0-9.-]{0,20}",
    ) {
        let manifest = Manifest {
            name: name.clone(),
            namespace: None,
            parameters: parameters.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            provider_config: "{\n  \"radius\": {}\n}".into(),
            template: "{}".into(),
        };
        let yaml = render_manifest(&manifest).expect("YAML");
        let back: serde_yaml::Value = serde_yaml::from_str(&yaml).expect("reads back");
        prop_assert_eq!(back["metadata"]["name"].as_str(), Some(name.as_str()));
        for (key, value) in &parameters {
            prop_assert_eq!(back["spec"]["parameters"][key.as_str()].as_str(), Some(value.as_str()), "{}", yaml);
        }
    }
}
