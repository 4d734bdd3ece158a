//! Request bodies in the Kubernetes protobuf encoding
//! (`application/vnd.kubernetes.protobuf`), as kubectl's typed commands
//! (`kubectl create namespace|configmap|secret`) and client-go send them:
//! the 4-byte magic `k8s\0`, then a `runtime.Unknown` whose `typeMeta`
//! names the kind and whose `raw` is the object's own message. The built-in
//! kinds this server serves are decoded with the `k8s-pb` types and turned
//! into the JSON their Go types marshal to ([`json`]), so the request goes
//! on through the same create, update and delete paths as a JSON one.

mod json;
#[cfg(test)]
mod tests;

use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::Value;

use crate::error::ApiError;
use crate::kinds::Kind;

/// The media type, without parameters.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// What every protobuf body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";

/// Turns the `raw` of an envelope into the object's JSON, given the
/// envelope's `apiVersion` and `kind`.
type Decoder = fn(&[u8], (&str, &str)) -> Result<Value, ApiError>;

/// The kinds whose objects can come as protobuf, in words for messages.
const DECODED_KINDS: &str =
    "Namespace, ConfigMap, Secret, Event (core/v1 and events.k8s.io/v1) and Lease";

/// How objects of `kind` are decoded, or `None` when this server does not
/// read them as protobuf (custom resources, which the real server does not
/// either, and CustomResourceDefinitions, which kubectl sends as JSON).
fn decoder(kind: &Kind) -> Option<Decoder> {
    if kind.custom {
        return None;
    }
    let decoder: Decoder = match (
        kind.group.as_str(),
        kind.version.as_str(),
        kind.kind.as_str(),
    ) {
        ("", "v1", "Namespace") => {
            |raw, meta| object::<core::Namespace>(raw, meta, json::namespace)
        }
        ("", "v1", "ConfigMap") => {
            |raw, meta| object::<core::ConfigMap>(raw, meta, json::config_map)
        }
        ("", "v1", "Secret") => |raw, meta| object::<core::Secret>(raw, meta, json::secret),
        ("", "v1", "Event") => |raw, meta| object::<core::Event>(raw, meta, json::core_event),
        ("events.k8s.io", "v1", "Event") => {
            |raw, meta| object::<events::Event>(raw, meta, json::events_event)
        }
        ("coordination.k8s.io", "v1", "Lease") => {
            |raw, meta| object::<coordination::Lease>(raw, meta, json::lease)
        }
        _ => return None,
    };
    Some(decoder)
}

/// True when objects of `kind` can come as protobuf.
pub fn decodes(kind: &Kind) -> bool {
    decoder(kind).is_some()
}

/// Decode the message in `raw` and turn it into JSON.
fn object<M: Message + Default>(
    raw: &[u8],
    (api_version, kind): (&str, &str),
    to_json: fn((&str, &str), &M) -> Result<Value, json::Invalid>,
) -> Result<Value, ApiError> {
    let message = M::decode(raw).map_err(|e| {
        ApiError::bad_request(format!(
            "the protobuf body's {api_version} {kind} does not decode: {e}"
        ))
    })?;
    to_json((api_version, kind), &message).map_err(|invalid| {
        ApiError::bad_request(format!(
            "the protobuf body's {api_version} {kind} is invalid: {invalid}"
        ))
    })
}

/// True when a request's `Content-Type` is the Kubernetes protobuf one.
pub fn is_protobuf(content_type: &str) -> bool {
    media_type(content_type) == MEDIA_TYPE
}

/// A `Content-Type` or `Accept` entry without its parameters, lower case.
pub fn media_type(value: &str) -> String {
    value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The object in a protobuf body sent to `kind`'s endpoint (create or
/// update), as the JSON the same object would have been sent as.
pub fn decode_object(kind: &Kind, bytes: &[u8]) -> Result<Value, ApiError> {
    let decoder = decoder(kind).ok_or_else(|| unsupported(kind))?;
    let envelope = Envelope::open(bytes)?;
    let expected = kind.api_version();
    if envelope.api_version != expected || envelope.kind != kind.kind {
        return Err(ApiError::bad_request(format!(
            "the protobuf body holds a {} {}, but this URL takes a {expected} {}",
            envelope.api_version, envelope.kind, kind.kind
        )));
    }
    decoder(&envelope.raw, (&envelope.api_version, &envelope.kind))
}

/// The `DeleteOptions` in a protobuf body sent to delete objects of `kind`.
pub fn decode_delete_options(kind: &Kind, bytes: &[u8]) -> Result<Value, ApiError> {
    if decoder(kind).is_none() {
        return Err(unsupported(kind));
    }
    let envelope = Envelope::open(bytes)?;
    // client-go sends them as the endpoint's group version or as
    // meta.k8s.io/v1; both are the same type.
    if envelope.kind != "DeleteOptions" {
        return Err(ApiError::bad_request(format!(
            "the protobuf body holds a {} {}, but a DELETE takes DeleteOptions",
            envelope.api_version, envelope.kind
        )));
    }
    let options = meta::DeleteOptions::decode(envelope.raw.as_slice()).map_err(|e| {
        ApiError::bad_request(format!(
            "the protobuf body's DeleteOptions does not decode: {e}"
        ))
    })?;
    Ok(json::delete_options(
        (&envelope.api_version, &envelope.kind),
        &options,
    ))
}

/// 415 for a kind this server does not read as protobuf.
fn unsupported(kind: &Kind) -> ApiError {
    let note = if kind.custom {
        // As on the real server: custom resources are JSON or YAML.
        String::new()
    } else {
        format!(
            " (the embedded API server decodes protobuf for {DECODED_KINDS} only, not {}; see docs/apiserver.md)",
            kind.kind
        )
    };
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml{note}"
        ),
    )
}

/// The `runtime.Unknown` a protobuf body carries.
struct Envelope {
    api_version: String,
    kind: String,
    raw: Vec<u8>,
}

impl Envelope {
    fn open(bytes: &[u8]) -> Result<Self, ApiError> {
        let Some(message) = bytes.strip_prefix(MAGIC) else {
            let start = &bytes[..bytes.len().min(MAGIC.len())];
            return Err(ApiError::bad_request(format!(
                "provided data does not appear to be a protobuf message, expected prefix {:?} (\"k8s\\0\"), got {start:?}",
                MAGIC
            )));
        };
        let unknown = Unknown::decode(message).map_err(|e| {
            ApiError::bad_request(format!(
                "the protobuf body is not a runtime.Unknown envelope: {e}"
            ))
        })?;
        if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "the protobuf body's contentEncoding {encoding:?} is not supported (only none)"
            )));
        }
        if let Some(content_type) = unknown
            .content_type
            .filter(|t| !t.is_empty() && !is_protobuf(t))
        {
            return Err(ApiError::bad_request(format!(
                "the protobuf body's contentType {content_type:?} is not {MEDIA_TYPE}"
            )));
        }
        let type_meta = unknown.type_meta.unwrap_or_default();
        let api_version = type_meta.api_version.unwrap_or_default();
        let kind = type_meta.kind.unwrap_or_default();
        if kind.is_empty() || api_version.is_empty() {
            return Err(ApiError::bad_request(format!(
                "the protobuf body's typeMeta must name the apiVersion and kind (got apiVersion {api_version:?}, kind {kind:?})"
            )));
        }
        Ok(Self {
            api_version,
            kind,
            raw: unknown.raw.unwrap_or_default(),
        })
    }
}
