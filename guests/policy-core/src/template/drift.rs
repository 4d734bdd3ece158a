//! Drift: resources this template deployed that the host's drift check found
//! missing in Radius, answered by deploying again or, with
//! `radapp.io/drift: report`, only reported.

use radwasm_policy_model::{EventType, OwnedResource, TemplateObservation, TemplatePhase};

use super::converge::QUOTED_ID_CHARS;
use super::warn_about;
use crate::annotations::{self, DriftMode};
use crate::plan::{DesiredTemplateStatus, TemplatePlanner};

/// Reason of the Event (and of the `Ready` condition) when resources the
/// template deployed are missing in Radius.
pub const DRIFT_DETECTED: &str = "DriftDetected";

/// The resources the host's drift check found missing in Radius after this
/// template's last deployment succeeded (after it was recorded at all, if no
/// success is recorded). One found missing before that deployment ended was
/// already answered by it: the next check of that resource says whether it
/// came back.
pub(super) fn missing_since_deployed(observation: &TemplateObservation) -> Vec<&OwnedResource> {
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

/// Resources this template deployed are missing in Radius: deploy the spec
/// again (once: the redeploy's success is newer than what was found
/// missing), or with `radapp.io/drift: report` only say so.
pub(super) fn drifted(
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
