//! Owner-reference garbage collection: dependents of deleted owners,
//! orphaning, and finishing foreground deletions.

use std::sync::Arc;

use serde_json::{Value, json};

use super::delete::{FOREGROUND, ORPHAN};
use super::owners::owner_uids;
use super::{ChangeType, Key, Propagation, Store, finalizers};

impl Store {
    pub(super) fn has_dependents(&self, uid: &str) -> bool {
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

    pub(super) fn orphan_dependents(&mut self, uid: &str) {
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
    pub(super) fn collect_garbage(&mut self) {
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
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;
    use crate::kinds::Kind;
    use crate::store::owners::OwnerIndex;

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
            match op {
                Op::Create {
                    ns,
                    name,
                    owners,
                    finalizers,
                } => self.create(*ns, *name, owners, *finalizers),
                Op::Delete {
                    ns,
                    name,
                    propagation,
                } => self.delete(*ns, *name, *propagation),
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
                    let namespaces = self.namespaces();
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
                    let namespaces = self.namespaces();
                    self.store
                        .create(&namespaces, "", json!({"metadata": {"name": "other"}}))
                        .is_ok()
                }
            }
        }

        fn namespaces(&self) -> Kind {
            self.store
                .kind("", "namespaces")
                .cloned()
                .expect("built in")
        }

        /// [`Op::Create`]: remembers the new object's uid.
        fn create(&mut self, ns: bool, name: u8, owners: &[(u8, Uid)], finalizers: u8) -> bool {
            let object = json!({"metadata": {"name": format!("o{name}"),
                "ownerReferences": self.references(ns, owners),
                "finalizers": World::finalizers(finalizers)}});
            let kind = self.configmaps();
            match self.store.create(&kind, World::namespace(ns), object) {
                Ok(created) => {
                    let uid = created["metadata"]["uid"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    self.uids.entry((ns, name)).or_default().push(uid);
                    true
                }
                Err(_) => false,
            }
        }

        /// [`Op::Delete`], with the propagation `propagation` picks.
        fn delete(&mut self, ns: bool, name: u8, propagation: u8) -> bool {
            let propagation = [
                Propagation::Background,
                Propagation::Foreground,
                Propagation::Orphan,
            ][propagation as usize % 3];
            let kind = self.configmaps();
            self.store
                .delete(
                    &kind,
                    World::namespace(ns),
                    &format!("o{name}"),
                    propagation,
                    None,
                    None,
                )
                .is_ok()
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
