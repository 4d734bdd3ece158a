//! Each decoded message as the JSON its Go type marshals to: the field names
//! of the `json` tags, `omitempty` honoured as `encoding/json` honours it
//! (an empty string, zero number, empty list or map and an unset pointer
//! are left out; a struct never is), `[]byte` as base64, `metav1.Time` as
//! RFC 3339 seconds and `metav1.MicroTime` as microseconds, both `null`
//! when zero. That is the JSON kubectl prints with `-o json` and would have
//! sent, so the server stores the same object whichever encoding came in.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Map, Value, json};

/// Why a decoded message has no JSON form (a time out of range, managed
/// fields that are not JSON), naming the field.
pub(super) type Invalid = String;

/// One Go struct being marshalled, field by field.
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Fields {
    fn put(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_string(), value);
        self
    }

    /// A `string` tagged `omitempty`: left out when empty.
    fn text(self, key: &str, value: &Option<String>) -> Self {
        match value.as_deref() {
            Some(text) if !text.is_empty() => self.put(key, json!(text)),
            _ => self,
        }
    }

    /// A `string` without `omitempty`: always there, `""` when empty.
    fn text_always(self, key: &str, value: &Option<String>) -> Self {
        self.put(key, json!(value.as_deref().unwrap_or("")))
    }

    /// An integer tagged `omitempty`: left out when zero.
    fn number(self, key: &str, value: Option<impl Into<i64>>) -> Self {
        match value.map(Into::into) {
            Some(number) if number != 0 => self.put(key, json!(number)),
            _ => self,
        }
    }

    /// A pointer (`*string`, `*int32`, `*bool`): there whenever it is set,
    /// zero included.
    fn pointer(self, key: &str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(value) => self.put(key, value.into()),
            None => self,
        }
    }

    /// A slice tagged `omitempty`: left out when empty.
    fn list(self, key: &str, items: Vec<Value>) -> Self {
        if items.is_empty() {
            self
        } else {
            self.put(key, Value::Array(items))
        }
    }

    fn texts(self, key: &str, items: &[String]) -> Self {
        self.list(key, items.iter().map(|item| json!(item)).collect())
    }

    /// A `map[string]string` tagged `omitempty`.
    fn map(self, key: &str, map: &BTreeMap<String, String>) -> Self {
        if map.is_empty() {
            self
        } else {
            self.put(key, json!(map))
        }
    }

    /// A `map[string][]byte` tagged `omitempty`: each value in base64.
    fn bytes_map(self, key: &str, map: &BTreeMap<String, Vec<u8>>) -> Self {
        if map.is_empty() {
            return self;
        }
        let encoded: Map<String, Value> = map
            .iter()
            .map(|(k, v)| (k.clone(), json!(base64::prelude::BASE64_STANDARD.encode(v))))
            .collect();
        self.put(key, Value::Object(encoded))
    }

    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// A `metav1.Time`: seconds only (the real server drops the nanoseconds of
/// a protobuf Time too), `null` when zero (an empty message).
fn time(field: &str, value: &Option<meta::Time>) -> Result<Value, Invalid> {
    match value {
        None
        | Some(meta::Time {
            seconds: None,
            nanos: None,
        }) => Ok(Value::Null),
        Some(t) => format_time(field, t.seconds.unwrap_or(0), 0, "%Y-%m-%dT%H:%M:%SZ"),
    }
}

/// A `metav1.MicroTime`: microseconds, `null` when zero.
fn micro_time(field: &str, value: &Option<meta::MicroTime>) -> Result<Value, Invalid> {
    match value {
        None
        | Some(meta::MicroTime {
            seconds: None,
            nanos: None,
        }) => Ok(Value::Null),
        Some(t) => format_time(
            field,
            t.seconds.unwrap_or(0),
            t.nanos.unwrap_or(0),
            "%Y-%m-%dT%H:%M:%S%.6fZ",
        ),
    }
}

