//! Strategic merge patch for the built-in kinds (what `kubectl apply` and
//! `kubectl patch` send for them by default): JSON merge patch plus the
//! lists the real types declare as merged (`metadata.finalizers` by value,
//! `metadata.ownerReferences` by `uid`) and the `$patch`, `$retainKeys`,
//! `$setElementOrder/` and `$deleteFromPrimitiveList/` directives. Custom
//! resources do not accept it, as on the real server.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// The patch types a PATCH request may send (server-side apply is applied as
/// a merge patch; see docs/apiserver.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386), and apply patches.
    Merge,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    StrategicMerge,
}

/// Apply a PATCH request's body to `document`, the object in the shape the
/// client addressed. On an error `document` may be half patched: callers
/// patch a copy and drop it.
pub fn apply(patch_type: PatchType, document: &mut Value, body: Value) -> Result<(), ApiError> {
    match patch_type {
        PatchType::Json => {
            let operations: json_patch::Patch = serde_json::from_value(body)
                .map_err(|e| ApiError::bad_request(format!("the JSON patch is not valid: {e}")))?;
            json_patch(document, &operations)
        }
        PatchType::StrategicMerge => {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            strategic_merge(document, &body).map_err(ApiError::bad_request)
        }
        PatchType::Merge => {
            if !body.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(document, &body);
            Ok(())
        }
    }
}

/// How a list field is patched.
enum ListStrategy {
    Replace,
    /// Union of primitive values.
    MergePrimitives,
    /// Elements matched by this key and merged.
    MergeBy(&'static str),
}

fn list_strategy(path: &str) -> ListStrategy {
    match path {
        "metadata.finalizers" => ListStrategy::MergePrimitives,
        "metadata.ownerReferences" => ListStrategy::MergeBy("uid"),
        _ => ListStrategy::Replace,
    }
}

/// Most operations in one JSON patch, as on the real server
/// (`maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Most bytes the `copy` operations of one JSON patch may add, as on the
/// real server (`--json-patch-max-copy-bytes`, 3 MiB by default). Without a
/// bound, a patch of forty `copy`s of a list into itself asks for 2^40
/// elements and the process runs out of memory.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 << 20;

/// Apply a JSON patch (RFC 6902) within the real server's limits.
fn json_patch(document: &mut Value, operations: &json_patch::Patch) -> Result<(), ApiError> {
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                operations.len()
            ),
        ));
    }
    let mut copied = 0usize;
    for (at, operation) in operations.iter().enumerate() {
        if let json_patch::PatchOperation::Copy(copy) = operation {
            copied = copied.saturating_add(
                document
                    .pointer(copy.from.as_str())
                    .map_or(0, serialized_size),
            );
            if copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "the JSON patch could not be applied: operation '/{at}': the copies would add more than {MAX_JSON_PATCH_COPY_BYTES} bytes"
                    ),
                ));
            }
        }
        // `patch_unsafe`: on an error `document`, a copy, is dropped, so
        // nothing needs undoing. `patch` undoes the applied operations
        // instead, and panics where it cannot (a value moved over its
        // parent, then a failing operation), with the store locked.
        json_patch::patch_unsafe(document, std::slice::from_ref(operation)).map_err(|mut e| {
            e.operation = at;
            ApiError::new(
                422,
                "Invalid",
                format!("the JSON patch could not be applied: {e}"),
            )
        })?;
    }
    Ok(())
}

