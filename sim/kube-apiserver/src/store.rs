//! The object store: every object as JSON, one global resourceVersion, the
//! history of changes that watches replay, and the rules the real server
//! applies on write (optimistic concurrency, generation, status subresource,
//! finalizers, owner-reference garbage collection, CRD registration).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::error::ApiError;
use crate::kinds::{self, Kind};
use crate::paging::ListScope;
use crate::schema;
use crate::selectors::Filter;

/// Where an object lives: version-agnostic, so every served version of a
/// CRD sees the same objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub name: String,
}

/// Type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One committed change, as watches see it.
#[derive(Debug, Clone)]
pub struct Change {
    pub rv: u64,
    pub key: Key,
    pub change: ChangeType,
    pub object: Arc<Value>,
    /// The object before the change (for selector transitions).
    pub old: Option<Arc<Value>>,
    /// `object` serialised once, shared by every watcher that sends it as stored.
    pub wire: std::sync::OnceLock<String>,
    /// When the change was made (a watch lagging by a fault delivers it
    /// that long after this).
    pub at: std::time::Instant,
}

/// How a delete propagates to dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// The items of one list, frozen for `continue` tokens.
pub type Snapshot = Arc<Vec<(Key, Arc<Value>)>>;

/// How many paged lists' snapshots are kept; continuing an older one gets
/// 410 Expired.
const SNAPSHOTS_KEPT: usize = 64;

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

/// The stored objects by uid and by the uids their `ownerReferences` name,
/// and the objects garbage collection has to look at again.
///
/// Garbage collection runs after every delete. Whether it has anything to
/// do with an object depends only on the object itself (its owners,
/// finalizers and `deletionTimestamp`), on whether its owners exist and
/// carry `foregroundDeletion`, and (for an owner being deleted in the
/// foreground) on whether anything still names it as an owner. A change to
/// any of that marks the objects it concerns dirty, and garbage collection
/// looks at those only, instead of at every stored object.
#[derive(Default)]
struct OwnerIndex {
    /// uid → the stored object with it.
    by_uid: HashMap<String, Key>,
    /// uid → the stored objects that name it in `ownerReferences`, whether
    /// an object with that uid exists or not.
    dependents: HashMap<String, BTreeSet<Key>>,
    /// Objects garbage collection has not looked at since they, their
    /// owners or their dependents changed.
    dirty: BTreeSet<Key>,
}

/// What of one object the owner index keeps.
struct Ownership<'a> {
    uid: Option<&'a str>,
    owners: BTreeSet<&'a str>,
    foreground: bool,
}

impl<'a> Ownership<'a> {
    fn of(object: &'a Value) -> Self {
        Self {
            uid: object.pointer("/metadata/uid").and_then(Value::as_str),
            owners: owner_uids(object).into_iter().collect(),
            foreground: finalizers(object).contains(&FOREGROUND),
        }
    }
}

impl OwnerIndex {
    /// `key` changes from `before` to `after` (`None`: not stored).
    fn update(&mut self, key: &Key, before: Option<&Value>, after: Option<&Value>) {
        let before = before.map(Ownership::of);
        let after = after.map(Ownership::of);
        let uid_before = before.as_ref().and_then(|o| o.uid);
        let uid_after = after.as_ref().and_then(|o| o.uid);
        let empty = BTreeSet::new();
        let owners_before = before.as_ref().map_or(&empty, |o| &o.owners);
        let owners_after = after.as_ref().map_or(&empty, |o| &o.owners);

        if let Some(uid) = uid_before
            && self.by_uid.get(uid) == Some(key)
        {
            self.by_uid.remove(uid);
        }
        if let Some(uid) = uid_after {
            self.by_uid.insert(uid.to_string(), key.clone());
        }
        for owner in owners_before.difference(owners_after) {
            if let Some(dependents) = self.dependents.get_mut(*owner) {
                dependents.remove(key);
                if dependents.is_empty() {
                    self.dependents.remove(*owner);
                }
            }
        }
        for owner in owners_after.difference(owners_before) {
            self.dependents
                .entry(owner.to_string())
                .or_default()
                .insert(key.clone());
        }

        // What garbage collection must look at again: the object itself;
        // the owners it stopped or started naming (an owner deleted in the
        // foreground may have lost its last dependent); and, when it came,
        // went, or gained or lost `foregroundDeletion`, its dependents.
        if after.is_some() {
            self.dirty.insert(key.clone());
        }
        for owner in owners_before.symmetric_difference(owners_after) {
            if let Some(owner) = self.by_uid.get(*owner) {
                self.dirty.insert(owner.clone());
            }
        }
        let foreground_before = before.as_ref().is_some_and(|o| o.foreground);
        let foreground_after = after.as_ref().is_some_and(|o| o.foreground);
        let touched = if uid_before != uid_after || foreground_before != foreground_after {
            [uid_before, uid_after]
        } else {
            [None, None]
        };
        for uid in touched.into_iter().flatten() {
            if let Some(dependents) = self.dependents.get(uid) {
                self.dirty.extend(dependents.iter().cloned());
            }
        }
    }

