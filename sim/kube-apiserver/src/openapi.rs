//! OpenAPI v3, one document per group/version, as the real server publishes
//! it: every kind's schema under `components.schemas` tagged with
//! `x-kubernetes-group-version-kind` (a CRD's `openAPIV3Schema`, short
//! hand-written schemas for the built-ins), and the paths with their
//! operations. kubectl reads it for `explain` and, through the PATCH
//! operation's `fieldValidation` parameter, to learn that it may leave field
//! validation to the server. OpenAPI v2 is served as JSON with no
//! definitions (see docs/apiserver.md).

use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::kinds::Kind;

/// The `/openapi/v3` discovery document: one entry per group/version.
pub fn root(kinds: &[Kind]) -> Value {
    let mut paths = Map::new();
    let mut seen: Vec<(String, String)> = Vec::new();
    for kind in kinds {
        let gv = (kind.group.clone(), kind.version.clone());
        if seen.contains(&gv) {
            continue;
        }
        seen.push(gv);
        let path = group_version_path(&kind.group, &kind.version);
        let doc = group_version(kinds, &kind.group, &kind.version);
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={}", hash(&doc))}),
        );
    }
    json!({"paths": paths})
}

fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

fn hash(doc: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    doc.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The schema name the real server uses: the group reversed, then version and kind
/// (`io.radapp.v1alpha3.DeploymentTemplate`, `io.k8s.api.core.v1.ConfigMap`).
fn schema_name(kind: &Kind) -> String {
    if kind.custom {
        let reversed: Vec<&str> = kind.group.split('.').rev().collect();
        return format!("{}.{}.{}", reversed.join("."), kind.version, kind.kind);
    }
    let package = match kind.group.as_str() {
        "" => "core".to_string(),
        "apiextensions.k8s.io" => {
            return format!(
                "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{}.{}",
                kind.version, kind.kind
            );
        }
        group => group.split('.').next().unwrap_or(group).to_string(),
    };
    format!("io.k8s.api.{package}.{}.{}", kind.version, kind.kind)
}

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The document for one group/version, or `None` if nothing is served there.
pub fn group_version(kinds: &[Kind], group: &str, version: &str) -> Value {
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for kind in kinds
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        let name = schema_name(kind);
        let mut schema = kind.schema.clone().unwrap_or_else(|| builtin_schema(kind));
        let gvk = json!({"group": kind.group, "version": kind.version, "kind": kind.kind});
        if let Some(map) = schema.as_object_mut() {
            map.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
            let properties = map.entry("properties").or_insert(Value::Null);
            if properties.is_null() {
                *properties = json!({});
            }
            // A CRD's `properties` that is not an object (the real server
            // refuses such a CRD) is published as it is.
            if let Some(properties) = properties.as_object_mut() {
                properties.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}));
                properties.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}));
                properties.insert("metadata".into(), json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "default": {}, "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"}));
            }
        }
        schemas.insert(name.clone(), schema);
        schemas.insert(
            format!("{name}List"),
            json!({"type": "object", "description": format!("{}List is a list of {}", kind.kind, kind.kind),
                "required": ["items"],
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{name}")}},
                    "metadata": {"type": "object"}},
                "x-kubernetes-group-version-kind": [{"group": kind.group, "version": kind.version, "kind": format!("{}List", kind.kind)}]}),
        );
        let prefix = format!("/{}", group_version_path(group, version));
        let collection = if kind.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", kind.plural)
        } else {
            format!("{prefix}/{}", kind.plural)
        };
        let reference = json!({"$ref": format!("#/components/schemas/{name}")});
        let operation = |action: &str, extra: Value| {
            let mut op = json!({
                "operationId": format!("{action}{}", kind.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
            });
            if let (Some(op), Some(extra)) = (op.as_object_mut(), extra.as_object()) {
                for (k, v) in extra {
                    op.insert(k.clone(), v.clone());
                }
            }
            op
        };
        let query = |name: &str, description: &str| json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}});
        let write_params = json!([
            query(
                "dryRun",
                "When present, indicates that modifications should not be persisted."
            ),
            query(
                "fieldManager",
                "fieldManager is a name associated with the actor or entity that is making these changes."
            ),
            query(
                "fieldValidation",
                "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields: Ignore, Warn (the default) or Strict."
            ),
        ]);
        let body = json!({"content": {"*/*": {"schema": reference}}});
        // Strategic merge patch is left out of the content types on purpose: kubectl
        // then computes it from its compiled-in types rather than from this schema.
        let patch_body = json!({"content": {
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/apply-patch+yaml": {"schema": {"type": "object"}},
        }});
        paths.insert(
            collection.clone(),
            json!({
                "get": operation("list", json!({})),
                "post": operation("post", json!({"parameters": write_params, "requestBody": body})),
                "delete": operation("deletecollection", json!({})),
            }),
        );
        paths.insert(
            format!("{collection}/{{name}}"),
            json!({
                "get": operation("get", json!({})),
                "put": operation("put", json!({"parameters": write_params, "requestBody": body})),
                "patch": operation("patch", json!({"parameters": write_params, "requestBody": patch_body})),
                "delete": operation("delete", json!({})),
            }),
        );
        if kind.status_subresource {
            paths.insert(
                format!("{collection}/{{name}}/status"),
                json!({
                    "get": operation("get", json!({})),
                    "put": operation("put", json!({"parameters": write_params, "requestBody": body})),
                    "patch": operation("patch", json!({"parameters": write_params, "requestBody": patch_body})),
                }),
            );
        }
    }
    schemas.insert(OBJECT_META.into(), object_meta());
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

