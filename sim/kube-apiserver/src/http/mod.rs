//! The HTTP surface: discovery, OpenAPI stubs, and every verb on every
//! served kind, routed by parsing the path the way the real server does.
//!
//! [`handle`] takes every request: admin endpoints ([`admin`]), injected
//! faults, then [`route`] to discovery and OpenAPI ([`discovery`]) or to a
//! resource path, which [`resolve`] parses into a [`Target`] for reads
//! ([`read`]), writes ([`write`]) and watches ([`watch`]).

mod admin;
mod discovery;
mod read;
mod watch;
mod write;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::body::{self, Expect};
use crate::error::ApiError;
use crate::faults::FaultsHandle;
use crate::kinds::{self, Kind};
use crate::selectors::{Filter, Selector};
use crate::store::{Key, Store};
use crate::table::{self, IncludeObject};
use admin::admin_request;
use discovery::{group_doc, group_list, openapi_group_version, resource_list};
use read::{get, list};
use watch::watch;
use write::{create, delete, delete_collection, patch, update};

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
