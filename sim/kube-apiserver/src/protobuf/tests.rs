//! Each kind round trip: a message encoded with `k8s-pb` (fields set as
//! Go's encoder sets them), wrapped as kubectl wraps it, decoded here, must
//! be the JSON kubectl prints for the same object; and that JSON read by
//! `k8s-openapi`'s types must keep every field (a misspelt name would be
//! dropped there). Then the bodies that must be refused.

use std::collections::BTreeMap;

use k8s_openapi::serde::{Serialize, de::DeserializeOwned};
use k8s_pb::apimachinery::pkg::runtime::TypeMeta;
use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::kinds;

fn builtin(group: &str, plural: &str) -> Kind {
    kinds::builtins()
        .into_iter()
        .find(|k| k.group == group && k.plural == plural)
        .expect("a built-in kind")
}

/// The body kubectl sends: magic, then the envelope around `message`.
fn body(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    envelope(api_version, kind, message.encode_to_vec())
}

fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut bytes = MAGIC.to_vec();
    bytes.extend(unknown.encode_to_vec());
    bytes
}

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

fn time(seconds: i64) -> Option<meta::Time> {
    Some(meta::Time {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

/// A zero time as Go encodes it: an empty message.
fn zero_time() -> Option<meta::Time> {
    Some(meta::Time::default())
}

fn micro_time(seconds: i64, nanos: i32) -> Option<meta::MicroTime> {
    Some(meta::MicroTime {
        seconds: Some(seconds),
        nanos: Some(nanos),
    })
}

/// Metadata as kubectl's Go encoder writes it for a new object: every
/// plain field present, empty ones included.
fn new_object_meta(name: &str, namespace: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: some(name),
        generate_name: some(""),
        namespace: some(namespace),
        self_link: some(""),
        uid: some(""),
        resource_version: some(""),
        generation: Some(0),
        creation_timestamp: zero_time(),
        ..Default::default()
    })
}

/// `json` read into `T` and written back, `null`s dropped on both sides
/// (k8s-openapi leaves unset fields out).
fn assert_typed_round_trip<T: DeserializeOwned + Serialize>(json: &Value) {
    fn without_nulls(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), without_nulls(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
            other => other.clone(),
        }
    }
    let typed: T = serde_json::from_value(json.clone()).expect("k8s-openapi reads it");
    let back = serde_json::to_value(&typed).expect("k8s-openapi writes it");
    assert_eq!(without_nulls(&back), without_nulls(json));
}

#[test]
fn a_namespace_from_kubectl_create_namespace() {
    let message = core::Namespace {
        metadata: new_object_meta("team-a", ""),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus {
            phase: some(""),
            ..Default::default()
        }),
    };
    let decoded = decode_object(
        &builtin("", "namespaces"),
        &body("v1", "Namespace", &message),
    )
    .expect("decodes");
    // `kubectl create namespace team-a -o json --dry-run=client`.
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"},
               "spec": {}, "status": {}})
    );
    assert_typed_round_trip::<k8s_openapi::api::core::v1::Namespace>(&decoded);
}

#[test]
fn a_namespace_with_every_field() {
    let message = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: some("team-a"),
            uid: some("4f0c"),
            resource_version: some("17"),
            generation: Some(3),
            creation_timestamp: time(1_767_225_600),
            deletion_timestamp: time(1_767_225_700),
            deletion_grace_period_seconds: Some(0),
            labels: BTreeMap::from([("team".into(), "a".into())]),
            annotations: BTreeMap::from([("note".into(), "x".into())]),
            owner_references: vec![meta::OwnerReference {
                api_version: some("v1"),
                kind: some("ConfigMap"),
                name: some("owner"),
                uid: some("1234"),
                controller: Some(false),
                block_owner_deletion: None,
            }],
            finalizers: vec!["example.com/hold".into()],
            managed_fields: vec![meta::ManagedFieldsEntry {
                manager: some("kubectl-create"),
                operation: some("Update"),
                api_version: some("v1"),
                time: time(1_767_225_600),
                fields_type: some("FieldsV1"),
                fields_v1: Some(meta::FieldsV1 {
                    raw: Some(br#"{"f:metadata":{}}"#.to_vec()),
                }),
                subresource: some(""),
            }],
            ..Default::default()
        }),
        spec: Some(core::NamespaceSpec {
            finalizers: vec!["kubernetes".into()],
        }),
        status: Some(core::NamespaceStatus {
            phase: some("Terminating"),
            conditions: vec![core::NamespaceCondition {
                r#type: some("NamespaceDeletionContentFailure"),
                status: some("False"),
                last_transition_time: zero_time(),
                reason: some(""),
                message: some("all good"),
            }],
        }),
    };
    let decoded = decode_object(
        &builtin("", "namespaces"),
        &body("v1", "Namespace", &message),
    )
    .expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-a", "uid": "4f0c", "resourceVersion": "17", "generation": 3,
                "creationTimestamp": "2026-01-01T00:00:00Z", "deletionTimestamp": "2026-01-01T00:01:40Z",
                "deletionGracePeriodSeconds": 0, "labels": {"team": "a"}, "annotations": {"note": "x"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "1234",
                    "controller": false}],
                "finalizers": ["example.com/hold"],
                "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                    "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {}}}]},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Terminating", "conditions": [{"type": "NamespaceDeletionContentFailure",
                "status": "False", "lastTransitionTime": null, "message": "all good"}]}})
    );
    assert_typed_round_trip::<k8s_openapi::api::core::v1::Namespace>(&decoded);
}

