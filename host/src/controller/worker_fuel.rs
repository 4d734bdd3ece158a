//! How much fuel a decision may burn on the async worker that reconciles,
//! learned per policy (by digest) from the fuel its decisions use.
//!
//! A decision starts on the worker with a slice of its budget; one that
//! runs out is decided again from the start on the blocking pool with the
//! whole budget (`driver::decide`). A fixed slice of one million fuel is
//! ten times what the default policy needs, but an interpreted guest needs
//! more for every decision (a JavaScript guest about 1.4 million to add a
//! finalizer), so each of its decisions would run twice. Instead the slice
//! is the largest fuel a policy's recent decisions used, times
//! [`HEADROOM`], never below [`WORKER_FUEL_FLOOR`] nor above the policy's
//! own budget. A policy whose slice would pass [`WORKER_FUEL_CEILING`] is
//! sent straight to the blocking pool, without a first attempt: the worker
//! is never held longer than the ceiling's worth of guest code. So in steady
//! state no decision runs twice: it fits its slice, or it never starts on
//! the worker.
//!
//! "Recent" is a window of two buckets of [`WINDOW`] decisions: one heavy
//! decision keeps a policy's slice up for at least that many decisions and
//! is forgotten after twice as many.

use std::collections::HashMap;
use std::sync::Mutex;

/// The smallest slice: about 0.15 ms of guest code, over ten times what a
/// decision of the default policy uses.
pub const WORKER_FUEL_FLOOR: u64 = 1_000_000;
/// The largest slice: about 1.5 ms of guest code. A policy that needs more
/// decides on the blocking pool.
pub const WORKER_FUEL_CEILING: u64 = 10_000_000;
/// The slice is this many times the most a recent decision used, so the
/// variation between observations of one policy stays within it.
pub const HEADROOM: u64 = 2;
/// Decisions per bucket of the running maximum.
pub const WINDOW: u32 = 128;
/// Policies (digests) remembered; the least recently used is forgotten
/// (each swap brings a new digest).
pub const POLICIES_KEPT: usize = 256;

/// Where a decision starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// On the worker, with at most this much fuel.
    Worker(u64),
    /// On the blocking pool, with the whole budget.
    Blocking,
}

/// Where a decision ran, for the caller's metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// On the worker, within its slice.
    Worker,
    /// On the worker until its slice ran out, then again on the blocking pool.
    Rerun,
    /// On the blocking pool only.
    Blocking,
}

/// What has been learned of each policy's fuel.
#[derive(Default)]
pub struct WorkerFuel {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    policies: HashMap<String, Learned>,
    /// Counts lookups, to find the least recently used policy.
    clock: u64,
}

#[derive(Default, Clone, Copy)]
struct Learned {
    current: u64,
    previous: u64,
    in_current: u32,
    used_at: u64,
}

impl Learned {
    fn most(&self) -> u64 {
        self.current.max(self.previous)
    }
}

