//! The object store: every object as JSON, one global resourceVersion, the
//! history of changes that watches replay, and the rules the real server
//! applies on write (optimistic concurrency, generation, status subresource,
//! finalizers, owner-reference garbage collection, CRD registration).
//!
//! This file holds the `Store` type and its core: keys, storage, the
//! resourceVersion, `commit` and the lock. The rest, one concern a file:
//! `watch` (changes and their history), `snapshots` (paged lists), `write`
//! (create and update), `delete` (deletion and finalizers), `owners` (the
//! owner index), `gc` (garbage collection) and `crd` (the kinds served).

mod crd;
mod delete;
mod gc;
mod owners;
mod snapshots;
mod watch;
mod write;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::kinds::{self, Kind};
use crate::paging::ListScope;
use crate::selectors::Filter;

pub use delete::{Propagation, finalizers};
use owners::OwnerIndex;
pub use snapshots::Snapshot;
pub use watch::{Change, ChangeType};

/// Where an object lives: version-agnostic, so every served version of a
/// CRD sees the same objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub name: String,
}

pub struct Store {
    rv: u64,
    kinds: Vec<Kind>,
    objects: BTreeMap<Key, Arc<Value>>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Watches may resume from any rv at or after this one.
    oldest_rv: u64,
    /// List snapshots that `continue` tokens refer to, newest last: each
    /// under the list it belongs to and its resourceVersion. The rv alone
    /// does not identify a snapshot: lists of other kinds, namespaces or
    /// selectors taken with no write in between have the same one.
    snapshots: VecDeque<(u64, ListScope, Snapshot)>,
    /// Who owns whom, kept by `commit`, for deletion and garbage collection.
    owners: OwnerIndex,
    pub events: broadcast::Sender<Arc<Change>>,
    /// Tests only: collect garbage by scanning every object, as the server
    /// did before `owners` (the reference the index is checked against).
    #[cfg(test)]
    scan_gc: bool,
}

/// Lock the store, recovering it if a panic poisoned the lock.
///
/// No input may make a handler panic; should one (a bug), a poisoned lock
/// would fail every later request and so stop the server. Recovering is
/// safe because a panic with the lock held cannot leave the store
/// half-changed: handlers check and patch copies before they call a `Store`
/// method that changes anything, those methods check before they change,
/// and each change is one `commit`, which does what can panic before it
/// changes anything. Between the commits of one operation (namespace
/// termination, garbage collection, a CRD's removal) the only indexing is
/// into stored objects' `metadata`, which `create` and `update` always
/// store as an object.
pub(crate) fn lock(store: &Mutex<Store>) -> MutexGuard<'_, Store> {
    store
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        let (events, _) = broadcast::channel(1 << 16);
        let mut store = Self {
            rv: 1,
            kinds: kinds::builtins(),
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(16),
            oldest_rv: 1,
            snapshots: VecDeque::new(),
            owners: OwnerIndex::default(),
            events,
            #[cfg(test)]
            scan_gc: false,
        };
        for namespace in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
            let kind = store
                .kind("", "namespaces")
                .cloned()
                .expect("namespaces is built in");
            let _ = store.create(&kind, "", object);
        }
        store
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    pub fn oldest_rv(&self) -> u64 {
        self.oldest_rv
    }

    pub fn get(&self, key: &Key) -> Option<Arc<Value>> {
        self.objects.get(key).cloned()
    }

    /// The object a write or delete names, or the API's 404 for it.
    fn existing(&self, kind: &Kind, key: &Key, name: &str) -> Result<Arc<Value>, ApiError> {
        self.get(key)
            .ok_or_else(|| ApiError::not_found(&kind.group, &kind.plural, name))
    }

    /// Objects of a kind (in one namespace or all), in key order.
    pub fn list(
        &self,
        kind: &Kind,
        namespace: Option<&str>,
        filter: &Filter,
    ) -> Vec<(Key, Arc<Value>)> {
        // Keys sort by group, plural, namespace, name: scan only the range.
        let start = Key {
            group: kind.group.clone(),
            plural: kind.plural.clone(),
            namespace: namespace.unwrap_or("").to_string(),
            name: String::new(),
        };
        self.objects
            .range(start..)
            .take_while(|(k, _)| k.group == kind.group && k.plural == kind.plural)
            .take_while(|(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .filter(|(_, v)| filter.matches(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn commit(
        &mut self,
        key: Key,
        change: ChangeType,
        mut object: Value,
        old: Option<Arc<Value>>,
    ) -> Arc<Value> {
        // Nothing below the version's assignment can panic, and nothing
        // above it changes the store (see `lock`).
        let rv = self.rv + 1;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.rv = rv;
        let object = Arc::new(object);
        let before = match change {
            ChangeType::Deleted => self.objects.remove(&key),
            _ => self.objects.insert(key.clone(), object.clone()),
        };
        let after = (change != ChangeType::Deleted).then_some(&*object);
        self.owners.update(&key, before.as_deref(), after);
        let event = Arc::new(Change {
            rv: self.rv,
            key,
            change,
            object: object.clone(),
            old,
            wire: std::sync::OnceLock::new(),
            at: std::time::Instant::now(),
        });
        self.history.push_back(event.clone());
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.oldest_rv = dropped.rv;
            }
        }
        let _ = self.events.send(event);
        object
    }

    fn key(kind: &Kind, namespace: &str, name: &str) -> Key {
        Key {
            group: kind.group.clone(),
            plural: kind.plural.clone(),
            namespace: if kind.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }
}
