//! What the controller remembers about each object between reconciles, in
//! memory and bounded: consecutive errors (for the error backoff), when the
//! next Radius mutation may be made after a failed one (pacing), and the
//! resourceVersion a status write was based on (so the next decision is not
//! taken on a cache that has not yet seen that write), and when the next
//! drift check of a `DeploymentResource` is due.
//!
//! Entries are dropped when they have not been touched for [`IDLE_TTL`], and
//! the oldest are dropped when more than the cap are held, so objects that are
//! deleted (or stop failing) do not keep memory for ever. Losing an entry is
//! safe: it only makes the next backoff start again from its first step.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::radius::ResumeToken;

/// Entries untouched for this long are forgotten.
pub const IDLE_TTL: Duration = Duration::from_secs(15 * 60);
/// Default cap on the number of objects remembered.
pub const DEFAULT_CAP: usize = 100_000;
/// The error backoff: 1 s doubling to this.
pub const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(60);
/// How long a decision waits for the watch to show a child the controller
/// created before it decides without it.
pub const EXPECTATION_TTL: Duration = Duration::from_secs(30);
/// However soon a policy asks, a Radius mutation that failed is not repeated
/// for the same object sooner than this.
pub const MIN_MUTATION_RETRY: Duration = Duration::from_secs(1);
/// Most versions remembered as replaced by the controller's own writes to
/// one object (a plan writes a few times at most).
const MAX_SUPERSEDED: usize = 8;

/// What is remembered of one object.
#[derive(Debug, Clone)]
struct Entry {
    touched: Instant,
    errors: u32,
    /// No Radius mutation before this, unless the object's fingerprint moves.
    paced: Option<(Instant, u64)>,
    /// Versions of the object the controller's own writes have replaced:
    /// the one a plan was decided on, and each one a write of that plan
    /// left before the next write replaced it.
    superseded: Vec<String>,
    /// Every version the controller's writes left, the last one last,
    /// until a decision sees that one.
    written: Vec<String>,
    /// Children created (or being created) whose creation the watch has not
    /// shown yet, each with when to stop waiting for it.
    expected: Vec<(String, Instant)>,
    /// When the next drift check of the object is due.
    drift_due: Option<Instant>,
    /// When the drift check that first found the object's Radius resource
    /// missing was sent, until its status write takes it.
    missing_seen: Option<k8s_openapi::jiff::Timestamp>,
    /// The inputs of the last decision, when it left nothing to do.
    settled_on: Option<u64>,
    /// The operation a deployment the controller sent started, as Radius
    /// answered, by the record written in status before it was sent.
    operation: Option<(String, ResumeToken)>,
}

impl Entry {
    fn new(now: Instant) -> Self {
        Self {
            touched: now,
            errors: 0,
            paced: None,
            superseded: Vec::new(),
            written: Vec::new(),
            expected: Vec::new(),
            drift_due: None,
            missing_seen: None,
            settled_on: None,
            operation: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.errors == 0
            && self.paced.is_none()
            && self.superseded.is_empty()
            && self.written.is_empty()
            && self.expected.is_empty()
            && self.drift_due.is_none()
            && self.missing_seen.is_none()
            && self.settled_on.is_none()
            && self.operation.is_none()
    }
}

/// Bounded per-object memory, shared by both controllers.
#[derive(Debug)]
pub struct ObjectMemory {
    entries: Mutex<HashMap<String, Entry>>,
    cap: usize,
}

impl Default for ObjectMemory {
    fn default() -> Self {
        Self::with_cap(DEFAULT_CAP)
    }
}

impl ObjectMemory {
    pub fn with_cap(cap: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            cap: cap.max(1),
        }
    }

