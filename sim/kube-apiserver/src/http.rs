//! The HTTP surface: discovery, OpenAPI stubs, and every verb on every
//! served kind, routed by parsing the path the way the real server does.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::SinkExt;
use serde_json::{Value, json};

use crate::body::{self, Expect};
use crate::error::ApiError;
use crate::faults::FaultsHandle;
use crate::kinds::{self, Kind};
use crate::paging::{ContinueToken, ListScope};
use crate::patch::PatchType;
use crate::selectors::{Filter, Selector};
use crate::store::{ChangeType, Key, Propagation, Store};
use crate::table::{self, IncludeObject};

#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Arc<Mutex<Store>>,
    pub faults: FaultsHandle,
    pub address: String,
    /// Set once the server is stopping. Level-triggered, unlike the
    /// drop-watches fault: a watch that starts after shutdown began (a client
    /// re-watching at that moment) ends at once instead of holding the
    /// graceful shutdown open until its timeout.
    pub closing: Arc<tokio::sync::watch::Sender<bool>>,
}

impl AppState {
    /// The store, locked; usable even after a panic (see `store::lock`).
    fn lock_store(&self) -> MutexGuard<'_, Store> {
        crate::store::lock(&self.store)
    }
}

type ApiResult = Result<Response, ApiError>;

fn json_response(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [("content-type", "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn ok(value: &Value) -> ApiResult {
    Ok(json_response(StatusCode::OK, value))
}

/// Entry point for every request.
pub(crate) async fn handle(State(state): State<AppState>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    if let Some(admin) = path.strip_prefix("/_sim/") {
        return admin_request(&state, admin, request).await;
    }
    let faults = state.faults.current();
    if !faults.latency.is_zero() {
        tokio::time::sleep(faults.latency).await;
    }
    if faults.error_rate > 0.0 && rand::random::<f64>() < faults.error_rate {
        let code = if faults.error_code == 0 {
            500
        } else {
            faults.error_code
        };
        let error = if code == 429 {
            ApiError::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later (injected)",
            )
        } else {
            ApiError::new(
                code,
                "InternalError",
                "an error on the server (\"injected fault\") has prevented the request from succeeding",
            )
        };
        let mut response = error.into_response();
        if code == 429 {
            response
                .headers_mut()
                .insert("retry-after", "1".parse().expect("static header"));
        }
        return response;
    }
    if let Some(message) = faults.forbidden(&path) {
        return ApiError::new(403, "Forbidden", message).into_response();
    }
    state.faults.hold_if_asked(request.method(), &path).await;
    match route(&state, request).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

fn query_map(request: &Request) -> HashMap<String, String> {
    request
        .uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default()
}

/// What a resource path names.
struct Target {
    /// The kind as the client addressed it (its shape on the wire).
    kind: Kind,
    /// The kind its objects are stored as (core/v1 for events.k8s.io Events).
    storage: Kind,
    /// `Accept` asked for a `meta.k8s.io/v1` Table.
    table: Option<IncludeObject>,
    namespace: Option<String>,
    name: Option<String>,
    status: bool,
}

async fn route(state: &AppState, request: Request) -> ApiResult {
    let path = request.uri().path().trim_end_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let method = request.method().clone();
    match segments.as_slice() {
        ["version"] => ok(&json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-radwasm", "gitCommit": "radwasm",
            "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24",
            "compiler": "gc", "platform": "linux/amd64"
        })),
        ["healthz"] | ["livez"] | ["readyz"] => Ok((StatusCode::OK, "ok").into_response()),
        ["openapi", "v2"] => ok(
            &json!({"swagger": "2.0", "info": {"title": "radwasm embedded API server", "version": "v1.33.0"}, "paths": {}, "definitions": {}}),
        ),
        ["openapi", "v3"] => {
            let store = state.lock_store();
            ok(&crate::openapi::root(store.kinds()))
        }
        ["openapi", "v3", "api", version] => openapi_group_version(state, "", version),
        ["openapi", "v3", "apis", group, version] => openapi_group_version(state, group, version),
        ["api"] => ok(&json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": state.address}]})),
        ["apis"] => ok(&group_list(state)),
        ["api", "v1"] => ok(&resource_list(state, "", "v1")),
        ["apis", group] => group_doc(state, group),
        ["apis", group, version] => {
            let list = resource_list(state, group, version);
            if list["resources"].as_array().is_some_and(|r| r.is_empty()) {
                return Err(ApiError::not_found("", "", &format!("{group}/{version}")));
            }
            ok(&list)
        }
        ["api", "v1", rest @ ..] => resource_request(state, "", "v1", rest, method, request).await,
        ["apis", group, version, rest @ ..] => {
            let (group, version) = (group.to_string(), version.to_string());
            resource_request(state, &group, &version, rest, method, request).await
        }
        _ => Err(ApiError::not_found("", "", &path)),
    }
}

fn openapi_group_version(state: &AppState, group: &str, version: &str) -> ApiResult {
    let store = state.lock_store();
    if !store
        .kinds()
        .iter()
        .any(|k| k.group == group && k.version == version)
    {
        return Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    }
    ok(&crate::openapi::group_version(
        store.kinds(),
        group,
        version,
    ))
}

fn group_list(state: &AppState) -> Value {
    let store = state.lock_store();
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for kind in store.kinds().iter().filter(|k| !k.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == kind.group) {
            Some((_, versions)) => {
                if !versions.contains(&kind.version) {
                    versions.push(kind.version.clone());
                }
            }
            None => groups.push((kind.group.clone(), vec![kind.version.clone()])),
        }
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups.iter().map(|(g, v)| group_json(g, v)).collect::<Vec<_>>()})
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions[0]})
}

