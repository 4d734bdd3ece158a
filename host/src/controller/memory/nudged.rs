//! When a template last woke a child it waits on (`controller/nudge.rs`),
//! so a child is woken so at most once an interval.

use std::time::{Duration, Instant};

use super::{Part, PerObject};

#[derive(Debug, Default)]
pub struct Nudged {
    at: Option<Instant>,
}

impl Part for Nudged {
    fn is_empty(&self) -> bool {
        self.at.is_none()
    }
}

impl PerObject<Nudged> {
    /// True if the object was not woken so within `every`; it is then
    /// remembered as woken now.
    pub fn due(&self, key: &str, every: Duration) -> bool {
        let now = Instant::now();
        self.with(key, |state| {
            let due = state.at.is_none_or(|at| now.duration_since(at) >= every);
            if due {
                state.at = Some(now);
            }
            due
        })
        .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::ObjectMemory;
    use std::time::Duration;

    #[test]
    fn a_child_is_woken_at_most_once_an_interval() {
        let memory = ObjectMemory::default();
        assert!(memory.nudged.due("a", Duration::from_secs(30)));
        assert!(!memory.nudged.due("a", Duration::from_secs(30)));
        assert!(memory.nudged.due("b", Duration::from_secs(30)));
        assert!(memory.nudged.due("a", Duration::ZERO));
    }
}
