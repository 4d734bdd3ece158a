//! Carrying out checked plans: one function per action kind, and the
//! per-kind dispatch over a plan. Actions run in the plan's order and the
//! first error stops the plan; status updates are folded into one typed
//! patch written at the end. A deployment a plan starts is recorded before
//! it is sent, so a controller killed mid-plan follows it instead of
//! sending it again; a Radius DELETE, which may be sent again, is recorded
//! by that one write.
//!
//! The resource plan and the status write are here; the template plan
//! (`template.rs`), its deployments (`deployment.rs`), the
//! `DeploymentResource`s (`resources.rs`) and the Events (`events.rs`)
//! each have a file.

use radwasm_policy_model::{RESOURCE_FINALIZER, ResourceAction, ResourceObservation};

use super::object::{Executed, Reconciled, key};
use super::status::{Current, StatusPatch};
use super::writes::{Finalizer, set_finalizer, write_status};
use super::{Context, Error};
use crate::crd::{DeploymentResource, FailedRequest, PolicyRef};
use crate::policy::LoadedPolicy;
use crate::radius::RadiusError;

mod deployment;
mod resources;
mod template;

pub use super::events::emit;
use resources::start_radius_delete;
pub use template::template_plan;

/// Write what the plan set in status, naming the policy that decided; also
/// when only that policy changed (a swap, or another policy selected), so
/// status always names the one that decided last.
async fn finish_status<K: Reconciled>(
    ctx: &Context,
    object: &K,
    policy: &PolicyRef,
    mut patch: StatusPatch,
    finalizer_removed: bool,
) -> Result<(), Error> {
    if finalizer_removed {
        return Ok(());
    }
    let named = K::status_policy(object) == Some(policy);
    if patch.is_empty() && named {
        return Ok(());
    }
    patch.policy = Some(Some(policy.clone()));
    write_status(ctx, object, &key(object), &patch).await
}

/// Carry out a resource plan.
pub async fn resource_plan(
    ctx: &Context,
    object: &DeploymentResource,
    policy: &PolicyRef,
    observation: &ResourceObservation,
    actions: &[ResourceAction],
) -> Result<Executed, Error> {
    let current = Current::of(object);
    let mut patch = StatusPatch::default();
    patch.track_failures(
        observation.operation.as_ref(),
        observation.last_failure.as_ref(),
    );
    patch.track_missing(
        object
            .status
            .as_ref()
            .and_then(|s| s.missing_since.as_ref()),
        observation.missing_age_ms,
        ctx.memory.drift.take_missing_seen(&key(object)),
    );
    let mut executed = Executed::default();
    let mut finalizer_removed = false;
    for action in actions {
        match action {
            ResourceAction::AddFinalizer | ResourceAction::RemoveFinalizer => {
                let present = matches!(action, ResourceAction::AddFinalizer);
                if set_finalizer(ctx, object, RESOURCE_FINALIZER, present, None).await?
                    == Finalizer::ObjectMoved
                {
                    return Ok(executed.object_moved());
                }
                finalizer_removed |= !present;
            }
            ResourceAction::StartRadiusDelete => match start_radius_delete(ctx, object).await? {
                // Recorded by the plan's one status write, below.
                Some(operation) => patch.record_operation(operation, None),
                None => executed.mutation_failed = true,
            },
            ResourceAction::SetStatus(update) => {
                patch.resource_update(&current, update, &object.spec.id)
            }
            ResourceAction::EmitEvent(event) => emit(ctx, object, event).await,
            ResourceAction::RequeueAfter(ms) => executed.requeue_ms = Some(*ms),
        }
    }
    finish_status(ctx, object, policy, patch, finalizer_removed).await?;
    Ok(executed)
}

/// Which policy took the decision, for `status.policy`.
pub fn policy_ref(policy: &LoadedPolicy, reconcile_policy: Option<String>) -> PolicyRef {
    PolicyRef {
        name: policy.description().name.clone(),
        version: policy.description().version.clone(),
        digest: policy.digest().to_string(),
        reconcile_policy,
    }
}

/// A failed request as recorded in status.
/// Record in status a request Radius refused (or that kept failing after the
/// client's retries): the policy sees it as that attempt's outcome.
async fn record_failed_request<K: Reconciled>(
    ctx: &Context,
    object: &K,
    kind: &str,
    target: &str,
    subject: &str,
    error: &RadiusError,
) -> Result<(), Error> {
    let failed = failed_request(kind, target, subject, error);
    write_status(
        ctx,
        object,
        &key(object),
        &StatusPatch::request_failed(failed),
    )
    .await
}

fn failed_request(kind: &str, target: &str, subject: &str, error: &RadiusError) -> FailedRequest {
    let (code, message) = match error {
        RadiusError::Arm { code, message, .. } => (code.clone(), message.clone()),
        other => (other.reason().to_string(), other.to_string()),
    };
    FailedRequest {
        operation_kind: kind.to_string(),
        target: target.to_string(),
        subject: subject.to_string(),
        code,
        message,
        time: Some(super::status::now()),
    }
}

#[cfg(test)]
mod tests;
