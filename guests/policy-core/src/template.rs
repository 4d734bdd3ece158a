//! The default decision for a `DeploymentTemplate`: deploy, follow, settle
//! and delete, with what running Radius taught (no redeploy without change, empty
//! output means "remove everything", `ReadyPendingCleanup`, safe delete order).

use radwasm_policy_model::annotations::deletion_tally;
use radwasm_policy_model::scope::parse_resource_id;
use radwasm_policy_model::{
    ConditionStatus, CreateResource, EventType, OperationKind, OperationResult, OwnedResource,
    PolicyError, StartDeployment, TEMPLATE_FINALIZER, TemplateAction, TemplateObservation,
    TemplatePhase, TemplatePlan,
};

use crate::annotations::{
    self, DeploymentRetry, DriftMode, INVALID_ANNOTATION, Knob, ReconcileMode,
};
use crate::naming::{self, IdSet};
use crate::plan::{DesiredTemplateStatus, TemplatePlanner, ready_condition};
use crate::spec;
use crate::timing::{
    CLEANUP_RECHECK_MS, DELETING_RECHECK_MS, DEPENDENCY_WAIT_MS, POLL_DEFAULT_MS,
    POLL_ERROR_RETRY_MS, POLL_MIN_MS, poll_after,
};

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
        delete(observation, mode, &mut plan);
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

