//! The default decision for a `DeploymentTemplate`: deploy, follow, settle
//! and delete, with what running Radius taught (no redeploy without change, empty
//! output means "remove everything", `ReadyPendingCleanup`, safe delete order).
//!
//! [`decide`] reads the annotations and checks the spec, then hands over to
//! one of:
//! - `follow`: a deployment Radius is running or has ended (succeeded,
//!   failed, refused, canceled, lost);
//! - `deploy`: no deployment running: settle an up-to-date spec, or pass the
//!   gates (retry backoff, dependencies, deletions and tracking first) and
//!   start one;
//! - `delete`: the template is being deleted: its resources in safe order,
//!   then its finalizer.
//!
//! `converge` keeps the `DeploymentResource`s in line with a deployment's
//! output list, and `drift` answers resources found missing in Radius.

mod converge;
mod delete;
mod deploy;
mod drift;
mod follow;

use radwasm_policy_model::{
    ConditionStatus, EventType, OperationKind, PolicyError, TEMPLATE_FINALIZER, TemplateAction,
    TemplateObservation, TemplatePhase, TemplatePlan,
};

use crate::annotations::{self, INVALID_ANNOTATION, Knob};
use crate::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
use crate::spec;

pub use converge::{INVALID_OUTPUT_RESOURCE, QUOTED_ID_CHARS};
pub use delete::DELETING_MESSAGE;
pub use drift::DRIFT_DETECTED;
pub use follow::KEEP_DEPLOYMENT_RECORDS;

use deploy::settle_or_deploy;
use follow::follow_deployment;

/// Decide what to do next for one template.
pub fn decide(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
    let mut plan = TemplatePlanner::new();
    let meta = &observation.meta;
    let has_finalizer = meta.finalizers.iter().any(|f| f == TEMPLATE_FINALIZER);

    if meta.deletion_requested && !has_finalizer {
        // Nothing of ours is left to clean up; Kubernetes deletes the object.
        return Ok(plan.finish());
    }
    // Each knob is read once, where the decision first needs it; a value not
    // understood is taken as the knob's default and warned about.
    let held = annotations::hold(&meta.annotations);
    warn_about(&held, &mut plan);
    if held.value {
        hold(observation, &mut plan);
        return Ok(plan.finish());
    }
    let mode = match annotations::reconcile_mode(&meta.annotations) {
        Ok(mode) => mode,
        Err(message) => {
            fail(observation, &mut plan, INVALID_ANNOTATION, message);
            return Ok(plan.finish());
        }
    };
    if meta.deletion_requested {
        delete::delete(observation, mode, &mut plan);
        return Ok(plan.finish());
    }
    let retry = annotations::deployment_retry(&meta.annotations);
    warn_about(&retry, &mut plan);
    let retry = retry.value;

    if !has_finalizer {
        plan.push(TemplateAction::AddFinalizer);
    }
    // A spec Radius already accepted (its hash is the one deployed, or the
    // one being deployed) was valid then and is byte-for-byte the same now:
    // only its scope is needed, not another scan of the whole template.
    let accepted = observation.status.status_hash.as_deref()
        == Some(observation.spec_hash.as_str())
        || observation.operation.as_ref().is_some_and(|op| {
            op.kind == OperationKind::Deployment && op.subject == observation.spec_hash
        });
    let checked = if accepted && !observation.spec_hash.is_empty() {
        spec::deployment_scope(&observation.spec.provider_config)
            .map(|scope| spec::ValidSpec { scope })
    } else {
        spec::validate(&observation.spec)
    };
    let valid = match checked {
        Ok(valid) => valid,
        Err(error) => {
            fail(observation, &mut plan, "InvalidSpec", error.to_string());
            return Ok(plan.finish());
        }
    };

    match &observation.operation {
        Some(operation) if operation.kind == OperationKind::Deployment => {
            follow_deployment(
                observation,
                &operation.subject,
                &operation.result,
                retry,
                &mut plan,
            );
        }
        Some(_) => {
            // A deletion operation is never recorded on a template; forget it.
            plan.status(
                &observation.status,
                DesiredTemplateStatus {
                    clear_operation: true,
                    ..Default::default()
                },
            );
            plan.requeue(0);
        }
        None => settle_or_deploy(observation, mode, retry, &valid.scope, &mut plan),
    }
    Ok(plan.finish())
}

/// The Warning event for an annotation value not understood.
fn warn_about<T>(knob: &Knob<T>, plan: &mut TemplatePlanner) {
    if let Some(warning) = &knob.warning {
        plan.event(EventType::Warning, INVALID_ANNOTATION, warning.clone());
    }
}

fn hold(observation: &TemplateObservation, plan: &mut TemplatePlanner) {
    let message = "held by annotation radapp.io/hold; remove it to resume".to_string();
    let changed = plan.status(
        &observation.status,
        DesiredTemplateStatus {
            phase: Some(TemplatePhase::Held),
            message: Some(message.clone()),
            observed_generation: Some(observation.meta.generation),
            ready: Some(ready_condition(ConditionStatus::False, "Held", &message)),
            ..Default::default()
        },
    );
    if changed {
        plan.event(EventType::Normal, "Held", message);
    }
}

/// Mark the template Failed at this generation with `message`; an event only
/// when this is news.
fn fail(
    observation: &TemplateObservation,
    plan: &mut TemplatePlanner,
    reason: &str,
    message: String,
) {
    let changed = plan.status(
        &observation.status,
        DesiredTemplateStatus {
            phase: Some(TemplatePhase::Failed),
            message: Some(message.clone()),
            observed_generation: Some(observation.meta.generation),
            ready: Some(ready_condition(ConditionStatus::False, reason, &message)),
            ..Default::default()
        },
    );
    if changed {
        plan.event(EventType::Warning, reason, message);
    }
}

/// Most `DeploymentResource` creations, and most deletions, one plan asks
/// for: the host refuses plans of more than 1,024 actions, so a template
/// with more outputs than that converges over several decisions instead.
pub const MAX_CHANGES_PER_PLAN: usize = 500;