    /// Number of objects remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn with<R>(&self, key: &str, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut entries = self.entries.lock().ok()?;
        let now = Instant::now();
        if !entries.contains_key(key) && entries.len() >= self.cap {
            prune(&mut entries, now, self.cap);
        }
        let entry = entries
            .entry(key.to_string())
            .or_insert_with(|| Entry::new(now));
        entry.touched = now;
        let result = f(entry);
        if entry.is_empty() {
            entries.remove(key);
        }
        Some(result)
    }

    /// Like [`Self::with`] for an object already remembered; nothing (and
    /// no allocation) for one that is not: for the calls every reconcile
    /// makes that only clear or take what may be there.
    fn with_existing<R>(&self, key: &str, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut entries = self.entries.lock().ok()?;
        let entry = entries.get_mut(key)?;
        entry.touched = Instant::now();
        let result = f(entry);
        if entry.is_empty() {
            entries.remove(key);
        }
        Some(result)
    }

    /// Backoff for the object's next consecutive error: 1 s doubling to 60 s.
    pub fn error_backoff(&self, key: &str) -> Duration {
        self.with(key, |entry| {
            entry.errors = entry.errors.saturating_add(1);
            Duration::from_secs(1u64 << (entry.errors - 1).min(6)).min(MAX_ERROR_BACKOFF)
        })
        .unwrap_or(MAX_ERROR_BACKOFF)
    }

    /// True if the object's drift check is due now. The first time an
    /// object is seen (after a start, or after its entry was dropped) its
    /// first check is scheduled at an offset within `every` that its key
    /// gives, so the checks of a fleet spread over the interval instead of
    /// all coming at once.
    pub fn drift_check_due(&self, key: &str, every: Duration) -> bool {
        let now = Instant::now();
        self.with(key, |entry| match entry.drift_due {
            Some(due) => due <= now,
            None => {
                entry.drift_due = Some(now + spread(key, every));
                false
            }
        })
        .unwrap_or(false)
    }

    /// The next drift check of the object is due `after` from now.
    pub fn schedule_drift_check(&self, key: &str, after: Duration) {
        let due = Instant::now() + after;
        self.with(key, |entry| entry.drift_due = Some(due));
    }

    /// The drift check sent at `at` first found the object's Radius resource
    /// missing: the status write records that time, not its own.
    pub fn missing_seen(&self, key: &str, at: k8s_openapi::jiff::Timestamp) {
        self.with(key, |entry| entry.missing_seen = Some(at));
    }

    /// When the check recorded by [`ObjectMemory::missing_seen`] was sent
    /// (once).
    pub fn take_missing_seen(&self, key: &str) -> Option<k8s_openapi::jiff::Timestamp> {
        self.with_existing(key, |entry| entry.missing_seen.take())
            .flatten()
    }

    /// The last decision for the object was taken on `inputs` and left
    /// nothing to do (`None`: forget it).
    pub fn settled(&self, key: &str, inputs: Option<u64>) {
        match inputs {
            Some(_) => self.with(key, |entry| entry.settled_on = inputs),
            None => self.with_existing(key, |entry| entry.settled_on = None),
        };
    }

    /// True if the last decision was taken on these same `inputs` and left
    /// nothing to do.
    pub fn is_settled_on(&self, key: &str, inputs: u64) -> bool {
        let Ok(entries) = self.entries.lock() else {
            return false;
        };
        entries
            .get(key)
            .is_some_and(|entry| entry.settled_on == Some(inputs))
    }

    /// How long until the object's next drift check, if one is scheduled.
    pub fn drift_check_in(&self, key: &str) -> Option<Duration> {
        let entries = self.entries.lock().ok()?;
        let due = entries.get(key)?.drift_due?;
        Some(due.saturating_duration_since(Instant::now()))
    }

    /// A deployment sent for the object started the operation `token`;
    /// status records it (written before it was sent) as `recorded`, which
    /// follows the deployment by its id. While that record stands, the
    /// operation's own URLs are polled instead. Losing this (a restart)
    /// only means polling the deployment itself.
    pub fn started_operation(&self, key: &str, recorded: String, token: ResumeToken) {
        self.with(key, |entry| entry.operation = Some((recorded, token)));
    }

    /// The operation to poll for the record `recorded` in the object's
    /// status, if one was remembered for that record; one remembered for
    /// another record (the operation ended, another began) is forgotten.
    /// `None` for no record in status.
    pub fn operation_for(&self, key: &str, recorded: Option<&str>) -> Option<ResumeToken> {
        self.with_existing(key, |entry| {
            match (&entry.operation, recorded) {
                (Some((remembered, token)), Some(recorded)) if remembered == recorded => {
                    return Some(token.clone());
                }
                (None, _) => return None,
                _ => {}
            }
            entry.operation = None;
            None
        })
        .flatten()
    }

    /// The object is gone from the API server: nothing about it is needed
    /// any more.
    pub fn forget(&self, key: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(key);
        }
    }

    /// A child named `name` is about to be created for the object: until the
    /// watch shows it (or [`EXPECTATION_TTL`] passes), the object's
    /// decisions wait, so that a decision never counts its children from a
    /// cache that lacks one it just created (Kubernetes' own controllers
    /// call these "expectations"). Recorded before the create is sent, so a
    /// watch event that beats the create's answer still counts.
    pub fn expect_created(&self, key: &str, name: &str) {
        let until = Instant::now() + EXPECTATION_TTL;
        self.with(key, |entry| {
            entry.expected.retain(|(n, _)| n != name);
            entry.expected.push((name.to_string(), until));
        });
    }

    /// The watch showed the child `name` of the object `key` (created,
    /// changed or deleted), or its create failed: stop waiting for it.
    /// True if it was awaited.
    pub fn created_seen(&self, key: &str, name: &str) -> bool {
        self.with_existing(key, |entry| {
            let before = entry.expected.len();
            entry.expected.retain(|(n, _)| n != name);
            entry.expected.len() < before
        })
        .unwrap_or(false)
    }

    /// Whether the object still waits for the watch to show a child it
    /// created; `in_cache` says whether the cache holds a child of that name
    /// now (one that already existed, for example, brings no new event).
    pub fn awaits_created(&self, key: &str, in_cache: impl Fn(&str) -> bool) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let Some(entry) = entries.get_mut(key) else {
            return false;
        };
        let now = Instant::now();
        entry
            .expected
            .retain(|(name, until)| *until > now && !in_cache(name));
        let waiting = !entry.expected.is_empty();
        if entry.is_empty() {
            entries.remove(key);
        }
        waiting
    }

    /// A reconcile finished without error.
    pub fn succeeded(&self, key: &str) {
        self.with_existing(key, |entry| entry.errors = 0);
    }

    /// A Radius mutation failed (or its operation did): none is made again
    /// for this object before `delay` (at least [`MIN_MUTATION_RETRY`]) has
    /// passed, unless its `fingerprint` (what a user changes) moves.
    pub fn pace(&self, key: &str, delay: Duration, fingerprint: u64) {
        let until = Instant::now() + delay.max(MIN_MUTATION_RETRY);
        self.with(key, |entry| entry.paced = Some((until, fingerprint)));
    }

    /// How long a Radius mutation for this object must still wait.
    pub fn mutation_wait(&self, key: &str, fingerprint: u64) -> Option<Duration> {
        let mut entries = self.entries.lock().ok()?;
        let entry = entries.get_mut(key)?;
        let (until, paced_for) = entry.paced?;
        let now = Instant::now();
        if paced_for != fingerprint || until <= now {
            entry.paced = None;
            if entry.is_empty() {
                entries.remove(key);
            }
            return None;
        }
        Some(until - now)
    }

    /// The controller wrote the object (a status write, a finalizer): the
    /// plan was decided on version `decided_on`, and the write left version
    /// `written`. Until the cache shows a version none of the controller's
    /// writes has replaced (the last one written, or a later one), decisions
    /// wait for it: a plan that writes twice must not be decided again on
    /// the object between its two writes either.
    pub fn wrote(&self, key: &str, decided_on: Option<&str>, written: Option<String>) {
        let Some(written) = written.filter(|w| Some(w.as_str()) != decided_on) else {
            return;
        };
        self.with(key, |entry| {
            let previous = entry.written.last().cloned();
            for older in decided_on.map(str::to_string).into_iter().chain(previous) {
                if older != written && !entry.superseded.contains(&older) {
                    entry.superseded.push(older);
                }
            }
            let surplus = entry.superseded.len().saturating_sub(MAX_SUPERSEDED);
            entry.superseded.drain(..surplus);
            entry.written.push(written);
            let surplus = entry.written.len().saturating_sub(MAX_SUPERSEDED);
            entry.written.drain(..surplus);
        });
    }

    /// True if `resource_version` is one a write of the controller left. A
    /// write is made with the version its plan was decided on as its
    /// precondition, so the watch event showing that version brings nothing
    /// but the write itself, which the plan already accounted for (and it
    /// asked when to look again): such an event starts no reconcile.
    pub fn written_by_controller(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Some(version) = resource_version else {
            return false;
        };
        let Ok(entries) = self.entries.lock() else {
            return false;
        };
        entries
            .get(key)
            .is_some_and(|entry| entry.written.iter().any(|written| written == version))
    }

    /// True if `resource_version` is one the controller's own writes have
    /// replaced, i.e. the cache has not yet seen its last write. Seeing any
    /// other version forgets the record.
    pub fn is_stale(&self, key: &str, resource_version: Option<&str>) -> bool {
        let Ok(mut entries) = self.entries.lock() else {
            return false;
        };
        let Some(entry) = entries.get_mut(key) else {
            return false;
        };
        if entry.superseded.is_empty() && entry.written.is_empty() {
            return false;
        }
        let stale = resource_version
            .is_some_and(|version| entry.superseded.iter().any(|older| older == version));
        if !stale {
            entry.superseded.clear();
            entry.written.clear();
            if entry.is_empty() {
                entries.remove(key);
            }
        }
        stale
    }
}

