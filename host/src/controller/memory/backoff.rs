//! When to look at an object again after a failed reconcile (the error
//! backoff), and when a Radius mutation that failed may be made again for
//! it (pacing).

use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

use super::{Part, PerObject};

/// The error backoff: 1 s doubling to this.
pub const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(60);
/// However soon a policy asks, a Radius mutation that failed is not repeated
/// for the same object sooner than this.
pub const MIN_MUTATION_RETRY: Duration = Duration::from_secs(1);

/// An object's consecutive failed reconciles, as the delays still to come.
#[derive(Debug, Default)]
pub struct ErrorBackoff(Option<ExponentialBackoff>);

impl Part for ErrorBackoff {
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

fn error_backoff() -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .with_max_delay(MAX_ERROR_BACKOFF)
        .without_max_times()
        .build()
}

impl PerObject<ErrorBackoff> {
    /// Backoff for the object's next consecutive error: 1 s doubling to 60 s.
    pub fn next_delay(&self, key: &str) -> Duration {
        self.with(key, |state| {
            state
                .0
                .get_or_insert_with(error_backoff)
                .next()
                .unwrap_or(MAX_ERROR_BACKOFF)
        })
        .unwrap_or(MAX_ERROR_BACKOFF)
    }

    /// A reconcile finished without error: the next error starts again at
    /// the first step.
    pub fn succeeded(&self, key: &str) {
        self.with_existing(key, |state| state.0 = None);
    }
}

/// No Radius mutation for the object before `until`, unless its
/// fingerprint (what a user changes) moves.
#[derive(Debug, Default)]
pub struct Pacing(Option<(Instant, u64)>);

impl Part for Pacing {
    fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

impl PerObject<Pacing> {
    /// A Radius mutation failed (or its operation did): none is made again
    /// for this object before `delay` (at least [`MIN_MUTATION_RETRY`]) has
    /// passed, unless its `fingerprint` (what a user changes) moves.
    pub fn pace(&self, key: &str, delay: Duration, fingerprint: u64) {
        let until = Instant::now() + delay.max(MIN_MUTATION_RETRY);
        self.with(key, |state| state.0 = Some((until, fingerprint)));
    }

    /// How long a Radius mutation for this object must still wait.
    pub fn mutation_wait(&self, key: &str, fingerprint: u64) -> Option<Duration> {
        self.with_existing(key, |state| {
            let (until, paced_for) = state.0?;
            let now = Instant::now();
            if paced_for != fingerprint || until <= now {
                state.0 = None;
                return None;
            }
            Some(until - now)
        })
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;
    use super::*;

    #[test]
    fn error_backoff_doubles_to_a_cap_and_resets_on_success() {
        let memory = ObjectMemory::default();
        let delays: Vec<u64> = (0..9)
            .map(|_| memory.errors.next_delay("a").as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        memory.errors.succeeded("a");
        assert_eq!(memory.errors.next_delay("a").as_secs(), 1);
        memory.errors.succeeded("a");
        assert!(memory.is_empty(), "a healthy object is not remembered");
    }

    #[test]
    fn pacing_holds_until_its_time_or_a_user_change() {
        let memory = ObjectMemory::default();
        memory.pacing.pace("a", Duration::from_secs(10), 1);
        let wait = memory.pacing.mutation_wait("a", 1).expect("paced");
        assert!(wait > Duration::from_secs(9), "{wait:?}");
        assert_eq!(memory.pacing.mutation_wait("a", 2), None, "the spec moved");
        assert_eq!(
            memory.pacing.mutation_wait("a", 1),
            None,
            "and the pacing is gone"
        );
        assert!(memory.is_empty());
        memory.pacing.pace("b", Duration::ZERO, 1);
        assert!(
            memory.pacing.mutation_wait("b", 1).expect("floor") > Duration::from_millis(500),
            "at least the floor"
        );
    }
}
