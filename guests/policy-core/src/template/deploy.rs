//! No deployment is running: settle a spec Radius already has, or pass the
//! gates before deploying (retry backoff, `radapp.io/depends-on`, deletions
//! and tracking of earlier resources) and start one.

use radwasm_policy_model::{
    ConditionStatus, CreateResource, EventType, StartDeployment, TemplateAction,
    TemplateObservation, TemplatePhase, TemplateStatus,
};

use super::converge::{INVALID_OUTPUT_RESOURCE, Refused, converge, ready_for};
use super::drift::{drifted, missing_since_deployed};
use super::{MAX_CHANGES_PER_PLAN, fail};
use crate::annotations::{self, DeploymentRetry, INVALID_ANNOTATION, ReconcileMode};
use crate::naming::{self, IdSet};
use crate::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
use crate::timing::{CLEANUP_RECHECK_MS, DEPENDENCY_WAIT_MS, POLL_DEFAULT_MS, POLL_MIN_MS};

/// No operation is recorded: observe only (`skip`), settle a spec already
/// deployed, or deploy this one once nothing stands in the way.
pub(super) fn settle_or_deploy(
    observation: &TemplateObservation,
    mode: ReconcileMode,
    retry: DeploymentRetry,
    scope: &str,
    plan: &mut TemplatePlanner,
) {
    let status = &observation.status;
    let up_to_date = status.status_hash.as_deref() == Some(observation.spec_hash.as_str());
    if mode == ReconcileMode::Skip {
        observe_only(observation, up_to_date, plan);
        return;
    }
    if up_to_date {
        settle(observation, plan);
        return;
    }
    // Each gate below either lets the deployment through or plans what this
    // decision does instead (and says so by returning true).
    if retry_not_due(observation, retry, plan) {
        return;
    }
    let Some(depends_on) = dependencies_named(observation, plan) else {
        return;
    };
    if waiting_for_deletions(observation, plan)
        || tracking_last_outputs(observation, plan)
        || waiting_for_dependencies(observation, depends_on, plan)
    {
        return;
    }
    start_deployment(observation, scope, plan);
}

/// `reconcile-policy: skip`: say so (and whether the spec has changes not
/// deployed); nothing is changed in Radius.
fn observe_only(observation: &TemplateObservation, up_to_date: bool, plan: &mut TemplatePlanner) {
    let mut message =
        "reconcile-policy is skip: observing only, no changes are made in Radius".to_string();
    if !up_to_date {
        message.push_str("; the spec has changes that are not deployed");
    }
    plan.status(
        &observation.status,
        DesiredTemplateStatus {
            message: Some(message.clone()),
            observed_generation: Some(observation.meta.generation),
            ready: Some(ready_condition(
                ConditionStatus::Unknown,
                "ReconcileSkipped",
                &message,
            )),
            ..Default::default()
        },
    );
}

/// Nothing to deploy: keep the `DeploymentResource`s in line with the last
/// output and settle the phase (or answer drift, once Ready).
fn settle(observation: &TemplateObservation, plan: &mut TemplatePlanner) {
    let status = &observation.status;
    let converged = converge(observation, &status.output_resources, plan);
    if converged.phase == TemplatePhase::Ready {
        let missing = missing_since_deployed(observation);
        if !missing.is_empty() {
            drifted(observation, &missing, plan);
            return;
        }
    }
    let ready = ready_for(converged.phase, &converged.message);
    let changed = plan.status(
        status,
        DesiredTemplateStatus {
            phase: Some(converged.phase),
            message: Some(converged.message),
            observed_generation: Some(observation.meta.generation),
            // See follow_deployment: deploy again once the old
            // DeploymentResource of a re-added resource is gone.
            status_hash: converged.redeploy.then(String::new),
            ready: Some(ready),
            ..Default::default()
        },
    );
    // The message counts refused output ids; warn when that is news.
    if let Some(warning) = converged.refused.filter(|_| changed) {
        plan.event(EventType::Warning, INVALID_OUTPUT_RESOURCE, warning);
    }
}

