//! The owner index: who owns whom, and which objects garbage collection has
//! to look at again.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::delete::FOREGROUND;
use super::{Key, finalizers};

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
pub(super) struct OwnerIndex {
    /// uid → the stored object with it.
    pub(super) by_uid: HashMap<String, Key>,
    /// uid → the stored objects that name it in `ownerReferences`, whether
    /// an object with that uid exists or not.
    pub(super) dependents: HashMap<String, BTreeSet<Key>>,
    /// Objects garbage collection has not looked at since they, their
    /// owners or their dependents changed.
    pub(super) dirty: BTreeSet<Key>,
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
    pub(super) fn update(&mut self, key: &Key, before: Option<&Value>, after: Option<&Value>) {
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

    pub(super) fn dependents(&self, uid: &str) -> Option<&BTreeSet<Key>> {
        self.dependents.get(uid)
    }
}

pub(super) fn owner_uids(object: &Value) -> Vec<&str> {
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
