//! What the controller remembers about each object between reconciles, in
//! memory and bounded. Each stage of the reconcile keeps its own typed part,
//! in a map of its own ([`PerObject`]):
//!
//! | part | file | kept by |
//! | --- | --- | --- |
//! | consecutive errors, pacing of Radius mutations | `backoff.rs` | the driver |
//! | versions the controller's own writes left | `versions.rs` | `writes.rs`, the driver, the watches |
//! | children created but not yet shown by the watch | `expectations.rs` | `execute.rs`, the watches |
//! | drift-check schedule, when a resource was found missing | `drift.rs` | `drift.rs` of the controller |
//! | the inputs of a decision that left nothing to do | `decisions.rs` | the driver |
//! | a deployment's operation, by the record written before it | `decisions.rs` | `execute.rs`, `observe.rs` |
//! | a template deletion's counts not written in its annotation | `tally.rs` | `execute.rs`, `observe.rs` |
//! | when a template last woke a child it waits on | `nudged.rs` | `nudge.rs` |
//!
//! An object's state in a part goes when it is empty, when it has not been
//! touched for [`IDLE_TTL`], when the part holds more than its cap (the
//! least recently touched go first), or when the object is deleted
//! ([`ObjectMemory::forget`]). Losing any of it is safe: a backoff starts
//! again from its first step, a decision waits less or decides once more,
//! a template's final `Deleted` event counts fewer resources deleted.

mod backoff;
mod decisions;
mod drift;
mod expectations;
mod nudged;
mod tally;
mod versions;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use backoff::{ErrorBackoff, MAX_ERROR_BACKOFF, MIN_MUTATION_RETRY, Pacing};
pub use decisions::{Settled, StartedOperation};
pub use drift::DriftSchedule;
pub use expectations::{EXPECTATION_TTL, Expectations};
pub use nudged::Nudged;
pub use tally::{UnwrittenTally, add_tallies};
pub use versions::WrittenVersions;

/// State untouched for this long is forgotten.
pub const IDLE_TTL: Duration = Duration::from_secs(15 * 60);
/// Default cap on the number of objects each part remembers.
pub const DEFAULT_CAP: usize = 100_000;

/// One part of what is remembered per object.
pub trait Part: Default {
    /// True if there is nothing to remember (the object's state goes).
    fn is_empty(&self) -> bool;
}

/// A bounded map of one part's state, by object key.
#[derive(Debug)]
pub struct PerObject<T> {
    entries: Mutex<HashMap<String, (Instant, T)>>,
    cap: usize,
}

impl<T: Part> PerObject<T> {
    fn with_cap(cap: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        }
    }

    /// Number of objects this part remembers.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Change the object's state, made if absent.
    fn with<R>(&self, key: &str, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut entries = self.entries.lock().ok()?;
        let now = Instant::now();
        if !entries.contains_key(key) && entries.len() >= self.cap {
            prune(&mut entries, now, self.cap);
        }
        let (touched, state) = entries
            .entry(key.to_string())
            .or_insert_with(|| (now, T::default()));
        *touched = now;
        let result = f(state);
        if state.is_empty() {
            entries.remove(key);
        }
        Some(result)
    }

    /// Like [`Self::with`] for an object already remembered; nothing (and
    /// no allocation) for one that is not: for the calls every reconcile
    /// makes that only clear or take what may be there.
    fn with_existing<R>(&self, key: &str, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        let mut entries = self.entries.lock().ok()?;
        let (touched, state) = entries.get_mut(key)?;
        *touched = Instant::now();
        let result = f(state);
        if state.is_empty() {
            entries.remove(key);
        }
        Some(result)
    }

    /// Read the object's state, if any, touching nothing.
    fn read<R>(&self, key: &str, f: impl FnOnce(&T) -> R) -> Option<R> {
        let entries = self.entries.lock().ok()?;
        entries.get(key).map(|(_, state)| f(state))
    }

    fn forget(&self, key: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(key);
        }
    }
}

/// Drop idle state; if still at the cap, drop the least recently touched
/// tenth.
fn prune<T>(entries: &mut HashMap<String, (Instant, T)>, now: Instant, cap: usize) {
    entries.retain(|_, (touched, _)| now.duration_since(*touched) < IDLE_TTL);
    if entries.len() >= cap {
        let mut ages: Vec<(Instant, String)> = entries
            .iter()
            .map(|(key, (touched, _))| (*touched, key.clone()))
            .collect();
        ages.sort();
        for (_, key) in ages.into_iter().take((cap / 10).max(1)) {
            entries.remove(&key);
        }
    }
}

/// Everything remembered per object, shared by both controllers: one part
/// per stage that needs it.
#[derive(Debug)]
pub struct ObjectMemory {
    pub errors: PerObject<ErrorBackoff>,
    pub pacing: PerObject<Pacing>,
    pub versions: PerObject<WrittenVersions>,
    pub expectations: PerObject<Expectations>,
    pub drift: PerObject<DriftSchedule>,
    pub settled: PerObject<Settled>,
    pub operations: PerObject<StartedOperation>,
    pub tallies: PerObject<UnwrittenTally>,
    pub nudged: PerObject<Nudged>,
}

impl Default for ObjectMemory {
    fn default() -> Self {
        Self::with_cap(DEFAULT_CAP)
    }
}

impl ObjectMemory {
    /// At most `cap` objects in each part.
    pub fn with_cap(cap: usize) -> Self {
        Self {
            errors: PerObject::with_cap(cap),
            pacing: PerObject::with_cap(cap),
            versions: PerObject::with_cap(cap),
            expectations: PerObject::with_cap(cap),
            drift: PerObject::with_cap(cap),
            settled: PerObject::with_cap(cap),
            operations: PerObject::with_cap(cap),
            tallies: PerObject::with_cap(cap),
            nudged: PerObject::with_cap(cap),
        }
    }

    /// Number of objects the largest part remembers (what the
    /// `radwasm_remembered_objects` gauge shows).
    pub fn len(&self) -> usize {
        [
            self.errors.len(),
            self.pacing.len(),
            self.versions.len(),
            self.expectations.len(),
            self.drift.len(),
            self.settled.len(),
            self.operations.len(),
            self.tallies.len(),
            self.nudged.len(),
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The object is gone from the API server: nothing about it is needed
    /// any more.
    pub fn forget(&self, key: &str) {
        self.errors.forget(key);
        self.pacing.forget(key);
        self.versions.forget(key);
        self.expectations.forget(key);
        self.drift.forget(key);
        self.settled.forget(key);
        self.operations.forget(key);
        self.tallies.forget(key);
        self.nudged.forget(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_stays_bounded_when_objects_go_away() {
        let memory = ObjectMemory::with_cap(1_000);
        for i in 0..50_000 {
            memory.errors.next_delay(&format!("ns/failing-{i}"));
        }
        assert!(memory.len() <= 1_000, "{}", memory.len());
    }

    #[test]
    fn a_deleted_object_is_forgotten_whatever_was_remembered() {
        let memory = ObjectMemory::default();
        memory.errors.next_delay("a");
        memory.pacing.pace("a", Duration::from_secs(60), 1);
        memory
            .versions
            .wrote("a", Some("7"), Some("8".into()), false);
        memory.pacing.pace("b", Duration::from_secs(60), 1);
        memory.forget("a");
        assert_eq!(memory.len(), 1);
        assert_eq!(memory.errors.next_delay("a").as_secs(), 1, "starts afresh");
    }
}
