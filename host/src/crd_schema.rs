//! Comparing CRD schemas field by field: which fields a schema declares
//! (their paths and types), and which of them another schema would keep.
//!
//! Used twice: at run time, to find the fields the controller writes that
//! the installed `CustomResourceDefinition` would drop (the API server
//! prunes every field its schema does not declare), see
//! `controller/schema_check.rs`; and in a test, to show that our CRDs keep
//! every field of Radius's own.
//!
//! A path names properties joined by `.`; `[]` stands for the items of an
//! array and `*` for the values of a map (`additionalProperties`), e.g.
//! `status.outputResources.[]` or `spec.parameters.*`.

use serde_json::Value;

/// One field a schema declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub path: String,
    /// Its `type`, or empty when it declares none (a field that takes any
    /// value, `x-kubernetes-preserve-unknown-fields`).
    pub kind: String,
}

/// Where a path leads in a schema.
enum Step<'a> {
    /// To this node.
    Node(&'a Value),
    /// Into a node that keeps whatever is written beneath it.
    Anything,
    /// Nowhere: the schema would drop it.
    Dropped,
}

fn preserves(node: &Value) -> bool {
    node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn step<'a>(node: &'a Value, token: &str) -> Step<'a> {
    let child = match token {
        "[]" => node.get("items"),
        "*" => node.get("additionalProperties").filter(|v| v.is_object()),
        name => node
            .get("properties")
            .and_then(|properties| properties.get(name))
            .or_else(|| node.get("additionalProperties").filter(|v| v.is_object())),
    };
    match child {
        Some(child) => Step::Node(child),
        None if preserves(node) => Step::Anything,
        // `additionalProperties: true` keeps any value as well.
        None if token != "[]" && node.get("additionalProperties") == Some(&Value::Bool(true)) => {
            Step::Anything
        }
        None => Step::Dropped,
    }
}

/// Whether `schema` (a version's `openAPIV3Schema`) keeps a value of type
/// `kind` at `path`: the path is declared with that type, or with no type
/// where any value is kept, or lies beneath a field that keeps anything. An
/// empty `kind` asks only whether the path is kept.
pub fn admits(schema: &Value, path: &str, kind: &str) -> bool {
    let mut node = schema;
    for token in path.split('.') {
        match step(node, token) {
            Step::Node(child) => node = child,
            Step::Anything => return true,
            Step::Dropped => return false,
        }
    }
    match node.get("type").and_then(Value::as_str) {
        Some(declared) => kind.is_empty() || declared == kind,
        None => {
            kind.is_empty()
                || preserves(node)
                || (node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
                    && matches!(kind, "integer" | "string"))
        }
    }
}

/// Every field `schema` declares under `spec` and `status`, parents before
/// their children.
pub fn fields(schema: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for top in ["spec", "status"] {
            if let Some(node) = properties.get(top) {
                collect(node, top.to_string(), &mut out);
            }
        }
    }
    out
}

fn collect(node: &Value, path: String, out: &mut Vec<Field>) {
    out.push(Field {
        path: path.clone(),
        kind: node
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    });
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            collect(child, format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = node.get("items").filter(|v| v.is_object()) {
        collect(items, format!("{path}.[]"), out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        collect(values, format!("{path}.*"), out);
    }
}

/// The fields of `ours` that `installed` would not keep (or would keep
/// only as another type): the topmost of each such subtree, in schema
/// order. Empty when `installed` keeps everything `ours` declares.
pub fn missing(ours: &Value, installed: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for field in fields(ours) {
        let beneath_reported = out
            .iter()
            .any(|reported| field.path.starts_with(&format!("{reported}.")));
        if !beneath_reported && !admits(installed, &field.path, &field.kind) {
            out.push(field.path);
        }
    }
    out
}

/// The `openAPIV3Schema` of `version` in a CRD (as JSON), if it serves it.
pub fn version_schema(crd: &Value, version: &str) -> Option<Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
        .map(|v| {
            v.pointer("/schema/openAPIV3Schema")
                .cloned()
                .unwrap_or(Value::Null)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ours() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "id": {"type": "string"},
                "free": {"x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"type": "object", "properties": {
                "phrase": {"type": "string"},
                "count": {"type": "integer"},
                "conditions": {"type": "array", "items": {"type": "object", "properties": {
                    "type": {"type": "string"},
                }}},
            }},
        }})
    }

    #[test]
    fn paths_types_and_what_a_schema_keeps() {
        let schema = ours();
        let paths: Vec<String> = fields(&schema).into_iter().map(|f| f.path).collect();
        assert_eq!(
            paths,
            [
                "spec",
                "spec.free",
                "spec.id",
                "status",
                "status.conditions",
                "status.conditions.[]",
                "status.conditions.[].type",
                "status.count",
                "status.phrase",
            ]
        );
        assert!(admits(&schema, "status.phrase", "string"));
        assert!(!admits(&schema, "status.phrase", "integer"));
        assert!(!admits(&schema, "status.id", "string"));
        // An untyped field that keeps anything takes text and objects.
        assert!(admits(&schema, "spec.free", "string"));
        assert!(admits(&schema, "spec.free.*", "string"));
        assert!(admits(&schema, "spec.free.a.b", "object"));
        assert!(admits(&schema, "status.conditions.[].type", "string"));
    }

    #[test]
    fn missing_names_the_topmost_field_dropped_or_retyped() {
        let installed = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "id": {"type": "string"},
                "free": {"type": "object", "additionalProperties": {"type": "string"}},
            }},
            "status": {"type": "object", "properties": {
                "phrase": {"type": "string"},
                "count": {"type": "string"},
            }},
        }});
        assert_eq!(
            missing(&ours(), &installed),
            ["status.conditions", "status.count"]
        );
        assert!(missing(&ours(), &ours()).is_empty());
        // A status that keeps anything keeps all of ours.
        let open = json!({"type": "object", "properties": {
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        }});
        assert!(missing(&ours(), &open).is_empty());
        // No schema at all: both halves go.
        assert_eq!(missing(&ours(), &Value::Null), ["spec", "status"]);
    }

    #[test]
    fn the_schema_of_a_served_version() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1alpha2", "schema": {"openAPIV3Schema": {"type": "string"}}},
            {"name": "v1alpha3", "schema": {"openAPIV3Schema": {"type": "object"}}},
        ]}});
        assert_eq!(
            version_schema(&crd, "v1alpha3"),
            Some(json!({"type": "object"}))
        );
        assert_eq!(version_schema(&crd, "v1"), None);
    }
}
