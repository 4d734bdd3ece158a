//! A plan's deployments: started with a write-ahead record, followed if
//! Radius already runs them, and their records deleted.

use radwasm_policy_model::{self as model, TemplateAction, TemplateObservation};
use serde_json::Value;

use crate::controller::deployment_records;
use crate::controller::object::key;
use crate::controller::status::{Current, StatusPatch};
use crate::controller::writes::{write_status, write_status_at};
use crate::controller::{Context, Error};
use crate::crd::{DeploymentTemplate, PolicyRef, ResourceOperation};
use crate::radius::{DeploymentRequest, OperationKind, RadiusError, ResumeToken};

use super::record_failed_request;

/// ARM's answer to a PUT of a deployment whose previous run is still active.
const DEPLOYMENT_ACTIVE: &str = "DeploymentActive";

/// How starting a deployment went.
pub(super) enum Started {
    /// Started (or found running); its operation is in the plan's status
    /// patch. `ahead`: the whole patch the plan writes, as written before
    /// the PUT (less the policy, which that write also named), when it went
    /// with the deployment's record.
    Recorded { ahead: Option<Box<StatusPatch>> },
    /// Radius refused it; the refusal is recorded in status.
    Refused,
    /// The object on the API server is newer than the one decided on (the
    /// watch cache lags, or someone changed it): nothing was sent.
    ObjectMoved,
}

/// What a plan's `start-deployment` works with.
pub(super) struct Deployment<'a> {
    pub(super) start: &'a model::StartDeployment,
    /// The object's resourceVersion the decision stands on.
    pub(super) version: Option<&'a str>,
    /// The template's deployment records, as this plan leaves them.
    pub(super) deployments: &'a mut Vec<String>,
    /// The plan's status patch, written when the plan ends.
    pub(super) patch: &'a mut StatusPatch,
    /// The plan's actions after this one.
    pub(super) rest: &'a [TemplateAction],
    pub(super) current: &'a Current<'a>,
    pub(super) policy: &'a PolicyRef,
}

/// PUT the deployment the plan names, and record its operation.
///
/// A deployment is the one effect that must not be repeated, and the watch
/// cache can lag our own status writes by a reconcile or two under load. So
/// the deployment is first recorded in status (written ahead, see below)
/// with the resourceVersion the decision was taken on as a precondition: if
/// the object has moved on, nothing is sent and the newer object is decided
/// on. If the name was already recorded (a PUT that may have reached Radius
/// before a crash, a lost status write or a token Radius forgot), Radius is
/// asked for it by name and a running one is followed instead of sent
/// again.
pub(super) async fn start_deployment(
    ctx: &Context,
    object: &DeploymentTemplate,
    observation: &TemplateObservation,
    deployment: Deployment<'_>,
) -> Result<Started, Error> {
    let Deployment {
        start,
        version,
        deployments,
        patch,
        rest,
        current,
        policy,
    } = deployment;
    let deployment_id = deployment_id(start);
    let follow = ResumeToken {
        kind: OperationKind::Deployment,
        resource_id: deployment_id.clone(),
        async_operation: None,
        location: None,
        subject: observation.spec_hash.clone(),
        rejected: None,
    };
    // Write ahead: the deployment is recorded (as one to follow by its id,
    // and in the list of this template's deployment records) before it is
    // sent. A status write lost after the PUT then still leaves its name:
    // the next decision follows that deployment to its end and adopts its
    // outputs, instead of not knowing it ran (its resources would belong to
    // no record the template keeps).
    let recorded_before = deployments
        .iter()
        .any(|recorded| recorded.eq_ignore_ascii_case(&deployment_id));
    if !recorded_before {
        *deployments = deployment_records::with(deployments, &deployment_id);
    }
    let decided = patch.clone();
    // Written ahead: the plan's whole status, or the record alone.
    let write_ahead = WriteAhead::plan(patch, &follow, deployments, rest, current);
    let ahead = write_ahead.status(&follow, deployments, policy);
    match version {
        Some(version) => {
            if !write_status_at(ctx, object, &ahead, version).await? {
                return Ok(Started::ObjectMoved);
            }
        }
        None => write_status(ctx, object, &key(object), &ahead).await?,
    }
    if recorded_before && running_in_radius(ctx, &deployment_id).await? {
        tracing::info!(deployment = %deployment_id, "deployment already running in Radius; following it");
        return Ok(write_ahead.started(patch, &follow, deployments));
    }
    let request = DeploymentRequest {
        scope: &start.scope,
        name: &start.deployment_name,
        template: &observation.spec.template,
        parameters: &observation.spec.parameters,
        provider_config: &observation.spec.provider_config,
        subject: &observation.spec_hash,
    };
    let token = match ctx.radius.start_deployment(&request).await {
        Ok(token) => token,
        // Still recorded to follow: the next decision finds out (by its
        // id) whether Radius got it.
        Err(error) if error.is_transient() => return Err(error.into()),
        Err(RadiusError::Arm {
            status: 409, code, ..
        }) if code == DEPLOYMENT_ACTIVE => {
            // Exactly the deployment the plan named is running: follow it.
            tracing::info!(deployment = %deployment_id, "deployment already active; following it");
            return Ok(write_ahead.started(patch, &follow, deployments));
        }
        Err(error) => {
            tracing::info!(error = %error, "Radius refused the deployment");
            let hash = &observation.spec_hash;
            record_failed_request(ctx, object, "PUT", &deployment_id, hash, &error).await?;
            // No operation began: the plan's patch must not record one.
            *patch = decided;
            return Ok(Started::Refused);
        }
    };
    // The operation's own URLs, which are cheaper to poll than the
    // deployment, are remembered beside the record written ahead (and
    // polled while it stands). A restarted controller, or another
    // replica, follows the record instead.
    if token != follow {
        ctx.memory
            .operations
            .started(&key(object), follow.encode(), token);
    }
    Ok(write_ahead.started(patch, &follow, deployments))
}

