//! The versions of an object the controller's own writes left and replaced,
//! so a decision is not taken on a cache that has not yet seen them, and
//! the watch event of a write the controller made starts no reconcile,
//! unless that version also carries a change its decision did not see.

use super::{Part, PerObject};

/// Most versions remembered as replaced by the controller's own writes to
/// one object (a plan writes a few times at most).
const MAX_SUPERSEDED: usize = 8;

#[derive(Debug, Default)]
pub struct WrittenVersions {
    /// Versions of the object the controller's own writes have replaced:
    /// the one a plan was decided on, and each one a write of that plan
    /// left before the next write replaced it.
    superseded: Vec<String>,
    /// Every version the controller's writes left, the last one last,
    /// until a decision sees that one.
    written: Vec<Written>,
}

/// A version one of the controller's writes left.
#[derive(Debug)]
struct Written {
    version: String,
    /// False if the version also carries a change made after the version
    /// decided on (a write without a precondition landed on a user's edit,
    /// deletion or label): the controller cannot call it its own, or the
    /// watch would drop the only event that shows that change.
    own: bool,
}

impl Part for WrittenVersions {
    fn is_empty(&self) -> bool {
        self.superseded.is_empty() && self.written.is_empty()
    }
}

impl PerObject<WrittenVersions> {
    /// The controller wrote the object (a status write, a finalizer): the
    /// plan was decided on version `decided_on`, and the write left version
    /// `written`. Until the cache shows a version none of the controller's
    /// writes has replaced (the last one written, or a later one), decisions
    /// wait for it: a plan that writes twice must not be decided again on
    /// the object between its two writes either.
    ///
    /// `unseen`: the written version carries a change the decision did not
    /// see (`controller::unseen`); it is then awaited like any other, but
    /// never taken for the controller's own.
    pub fn wrote(
        &self,
        key: &str,
        decided_on: Option<&str>,
        written: Option<String>,
        unseen: bool,
    ) {
        let Some(written) = written.filter(|w| Some(w.as_str()) != decided_on) else {
            return;
        };
        self.with(key, |state| {
            let previous = state.written.last().map(|w| w.version.clone());
            for older in decided_on.map(str::to_string).into_iter().chain(previous) {
                if older != written && !state.superseded.contains(&older) {
                    state.superseded.push(older);
                }
            }
            let surplus = state.superseded.len().saturating_sub(MAX_SUPERSEDED);
            state.superseded.drain(..surplus);
            state.written.push(Written {
                version: written,
                own: !unseen,
            });
            let surplus = state.written.len().saturating_sub(MAX_SUPERSEDED);
            state.written.drain(..surplus);
        });
    }

    /// True if `resource_version` is one a write of the controller left
    /// and that brings nothing but that write: the plan that made it
    /// accounted for it (and asked when to look again), so the watch event
    /// showing that version starts no reconcile. A version that also
    /// carries a change the decision did not see is not one: a re-list
    /// that shows only that version is the only news of the change.
    pub fn written_by_controller(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Some(version) = resource_version else {
            return false;
        };
        self.read(key, |state| {
            state.written.iter().any(|w| w.own && w.version == version)
        })
        .unwrap_or(false)
    }

    /// True if `resource_version` is one the controller's own writes have
    /// replaced, i.e. the cache has not yet seen its last write. Seeing any
    /// other version forgets the record.
    pub fn is_stale(&self, key: &str, resource_version: Option<&str>) -> bool {
        self.with_existing(key, |state| {
            let stale = resource_version
                .is_some_and(|version| state.superseded.iter().any(|older| older == version));
            if !stale {
                state.superseded.clear();
                state.written.clear();
            }
            stale
        })
        .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;

    #[test]
    fn a_write_is_awaited_until_a_newer_version_is_seen() {
        let memory = ObjectMemory::default();
        let versions = &memory.versions;
        versions.wrote("a", Some("10"), Some("11".into()), false);
        assert!(versions.is_stale("a", Some("10")));
        assert!(!versions.is_stale("a", Some("11")));
        assert!(!versions.is_stale("a", Some("10")), "forgotten once passed");
        assert!(memory.is_empty());
        versions.wrote("a", Some("12"), Some("12".into()), false);
        assert!(
            memory.is_empty(),
            "a write that changed nothing is not awaited"
        );
    }

    #[test]
    fn a_plan_writing_twice_is_not_decided_again_between_its_writes() {
        let memory = ObjectMemory::default();
        let versions = &memory.versions;
        // Decided on 10: a finalizer (11), a status written ahead (12), the
        // plan's status (13).
        versions.wrote("a", Some("10"), Some("11".into()), false);
        versions.wrote("a", Some("10"), Some("12".into()), false);
        versions.wrote("a", Some("10"), Some("13".into()), false);
        for between in ["10", "11", "12"] {
            assert!(versions.is_stale("a", Some(between)), "{between}");
        }
        assert!(
            !versions.is_stale("a", Some("13")),
            "the last write is seen"
        );
        assert!(memory.is_empty());
        // Someone else's later write also ends the wait.
        versions.wrote("a", Some("20"), Some("21".into()), false);
        assert!(!versions.is_stale("a", Some("25")));
        assert!(memory.is_empty());
    }

    #[test]
    fn the_versions_a_plan_wrote_are_known_as_its_own_until_its_last_is_seen() {
        let memory = ObjectMemory::default();
        let versions = &memory.versions;
        // Decided on 10 (a user's version): a finalizer (11), a status
        // written ahead (12), the plan's status (13).
        versions.wrote("a", Some("10"), Some("11".into()), false);
        versions.wrote("a", Some("10"), Some("12".into()), false);
        versions.wrote("a", Some("10"), Some("13".into()), false);
        for own in ["11", "12", "13"] {
            assert!(versions.written_by_controller("a", Some(own)), "{own}");
        }
        assert!(
            !versions.written_by_controller("a", Some("10")),
            "the version decided on is not the controller's"
        );
        assert!(
            !versions.written_by_controller("a", Some("14")),
            "a later one"
        );
        assert!(!versions.written_by_controller("a", None));
        assert!(
            !versions.written_by_controller("b", Some("11")),
            "another object"
        );
        assert!(
            !versions.is_stale("a", Some("13")),
            "the last write is seen"
        );
        assert!(
            !versions.written_by_controller("a", Some("11")),
            "and forgotten"
        );
        assert!(memory.is_empty());
    }

    #[test]
    fn a_written_version_carrying_a_change_not_decided_on_is_not_the_controllers_own() {
        let memory = ObjectMemory::default();
        let versions = &memory.versions;
        // Decided on 10; a user deleted the object (11); the status write,
        // sent without a precondition, landed on it (12).
        versions.wrote("a", Some("10"), Some("12".into()), true);
        assert!(
            !versions.written_by_controller("a", Some("12")),
            "the deletion it carries must wake the object"
        );
        assert!(versions.is_stale("a", Some("10")), "still awaited");
        // A later write of the same plan still replaces it.
        versions.wrote("a", Some("10"), Some("13".into()), false);
        assert!(versions.is_stale("a", Some("12")));
        assert!(versions.written_by_controller("a", Some("13")));
    }
}
