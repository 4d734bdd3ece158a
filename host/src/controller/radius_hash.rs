//! Recognising the `status.statusHash` Radius's own controller writes, so a
//! template it made `Ready` is not deployed again when radwasm takes over
//! with the spec unchanged.
//!
//! Radius's controller hashes its spec struct (`template`, `parameters` as a
//! map of text, `providerConfig` as text, `repository`) as Go's
//! `encoding/json` marshals it: fields in that order, empty ones left out,
//! map keys sorted, and Go's escaping of text (`<`, `>`, `&`, U+2028 and
//! U+2029 as `\u` escapes); [`crate::go_text`] writes it the same way. The
//! hash is SHA-256 in hex; releases before SHA-256 wrote SHA-1, which Radius
//! still accepts, and so does radwasm.
//! `tests/radius-hash/` holds a Go program that computes both the way Radius
//! does; the vectors it wrote are checked below.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::crd::DeploymentTemplateSpec;
use crate::go_text;

/// True if `stored` is the hash Radius's controller would have written for
/// `spec`. Only a spec in Radius's shape (parameters a map of text,
/// provider config text) can carry one.
pub fn written_by_radius_for(spec: &DeploymentTemplateSpec, stored: &str) -> bool {
    // Only a hash of one of the two lengths can match: the template text is
    // hashed once, by the one algorithm that could have written `stored`.
    let digest: fn(&[u8]) -> String = match stored.len() {
        64 => |bytes| hex::encode(Sha256::digest(bytes)),
        40 => |bytes| hex::encode(Sha1::digest(bytes)),
        _ => return false,
    };
    go_json(spec).is_some_and(|json| digest(json.as_bytes()) == stored)
}

/// The `status.statusHash` Radius's controller (SHA-256 releases) writes
/// once it has deployed `spec`; `None` for a spec not in Radius's shape.
/// Tests that play Radius's controller write it, as it would.
pub fn radius_status_hash(spec: &DeploymentTemplateSpec) -> Option<String> {
    go_json(spec).map(|json| hex::encode(Sha256::digest(json.as_bytes())))
}

/// Radius's Go `DeploymentTemplateSpec` as its JSON tags describe it: fields
/// in this order, each `omitempty`.
#[derive(Serialize)]
struct RadiusSpec<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    template: &'a str,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    parameters: BTreeMap<&'a str, &'a str>,
    #[serde(rename = "providerConfig", skip_serializing_if = "str::is_empty")]
    provider_config: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    repository: &'a str,
}

/// The spec as Go's `json.Marshal` writes Radius's `DeploymentTemplateSpec`,
/// or `None` when the spec is not in Radius's shape.
fn go_json(spec: &DeploymentTemplateSpec) -> Option<String> {
    let parameters = match &spec.parameters {
        Value::Null => BTreeMap::new(),
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
    Some(go_text::to_string_compact(&RadiusSpec {
        template: &spec.template,
        parameters,
        provider_config,
        repository: spec.repository.as_deref().unwrap_or_default(),
    }))
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
            assert_eq!(
                radius_status_hash(&spec).as_deref(),
                vector["sha256"].as_str(),
                "{name}"
            );
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