#[test]
fn a_configmap_keeps_binary_data_byte_for_byte() {
    use base64::Engine as _;
    let every_byte: Vec<u8> = (0..=255).collect();
    let message = core::ConfigMap {
        metadata: new_object_meta("guardrail", "default"),
        immutable: Some(true),
        data: BTreeMap::from([("policy.json".into(), "{\"a\": 1}\n".into())]),
        binary_data: BTreeMap::from([
            ("policy.wasm".into(), every_byte.clone()),
            ("empty".into(), Vec::new()),
        ]),
    };
    let decoded = decode_object(
        &builtin("", "configmaps"),
        &body("v1", "ConfigMap", &message),
    )
    .expect("decodes");
    let encoded = base64::prelude::BASE64_STANDARD.encode(&every_byte);
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "guardrail", "namespace": "default"}, "immutable": true,
            "data": {"policy.json": "{\"a\": 1}\n"},
            "binaryData": {"policy.wasm": encoded, "empty": ""}})
    );
    let back = base64::prelude::BASE64_STANDARD
        .decode(decoded["binaryData"]["policy.wasm"].as_str().expect("text"))
        .expect("base64");
    assert_eq!(back, every_byte);
    assert_typed_round_trip::<k8s_openapi::api::core::v1::ConfigMap>(&decoded);
}

#[test]
fn a_secret_from_kubectl_create_secret_generic() {
    let message = core::Secret {
        metadata: new_object_meta("db", "default"),
        immutable: None,
        data: BTreeMap::from([
            ("password".into(), b"s3cr\xffet".to_vec()),
            ("user".into(), b"admin".to_vec()),
        ]),
        string_data: BTreeMap::from([("extra".into(), "plain".into())]),
        r#type: some("Opaque"),
    };
    let decoded =
        decode_object(&builtin("", "secrets"), &body("v1", "Secret", &message)).expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
            "data": {"password": "czNjcv9ldA==", "user": "YWRtaW4="},
            "stringData": {"extra": "plain"}, "type": "Opaque"})
    );
    assert_typed_round_trip::<k8s_openapi::api::core::v1::Secret>(&decoded);
}

fn reference(name: &str) -> Option<core::ObjectReference> {
    Some(core::ObjectReference {
        kind: some("DeploymentTemplate"),
        namespace: some("default"),
        name: some(name),
        uid: some("77"),
        api_version: some("radapp.io/v1alpha3"),
        resource_version: some(""),
        field_path: some(""),
    })
}

#[test]
fn a_core_event_as_client_go_records_it() {
    let message = core::Event {
        metadata: new_object_meta("demo.1", "default"),
        involved_object: reference("demo"),
        reason: some("Deploying"),
        message: some("started"),
        source: Some(core::EventSource {
            component: some("radwasm"),
            host: some(""),
        }),
        first_timestamp: time(1_767_225_600),
        last_timestamp: zero_time(),
        count: Some(2),
        r#type: some("Normal"),
        event_time: micro_time(1_767_225_600, 123_456_789),
        series: Some(core::EventSeries {
            count: Some(2),
            last_observed_time: micro_time(1_767_225_601, 0),
        }),
        action: some(""),
        related: None,
        reporting_component: some(""),
        reporting_instance: some(""),
    };
    let decoded =
        decode_object(&builtin("", "events"), &body("v1", "Event", &message)).expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "demo.1", "namespace": "default"},
            "involvedObject": {"kind": "DeploymentTemplate", "namespace": "default", "name": "demo",
                "uid": "77", "apiVersion": "radapp.io/v1alpha3"},
            "reason": "Deploying", "message": "started", "source": {"component": "radwasm"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": null, "count": 2, "type": "Normal",
            "eventTime": "2026-01-01T00:00:00.123456Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "reportingComponent": "", "reportingInstance": ""})
    );
    assert_typed_round_trip::<k8s_openapi::api::core::v1::Event>(&decoded);
}

