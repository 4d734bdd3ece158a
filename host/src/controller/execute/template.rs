//! A template plan carried out: its actions in order, sharing what the
//! plan has done so far (the object's version as the plan knows it, the
//! deployment records it wrote, its status patch), then the deletion
//! tally, the deployment records a deleted deployment leaves, and the
//! status, each written once at the end.

use std::ops::ControlFlow;

use kube::ResourceExt;
use radwasm_policy_model::annotations::{DeletionTally, deletion_tally};
use radwasm_policy_model::{
    StartDeployment, TEMPLATE_FINALIZER, TemplateAction, TemplateObservation,
};

use crate::controller::deployment_records;
use crate::controller::memory::add_tallies;
use crate::controller::object::{Executed, key};
use crate::controller::status::{Current, StatusPatch};
use crate::controller::writes::{Finalizer, set_finalizer, write_deployment_records};
use crate::controller::{Context, Error, produced};
use crate::crd::{DeploymentTemplate, PolicyRef};

use super::deployment::{Deployment, Started, delete_deployment, deployment_id, start_deployment};
use super::resources::{create_resource, delete_resource, detach_resource, record_tally};
use super::{emit, finish_status, record_failed_request};

/// Carry out a template plan.
pub async fn template_plan(
    ctx: &Context,
    object: &DeploymentTemplate,
    policy: &PolicyRef,
    observation: &TemplateObservation,
    actions: &[TemplateAction],
) -> Result<Executed, Error> {
    let mut plan = TemplatePlan::new(ctx, object, policy, observation);
    // A plan that replaces the output list first labels what the old list
    // alone made the template's own (`produced`), so that it stays so until
    // it is deleted; any failure here stops the plan before that write.
    if let Some(next) = next_outputs(actions) {
        produced::mark_before_replacing(ctx, object, next).await?;
    }
    for (index, action) in actions.iter().enumerate() {
        let rest = &actions[index + 1..];
        if let ControlFlow::Break(executed) = plan.carry_out(action, rest).await? {
            return Ok(executed);
        }
    }
    plan.finish().await
}

/// The output list the plan's last `set-status` that sets one gives.
fn next_outputs(actions: &[TemplateAction]) -> Option<&[String]> {
    actions.iter().rev().find_map(|action| match action {
        TemplateAction::SetStatus(update) => update.output_resources.as_deref(),
        _ => None,
    })
}

/// A template plan being carried out: what it works on, and what its
/// actions so far have done. An action that ends the plan early answers
/// `ControlFlow::Break` with how the plan went.
struct TemplatePlan<'a> {
    ctx: &'a Context,
    object: &'a DeploymentTemplate,
    policy: &'a PolicyRef,
    observation: &'a TemplateObservation,
    current: Current<'a>,
    /// The status written when the plan ends.
    patch: StatusPatch,
    /// The template's deployment records, as this plan leaves them.
    deployments: Vec<String>,
    executed: Executed,
    finalizer_removed: bool,
    /// The `DeploymentResource`s this plan deleted and detached.
    tally: DeletionTally,
    /// The object's version on the server as far as this plan knows: the
    /// one decided on, or the one our finalizer write made.
    version: Option<String>,
    /// The status written ahead of a deployment, if the plan's own status
    /// updates went with it: those are folded in already, and if nothing
    /// else changes the patch, the final write would repeat it.
    written_ahead: Option<Box<StatusPatch>>,
    /// The deployment records the annotation holds after this plan's
    /// writes, if it wrote them.
    annotated: Option<Vec<String>>,
    /// A deleted deployment's record must be dropped from the annotation.
    records_dropped: bool,
}

impl<'a> TemplatePlan<'a> {
    fn new(
        ctx: &'a Context,
        object: &'a DeploymentTemplate,
        policy: &'a PolicyRef,
        observation: &'a TemplateObservation,
    ) -> Self {
        let mut patch = StatusPatch::default();
        patch.track_failures(
            observation.operation.as_ref(),
            observation.last_failure.as_ref(),
        );
        TemplatePlan {
            ctx,
            object,
            policy,
            observation,
            current: Current::of(object),
            patch,
            deployments: observation.deployments.clone(),
            executed: Executed::default(),
            finalizer_removed: false,
            tally: DeletionTally::default(),
            version: object.resource_version(),
            written_ahead: None,
            annotated: None,
            records_dropped: false,
        }
    }