/// True if this very spec failed to deploy at this generation and its retry
/// is not due: requeued for when it is, or not at all with `never`.
fn retry_not_due(
    observation: &TemplateObservation,
    retry: DeploymentRetry,
    plan: &mut TemplatePlanner,
) -> bool {
    let status = &observation.status;
    if status.phase != Some(TemplatePhase::Failed)
        || status.observed_generation != observation.meta.generation
    {
        return false;
    }
    // Failed at this generation. A deployment of this very spec that
    // Radius failed (or refused) is retried with backoff (the host says
    // how long ago it failed), or never. Any other failure is decided
    // afresh: one the host wrote (no policy decided, or its plan was
    // refused), a custom rule's refusal, which may read labels or
    // annotations (they change without a new generation), an invalid
    // annotation. The same input gives the same answer, so deciding
    // again costs a decision and writes nothing.
    let Some(failure) = observation
        .last_failure
        .as_ref()
        .filter(|failure| failure.subject == observation.spec_hash)
    else {
        return false;
    };
    let Some(delay) = retry.delay_ms(failure.count) else {
        return true;
    };
    if failure.age_ms < delay {
        plan.requeue(u32::try_from(delay - failure.age_ms).unwrap_or(u32::MAX));
        return true;
    }
    false
}

/// The template names `radapp.io/depends-on` lists; `None` (and the
/// template Failed) if one is not a valid object name or they make a cycle.
fn dependencies_named(
    observation: &TemplateObservation,
    plan: &mut TemplatePlanner,
) -> Option<Vec<String>> {
    let depends_on = match annotations::depends_on_checked(&observation.meta.annotations) {
        Ok(names) => names,
        Err(bad) => {
            let message = format!(
                "annotation {} lists {}, which is not a valid object name (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)",
                radwasm_policy_model::annotations::DEPENDS_ON,
                crate::plan::quote(bad, 64)
            );
            fail(observation, plan, INVALID_ANNOTATION, message);
            return None;
        }
    };
    if !observation.dependency_cycle.is_empty() {
        fail(
            observation,
            plan,
            "DependencyCycle",
            format!(
                "annotation radapp.io/depends-on makes a cycle ({}); it would wait for ever",
                observation.dependency_cycle.join(" -> ")
            ),
        );
        return None;
    }
    Some(depends_on)
}

/// `Updating` at this generation, not Ready (`WaitingForCleanup`): the
/// deployment waits until earlier resources are deleted or tracked.
fn waiting_for_cleanup(
    status: &TemplateStatus,
    generation: i64,
    message: String,
    plan: &mut TemplatePlanner,
) {
    plan.status(
        status,
        DesiredTemplateStatus::not_ready(
            TemplatePhase::Updating,
            generation,
            "WaitingForCleanup",
            message,
        ),
    );
}

/// True if some of this template's `DeploymentResource`s are still being
/// deleted: no deployment until they are gone.
///
/// Which resources a spec makes is known only once it is deployed; one it
/// makes again while its old tracker's DELETE runs could be deleted behind
/// its back, or its tracker would find it back and delete it again. So every
/// deletion ends first.
fn waiting_for_deletions(observation: &TemplateObservation, plan: &mut TemplatePlanner) -> bool {
    let draining = observation
        .owned_resources
        .iter()
        .filter(|r| r.deletion_requested)
        .count();
    if draining == 0 {
        return false;
    }
    let message = format!(
        "waiting for {draining} DeploymentResources being deleted to finish before deploying"
    );
    waiting_for_cleanup(
        &observation.status,
        observation.meta.generation,
        message,
        plan,
    );
    plan.requeue(CLEANUP_RECHECK_MS);
    true
}

