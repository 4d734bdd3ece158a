//! Deletion: propagation to dependents, finalizers and `deletionTimestamp`,
//! namespace termination, and removing an object for good.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{ChangeType, Key, Store, now};
use crate::error::ApiError;
use crate::kinds::Kind;

/// How a delete propagates to dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

pub(super) const FOREGROUND: &str = "foregroundDeletion";
pub(super) const ORPHAN: &str = "orphan";

impl Store {
    /// Delete (or mark for deletion, with finalizers) one object.
    pub fn delete(
        &mut self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        propagation: Propagation,
        precondition_uid: Option<&str>,
        precondition_rv: Option<&str>,
    ) -> Result<(Arc<Value>, bool), ApiError> {
        let key = Self::key(kind, namespace, name);
        let current = self.existing(kind, &key, name)?;
        if precondition_uid.is_some_and(|uid| {
            Some(uid) != current.pointer("/metadata/uid").and_then(Value::as_str)
        }) {
            return Err(ApiError::conflict(&kind.group, &kind.plural, name));
        }
        if precondition_rv.is_some_and(|rv| {
            Some(rv)
                != current
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
        }) {
            return Err(ApiError::conflict(&kind.group, &kind.plural, name));
        }
        let result = self.delete_object(&key, current, propagation);
        self.collect_garbage();
        Ok(result)
    }

    /// Returns the object as last seen and whether it is gone (false: marked).
    pub(super) fn delete_object(
        &mut self,
        key: &Key,
        current: Arc<Value>,
        propagation: Propagation,
    ) -> (Arc<Value>, bool) {
        let uid = current
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if propagation == Propagation::Orphan {
            self.orphan_dependents(&uid);
        }
        let mut extra = Vec::new();
        if propagation == Propagation::Foreground && self.has_dependents(&uid) {
            extra.push(FOREGROUND.to_string());
        }
        if key.plural == "namespaces" && key.group.is_empty() {
            // Terminate the namespace: delete its content, then it.
            let inside: Vec<Key> = self
                .objects
                .keys()
                .filter(|k| k.namespace == key.name)
                .cloned()
                .collect();
            for child in inside {
                if let Some(object) = self.objects.get(&child).cloned() {
                    self.delete_object(&child, object, Propagation::Background);
                }
            }
        }
        let mut all_finalizers: Vec<String> = finalizers(&current)
            .into_iter()
            .map(str::to_string)
            .collect();
        for f in extra {
            if !all_finalizers.contains(&f) {
                all_finalizers.push(f);
            }
        }
        if all_finalizers.is_empty() {
            let view = self.remove(key.clone(), Some(current));
            return (view, true);
        }
        if current.pointer("/metadata/deletionTimestamp").is_some()
            && finalizers(&current).len() == all_finalizers.len()
        {
            return (current, false); // already being deleted
        }
        let mut next = (*current).clone();
        next["metadata"]["finalizers"] = json!(all_finalizers);
        if next.pointer("/metadata/deletionTimestamp").is_none() {
            next["metadata"]["deletionTimestamp"] = json!(now());
            next["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        }
        (
            self.commit(key.clone(), ChangeType::Modified, next, Some(current)),
            false,
        )
    }

    pub(super) fn remove(&mut self, key: Key, current: Option<Arc<Value>>) -> Arc<Value> {
        let object = current
            .as_deref()
            .cloned()
            .or_else(|| self.objects.get(&key).map(|o| (**o).clone()));
        let Some(object) = object else {
            return Arc::new(Value::Null);
        };
        if key.group == "apiextensions.k8s.io" && key.plural == "customresourcedefinitions" {
            self.unregister_crd(&object);
        }
        self.commit(key, ChangeType::Deleted, object, current)
    }
}

pub fn finalizers(object: &Value) -> Vec<&str> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}