    fn dependents(&self, uid: &str) -> Option<&BTreeSet<Key>> {
        self.dependents.get(uid)
    }
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

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// Every namespace carries the label `kubernetes.io/metadata.name` with its
/// name, set by the server on every write (as the real one does), so that a
/// label selector can pick namespaces by name.
fn name_label(kind: &Kind, object: &mut Value) {
    if kind.kind != "Namespace" || !kind.group.is_empty() {
        return;
    }
    let name = object
        .pointer("/metadata/name")
        .cloned()
        .unwrap_or_default();
    if !object["metadata"]
        .get("labels")
        .is_some_and(Value::is_object)
    {
        object["metadata"]["labels"] = json!({});
    }
    object["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
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

    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// The kind served at `group`/`plural` (any version).
    pub fn kind(&self, group: &str, plural: &str) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.plural == plural)
    }

    pub fn kind_version(&self, group: &str, version: &str, plural: &str) -> Option<&Kind> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
    }

    /// Forget history so that watches from older versions get 410 Gone.
    pub fn expire_history(&mut self) {
        self.history.clear();
        self.snapshots.clear();
        self.oldest_rv = self.rv;
    }

    /// Changes after `rv` for this group/plural; `None` if they are no longer kept.
    pub fn changes_since(&self, rv: u64) -> Option<Vec<Arc<Change>>> {
        if rv < self.oldest_rv {
            return None;
        }
        Some(self.history.iter().filter(|c| c.rv > rv).cloned().collect())
    }

    pub fn get(&self, key: &Key) -> Option<Arc<Value>> {
        self.objects.get(key).cloned()
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

    /// Keep the snapshot of `list` at the current rv for paging; returns
    /// the rv. One already kept for the same list and rv (the same items)
    /// is kept instead, as the newest.
    pub fn remember_snapshot(&mut self, list: &ListScope, items: Snapshot) -> u64 {
        let rv = self.rv;
        let kept = self
            .snapshots
            .iter()
            .position(|(at, scope, _)| *at == rv && scope == list)
            .and_then(|index| self.snapshots.remove(index));
        self.snapshots
            .push_back(kept.unwrap_or_else(|| (rv, list.clone(), items)));
        while self.snapshots.len() > SNAPSHOTS_KEPT {
            self.snapshots.pop_front();
        }
        rv
    }

    /// The snapshot of `list` taken at `rv`, if it is still kept.
    pub fn snapshot(&self, rv: u64, list: &ListScope) -> Option<Snapshot> {
        self.snapshots
            .iter()
            .rev()
            .find(|(at, scope, _)| *at == rv && scope == list)
            .map(|(_, _, items)| items.clone())
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

    /// Validate and prune a custom resource against its schema.
    fn check_schema(kind: &Kind, object: &mut Value) -> Result<(), ApiError> {
        let Some(schema) = &kind.schema else {
            return Ok(());
        };
        schema::prune(schema, object, true, "", &mut Vec::new());
        schema::apply_defaults(schema, object);
        let mut problems = Vec::new();
        let mut body = object.clone();
        if let Some(map) = body.as_object_mut() {
            map.remove("metadata");
            map.remove("apiVersion");
            map.remove("kind");
        }
        schema::validate(schema, &body, "", &mut problems);
        if problems.is_empty() {
            return Ok(());
        }
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        Err(ApiError::invalid(&kind.group, &kind.kind, name, problems))
    }

    pub fn create(
        &mut self,
        kind: &Kind,
        namespace: &str,
        mut object: Value,
    ) -> Result<Arc<Value>, ApiError> {
        if !object.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        let mut name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if name.is_empty()
            && let Some(prefix) = object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
        {
            let suffix: String = (0..5)
                .map(|_| (b'a' + rand::random_range(0..26u8)) as char)
                .collect();
            name = format!("{prefix}{suffix}");
            object["metadata"]["name"] = json!(name);
        }
        check_name(kind, &name)?;
        if kind.namespaced {
            if namespace.is_empty() {
                return Err(ApiError::bad_request(
                    "the namespace of the object must be given",
                ));
            }
            let ns_key = Key {
                group: String::new(),
                plural: "namespaces".into(),
                namespace: String::new(),
                name: namespace.into(),
            };
            match self.objects.get(&ns_key) {
                None => return Err(ApiError::not_found("", "namespaces", namespace)),
                Some(ns) if ns.pointer("/metadata/deletionTimestamp").is_some() => {
                    return Err(ApiError::new(
                        403,
                        "Forbidden",
                        format!(
                            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                            kind.plural
                        ),
                    ));
                }
                Some(_) => {}
            }
            object["metadata"]["namespace"] = json!(namespace);
        } else if let Some(map) = object["metadata"].as_object_mut() {
            map.remove("namespace");
        }
        let key = Self::key(kind, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&kind.group, &kind.plural, &name));
        }
        object["apiVersion"] = json!(kind.api_version());
        object["kind"] = json!(kind.kind);
        if kind.status_subresource
            && kind.custom
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        if kind.custom {
            Self::check_schema(kind, &mut object)?;
        }
        let metadata = object["metadata"]
            .as_object_mut()
            .expect("metadata is an object");
        metadata.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), json!(now()));
        metadata.remove("deletionTimestamp");
        metadata.remove("resourceVersion");
        if kind.custom || kind.kind == "CustomResourceDefinition" {
            metadata.insert("generation".into(), json!(1));
        }
        if kind.kind == "CustomResourceDefinition" {
            self.register_crd(&mut object)?;
        }
        name_label(kind, &mut object);
        Ok(self.commit(key, ChangeType::Added, object, None))
    }

    /// Replace an object (PUT), or its status (`status_only`).
    pub fn update(
        &mut self,
        kind: &Kind,
        namespace: &str,
        name: &str,
        mut candidate: Value,
        status_only: bool,
    ) -> Result<Arc<Value>, ApiError> {
        let key = Self::key(kind, namespace, name);
        let current = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.group, &kind.plural, name))?;
        if !candidate.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be a JSON object",
            ));
        }
        if let Some(given) = candidate.pointer("/metadata/name").and_then(Value::as_str)
            && given != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(given) = candidate
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            && !given.is_empty()
            && Some(given)
                != current
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
        {
            return Err(ApiError::conflict(&kind.group, &kind.plural, name));
        }
        let mut next = (*current).clone();
        if status_only {
            match candidate.get("status") {
                Some(status) => next["status"] = status.clone(),
                None => {
                    if let Some(map) = next.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
        } else {
            let old_meta = current["metadata"].clone();
            if !candidate.get("metadata").is_some_and(Value::is_object) {
                candidate["metadata"] = json!({});
            }
            // Fields the server owns are kept from the stored object.
            for field in [
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "namespace",
                "name",
            ] {
                match old_meta.get(field) {
                    Some(value) => candidate["metadata"][field] = value.clone(),
                    None => {
                        if let Some(map) = candidate["metadata"].as_object_mut() {
                            map.remove(field);
                        }
                    }
                }
            }
            if kind.status_subresource {
                match current.get("status") {
                    Some(status) => candidate["status"] = status.clone(),
                    None => {
                        if let Some(map) = candidate.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
            }
            candidate["apiVersion"] = json!(kind.api_version());
            candidate["kind"] = json!(kind.kind);
            next = candidate;
            if current.pointer("/metadata/deletionTimestamp").is_some() {
                let before: HashSet<&str> = finalizers(&current).into_iter().collect();
                if let Some(added) = finalizers(&next).into_iter().find(|f| !before.contains(f)) {
                    return Err(ApiError::invalid(
                        &kind.group,
                        &kind.kind,
                        name,
                        vec![(
                            "metadata.finalizers".into(),
                            format!(
                                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [\"{added}\"]"
                            ),
                        )],
                    ));
                }
            }
        }
        if kind.custom {
            Self::check_schema(kind, &mut next)?;
        }
        name_label(kind, &mut next);
        next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        if next == *current {
            return Ok(current); // a no-op write changes nothing, not even the rv
        }
        if kind.custom && spec_of(&next) != spec_of(&current) {
            let generation = current
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            next["metadata"]["generation"] = json!(generation + 1);
        }
        if kind.kind == "CustomResourceDefinition" && !status_only {
            self.register_crd(&mut next)?;
        }
        if next.pointer("/metadata/deletionTimestamp").is_some() && finalizers(&next).is_empty() {
            self.remove(key, Some(current));
            self.collect_garbage();
            return Ok(self.get_deleted_view(next));
        }
        Ok(self.commit(key, ChangeType::Modified, next, Some(current)))
    }

    fn get_deleted_view(&self, mut object: Value) -> Arc<Value> {
        object["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        Arc::new(object)
    }

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
        let current = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&kind.group, &kind.plural, name))?;
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
    fn delete_object(
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

    fn remove(&mut self, key: Key, current: Option<Arc<Value>>) -> Arc<Value> {
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

    fn has_dependents(&self, uid: &str) -> bool {
        #[cfg(test)]
        if self.scan_gc {
            return tests::has_dependents_by_scan(self, uid);
        }
        !uid.is_empty()
            && self
                .owners
                .dependents(uid)
                .is_some_and(|dependents| !dependents.is_empty())
    }

    fn orphan_dependents(&mut self, uid: &str) {
        #[cfg(test)]
        if self.scan_gc {
            return tests::orphan_dependents_by_scan(self, uid);
        }
        let dependents: Vec<(Key, Arc<Value>)> = self
            .owners
            .dependents(uid)
            .into_iter()
            .flatten()
            .filter_map(|key| Some((key.clone(), self.objects.get(key)?.clone())))
            .collect();
        for (key, object) in dependents {
            self.orphan(key, object, uid);
        }
    }

    /// Remove the owner references to `uid` from one object.
    fn orphan(&mut self, key: Key, object: Arc<Value>, uid: &str) {
        let mut next = (*object).clone();
        if let Some(references) = next["metadata"]["ownerReferences"].as_array_mut() {
            references.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
        }
        self.commit(key, ChangeType::Modified, next, Some(object));
    }

    /// Is an object with this uid stored, and does it carry
    /// `foregroundDeletion`?
    fn owner_state(&self, uid: &str) -> (bool, bool) {
        match self
            .owners
            .by_uid
            .get(uid)
            .and_then(|key| self.objects.get(key))
        {
            Some(owner) => (true, finalizers(owner).contains(&FOREGROUND)),
            None => (false, false),
        }
    }

    /// Owner-reference garbage collection, run after every delete: remove
    /// dependents whose owners are all gone, and finish foreground deletions
    /// whose blocking dependents are gone. Repeats until nothing changes.
    ///
    /// Each round looks at the objects the owner index marked dirty since
    /// the last look (in key order, as a scan of every object would meet
    /// them), decides about all of them, then acts; what it changes marks
    /// the next round's.
    fn collect_garbage(&mut self) {
        #[cfg(test)]
        if self.scan_gc {
            return tests::collect_garbage_by_scan(self);
        }
        loop {
            let dirty = std::mem::take(&mut self.owners.dirty);
            let mut work: Vec<(Key, Arc<Value>, Propagation)> = Vec::new();
            let mut finished: Vec<(Key, Arc<Value>)> = Vec::new();
            for key in dirty {
                let Some(object) = self.objects.get(&key) else {
                    continue;
                };
                let owners = owner_uids(object);
                if !owners.is_empty() && object.pointer("/metadata/deletionTimestamp").is_none() {
                    let states: Vec<(bool, bool)> =
                        owners.iter().map(|uid| self.owner_state(uid)).collect();
                    if states.iter().all(|(live, _)| !live) {
                        work.push((key.clone(), object.clone(), Propagation::Background));
                    } else if states.iter().any(|(_, foreground)| *foreground) {
                        work.push((key.clone(), object.clone(), Propagation::Foreground));
                    }
                }
                if finalizers(object).contains(&FOREGROUND) {
                    // Foreground owners whose blocking dependents are all gone.
                    let uid = object
                        .pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    let blocked = self
                        .owners
                        .dependents(uid)
                        .is_some_and(|dependents| !dependents.is_empty());
                    if !blocked {
                        finished.push((key.clone(), object.clone()));
                    }
                }
            }
            if work.is_empty() && finished.is_empty() {
                return;
            }
            self.collect(work, finished);
        }
    }

    /// Act on one round of garbage collection's findings.
    fn collect(
        &mut self,
        work: Vec<(Key, Arc<Value>, Propagation)>,
        finished: Vec<(Key, Arc<Value>)>,
    ) {
        for (key, object, propagation) in work {
            self.delete_object(&key, object, propagation);
        }
        for (key, object) in finished {
            let mut next = (*object).clone();
            let remaining: Vec<String> = finalizers(&object)
                .into_iter()
                .filter(|f| *f != FOREGROUND && *f != ORPHAN)
                .map(str::to_string)
                .collect();
            if remaining.is_empty() {
                self.remove(key, Some(object));
            } else {
                next["metadata"]["finalizers"] = json!(remaining);
                self.commit(key, ChangeType::Modified, next, Some(object));
            }
        }
    }

    fn register_crd(&mut self, crd: &mut Value) -> Result<(), ApiError> {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let defined = kinds::from_crd(crd).map_err(|problems| {
            ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                &name,
                problems,
            )
        })?;
        if let Some(first) = defined.first() {
            let (group, plural) = (first.group.clone(), first.plural.clone());
            self.kinds
                .retain(|k| !(k.group == group && k.plural == plural));
        }
        let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
        self.kinds.extend(defined);
        crd["status"] = json!({
            "acceptedNames": names,
            "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array).map(|v| v.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned()).collect::<Vec<_>>()).unwrap_or_default(),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now()},
            ],
        });
        Ok(())
    }

    fn unregister_crd(&mut self, crd: &Value) {
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        self.kinds
            .retain(|k| !(k.custom && k.group == group && k.plural == plural));
        let doomed: Vec<Key> = self
            .objects
            .keys()
            .filter(|k| k.group == group && k.plural == plural)
            .cloned()
            .collect();
        for key in doomed {
            self.remove(key, None);
        }
    }
}

pub fn finalizers(object: &Value) -> Vec<&str> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn owner_uids(object: &Value) -> Vec<&str> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// The object minus metadata and status: what `generation` tracks.
fn spec_of(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    copy
}

fn check_name(kind: &Kind, name: &str) -> Result<(), ApiError> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        return Ok(());
    }
    let message = if name.is_empty() {
        "Required value: name or generateName is required".to_string()
    } else {
        format!(
            "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    };
    Err(ApiError::invalid(
        &kind.group,
        &kind.kind,
        name,
        vec![("metadata.name".into(), message)],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(resource: &str) -> ListScope {
        ListScope {
            group: String::new(),
            version: "v1".into(),
            resource: resource.into(),
            namespace: None,
            labels: String::new(),
            fields: String::new(),
        }
    }

    fn items(name: &str) -> Snapshot {
        let key = Key {
            group: String::new(),
            plural: "configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
        };
        Arc::new(vec![(key, Arc::new(json!({"metadata": {"name": name}})))])
    }

    #[test]
    fn lists_taken_at_one_resource_version_keep_their_own_snapshots() {
        let mut store = Store::new(100);
        let (configmaps, secrets) = (scope("configmaps"), scope("secrets"));
        let rv = store.remember_snapshot(&configmaps, items("a"));
        assert_eq!(store.remember_snapshot(&secrets, items("b")), rv);
        let name = |snapshot: Option<Snapshot>| snapshot.map(|s| s[0].0.name.clone());
        assert_eq!(name(store.snapshot(rv, &configmaps)).as_deref(), Some("a"));
        assert_eq!(name(store.snapshot(rv, &secrets)).as_deref(), Some("b"));
        assert!(store.snapshot(rv, &scope("leases")).is_none());
        // The same list again at the same rv shares the snapshot kept first.
        store.remember_snapshot(&configmaps, items("c"));
        assert_eq!(name(store.snapshot(rv, &configmaps)).as_deref(), Some("a"));

        // Only the newest are kept; a list taken again counts as new.
        for i in 0..SNAPSHOTS_KEPT - 1 {
            store.remember_snapshot(&configmaps, items("a"));
            store.remember_snapshot(&scope(&format!("kind{i}")), items("x"));
        }
        assert!(store.snapshot(rv, &configmaps).is_some());
        assert!(store.snapshot(rv, &secrets).is_none(), "the oldest is gone");
        store.expire_history();
        assert!(store.snapshot(rv, &configmaps).is_none());
    }

    // ----- garbage collection: the owner index against a scan of every object -----

    /// `has_dependents` as it was before the owner index: a scan.
    pub(super) fn has_dependents_by_scan(store: &Store, uid: &str) -> bool {
        !uid.is_empty() && store.objects.values().any(|o| owner_uids(o).contains(&uid))
    }

    /// `orphan_dependents` as it was before the owner index: a scan.
    pub(super) fn orphan_dependents_by_scan(store: &mut Store, uid: &str) {
        let dependents: Vec<(Key, Arc<Value>)> = store
            .objects
            .iter()
            .filter(|(_, o)| owner_uids(o).contains(&uid))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for (key, object) in dependents {
            store.orphan(key, object, uid);
        }
    }

    /// `collect_garbage` as it was before the owner index: every round
    /// scans every object.
    pub(super) fn collect_garbage_by_scan(store: &mut Store) {
        loop {
            let (work, finished) = garbage_by_scan(store);
            if work.is_empty() && finished.is_empty() {
                return;
            }
            store.collect(work, finished);
        }
    }

    type Garbage = (Vec<(Key, Arc<Value>, Propagation)>, Vec<(Key, Arc<Value>)>);

    /// What one round of garbage collection finds, by scanning.
    fn garbage_by_scan(store: &Store) -> Garbage {
        let live: HashSet<String> = store
            .objects
            .values()
            .filter_map(|o| {
                o.pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        let foreground: HashSet<String> = store
            .objects
            .values()
            .filter(|o| finalizers(o).contains(&FOREGROUND))
            .filter_map(|o| {
                o.pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect();
        let mut work: Vec<(Key, Arc<Value>, Propagation)> = Vec::new();
        for (key, object) in &store.objects {
            let owners = owner_uids(object);
            if owners.is_empty() || object.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            if owners.iter().all(|uid| !live.contains(*uid)) {
                work.push((key.clone(), object.clone(), Propagation::Background));
            } else if owners.iter().any(|uid| foreground.contains(*uid)) {
                work.push((key.clone(), object.clone(), Propagation::Foreground));
            }
        }
        let mut finished: Vec<(Key, Arc<Value>)> = Vec::new();
        for (key, object) in &store.objects {
            if !finalizers(object).contains(&FOREGROUND) {
                continue;
            }
            let uid = object
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("");
            let blocked = store.objects.values().any(|dependent| {
                dependent
                    .pointer("/metadata/ownerReferences")
                    .and_then(Value::as_array)
                    .is_some_and(|refs| {
                        refs.iter()
                            .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
                    })
            });
            if !blocked {
                finished.push((key.clone(), object.clone()));
            }
        }
        (work, finished)
    }

    /// One step of a random history of owners, dependents and deletions.
    #[derive(Debug, Clone)]
    enum Op {
        /// A ConfigMap `o<name>` (in `default`, or in `other` when `ns`),
        /// naming owners among `o0`..`o5` of its namespace, with finalizers.
        Create {
            ns: bool,
            name: u8,
            owners: Vec<(u8, Uid)>,
            finalizers: u8,
        },
        Delete {
            ns: bool,
            name: u8,
            propagation: u8,
        },
        SetFinalizers {
            ns: bool,
            name: u8,
            finalizers: u8,
        },
        SetOwners {
            ns: bool,
            name: u8,
            owners: Vec<(u8, Uid)>,
        },
        DeleteNamespace,
        CreateNamespace,
    }

    /// Which uid an owner reference to `o<n>` carries.
    #[derive(Debug, Clone, Copy)]
    enum Uid {
        /// The stored object's (if there is none: the last one it had).
        Current,
        /// The last one it had before the current one (if none: its own).
        Stale,
        /// One no object ever had.
        Never,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        let uid =
            prop_oneof![4 => Just(Uid::Current), 1 => Just(Uid::Stale), 1 => Just(Uid::Never)];
        let owners = proptest::collection::vec((0..6u8, uid), 0..3);
        prop_oneof![
            4 => (any::<bool>(), 0..6u8, owners.clone(), 0..8u8).prop_map(|(ns, name, owners, finalizers)| Op::Create { ns, name, owners, finalizers }),
            3 => (any::<bool>(), 0..6u8, 0..3u8).prop_map(|(ns, name, propagation)| Op::Delete { ns, name, propagation }),
            2 => (any::<bool>(), 0..6u8, 0..8u8).prop_map(|(ns, name, finalizers)| Op::SetFinalizers { ns, name, finalizers }),
            1 => (any::<bool>(), 0..6u8, owners).prop_map(|(ns, name, owners)| Op::SetOwners { ns, name, owners }),
            1 => Just(Op::DeleteNamespace),
            1 => Just(Op::CreateNamespace),
        ]
    }

    /// A store and the uids each name has had, newest last.
    struct World {
        store: Store,
        uids: HashMap<(bool, u8), Vec<String>>,
    }

    impl World {
        fn new(scan_gc: bool) -> Self {
            let mut store = Store::new(100_000);
            store.scan_gc = scan_gc;
            Self {
                store,
                uids: HashMap::new(),
            }
        }

        fn configmaps(&self) -> Kind {
            self.store
                .kind("", "configmaps")
                .cloned()
                .expect("built in")
        }

        fn namespace(ns: bool) -> &'static str {
            if ns { "other" } else { "default" }
        }

        fn references(&self, ns: bool, owners: &[(u8, Uid)]) -> Value {
            let references: Vec<Value> = owners
                .iter()
                .map(|&(owner, which)| {
                    let had = self.uids.get(&(ns, owner)).map(Vec::as_slice).unwrap_or(&[]);
                    let current = self
                        .store
                        .get(&Store::key(&self.configmaps(), World::namespace(ns), &format!("o{owner}")))
                        .and_then(|o| o.pointer("/metadata/uid").and_then(Value::as_str).map(str::to_string));
                    let uid = match which {
                        Uid::Current => current.or_else(|| had.last().cloned()),
                        Uid::Stale => had.iter().rev().nth(1).cloned().or_else(|| had.last().cloned()),
                        Uid::Never => None,
                    }
                    .unwrap_or_else(|| format!("never-{owner}"));
                    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": format!("o{owner}"), "uid": uid})
                })
                .collect();
            json!(references)
        }

        fn finalizers(bits: u8) -> Value {
            let all = ["example.com/hold", FOREGROUND, ORPHAN];
            json!(
                all.iter()
                    .enumerate()
                    .filter(|(i, _)| bits & (1 << i) != 0)
                    .map(|(_, f)| *f)
                    .collect::<Vec<_>>()
            )
        }

        /// Apply one step; whether the store accepted it.
        fn apply(&mut self, op: &Op) -> bool {
            let kind = self.configmaps();
            match op {
                Op::Create {
                    ns,
                    name,
                    owners,
                    finalizers,
                } => {
                    let object = json!({"metadata": {"name": format!("o{name}"),
                        "ownerReferences": self.references(*ns, owners),
                        "finalizers": World::finalizers(*finalizers)}});
                    match self.store.create(&kind, World::namespace(*ns), object) {
                        Ok(created) => {
                            let uid = created["metadata"]["uid"]
                                .as_str()
                                .unwrap_or("")
                                .to_string();
                            self.uids.entry((*ns, *name)).or_default().push(uid);
                            true
                        }
                        Err(_) => false,
                    }
                }
                Op::Delete {
                    ns,
                    name,
                    propagation,
                } => {
                    let propagation = [
                        Propagation::Background,
                        Propagation::Foreground,
                        Propagation::Orphan,
                    ][*propagation as usize % 3];
                    self.store
                        .delete(
                            &kind,
                            World::namespace(*ns),
                            &format!("o{name}"),
                            propagation,
                            None,
                            None,
                        )
                        .is_ok()
                }
                Op::SetFinalizers {
                    ns,
                    name,
                    finalizers,
                } => self.update(*ns, *name, |object| {
                    object["metadata"]["finalizers"] = World::finalizers(*finalizers);
                }),
                Op::SetOwners { ns, name, owners } => {
                    let references = self.references(*ns, owners);
                    self.update(*ns, *name, |object| {
                        object["metadata"]["ownerReferences"] = references.clone();
                    })
                }
                Op::DeleteNamespace => {
                    let namespaces = self
                        .store
                        .kind("", "namespaces")
                        .cloned()
                        .expect("built in");
                    self.store
                        .delete(
                            &namespaces,
                            "",
                            "other",
                            Propagation::Background,
                            None,
                            None,
                        )
                        .is_ok()
                }
                Op::CreateNamespace => {
                    let namespaces = self
                        .store
                        .kind("", "namespaces")
                        .cloned()
                        .expect("built in");
                    self.store
                        .create(&namespaces, "", json!({"metadata": {"name": "other"}}))
                        .is_ok()
                }
            }
        }

        fn update(&mut self, ns: bool, name: u8, change: impl Fn(&mut Value)) -> bool {
            let kind = self.configmaps();
            let namespace = World::namespace(ns);
            let name = format!("o{name}");
            let Some(current) = self.store.get(&Store::key(&kind, namespace, &name)) else {
                return false;
            };
            let mut next = (*current).clone();
            change(&mut next);
            self.store
                .update(&kind, namespace, &name, next, false)
                .is_ok()
        }

        /// The history as a sequence comparable across stores (uids are
        /// random: owners by name).
        fn history(&self) -> Vec<String> {
            self.store
                .history
                .iter()
                .map(|change| {
                    let meta = &change.object["metadata"];
                    let owners: Vec<&str> = meta["ownerReferences"]
                        .as_array()
                        .map(|refs| refs.iter().filter_map(|r| r["name"].as_str()).collect())
                        .unwrap_or_default();
                    format!(
                        "{} {:?} {}/{}/{} owners={owners:?} finalizers={} deleting={}",
                        change.rv,
                        change.change,
                        change.key.plural,
                        change.key.namespace,
                        change.key.name,
                        meta["finalizers"],
                        meta.get("deletionTimestamp").is_some()
                    )
                })
                .collect()
        }

        /// The owner index as rebuilt from the stored objects.
        fn check_index(&self) {
            let mut rebuilt = OwnerIndex::default();
            for (key, object) in &self.store.objects {
                rebuilt.update(key, None, Some(object));
            }
            assert_eq!(self.store.owners.by_uid, rebuilt.by_uid, "uid index");
            assert_eq!(
                self.store.owners.dependents, rebuilt.dependents,
                "dependents index"
            );
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(
            if std::env::var_os("PROPTEST_CASES").is_some() { proptest::prelude::ProptestConfig::default().cases } else { 512 }
        ))]
        /// The same random history on a store collecting garbage through
        /// the owner index and on one scanning every object: the same
        /// changes in the same order, the same answers; the index always
        /// matches the objects, and after every delete no garbage is left
        /// that a scan would find.
        #[test]
        fn the_owner_index_collects_exactly_what_a_scan_collects(ops in proptest::collection::vec(op(), 1..40)) {
            let mut indexed = World::new(false);
            let mut scanned = World::new(true);
            for (step, op) in ops.iter().enumerate() {
                let a = indexed.apply(op);
                let b = scanned.apply(op);
                proptest::prop_assert_eq!(a, b, "answer to step {} {:?}", step, op);
                proptest::prop_assert_eq!(indexed.history(), scanned.history(), "after step {} {:?}", step, op);
                indexed.check_index();
                if a && matches!(op, Op::Delete { .. } | Op::DeleteNamespace) {
                    let (work, finished) = garbage_by_scan(&indexed.store);
                    proptest::prop_assert!(work.is_empty() && finished.is_empty(), "garbage left after step {}", step);
                }
            }
        }
    }
}
