//! Paged lists: the snapshots of lists that `continue` tokens refer to.

use std::sync::Arc;

use serde_json::Value;

use super::{Key, Store};
use crate::paging::ListScope;

/// The items of one list, frozen for `continue` tokens.
pub type Snapshot = Arc<Vec<(Key, Arc<Value>)>>;

/// How many paged lists' snapshots are kept; continuing an older one gets
/// 410 Expired.
const SNAPSHOTS_KEPT: usize = 64;

impl Store {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
