//! Discovery (`/api`, `/apis/...`) and the OpenAPI documents of a group
//! version.

use serde_json::{Value, json};

use super::{ApiResult, AppState, ok};
use crate::error::ApiError;
use crate::kinds::Kind;

pub(super) fn openapi_group_version(state: &AppState, group: &str, version: &str) -> ApiResult {
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

pub(super) fn group_list(state: &AppState) -> Value {
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

pub(super) fn group_doc(state: &AppState, group: &str) -> ApiResult {
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

pub(super) fn resource_list(state: &AppState, group: &str, version: &str) -> Value {
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
