//! Kubernetes Events, `events.k8s.io/v1`, split by object: the recorders
//! the controllers and the ReconcilePolicy loader publish through.
//!
//! A recorder keeps every event it sent for six minutes, so that a repeat
//! becomes a series (`count`, "x2 over 75s") instead of a new Event, and on
//! every publish it walks all of them, under one lock, to drop the old
//! ones. With one recorder for the whole controller, each publish at 10,000
//! templates walks some 20,000 entries while every other reconcile waiting
//! to publish queues behind it. Here each object always goes to the same
//! one of [`SHARDS`] recorders, so its repeats still make a series while a
//! publish walks a 64th of the events.
//!
//! Events are written as `core/v1` Events, as client-go's recorder
//! (the one controller-runtime hands out) writes them: `firstTimestamp`,
//! `lastTimestamp` and `count`, a repeat a patch of the last two. The API
//! server refuses those fields on an `events.k8s.io/v1` Event it creates,
//! and without them `kubectl get events --sort-by=.lastTimestamp`, a common
//! habit, lists nothing and `kubectl get events` shows no age. The same
//! objects read through `events.k8s.io/v1` carry `regarding`, `note`,
//! `reportingController` and the deprecated count and timestamps. kube's
//! `Recorder` writes only `events.k8s.io/v1`, hence this one; it keeps
//! kube's series key and six-minute window.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Client, ResourceExt};
use tokio::sync::Mutex;

/// How long a sent Event is remembered to make a series of its repeats
/// (kube's and client-go's value).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// An Event is named `{object}.{nanoseconds in hex}`; names are at most 253
/// characters, so the object's name is cut to this.
const NAME_PREFIX_LIMIT: usize = 200;

/// How many recorders the events are split over.
pub const SHARDS: usize = 64;

/// The controller's event recorders; cheap to clone.
#[derive(Clone)]
pub struct EventRecorders {
    client: Client,
    reporter: Arc<Reporter>,
    shards: Arc<[Mutex<Sent>]>,
}

/// The Events one shard sent in the last [`SERIES_WINDOW`], by what makes
/// a repeat.
type Sent = HashMap<EventKey, Series>;

/// What is kept of a sent Event: what the next count of its series patches.
/// Not the Event itself: at 10,000 templates the recorders hold some
/// 20,000 Events after a burst of deployments, which kept whole were the
/// largest part of the controller's heap (35 MiB of 228 MiB in a heap
/// profile, `docs/benchmarks-scale.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Series {
    /// The Event's name (its namespace is the key's).
    name: String,
    count: i32,
    last_seen: Timestamp,
}

impl Series {
    /// Seen once more at `now`: the next count.
    fn next(&self, now: Timestamp) -> Series {
        Series {
            name: self.name.clone(),
            count: self.count + 1,
            last_seen: now,
        }
    }
}

/// What makes two Events one series (kube's key: the message is not part
/// of it, so a series keeps its first message).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct EventKey {
    warning: bool,
    action: String,
    reason: String,
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
}

impl EventRecorders {
    pub fn new(client: &Client, reporter: &Reporter) -> Self {
        Self {
            client: client.clone(),
            reporter: Arc::new(reporter.clone()),
            shards: (0..SHARDS).map(|_| Mutex::new(Sent::new())).collect(),
        }
    }

    /// Record `event` about the object `reference` names: a new Event, or
    /// the next count of the series it repeats.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = EventKey {
            warning: matches!(event.type_, EventType::Warning),
            action: event.action.clone(),
            reason: event.reason.clone(),
            regarding: (
                reference.kind.clone(),
                reference.namespace.clone(),
                reference.name.clone(),
                reference.uid.clone(),
            ),
        };
        let mut sent = self.shards[shard(reference)].lock().await;
        sent.retain(|_, series| series.last_seen + SERIES_WINDOW > now);
        let namespace = reference.namespace.as_deref().unwrap_or("default");
        let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), namespace);
        let series = match sent.get(&key).map(|previous| previous.next(now)) {
            Some(repeat) => {
                let change = serde_json::json!({
                    "count": repeat.count,
                    "lastTimestamp": Time(now),
                });
                events
                    .patch(
                        &repeat.name,
                        &PatchParams::default(),
                        &Patch::Merge(&change),
                    )
                    .await?;
                repeat
            }
            None => {
                let record = self.new_event(event, reference, now);
                events.create(&PostParams::default(), &record).await?;
                Series {
                    name: record.name_any(),
                    count: 1,
                    last_seen: now,
                }
            }
        };
        sent.insert(key, series);
        Ok(())
    }

    fn new_event(&self, event: &Event, reference: &ObjectReference, now: Timestamp) -> CoreEvent {
        let controller = &self.reporter.controller;
        let object: String = reference
            .name
            .as_deref()
            .unwrap_or(controller)
            .chars()
            .take(NAME_PREFIX_LIMIT)
            .collect();
        CoreEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            message: event.note.clone(),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_string(),
            ),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            involved_object: reference.clone(),
            related: event.secondary.clone(),
            source: Some(EventSource {
                component: Some(controller.clone()),
                host: None,
            }),
            reporting_component: Some(controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| controller.clone()),
            ),
            metadata: ObjectMeta {
                namespace: reference.namespace.clone(),
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                ..Default::default()
            },
            ..Default::default()
        }
    }
}

/// The recorder an object's events go to: the same for every event of it.
fn shard(reference: &ObjectReference) -> usize {
    // `DefaultHasher::new()` has fixed keys: the same object, the same shard.
    let mut hasher = DefaultHasher::new();
    reference.kind.hash(&mut hasher);
    reference.namespace.hash(&mut hasher);
    reference.name.hash(&mut hasher);
    reference.uid.hash(&mut hasher);
    (hasher.finish() % SHARDS as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str) -> ObjectReference {
        ObjectReference {
            kind: Some("DeploymentTemplate".into()),
            namespace: Some("default".into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    #[test]
    fn a_repeat_counts_on_and_moves_the_last_timestamp() {
        let first = Timestamp::from_second(1_000).expect("time");
        let series = Series {
            name: "app.17f".into(),
            count: 1,
            last_seen: first,
        };
        let later = Timestamp::from_second(1_075).expect("time");
        let third = series.next(later).next(later);
        assert_eq!(
            third,
            Series {
                name: "app.17f".into(),
                count: 3,
                last_seen: later,
            }
        );
    }

    #[test]
    fn an_object_always_goes_to_one_recorder_and_objects_spread_over_all() {
        assert_eq!(shard(&reference("app")), shard(&reference("app")));
        let mut used = [0usize; SHARDS];
        for i in 0..10_000 {
            used[shard(&reference(&format!("app-{i}")))] += 1;
        }
        // 156 each on average; every shard is used and none holds a
        // large share.
        assert!(used.iter().all(|&n| (60..=300).contains(&n)), "{used:?}");
    }
}
