//! Media types: request bodies in JSON, YAML or (for the built-in kinds)
//! Kubernetes protobuf, all read into the JSON form the store keeps; and
//! the `Accept` header, since every answer is JSON.

use axum::extract::Request;
use axum::http::HeaderMap;
use serde_json::Value;

use crate::error::ApiError;
use crate::kinds::Kind;
use crate::protobuf;

/// What a request's body is expected to hold.
pub(crate) enum Expect<'a> {
    /// An object of this kind (create, update).
    Object(&'a Kind),
    /// `DeleteOptions`, deleting objects of this kind.
    DeleteOptions(&'a Kind),
    /// A patch: its media type is checked with the patch, so a body in any
    /// other type is left unread here.
    Patch,
    /// JSON or YAML only (the `/_sim/` endpoints).
    Json,
}

/// The request's headers and its body as JSON (`null` when empty).
pub(crate) async fn read(
    request: Request,
    expect: Expect<'_>,
) -> Result<(HeaderMap, Value), ApiError> {
    let headers = request.headers().clone();
    let bytes = axum::body::to_bytes(request.into_body(), 64 << 20)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
    if bytes.is_empty() {
        return Ok((headers, Value::Null));
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let value = match expect {
        Expect::Object(kind) if protobuf::is_protobuf(content_type) => {
            protobuf::decode_object(kind, &bytes)?
        }
        Expect::DeleteOptions(kind) if protobuf::is_protobuf(content_type) => {
            protobuf::decode_delete_options(kind, &bytes)?
        }
        Expect::Patch if !is_json_or_yaml(content_type) => Value::Null,
        _ if !is_json_or_yaml(content_type) => return Err(unsupported(content_type, &expect)),
        _ => decode_body(content_type, &bytes)?,
    };
    Ok((headers, value))
}

/// Everything but protobuf and CBOR is read as JSON or YAML, as before
/// media types were told apart (a missing `Content-Type` is JSON).
fn is_json_or_yaml(content_type: &str) -> bool {
    !(content_type.contains("protobuf") || content_type.contains("cbor"))
}

/// 415 for a body in a media type not read for this request (CBOR, or
/// protobuf where a patch or JSON is expected), in the real server's words.
fn unsupported(content_type: &str, expect: &Expect) -> ApiError {
    let accepted = match expect {
        Expect::Object(kind) | Expect::DeleteOptions(kind) if protobuf::decodes(kind) => {
            "application/json, application/yaml, application/vnd.kubernetes.protobuf"
        }
        _ => "application/json, application/yaml",
    };
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted} (got {content_type:?})"
        ),
    )
}

/// A request body as a JSON value: YAML if the content type says so,
/// otherwise JSON.
pub fn decode_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    if content_type.contains("yaml") {
        serde_yaml::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid YAML: {e}")))
    } else {
        serde_json::from_slice::<Value>(bytes)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
    }
}

/// 406 when `Accept` lists only media types this server does not answer
/// in. Every answer is JSON (Tables included), so JSON, `application/*`
/// and `*/*` are served; kubectl and client-go always offer JSON after
/// protobuf (`application/vnd.kubernetes.protobuf,application/json`).
pub(crate) fn check_accept(accept: &str) -> Result<(), ApiError> {
    let offered: Vec<&str> = accept
        .split(',')
        .map(str::trim)
        .filter(|range| !range.is_empty() && !refused_by_quality(range))
        .collect();
    let answered = |range: &&str| {
        matches!(
            protobuf::media_type(range).as_str(),
            "application/json" | "application/*" | "*/*"
        )
    };
    if offered.is_empty() || offered.iter().any(answered) {
        return Ok(());
    }
    Err(ApiError::new(
        406,
        "NotAcceptable",
        format!(
            "only the following media types are accepted: application/json (the embedded API server answers in JSON only, not {accept:?}; see docs/apiserver.md)"
        ),
    ))
}

/// `q=0` on a media range means "not this one".
fn refused_by_quality(range: &str) -> bool {
    range.split(';').skip(1).any(|parameter| {
        parameter.split_once('=').is_some_and(|(name, value)| {
            name.trim() == "q" && value.trim().parse::<f32>().is_ok_and(|q| q == 0.0)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_kubectl_and_client_go_accept_is_served_and_protobuf_alone_is_not() {
        for accept in [
            "",
            "application/vnd.kubernetes.protobuf,application/json",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            "application/json;stream=watch",
            "*/*",
            "text/html, application/*;q=0.5",
        ] {
            assert!(check_accept(accept).is_ok(), "{accept}");
        }
        for accept in [
            "application/vnd.kubernetes.protobuf",
            "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
            "application/cbor",
            "application/json;q=0, application/vnd.kubernetes.protobuf",
        ] {
            let error = check_accept(accept).expect_err(accept);
            assert_eq!((error.code, error.reason), (406, "NotAcceptable"));
            assert!(error.message.contains(accept), "{}", error.message);
        }
    }
}
