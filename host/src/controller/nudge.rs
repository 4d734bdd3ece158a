//! A safety net under the watches: a template that waits on a child being
//! deleted (its own deletion waits for its children to go; a child deleted
//! behind its back is recreated once gone) wakes that child's reconcile
//! when the deletion has lasted [`WAITED_TOO_LONG`], and again each
//! interval while it lasts. The watch should have woken the child when its
//! deletion was made (`unseen.rs` says why it once did not); a child that
//! is really waiting on Radius is only decided once more, and polls its
//! operation as it would anyway.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::Context;
use super::object::key;
use crate::crd::{DeploymentResource, DeploymentTemplate};

/// How long a child's deletion may last before its waiting template wakes
/// it, and how often it does so after.
pub const WAITED_TOO_LONG: Duration = Duration::from_secs(30);

/// Wake the children of `template` whose deletion has lasted
/// [`WAITED_TOO_LONG`] (each at most once an interval).
pub fn children_waited_on(ctx: &Context, template: &DeploymentTemplate) {
    let Ok(caches) = ctx.caches() else {
        return;
    };
    let uid = template.uid().unwrap_or_default();
    let children: Vec<_> = ctx
        .owners
        .get(&uid)
        .iter()
        .filter_map(|child| caches.resources.get(child))
        .collect();
    let now = Timestamp::now();
    for child in waited_on(children.iter().map(AsRef::as_ref), now) {
        if !ctx.memory.nudged.due(&key(child), WAITED_TOO_LONG) {
            continue;
        }
        tracing::info!(
            resource = %child.name_any(),
            "waking a DeploymentResource whose deletion its template has waited on for {}s or more",
            WAITED_TOO_LONG.as_secs()
        );
        ctx.wake_resource(ObjectRef::from_obj(child));
    }
}

/// The children whose deletion was requested at least [`WAITED_TOO_LONG`]
/// before `now`.
fn waited_on<'a>(
    children: impl Iterator<Item = &'a DeploymentResource>,
    now: Timestamp,
) -> impl Iterator<Item = &'a DeploymentResource> {
    children.filter(move |child| {
        child
            .metadata
            .deletion_timestamp
            .as_ref()
            .is_some_and(|since| {
                super::drift::age_ms(since.0, now) >= WAITED_TOO_LONG.as_millis() as u64
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn child(name: &str, deleted_secs_ago: Option<i64>, now: Timestamp) -> DeploymentResource {
        let mut child = DeploymentResource::new(
            name,
            crate::crd::DeploymentResourceSpec {
                id: format!("/planes/radius/local/resourceGroups/g/providers/A.B/c/{name}"),
                provider_config: None,
            },
        );
        child.metadata.deletion_timestamp = deleted_secs_ago
            .map(|secs| Time(now - k8s_openapi::jiff::SignedDuration::from_secs(secs)));
        child
    }

    #[test]
    fn only_a_child_deleted_for_long_is_woken() {
        let now = Timestamp::now();
        let children = [
            child("long", Some(31), now),
            child("recent", Some(5), now),
            child("alive", None, now),
        ];
        let woken: Vec<String> = waited_on(children.iter(), now)
            .map(|child| child.name_any())
            .collect();
        assert_eq!(woken, ["long"]);
    }
}