fn format_time(field: &str, seconds: i64, nanos: i32, format: &str) -> Result<Value, Invalid> {
    // Nanoseconds outside [0, 1e9) carry into the seconds, as Go's time.Unix.
    let nanos = i64::from(nanos);
    let at = seconds
        .checked_add(nanos.div_euclid(1_000_000_000))
        .and_then(|s| chrono::DateTime::from_timestamp(s, nanos.rem_euclid(1_000_000_000) as u32))
        .filter(|t| (0..=9999).contains(&chrono::Datelike::year(t)))
        .ok_or_else(|| {
            format!("{field}: {seconds} s {nanos} ns is not a time in years 0 to 9999")
        })?;
    Ok(json!(at.format(format).to_string()))
}

/// `metav1.ObjectMeta`.
pub(super) fn object_meta(meta: &Option<meta::ObjectMeta>) -> Result<Value, Invalid> {
    let Some(meta) = meta else {
        return Ok(json!({}));
    };
    let mut fields = Fields::default()
        .text("name", &meta.name)
        .text("generateName", &meta.generate_name)
        .text("namespace", &meta.namespace)
        .text("selfLink", &meta.self_link)
        .text("uid", &meta.uid)
        .text("resourceVersion", &meta.resource_version)
        .number("generation", meta.generation);
    // `omitempty,omitzero`: a zero creation time is left out.
    let created = time("metadata.creationTimestamp", &meta.creation_timestamp)?;
    if !created.is_null() {
        fields = fields.put("creationTimestamp", created);
    }
    if meta.deletion_timestamp.is_some() {
        let deleted = time("metadata.deletionTimestamp", &meta.deletion_timestamp)?;
        fields = fields.put("deletionTimestamp", deleted);
    }
    let owners = meta
        .owner_references
        .iter()
        .map(|owner| {
            Fields::default()
                .text_always("apiVersion", &owner.api_version)
                .text_always("kind", &owner.kind)
                .text_always("name", &owner.name)
                .text_always("uid", &owner.uid)
                .pointer("controller", owner.controller)
                .pointer("blockOwnerDeletion", owner.block_owner_deletion)
                .done()
        })
        .collect();
    let managed = meta
        .managed_fields
        .iter()
        .enumerate()
        .map(|(index, entry)| managed_fields_entry(index, entry))
        .collect::<Result<_, _>>()?;
    Ok(fields
        .pointer(
            "deletionGracePeriodSeconds",
            meta.deletion_grace_period_seconds,
        )
        .map("labels", &meta.labels)
        .map("annotations", &meta.annotations)
        .list("ownerReferences", owners)
        .texts("finalizers", &meta.finalizers)
        .list("managedFields", managed)
        .done())
}

fn managed_fields_entry(index: usize, entry: &meta::ManagedFieldsEntry) -> Result<Value, Invalid> {
    let field = format!("metadata.managedFields[{index}]");
    let mut fields = Fields::default()
        .text("manager", &entry.manager)
        .text("operation", &entry.operation)
        .text("apiVersion", &entry.api_version);
    if entry.time.is_some() {
        fields = fields.put("time", time(&format!("{field}.time"), &entry.time)?);
    }
    fields = fields.text("fieldsType", &entry.fields_type);
    if let Some(fields_v1) = &entry.fields_v1 {
        // FieldsV1 is JSON in bytes; it marshals as that JSON.
        let raw = fields_v1.raw.as_deref().unwrap_or(b"{}");
        let value = serde_json::from_slice::<Value>(raw)
            .map_err(|e| format!("{field}.fieldsV1: not JSON: {e}"))?;
        fields = fields.put("fieldsV1", value);
    }
    Ok(fields.text("subresource", &entry.subresource).done())
}

