//! When an object's next drift check is due, and when the check that first
//! found its Radius resource missing was sent.

use std::time::{Duration, Instant};

use super::{Part, PerObject};

#[derive(Debug, Default)]
pub struct DriftSchedule {
    /// When the next drift check of the object is due.
    due: Option<Instant>,
    /// When the drift check that first found the object's Radius resource
    /// missing was sent, until its status write takes it.
    missing_seen: Option<k8s_openapi::jiff::Timestamp>,
}

impl Part for DriftSchedule {
    fn is_empty(&self) -> bool {
        self.due.is_none() && self.missing_seen.is_none()
    }
}

impl PerObject<DriftSchedule> {
    /// True if the object's drift check is due now. The first time an
    /// object is seen (after a start, or after its state was dropped) its
    /// first check is scheduled at an offset within `every` that its key
    /// gives, so the checks of a fleet spread over the interval instead of
    /// all coming at once.
    pub fn check_due(&self, key: &str, every: Duration) -> bool {
        let now = Instant::now();
        self.with(key, |state| match state.due {
            Some(due) => due <= now,
            None => {
                state.due = Some(now + spread(key, every));
                false
            }
        })
        .unwrap_or(false)
    }

    /// The next drift check of the object is due `after` from now.
    pub fn schedule(&self, key: &str, after: Duration) {
        let due = Instant::now() + after;
        self.with(key, |state| state.due = Some(due));
    }

    /// How long until the object's next drift check, if one is scheduled.
    pub fn check_in(&self, key: &str) -> Option<Duration> {
        let due = self.read(key, |state| state.due).flatten()?;
        Some(due.saturating_duration_since(Instant::now()))
    }

    /// The drift check sent at `at` first found the object's Radius resource
    /// missing: the status write records that time, not its own.
    pub fn missing_seen(&self, key: &str, at: k8s_openapi::jiff::Timestamp) {
        self.with(key, |state| state.missing_seen = Some(at));
    }

    /// When the check recorded by `missing_seen` was sent (once).
    pub fn take_missing_seen(&self, key: &str) -> Option<k8s_openapi::jiff::Timestamp> {
        self.with_existing(key, |state| state.missing_seen.take())
            .flatten()
    }
}

/// An offset within `every`, the same for the same key.
fn spread(key: &str, every: Duration) -> Duration {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    let millis = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(1);
    Duration::from_millis(hasher.finish() % millis)
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;
    use super::*;

    #[test]
    fn drift_checks_are_spread_over_the_interval_then_come_as_scheduled() {
        let memory = ObjectMemory::default();
        let drift = &memory.drift;
        let every = Duration::from_secs(300);
        let offsets: Vec<Duration> = (0..200)
            .map(|n| {
                let key = format!("DeploymentResource:ns/r{n}");
                assert!(
                    !drift.check_due(&key, every),
                    "the first is scheduled, not due"
                );
                drift.check_in(&key).expect("scheduled")
            })
            .collect();
        assert!(offsets.iter().all(|o| *o <= every));
        let early = offsets.iter().filter(|o| **o < every / 2).count();
        assert!(
            (60..=140).contains(&early),
            "spread over the interval: {early} of 200 in the first half"
        );

        drift.schedule("DeploymentResource:ns/r0", Duration::ZERO);
        assert!(drift.check_due("DeploymentResource:ns/r0", every));
        memory.forget("DeploymentResource:ns/r0");
        assert_eq!(drift.check_in("DeploymentResource:ns/r0"), None);
    }
}