#[test]
fn an_events_api_event_as_client_go_records_it() {
    let message = events::Event {
        metadata: new_object_meta("demo.2", "default"),
        event_time: micro_time(1_767_225_600, 5_000),
        series: None,
        reporting_controller: some("radwasm.io/controller"),
        reporting_instance: some("radwasm-0"),
        action: some("Deploy"),
        reason: some("Deploying"),
        regarding: reference("demo"),
        related: reference("other"),
        note: some("started"),
        r#type: some("Normal"),
        deprecated_source: Some(core::EventSource::default()),
        deprecated_first_timestamp: zero_time(),
        deprecated_last_timestamp: zero_time(),
        deprecated_count: Some(0),
    };
    let kind = builtin("events.k8s.io", "events");
    let decoded =
        decode_object(&kind, &body("events.k8s.io/v1", "Event", &message)).expect("decodes");
    let regarding = json!({"kind": "DeploymentTemplate", "namespace": "default", "name": "demo",
        "uid": "77", "apiVersion": "radapp.io/v1alpha3"});
    let mut related = regarding.clone();
    related["name"] = json!("other");
    assert_eq!(
        decoded,
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "demo.2", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000005Z", "reportingController": "radwasm.io/controller",
            "reportingInstance": "radwasm-0", "action": "Deploy", "reason": "Deploying",
            "regarding": regarding, "related": related, "note": "started", "type": "Normal",
            "deprecatedSource": {}, "deprecatedFirstTimestamp": null, "deprecatedLastTimestamp": null})
    );
    // Zero deprecated fields are what the real server requires of a new one.
    assert!(kinds::events_api_create_problems(&kind, &decoded).is_empty());
    assert_typed_round_trip::<k8s_openapi::api::events::v1::Event>(&decoded);
}

#[test]
fn a_lease_as_leader_election_writes_it() {
    let message = coordination::Lease {
        metadata: new_object_meta("radwasm-controller", "radwasm-system"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: some("pod-a"),
            lease_duration_seconds: Some(15),
            acquire_time: micro_time(1_767_225_600, 0),
            renew_time: micro_time(1_767_225_610, 999_999_999),
            lease_transitions: Some(0),
            strategy: None,
            preferred_holder: None,
        }),
    };
    let decoded = decode_object(
        &builtin("coordination.k8s.io", "leases"),
        &body("coordination.k8s.io/v1", "Lease", &message),
    )
    .expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "radwasm-controller", "namespace": "radwasm-system"},
            "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15,
                "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:10.999999Z",
                "leaseTransitions": 0}})
    );
    assert_typed_round_trip::<k8s_openapi::api::coordination::v1::Lease>(&decoded);
}

#[test]
fn delete_options_as_a_typed_client_sends_them() {
    let options = meta::DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(meta::Preconditions {
            uid: some("4f0c"),
            resource_version: None,
        }),
        orphan_dependents: None,
        propagation_policy: some("Foreground"),
        dry_run: vec!["All".into()],
        ignore_store_read_error_with_cluster_breaking_potential: None,
    };
    let decoded = decode_delete_options(
        &builtin("", "configmaps"),
        &body("v1", "DeleteOptions", &options),
    )
    .expect("decodes");
    assert_eq!(
        decoded,
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
            "preconditions": {"uid": "4f0c"}, "propagationPolicy": "Foreground", "dryRun": ["All"]})
    );
    let error = decode_delete_options(
        &builtin("", "configmaps"),
        &body("v1", "ConfigMap", &core::ConfigMap::default()),
    )
    .expect_err("a ConfigMap is not DeleteOptions");
    assert_eq!(error.code, 400);
    assert!(error.message.contains("DeleteOptions"), "{}", error.message);
}

fn refused(kind: &Kind, bytes: &[u8]) -> ApiError {
    decode_object(kind, bytes).expect_err("refused")
}

#[test]
fn a_body_without_the_magic_is_refused_naming_the_prefix() {
    let message = core::ConfigMap::default();
    let mut bytes = body("v1", "ConfigMap", &message);
    bytes[3] = b'!';
    let error = refused(&builtin("", "configmaps"), &bytes);
    assert_eq!((error.code, error.reason), (400, "BadRequest"));
    assert!(
        error.message.contains("expected prefix [107, 56, 115, 0]"),
        "{}",
        error.message
    );
    let error = refused(&builtin("", "configmaps"), b"{\"kind\": \"ConfigMap\"}");
    assert!(
        error
            .message
            .contains("does not appear to be a protobuf message"),
        "{}",
        error.message
    );
}