/// Drop idle entries; if still at the cap, drop the least recently touched
/// tenth.
/// An offset within `every`, the same for the same key.
fn spread(key: &str, every: Duration) -> Duration {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    let millis = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(1);
    Duration::from_millis(hasher.finish() % millis)
}

fn prune(entries: &mut HashMap<String, Entry>, now: Instant, cap: usize) {
    entries.retain(|_, entry| now.duration_since(entry.touched) < IDLE_TTL);
    if entries.len() >= cap {
        let mut ages: Vec<(Instant, String)> = entries
            .iter()
            .map(|(key, entry)| (entry.touched, key.clone()))
            .collect();
        ages.sort();
        for (_, key) in ages.into_iter().take((cap / 10).max(1)) {
            entries.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_backoff_doubles_to_a_cap_and_resets_on_success() {
        let memory = ObjectMemory::default();
        let delays: Vec<u64> = (0..9)
            .map(|_| memory.error_backoff("a").as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        memory.succeeded("a");
        assert_eq!(memory.error_backoff("a").as_secs(), 1);
        memory.succeeded("a");
        assert!(memory.is_empty(), "a healthy object is not remembered");
    }

    #[test]
    fn pacing_holds_until_its_time_or_a_user_change() {
        let memory = ObjectMemory::default();
        memory.pace("a", Duration::from_secs(10), 1);
        let wait = memory.mutation_wait("a", 1).expect("paced");
        assert!(wait > Duration::from_secs(9), "{wait:?}");
        assert_eq!(memory.mutation_wait("a", 2), None, "the spec moved");
        assert_eq!(memory.mutation_wait("a", 1), None, "and the pacing is gone");
        memory.pace("b", Duration::ZERO, 1);
        assert!(
            memory.mutation_wait("b", 1).expect("floor") > Duration::from_millis(500),
            "at least the floor"
        );
    }

    #[test]
    fn a_write_is_awaited_until_a_newer_version_is_seen() {
        let memory = ObjectMemory::default();
        memory.wrote("a", Some("10"), Some("11".into()));
        assert!(memory.is_stale("a", Some("10")));
        assert!(!memory.is_stale("a", Some("11")));
        assert!(!memory.is_stale("a", Some("10")), "forgotten once passed");
        assert!(memory.is_empty());
        memory.wrote("a", Some("12"), Some("12".into()));
        assert!(
            memory.is_empty(),
            "a write that changed nothing is not awaited"
        );
    }

    #[test]
    fn a_plan_writing_twice_is_not_decided_again_between_its_writes() {
        let memory = ObjectMemory::default();
        // Decided on 10: a finalizer (11), a status written ahead (12), the
        // plan's status (13).
        memory.wrote("a", Some("10"), Some("11".into()));
        memory.wrote("a", Some("10"), Some("12".into()));
        memory.wrote("a", Some("10"), Some("13".into()));
        for between in ["10", "11", "12"] {
            assert!(memory.is_stale("a", Some(between)), "{between}");
        }
        assert!(!memory.is_stale("a", Some("13")), "the last write is seen");
        assert!(memory.is_empty());
        // Someone else's later write also ends the wait.
        memory.wrote("a", Some("20"), Some("21".into()));
        assert!(!memory.is_stale("a", Some("25")));
        assert!(memory.is_empty());
    }

    #[test]
    fn the_versions_a_plan_wrote_are_known_as_its_own_until_its_last_is_seen() {
        let memory = ObjectMemory::default();
        // Decided on 10 (a user's version): a finalizer (11), a status
        // written ahead (12), the plan's status (13).
        memory.wrote("a", Some("10"), Some("11".into()));
        memory.wrote("a", Some("10"), Some("12".into()));
        memory.wrote("a", Some("10"), Some("13".into()));
        for own in ["11", "12", "13"] {
            assert!(memory.written_by_controller("a", Some(own)), "{own}");
        }
        assert!(
            !memory.written_by_controller("a", Some("10")),
            "the version decided on is not the controller's"
        );
        assert!(
            !memory.written_by_controller("a", Some("14")),
            "a later one"
        );
        assert!(!memory.written_by_controller("a", None));
        assert!(
            !memory.written_by_controller("b", Some("11")),
            "another object"
        );
        assert!(!memory.is_stale("a", Some("13")), "the last write is seen");
        assert!(
            !memory.written_by_controller("a", Some("11")),
            "and forgotten"
        );
        assert!(memory.is_empty());
    }

    #[test]
    fn an_operations_urls_are_polled_only_while_its_record_stands() {
        let memory = ObjectMemory::default();
        let token = |async_operation: Option<&str>| ResumeToken {
            kind: crate::radius::OperationKind::Deployment,
            resource_id:
                "/planes/radius/local/resourceGroups/g/providers/Microsoft.Resources/deployments/d"
                    .into(),
            async_operation: async_operation.map(str::to_string),
            location: None,
            subject: "hash".into(),
            rejected: None,
        };
        let record = token(None).encode();
        let started = token(Some(
            "/planes/radius/local/providers/System.Resources/locations/global/operationStatuses/1",
        ));
        assert_eq!(
            memory.operation_for("t", Some(&record)),
            None,
            "nothing remembered"
        );
        memory.started_operation("t", record.clone(), started.clone());
        assert_eq!(
            memory.operation_for("t", Some(&record)),
            Some(started.clone())
        );
        assert_eq!(
            memory.operation_for("t", Some(&record)),
            Some(started),
            "for as long as the record stands"
        );
        assert_eq!(memory.operation_for("t", None), None, "the operation ended");
        assert!(memory.is_empty(), "and is forgotten");
        memory.started_operation("t", record.clone(), token(Some("/op/2")));
        assert_eq!(memory.operation_for("t", Some("another record")), None);
        assert_eq!(memory.operation_for("t", Some(&record)), None, "forgotten");
    }

    #[test]
    fn memory_stays_bounded_when_objects_go_away() {
        let memory = ObjectMemory::with_cap(1_000);
        for i in 0..50_000 {
            memory.error_backoff(&format!("ns/failing-{i}"));
        }
        assert!(memory.len() <= 1_000, "{}", memory.len());
    }

    #[test]
    fn a_created_child_is_awaited_until_the_watch_shows_it() {
        let memory = ObjectMemory::default();
        let none = |_: &str| false;
        memory.expect_created("t", "t-a");
        memory.expect_created("t", "t-b");
        memory.expect_created("t", "t-c");
        assert!(memory.awaits_created("t", none));
        assert!(memory.created_seen("t", "t-a"), "t-a was awaited");
        assert!(!memory.created_seen("t", "t-a"), "and is no longer");
        assert!(memory.awaits_created("t", none), "t-b is not seen yet");
        memory.created_seen("t", "t-b");
        assert!(memory.awaits_created("t", none), "nor t-c");
        assert!(
            !memory.awaits_created("t", |name| name == "t-c"),
            "t-c was already in the cache"
        );
        assert!(memory.is_empty());
        assert!(!memory.awaits_created("other", none));
    }

    #[test]
    fn a_deleted_object_is_forgotten_whatever_was_remembered() {
        let memory = ObjectMemory::default();
        memory.error_backoff("a");
        memory.pace("a", Duration::from_secs(60), 1);
        memory.wrote("a", Some("7"), Some("8".into()));
        memory.pace("b", Duration::from_secs(60), 1);
        memory.forget("a");
        assert_eq!(memory.len(), 1);
        assert_eq!(memory.error_backoff("a").as_secs(), 1, "starts afresh");
    }

    #[test]
    fn drift_checks_are_spread_over_the_interval_then_come_as_scheduled() {
        let memory = ObjectMemory::default();
        let every = Duration::from_secs(300);
        let offsets: Vec<Duration> = (0..200)
            .map(|n| {
                let key = format!("DeploymentResource:ns/r{n}");
                assert!(
                    !memory.drift_check_due(&key, every),
                    "the first is scheduled, not due"
                );
                memory.drift_check_in(&key).expect("scheduled")
            })
            .collect();
        assert!(offsets.iter().all(|o| *o <= every));
        let early = offsets.iter().filter(|o| **o < every / 2).count();
        assert!(
            (60..=140).contains(&early),
            "spread over the interval: {early} of 200 in the first half"
        );

        memory.schedule_drift_check("DeploymentResource:ns/r0", Duration::ZERO);
        assert!(memory.drift_check_due("DeploymentResource:ns/r0", every));
        memory.forget("DeploymentResource:ns/r0");
        assert_eq!(memory.drift_check_in("DeploymentResource:ns/r0"), None);
    }

    #[test]
    fn a_settled_decision_is_remembered_by_its_inputs_until_forgotten() {
        let memory = ObjectMemory::default();
        assert!(!memory.is_settled_on("r", 7));
        memory.settled("r", Some(7));
        assert!(memory.is_settled_on("r", 7));
        assert!(!memory.is_settled_on("r", 8), "other inputs are decided");
        memory.settled("r", None);
        assert!(!memory.is_settled_on("r", 7));
        assert!(memory.is_empty());
    }
}
