//! Carrying out checked plans: one function per action kind, and the
//! per-kind dispatch over a plan. Actions run in the plan's order and the
//! first error stops the plan; status updates are folded into one typed
//! patch written at the end. A deployment a plan starts is recorded before
//! it is sent, so a controller killed mid-plan follows it instead of
//! sending it again; a Radius DELETE, which may be sent again, is recorded
//! by that one write.
//!
//! The per-kind dispatch and the status write are here; the deployments
//! (`deployment.rs`), the `DeploymentResource`s (`resources.rs`) and the
//! Events (`events.rs`) each have a file.

use kube::ResourceExt;
use radwasm_policy_model::annotations::{DeletionTally, deletion_tally};
use radwasm_policy_model::{
    RESOURCE_FINALIZER, ResourceAction, ResourceObservation, TEMPLATE_FINALIZER, TemplateAction,
    TemplateObservation,
};

use super::deployment_records;
use super::memory::add_tallies;
use super::object::{Executed, Reconciled, key};
use super::status::{Current, StatusPatch};
use super::writes::{Finalizer, set_finalizer, write_deployment_records, write_status};
use super::{Context, Error};
use crate::crd::{DeploymentResource, DeploymentTemplate, FailedRequest, PolicyRef};
use crate::policy::LoadedPolicy;
use crate::radius::RadiusError;

mod deployment;
mod resources;

pub use super::events::emit;
use deployment::{Deployment, Started, delete_deployment, deployment_id, start_deployment};
use resources::{
    create_resource, delete_resource, detach_resource, record_tally, start_radius_delete,
};

