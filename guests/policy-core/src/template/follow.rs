//! Following a deployment Radius runs for the template: wait while it runs,
//! record what it made when it succeeds, retry with backoff when it fails.

use radwasm_policy_model::{
    ConditionStatus, EventType, OperationResult, TemplateAction, TemplateObservation, TemplatePhase,
};

use super::converge::{INVALID_OUTPUT_RESOURCE, converge, ready_for};
use crate::annotations::DeploymentRetry;
use crate::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
use crate::timing::{POLL_ERROR_RETRY_MS, POLL_MIN_MS, poll_after};

/// Deployment records kept while a template lives: the current one and the
/// one before it.
pub const KEEP_DEPLOYMENT_RECORDS: usize = 2;

/// Answer what Radius says of the deployment of the spec whose hash is
/// `deployed_hash` (recorded in status as the template's operation).
pub(super) fn follow_deployment(
    observation: &TemplateObservation,
    deployed_hash: &str,
    result: &OperationResult,
    retry: DeploymentRetry,
    plan: &mut TemplatePlanner,
) {
    match result {
        OperationResult::InProgress { retry_after_ms } => {
            deployment_running(observation, *retry_after_ms, plan);
        }
        OperationResult::PollError(reason) => {
            plan.status(
                &observation.status,
                DesiredTemplateStatus {
                    message: Some(format!(
                        "cannot poll the Radius deployment yet ({reason}); retrying"
                    )),
                    ..Default::default()
                },
            );
            plan.requeue(POLL_ERROR_RETRY_MS);
        }
        OperationResult::Succeeded { output_resources } => {
            deployment_succeeded(observation, deployed_hash, output_resources, plan);
        }
        OperationResult::Failed(error) => {
            let message = format!("deployment failed: {}: {}", error.code, error.message);
            deployment_ended_badly(
                observation,
                deployed_hash,
                retry,
                plan,
                "DeploymentFailed",
                message,
            );
        }
        OperationResult::Refused(error) => {
            let message = format!(
                "Radius refused the deployment: {}: {}",
                error.code, error.message
            );
            deployment_ended_badly(
                observation,
                deployed_hash,
                retry,
                plan,
                "DeploymentFailed",
                message,
            );
        }
        OperationResult::Canceled => {
            deployment_ended_badly(
                observation,
                deployed_hash,
                retry,
                plan,
                "DeploymentCanceled",
                "deployment was canceled".to_string(),
            );
        }
        OperationResult::NotFound => deployment_lost(observation, plan),
    }
}

/// The status of a template whose current spec is being deployed:
/// `Updating`, not Ready for `Deploying`, saying `message`.
fn deploying_status(message: String) -> DesiredTemplateStatus {
    DesiredTemplateStatus {
        phase: Some(TemplatePhase::Updating),
        ready: Some(ready_condition(
            ConditionStatus::False,
            "Deploying",
            &message,
        )),
        message: Some(message),
        ..Default::default()
    }
}

/// `Updating`, not Ready (`Deploying`), polled again when Radius suggests.
fn deployment_running(
    observation: &TemplateObservation,
    retry_after_ms: Option<u32>,
    plan: &mut TemplatePlanner,
) {
    let generation = observation.meta.generation;
    let message = format!("deploying generation {generation}");
    plan.status(&observation.status, deploying_status(message));
    plan.requeue(poll_after(retry_after_ms));
}

/// The deployment succeeded: track its output resources, then record it in
/// status (Ready, or what still stands in the way).
fn deployment_succeeded(
    observation: &TemplateObservation,
    deployed_hash: &str,
    output_resources: &[String],
    plan: &mut TemplatePlanner,
) {
    let converged = converge(observation, output_resources, plan);
    if converged.stale_left {
        // The operation (and the output list it replaces) is kept
        // until every resource it drops is being deleted: the list
        // is what says the unlabelled ones were this template's.
        plan.requeue(POLL_MIN_MS);
        return;
    }
    plan.event(
        EventType::Normal,
        "DeploymentSucceeded",
        format!(
            "deployment succeeded with {} resources",
            output_resources.len()
        ),
    );
    if let Some(warning) = &converged.refused {
        plan.event(EventType::Warning, INVALID_OUTPUT_RESOURCE, warning.clone());
    }
    if deployed_hash != observation.spec_hash {
        earlier_spec_deployed(observation, deployed_hash, output_resources, plan);
        return;
    }
    let ready = ready_for(converged.phase, &converged.message);
    plan.status(
        &observation.status,
        DesiredTemplateStatus {
            phase: Some(converged.phase),
            message: Some(converged.message),
            observed_generation: Some(observation.meta.generation),
            // A resource the spec lists again while its old
            // DeploymentResource is still being deleted is gone from
            // Radius once that finishes: deploy again then.
            status_hash: Some(if converged.redeploy {
                String::new()
            } else {
                deployed_hash.to_string()
            }),
            output_resources: Some(output_resources.to_vec()),
            ready: Some(ready),
            clear_operation: true,
        },
    );
    delete_old_deployment_records(observation, plan);
}

