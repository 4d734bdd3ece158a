//! PATCH bodies of the embedded API server
//! (`radwasm_sim_apiserver::fuzzing`): any bytes decoded as the server
//! decodes a request body (JSON, or YAML for a YAML content type) and
//! applied to any JSON document as a JSON patch (RFC 6902), a JSON merge
//! patch (RFC 7386) or a strategic merge patch.
//!
//! - Decoding and patching give a value or an error (400, 413 or 422),
//!   never a panic, a stack overflow or unbounded memory.
//! - A merge patch gives what RFC 7386's algorithm, written out here, gives.
//! - A strategic merge patch with no `$` directive and no merged list
//!   (`metadata.finalizers`, `metadata.ownerReferences`) is a merge patch.
//!
//! Input: a mode byte (patch type, and YAML or JSON for the body), then
//! `document NUL body`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::split_nul;
use radwasm_sim_apiserver::fuzzing::{PatchType, apply, decode_body};
use serde_json::{Map, Value};

/// RFC 7386, section 2.
fn merge_patch(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else {
        return patch.clone();
    };
    let mut result = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (name, value) in patch {
        if value.is_null() {
            result.remove(name);
        } else {
            let merged = merge_patch(result.get(name).unwrap_or(&Value::Null), value);
            result.insert(name.clone(), merged);
        }
    }
    Value::Object(result)
}

/// True if a strategic merge patch means the same as a merge patch: no `$`
/// key and no list the strategy merges.
fn plain_strategic(patch: &Value, path: &str) -> bool {
    match patch {
        Value::Object(map) => map.iter().all(|(name, value)| {
            let path = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            !name.starts_with('$')
                && !(value.is_array()
                    && matches!(
                        path.as_str(),
                        "metadata.finalizers" | "metadata.ownerReferences"
                    ))
                && plain_strategic(value, &path)
        }),
        _ => true,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let parts = split_nul(data, 2);
    let Ok(document) = serde_json::from_slice::<Value>(parts[0]) else {
        return;
    };
    let content_type = if mode & 4 == 0 {
        "application/json-patch+json"
    } else {
        "application/apply-patch+yaml"
    };
    let body = match decode_body(content_type, parts[1]) {
        Ok(body) => body,
        Err(error) => {
            assert_eq!(error.code, 400, "{error:?}");
            return;
        }
    };
    let patch_type = match mode % 4 {
        0 => PatchType::Json,
        1 => PatchType::Merge,
        _ => PatchType::StrategicMerge,
    };
    let mut patched = document.clone();
    let result = apply(patch_type, &mut patched, body.clone());
    if let Err(error) = &result {
        assert!(matches!(error.code, 400 | 413 | 422), "{error:?}");
    }
    match patch_type {
        PatchType::Merge => {
            assert_eq!(result.is_ok(), body.is_object());
            if result.is_ok() {
                assert_eq!(patched, merge_patch(&document, &body), "{body}");
            }
        }
        PatchType::StrategicMerge => {
            if result.is_ok() && plain_strategic(&body, "") {
                assert_eq!(patched, merge_patch(&document, &body), "{body}");
            }
        }
        PatchType::Json => {}
    }
});
