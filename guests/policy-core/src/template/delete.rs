//! Deleting a template: let a running deployment finish and track what it
//! made, delete the resources in safe order (others, then applications, then
//! environments), then remove the finalizer.

use radwasm_policy_model::annotations::{DeletionTally, deletion_tally};
use radwasm_policy_model::{
    ConditionStatus, CreateResource, EventType, OperationKind, OperationObservation,
    OperationResult, OwnedResource, TemplateAction, TemplateObservation, TemplatePhase,
};

use super::MAX_CHANGES_PER_PLAN;
use super::converge::{INVALID_OUTPUT_RESOURCE, Refused};
use crate::annotations::ReconcileMode;
use crate::naming::{self, IdSet};
use crate::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
use crate::timing::{
    CLEANUP_RECHECK_MS, DELETING_RECHECK_MS, POLL_ERROR_RETRY_MS, POLL_MIN_MS, poll_after,
};

/// A template's status message while its resources are deleted.
pub const DELETING_MESSAGE: &str = "deleting its resources";

/// The template is being deleted (and still has its finalizer): end the
/// recorded operation first, then delete what it owns, then let it go.
pub(super) fn delete(
    observation: &TemplateObservation,
    mode: ReconcileMode,
    plan: &mut TemplatePlanner,
) {
    if let Some(operation) = &observation.operation {
        end_operation_before_deleting(observation, operation, plan);
        return;
    }
    if observation.owned_resources.is_empty() {
        finish_deletion(observation, mode, plan);
        return;
    }
    delete_remaining(observation, mode, plan);
}

/// `Deleting`, not Ready (`Deleting`), with `message`.
fn deleting_status(message: String) -> DesiredTemplateStatus {
    DesiredTemplateStatus {
        phase: Some(TemplatePhase::Deleting),
        ready: Some(ready_condition(
            ConditionStatus::False,
            "Deleting",
            &message,
        )),
        message: Some(message),
        ..Default::default()
    }
}

/// An operation is recorded: wait for a running deployment, track what a
/// finished one made, forget anything else.
fn end_operation_before_deleting(
    observation: &TemplateObservation,
    operation: &OperationObservation,
    plan: &mut TemplatePlanner,
) {
    match (&operation.kind, &operation.result) {
        (OperationKind::Deployment, OperationResult::InProgress { retry_after_ms }) => {
            let message =
                "waiting for the running deployment to finish before deleting".to_string();
            plan.status(&observation.status, deleting_status(message));
            plan.requeue(poll_after(*retry_after_ms));
        }
        (_, OperationResult::PollError(_)) => {
            plan.requeue(POLL_ERROR_RETRY_MS);
        }
        (OperationKind::Deployment, OperationResult::Succeeded { output_resources }) => {
            track_outputs_before_deleting(observation, &operation.subject, output_resources, plan);
        }
        _ => {
            plan.status(
                &observation.status,
                DesiredTemplateStatus {
                    clear_operation: true,
                    ..Default::default()
                },
            );
            plan.requeue(0);
        }
    }
}

/// The deployment that just finished made `output_resources`: track them
/// so they are deleted too, at most [`MAX_CHANGES_PER_PLAN`] a decision: the
/// operation is kept (and polled again) until every output is tracked.
fn track_outputs_before_deleting(
    observation: &TemplateObservation,
    deployed_hash: &str,
    output_resources: &[String],
    plan: &mut TemplatePlanner,
) {
    if waiting_for_recreated(observation, output_resources, plan) {
        return;
    }
    let owned_ids: IdSet = observation
        .owned_resources
        .iter()
        .map(|r| r.radius_id.as_str())
        .collect();
    let mut planned = IdSet::new();
    let mut refused = Refused::default();
    for id in output_resources {
        if owned_ids.contains(id) || planned.contains(id) || !refused.admits(id) {
            continue;
        }
        if planned.len() == MAX_CHANGES_PER_PLAN {
            plan.requeue(POLL_MIN_MS);
            return;
        }
        planned.insert(id);
        plan.push(TemplateAction::CreateResource(CreateResource {
            name: naming::resource_object_name(id),
            radius_id: id.clone(),
        }));
    }
    if let Some(warning) = refused.warning() {
        plan.event(EventType::Warning, INVALID_OUTPUT_RESOURCE, warning);
    }
    // The phase says Deleting with the hash: a phase left from an
    // earlier generation must not read as that spec being Ready.
    let message = "deleting the resources of the deployment that just finished";
    plan.status(
        &observation.status,
        DesiredTemplateStatus {
            output_resources: Some(output_resources.to_vec()),
            status_hash: Some(deployed_hash.to_string()),
            clear_operation: true,
            ..deleting_status(message.to_string())
        },
    );
    plan.requeue(0);
}

