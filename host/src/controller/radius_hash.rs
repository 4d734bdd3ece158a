//! Recognising the `status.statusHash` Radius's own controller writes, so a
//! template it made `Ready` is not deployed again when radwasm takes over
//! with the spec unchanged.
//!
//! Radius's controller hashes its spec struct (`template`, `parameters` as a
//! map of text, `providerConfig` as text, `repository`) as Go's
//! `encoding/json` marshals it: fields in that order, empty ones left out,
//! map keys sorted, and Go's escaping of text (`<`, `>`, `&`, U+2028 and
//! U+2029 as `\u` escapes). The hash is SHA-256 in hex; releases before
//! SHA-256 wrote SHA-1, which Radius still accepts, and so does radwasm.
//! `tests/radius-hash/` holds a Go program that computes both the way Radius
//! does; the vectors it wrote are checked below.

use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::crd::DeploymentTemplateSpec;

/// True if `stored` is the hash Radius's controller would have written for
/// `spec`. Only a spec in Radius's shape (parameters a map of text,
/// provider config text) can carry one.
pub fn written_by_radius_for(spec: &DeploymentTemplateSpec, stored: &str) -> bool {
    let Some(json) = go_json(spec) else {
        return false;
    };
    let sha256 = hex::encode(Sha256::digest(json.as_bytes()));
    let sha1 = hex::encode(Sha1::digest(json.as_bytes()));
    stored == sha256 || stored == sha1
}

/// The spec as Go's `json.Marshal` writes Radius's `DeploymentTemplateSpec`,
/// or `None` when the spec is not in Radius's shape.
fn go_json(spec: &DeploymentTemplateSpec) -> Option<String> {
    let parameters: std::collections::BTreeMap<&str, &str> = match &spec.parameters {
        Value::Null => Default::default(),
        Value::Object(map) => map
            .iter()
            .map(|(name, value)| Some((name.as_str(), value.as_str()?)))
            .collect::<Option<_>>()?,
        _ => return None,
    };
    let provider_config = match &spec.provider_config {
        Value::Null => "",
        Value::String(text) => text.as_str(),
        _ => return None,
    };
    let mut fields = Vec::new();
    if !spec.template.is_empty() {
        fields.push(format!("\"template\":{}", go_string(&spec.template)));
    }
    if !parameters.is_empty() {
        let entries: Vec<String> = parameters
            .iter()
            .map(|(name, value)| format!("{}:{}", go_string(name), go_string(value)))
            .collect();
        fields.push(format!("\"parameters\":{{{}}}", entries.join(",")));
    }
    if !provider_config.is_empty() {
        fields.push(format!("\"providerConfig\":{}", go_string(provider_config)));
    }
    if let Some(repository) = spec.repository.as_deref().filter(|r| !r.is_empty()) {
        fields.push(format!("\"repository\":{}", go_string(repository)));
    }
    Some(format!("{{{}}}", fields.join(",")))
}

/// A JSON string as Go's `encoding/json` writes it (HTML escaping on).
fn go_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors `tests/radius-hash/main.go` wrote with Go's own
    /// `encoding/json`, `crypto/sha256` and `crypto/sha1`.
    const VECTORS: &str = include_str!("../../../tests/radius-hash/vectors.json");

    fn vectors() -> Vec<Value> {
        serde_json::from_str::<Vec<Value>>(VECTORS).expect("vectors.json")
    }

    fn spec_of(vector: &Value) -> DeploymentTemplateSpec {
        serde_json::from_value(vector["spec"].clone()).expect("spec")
    }

    #[test]
    fn go_marshals_the_spec_as_this_module_does() {
        let vectors = vectors();
        assert!(vectors.len() >= 8);
        for vector in vectors {
            let spec = spec_of(&vector);
            assert_eq!(
                go_json(&spec).as_deref(),
                vector["json"].as_str(),
                "{}",
                vector["name"]
            );
        }
    }

    #[test]
    fn both_of_radius_hashes_are_recognised_and_nothing_else() {
        for vector in vectors() {
            let spec = spec_of(&vector);
            let name = &vector["name"];
            for key in ["sha256", "sha1"] {
                let hash = vector[key].as_str().expect("hash");
                assert!(written_by_radius_for(&spec, hash), "{name} {key}");
            }
            assert!(!written_by_radius_for(&spec, ""), "{name}");
            assert!(!written_by_radius_for(&spec, &"0".repeat(64)), "{name}");
            // Any change to the spec changes the hash.
            let mut changed = spec.clone();
            changed.template.push(' ');
            let hash = vector["sha256"].as_str().expect("hash");
            assert!(!written_by_radius_for(&changed, hash), "{name}");
        }
    }

    #[test]
    fn a_spec_in_the_seed_shape_never_matches() {
        let spec = DeploymentTemplateSpec {
            template: "{}".into(),
            parameters: Value::String("{}".into()),
            provider_config: serde_json::json!({"radius": {"type": "Radius"}}),
            repository: None,
        };
        assert_eq!(go_json(&spec), None);
    }
}
