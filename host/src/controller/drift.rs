//! Drift checks. Radius's own controller only reacts to spec changes; this
//! one also notices a Radius resource deleted behind its back (or a Radius
//! that lost its data). Every `--drift-resync` each `DeploymentResource`
//! re-reads the resource it stands for with one GET, spread over the interval
//! so that a fleet's checks do not come at once. What the check found goes
//! into the observation (`missing-age-ms`) and into `status.missingSince`;
//! the policies decide what to do (the default marks the resource `Missing`,
//! and its template deploys again: docs/default-policy.md).

use std::time::Duration;

use kube::{Resource, ResourceExt};

use super::Context;
use crate::crd::{DeploymentResource, DeploymentResourceStatus};

/// A resource found missing is checked again this often (at most), so that
/// it is seen back soon after its template deployed it again.
pub const MISSING_RECHECK: Duration = Duration::from_secs(5);

/// Milliseconds from `time` to `now`.
pub fn age_ms(time: k8s_openapi::jiff::Timestamp, now: k8s_openapi::jiff::Timestamp) -> u64 {
    u64::try_from(now.duration_since(time).as_millis()).unwrap_or(0)
}

/// How long ago the resource was first found missing in Radius, checking
/// again first if a check is due. `None`: found at the last check (or never
/// checked, or checks are off). A resource being deleted, or with a Radius
/// operation recorded, is not checked: its own decisions follow Radius
/// already. A check that fails (Radius unreachable, 5xx) changes nothing and
/// is tried again at the next interval.
pub async fn missing_age_ms(
    ctx: &Context,
    object: &DeploymentResource,
    status: &DeploymentResourceStatus,
) -> Option<u64> {
    let every = ctx.drift_resync?;
    let now = k8s_openapi::jiff::Timestamp::now();
    let recorded = status
        .missing_since
        .as_ref()
        .map(|since| age_ms(since.0, now));
    if busy(object, Some(status)) {
        return recorded;
    }
    let key = super::object::key(object);
    let every = if recorded.is_some() {
        every.min(MISSING_RECHECK)
    } else {
        every
    };
    if !ctx.memory.drift.check_due(&key, every) {
        return recorded;
    }
    let sent = k8s_openapi::jiff::Timestamp::now();
    match ctx.radius.get_resource(&object.spec.id).await {
        Ok(Some(_)) => {
            ctx.metrics.count_drift_check("found");
            ctx.memory.drift.schedule(&key, ctx.drift_resync?);
            None
        }
        Ok(None) => {
            ctx.metrics.count_drift_check("missing");
            tracing::info!(resource = %object.name_any(), id = %object.spec.id, "drift check: missing in Radius");
            ctx.memory.drift.schedule(&key, every.min(MISSING_RECHECK));
            // The time the GET was sent is what its template compares with
            // its last deployment: a status write that lands after that
            // deployment finished must not make an earlier absence look
            // newer than it.
            if recorded.is_none() {
                ctx.memory.drift.missing_seen(&key, sent);
            }
            Some(recorded.unwrap_or_else(|| age_ms(sent, k8s_openapi::jiff::Timestamp::now())))
        }
        Err(error) => {
            ctx.metrics.count_drift_check("error");
            tracing::debug!(resource = %object.name_any(), error = %error, "drift check failed; trying again at the next interval");
            ctx.memory.drift.schedule(&key, every);
            recorded
        }
    }
}

/// How soon the resource must be reconciled again for its next drift
/// check; `None` if it is not checked.
pub fn next_check(ctx: &Context, object: &DeploymentResource) -> Option<Duration> {
    ctx.drift_resync?;
    if busy(object, object.status.as_ref()) {
        return None;
    }
    ctx.memory.drift.check_in(&super::object::key(object))
}

/// Being deleted, or following a Radius operation: not checked.
fn busy(object: &DeploymentResource, status: Option<&DeploymentResourceStatus>) -> bool {
    object.meta().deletion_timestamp.is_some()
        || status.is_some_and(|s| s.operation.is_some() || s.failed_request.is_some())
}
