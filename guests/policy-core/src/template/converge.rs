//! Keeping a template's `DeploymentResource`s in line with a deployment's
//! output list: create the missing, delete the stale, and say which phase
//! that leaves the template in.

use radwasm_policy_model::scope::parse_resource_id;
use radwasm_policy_model::{
    Condition, ConditionStatus, CreateResource, OwnedResource, TemplateAction, TemplateObservation,
    TemplatePhase,
};

use super::MAX_CHANGES_PER_PLAN;
use crate::naming::{self, IdSet};
use crate::plan::{TemplatePlanner, ready_condition};
use crate::timing::{CLEANUP_RECHECK_MS, POLL_MIN_MS};

/// What converging the owned `DeploymentResource`s came to.
pub(super) struct Converged {
    pub(super) phase: TemplatePhase,
    pub(super) message: String,
    /// A resource the output lists is still owned by a `DeploymentResource`
    /// being deleted: when that deletion finishes, the resource is gone from
    /// Radius and the spec must be deployed again.
    pub(super) redeploy: bool,
    /// Output ids that are not valid Radius ids, for a Warning event (see
    /// [`Refused`]); the message counts them too.
    pub(super) refused: Option<String>,
    /// More stale `DeploymentResource`s than one plan deletes: the rest are
    /// asked to go by the next decision.
    pub(super) stale_left: bool,
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
pub(super) struct Refused<'a> {
    ids: IdSet<'a>,
    first: Option<String>,
}

impl<'a> Refused<'a> {
    /// True if `id` is a valid Radius resource id; otherwise records it.
    pub(super) fn admits(&mut self, id: &'a str) -> bool {
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
    pub(super) fn note(&self) -> Option<String> {
        (!self.ids.is_empty()).then(|| {
            format!(
                "{} of them not tracked (ids that are not valid Radius resource ids)",
                self.ids.len()
            )
        })
    }

    /// The Warning event's message, `None` if no id was refused.
    pub(super) fn warning(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        Some(format!(
            "not tracking {} output resources whose ids are not valid Radius resource ids (no DeploymentResource, so the template does not delete them); the first: {first}",
            self.ids.len()
        ))
    }
}

/// The `Ready` condition for the phase [`converge`] came to.
pub(super) fn ready_for(phase: TemplatePhase, message: &str) -> Condition {
    match phase {
        TemplatePhase::Ready => ready_condition(ConditionStatus::True, "Deployed", message),
        TemplatePhase::Updating => ready_condition(ConditionStatus::False, "Creating", message),
        _ => ready_condition(ConditionStatus::False, "PendingCleanup", message),
    }
}

/// Make the owned `DeploymentResource`s match `ids`: create the missing,
/// delete the extra (in safe order). Returns the phase and message that
/// describe the result.
pub(super) fn converge(
    observation: &TemplateObservation,
    ids: &[String],
    plan: &mut TemplatePlanner,
) -> Converged {
    let owned = &observation.owned_resources;
    // Ids compare case-insensitively. Hashed sets avoid comparing every pair:
    // ids share long prefixes, so pairwise comparison is slow in wasm.
    let owned_ids: IdSet = owned.iter().map(|r| r.radius_id.as_str()).collect();
    let wanted_ids: IdSet = ids.iter().map(String::as_str).collect();
    let mut refused = Refused::default();
    let deferred = create_missing(ids, &owned_ids, &mut refused, plan);
    let stale: Vec<&OwnedResource> = owned
        .iter()
        .filter(|resource| !wanted_ids.contains(&resource.radius_id))
        .collect();
    let stale_left = delete_stale(&stale, plan);
    let reappearing = owned
        .iter()
        .filter(|r| r.deletion_requested && wanted_ids.contains(&r.radius_id))
        .count();
    let (phase, mut message, redeploy) = phase_after_converging(
        ids.len(),
        Pending {
            reappearing,
            deferred,
            stale: stale.len(),
        },
        plan,
    );
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

/// Ask for a `DeploymentResource` for each id in `ids` not owned yet, at most
/// [`MAX_CHANGES_PER_PLAN`]; ids `refused` does not admit get none. Returns
/// how many are left for the next decisions.
fn create_missing<'a>(
    ids: &'a [String],
    owned_ids: &IdSet,
    refused: &mut Refused<'a>,
    plan: &mut TemplatePlanner,
) -> usize {
    let mut planned = IdSet::new();
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
    deferred
}

/// Ask every `stale` resource not being deleted yet to go, at most
/// [`MAX_CHANGES_PER_PLAN`]. Returns true if some are left for the next
/// decision.
///
/// Every stale resource is asked to go at once, not wave by wave: once
/// `outputResources` no longer lists one, only the `radapp.io/template-uid`
/// label says it was this template's (the host puts it on the objects
/// Radius's controller created before a status write drops them from the
/// list). The host holds each application's and environment's Radius
/// DELETE until the template's other resources being deleted are gone.
fn delete_stale(stale: &[&OwnedResource], plan: &mut TemplatePlanner) -> bool {
    for (asked, resource) in stale.iter().filter(|r| !r.deletion_requested).enumerate() {
        if asked == MAX_CHANGES_PER_PLAN {
            return true;
        }
        plan.push(TemplateAction::DeleteResource(resource.name.clone()));
    }
    false
}

/// What converging leaves to do, in `DeploymentResource`s.
struct Pending {
    /// Listed in the output while their old `DeploymentResource` is still
    /// being deleted.
    reappearing: usize,
    /// Still to create, by the next decisions.
    deferred: usize,
    /// Owned but no longer in the output.
    stale: usize,
}

/// The phase, the message and whether to deploy again, once the resources
/// of a `deployed`-long output list are asked for; requeues when something
/// is still pending.
fn phase_after_converging(
    deployed: usize,
    pending: Pending,
    plan: &mut TemplatePlanner,
) -> (TemplatePhase, String, bool) {
    let Pending {
        reappearing,
        deferred,
        stale,
    } = pending;
    if reappearing > 0 {
        plan.requeue(CLEANUP_RECHECK_MS);
        (
            TemplatePhase::Updating,
            format!(
                "{deployed} resources deployed; {reappearing} of them are still being deleted from an earlier spec and will be deployed again"
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
                "{deployed} resources deployed; {deferred} DeploymentResources still to create"
            ),
            false,
        )
    } else if stale == 0 {
        (
            TemplatePhase::Ready,
            format!("{deployed} resources deployed"),
            false,
        )
    } else {
        plan.requeue(CLEANUP_RECHECK_MS);
        (
            TemplatePhase::ReadyPendingCleanup,
            format!("{deployed} resources deployed; removing {stale} no longer deployed"),
            false,
        )
    }
}
