//! Reads: get one object, list many (paged with continue tokens, or as a
//! Table).

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::{ApiResult, AppState, Target, filter_from, key, ok, served, served_json};
use crate::error::ApiError;
use crate::paging::{ContinueToken, ListScope};
use crate::selectors::Filter;
use crate::table;

pub(super) fn get(state: &AppState, target: &Target) -> ApiResult {
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

pub(super) fn list(
    state: &AppState,
    target: &Target,
    query: &HashMap<String, String>,
) -> ApiResult {
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
