//! Writes: create, update, patch (and server-side apply), delete and
//! delete a collection; field validation, dry runs and warnings.

use std::collections::HashMap;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::{ApiResult, AppState, Target, filter_from, json_response, key, ok, served};
use crate::error::ApiError;
use crate::kinds;
use crate::patch::PatchType;
use crate::store::{Key, Propagation, Store};

/// `fieldValidation` for a custom resource write: `Strict` refuses fields
/// the schema does not declare, `Warn` (the default) names them in
/// `Warning` headers, `Ignore` drops them silently. Pruning happens anyway.
fn check_fields(
    target: &Target,
    object: &Value,
    query: &HashMap<String, String>,
) -> Result<Vec<String>, ApiError> {
    let directive = query
        .get("fieldValidation")
        .map(String::as_str)
        .unwrap_or("Warn");
    let Some(schema) = target.storage.schema.as_ref() else {
        return Ok(Vec::new());
    };
    if !matches!(directive, "Strict" | "Warn") {
        return Ok(Vec::new());
    }
    let unknown: Vec<String> = crate::schema::unknown_fields(schema, object)
        .into_iter()
        .map(|field| format!("unknown field \"{field}\""))
        .collect();
    if directive == "Strict" && !unknown.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            unknown.join(", "),
            kind = target.kind.kind,
            version = target.kind.version,
        )));
    }
    Ok(unknown)
}

/// Add `Warning: 299 - "..."` headers, as the real server does.
fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = format!("299 - {:?}", warning);
        if let Ok(value) = axum::http::HeaderValue::from_str(&text) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

/// A create, update or apply body must be an object; refused before a dry
/// run serves it back as one.
fn require_object(body: &Value) -> Result<(), ApiError> {
    if body.is_object() {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ))
    }
}

fn dry_run(query: &HashMap<String, String>) -> bool {
    query.get("dryRun").is_some_and(|d| d == "All")
}

pub(super) fn create(
    state: &AppState,
    target: &Target,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    require_object(&body)?;
    let namespace = target.namespace.clone().unwrap_or_default();
    if let Some(given) = body.pointer("/metadata/namespace").and_then(Value::as_str)
        && target.kind.namespaced
        && !given.is_empty()
        && given != namespace
    {
        return Err(ApiError::bad_request(format!(
            "the namespace of the provided object does not match the namespace sent on the request ({given} vs {namespace})"
        )));
    }
    if let Some(kind) = body.get("kind").and_then(Value::as_str)
        && kind != target.kind.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({kind}) does not match the URL ({})",
            target.kind.kind
        )));
    }
    let warnings = check_fields(target, &body, query)?;
    let problems = kinds::events_api_create_problems(&target.kind, &body);
    if !problems.is_empty() {
        let name = body
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(ApiError::invalid("", &target.kind.kind, name, problems));
    }
    let body = kinds::to_storage(&target.kind, body);
    let mut store = state.lock_store();
    if dry_run(query) {
        return Ok(json_response(
            StatusCode::CREATED,
            &served(&target.kind, &body),
        ));
    }
    let object = store.create(&target.storage, &namespace, body)?;
    drop(store);
    Ok(with_warnings(
        json_response(StatusCode::CREATED, &served(&target.kind, &object)),
        &warnings,
    ))
}

pub(super) fn update(
    state: &AppState,
    target: &Target,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    require_object(&body)?;
    let key = key(target);
    let warnings = check_fields(target, &body, query)?;
    let body = kinds::to_storage(&target.kind, body);
    let mut store = state.lock_store();
    if dry_run(query) {
        return ok(&served(&target.kind, &body));
    }
    let object = store.update(
        &target.storage,
        &key.namespace,
        &key.name,
        body,
        target.status,
    )?;
    drop(store);
    Ok(with_warnings(
        json_response(StatusCode::OK, &served(&target.kind, &object)),
        &warnings,
    ))
}

pub(super) fn patch(
    state: &AppState,
    target: &Target,
    headers: &HeaderMap,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    let media = patch_media(target, headers)?;
    let apply = media == "application/apply-patch+yaml" || media == "application/apply-patch+json";
    if apply {
        require_field_manager(query)?;
    }
    let key = key(target);
    let mut store = state.lock_store();
    let Some(current) = store.get(&key) else {
        if apply && !target.status {
            return apply_new_object(&mut store, target, &key, body, query);
        }
        return Err(ApiError::not_found(
            &target.kind.group,
            &target.kind.plural,
            &key.name,
        ));
    };
    // Patches apply to the object in the shape the client addressed.
    let mut document = served(&target.kind, &current);
    let patch_type = match media.as_str() {
        "application/json-patch+json" => PatchType::Json,
        "application/strategic-merge-patch+json" => PatchType::StrategicMerge,
        _ => PatchType::Merge,
    };
    crate::patch::apply(patch_type, &mut document, body)?;
    let warnings = check_fields(target, &document, query)?;
    if dry_run(query) {
        return ok(&document);
    }
    let document = kinds::to_storage(&target.kind, document);
    let object = store.update(
        &target.storage,
        &key.namespace,
        &key.name,
        document,
        target.status,
    )?;
    drop(store);
    Ok(with_warnings(
        json_response(StatusCode::OK, &served(&target.kind, &object)),
        &warnings,
    ))
}

