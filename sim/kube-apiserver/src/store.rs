//! The object store: every object as JSON, one global resourceVersion, the
//! history of changes that watches replay, and the rules the real server
//! applies on write (optimistic concurrency, generation, status subresource,
//! finalizers, owner-reference garbage collection, CRD registration).

use std::collections::{BTreeMap, HashSet, VecDeque};
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
    pub events: broadcast::Sender<Arc<Change>>,
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
            events,
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
        match change {
            ChangeType::Deleted => {
                self.objects.remove(&key);
            }
            _ => {
                self.objects.insert(key.clone(), object.clone());
            }
        }
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
        !uid.is_empty() && self.objects.values().any(|o| owner_uids(o).contains(&uid))
    }

    fn orphan_dependents(&mut self, uid: &str) {
        let dependents: Vec<(Key, Arc<Value>)> = self
            .objects
            .iter()
            .filter(|(_, o)| owner_uids(o).contains(&uid))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        for (key, object) in dependents {
            let mut next = (*object).clone();
            if let Some(references) = next["metadata"]["ownerReferences"].as_array_mut() {
                references.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
            }
            self.commit(key, ChangeType::Modified, next, Some(object));
        }
    }

    /// Owner-reference garbage collection, run after every delete: remove
    /// dependents whose owners are all gone, and finish foreground deletions
    /// whose blocking dependents are gone. Repeats until nothing changes.
    fn collect_garbage(&mut self) {
        loop {
            let live: HashSet<String> = self
                .objects
                .values()
                .filter_map(|o| {
                    o.pointer("/metadata/uid")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .collect();
            let foreground: HashSet<String> = self
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
            for (key, object) in &self.objects {
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
            // Foreground owners whose blocking dependents are all gone.
            let mut finished: Vec<(Key, Arc<Value>)> = Vec::new();
            for (key, object) in &self.objects {
                if !finalizers(object).contains(&FOREGROUND) {
                    continue;
                }
                let uid = object
                    .pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let blocked = self.objects.values().any(|dependent| {
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
            if work.is_empty() && finished.is_empty() {
                return;
            }
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
}
