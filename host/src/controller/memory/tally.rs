//! What a template's deletion plans did to its `DeploymentResource`s that
//! is not written in its `radwasm.io/deletion-tally` annotation yet.
//!
//! Every template write goes through the API server whole (the ARM template
//! and `managedFields` included) and stays in its watch cache for minutes,
//! so a deletion that deletes everything writes no tally at all: the counts
//! stay here, and the policy is shown them as if they were annotated. A
//! plan that keeps a resource in Radius (`detachResource`) writes the
//! annotation at once, with everything counted before it, and every
//! deletion plan after it keeps the annotation current: what was left in
//! Radius is never known only to this process.

use radwasm_policy_model::annotations::DeletionTally;

use super::{Part, PerObject};

#[derive(Debug, Default)]
pub struct UnwrittenTally(DeletionTally);

impl Part for UnwrittenTally {
    fn is_empty(&self) -> bool {
        self.0 == DeletionTally::default()
    }
}

impl PerObject<UnwrittenTally> {
    /// Count what a plan deleted and detached, not written anywhere.
    pub fn add(&self, key: &str, plan: DeletionTally) {
        self.with(key, |state| state.0 = add_tallies(state.0, plan));
    }

    /// The counts not yet written (zero if none).
    pub fn unwritten(&self, key: &str) -> DeletionTally {
        self.read(key, |state| state.0).unwrap_or_default()
    }

    /// The counts were written in the annotation: they are no longer
    /// this part's.
    pub fn written(&self, key: &str) {
        self.with_existing(key, |state| state.0 = DeletionTally::default());
    }
}

/// Two tallies added (saturating).
pub fn add_tallies(a: DeletionTally, b: DeletionTally) -> DeletionTally {
    DeletionTally {
        deleted: a.deleted.saturating_add(b.deleted),
        kept: a.kept.saturating_add(b.kept),
    }
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;
    use super::*;

    #[test]
    fn counts_add_up_until_written() {
        let memory = ObjectMemory::default();
        let tallies = &memory.tallies;
        tallies.add(
            "t",
            DeletionTally {
                deleted: 2,
                kept: 0,
            },
        );
        tallies.add(
            "t",
            DeletionTally {
                deleted: 1,
                kept: 1,
            },
        );
        assert_eq!(
            tallies.unwritten("t"),
            DeletionTally {
                deleted: 3,
                kept: 1
            }
        );
        tallies.written("t");
        assert_eq!(tallies.unwritten("t"), DeletionTally::default());
        assert!(memory.is_empty(), "nothing left to remember");
    }
}