/// The spec changed while Radius deployed an older one: record what is in
/// Radius, but this generation is not deployed, so it is neither observed
/// nor Ready yet; deploy it next.
fn earlier_spec_deployed(
    observation: &TemplateObservation,
    deployed_hash: &str,
    output_resources: &[String],
    plan: &mut TemplatePlanner,
) {
    let generation = observation.meta.generation;
    let message = format!("an earlier spec was deployed; deploying generation {generation} next");
    plan.status(
        &observation.status,
        DesiredTemplateStatus {
            status_hash: Some(deployed_hash.to_string()),
            output_resources: Some(output_resources.to_vec()),
            clear_operation: true,
            ..deploying_status(message.clone())
        },
    );
    plan.requeue(0);
}

/// Keep the records of the last few deployments
/// ([`KEEP_DEPLOYMENT_RECORDS`]); older ones only pile up in Radius.
fn delete_old_deployment_records(observation: &TemplateObservation, plan: &mut TemplatePlanner) {
    let surplus = observation
        .deployments
        .len()
        .saturating_sub(KEEP_DEPLOYMENT_RECORDS);
    for id in observation.deployments.iter().take(surplus) {
        plan.push(TemplateAction::DeleteDeployment(id.clone()));
    }
}

/// Radius no longer knows the operation: forget it and deploy again.
fn deployment_lost(observation: &TemplateObservation, plan: &mut TemplatePlanner) {
    let message = "Radius no longer knows the deployment operation; deploying again".to_string();
    plan.status(
        &observation.status,
        DesiredTemplateStatus {
            message: Some(message.clone()),
            clear_operation: true,
            ..Default::default()
        },
    );
    plan.event(EventType::Warning, crate::resource::OPERATION_LOST, message);
    plan.requeue(0);
}

/// The deployment failed, was refused or canceled: `Failed` at this
/// generation with a retry after the backoff `retry` sets, or, when it was an
/// earlier spec's, deploy the current one at once.
fn deployment_ended_badly(
    observation: &TemplateObservation,
    deployed_hash: &str,
    retry: DeploymentRetry,
    plan: &mut TemplatePlanner,
    reason: &str,
    mut message: String,
) {
    if deployed_hash != observation.spec_hash {
        // It was an older spec that failed; the current one has not been
        // tried. Say so, and deploy the current spec now: the failure
        // belongs to no generation the status describes.
        let generation = observation.meta.generation;
        let message = format!("{message} (an earlier spec); deploying generation {generation}");
        plan.status(
            &observation.status,
            DesiredTemplateStatus {
                clear_operation: true,
                ..deploying_status(message.clone())
            },
        );
        plan.event(EventType::Warning, reason, message);
        plan.requeue(0);
        return;
    }
    let failures = failures_of(observation);
    let next = retry.delay_ms(failures);
    if let Some(delay) = next {
        message.push_str(&format!(
            "; retrying in {} (attempt {})",
            human_ms(delay),
            failures.saturating_add(1)
        ));
    }
    plan.status(
        &observation.status,
        DesiredTemplateStatus {
            phase: Some(TemplatePhase::Failed),
            message: Some(message.clone()),
            observed_generation: Some(observation.meta.generation),
            ready: Some(ready_condition(ConditionStatus::False, reason, &message)),
            clear_operation: true,
            ..Default::default()
        },
    );
    plan.event(EventType::Warning, reason, message);
    if let Some(delay) = next {
        plan.requeue(u32::try_from(delay).unwrap_or(u32::MAX));
    }
}

/// Failed deployments of the observed spec in a row, counting the one this
/// observation reports (the host keeps the count in status).
fn failures_of(observation: &TemplateObservation) -> u32 {
    observation
        .last_failure
        .as_ref()
        .filter(|failure| failure.subject == observation.spec_hash)
        .map_or(1, |failure| failure.count.max(1))
}

/// `30s`, `2m`, `1m30s`: a delay for people.
fn human_ms(ms: u64) -> String {
    let seconds = ms.div_ceil(1000);
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}