/// `core/v1.ObjectReference` (every field `omitempty`); unset is empty.
fn object_reference(reference: Option<&core::ObjectReference>) -> Value {
    let empty = core::ObjectReference::default();
    let reference = reference.unwrap_or(&empty);
    Fields::default()
        .text("kind", &reference.kind)
        .text("namespace", &reference.namespace)
        .text("name", &reference.name)
        .text("uid", &reference.uid)
        .text("apiVersion", &reference.api_version)
        .text("resourceVersion", &reference.resource_version)
        .text("fieldPath", &reference.field_path)
        .done()
}

fn event_source(source: &Option<core::EventSource>) -> Value {
    let empty = core::EventSource::default();
    let source = source.as_ref().unwrap_or(&empty);
    Fields::default()
        .text("component", &source.component)
        .text("host", &source.host)
        .done()
}

/// The object's fields after `apiVersion` and `kind`.
fn typed(api_version: &str, kind: &str, metadata: Value) -> Fields {
    Fields::default()
        .put("apiVersion", json!(api_version))
        .put("kind", json!(kind))
        .put("metadata", metadata)
}

pub(super) fn config_map(
    (api_version, kind): (&str, &str),
    object: &core::ConfigMap,
) -> Result<Value, Invalid> {
    Ok(typed(api_version, kind, object_meta(&object.metadata)?)
        .pointer("immutable", object.immutable)
        .map("data", &object.data)
        .bytes_map("binaryData", &object.binary_data)
        .done())
}

