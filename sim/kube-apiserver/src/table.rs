//! Server-side printing: the `meta.k8s.io/v1` `Table` that `kubectl get`
//! asks for (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`), with
//! the columns the real server prints for the built-in kinds and a CRD's
//! `additionalPrinterColumns` (or `Age` when it declares none).
//!
//! A printer column's `jsonPath` is evaluated as the real server does (its
//! `k8s.io/client-go/util/jsonpath`, missing keys allowed, the first result
//! taken): plain paths, indexes, and filters such as
//! `.status.conditions[?(@.type=="Ready")].status`. The evaluation is the
//! `jsonpath-rust` crate's (RFC 9535, whose syntax is a superset of the
//! subset CRD columns use), on the path with the root `$` prefixed.

use jsonpath_rust::parser::model::JpQuery;
use serde_json::{Value, json};

use crate::kinds::{Kind, parse_path};

/// What the client asked to get back in each row's `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(text: Option<&str>) -> Self {
        match text {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// True when the Accept header asks for a Table (kubectl puts it first).
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// How one column gets its cell.
enum Cell {
    Name,
    /// A printer column's JSONPath (parsed, or why it cannot be) with the
    /// column's type.
    Path(Result<JpQuery, String>, String),
    Age,
    /// Creation time as an RFC 3339 string (CRDs' "Created At").
    CreatedAt,
    DataCount,
    EventLastSeen,
    EventObject,
}

struct Column {
    definition: Value,
    cell: Cell,
}

fn column(
    name: &str,
    kind: &str,
    format: &str,
    priority: i64,
    description: &str,
    cell: Cell,
) -> Column {
    Column {
        definition: json!({"name": name, "type": kind, "format": format, "description": description, "priority": priority}),
        cell,
    }
}

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

fn columns(kind: &Kind) -> Vec<Column> {
    let name = || column("Name", "string", "name", 0, NAME_DESCRIPTION, Cell::Name);
    let age = || column("Age", "string", "", 0, AGE_DESCRIPTION, Cell::Age);
    let path = |title: &str, kind: &str, path: &str, priority: i64| {
        column(
            title,
            kind,
            "",
            priority,
            "",
            Cell::Path(parse_path(path), kind.into()),
        )
    };
    if kind.custom {
        let mut out = vec![name()];
        if kind.printer_columns.is_empty() {
            out.push(column(
                "Age",
                "date",
                "",
                0,
                AGE_DESCRIPTION,
                Cell::Path(parse_path(".metadata.creationTimestamp"), "date".into()),
            ));
        }
        for printer in &kind.printer_columns {
            let text = |field: &str| printer.get(field).and_then(Value::as_str).unwrap_or("");
            out.push(column(
                text("name"),
                text("type"),
                text("format"),
                printer.get("priority").and_then(Value::as_i64).unwrap_or(0),
                text("description"),
                Cell::Path(parse_path(text("jsonPath")), text("type").into()),
            ));
        }
        return out;
    }
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Namespace") => vec![name(), path("Status", "string", ".status.phase", 0), age()],
        ("", "ConfigMap") => vec![
            name(),
            column("Data", "integer", "", 0, "", Cell::DataCount),
            age(),
        ],
        ("", "Secret") => vec![
            name(),
            path("Type", "string", ".type", 0),
            column("Data", "integer", "", 0, "", Cell::DataCount),
            age(),
        ],
        ("coordination.k8s.io", "Lease") => {
            vec![
                name(),
                path("Holder", "string", ".spec.holderIdentity", 0),
                age(),
            ]
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => vec![
            name(),
            column(
                "Created At",
                "date",
                "",
                0,
                AGE_DESCRIPTION,
                Cell::CreatedAt,
            ),
        ],
        (_, "Event") => vec![
            column("Last Seen", "string", "", 0, "", Cell::EventLastSeen),
            path("Type", "string", ".type", 0),
            path("Reason", "string", ".reason", 0),
            column("Object", "string", "", 0, "", Cell::EventObject),
            path("Message", "string", ".message", 0),
            column("Name", "string", "name", 1, NAME_DESCRIPTION, Cell::Name),
        ],
        _ => vec![name(), age()],
    }
}

/// A `Table` of `objects` (each as stored: core form for Events);
/// `served` gives an object's wire form for the rows' `object`.
pub fn table(
    kind: &Kind,
    objects: &[Value],
    list_metadata: Value,
    include: IncludeObject,
    served: impl Fn(&Value) -> Value,
) -> Value {
    let columns = columns(kind);
    let now = chrono::Utc::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(&c.cell, object, now)).collect();
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": object.get("metadata").cloned().unwrap_or(json!({}))});
                }
                IncludeObject::Object => row["object"] = served(object),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": columns.iter().map(|c| c.definition.clone()).collect::<Vec<_>>(),
        "rows": rows,
    })
}