/// Carry out a template plan.
pub async fn template_plan(
    ctx: &Context,
    object: &DeploymentTemplate,
    policy: &PolicyRef,
    observation: &TemplateObservation,
    actions: &[TemplateAction],
) -> Result<Executed, Error> {
    let current = Current::of(object);
    let mut patch = StatusPatch::default();
    patch.track_failures(
        observation.operation.as_ref(),
        observation.last_failure.as_ref(),
    );
    let mut deployments = observation.deployments.clone();
    let mut executed = Executed::default();
    let mut finalizer_removed = false;
    let mut tally = DeletionTally::default();
    // The object's version on the server as far as this plan knows: the one
    // decided on, or the one our finalizer write made.
    let mut version = object.resource_version();
    // The status written ahead of a deployment, if the plan's own status
    // updates went with it: those are folded in already, and if nothing
    // else changes the patch, the final write would repeat it.
    let mut written_ahead: Option<Box<StatusPatch>> = None;
    // The deployment records the annotation holds after this plan's writes,
    // if it wrote them; and whether a deleted record must be dropped there.
    let mut annotated: Option<Vec<String>> = None;
    let mut records_dropped = false;
    // A plan that replaces the output list first labels what the old list
    // alone made the template's own (`produced`), so that it stays so until
    // it is deleted; any failure here stops the plan before that write.
    let next_outputs = actions.iter().rev().find_map(|action| match action {
        TemplateAction::SetStatus(update) => update.output_resources.as_deref(),
        _ => None,
    });
    if let Some(next) = next_outputs {
        super::produced::mark_before_replacing(ctx, object, next).await?;
    }
    for (index, action) in actions.iter().enumerate() {
        match action {
            TemplateAction::AddFinalizer => {
                // A deployment this plan starts is recorded with the
                // finalizer, in the same write (see `deployment_records`).
                let records = actions[index + 1..].iter().find_map(|later| match later {
                    TemplateAction::StartDeployment(start) => Some(deployment_records::with(
                        &deployments,
                        &deployment_id(start),
                    )),
                    _ => None,
                });
                let annotation = records.as_ref().map(|ids| {
                    (
                        deployment_records::ANNOTATION,
                        deployment_records::annotation_value(ids),
                    )
                });
                match set_finalizer(ctx, object, TEMPLATE_FINALIZER, true, annotation).await? {
                    Finalizer::Written(written) => {
                        version = written.or(version);
                        annotated = records.or(annotated);
                    }
                    Finalizer::AsAsked => {}
                    Finalizer::ObjectMoved => return Ok(executed.object_moved()),
                }
            }
            TemplateAction::RemoveFinalizer => {
                if set_finalizer(ctx, object, TEMPLATE_FINALIZER, false, None).await?
                    == Finalizer::ObjectMoved
                {
                    return Ok(executed.object_moved());
                }
                finalizer_removed = true;
            }
            TemplateAction::EnsureResourceGroup(scope) => {
                if !ensure_resource_group(ctx, object, observation, scope).await? {
                    // Refused: recorded; the policy is shown it next.
                    executed.mutation_failed = true;
                    executed.requeue_ms = Some(0);
                    return Ok(executed);
                }
            }
            TemplateAction::StartDeployment(start) => {
                let ids = deployment_records::with(&deployments, &deployment_id(start));
                let holds = annotated.as_ref().map_or_else(
                    || deployment_records::annotation_holds(object, &ids),
                    |written| *written == ids,
                );
                if !holds {
                    // Recorded where no other controller's status write
                    // reaches, before it is sent.
                    match write_deployment_records(ctx, object, version.as_deref(), &ids).await? {
                        Finalizer::Written(written) => version = written.or(version),
                        Finalizer::AsAsked => {}
                        Finalizer::ObjectMoved => return Ok(executed.object_moved()),
                    }
                    annotated = Some(ids);
                }
                let deployment = Deployment {
                    start,
                    version: version.as_deref(),
                    deployments: &mut deployments,
                    patch: &mut patch,
                    rest: &actions[index + 1..],
                    current: &current,
                    policy,
                };
                match start_deployment(ctx, object, observation, deployment).await? {
                    Started::Recorded { ahead } => written_ahead = ahead,
                    Started::Refused => executed.mutation_failed = true,
                    Started::ObjectMoved => return Ok(executed.object_moved()),
                }
            }
            TemplateAction::CreateResource(create) => create_resource(ctx, object, create).await?,
            TemplateAction::DeleteResource(name) => {
                delete_resource(ctx, object, name).await?;
                tally.deleted += 1;
            }
            TemplateAction::DetachResource(name) => {
                detach_resource(ctx, object, name).await?;
                tally.kept += 1;
            }
            TemplateAction::DeleteDeployment(id) => {
                if delete_deployment(ctx, id).await? {
                    deployments.retain(|recorded| !recorded.eq_ignore_ascii_case(id));
                    patch.deployments = Some(deployments.clone());
                    records_dropped = true;
                } else {
                    executed.mutation_failed = true;
                }
            }
            TemplateAction::SetStatus(_) if written_ahead.is_some() => {}
            TemplateAction::SetStatus(update) => patch.template_update(&current, update),
            TemplateAction::EmitEvent(event) => emit(ctx, object, event).await,
            TemplateAction::RequeueAfter(ms) => executed.requeue_ms = Some(*ms),
        }
    }
    if tally != DeletionTally::default() && object.metadata.deletion_timestamp.is_some() {
        // Counted after the children were deleted: a controller stopped in
        // between counts fewer, never one twice. Kept in memory (see
        // `memory::tally`) until a resource is left in Radius; from then
        // on written, with all counted before.
        let key = key(object);
        let annotated = deletion_tally(object.annotations()).is_some();
        if tally.kept > 0 || annotated {
            let unwritten = ctx.memory.tallies.unwritten(&key);
            record_tally(ctx, object, add_tallies(unwritten, tally)).await?;
            ctx.memory.tallies.written(&key);
        } else {
            ctx.memory.tallies.add(&key, tally);
        }
    }
    let annotation_holds = annotated.as_ref().map_or_else(
        || deployment_records::annotation_holds(object, &deployments),
        |written| *written == deployments,
    );
    if records_dropped && !finalizer_removed && !annotation_holds {
        // Not ahead of anything: a record left listed is only deleted again.
        if write_deployment_records(ctx, object, None, &deployments).await?
            == Finalizer::ObjectMoved
        {
            return Ok(executed.object_moved());
        }
    }
    if written_ahead.is_some_and(|ahead| *ahead == patch) {
        // The status written ahead of the deployment (naming the policy)
        // says all of it.
        return Ok(executed);
    }
    finish_status(ctx, object, policy, patch, finalizer_removed).await?;
    Ok(executed)
}

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

/// Create the Radius resource group if absent. `Ok(false)`: Radius refused
/// it, and the refusal is recorded in status for the policy to see.
async fn ensure_resource_group(
    ctx: &Context,
    object: &DeploymentTemplate,
    observation: &TemplateObservation,
    scope: &str,
) -> Result<bool, Error> {
    match ctx.radius.ensure_resource_group(scope).await {
        Ok(_) => Ok(true),
        Err(error) if error.is_transient() => Err(error.into()),
        Err(error) => {
            tracing::info!(error = %error, "Radius refused the resource group");
            record_failed_request(ctx, object, "PUT", scope, &observation.spec_hash, &error)
                .await?;
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests;
