//! Kubernetes Events, through kube's [`Recorder`], split by object.
//!
//! A `Recorder` keeps every event it sent for six minutes, so that a
//! repeat becomes a series (`count`, "x2 over 75s") instead of a new Event,
//! and on every publish it walks all of them, under one lock, to drop the
//! old ones. With one recorder for the whole controller, each publish at
//! 10,000 templates walks some 20,000 entries while every other reconcile
//! waiting to publish queues behind it. Here each object always goes to
//! the same one of [`SHARDS`] recorders, so its repeats still make a series
//! while a publish walks a 64th of the events.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, Recorder, Reporter};

/// How many recorders the events are split over.
pub const SHARDS: usize = 64;

/// The controller's event recorders; cheap to clone.
#[derive(Clone)]
pub struct EventRecorders(Arc<[Recorder]>);

impl EventRecorders {
    pub fn new(client: &Client, reporter: &Reporter) -> Self {
        Self(
            (0..SHARDS)
                .map(|_| Recorder::new(client.clone(), reporter.clone()))
                .collect(),
        )
    }

    /// Record `event` about the object `reference` names.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        self.0[shard(reference)].publish(event, reference).await
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