impl WorkerFuel {
    /// Where a decision of the policy with this digest and fuel budget
    /// starts.
    pub fn placement(&self, digest: &str, budget: u64) -> Placement {
        let most = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.clock += 1;
            let now = state.clock;
            match state.policies.get_mut(digest) {
                Some(learned) => {
                    learned.used_at = now;
                    learned.most()
                }
                None => 0,
            }
        };
        let slice = most.saturating_mul(HEADROOM).max(WORKER_FUEL_FLOOR);
        if slice > WORKER_FUEL_CEILING {
            Placement::Blocking
        } else {
            Placement::Worker(slice.min(budget))
        }
    }

    /// A decision of the policy with this digest used `fuel` (or ran out
    /// of a budget of `fuel`).
    pub fn learn(&self, digest: &str, fuel: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.clock += 1;
        let now = state.clock;
        if !state.policies.contains_key(digest) && state.policies.len() >= POLICIES_KEPT {
            let oldest = state
                .policies
                .iter()
                .min_by_key(|(_, learned)| learned.used_at)
                .map(|(digest, _)| digest.clone());
            if let Some(oldest) = oldest {
                state.policies.remove(&oldest);
            }
        }
        let learned = state.policies.entry(digest.to_string()).or_default();
        learned.used_at = now;
        if learned.in_current >= WINDOW {
            learned.previous = learned.current;
            learned.current = 0;
            learned.in_current = 0;
        }
        learned.current = learned.current.max(fuel);
        learned.in_current += 1;
    }

    /// Policies remembered.
    pub fn len(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .policies
            .len()
    }

    /// Whether no policy is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: u64 = 50_000_000;

    #[test]
    fn an_unknown_or_light_policy_gets_the_floor() {
        let fuel = WorkerFuel::default();
        assert_eq!(
            fuel.placement("a", BUDGET),
            Placement::Worker(WORKER_FUEL_FLOOR)
        );
        fuel.learn("a", 30_000);
        assert_eq!(
            fuel.placement("a", BUDGET),
            Placement::Worker(WORKER_FUEL_FLOOR)
        );
    }

    #[test]
    fn the_slice_follows_the_heaviest_recent_decision_with_headroom() {
        let fuel = WorkerFuel::default();
        fuel.learn("js", 1_400_000);
        fuel.learn("js", 1_200_000);
        assert_eq!(fuel.placement("js", BUDGET), Placement::Worker(2_800_000));
        // Never more than the policy's own budget.
        assert_eq!(
            fuel.placement("js", 2_000_000),
            Placement::Worker(2_000_000)
        );
        // Another policy is another matter.
        assert_eq!(
            fuel.placement("rust", BUDGET),
            Placement::Worker(WORKER_FUEL_FLOOR)
        );
    }

    #[test]
    fn past_the_ceiling_a_policy_goes_straight_to_the_blocking_pool() {
        let fuel = WorkerFuel::default();
        fuel.learn("heavy", WORKER_FUEL_CEILING / HEADROOM);
        assert_eq!(
            fuel.placement("heavy", BUDGET),
            Placement::Worker(WORKER_FUEL_CEILING)
        );
        fuel.learn("heavy", WORKER_FUEL_CEILING / HEADROOM + 1);
        assert_eq!(fuel.placement("heavy", BUDGET), Placement::Blocking);
    }

    #[test]
    fn a_spike_is_forgotten_after_two_windows() {
        let fuel = WorkerFuel::default();
        fuel.learn("p", 4_000_000);
        for _ in 0..WINDOW - 1 {
            fuel.learn("p", 100_000);
        }
        // Still in the current bucket, then in the previous one.
        assert_eq!(fuel.placement("p", BUDGET), Placement::Worker(8_000_000));
        for _ in 0..WINDOW {
            fuel.learn("p", 100_000);
        }
        assert_eq!(fuel.placement("p", BUDGET), Placement::Worker(8_000_000));
        fuel.learn("p", 100_000);
        assert_eq!(
            fuel.placement("p", BUDGET),
            Placement::Worker(WORKER_FUEL_FLOOR)
        );
    }

    #[test]
    fn the_least_recently_used_policy_is_forgotten_past_the_bound() {
        let fuel = WorkerFuel::default();
        fuel.learn("first", 3_000_000);
        for i in 1..POLICIES_KEPT {
            fuel.learn(&format!("p{i}"), 3_000_000);
        }
        // Used again: now the most recent.
        let _ = fuel.placement("first", BUDGET);
        fuel.learn("one more", 3_000_000);
        assert_eq!(fuel.len(), POLICIES_KEPT);
        assert_eq!(
            fuel.placement("first", BUDGET),
            Placement::Worker(6_000_000)
        );
        assert_eq!(
            fuel.placement("p1", BUDGET),
            Placement::Worker(WORKER_FUEL_FLOOR),
            "p1 was the least recently used"
        );
    }
}
