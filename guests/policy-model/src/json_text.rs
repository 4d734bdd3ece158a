//! Lets a JSON-text field (template, parameters, provider config) be written in
//! a fixture either as a string of JSON or inline as a JSON value.

use serde::{Deserialize, Deserializer};

pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(deserializer)? {
        serde_json::Value::String(text) => Ok(text),
        other => Ok(other.to_string()),
    }
}
