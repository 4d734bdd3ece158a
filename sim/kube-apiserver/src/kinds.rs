//! The kinds the server serves: built-ins the product touches, plus every
//! custom resource as soon as its CustomResourceDefinition is stored.

use jsonpath_rust::parser::model::JpQuery;
use serde_json::{Value, json};

/// One served resource type (one version of it).
#[derive(Debug, Clone)]
pub struct Kind {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Writes to the main resource ignore status; `/status` writes only status.
    pub status_subresource: bool,
    /// A custom resource: `generation` tracks spec changes; schema applies.
    pub custom: bool,
    /// The version's `openAPIV3Schema`, for validation and pruning.
    pub schema: Option<Value>,
    pub printer_columns: Vec<Value>,
}

impl Kind {
    fn builtin(
        group: &str,
        version: &str,
        kind: &str,
        plural: &str,
        namespaced: bool,
        short: &[&str],
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            namespaced,
            short_names: short.iter().map(|s| s.to_string()).collect(),
            categories: Vec::new(),
            status_subresource: false,
            custom: false,
            schema: None,
            printer_columns: Vec::new(),
        }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The `APIResource` entries discovery lists for this kind.
    pub fn api_resources(&self) -> Vec<Value> {
        let verbs = json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ]);
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
        });
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            main["categories"] = json!(self.categories);
        }
        let mut out = vec![main];
        if self.status_subresource {
            out.push(json!({
                "name": format!("{}/status", self.plural),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
        out
    }
}

/// The built-in kinds.
pub fn builtins() -> Vec<Kind> {
    let mut namespace = Kind::builtin("", "v1", "Namespace", "namespaces", false, &["ns"]);
    namespace.status_subresource = true;
    vec![
        namespace,
        Kind::builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"]),
        Kind::builtin("", "v1", "Secret", "secrets", true, &[]),
        Kind::builtin("", "v1", "Event", "events", true, &["ev"]),
        Kind::builtin("events.k8s.io", "v1", "Event", "events", true, &["ev"]),
        Kind::builtin("coordination.k8s.io", "v1", "Lease", "leases", true, &[]),
        {
            let mut crd = Kind::builtin(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
                "customresourcedefinitions",
                false,
                &["crd", "crds"],
            );
            crd.status_subresource = true;
            crd
        },
    ]
}

/// The kinds a stored CRD defines (one per served version), or why it is invalid.
pub fn from_crd(crd: &Value) -> Result<Vec<Kind>, Vec<(String, String)>> {
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let problems = crd_problems(crd, &spec, &versions);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(true))
        .map(|version| crd_version_kind(&spec, version))
        .collect())
}