pub(super) fn secret(
    (api_version, kind): (&str, &str),
    object: &core::Secret,
) -> Result<Value, Invalid> {
    Ok(typed(api_version, kind, object_meta(&object.metadata)?)
        .pointer("immutable", object.immutable)
        .bytes_map("data", &object.data)
        .map("stringData", &object.string_data)
        .text("type", &object.r#type)
        .done())
}

pub(super) fn namespace(
    (api_version, kind): (&str, &str),
    object: &core::Namespace,
) -> Result<Value, Invalid> {
    let spec = object.spec.clone().unwrap_or_default();
    let status = object.status.clone().unwrap_or_default();
    let conditions = status
        .conditions
        .iter()
        .enumerate()
        .map(|(index, condition)| {
            let at = time(
                &format!("status.conditions[{index}].lastTransitionTime"),
                &condition.last_transition_time,
            )?;
            Ok(Fields::default()
                .text_always("type", &condition.r#type)
                .text_always("status", &condition.status)
                .put("lastTransitionTime", at)
                .text("reason", &condition.reason)
                .text("message", &condition.message)
                .done())
        })
        .collect::<Result<_, Invalid>>()?;
    Ok(typed(api_version, kind, object_meta(&object.metadata)?)
        .put(
            "spec",
            Fields::default()
                .texts("finalizers", &spec.finalizers)
                .done(),
        )
        .put(
            "status",
            Fields::default()
                .text("phase", &status.phase)
                .list("conditions", conditions)
                .done(),
        )
        .done())
}

/// A core/v1 Event.
pub(super) fn core_event(
    (api_version, kind): (&str, &str),
    object: &core::Event,
) -> Result<Value, Invalid> {
    let series = match &object.series {
        Some(series) => Some(
            Fields::default()
                .number("count", series.count)
                .put(
                    "lastObservedTime",
                    micro_time("series.lastObservedTime", &series.last_observed_time)?,
                )
                .done(),
        ),
        None => None,
    };
    Ok(typed(api_version, kind, object_meta(&object.metadata)?)
        .put(
            "involvedObject",
            object_reference(object.involved_object.as_ref()),
        )
        .text("reason", &object.reason)
        .text("message", &object.message)
        .put("source", event_source(&object.source))
        .put(
            "firstTimestamp",
            time("firstTimestamp", &object.first_timestamp)?,
        )
        .put(
            "lastTimestamp",
            time("lastTimestamp", &object.last_timestamp)?,
        )
        .number("count", object.count)
        .text("type", &object.r#type)
        .put("eventTime", micro_time("eventTime", &object.event_time)?)
        .pointer("series", series)
        .text("action", &object.action)
        .pointer(
            "related",
            object.related.as_ref().map(|r| object_reference(Some(r))),
        )
        .text_always("reportingComponent", &object.reporting_component)
        .text_always("reportingInstance", &object.reporting_instance)
        .done())
}

/// An events.k8s.io/v1 Event.
pub(super) fn events_event(
    (api_version, kind): (&str, &str),
    object: &events::Event,
) -> Result<Value, Invalid> {
    let series = match &object.series {
        Some(series) => Some(json!({
            "count": series.count.unwrap_or(0),
            "lastObservedTime": micro_time("series.lastObservedTime", &series.last_observed_time)?,
        })),
        None => None,
    };
    Ok(typed(api_version, kind, object_meta(&object.metadata)?)
        .put("eventTime", micro_time("eventTime", &object.event_time)?)
        .pointer("series", series)
        .text("reportingController", &object.reporting_controller)
        .text("reportingInstance", &object.reporting_instance)
        .text("action", &object.action)
        .text("reason", &object.reason)
        .put("regarding", object_reference(object.regarding.as_ref()))
        .pointer(
            "related",
            object.related.as_ref().map(|r| object_reference(Some(r))),
        )
        .text("note", &object.note)
        .text("type", &object.r#type)
        .put("deprecatedSource", event_source(&object.deprecated_source))
        .put(
            "deprecatedFirstTimestamp",
            time(
                "deprecatedFirstTimestamp",
                &object.deprecated_first_timestamp,
            )?,
        )
        .put(
            "deprecatedLastTimestamp",
            time("deprecatedLastTimestamp", &object.deprecated_last_timestamp)?,
        )
        .number("deprecatedCount", object.deprecated_count)
        .done())
}

pub(super) fn lease(
    (api_version, kind): (&str, &str),
    object: &coordination::Lease,
) -> Result<Value, Invalid> {
    let spec = object.spec.clone().unwrap_or_default();
    let mut fields = Fields::default()
        .pointer("holderIdentity", spec.holder_identity)
        .pointer("leaseDurationSeconds", spec.lease_duration_seconds);
    if spec.acquire_time.is_some() {
        fields = fields.put(
            "acquireTime",
            micro_time("spec.acquireTime", &spec.acquire_time)?,
        );
    }
    if spec.renew_time.is_some() {
        fields = fields.put("renewTime", micro_time("spec.renewTime", &spec.renew_time)?);
    }
    let spec = fields
        .pointer("leaseTransitions", spec.lease_transitions)
        .pointer("strategy", spec.strategy)
        .pointer("preferredHolder", spec.preferred_holder)
        .done();
    Ok(typed(api_version, kind, object_meta(&object.metadata)?)
        .put("spec", spec)
        .done())
}

/// `meta/v1.DeleteOptions`, the body of a DELETE.
pub(super) fn delete_options(
    (api_version, kind): (&str, &str),
    options: &meta::DeleteOptions,
) -> Value {
    let preconditions = options.preconditions.as_ref().map(|p| {
        Fields::default()
            .pointer("uid", p.uid.clone())
            .pointer("resourceVersion", p.resource_version.clone())
            .done()
    });
    Fields::default()
        .put("apiVersion", json!(api_version))
        .put("kind", json!(kind))
        .pointer("gracePeriodSeconds", options.grace_period_seconds)
        .pointer("preconditions", preconditions)
        .pointer("orphanDependents", options.orphan_dependents)
        .pointer("propagationPolicy", options.propagation_policy.clone())
        .texts("dryRun", &options.dry_run)
        .pointer(
            "ignoreStoreReadErrorWithClusterBreakingPotential",
            options.ignore_store_read_error_with_cluster_breaking_potential,
        )
        .done()
}
