//! Children an object's plan created that the watch has not shown yet
//! (Kubernetes' own controllers call these "expectations"): until it shows
//! them, the object's decisions wait, so a decision never counts its
//! children from a cache that lacks one it just created.

use std::time::{Duration, Instant};

use super::{Part, PerObject};

/// How long a decision waits for the watch to show a child the controller
/// created before it decides without it.
pub const EXPECTATION_TTL: Duration = Duration::from_secs(30);

/// Children created (or being created) whose creation the watch has not
/// shown yet, each with when to stop waiting for it.
#[derive(Debug, Default)]
pub struct Expectations(Vec<(String, Instant)>);

impl Part for Expectations {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl PerObject<Expectations> {
    /// A child named `name` is about to be created for the object: until the
    /// watch shows it (or [`EXPECTATION_TTL`] passes), the object's
    /// decisions wait. Recorded before the create is sent, so a watch event
    /// that beats the create's answer still counts.
    pub fn expect_created(&self, key: &str, name: &str) {
        let until = Instant::now() + EXPECTATION_TTL;
        self.with(key, |state| {
            state.0.retain(|(n, _)| n != name);
            state.0.push((name.to_string(), until));
        });
    }

    /// The watch showed the child `name` of the object `key` (created,
    /// changed or deleted), or its create failed: stop waiting for it.
    /// True if it was awaited.
    pub fn created_seen(&self, key: &str, name: &str) -> bool {
        self.with_existing(key, |state| {
            let before = state.0.len();
            state.0.retain(|(n, _)| n != name);
            state.0.len() < before
        })
        .unwrap_or(false)
    }

    /// Whether the object still waits for the watch to show a child it
    /// created; `in_cache` says whether the cache holds a child of that name
    /// now (one that already existed, for example, brings no new event).
    pub fn awaits_created(&self, key: &str, in_cache: impl Fn(&str) -> bool) -> bool {
        let now = Instant::now();
        self.with_existing(key, |state| {
            state
                .0
                .retain(|(name, until)| *until > now && !in_cache(name));
            !state.0.is_empty()
        })
        .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;

    #[test]
    fn a_created_child_is_awaited_until_the_watch_shows_it() {
        let memory = ObjectMemory::default();
        let expectations = &memory.expectations;
        let none = |_: &str| false;
        expectations.expect_created("t", "t-a");
        expectations.expect_created("t", "t-b");
        expectations.expect_created("t", "t-c");
        assert!(expectations.awaits_created("t", none));
        assert!(expectations.created_seen("t", "t-a"), "t-a was awaited");
        assert!(!expectations.created_seen("t", "t-a"), "and is no longer");
        assert!(
            expectations.awaits_created("t", none),
            "t-b is not seen yet"
        );
        expectations.created_seen("t", "t-b");
        assert!(expectations.awaits_created("t", none), "nor t-c");
        assert!(
            !expectations.awaits_created("t", |name| name == "t-c"),
            "t-c was already in the cache"
        );
        assert!(memory.is_empty());
        assert!(!expectations.awaits_created("other", none));
    }
}