/// The string at `pointer` in a CRD's spec; empty if absent.
fn spec_text(spec: &Value, pointer: &str) -> String {
    spec.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// The strings of the array at `pointer` in a CRD's spec.
fn spec_strings(spec: &Value, pointer: &str) -> Vec<String> {
    spec.pointer(pointer)
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// What the real server refuses in a CRD: missing names, a name other than
/// `plural.group`, an unknown scope, no versions, bad printer columns.
fn crd_problems(crd: &Value, spec: &Value, versions: &[Value]) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    let group = spec_text(spec, "/group");
    let plural = spec_text(spec, "/names/plural");
    if group.is_empty() {
        problems.push(("spec.group".into(), "Required value".into()));
    }
    if plural.is_empty() {
        problems.push(("spec.names.plural".into(), "Required value".into()));
    }
    if spec_text(spec, "/names/kind").is_empty() {
        problems.push(("spec.names.kind".into(), "Required value".into()));
    }
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        problems.push((
            "metadata.name".into(),
            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = spec_text(spec, "/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        problems.push((
            "spec.scope".into(),
            format!(
                "Unsupported value: \"{scope}\": supported values: \"Cluster\", \"Namespaced\""
            ),
        ));
    }
    if versions.is_empty() {
        problems.push((
            "spec.versions".into(),
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    problems.extend(printer_column_problems(versions));
    problems
}

/// The kind a valid CRD's `spec` defines at one of its `versions`.
fn crd_version_kind(spec: &Value, version: &Value) -> Kind {
    let kind = spec_text(spec, "/names/kind");
    let singular = match spec_text(spec, "/names/singular") {
        singular if singular.is_empty() => kind.to_ascii_lowercase(),
        singular => singular,
    };
    Kind {
        group: spec_text(spec, "/group"),
        version: version
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("v1")
            .to_string(),
        kind,
        plural: spec_text(spec, "/names/plural"),
        singular,
        namespaced: spec_text(spec, "/scope") == "Namespaced",
        short_names: spec_strings(spec, "/names/shortNames"),
        categories: spec_strings(spec, "/names/categories"),
        status_subresource: version.pointer("/subresources/status").is_some(),
        custom: true,
        schema: version.pointer("/schema/openAPIV3Schema").cloned(),
        printer_columns: version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
    }
}

/// The real server's checks of `additionalPrinterColumns[].jsonPath`: set,
/// and a path from the object starting with `.`; this server also refuses
/// one it could not evaluate.
fn printer_column_problems(versions: &[Value]) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    for (v, version) in versions.iter().enumerate() {
        let columns = version
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (c, column) in columns.iter().enumerate() {
            let field = format!("spec.versions[{v}].additionalPrinterColumns[{c}].jsonPath");
            let path = column.get("jsonPath").and_then(Value::as_str).unwrap_or("");
            let problem = if path.is_empty() {
                Some("Required value".to_string())
            } else if !path.starts_with('.') {
                Some(format!(
                    "Invalid value: \"{path}\": must be a simple json path starting with ."
                ))
            } else {
                parse_path(path)
                    .err()
                    .map(|error| format!("Invalid value: \"{path}\": {error}"))
            };
            problems.extend(problem.map(|problem| (field, problem)));
        }
    }
    problems
}

/// A printer column's `jsonPath` (`.status.phase`, as the CRD writes it,
/// relative to the object) as a query from the root.
pub fn parse_path(path: &str) -> Result<JpQuery, String> {
    let rooted = if path.starts_with('$') {
        path.to_string()
    } else {
        format!("${path}")
    };
    jsonpath_rust::parser::parse_json_path(&rooted).map_err(|error| error.to_string())
}

/// True for `events.k8s.io/v1` Events: the same objects as core/v1 Events
/// (stored in core form), in a different shape.
pub fn is_events_api(kind: &Kind) -> bool {
    kind.group == "events.k8s.io" && kind.plural == "events"
}

/// The real server's rule for an `events.k8s.io/v1` Event it creates: the
/// deprecated fields that core/v1 shows as `firstTimestamp`,
/// `lastTimestamp` and `count` must be unset (a client that wants them
/// writes a core/v1 Event). One cause per field set, named as the real
/// server names them.
pub fn events_api_create_problems(kind: &Kind, object: &Value) -> Vec<(String, String)> {
    if !is_events_api(kind) {
        return Vec::new();
    }
    [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
    ]
    .into_iter()
    .filter(|(sent, _)| object.get(sent).is_some_and(|v| !v.is_null()))
    .map(|(_, core)| {
        (
            core.to_string(),
            "Invalid value: \"\": needs to be unset".to_string(),
        )
    })
    .collect()
}

/// Field renames between `events.k8s.io/v1` (left) and core/v1 (right), as
/// the real server converts them.
const EVENT_FIELDS: [(&str, &str); 6] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
];

fn rename(object: &mut Value, pairs: impl Iterator<Item = (&'static str, &'static str)>) {
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let moved: Vec<(&str, Option<Value>)> =
        pairs.map(|(from, to)| (to, map.remove(from))).collect();
    for (to, value) in moved {
        match value {
            Some(value) => {
                map.insert(to.to_string(), value);
            }
            None => {
                map.remove(to);
            }
        }
    }
}

/// The stored (core/v1) form of an object sent to `kind`'s endpoint.
pub fn to_storage(kind: &Kind, mut object: Value) -> Value {
    if is_events_api(kind) && object.is_object() {
        let count = object
            .as_object_mut()
            .and_then(|m| m.remove("deprecatedCount"));
        rename(&mut object, EVENT_FIELDS.into_iter());
        if let Some(count) = count {
            object["count"] = count;
        }
        object["apiVersion"] = json!("v1");
    }
    object
}

/// A stored object as `kind`'s endpoint serves it.
pub fn to_served(kind: &Kind, object: &Value) -> Value {
    let mut object = object.clone();
    if is_events_api(kind) && object.is_object() {
        let count = object.as_object_mut().and_then(|m| m.remove("count"));
        rename(&mut object, EVENT_FIELDS.into_iter().map(|(a, b)| (b, a)));
        if let Some(count) = count {
            object["deprecatedCount"] = count;
        }
    }
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(kind.api_version()));
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_api_events_round_trip_through_the_core_form() {
        let kinds = builtins();
        let events_api = kinds
            .iter()
            .find(|k| is_events_api(k))
            .expect("events.k8s.io");
        let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "note": "hello", "regarding": {"name": "demo"}, "reportingController": "radwasm",
            "deprecatedCount": 3, "reason": "Deploying"});
        let stored = to_storage(events_api, sent.clone());
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["involvedObject"]["name"], "demo");
        assert_eq!(stored["reportingComponent"], "radwasm");
        assert_eq!(stored["count"], 3);
        assert!(stored.get("note").is_none());
        assert_eq!(to_served(events_api, &stored), sent);
    }

    #[test]
    fn an_events_api_event_is_created_without_the_fields_core_v1_shows() {
        let kinds = builtins();
        let events_api = kinds
            .iter()
            .find(|k| is_events_api(k))
            .expect("events.k8s.io");
        let core = kinds
            .iter()
            .find(|k| k.group.is_empty() && k.plural == "events")
            .expect("core/v1 events");
        let sent = json!({"metadata": {"name": "e"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "deprecatedLastTimestamp": "2026-01-01T00:00:00Z", "deprecatedCount": 1});
        let problems = events_api_create_problems(events_api, &sent);
        assert_eq!(
            problems.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>(),
            ["lastTimestamp", "count"]
        );
        assert!(events_api_create_problems(core, &sent).is_empty());
    }
}
