//! Runs one kind's reconciles: at most `--concurrency` at once, never two of
//! one object at a time, each object at most once in the queue, and the
//! queue served in the order its objects came due. The three controllers
//! (templates and resources in `controller/`, policies in
//! `reconcile_policy/loader/`) all run on it.
//!
//! kube-runtime's `Controller` runner keeps the first three rules but not the
//! last: while every slot is busy it parks the reconciles that come due in a
//! hash set, and starts the next one from that set in hash order. Under
//! sustained load (hundreds of running operations, each polled every 100 ms)
//! an object that sorts late waits until the set drains: in the 1,000-template
//! benchmark a tenth of the new templates were first decided on 1.3 s after
//! all the others. Lifting its limit and queueing on a fair semaphore instead
//! does not help, as its runner polls every running future each time one
//! finishes. So the watches, the caches and the triggers stay kube-runtime's,
//! and the queue and the runner are here (docs/architecture.md, "Who runs
//! when").

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::time::{DelayQueue, delay_queue};

/// Look again this soon at an object whose reconcile panicked (a bug: the
/// panic is logged at `ERROR`).
pub const PANICKED_RETRY: Duration = Duration::from_secs(10);

/// The furthest ahead an object is scheduled: a later time is brought
/// forward to this (the timer wheel holds about two years; a policy may ask
/// for up to 49 days).
pub const LATEST: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Where an object is: waiting for its time, due (in the queue), or running.
enum State {
    /// Due at this time; the timer's key.
    Waiting(delay_queue::Key, Instant),
    /// In the queue since this time.
    Due(Instant),
    /// Being reconciled; asked for again meanwhile for this time, if at all.
    Running(Option<Instant>),
}

/// The schedule of one kind's objects: when each is due, and the due ones in
/// the order they came due.
pub struct Queue<T> {
    states: HashMap<T, State>,
    timers: DelayQueue<T>,
    due: VecDeque<T>,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Queue {
            states: HashMap::new(),
            timers: DelayQueue::new(),
            due: VecDeque::new(),
        }
    }
}

impl<T: Clone + Eq + Hash> Queue<T> {
    /// Reconcile `object` at `at`. An object already waiting keeps the
    /// earlier of its two times; one already due keeps its place; one running
    /// is reconciled again after it finishes, at the earliest time asked.
    pub fn schedule(&mut self, object: T, at: Instant, now: Instant) {
        let at = at.min(now + LATEST);
        match self.states.get_mut(&object) {
            Some(State::Due(_)) => {}
            Some(State::Running(again)) => *again = Some(again.map_or(at, |t| t.min(at))),
            Some(State::Waiting(key, _)) if at <= now => {
                self.timers.remove(key);
                self.states.insert(object.clone(), State::Due(now));
                self.due.push_back(object);
            }
            Some(State::Waiting(key, when)) => {
                if at < *when {
                    self.timers.reset_at(key, at);
                    *when = at;
                }
            }
            None if at <= now => {
                self.states.insert(object.clone(), State::Due(now));
                self.due.push_back(object);
            }
            None => {
                let key = self.timers.insert_at(object.clone(), at);
                self.states.insert(object, State::Waiting(key, at));
            }
        }
    }

    /// A timer ran out: the object joins the end of the queue.
    fn expired(&mut self, object: T) {
        if let Some(state) = self.states.get_mut(&object)
            && let State::Waiting(_, when) = state
        {
            let when = *when;
            *state = State::Due(when);
            self.due.push_back(object);
        }
    }

    /// The object due longest, now running, and how long it waited.
    pub fn start_next(&mut self, now: Instant) -> Option<(T, Duration)> {
        let object = self.due.pop_front()?;
        let since = match self.states.insert(object.clone(), State::Running(None)) {
            Some(State::Due(since)) => since,
            _ => now,
        };
        Some((object, now.saturating_duration_since(since)))
    }

    /// A reconcile of `object` finished and asked to be run again after
    /// `requeue`, if at all.
    pub fn finished(&mut self, object: T, requeue: Option<Duration>, now: Instant) {
        let again = match self.states.remove(&object) {
            Some(State::Running(again)) => again,
            _ => None,
        };
        if let Some(after) = requeue {
            self.schedule(object.clone(), now + after, now);
        }
        if let Some(at) = again {
            self.schedule(object, at, now);
        }
    }
}