#[test]
fn a_body_cut_anywhere_inside_the_object_is_refused() {
    let message = core::ConfigMap {
        metadata: new_object_meta("cut", "default"),
        binary_data: BTreeMap::from([("policy.wasm".into(), vec![0; 300])]),
        ..Default::default()
    };
    let bytes = body("v1", "ConfigMap", &message);
    let raw = message.encode_to_vec();
    let start = bytes
        .windows(raw.len())
        .position(|window| window == raw)
        .expect("the raw object in the envelope");
    // Every cut inside the raw object leaves its length running past the end.
    for cut in start..start + raw.len() {
        let error = refused(&builtin("", "configmaps"), &bytes[..cut]);
        assert_eq!(error.code, 400, "cut at {cut}: {}", error.message);
        assert!(
            error.message.contains("runtime.Unknown"),
            "{}",
            error.message
        );
    }
    // A well-formed envelope whose raw object is cut short.
    let mut raw = message.encode_to_vec();
    raw.truncate(raw.len() - 10);
    let error = refused(
        &builtin("", "configmaps"),
        &envelope("v1", "ConfigMap", raw),
    );
    assert_eq!(error.code, 400);
    assert!(
        error.message.contains("v1 ConfigMap does not decode"),
        "{}",
        error.message
    );
}

#[test]
fn an_object_of_another_kind_than_the_url_is_refused_naming_both() {
    let secret = body("v1", "Secret", &core::Secret::default());
    let error = refused(&builtin("", "configmaps"), &secret);
    assert_eq!(error.code, 400);
    assert_eq!(
        error.message,
        "the protobuf body holds a v1 Secret, but this URL takes a v1 ConfigMap"
    );
    // The same kind name in another group is another kind.
    let event = body("v1", "Event", &core::Event::default());
    let error = refused(&builtin("events.k8s.io", "events"), &event);
    assert!(
        error.message.contains("holds a v1 Event") && error.message.contains("events.k8s.io/v1"),
        "{}",
        error.message
    );
    let nameless = envelope("", "", Vec::new());
    let error = refused(&builtin("", "configmaps"), &nameless);
    assert!(error.message.contains("typeMeta"), "{}", error.message);
}

#[test]
fn an_encoded_envelope_and_an_impossible_time_are_refused() {
    let mut unknown = Unknown::decode(&body("v1", "ConfigMap", &core::ConfigMap::default())[4..])
        .expect("envelope");
    unknown.content_encoding = some("gzip");
    let mut bytes = MAGIC.to_vec();
    bytes.extend(unknown.encode_to_vec());
    let error = refused(&builtin("", "configmaps"), &bytes);
    assert!(error.message.contains("\"gzip\""), "{}", error.message);

    let message = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: some("far"),
            creation_timestamp: time(i64::MAX),
            ..Default::default()
        }),
        ..Default::default()
    };
    let error = refused(
        &builtin("", "namespaces"),
        &body("v1", "Namespace", &message),
    );
    assert_eq!(error.code, 400);
    assert!(
        error.message.contains("metadata.creationTimestamp"),
        "{}",
        error.message
    );
}

#[test]
fn custom_resources_and_crds_in_protobuf_get_415() {
    let crd = builtin("apiextensions.k8s.io", "customresourcedefinitions");
    let error = refused(
        &crd,
        &envelope(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            Vec::new(),
        ),
    );
    assert_eq!((error.code, error.reason), (415, "UnsupportedMediaType"));
    assert!(
        error.message.contains("not CustomResourceDefinition"),
        "{}",
        error.message
    );
    let mut widget = builtin("", "configmaps");
    widget.custom = true;
    widget.group = "example.com".into();
    widget.kind = "Widget".into();
    let error = refused(&widget, &envelope("example.com/v1", "Widget", Vec::new()));
    assert_eq!(error.code, 415);
    assert_eq!(
        error.message,
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
}

proptest! {
    /// Whatever follows the magic, decoding answers; it never panics.
    #[test]
    fn any_bytes_after_the_magic_are_decoded_or_refused_with_400(tail in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend(tail);
        for plural in ["namespaces", "configmaps", "secrets", "events"] {
            if let Err(error) = decode_object(&builtin("", plural), &bytes) {
                prop_assert_eq!(error.code, 400);
            }
        }
        if let Err(error) = decode_delete_options(&builtin("", "secrets"), &bytes) {
            prop_assert_eq!(error.code, 400);
        }
    }
}