/// `Updating` at this generation, not Ready (`WaitingForCleanup`): the
/// deployment waits until earlier resources are deleted or tracked.
fn waiting_for_cleanup(
    status: &radwasm_policy_model::TemplateStatus,
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

fn follow_deployment(
    observation: &TemplateObservation,
    deployed_hash: &str,
    result: &OperationResult,
    retry: DeploymentRetry,
    plan: &mut TemplatePlanner,
) {
    let generation = observation.meta.generation;
    match result {
        OperationResult::InProgress { retry_after_ms } => {
            let message = format!("deploying generation {generation}");
            plan.status(
                &observation.status,
                DesiredTemplateStatus {
                    phase: Some(TemplatePhase::Updating),
                    message: Some(message.clone()),
                    ready: Some(ready_condition(
                        ConditionStatus::False,
                        "Deploying",
                        &message,
                    )),
                    ..Default::default()
                },
            );
            plan.requeue(poll_after(*retry_after_ms));
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
                // The spec changed while Radius deployed an older one: record
                // what is in Radius, but this generation is not deployed, so
                // it is neither observed nor Ready yet.
                let message =
                    format!("an earlier spec was deployed; deploying generation {generation} next");
                plan.status(
                    &observation.status,
                    DesiredTemplateStatus {
                        phase: Some(TemplatePhase::Updating),
                        message: Some(message.clone()),
                        status_hash: Some(deployed_hash.to_string()),
                        output_resources: Some(output_resources.clone()),
                        ready: Some(ready_condition(
                            ConditionStatus::False,
                            "Deploying",
                            &message,
                        )),
                        clear_operation: true,
                        ..Default::default()
                    },
                );
                plan.requeue(0);
                return;
            }
            let ready = ready_for(converged.phase, &converged.message);
            plan.status(
                &observation.status,
                DesiredTemplateStatus {
                    phase: Some(converged.phase),
                    message: Some(converged.message),
                    observed_generation: Some(generation),
                    // A resource the spec lists again while its old
                    // DeploymentResource is still being deleted is gone from
                    // Radius once that finishes: deploy again then.
                    status_hash: Some(if converged.redeploy {
                        String::new()
                    } else {
                        deployed_hash.to_string()
                    }),
                    output_resources: Some(output_resources.clone()),
                    ready: Some(ready),
                    clear_operation: true,
                },
            );
            // Keep the records of the last few deployments; older ones only
            // pile up in Radius.
            let surplus = observation
                .deployments
                .len()
                .saturating_sub(KEEP_DEPLOYMENT_RECORDS);
            for id in observation.deployments.iter().take(surplus) {
                plan.push(TemplateAction::DeleteDeployment(id.clone()));
            }
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
        OperationResult::NotFound => {
            let message =
                "Radius no longer knows the deployment operation; deploying again".to_string();
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
    }
}

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
                phase: Some(TemplatePhase::Updating),
                message: Some(message.clone()),
                ready: Some(ready_condition(
                    ConditionStatus::False,
                    "Deploying",
                    &message,
                )),
                clear_operation: true,
                ..Default::default()
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

/// Deployment records kept while a template lives: the current one and the
/// one before it.
pub const KEEP_DEPLOYMENT_RECORDS: usize = 2;

fn ready_for(phase: TemplatePhase, message: &str) -> radwasm_policy_model::Condition {
    match phase {
        TemplatePhase::Ready => ready_condition(ConditionStatus::True, "Deployed", message),
        TemplatePhase::Updating => ready_condition(ConditionStatus::False, "Creating", message),
        _ => ready_condition(ConditionStatus::False, "PendingCleanup", message),
    }
}

fn settle_or_deploy(
    observation: &TemplateObservation,
    mode: ReconcileMode,
    retry: DeploymentRetry,
    scope: &str,
    plan: &mut TemplatePlanner,
) {
    let status = &observation.status;
    let generation = observation.meta.generation;
    let up_to_date = status.status_hash.as_deref() == Some(observation.spec_hash.as_str());

    if mode == ReconcileMode::Skip {
        let mut message =
            "reconcile-policy is skip: observing only, no changes are made in Radius".to_string();
        if !up_to_date {
            message.push_str("; the spec has changes that are not deployed");
        }
        plan.status(
            status,
            DesiredTemplateStatus {
                message: Some(message.clone()),
                observed_generation: Some(generation),
                ready: Some(ready_condition(
                    ConditionStatus::Unknown,
                    "ReconcileSkipped",
                    &message,
                )),
                ..Default::default()
            },
        );
        return;
    }

    if up_to_date {
        // Nothing to deploy: keep the DeploymentResources in line
        // with the last output and settle the phase.
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
                observed_generation: Some(generation),
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
        return;
    }

    if status.phase == Some(TemplatePhase::Failed) && status.observed_generation == generation {
        // Failed at this generation. A deployment of this very spec that
        // Radius failed (or refused) is retried with backoff (the host says
        // how long ago it failed), or never. Any other failure is decided
        // afresh: one the host wrote (no policy decided, or its plan was
        // refused), a custom rule's refusal, which may read labels or
        // annotations (they change without a new generation), an invalid
        // annotation. The same input gives the same answer, so deciding
        // again costs a decision and writes nothing.
        if let Some(failure) = observation
            .last_failure
            .as_ref()
            .filter(|failure| failure.subject == observation.spec_hash)
        {
            let Some(delay) = retry.delay_ms(failure.count) else {
                return;
            };
            if failure.age_ms < delay {
                plan.requeue(u32::try_from(delay - failure.age_ms).unwrap_or(u32::MAX));
                return;
            }
        }
    }

    let depends_on = match annotations::depends_on_checked(&observation.meta.annotations) {
        Ok(names) => names,
        Err(bad) => {
            let message = format!(
                "annotation {} lists {}, which is not a valid object name (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)",
                radwasm_policy_model::annotations::DEPENDS_ON,
                crate::plan::quote(bad, 64)
            );
            fail(observation, plan, INVALID_ANNOTATION, message);
            return;
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
        return;
    }

    // No deployment while any of this template's DeploymentResources is
    // still being deleted. Which resources a spec makes is known only once
    // it is deployed; one it makes again while its old tracker's DELETE
    // runs could be deleted behind its back, or its tracker would find it
    // back and delete it again. So every deletion ends first.
    let draining = observation
        .owned_resources
        .iter()
        .filter(|r| r.deletion_requested)
        .count();
    if draining > 0 {
        let message = format!(
            "waiting for {draining} DeploymentResources being deleted to finish before deploying"
        );
        waiting_for_cleanup(status, generation, message, plan);
        plan.requeue(CLEANUP_RECHECK_MS);
        return;
    }

    // Every resource the last deployment produced is tracked before another
    // deployment replaces that list. One produced again while its old
    // DeploymentResource was being deleted got none; a next spec that drops
    // it would leave it in Radius with nothing to delete it.
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
    if !untracked.is_empty() {
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
        waiting_for_cleanup(status, generation, message, plan);
        plan.requeue(POLL_MIN_MS);
        return;
    }

    // The annotation is the source of truth for what is awaited; the host
    // reports what it found for each name, and a name it did not report
    // counts as not found.
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
    if !waiting.is_empty() {
        let message = format!("waiting for dependencies: {}", waiting.join(", "));
        let changed = plan.status(
            status,
            DesiredTemplateStatus::not_ready(
                TemplatePhase::Updating,
                generation,
                "WaitingForDependencies",
                message.clone(),
            ),
        );
        if changed {
            plan.event(EventType::Normal, "WaitingForDependencies", message);
        }
        plan.requeue(DEPENDENCY_WAIT_MS);
        return;
    }

    let deployment_name = naming::deployment_name(&observation.meta.name, &observation.spec_hash);
    plan.push(TemplateAction::EnsureResourceGroup(scope.to_string()));
    plan.push(TemplateAction::StartDeployment(StartDeployment {
        scope: scope.to_string(),
        deployment_name: deployment_name.clone(),
    }));
    plan.status(
        status,
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

/// The resources the host's drift check found missing in Radius after this
/// template's last deployment succeeded (after it was recorded at all, if no
/// success is recorded). One found missing before that deployment ended was
/// already answered by it: the next check of that resource says whether it
/// came back.
fn missing_since_deployed(observation: &TemplateObservation) -> Vec<&OwnedResource> {
    observation
        .owned_resources
        .iter()
        .filter(|r| {
            !r.deletion_requested
                && r.missing_age_ms.is_some_and(|missing| {
                    observation
                        .deployed_age_ms
                        .is_none_or(|deployed| missing < deployed)
                })
        })
        .collect()
}

/// Reason of the Event (and of the `Ready` condition) when resources the
/// template deployed are missing in Radius.
pub const DRIFT_DETECTED: &str = "DriftDetected";

/// Resources this template deployed are missing in Radius: deploy the spec
/// again (once: the redeploy's success is newer than what was found
/// missing), or with `radapp.io/drift: report` only say so.
fn drifted(
    observation: &TemplateObservation,
    missing: &[&OwnedResource],
    plan: &mut TemplatePlanner,
) {
    let status = &observation.status;
    let generation = observation.meta.generation;
    let mode = annotations::drift(&observation.meta.annotations);
    warn_about(&mode, plan);
    let found = format!(
        "{} of {} resources missing in Radius (first: {})",
        missing.len(),
        status.output_resources.len(),
        crate::plan::quote(&missing[0].radius_id, QUOTED_ID_CHARS)
    );
    match mode.value {
        DriftMode::Redeploy => {
            let message = format!("{found}; deploying generation {generation} again");
            plan.status(
                status,
                DesiredTemplateStatus {
                    // Not up to date any more: the next decision deploys
                    // through the usual path (dependencies, tracking first).
                    status_hash: Some(String::new()),
                    ..DesiredTemplateStatus::not_ready(
                        TemplatePhase::Updating,
                        generation,
                        DRIFT_DETECTED,
                        message.clone(),
                    )
                },
            );
            plan.event(EventType::Warning, DRIFT_DETECTED, message);
            plan.requeue(0);
        }
        DriftMode::Report => {
            let message = format!(
                "{found}; not redeployed ({} is report)",
                radwasm_policy_model::annotations::DRIFT
            );
            let changed = plan.status(
                status,
                DesiredTemplateStatus::not_ready(
                    TemplatePhase::Ready,
                    generation,
                    DRIFT_DETECTED,
                    message.clone(),
                ),
            );
            if changed {
                plan.event(EventType::Warning, DRIFT_DETECTED, message);
            }
        }
    }
}

/// What converging the owned `DeploymentResource`s came to.
struct Converged {
    phase: TemplatePhase,
    message: String,
    /// A resource the output lists is still owned by a `DeploymentResource`
    /// being deleted: when that deletion finishes, the resource is gone from
    /// Radius and the spec must be deployed again.
    redeploy: bool,
    /// Output ids that are not valid Radius ids, for a Warning event (see
    /// [`Refused`]); the message counts them too.
    refused: Option<String>,
    /// More stale `DeploymentResource`s than one plan deletes: the rest are
    /// asked to go by the next decision.
    stale_left: bool,
}

/// Reason of the Warning event for output ids that get no `DeploymentResource`.
pub const INVALID_OUTPUT_RESOURCE: &str = "InvalidOutputResource";

/// Longest part of a Radius id a message quotes (ids are rarely longer).
pub const QUOTED_ID_CHARS: usize = 256;

/// Output ids Radius reported that the scope grammar refuses. The host would
/// refuse a `createResource` for one, and with it the whole plan; they get no
/// `DeploymentResource` (so the template does not track or delete them) and
/// are reported instead.
#[derive(Default)]
struct Refused<'a> {
    ids: IdSet<'a>,
    first: Option<String>,
}

impl<'a> Refused<'a> {
    /// True if `id` is a valid Radius resource id; otherwise records it.
    fn admits(&mut self, id: &'a str) -> bool {
        if self.ids.contains(id) {
            return false;
        }
        let Err(error) = parse_resource_id(id) else {
            return true;
        };
        self.ids.insert(id);
        if self.first.is_none() {
            self.first = Some(format!(
                "{}: {}",
                crate::plan::quote(id, QUOTED_ID_CHARS),
                error.reason
            ));
        }
        false
    }

    /// A note for the status message, `None` if no id was refused.
    fn note(&self) -> Option<String> {
        (!self.ids.is_empty()).then(|| {
            format!(
                "{} of them not tracked (ids that are not valid Radius resource ids)",
                self.ids.len()
            )
        })
    }

    /// The Warning event's message, `None` if no id was refused.
    fn warning(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        Some(format!(
            "not tracking {} output resources whose ids are not valid Radius resource ids (no DeploymentResource, so the template does not delete them); the first: {first}",
            self.ids.len()
        ))
    }
}

/// Make the owned `DeploymentResource`s match `ids`: create the missing,
/// delete the extra (in safe order). Returns the phase and message that
/// describe the result.
fn converge(
    observation: &TemplateObservation,
    ids: &[String],
    plan: &mut TemplatePlanner,
) -> Converged {
    let owned = &observation.owned_resources;
    // Ids compare case-insensitively. Hashed sets avoid comparing every pair:
    // ids share long prefixes, so pairwise comparison is slow in wasm.
    let owned_ids: IdSet = owned.iter().map(|r| r.radius_id.as_str()).collect();
    let wanted_ids: IdSet = ids.iter().map(String::as_str).collect();
    let mut planned = IdSet::new();
    let mut refused = Refused::default();
    let mut deferred = 0;
    for id in ids {
        if owned_ids.contains(id) || planned.contains(id) || !refused.admits(id) {
            continue;
        }
        planned.insert(id);
        if planned.len() > MAX_CHANGES_PER_PLAN {
            deferred += 1;
            continue;
        }
        plan.push(TemplateAction::CreateResource(CreateResource {
            name: naming::resource_object_name(id),
            radius_id: id.clone(),
        }));
    }
    let stale: Vec<&radwasm_policy_model::OwnedResource> = owned
        .iter()
        .filter(|resource| !wanted_ids.contains(&resource.radius_id))
        .collect();
    // Every stale resource is asked to go at once, not wave by wave: once
    // `outputResources` no longer lists one, only the `radapp.io/template-uid`
    // label says it was this template's (the host puts it on the objects
    // Radius's controller created before a status write drops them from the
    // list). The host holds each application's and environment's Radius
    // DELETE until the template's other resources being deleted are gone.
    let mut stale_left = false;
    for (asked, resource) in stale.iter().filter(|r| !r.deletion_requested).enumerate() {
        if asked == MAX_CHANGES_PER_PLAN {
            stale_left = true;
            break;
        }
        plan.push(TemplateAction::DeleteResource(resource.name.clone()));
    }
    let reappearing = owned
        .iter()
        .filter(|r| r.deletion_requested && wanted_ids.contains(&r.radius_id))
        .count();
    let (phase, mut message, redeploy) = if reappearing > 0 {
        plan.requeue(CLEANUP_RECHECK_MS);
        (
            TemplatePhase::Updating,
            format!(
                "{} resources deployed; {reappearing} of them are still being deleted from an earlier spec and will be deployed again",
                ids.len()
            ),
            true,
        )
    } else if deferred > 0 {
        // The rest are created by the next decisions; each new
        // DeploymentResource also wakes the controller.
        plan.requeue(POLL_MIN_MS);
        (
            TemplatePhase::Updating,
            format!(
                "{} resources deployed; {deferred} DeploymentResources still to create",
                ids.len()
            ),
            false,
        )
    } else if stale.is_empty() {
        (
            TemplatePhase::Ready,
            format!("{} resources deployed", ids.len()),
            false,
        )
    } else {
        plan.requeue(CLEANUP_RECHECK_MS);
        (
            TemplatePhase::ReadyPendingCleanup,
            format!(
                "{} resources deployed; removing {} no longer deployed",
                ids.len(),
                stale.len()
            ),
            false,
        )
    };
    if let Some(note) = refused.note() {
        message.push_str("; ");
        message.push_str(&note);
    }
    Converged {
        phase,
        message,
        redeploy,
        refused: refused.warning(),
        stale_left,
    }
}

/// Most `DeploymentResource` creations, and most deletions, one plan asks
/// for: the host refuses plans of more than 1,024 actions, so a template
/// with more outputs than that converges over several decisions instead.
pub const MAX_CHANGES_PER_PLAN: usize = 500;

/// Delete the lowest wave still present (others, then applications, then
/// environments); later waves wait until the earlier ones are gone.
fn delete_in_waves(
    candidates: &[&radwasm_policy_model::OwnedResource],
    plan: &mut TemplatePlanner,
) {
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

fn delete(observation: &TemplateObservation, mode: ReconcileMode, plan: &mut TemplatePlanner) {
    let status = &observation.status;
    if let Some(operation) = &observation.operation {
        match (&operation.kind, &operation.result) {
            (OperationKind::Deployment, OperationResult::InProgress { retry_after_ms }) => {
                let message =
                    "waiting for the running deployment to finish before deleting".to_string();
                plan.status(
                    status,
                    DesiredTemplateStatus {
                        phase: Some(TemplatePhase::Deleting),
                        message: Some(message.clone()),
                        ready: Some(ready_condition(
                            ConditionStatus::False,
                            "Deleting",
                            &message,
                        )),
                        ..Default::default()
                    },
                );
                plan.requeue(poll_after(*retry_after_ms));
                return;
            }
            (_, OperationResult::PollError(_)) => {
                plan.requeue(POLL_ERROR_RETRY_MS);
                return;
            }
            (OperationKind::Deployment, OperationResult::Succeeded { output_resources }) => {
                // Track what that deployment created so it is deleted too,
                // at most MAX_CHANGES_PER_PLAN a decision: the operation is
                // kept (and polled again) until every output is tracked.
                // A resource the deployment made again while its old
                // DeploymentResource was being deleted (a later spec listed
                // it again) is not tracked by that one: its DELETE may have
                // gone out before the deployment re-created it. Keep the
                // operation until the old one is gone, then track it anew.
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
                if draining > 0 {
                    let message = format!(
                        "waiting for {draining} DeploymentResources being deleted, whose resources the last deployment made again, before deleting those"
                    );
                    plan.status(
                        status,
                        DesiredTemplateStatus {
                            phase: Some(TemplatePhase::Deleting),
                            message: Some(message.clone()),
                            ready: Some(ready_condition(
                                ConditionStatus::False,
                                "Deleting",
                                &message,
                            )),
                            ..Default::default()
                        },
                    );
                    plan.requeue(CLEANUP_RECHECK_MS);
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
                    status,
                    DesiredTemplateStatus {
                        phase: Some(TemplatePhase::Deleting),
                        message: Some(message.to_string()),
                        ready: Some(ready_condition(ConditionStatus::False, "Deleting", message)),
                        output_resources: Some(output_resources.clone()),
                        status_hash: Some(operation.subject.clone()),
                        clear_operation: true,
                        ..Default::default()
                    },
                );
                plan.requeue(0);
                return;
            }
            _ => {
                plan.status(
                    status,
                    DesiredTemplateStatus {
                        clear_operation: true,
                        ..Default::default()
                    },
                );
                plan.requeue(0);
                return;
            }
        }
    }

    let remaining = &observation.owned_resources;
    if remaining.is_empty() {
        if mode == ReconcileMode::Manage {
            // The template's deployment records go with it.
            for id in &observation.deployments {
                plan.push(TemplateAction::DeleteDeployment(id.clone()));
            }
        }
        plan.push(TemplateAction::RemoveFinalizer);
        let tally = deletion_tally(&observation.meta.annotations);
        let message = match (mode, tally) {
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
        };
        plan.event(EventType::Normal, "Deleted", message);
        return;
    }
    let candidates: Vec<&radwasm_policy_model::OwnedResource> = remaining.iter().collect();
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
    let changed = plan.status(
        status,
        DesiredTemplateStatus {
            phase: Some(TemplatePhase::Deleting),
            message: Some(message.clone()),
            ready: Some(ready_condition(
                ConditionStatus::False,
                "Deleting",
                &message,
            )),
            ..Default::default()
        },
    );
    if changed && status.phase != Some(TemplatePhase::Deleting) {
        plan.event(EventType::Normal, "Deleting", message);
    }
    plan.requeue(DELETING_RECHECK_MS);
}

/// A template's status message while its resources are deleted.
pub const DELETING_MESSAGE: &str = "deleting its resources";

/// "1 resource", "3 resources".
fn resources(count: u32) -> String {
    match count {
        1 => "1 resource".to_string(),
        _ => format!("{count} resources"),
    }
}

fn mode_name(mode: ReconcileMode) -> &'static str {
    match mode {
        ReconcileMode::Manage => "manage",
        ReconcileMode::Skip => "skip",
        ReconcileMode::DetachOnDelete => "detach-on-delete",
    }
}