/// Length of `value` as compact JSON, counted without building the text.
fn serialized_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Apply a strategic merge patch to `document`.
pub fn strategic_merge(document: &mut Value, patch: &Value) -> Result<(), String> {
    merge_map(document, patch, "")
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn merge_map(target: &mut Value, patch: &Value, path: &str) -> Result<(), String> {
    let Some(patch) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch.clone();
            replaced.remove("$patch");
            *target = Value::Object(strip_directives(replaced));
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Object(Map::new());
            return Ok(());
        }
        Some(other) => return Err(format!("unknown patch type: {other:?} at {path}")),
        None => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(map) = target.as_object_mut() else {
        return Ok(());
    };
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        map.retain(|name, _| keep.contains(&name.as_str()));
    }
    for (name, value) in patch {
        if name == "$retainKeys" || name.starts_with("$setElementOrder/") {
            continue; // order is not kept; see docs/apiserver.md
        }
        if let Some(field) = name.strip_prefix("$deleteFromPrimitiveList/") {
            let doomed = value.as_array().cloned().unwrap_or_default();
            if let Some(list) = map.get_mut(field).and_then(Value::as_array_mut) {
                list.retain(|item| !doomed.contains(item));
            }
            continue;
        }
        let field_path = join(path, name);
        match value {
            Value::Null => {
                map.remove(name);
            }
            Value::Object(_) => {
                let slot = map.entry(name.clone()).or_insert(Value::Null);
                merge_map(slot, value, &field_path)?;
            }
            Value::Array(items) => match list_strategy(&field_path) {
                ListStrategy::Replace => {
                    map.insert(name.clone(), value.clone());
                }
                ListStrategy::MergePrimitives => {
                    let slot = map.entry(name.clone()).or_insert(Value::Array(Vec::new()));
                    if let Some(list) = slot.as_array_mut() {
                        for item in items {
                            if !list.contains(item) {
                                list.push(item.clone());
                            }
                        }
                    }
                }
                ListStrategy::MergeBy(key) => {
                    let slot = map.entry(name.clone()).or_insert(Value::Array(Vec::new()));
                    merge_list_by(slot, items, key, &field_path)?;
                }
            },
            other => {
                map.insert(name.clone(), other.clone());
            }
        }
    }
    Ok(())
}

fn merge_list_by(target: &mut Value, items: &[Value], key: &str, path: &str) -> Result<(), String> {
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Some(list) = target.as_array_mut() else {
        return Ok(());
    };
    for item in items {
        let Some(id) = item.get(key) else {
            return Err(format!(
                "map: {item} does not contain declared merge key: {key} ({path})"
            ));
        };
        let existing = list.iter().position(|e| e.get(key) == Some(id));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (existing, delete) {
            (Some(at), true) => {
                list.remove(at);
            }
            (None, true) => {}
            (Some(at), false) => merge_map(&mut list[at], item, path)?,
            (None, false) => {
                let mut fresh = Value::Object(Map::new());
                merge_map(&mut fresh, item, path)?;
                list.push(fresh);
            }
        }
    }
    Ok(())
}

fn strip_directives(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(name, _)| !name.starts_with('$'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merged_lists_keep_existing_elements_and_directives_apply() {
        let mut object = json!({"metadata": {"finalizers": ["a"], "ownerReferences": [
            {"uid": "1", "name": "one"}, {"uid": "2", "name": "two"}]},
            "data": {"x": "1", "y": "2"}, "spec": {"list": [1, 2]}});
        strategic_merge(
            &mut object,
            &json!({"metadata": {"finalizers": ["b"], "$setElementOrder/finalizers": ["a", "b"],
                "ownerReferences": [{"uid": "2", "$patch": "delete"}, {"uid": "3", "name": "three"}]},
                "data": {"y": null, "z": "3"}, "spec": {"list": [3]}}),
        )
        .expect("patch");
        assert_eq!(object["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([{"uid": "1", "name": "one"}, {"uid": "3", "name": "three"}])
        );
        assert_eq!(object["data"], json!({"x": "1", "z": "3"}));
        assert_eq!(
            object["spec"]["list"],
            json!([3]),
            "other lists are replaced"
        );

        strategic_merge(
            &mut object,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}, "data": {"$patch": "replace", "only": "1"}}),
        )
        .expect("patch");
        assert_eq!(object["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(object["data"], json!({"only": "1"}));
    }
}