/// The media type of a patch (`Content-Type` without parameters), refused
/// with 415 unless it is a patch type the kind accepts (no strategic merge
/// for custom resources) or server-side apply.
fn patch_media(target: &Target, headers: &HeaderMap) -> Result<String, ApiError> {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let strategic_ok = !target.kind.custom;
    let known = matches!(
        media.as_str(),
        "application/json-patch+json"
            | "application/merge-patch+json"
            | "application/apply-patch+yaml"
            | "application/apply-patch+json"
    ) || (strategic_ok && media == "application/strategic-merge-patch+json");
    if known {
        return Ok(media);
    }
    let mut accepted = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if strategic_ok {
        accepted.push("application/strategic-merge-patch+json");
    }
    Err(ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ),
    ))
}

/// Server-side apply names its field manager.
fn require_field_manager(query: &HashMap<String, String>) -> Result<(), ApiError> {
    if query
        .get("fieldManager")
        .is_none_or(|manager| manager.is_empty())
    {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "PatchOptions",
            "",
            vec![(
                "fieldManager".into(),
                "Required value: is required for apply patch".into(),
            )],
        ));
    }
    Ok(())
}

/// Server-side apply of an object that does not exist yet creates it
/// (documented gap: no field ownership).
fn apply_new_object(
    store: &mut Store,
    target: &Target,
    key: &Key,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    require_object(&body)?;
    let warnings = check_fields(target, &body, query)?;
    if dry_run(query) {
        return Ok(json_response(
            StatusCode::CREATED,
            &served(&target.kind, &body),
        ));
    }
    let body = kinds::to_storage(&target.kind, body);
    let object = store.create(&target.storage, &key.namespace, body)?;
    Ok(with_warnings(
        json_response(StatusCode::CREATED, &served(&target.kind, &object)),
        &warnings,
    ))
}

fn propagation(body: &Value, query: &HashMap<String, String>) -> Result<Propagation, ApiError> {
    let policy = body
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| query.get("propagationPolicy").cloned())
        .or_else(
            || match body.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some("Orphan".into()),
                _ => None,
            },
        );
    match policy.as_deref() {
        None | Some("Background") => Ok(Propagation::Background),
        Some("Foreground") => Ok(Propagation::Foreground),
        Some("Orphan") => Ok(Propagation::Orphan),
        Some(other) => Err(ApiError::bad_request(format!(
            "propagationPolicy {other:?} is not one of Background, Foreground, Orphan"
        ))),
    }
}

pub(super) fn delete(
    state: &AppState,
    target: &Target,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    let key = key(target);
    let propagation = propagation(&body, query)?;
    let uid = body.pointer("/preconditions/uid").and_then(Value::as_str);
    let rv = body
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str);
    let mut store = state.lock_store();
    if dry_run(query) {
        let object = store.get(&key).ok_or_else(|| {
            ApiError::not_found(&target.kind.group, &target.kind.plural, &key.name)
        })?;
        return ok(&object);
    }
    let (object, gone) = store.delete(
        &target.storage,
        &key.namespace,
        &key.name,
        propagation,
        uid,
        rv,
    )?;
    let code = if gone {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    Ok(json_response(code, &served(&target.kind, &object)))
}

pub(super) fn delete_collection(
    state: &AppState,
    target: &Target,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    let filter = filter_from(target, query)?;
    let propagation = propagation(&body, query)?;
    let mut store = state.lock_store();
    let doomed = store.list(&target.storage, target.namespace.as_deref(), &filter);
    let mut items = Vec::new();
    for (key, _) in doomed {
        if let Ok((object, _)) = store.delete(
            &target.storage,
            &key.namespace,
            &key.name,
            propagation,
            None,
            None,
        ) {
            items.push(served(&target.kind, &object));
        }
    }
    let rv = store.resource_version();
    ok(
        &json!({"kind": format!("{}List", target.kind.kind), "apiVersion": target.kind.api_version(),
        "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    )
}