fn cell(cell: &Cell, object: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    match cell {
        Cell::Name => json!(text("/metadata/name")),
        Cell::Age => json!(age(text("/metadata/creationTimestamp"), now)),
        Cell::CreatedAt => json!(text("/metadata/creationTimestamp")),
        Cell::DataCount => {
            let count = |field: &str| {
                object
                    .get(field)
                    .and_then(Value::as_object)
                    .map_or(0, |m| m.len())
            };
            json!(count("data") + count("binaryData") + count("stringData"))
        }
        Cell::EventLastSeen => {
            let last = [
                text("/series/lastObservedTime"),
                text("/lastTimestamp"),
                text("/eventTime"),
            ]
            .into_iter()
            .find(|t| !t.is_empty())
            .unwrap_or("");
            json!(if last.is_empty() {
                "<unknown>".to_string()
            } else {
                age(last, now)
            })
        }
        Cell::EventObject => json!(format!(
            "{}/{}",
            text("/involvedObject/kind").to_ascii_lowercase(),
            text("/involvedObject/name")
        )),
        Cell::Path(path, kind) => match lookup(object, path) {
            None | Some(Value::Null) => Value::Null,
            Some(value) => typed(kind, value, now),
        },
    }
}

/// A CRD printer column's value as the real server types it.
fn typed(kind: &str, value: &Value, now: chrono::DateTime<chrono::Utc>) -> Value {
    match kind {
        "integer" => value
            .as_i64()
            .or_else(|| value.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        "number" => value.as_f64().map_or(Value::Null, |f| json!(f)),
        "boolean" => value.as_bool().map_or(Value::Null, |b| json!(b)),
        "date" => value.as_str().map_or(Value::Null, |t| json!(age(t, now))),
        // "string" prints any value the way JSONPath prints it.
        _ => match value {
            Value::String(s) => json!(s),
            other => json!(other.to_string()),
        },
    }
}

/// The first value `path` finds in `object`, as the real server takes it
/// (`results[0][0]`); `None` when it finds nothing or cannot be parsed.
fn lookup<'a>(object: &'a Value, path: &Result<JpQuery, String>) -> Option<&'a Value> {
    let query = path.as_ref().ok()?;
    jsonpath_rust::query::js_path_process(query, object)
        .ok()?
        .into_iter()
        .next()
        .map(|found| found.val())
}

/// How long ago `timestamp` was, in the real server's short form (`45s`,
/// `3m12s`, `5h`, `2d3h`, `1y20d`).
pub fn age(timestamp: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let Ok(then) = chrono::DateTime::parse_from_rfc3339(timestamp) else {
        return "<invalid>".into();
    };
    human_duration((now - then.with_timezone(&chrono::Utc)).num_seconds())
}

fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    let with = |big: i64, big_unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit}{small}{small_unit}")
        }
    };
    match () {
        _ if seconds < 120 => format!("{seconds}s"),
        _ if minutes < 10 => with(minutes, "m", seconds % 60, "s"),
        _ if minutes < 180 => format!("{minutes}m"),
        _ if hours < 8 => with(hours, "h", minutes % 60, "m"),
        _ if hours < 48 => format!("{hours}h"),
        _ if hours < 24 * 8 => with(days, "d", hours % 24, "h"),
        _ if days < 365 * 2 => format!("{days}d"),
        _ if days < 365 * 8 => with(days / 365, "y", days % 365, "d"),
        _ => format!("{}y", days / 365),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl_prints_them() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(119), "119s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(600), "10m");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(50 * 3600), "2d2h");
        assert_eq!(human_duration(400 * 86400), "400d");
        assert_eq!(human_duration(-5), "<invalid>");
    }

    #[test]
    fn printer_column_paths_follow_fields_indexes_and_filters() {
        let object = json!({"status": {"conditions": [
            {"type": "Progressing", "status": "False"},
            {"type": "Ready", "status": "True"},
        ]}});
        let find = |path: &str| lookup(&object, &parse_path(path)).cloned();
        assert_eq!(
            find(".status.conditions[0].type"),
            Some(json!("Progressing"))
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(
            find(".status.conditions[?(@.type=='Ready')].status"),
            Some(json!("True"))
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Gone")].status"#),
            None
        );
        assert_eq!(find(".status.phase"), None);
        assert!(parse_path(".status[?(").is_err());
        assert_eq!(lookup(&object, &parse_path(".status[?(")), None);
    }
}