fn group_doc(state: &AppState, group: &str) -> ApiResult {
    let store = state.lock_store();
    let mut versions: Vec<String> = Vec::new();
    for kind in store.kinds().iter().filter(|k| k.group == group) {
        if !versions.contains(&kind.version) {
            versions.push(kind.version.clone());
        }
    }
    if versions.is_empty() {
        return Err(ApiError::not_found("", "", group));
    }
    let mut doc = group_json(group, &versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    ok(&doc)
}

fn resource_list(state: &AppState, group: &str, version: &str) -> Value {
    let store = state.lock_store();
    let resources: Vec<Value> = store
        .kinds()
        .iter()
        .filter(|k| k.group == group && k.version == version)
        .flat_map(Kind::api_resources)
        .collect();
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}

fn resolve(
    state: &AppState,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Target, ApiError> {
    let store = state.lock_store();
    let find = |plural: &str| {
        store
            .kind_version(group, version, plural)
            .cloned()
            .ok_or_else(|| ApiError::not_found(group, plural, ""))
            .map_err(|_| {
                ApiError::new(404, "NotFound", format!("the server could not find the requested resource ({group}/{version} {plural})"))
            })
    };
    let target = |kind: Kind, namespace: Option<&str>, name: Option<&str>, status: bool| Target {
        storage: if kinds::is_events_api(&kind) {
            store
                .kind_version("", "v1", "events")
                .cloned()
                .unwrap_or_else(|| kind.clone())
        } else {
            kind.clone()
        },
        kind,
        table: None,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        status,
    };
    match rest {
        ["namespaces", ns, plural, tail @ ..]
            if *plural != "status" && group_has_namespaced(&store, group, version, plural) =>
        {
            let kind = find(plural)?;
            match tail {
                [] => Ok(target(kind, Some(ns), None, false)),
                [name] => Ok(target(kind, Some(ns), Some(name), false)),
                [name, "status"] if kind.status_subresource => {
                    Ok(target(kind, Some(ns), Some(name), true))
                }
                _ => Err(ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                )),
            }
        }
        [plural] => Ok(target(find(plural)?, None, None, false)),
        [plural, name] => {
            let kind = find(plural)?;
            if kind.namespaced {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ));
            }
            Ok(target(kind, None, Some(name), false))
        }
        [plural, name, "status"] => {
            let kind = find(plural)?;
            if kind.namespaced || !kind.status_subresource {
                return Err(ApiError::new(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ));
            }
            Ok(target(kind, None, Some(name), true))
        }
        _ => Err(ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )),
    }
}