/// True if some resources the last deployment produced have no
/// `DeploymentResource` yet: this decision creates them (at most
/// [`MAX_CHANGES_PER_PLAN`]) and deploys later.
///
/// Every resource the last deployment produced is tracked before another
/// deployment replaces that list. One produced again while its old
/// `DeploymentResource` was being deleted got none; a next spec that drops
/// it would leave it in Radius with nothing to delete it.
fn tracking_last_outputs(observation: &TemplateObservation, plan: &mut TemplatePlanner) -> bool {
    let status = &observation.status;
    let tracked: IdSet = observation
        .owned_resources
        .iter()
        .map(|r| r.radius_id.as_str())
        .collect();
    let mut refused = Refused::default();
    let untracked: Vec<&String> = status
        .output_resources
        .iter()
        .filter(|id| !tracked.contains(id) && refused.admits(id))
        .take(MAX_CHANGES_PER_PLAN)
        .collect();
    if untracked.is_empty() {
        return false;
    }
    let message = format!(
        "tracking {} resources the last deployment made before deploying",
        untracked.len()
    );
    for id in untracked {
        plan.push(TemplateAction::CreateResource(CreateResource {
            name: naming::resource_object_name(id),
            radius_id: id.clone(),
        }));
    }
    waiting_for_cleanup(status, observation.meta.generation, message, plan);
    plan.requeue(POLL_MIN_MS);
    true
}

/// True if a template `depends_on` names is not Ready yet: `Updating`
/// (`WaitingForDependencies`), checked again later.
///
/// The annotation is the source of truth for what is awaited; the host
/// reports what it found for each name, and a name it did not report counts
/// as not found.
fn waiting_for_dependencies(
    observation: &TemplateObservation,
    depends_on: Vec<String>,
    plan: &mut TemplatePlanner,
) -> bool {
    let waiting: Vec<String> = depends_on
        .into_iter()
        .filter_map(|name| {
            let found = observation
                .dependencies
                .iter()
                .find(|dependency| dependency.name == name);
            match found.map(|dependency| (dependency.exists, dependency.phase)) {
                Some((true, Some(TemplatePhase::Ready))) => None,
                None | Some((false, _)) => Some(format!("{name} (not found)")),
                Some((true, Some(phase))) => Some(format!("{name} ({phase})")),
                Some((true, None)) => Some(format!("{name} (no phase yet)")),
            }
        })
        .collect();
    if waiting.is_empty() {
        return false;
    }
    let message = format!("waiting for dependencies: {}", waiting.join(", "));
    let changed = plan.status(
        &observation.status,
        DesiredTemplateStatus::not_ready(
            TemplatePhase::Updating,
            observation.meta.generation,
            "WaitingForDependencies",
            message.clone(),
        ),
    );
    if changed {
        plan.event(EventType::Normal, "WaitingForDependencies", message);
    }
    plan.requeue(DEPENDENCY_WAIT_MS);
    true
}

/// Make sure the resource group exists and start deploying this spec into
/// `scope`; polled after [`POLL_DEFAULT_MS`].
fn start_deployment(observation: &TemplateObservation, scope: &str, plan: &mut TemplatePlanner) {
    let generation = observation.meta.generation;
    let deployment_name = naming::deployment_name(&observation.meta.name, &observation.spec_hash);
    plan.push(TemplateAction::EnsureResourceGroup(scope.to_string()));
    plan.push(TemplateAction::StartDeployment(StartDeployment {
        scope: scope.to_string(),
        deployment_name: deployment_name.clone(),
    }));
    plan.status(
        &observation.status,
        DesiredTemplateStatus::not_ready(
            TemplatePhase::Updating,
            generation,
            "Deploying",
            format!("deploying generation {generation}"),
        ),
    );
    plan.event(
        EventType::Normal,
        "DeploymentStarted",
        format!("deploying generation {generation} as {deployment_name} into {scope}"),
    );
    plan.requeue(POLL_DEFAULT_MS);
}
