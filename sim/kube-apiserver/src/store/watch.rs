//! What watches see: each committed change, and the history of them that a
//! watch resumes from.

use std::sync::Arc;

use serde_json::Value;

use super::{Key, Store};

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

impl Store {
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
}