fn group_has_namespaced(store: &Store, group: &str, version: &str, plural: &str) -> bool {
    store
        .kind_version(group, version, plural)
        .is_some_and(|k| k.namespaced)
}

async fn resource_request(
    state: &AppState,
    group: &str,
    version: &str,
    rest: &[&str],
    method: Method,
    request: Request,
) -> ApiResult {
    let mut target = resolve(state, group, version, rest)?;
    let query = query_map(&request);
    let accept = request
        .headers()
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    body::check_accept(accept)?;
    if table::wants_table(accept) {
        target.table = Some(IncludeObject::parse(
            query.get("includeObject").map(String::as_str),
        ));
    }
    match (method, target.name.is_some()) {
        (Method::GET, false) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            watch(state, &target, &query)
        }
        (Method::GET, false) => list(state, &target, &query),
        (Method::GET, true) => get(state, &target),
        (Method::POST, false) => {
            let (_, body) = body::read(request, Expect::Object(&target.kind)).await?;
            create(state, &target, body, &query)
        }
        (Method::PUT, true) => {
            let (_, body) = body::read(request, Expect::Object(&target.kind)).await?;
            update(state, &target, body, &query)
        }
        (Method::PATCH, true) => {
            let (headers, body) = body::read(request, Expect::Patch).await?;
            patch(state, &target, &headers, body, &query)
        }
        (Method::DELETE, true) => {
            let (_, body) = body::read(request, Expect::DeleteOptions(&target.kind)).await?;
            delete(state, &target, body, &query)
        }
        (Method::DELETE, false) => {
            let (_, body) = body::read(request, Expect::DeleteOptions(&target.kind)).await?;
            delete_collection(state, &target, body, &query)
        }
        (method, _) => Err(ApiError::method_not_allowed(format!(
            "method {method} is not supported on this path"
        ))),
    }
}

fn served(kind: &Kind, object: &Value) -> Value {
    kinds::to_served(kind, object)
}

/// True when a stored object goes on the wire unchanged for `kind`.
fn served_as_stored(kind: &Kind, object: &Value) -> bool {
    !kinds::is_events_api(kind)
        && object.get("apiVersion").and_then(Value::as_str) == Some(kind.api_version().as_str())
}

/// A stored object's wire JSON, without copying it when it is served as stored.
fn served_json(kind: &Kind, object: &Value) -> String {
    if served_as_stored(kind, object) {
        object.to_string()
    } else {
        served(kind, object).to_string()
    }
}

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

fn get(state: &AppState, target: &Target) -> ApiResult {
    let store = state.lock_store();
    let key = key(target);
    let object = store
        .get(&key)
        .ok_or_else(|| ApiError::not_found(&target.kind.group, &target.kind.plural, &key.name))?;
    drop(store);
    if let Some(include) = target.table {
        let rv = object
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(json!(""));
        return ok(&table::table(
            &target.kind,
            &[(*object).clone()],
            json!({"resourceVersion": rv}),
            include,
            |o| served(&target.kind, o),
        ));
    }
    ok(&served(&target.kind, &object))
}

fn key(target: &Target) -> Key {
    Key {
        group: target.storage.group.clone(),
        plural: target.storage.plural.clone(),
        namespace: if target.storage.namespaced {
            target.namespace.clone().unwrap_or_default()
        } else {
            String::new()
        },
        name: target.name.clone().unwrap_or_default(),
    }
}

fn filter_from(target: &Target, query: &HashMap<String, String>) -> Result<Filter, ApiError> {
    let labels = Selector::parse(
        query.get("labelSelector").map(String::as_str).unwrap_or(""),
        "label",
    )?;
    let fields = Selector::parse(
        query.get("fieldSelector").map(String::as_str).unwrap_or(""),
        "field",
    )?;
    let fields = fields.check_fields(&target.kind.group, &target.kind.plural)?;
    Ok(Filter { labels, fields })
}