/// Run the reconciles of one kind until `shutdown` (then let the running
/// ones finish) or until `triggers` ends.
///
/// `triggers` names the objects to reconcile now: every watch event that
/// passed the filters, and every other wake-up. Nothing starts before `store`
/// has been listed once, nor before `leading` is done (at once without
/// leader election; with it, once this process leads: until then the
/// watches keep the cache and the queue warm). `reconcile` is given the object as the cache holds
/// it when its turn comes (an object gone from the cache by then is
/// skipped) and how long it waited for a slot; it answers when to look
/// again. `concurrency` 0 means no limit.
pub async fn run_queue<K, F, Fut>(
    triggers: impl Stream<Item = ObjectRef<K>>,
    store: Store<K>,
    concurrency: u16,
    shutdown: CancellationToken,
    leading: impl Future<Output = ()>,
    reconcile: F,
) where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    F: Fn(Arc<K>, Duration) -> Fut,
    Fut: Future<Output = Duration> + Send + 'static,
{
    let limit = if concurrency == 0 {
        usize::MAX
    } else {
        usize::from(concurrency)
    };
    let mut queue = Queue::<ObjectRef<K>>::default();
    let mut running = tokio::task::JoinSet::new();
    let mut running_ids = HashMap::new();
    let triggers = triggers.fuse();
    futures::pin_mut!(triggers);
    let listed = store.wait_until_ready();
    futures::pin_mut!(listed);
    let mut synced = false;
    futures::pin_mut!(leading);
    let mut led = false;
    let mut stopping = false;
    loop {
        let now = Instant::now();
        while synced && led && !stopping && running.len() < limit {
            let Some((object, waited)) = queue.start_next(now) else {
                break;
            };
            match store.get(&object) {
                Some(found) => {
                    let task = running.spawn(reconcile(found, waited));
                    running_ids.insert(task.id(), object);
                }
                None => queue.finished(object, None, now),
            }
        }
        if stopping && running.is_empty() {
            return;
        }
        tokio::select! {
            () = shutdown.cancelled(), if !stopping => stopping = true,
            listed = &mut listed, if !synced => {
                if listed.is_err() {
                    // The cache's writer is gone: its watch ended.
                    stopping = true;
                }
                synced = true;
            }
            () = &mut leading, if !led => led = true,
            trigger = triggers.next(), if !stopping => match trigger {
                Some(object) => {
                    let now = Instant::now();
                    queue.schedule(object, now, now);
                }
                None => stopping = true,
            },
            Some(expired) = queue.timers.next(), if !queue.timers.is_empty() => {
                queue.expired(expired.into_inner());
            }
            Some(done) = running.join_next_with_id(), if !running.is_empty() => {
                let (id, requeue) = match done {
                    Ok((id, requeue)) => (id, requeue),
                    Err(error) => {
                        tracing::error!(%error, "a reconcile panicked; trying again in {PANICKED_RETRY:?}");
                        (error.id(), PANICKED_RETRY)
                    }
                };
                if let Some(object) = running_ids.remove(&id) {
                    queue.finished(object, Some(requeue), Instant::now());
                }
            }
        }
    }
}

/// The objects a filtered watch brings, as names to reconcile. The watch
/// retries its own errors (with backoff); they are only logged here.
pub fn objects<K: Resource<DynamicType = ()> + 'static>(
    watch: impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    what: &'static str,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    watch.filter_map(move |event| {
        futures::future::ready(match event {
            Ok(object) => Some(ObjectRef::from_obj(&object)),
            Err(error) => {
                tracing::debug!(%error, "{what}");
                None
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(queue: &mut Queue<&'static str>, now: Instant) -> Vec<&'static str> {
        std::iter::from_fn(|| queue.start_next(now).map(|(object, _)| object)).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn due_objects_start_in_the_order_they_came_due() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.schedule("poll-later", now + Duration::from_millis(100), now);
        for object in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            queue.schedule(object, now, now);
        }
        // Asked again while due: keeps its place.
        queue.schedule("a", now, now);
        tokio::time::advance(Duration::from_millis(100)).await;
        let expired = queue.timers.next().await.unwrap().into_inner();
        queue.expired(expired);
        queue.schedule("late-trigger", Instant::now(), Instant::now());
        assert_eq!(
            drain(&mut queue, Instant::now()),
            [
                "a",
                "b",
                "c",
                "d",
                "e",
                "f",
                "g",
                "h",
                "poll-later",
                "late-trigger"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_object_keeps_the_earlier_time() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.schedule("x", now + Duration::from_secs(10), now);
        queue.schedule("x", now + Duration::from_secs(1), now);
        queue.schedule("x", now + Duration::from_secs(5), now);
        tokio::time::advance(Duration::from_secs(1)).await;
        let expired = queue.timers.next().await.unwrap().into_inner();
        queue.expired(expired);
        let (object, waited) = queue.start_next(Instant::now()).unwrap();
        assert_eq!((object, waited), ("x", Duration::ZERO));
        assert!(queue.timers.is_empty(), "one timer per object");
    }

    #[tokio::test(start_paused = true)]
    async fn an_object_asked_for_while_running_runs_again_after_it_finishes() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.schedule("x", now, now);
        assert_eq!(drain(&mut queue, now), ["x"]);
        // A watch event while it runs: not a second, concurrent run.
        queue.schedule("x", now, now);
        assert_eq!(queue.due.len(), 0);
        // It finishes asking to be polled in 100 ms; the event wins.
        queue.finished("x", Some(Duration::from_millis(100)), now);
        assert_eq!(drain(&mut queue, now), ["x"]);
        // Finished with nothing asked meanwhile: only its requeue remains.
        queue.finished("x", Some(Duration::from_secs(30)), now);
        assert_eq!(queue.due.len(), 0);
        assert_eq!(queue.timers.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_time_past_the_timer_wheel_is_brought_forward() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.schedule("x", now + Duration::from_secs(10 * 365 * 24 * 60 * 60), now);
        tokio::time::advance(LATEST).await;
        let expired = queue.timers.next().await.unwrap().into_inner();
        assert_eq!(expired, "x");
    }

    #[tokio::test(start_paused = true)]
    async fn the_wait_is_counted_from_when_the_object_came_due() {
        let mut queue = Queue::default();
        let now = Instant::now();
        queue.schedule("x", now + Duration::from_millis(100), now);
        tokio::time::advance(Duration::from_millis(350)).await;
        let expired = queue.timers.next().await.unwrap().into_inner();
        queue.expired(expired);
        let (_, waited) = queue.start_next(Instant::now()).unwrap();
        assert_eq!(waited, Duration::from_millis(250));
    }
}
