//! The default decision for a `DeploymentResource`: track it while it lives;
//! on deletion delete the Radius resource only if this template put it there,
//! treat 404 as done, and retry failures on a fixed delay.

use radwasm_policy_model::{
    ConditionStatus, EventType, OperationKind, OperationResult, PolicyError, RESOURCE_FINALIZER,
    ResourceAction, ResourceObservation, ResourcePhase, ResourcePlan,
};

use crate::annotations::{self, ReconcileMode};
use crate::plan::{DesiredResourceStatus, ResourcePlanner, ready_condition};
use crate::spec;
use crate::timing::{DELETE_RETRY_MS, POLL_DEFAULT_MS, POLL_ERROR_RETRY_MS, poll_after};

/// Decide what to do next for one resource.
pub fn decide(observation: &ResourceObservation) -> Result<ResourcePlan, PolicyError> {
    let mut plan = ResourcePlanner::new();
    let has_finalizer = observation
        .meta
        .finalizers
        .iter()
        .any(|f| f == RESOURCE_FINALIZER);
    if observation.meta.deletion_requested {
        if has_finalizer {
            delete(observation, &mut plan);
        }
        return Ok(plan.finish());
    }
    if !has_finalizer {
        plan.push(ResourceAction::AddFinalizer);
    }
    // A deletion that was abandoned (deletion cannot be undone in
    // Kubernetes, so only a stale record) is forgotten.
    let clear_operation = observation.operation.is_some();
    let id = &observation.radius_id;
    if let Some(age_ms) = observation.missing_age_ms {
        // The host's drift check did not find the resource in Radius. Say
        // so; the owning template's policy decides what to do about it.
        // No age in status: a message that changed at every check would be
        // a write at every check.
        let message = format!("{id} is missing in Radius; the owning template decides");
        let newly = observation.status.phase != Some(ResourcePhase::Missing);
        plan.status(
            &observation.status,
            DesiredResourceStatus {
                phase: Some(ResourcePhase::Missing),
                message: Some(message.clone()),
                ready: Some(ready_condition(
                    ConditionStatus::False,
                    MISSING_IN_RADIUS,
                    &message,
                )),
                clear_operation,
            },
        );
        if newly {
            plan.event(
                EventType::Warning,
                MISSING_IN_RADIUS,
                format!("{message} (found missing {}s ago)", age_ms / 1000),
            );
        }
        return Ok(plan.finish());
    }
    if observation.status.phase == Some(ResourcePhase::Missing) {
        plan.event(
            EventType::Normal,
            "FoundInRadius",
            format!("{id} is in Radius again"),
        );
    }
    let message = format!("tracking {id}");
    plan.status(
        &observation.status,
        DesiredResourceStatus {
            phase: Some(ResourcePhase::Ready),
            message: Some(message.clone()),
            ready: Some(ready_condition(ConditionStatus::True, "Tracked", &message)),
            clear_operation,
        },
    );
    Ok(plan.finish())
}

/// Reason of the Warning event when Radius no longer knows an operation
/// that was started (a deployment, or a resource's deletion).
pub const OPERATION_LOST: &str = "OperationLost";

/// Reason of the Warning event and the `Ready` condition of a resource the
/// host's drift check found missing in Radius.
pub const MISSING_IN_RADIUS: &str = "MissingInRadius";

fn delete(observation: &ResourceObservation, plan: &mut ResourcePlanner) {
    let id = &observation.radius_id;
    if let Some(operation) = observation
        .operation
        .as_ref()
        .filter(|op| op.kind == OperationKind::Deletion)
    {
        match &operation.result {
            OperationResult::InProgress { retry_after_ms } => {
                deleting(observation, plan, format!("deleting {id} in Radius"));
                plan.requeue(poll_after(*retry_after_ms));
            }
            // Radius forgot the deletion while the resource is still there
            // (the host reports a deletion whose resource is gone as
            // succeeded): say so as a lost deployment is said, and delete
            // it again below.
            OperationResult::NotFound => {
                plan.event(
                    EventType::Warning,
                    OPERATION_LOST,
                    format!("Radius no longer knows the deletion of {id}; deleting it again"),
                );
            }
            OperationResult::Succeeded { .. } => deleted(observation, plan),
            OperationResult::Failed(error) => {
                let message = format!(
                    "deleting {id} failed: {}: {}; retrying in {}s",
                    error.code,
                    error.message,
                    DELETE_RETRY_MS / 1000
                );
                delete_failed(observation, plan, message);
            }
            OperationResult::Refused(error) => {
                let message = format!(
                    "deleting {id} failed: Radius refused it: {}: {}; retrying in {}s",
                    error.code,
                    error.message,
                    DELETE_RETRY_MS / 1000
                );
                delete_failed(observation, plan, message);
            }
            OperationResult::Canceled => {
                let message = format!(
                    "deleting {id} was canceled; retrying in {}s",
                    DELETE_RETRY_MS / 1000
                );
                delete_failed(observation, plan, message);
            }
            OperationResult::PollError(reason) => {
                deleting(
                    observation,
                    plan,
                    format!("cannot poll the deletion of {id} yet ({reason}); retrying"),
                );
                plan.requeue(POLL_ERROR_RETRY_MS);
            }
        }
        if operation.result != OperationResult::NotFound {
            return;
        }
    }

    match may_delete_in_radius(observation) {
        Ok(()) => {
            plan.push(ResourceAction::StartRadiusDelete);
            deleting(observation, plan, format!("deleting {id} in Radius"));
            plan.requeue(POLL_DEFAULT_MS);
        }
        Err(why) => {
            plan.push(ResourceAction::RemoveFinalizer);
            plan.event(
                EventType::Normal,
                "Detached",
                format!("{id} left in Radius: {why}"),
            );
        }
    }
}