/// What defines the list `target` and `filter` ask for.
fn list_scope(target: &Target, filter: &Filter) -> ListScope {
    ListScope {
        group: target.kind.group.clone(),
        version: target.kind.version.clone(),
        resource: target.kind.plural.clone(),
        namespace: target.namespace.clone(),
        labels: filter.labels.canonical(),
        fields: filter.fields.canonical(),
    }
}

fn list(state: &AppState, target: &Target, query: &HashMap<String, String>) -> ApiResult {
    let filter = filter_from(target, query)?;
    let scope = list_scope(target, &filter);
    let limit: usize = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let continued = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(token) => {
            if query
                .get("resourceVersion")
                .is_some_and(|rv| !rv.is_empty() && rv != "0")
            {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            Some(ContinueToken::decode_for(token, &scope)?)
        }
        None => None,
    };
    let mut store = state.lock_store();
    let (rv, items, start) = match continued {
        Some(token) => {
            let items = store.snapshot(token.rv, &scope).ok_or_else(|| {
                ApiError::gone("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
            })?;
            (token.rv, items, token.start)
        }
        None => {
            let items = Arc::new(store.list(&target.storage, target.namespace.as_deref(), &filter));
            let rv = if items.len() > limit {
                store.remember_snapshot(&scope, items.clone())
            } else {
                store.resource_version()
            };
            (rv, items, 0)
        }
    };
    drop(store);
    let end = start.saturating_add(limit).min(items.len());
    let window = &items[start.min(end)..end];
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if end < items.len() {
        metadata["continue"] = json!(ContinueToken::new(scope, rv, end).encode());
        // As on the real server: counted only when no selector is set.
        if filter.is_everything() {
            metadata["remainingItemCount"] = json!(items.len() - end);
        }
    }
    if let Some(include) = target.table {
        let objects: Vec<Value> = window.iter().map(|(_, o)| (**o).clone()).collect();
        return ok(&table::table(
            &target.kind,
            &objects,
            metadata,
            include,
            |o| served(&target.kind, o),
        ));
    }
    // Written by hand so that 10,000 stored objects are serialised in place,
    // not deep-copied into one big tree first.
    let mut body = json!({"kind": format!("{}List", target.kind.kind), "apiVersion": target.kind.api_version(), "metadata": metadata})
        .to_string();
    body.pop(); // the closing brace
    body.push_str(",\"items\":[");
    for (index, (_, object)) in window.iter().enumerate() {
        if index > 0 {
            body.push(',');
        }
        body.push_str(&served_json(&target.kind, object));
    }
    body.push_str("]}");
    Ok((StatusCode::OK, [("content-type", "application/json")], body).into_response())
}

fn create(
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

fn update(
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

fn patch(
    state: &AppState,
    target: &Target,
    headers: &HeaderMap,
    body: Value,
    query: &HashMap<String, String>,
) -> ApiResult {
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_string();
    let strategic_ok = !target.kind.custom;
    let apply = media == "application/apply-patch+yaml" || media == "application/apply-patch+json";
    let known = matches!(
        media.as_str(),
        "application/json-patch+json" | "application/merge-patch+json"
    ) || apply
        || (strategic_ok && media == "application/strategic-merge-patch+json");
    if !known {
        let mut accepted = vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
        ];
        if strategic_ok {
            accepted.push("application/strategic-merge-patch+json");
        }
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        ));
    }
    if apply
        && query
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
    let key = key(target);
    let mut store = state.lock_store();
    let Some(current) = store.get(&key) else {
        if apply && !target.status {
            // Server-side apply of a new object creates it (documented gap:
            // no field ownership).
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
            return Ok(with_warnings(
                json_response(StatusCode::CREATED, &served(&target.kind, &object)),
                &warnings,
            ));
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

fn delete(
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

fn delete_collection(
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

/// One watch event line.
fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

fn watch(state: &AppState, target: &Target, query: &HashMap<String, String>) -> ApiResult {
    let filter = filter_from(target, query)?;
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true");
    let initial_events = query.get("sendInitialEvents").is_some_and(|b| b == "true");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let from: Option<u64> = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(text) => Some(
            text.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {text}")))?,
        ),
    };
    let shape = Shape {
        kind: target.kind.clone(),
        storage: target.storage.clone(),
        table: target.table,
    };
    let kind = target.kind.clone();
    let namespace = if kind.namespaced {
        target.namespace.clone()
    } else {
        None
    };

    let (mut subscription, mut backlog, mut last_rv) = {
        let store = state.lock_store();
        let subscription = store.events.subscribe();
        let now = store.resource_version();
        match from {
            None => {
                let items = store.list(&shape.storage, namespace.as_deref(), &filter);
                let lines: Vec<Bytes> = items.iter().map(|(_, o)| shape.line("ADDED", o)).collect();
                (subscription, lines, now)
            }
            Some(rv) => match store.changes_since(rv) {
                None => {
                    let error = ApiError::gone(format!(
                        "too old resource version: {rv} ({})",
                        store.oldest_rv()
                    ));
                    let line = event_line("ERROR", &error.status());
                    return Ok(stream_response(futures::stream::iter(vec![Ok::<
                        _,
                        Infallible,
                    >(
                        line
                    )])));
                }
                Some(changes) => {
                    let lines = changes
                        .iter()
                        .filter_map(|c| translate(c, &shape, namespace.as_deref(), &filter))
                        .collect();
                    (subscription, lines, now.max(rv))
                }
            },
        }
    };
    if initial_events && bookmarks && from.is_none() {
        backlog.push(event_line("BOOKMARK", &json!({"kind": kind.kind, "apiVersion": kind.api_version(),
            "metadata": {"resourceVersion": last_rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}})));
    }
    let (mut tx, rx) = futures::channel::mpsc::channel::<Result<Bytes, Infallible>>(64);
    let mut drop_signal = state.faults.drop_watches.subscribe();
    let mut closing = state.closing.subscribe();
    let faults = state.faults.clone();
    tokio::spawn(async move {
        for line in backlog {
            if tx.send(Ok(line)).await.is_err() {
                return;
            }
        }
        let deadline =
            tokio::time::sleep(timeout.unwrap_or(Duration::from_secs(60 * 60 * 24 * 365)));
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = drop_signal.changed() => return,
                _ = async { closing.wait_for(|closing| *closing).await.is_ok() } => return,
                _ = ticker.tick(), if bookmarks => {
                    let line = event_line("BOOKMARK", &json!({"kind": kind.kind, "apiVersion": kind.api_version(),
                        "metadata": {"resourceVersion": last_rv.to_string()}}));
                    if tx.send(Ok(line)).await.is_err() {
                        return;
                    }
                }
                change = subscription.recv() => {
                    let change = match change {
                        Ok(change) => change,
                        Err(_) => return, // lagged or closed: the client re-watches
                    };
                    if change.rv <= last_rv {
                        continue;
                    }
                    last_rv = change.rv;
                    let lag = faults.current().watch_lag;
                    // A watch dropped while its changes lag delivers none
                    // of them: the client only learns of them by a list.
                    if !lag.is_zero() {
                        tokio::select! {
                            _ = tokio::time::sleep_until((change.at + lag).into()) => {}
                            _ = drop_signal.changed() => return,
                        }
                    }
                    if let Some(line) = translate(&change, &shape, namespace.as_deref(), &filter)
                        && tx.send(Ok(line)).await.is_err() {
                            return;
                        }
                }
            }
        }
    });
    Ok(stream_response(rx))
}

fn stream_response<S>(stream: S) -> Response
where
    S: futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .header("cache-control", "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// How one watch stream shows objects: the addressed kind's shape, or a
/// one-row Table when kubectl asked for tables.
struct Shape {
    kind: Kind,
    storage: Kind,
    table: Option<IncludeObject>,
}

impl Shape {
    fn line(&self, event: &str, stored: &Value) -> Bytes {
        match self.table {
            Some(include) => {
                let rv = stored
                    .pointer("/metadata/resourceVersion")
                    .cloned()
                    .unwrap_or(json!(""));
                event_line(
                    event,
                    &table::table(
                        &self.kind,
                        std::slice::from_ref(stored),
                        json!({"resourceVersion": rv}),
                        include,
                        |o| served(&self.kind, o),
                    ),
                )
            }
            None => watch_line(event, &served_json(&self.kind, stored)),
        }
    }

    /// Like [`Shape::line`], reusing the change's serialised object.
    fn change_line(&self, event: &str, change: &crate::store::Change) -> Bytes {
        if self.table.is_none() && served_as_stored(&self.kind, &change.object) {
            return watch_line(event, change.wire.get_or_init(|| change.object.to_string()));
        }
        self.line(event, &change.object)
    }
}

fn watch_line(event: &str, object_json: &str) -> Bytes {
    Bytes::from(format!(
        "{{\"type\":\"{event}\",\"object\":{object_json}}}\n"
    ))
}

/// A change as this watcher sees it, honouring selector transitions.
fn translate(
    change: &crate::store::Change,
    shape: &Shape,
    namespace: Option<&str>,
    filter: &Filter,
) -> Option<Bytes> {
    if change.key.group != shape.storage.group || change.key.plural != shape.storage.plural {
        return None;
    }
    if namespace.is_some_and(|ns| change.key.namespace != ns) {
        return None;
    }
    let now = filter.matches(&change.object);
    let before = change.old.as_ref().is_some_and(|old| filter.matches(old));
    let event = match change.change {
        ChangeType::Added if now => "ADDED",
        ChangeType::Modified if now && before => "MODIFIED",
        ChangeType::Modified if now => "ADDED",
        ChangeType::Modified if before => "DELETED",
        ChangeType::Deleted if now || before => "DELETED",
        _ => return None,
    };
    Some(shape.change_line(event, change))
}

async fn admin_request(state: &AppState, path: &str, request: Request) -> Response {
    let method = request.method().clone();
    let body = match body::read(request, Expect::Json).await {
        Ok((_, body)) => body,
        Err(error) => return error.into_response(),
    };
    match (method, path) {
        (Method::POST, "faults") => {
            let rate = body.get("errorRate").and_then(Value::as_f64).unwrap_or(0.0);
            let code = body.get("errorCode").and_then(Value::as_u64).unwrap_or(500) as u16;
            let latency_ms = body.get("latencyMs").and_then(Value::as_u64).unwrap_or(0);
            let watch_lag_ms = body.get("watchLagMs").and_then(Value::as_u64).unwrap_or(0);
            state.faults.set_error_rate(rate, code);
            state.faults.set_latency(Duration::from_millis(latency_ms));
            state
                .faults
                .set_watch_lag(Duration::from_millis(watch_lag_ms));
            json_response(
                StatusCode::OK,
                &json!({"errorRate": rate, "errorCode": code, "latencyMs": latency_ms,
                        "watchLagMs": watch_lag_ms}),
            )
        }
        (Method::POST, "drop-watches") => {
            state.faults.drop_watches();
            json_response(StatusCode::OK, &json!({"dropped": true}))
        }
        (Method::POST, "expire-history") => {
            state.faults.expire_history();
            json_response(StatusCode::OK, &json!({"expired": true}))
        }
        (Method::GET, "stats") => {
            let store = state.lock_store();
            json_response(
                StatusCode::OK,
                &json!({"resourceVersion": store.resource_version(), "oldestResourceVersion": store.oldest_rv()}),
            )
        }
        _ => ApiError::new(404, "NotFound", format!("no admin endpoint /_sim/{path}"))
            .into_response(),
    }
}