/// True if the deployment made again resources whose old
/// `DeploymentResource` is still being deleted: the operation is kept until
/// the old one is gone, then each is tracked anew.
///
/// A resource the deployment made again while its old `DeploymentResource`
/// was being deleted (a later spec listed it again) is not tracked by that
/// one: its DELETE may have gone out before the deployment re-created it.
fn waiting_for_recreated(
    observation: &TemplateObservation,
    output_resources: &[String],
    plan: &mut TemplatePlanner,
) -> bool {
    let (deleting, live): (Vec<_>, Vec<_>) = observation
        .owned_resources
        .iter()
        .partition(|r| r.deletion_requested);
    let live_ids: IdSet = live.iter().map(|r| r.radius_id.as_str()).collect();
    let deleting_ids: IdSet = deleting.iter().map(|r| r.radius_id.as_str()).collect();
    let draining = output_resources
        .iter()
        .filter(|id| deleting_ids.contains(id) && !live_ids.contains(id))
        .count();
    if draining == 0 {
        return false;
    }
    let message = format!(
        "waiting for {draining} DeploymentResources being deleted, whose resources the last deployment made again, before deleting those"
    );
    plan.status(&observation.status, deleting_status(message));
    plan.requeue(CLEANUP_RECHECK_MS);
    true
}

/// Nothing is left: delete the deployment records (`manage`), remove the
/// finalizer and say what became of the resources.
fn finish_deletion(
    observation: &TemplateObservation,
    mode: ReconcileMode,
    plan: &mut TemplatePlanner,
) {
    if mode == ReconcileMode::Manage {
        // The template's deployment records go with it.
        for id in &observation.deployments {
            plan.push(TemplateAction::DeleteDeployment(id.clone()));
        }
    }
    plan.push(TemplateAction::RemoveFinalizer);
    let tally = deletion_tally(&observation.meta.annotations);
    plan.event(EventType::Normal, "Deleted", deleted_message(mode, tally));
}

/// The `Deleted` event's message: how many resources were deleted and kept,
/// or that the template detached them.
fn deleted_message(mode: ReconcileMode, tally: Option<DeletionTally>) -> String {
    match (mode, tally) {
        (ReconcileMode::Manage, Some(tally)) if tally.kept > 0 => format!(
            "{} deleted, {} kept in Radius (detached by the policy)",
            resources(tally.deleted),
            tally.kept
        ),
        (ReconcileMode::Manage, Some(tally)) => {
            format!("all resources deleted ({})", resources(tally.deleted))
        }
        (ReconcileMode::Manage, None) => "all resources deleted".to_string(),
        _ => format!(
            "detached: Radius resources left in place ({})",
            mode_name(mode)
        ),
    }
}

/// Ask the owned `DeploymentResource`s to go (in waves when the Radius
/// resources are deleted too) and say `Deleting`.
fn delete_remaining(
    observation: &TemplateObservation,
    mode: ReconcileMode,
    plan: &mut TemplatePlanner,
) {
    let status = &observation.status;
    let remaining = &observation.owned_resources;
    let candidates: Vec<&OwnedResource> = remaining.iter().collect();
    if mode.deletes_in_radius() {
        delete_in_waves(&candidates, plan);
    } else {
        // The resources' own policy leaves Radius alone for these modes, so
        // order does not matter; as many as one plan may carry.
        for resource in remaining
            .iter()
            .filter(|r| !r.deletion_requested)
            .take(MAX_CHANGES_PER_PLAN)
        {
            plan.push(TemplateAction::DeleteResource(resource.name.clone()));
        }
    }
    // One message for the whole deletion: the template's status is written
    // once when it begins, not again as each resource goes (every status
    // write sends the whole object, its ARM template included, through the
    // API server). Its `DeploymentResource`s show what remains.
    let message = DELETING_MESSAGE.to_string();
    let changed = plan.status(status, deleting_status(message.clone()));
    if changed && status.phase != Some(TemplatePhase::Deleting) {
        plan.event(EventType::Normal, "Deleting", message);
    }
    plan.requeue(DELETING_RECHECK_MS);
}

/// Delete the lowest wave still present (others, then applications, then
/// environments); later waves wait until the earlier ones are gone.
fn delete_in_waves(candidates: &[&OwnedResource], plan: &mut TemplatePlanner) {
    let Some(wave) = candidates
        .iter()
        .map(|r| naming::deletion_wave(&r.radius_id))
        .min()
    else {
        return;
    };
    for resource in candidates
        .iter()
        .filter(|r| naming::deletion_wave(&r.radius_id) == wave && !r.deletion_requested)
        .take(MAX_CHANGES_PER_PLAN)
    {
        plan.push(TemplateAction::DeleteResource(resource.name.clone()));
    }
}

/// "1 resource", "3 resources".
fn resources(count: u32) -> String {
    match count {
        1 => "1 resource".to_string(),
        _ => format!("{count} resources"),
    }
}

/// The `radapp.io/reconcile-policy` value that names `mode`.
fn mode_name(mode: ReconcileMode) -> &'static str {
    match mode {
        ReconcileMode::Manage => "manage",
        ReconcileMode::Skip => "skip",
        ReconcileMode::DetachOnDelete => "detach-on-delete",
    }
}