/// The Radius resource is gone: the finalizer goes. Deleted with its
/// template, the template's `Deleted` Event tallies it: one Event per
/// resource more would double what a deletion writes through the API
/// server, about an object gone in the same plan. Deleted on its own (by
/// hand, or dropped from the template's outputs), it is said here.
fn deleted(observation: &ResourceObservation, plan: &mut ResourcePlanner) {
    plan.push(ResourceAction::RemoveFinalizer);
    if !owner_is_being_deleted(observation) {
        plan.event(
            EventType::Normal,
            "RadiusResourceDeleted",
            format!("deleted {} in Radius", observation.radius_id),
        );
    }
}

/// True if the resource's controller owner template is the one found under
/// its name and is being deleted.
fn owner_is_being_deleted(observation: &ResourceObservation) -> bool {
    observation.owner.as_ref().is_some_and(|owner| {
        owner.deletion_requested && owner.found_uid.as_ref() == Some(&owner.reference_uid)
    })
}

fn deleting(observation: &ResourceObservation, plan: &mut ResourcePlanner, message: String) {
    plan.status(
        &observation.status,
        DesiredResourceStatus {
            phase: Some(ResourcePhase::Deleting),
            message: Some(message.clone()),
            ready: Some(ready_condition(
                ConditionStatus::False,
                "Deleting",
                &message,
            )),
            clear_operation: false,
        },
    );
}

fn delete_failed(observation: &ResourceObservation, plan: &mut ResourcePlanner, message: String) {
    plan.status(
        &observation.status,
        DesiredResourceStatus {
            phase: Some(ResourcePhase::Failed),
            message: Some(message.clone()),
            ready: Some(ready_condition(
                ConditionStatus::False,
                "DeleteFailed",
                &message,
            )),
            clear_operation: true,
        },
    );
    plan.event(EventType::Warning, "DeleteFailed", message);
    plan.requeue(DELETE_RETRY_MS);
}

/// Only delete a Radius resource that this template put there: controlled by
/// an existing template with the same uid, inside its deployment scope, and
/// neither object asks to leave Radius alone. `Err` says why not.
pub fn may_delete_in_radius(observation: &ResourceObservation) -> Result<(), String> {
    let Some(owner) = &observation.owner else {
        return Err("it has no controller owner template".to_string());
    };
    match &owner.found_uid {
        None => {
            return Err(format!(
                "its owner template {} no longer exists",
                owner.name
            ));
        }
        Some(uid) if *uid != owner.reference_uid => {
            return Err(format!(
                "template {} was replaced by another object (uid {uid})",
                owner.name
            ));
        }
        Some(_) => {}
    }
    for (whose, annotations) in [
        ("template", &owner.annotations),
        ("resource", &observation.meta.annotations),
    ] {
        match annotations::reconcile_mode(annotations) {
            Ok(ReconcileMode::Manage) => {}
            Ok(ReconcileMode::Skip) => {
                return Err(format!("the {whose}'s reconcile-policy is skip"));
            }
            Ok(ReconcileMode::DetachOnDelete) => {
                return Err(format!(
                    "the {whose}'s reconcile-policy is detach-on-delete"
                ));
            }
            Err(message) => {
                return Err(format!("the {whose} has an invalid annotation ({message})"));
            }
        }
    }
    let scope =
        spec::deployment_scope(&owner.provider_config).map_err(|error| format!("owner {error}"))?;
    if !spec::scope_contains(&scope, &observation.radius_id) {
        return Err(format!(
            "it is outside the template's deployment scope {scope}"
        ));
    }
    Ok(())
}