    /// Carry out one action; `rest` are the plan's actions after it.
    async fn carry_out(
        &mut self,
        action: &TemplateAction,
        rest: &[TemplateAction],
    ) -> Result<ControlFlow<Executed>, Error> {
        let (ctx, object) = (self.ctx, self.object);
        match action {
            TemplateAction::AddFinalizer => return self.add_finalizer(rest).await,
            TemplateAction::RemoveFinalizer => return self.remove_finalizer().await,
            TemplateAction::EnsureResourceGroup(scope) => {
                return self.ensure_resource_group(scope).await;
            }
            TemplateAction::StartDeployment(start) => {
                return self.start_recorded_deployment(start, rest).await;
            }
            TemplateAction::CreateResource(create) => create_resource(ctx, object, create).await?,
            TemplateAction::DeleteResource(name) => {
                delete_resource(ctx, object, name).await?;
                self.tally.deleted += 1;
            }
            TemplateAction::DetachResource(name) => {
                detach_resource(ctx, object, name).await?;
                self.tally.kept += 1;
            }
            TemplateAction::DeleteDeployment(id) => self.delete_recorded_deployment(id).await?,
            TemplateAction::SetStatus(_) if self.written_ahead.is_some() => {}
            TemplateAction::SetStatus(update) => self.patch.template_update(&self.current, update),
            TemplateAction::EmitEvent(event) => emit(ctx, object, event).await,
            TemplateAction::RequeueAfter(ms) => self.executed.requeue_ms = Some(*ms),
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The plan stops: the object on the server moved on from the version
    /// it was decided on (`Executed::object_moved`).
    fn object_moved(&mut self) -> ControlFlow<Executed> {
        ControlFlow::Break(std::mem::take(&mut self.executed).object_moved())
    }

    /// Add the finalizer. A deployment this plan starts is recorded with
    /// the finalizer, in the same write (see `deployment_records`).
    async fn add_finalizer(
        &mut self,
        rest: &[TemplateAction],
    ) -> Result<ControlFlow<Executed>, Error> {
        let records = rest.iter().find_map(|later| match later {
            TemplateAction::StartDeployment(start) => Some(deployment_records::with(
                &self.deployments,
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
        match set_finalizer(self.ctx, self.object, TEMPLATE_FINALIZER, true, annotation).await? {
            Finalizer::Written(written) => {
                self.version = written.or(self.version.take());
                self.annotated = records.or(self.annotated.take());
            }
            Finalizer::AsAsked => {}
            Finalizer::ObjectMoved => return Ok(self.object_moved()),
        }
        Ok(ControlFlow::Continue(()))
    }

    async fn remove_finalizer(&mut self) -> Result<ControlFlow<Executed>, Error> {
        if set_finalizer(self.ctx, self.object, TEMPLATE_FINALIZER, false, None).await?
            == Finalizer::ObjectMoved
        {
            return Ok(self.object_moved());
        }
        self.finalizer_removed = true;
        Ok(ControlFlow::Continue(()))
    }

    /// Create the Radius resource group if absent. If Radius refuses it,
    /// the refusal is recorded in status for the policy to see next, and
    /// the plan stops.
    async fn ensure_resource_group(&mut self, scope: &str) -> Result<ControlFlow<Executed>, Error> {
        match self.ctx.radius.ensure_resource_group(scope).await {
            Ok(_) => Ok(ControlFlow::Continue(())),
            Err(error) if error.is_transient() => Err(error.into()),
            Err(error) => {
                tracing::info!(error = %error, "Radius refused the resource group");
                let spec_hash = &self.observation.spec_hash;
                record_failed_request(self.ctx, self.object, "PUT", scope, spec_hash, &error)
                    .await?;
                self.executed.mutation_failed = true;
                self.executed.requeue_ms = Some(0);
                Ok(ControlFlow::Break(std::mem::take(&mut self.executed)))
            }
        }
    }

    /// Record the deployment where no other controller's status write
    /// reaches, before it is sent (unless the annotation holds it already),
    /// then start it (`deployment.rs`).
    async fn start_recorded_deployment(
        &mut self,
        start: &StartDeployment,
        rest: &[TemplateAction],
    ) -> Result<ControlFlow<Executed>, Error> {
        let ids = deployment_records::with(&self.deployments, &deployment_id(start));
        let holds = self.annotated.as_ref().map_or_else(
            || deployment_records::annotation_holds(self.object, &ids),
            |written| *written == ids,
        );
        if !holds {
            let version = self.version.as_deref();
            match write_deployment_records(self.ctx, self.object, version, &ids).await? {
                Finalizer::Written(written) => self.version = written.or(self.version.take()),
                Finalizer::AsAsked => {}
                Finalizer::ObjectMoved => return Ok(self.object_moved()),
            }
            self.annotated = Some(ids);
        }
        let deployment = Deployment {
            start,
            version: self.version.as_deref(),
            deployments: &mut self.deployments,
            patch: &mut self.patch,
            rest,
            current: &self.current,
            policy: self.policy,
        };
        match start_deployment(self.ctx, self.object, self.observation, deployment).await? {
            Started::Recorded { ahead } => self.written_ahead = ahead,
            Started::Refused => self.executed.mutation_failed = true,
            Started::ObjectMoved => return Ok(self.object_moved()),
        }
        Ok(ControlFlow::Continue(()))
    }

    /// Delete a deployment in Radius; once it is gone, its record goes too.
    async fn delete_recorded_deployment(&mut self, id: &str) -> Result<(), Error> {
        if delete_deployment(self.ctx, id).await? {
            self.deployments
                .retain(|recorded| !recorded.eq_ignore_ascii_case(id));
            self.patch.deployments = Some(self.deployments.clone());
            self.records_dropped = true;
        } else {
            self.executed.mutation_failed = true;
        }
        Ok(())
    }

    /// After the last action: the deletion tally, the deployment records,
    /// and the status the plan set.
    async fn finish(mut self) -> Result<Executed, Error> {
        self.count_deletions().await?;
        if let ControlFlow::Break(executed) = self.drop_deleted_records().await? {
            return Ok(executed);
        }
        if self.written_ahead.is_some_and(|ahead| *ahead == self.patch) {
            // The status written ahead of the deployment (naming the policy)
            // says all of it.
            return Ok(self.executed);
        }
        let (ctx, object, policy) = (self.ctx, self.object, self.policy);
        finish_status(ctx, object, policy, self.patch, self.finalizer_removed).await?;
        Ok(self.executed)
    }

    /// Count what this plan deleted and detached, if the template is being
    /// deleted.
    async fn count_deletions(&self) -> Result<(), Error> {
        let tally = self.tally;
        if tally == DeletionTally::default() || self.object.metadata.deletion_timestamp.is_none() {
            return Ok(());
        }
        // Counted after the children were deleted: a controller stopped in
        // between counts fewer, never one twice. Kept in memory (see
        // `memory::tally`) until a resource is left in Radius; from then
        // on written, with all counted before.
        let key = key(self.object);
        let annotated = deletion_tally(self.object.annotations()).is_some();
        if tally.kept > 0 || annotated {
            let unwritten = self.ctx.memory.tallies.unwritten(&key);
            record_tally(self.ctx, self.object, add_tallies(unwritten, tally)).await?;
            self.ctx.memory.tallies.written(&key);
        } else {
            self.ctx.memory.tallies.add(&key, tally);
        }
        Ok(())
    }

    /// Drop a deleted deployment's record from the annotation, unless the
    /// finalizer went or the annotation no longer lists it.
    async fn drop_deleted_records(&mut self) -> Result<ControlFlow<Executed>, Error> {
        let annotation_holds = self.annotated.as_ref().map_or_else(
            || deployment_records::annotation_holds(self.object, &self.deployments),
            |written| *written == self.deployments,
        );
        if self.records_dropped && !self.finalizer_removed && !annotation_holds {
            // Not ahead of anything: a record left listed is only deleted again.
            if write_deployment_records(self.ctx, self.object, None, &self.deployments).await?
                == Finalizer::ObjectMoved
            {
                return Ok(self.object_moved());
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}
