//! Label and field selectors of the embedded API server
//! (`radwasm_sim_apiserver::fuzzing::Selector`): any text as a label and a
//! field selector, matched against an object built from the input.
//!
//! - Parsing gives a selector or a 400, never a panic.
//! - A selector's canonical form (which binds continue tokens to their list)
//!   parses again, to the same canonical form, and selects exactly what the
//!   selector it came from selects.
//! - Field selectors checked for each kind with kind-specific fields keep
//!   those properties.
//!
//! Input: `selector NUL labels`, labels as `key=value` lines.

#![no_main]

use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::split_nul;
use radwasm_sim_apiserver::fuzzing::{Filter, Selector};
use serde_json::{Map, Value, json};

const KINDS: &[(&str, &str)] = &[
    ("", "events"),
    ("events.k8s.io", "events"),
    ("", "namespaces"),
    ("", "secrets"),
    ("", "configmaps"),
];

fn object(labels: &str) -> Value {
    let mut map = Map::new();
    for line in labels.lines() {
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        map.insert(key.to_string(), Value::String(value.to_string()));
    }
    // The same pairs serve as fields too: `metadata.name` and the like.
    let name = map.get("name").cloned().unwrap_or(json!("a"));
    json!({
        "metadata": {"name": name, "namespace": "default", "labels": map.clone()},
        "involvedObject": {"kind": "Pod", "name": name},
        "reason": map.get("reason").cloned().unwrap_or(json!("Started")),
        "type": map.get("type").cloned().unwrap_or(json!("Normal")),
        "status": {"phase": "Active"},
        "spec": map,
    })
}

fn check(text: &str, what: &str, objects: &[Value], fields: bool) -> Option<Selector> {
    let selector = match Selector::parse(text, what) {
        Ok(selector) => selector,
        Err(error) => {
            assert_eq!(error.code, 400, "{text:?}: {error:?}");
            return None;
        }
    };
    let canonical = selector.canonical();
    let again = Selector::parse(&canonical, what)
        .unwrap_or_else(|e| panic!("{text:?}: its canonical form {canonical:?} is refused: {e:?}"));
    assert_eq!(again.canonical(), canonical, "{text:?}");
    assert_eq!(selector.is_empty(), again.is_empty(), "{text:?}");
    for object in objects {
        let (one, other) = if fields {
            (
                selector.matches_fields(object),
                again.matches_fields(object),
            )
        } else {
            (
                selector.matches_labels(object),
                again.matches_labels(object),
            )
        };
        assert_eq!(
            one, other,
            "{text:?} and its canonical form {canonical:?} select differently: {object}"
        );
    }
    Some(selector)
}

fuzz_target!(|data: &[u8]| {
    let parts = split_nul(data, 2);
    let text = String::from_utf8_lossy(parts[0]);
    let objects = [
        object(&String::from_utf8_lossy(parts[1])),
        object(""),
        json!({"metadata": {"name": "a"}}),
        json!({}),
    ];
    let labels = check(&text, "label", &objects, false);
    let fields = check(&text, "field", &objects, true);
    if let Some(fields) = fields {
        for (group, plural) in KINDS {
            if let Ok(checked) = fields.clone().check_fields(group, plural) {
                let canonical = checked.canonical();
                for object in &objects {
                    let filter = Filter {
                        labels: labels.clone().unwrap_or_default(),
                        fields: checked.clone(),
                    };
                    let _ = filter.matches(object);
                    let _ = filter.is_everything();
                }
                assert!(!canonical.is_empty() || checked.is_empty());
            } else if let Err(error) = fields.clone().check_fields(group, plural) {
                assert_eq!(error.code, 400, "{error:?}");
            }
        }
    }
});