fn object_meta() -> Value {
    let string = |d: &str| json!({"type": "string", "description": d});
    let strings = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": d});
    json!({"type": "object", "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
    "properties": {
        "name": string("Name must be unique within a namespace."),
        "generateName": string("GenerateName is an optional prefix, used by the server, to generate a unique name ONLY IF the Name field has not been provided."),
        "namespace": string("Namespace defines the space within which each name must be unique."),
        "uid": string("UID is the unique in time and space value for this object. Populated by the system. Read-only."),
        "resourceVersion": string("An opaque value that represents the internal version of this object. Populated by the system. Read-only."),
        "generation": {"type": "integer", "format": "int64", "description": "A sequence number representing a specific generation of the desired state. Populated by the system. Read-only."},
        "creationTimestamp": string("CreationTimestamp is a timestamp representing the server time when this object was created."),
        "deletionTimestamp": string("DeletionTimestamp is RFC 3339 date and time at which this resource will be deleted."),
        "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
        "labels": strings("Map of string keys and values that can be used to organize and categorize (scope and select) objects."),
        "annotations": strings("Annotations is an unstructured key value map stored with a resource."),
        "finalizers": {"type": "array", "items": {"type": "string", "default": ""}, "description": "Must be empty before the object is deleted from the registry.", "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
        "ownerReferences": {"type": "array", "items": {"type": "object"}, "description": "List of objects depended by this object.", "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
        "managedFields": {"type": "array", "items": {"type": "object"}},
    }})
}

/// A short schema for a built-in kind: its top-level fields, described.
fn builtin_schema(kind: &Kind) -> Value {
    let string = |d: &str| json!({"type": "string", "description": d});
    let strings = |d: &str| json!({"type": "object", "additionalProperties": {"type": "string", "default": ""}, "description": d});
    let (description, properties) = match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "ConfigMap") => (
            "ConfigMap holds configuration data for pods to consume.",
            json!({
                "data": strings("Data contains the configuration data."),
                "binaryData": strings("BinaryData contains the binary data, base64 encoded."),
                "immutable": {"type": "boolean", "description": "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated."},
            }),
        ),
        ("", "Secret") => (
            "Secret holds secret data of a certain type.",
            json!({
                "data": strings("Data contains the secret data, base64 encoded."),
                "stringData": strings("stringData allows specifying non-binary secret data in string form. It is write-only."),
                "type": string("Used to facilitate programmatic handling of secret data."),
                "immutable": {"type": "boolean"},
            }),
        ),
        ("", "Namespace") => (
            "Namespace provides a scope for Names.",
            json!({
                "spec": {"type": "object", "properties": {"finalizers": {"type": "array", "items": {"type": "string"}}}},
                "status": {"type": "object", "properties": {"phase": string("Phase is the current lifecycle phase of the namespace.")}},
            }),
        ),
        ("coordination.k8s.io", "Lease") => (
            "Lease defines a lease concept.",
            json!({
                "spec": {"type": "object", "description": "spec contains the specification of the Lease.", "properties": {
                    "holderIdentity": string("holderIdentity contains the identity of the holder of a current lease."),
                    "leaseDurationSeconds": {"type": "integer", "format": "int32", "description": "leaseDurationSeconds is a duration that candidates for a lease need to wait to force acquire it."},
                    "acquireTime": string("acquireTime is a time when the current lease was acquired."),
                    "renewTime": string("renewTime is a time when the current holder of a lease has last updated the lease."),
                    "leaseTransitions": {"type": "integer", "format": "int32"},
                }},
            }),
        ),
        ("", "Event") => (
            "Event is a report of an event somewhere in the cluster.",
            json!({
                "involvedObject": {"type": "object", "description": "The object that this event is about."},
                "reason": string("This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
                "message": string("A human-readable description of the status of this operation."),
                "type": string("Type of this event (Normal, Warning)."),
                "eventTime": string("Time when this Event was first observed."),
                "reportingComponent": string("Name of the controller that emitted this Event."),
                "reportingInstance": string("ID of the controller instance."),
                "action": string("What action was taken/failed regarding to the Regarding object."),
                "count": {"type": "integer", "format": "int32"},
            }),
        ),
        ("events.k8s.io", "Event") => (
            "Event is a report of an event somewhere in the cluster.",
            json!({
                "regarding": {"type": "object", "description": "regarding contains the object this Event is about."},
                "reason": string("reason is why the action was taken."),
                "note": string("note is a human-readable description of the status of this operation."),
                "type": string("type is the type of this event (Normal, Warning)."),
                "eventTime": string("eventTime is the time when this Event was first observed. It is required."),
                "reportingController": string("reportingController is the name of the controller that emitted this Event."),
                "reportingInstance": string("reportingInstance is the ID of the controller instance."),
                "action": string("action is what action was taken/failed regarding to the regarding object."),
                "series": {"type": "object", "description": "series is data about the Event series this event represents."},
            }),
        ),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => (
            "CustomResourceDefinition represents a resource that should be exposed on the API server.",
            json!({
                "spec": {"type": "object", "description": "spec describes how the user wants the resources to appear", "x-kubernetes-preserve-unknown-fields": true},
                "status": {"type": "object", "description": "status indicates the actual state of the CustomResourceDefinition", "x-kubernetes-preserve-unknown-fields": true},
            }),
        ),
        _ => ("", json!({})),
    };
    json!({"type": "object", "description": description, "properties": properties})
}