/// The status a deployment's start writes ahead of its PUT.
///
/// What the plan's status ends as if the deployment starts: what it folded
/// so far, the record, then its later status updates. Written ahead whole,
/// it is the plan's only status write; unless those updates drop the record
/// (a policy clearing the operation it starts), which must still be
/// written ahead, so then only the record is.
struct WriteAhead {
    /// The plan's status as it ends if the deployment starts.
    whole: StatusPatch,
    /// `whole` still records the deployment, so it is what is written ahead.
    keeps_record: bool,
}

impl WriteAhead {
    /// `patch`: the plan's status so far; `rest`: its actions after this one.
    fn plan(
        patch: &StatusPatch,
        follow: &ResumeToken,
        deployments: &[String],
        rest: &[TemplateAction],
        current: &Current<'_>,
    ) -> Self {
        let mut whole = patch.clone();
        record_deployment(&mut whole, follow, deployments);
        let record = whole.operation.clone();
        for action in rest {
            if let TemplateAction::SetStatus(update) = action {
                whole.template_update(current, update);
            }
        }
        let keeps_record = whole.operation == record;
        WriteAhead {
            whole,
            keeps_record,
        }
    }

    /// The status to write ahead: the whole, naming the policy, or only
    /// the record.
    fn status(
        &self,
        follow: &ResumeToken,
        deployments: &[String],
        policy: &PolicyRef,
    ) -> StatusPatch {
        if self.keeps_record {
            let mut named = self.whole.clone();
            named.policy = Some(Some(policy.clone()));
            named
        } else {
            let mut record_only = StatusPatch::default();
            record_deployment(&mut record_only, follow, deployments);
            record_only
        }
    }

    /// The deployment started (or is followed): what the write ahead said
    /// stays in the plan's `patch`.
    fn started(
        self,
        patch: &mut StatusPatch,
        follow: &ResumeToken,
        deployments: &[String],
    ) -> Started {
        if self.keeps_record {
            *patch = self.whole.clone();
            Started::Recorded {
                ahead: Some(Box::new(self.whole)),
            }
        } else {
            record_deployment(patch, follow, deployments);
            Started::Recorded { ahead: None }
        }
    }
}

/// Put in `patch` the deployment to follow by `token`, and the template's
/// deployment records.
pub(super) fn record_deployment(
    patch: &mut StatusPatch,
    token: &ResumeToken,
    deployments: &[String],
) {
    let operation = ResourceOperation {
        resume_token: token.encode(),
        operation_kind: "PUT".to_string(),
    };
    patch.record_operation(operation, Some(token.resource_id.clone()));
    patch.deployments = Some(deployments.to_vec());
}

/// The id of the deployment record a `start-deployment` makes.
pub(super) fn deployment_id(start: &model::StartDeployment) -> String {
    format!(
        "{}/providers/Microsoft.Resources/deployments/{}",
        start.scope, start.deployment_name
    )
}

/// Delete a deployment record in Radius. `Ok(false)`: Radius refused; the
/// record stays listed and the policy may ask again.
pub(super) async fn delete_deployment(ctx: &Context, id: &str) -> Result<bool, Error> {
    match ctx.radius.delete_deployment(id).await {
        Ok(()) => Ok(true),
        Err(error) if error.is_transient() => Err(error.into()),
        Err(error) => {
            tracing::warn!(deployment = %id, error = %error, "Radius refused to delete a deployment record");
            Ok(false)
        }
    }
}

/// True if Radius has a deployment of this id that has not finished.
pub(super) async fn running_in_radius(ctx: &Context, deployment_id: &str) -> Result<bool, Error> {
    let Some(body) = ctx.radius.get_resource(deployment_id).await? else {
        return Ok(false);
    };
    let state = body
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .unwrap_or("");
    Ok(!["Succeeded", "Failed", "Canceled"]
        .iter()
        .any(|done| state.eq_ignore_ascii_case(done)))
}
