//! Carrying out checked plans: one function per action kind, and the
//! per-kind dispatch over a plan. Actions run in the plan's order and the
//! first error stops the plan; status updates are folded into one typed
//! patch written at the end. A deployment a plan starts is recorded before
//! it is sent, so a controller killed mid-plan follows it instead of
//! sending it again; a Radius DELETE, which may be sent again, is recorded
//! by that one write.

use std::collections::BTreeMap;

use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use radwasm_policy_model::{
    self as model, RESOURCE_FINALIZER, ResourceAction, ResourceObservation, TEMPLATE_FINALIZER,
    TemplateAction, TemplateObservation,
};
use serde_json::Value;

use super::deployment_records;
use super::object::{Executed, Reconciled, key};
use super::status::{Current, StatusPatch};
use super::writes::{Finalizer, send_write, set_finalizer, write_status, write_status_at};
use super::{Context, Error, OWNER_NAME_LABEL, OWNER_UID_LABEL};
use crate::crd::{
    DeploymentResource, DeploymentResourceSpec, DeploymentTemplate, FailedRequest, PolicyRef,
    ResourceOperation,
};
use crate::policy::LoadedPolicy;
use crate::radius::{DeleteStart, DeploymentRequest, OperationKind, RadiusError, ResumeToken};

/// ARM's answer to a PUT of a deployment whose previous run is still active.
const DEPLOYMENT_ACTIVE: &str = "DeploymentActive";

/// Carry out a template plan.
pub async fn template_plan(
    ctx: &Context,
    object: &DeploymentTemplate,
    policy: &PolicyRef,
    observation: &TemplateObservation,
    actions: &[TemplateAction],
) -> Result<Executed, Error> {
    let current = Current::of(object);
    let mut patch = StatusPatch::default();
    patch.track_failures(
        observation.operation.as_ref(),
        observation.last_failure.as_ref(),
    );
    let mut deployments = observation.deployments.clone();
    let mut executed = Executed::default();
    let mut finalizer_removed = false;
    // The object's version on the server as far as this plan knows: the one
    // decided on, or the one our finalizer write made.
    let mut version = object.resource_version();
    // The status written ahead of a deployment, if the plan's own status
    // updates went with it: those are folded in already, and if nothing
    // else changes the patch, the final write would repeat it.
    let mut written_ahead: Option<Box<StatusPatch>> = None;
    // The deployment records the annotation holds after this plan's writes,
    // if it wrote them; and whether a deleted record must be dropped there.
    let mut annotated: Option<Vec<String>> = None;
    let mut records_dropped = false;
    for (index, action) in actions.iter().enumerate() {
        match action {
            TemplateAction::AddFinalizer => {
                // A deployment this plan starts is recorded with the
                // finalizer, in the same write (see `deployment_records`).
                let records = actions[index + 1..].iter().find_map(|later| match later {
                    TemplateAction::StartDeployment(start) => Some(deployment_records::with(
                        &deployments,
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
                match set_finalizer(ctx, object, TEMPLATE_FINALIZER, true, annotation).await? {
                    Finalizer::Written(written) => {
                        version = written.or(version);
                        annotated = records.or(annotated);
                    }
                    Finalizer::AsAsked => {}
                    Finalizer::ObjectMoved => return Ok(executed.object_moved()),
                }
            }
            TemplateAction::RemoveFinalizer => {
                if set_finalizer(ctx, object, TEMPLATE_FINALIZER, false, None).await?
                    == Finalizer::ObjectMoved
                {
                    return Ok(executed.object_moved());
                }
                finalizer_removed = true;
            }
            TemplateAction::EnsureResourceGroup(scope) => {
                if !ensure_resource_group(ctx, object, observation, scope).await? {
                    // Refused: recorded; the policy is shown it next.
                    executed.mutation_failed = true;
                    executed.requeue_ms = Some(0);
                    return Ok(executed);
                }
            }
            TemplateAction::StartDeployment(start) => {
                let ids = deployment_records::with(&deployments, &deployment_id(start));
                let holds = annotated.as_ref().map_or_else(
                    || deployment_records::annotation_holds(object, &ids),
                    |written| *written == ids,
                );
                if !holds {
                    // Recorded where no other controller's status write
                    // reaches, before it is sent.
                    match deployment_records::write(ctx, object, version.as_deref(), &ids).await? {
                        Finalizer::Written(written) => version = written.or(version),
                        Finalizer::AsAsked => {}
                        Finalizer::ObjectMoved => return Ok(executed.object_moved()),
                    }
                    annotated = Some(ids);
                }
                let deployment = Deployment {
                    start,
                    version: version.as_deref(),
                    deployments: &mut deployments,
                    patch: &mut patch,
                    rest: &actions[index + 1..],
                    current: &current,
                    policy,
                };
                match start_deployment(ctx, object, observation, deployment).await? {
                    Started::Recorded { ahead } => written_ahead = ahead,
                    Started::Refused => executed.mutation_failed = true,
                    Started::ObjectMoved => return Ok(executed.object_moved()),
                }
            }
            TemplateAction::CreateResource(create) => create_resource(ctx, object, create).await?,
            TemplateAction::DeleteResource(name) => delete_resource(ctx, object, name).await?,
            TemplateAction::DeleteDeployment(id) => {
                if delete_deployment(ctx, id).await? {
                    deployments.retain(|recorded| !recorded.eq_ignore_ascii_case(id));
                    patch.deployments = Some(deployments.clone());
                    records_dropped = true;
                } else {
                    executed.mutation_failed = true;
                }
            }
            TemplateAction::SetStatus(_) if written_ahead.is_some() => {}
            TemplateAction::SetStatus(update) => patch.template_update(&current, update),
            TemplateAction::EmitEvent(event) => emit(ctx, object, event).await,
            TemplateAction::RequeueAfter(ms) => executed.requeue_ms = Some(*ms),
        }
    }
    let annotation_holds = annotated.as_ref().map_or_else(
        || deployment_records::annotation_holds(object, &deployments),
        |written| *written == deployments,
    );
    if records_dropped && !finalizer_removed && !annotation_holds {
        // Not ahead of anything: a record left listed is only deleted again.
        if deployment_records::write(ctx, object, None, &deployments).await?
            == Finalizer::ObjectMoved
        {
            return Ok(executed.object_moved());
        }
    }
    if written_ahead.is_some_and(|ahead| *ahead == patch) {
        // The status written ahead of the deployment (naming the policy)
        // says all of it.
        return Ok(executed);
    }
    finish_status(ctx, object, policy, patch, finalizer_removed).await?;
    Ok(executed)
}

/// Write what the plan set in status, naming the policy that decided; also
/// when only that policy changed (a swap, or another policy selected), so
/// status always names the one that decided last.
async fn finish_status<K: Reconciled>(
    ctx: &Context,
    object: &K,
    policy: &PolicyRef,
    mut patch: StatusPatch,
    finalizer_removed: bool,
) -> Result<(), Error> {
    if finalizer_removed {
        return Ok(());
    }
    let named = K::status_policy(object) == Some(policy);
    if patch.is_empty() && named {
        return Ok(());
    }
    patch.policy = Some(Some(policy.clone()));
    write_status(ctx, object, &key(object), &patch).await
}

/// Carry out a resource plan.
pub async fn resource_plan(
    ctx: &Context,
    object: &DeploymentResource,
    policy: &PolicyRef,
    observation: &ResourceObservation,
    actions: &[ResourceAction],
) -> Result<Executed, Error> {
    let current = Current::of(object);
    let mut patch = StatusPatch::default();
    patch.track_failures(
        observation.operation.as_ref(),
        observation.last_failure.as_ref(),
    );
    patch.track_missing(
        object
            .status
            .as_ref()
            .and_then(|s| s.missing_since.as_ref()),
        observation.missing_age_ms,
        ctx.memory.drift.take_missing_seen(&key(object)),
    );
    let mut executed = Executed::default();
    let mut finalizer_removed = false;
    for action in actions {
        match action {
            ResourceAction::AddFinalizer | ResourceAction::RemoveFinalizer => {
                let present = matches!(action, ResourceAction::AddFinalizer);
                if set_finalizer(ctx, object, RESOURCE_FINALIZER, present, None).await?
                    == Finalizer::ObjectMoved
                {
                    return Ok(executed.object_moved());
                }
                finalizer_removed |= !present;
            }
            ResourceAction::StartRadiusDelete => match start_radius_delete(ctx, object).await? {
                // Recorded by the plan's one status write, below.
                Some(operation) => patch.record_operation(operation, None),
                None => executed.mutation_failed = true,
            },
            ResourceAction::SetStatus(update) => {
                patch.resource_update(&current, update, &object.spec.id)
            }
            ResourceAction::EmitEvent(event) => emit(ctx, object, event).await,
            ResourceAction::RequeueAfter(ms) => executed.requeue_ms = Some(*ms),
        }
    }
    finish_status(ctx, object, policy, patch, finalizer_removed).await?;
    Ok(executed)
}

/// Which policy took the decision, for `status.policy`.
pub fn policy_ref(policy: &LoadedPolicy, reconcile_policy: Option<String>) -> PolicyRef {
    PolicyRef {
        name: policy.description().name.clone(),
        version: policy.description().version.clone(),
        digest: policy.digest().to_string(),
        reconcile_policy,
    }
}

/// A failed request as recorded in status.
/// Record in status a request Radius refused (or that kept failing after the
/// client's retries): the policy sees it as that attempt's outcome.
async fn record_failed_request<K: Reconciled>(
    ctx: &Context,
    object: &K,
    kind: &str,
    target: &str,
    subject: &str,
    error: &RadiusError,
) -> Result<(), Error> {
    let failed = failed_request(kind, target, subject, error);
    write_status(
        ctx,
        object,
        &key(object),
        &StatusPatch::request_failed(failed),
    )
    .await
}

fn failed_request(kind: &str, target: &str, subject: &str, error: &RadiusError) -> FailedRequest {
    let (code, message) = match error {
        RadiusError::Arm { code, message, .. } => (code.clone(), message.clone()),
        other => (other.reason().to_string(), other.to_string()),
    };
    FailedRequest {
        operation_kind: kind.to_string(),
        target: target.to_string(),
        subject: subject.to_string(),
        code,
        message,
        time: Some(super::status::now()),
    }
}

/// Create the Radius resource group if absent. `Ok(false)`: Radius refused
/// it, and the refusal is recorded in status for the policy to see.
async fn ensure_resource_group(
    ctx: &Context,
    object: &DeploymentTemplate,
    observation: &TemplateObservation,
    scope: &str,
) -> Result<bool, Error> {
    match ctx.radius.ensure_resource_group(scope).await {
        Ok(_) => Ok(true),
        Err(error) if error.is_transient() => Err(error.into()),
        Err(error) => {
            tracing::info!(error = %error, "Radius refused the resource group");
            record_failed_request(ctx, object, "PUT", scope, &observation.spec_hash, &error)
                .await?;
            Ok(false)
        }
    }
}

/// How starting a deployment went.
enum Started {
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
struct Deployment<'a> {
    start: &'a model::StartDeployment,
    /// The object's resourceVersion the decision stands on.
    version: Option<&'a str>,
    /// The template's deployment records, as this plan leaves them.
    deployments: &'a mut Vec<String>,
    /// The plan's status patch, written when the plan ends.
    patch: &'a mut StatusPatch,
    /// The plan's actions after this one.
    rest: &'a [TemplateAction],
    current: &'a Current<'a>,
    policy: &'a PolicyRef,
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
async fn start_deployment(
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
    // What the plan's status ends as if the deployment starts: what it
    // folded so far, the record, then its later status updates. Written
    // ahead whole, it is the plan's only status write; unless those updates
    // drop the record (a policy clearing the operation it starts), which
    // must still be written ahead, so then only the record is.
    let decided = patch.clone();
    let mut whole = patch.clone();
    record_deployment(&mut whole, &follow, deployments);
    let record = whole.operation.clone();
    for action in rest {
        if let TemplateAction::SetStatus(update) = action {
            whole.template_update(current, update);
        }
    }
    let keeps_record = whole.operation == record;
    let ahead = if keeps_record {
        let mut named = whole.clone();
        named.policy = Some(Some(policy.clone()));
        named
    } else {
        let mut record_only = StatusPatch::default();
        record_deployment(&mut record_only, &follow, deployments);
        record_only
    };
    match version {
        Some(version) => {
            if !write_status_at(ctx, object, &ahead, version).await? {
                return Ok(Started::ObjectMoved);
            }
        }
        None => write_status(ctx, object, &key(object), &ahead).await?,
    }
    // What the write ahead said stays in the plan's patch.
    let started = |patch: &mut StatusPatch| {
        if keeps_record {
            *patch = whole.clone();
            Started::Recorded {
                ahead: Some(Box::new(whole)),
            }
        } else {
            record_deployment(patch, &follow, deployments);
            Started::Recorded { ahead: None }
        }
    };
    if recorded_before && running_in_radius(ctx, &deployment_id).await? {
        tracing::info!(deployment = %deployment_id, "deployment already running in Radius; following it");
        return Ok(started(patch));
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
            return Ok(started(patch));
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
    Ok(started(patch))
}

/// Put in `patch` the deployment to follow by `token`, and the template's
/// deployment records.
fn record_deployment(patch: &mut StatusPatch, token: &ResumeToken, deployments: &[String]) {
    let operation = ResourceOperation {
        resume_token: token.encode(),
        operation_kind: "PUT".to_string(),
    };
    patch.record_operation(operation, Some(token.resource_id.clone()));
    patch.deployments = Some(deployments.to_vec());
}

/// The id of the deployment record a `start-deployment` makes.
fn deployment_id(start: &model::StartDeployment) -> String {
    format!(
        "{}/providers/Microsoft.Resources/deployments/{}",
        start.scope, start.deployment_name
    )
}

/// Delete a deployment record in Radius. `Ok(false)`: Radius refused; the
/// record stays listed and the policy may ask again.
async fn delete_deployment(ctx: &Context, id: &str) -> Result<bool, Error> {
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
async fn running_in_radius(ctx: &Context, deployment_id: &str) -> Result<bool, Error> {
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

/// Create a `DeploymentResource` owned by this template.
async fn create_resource(
    ctx: &Context,
    object: &DeploymentTemplate,
    create: &model::CreateResource,
) -> Result<(), Error> {
    let namespace = object.namespace().unwrap_or_default();
    let resources: Api<DeploymentResource> = Api::namespaced(ctx.client.clone(), &namespace);
    // Controller owner with blockOwnerDeletion, so foreground deletion of
    // the template waits for its resources.
    let owner = object.controller_owner_ref(&()).map(|mut owner| {
        owner.block_owner_deletion = Some(true);
        owner
    });
    // The template's own labels first, so that a controller watching one
    // shard (`--watch-label-selector`) sees the resources of its templates.
    let mut labels: BTreeMap<String, String> = object.labels().clone();
    labels.insert(
        OWNER_UID_LABEL.to_string(),
        object.uid().unwrap_or_default(),
    );
    labels.insert(
        OWNER_NAME_LABEL.to_string(),
        truncate_label(&object.name_any()),
    );
    let resource = DeploymentResource {
        metadata: ObjectMeta {
            name: Some(create.name.clone()),
            namespace: Some(namespace),
            labels: Some(labels),
            owner_references: Some(owner.into_iter().collect()),
            // Protected from birth: a resource deleted (with its template)
            // before its own controller first saw it still gets its Radius
            // DELETE. Radius's controller creates it the same way.
            finalizers: Some(vec![RESOURCE_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: DeploymentResourceSpec {
            id: create.radius_id.clone(),
            provider_config: object.spec.provider_config(),
        },
        status: None,
    };
    // Until the watch shows it, this template's next decision waits.
    let key = key(object);
    ctx.memory.expectations.expect_created(&key, &create.name);
    let created = serde_json::to_vec(&resource).map_err(|source| Error::Kube {
        what: "create a DeploymentResource",
        source: kube::Error::SerdeError(source),
    })?;
    match send_write(ctx, &resources, |request| {
        request.create(&PostParams::default(), created)
    })
    .await
    {
        Ok(_) => Ok(()),
        // Created by an earlier reconcile whose result we had not seen yet,
        // or another template's, for the same Radius resource.
        Err(kube::Error::Api(response)) if response.code == 409 => {
            claimed_by_another(ctx, object, create).inspect_err(|_| {
                ctx.memory.expectations.created_seen(&key, &create.name);
            })
        }
        Err(source) => {
            ctx.memory.expectations.created_seen(&key, &create.name);
            Err(Error::Kube {
                what: "create a DeploymentResource",
                source,
            })
        }
    }
}

/// A `DeploymentResource` of this name already exists: fine if this
/// template controls it (an earlier reconcile created it); a conflict if
/// another object does (two templates deploying the same Radius resource
/// would each delete it behind the other's back). Read from the watch
/// cache: one the cache has not shown yet is taken as ours for now, and the
/// next decision, which does not count it among this template's, asks again.
fn claimed_by_another(
    ctx: &Context,
    object: &DeploymentTemplate,
    create: &model::CreateResource,
) -> Result<(), Error> {
    let namespace = object.namespace().unwrap_or_default();
    let Some(existing) = ctx
        .caches()?
        .resources
        .get(&ObjectRef::new(&create.name).within(&namespace))
    else {
        return Ok(());
    };
    let uid = object.uid().unwrap_or_default();
    let controller = existing
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    match controller {
        Some(owner) if owner.uid == uid => Ok(()),
        other => Err(Error::Conflict(format!(
            "Radius resource {} is already tracked by DeploymentResource {}, {}; two templates cannot manage the same Radius resource",
            create.radius_id,
            create.name,
            match other {
                Some(owner) => format!("which {} {} controls", owner.kind, owner.name),
                None => "which no template controls".to_string(),
            }
        ))),
    }
}

/// Delete an owned `DeploymentResource` (its own controller then deletes
/// the Radius resource). Already gone is done.
async fn delete_resource(
    ctx: &Context,
    object: &DeploymentTemplate,
    name: &str,
) -> Result<(), Error> {
    let resources: Api<DeploymentResource> =
        Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    match resources.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(response)) if response.code == 404 => Ok(()),
        Err(source) => Err(Error::Kube {
            what: "delete a DeploymentResource",
            source,
        }),
    }
}

/// Start the Radius DELETE of the resource's id, and give the operation to
/// record: the plan's status write records it (with the phase the policy
/// sets), one write where there were two. A controller stopped between the
/// DELETE and that write sends the DELETE again on its next decision, which
/// Radius answers as it answered the first (a DELETE is idempotent), so
/// unlike a deployment it needs no record written ahead.
/// `None`: Radius refused it or could not be reached after the client's
/// retries; that is recorded instead, so the status says what is failing
/// and the policy paces the next attempt.
async fn start_radius_delete(
    ctx: &Context,
    object: &DeploymentResource,
) -> Result<Option<ResourceOperation>, Error> {
    let id = &object.spec.id;
    let token = match ctx.radius.start_delete(id).await {
        Ok(DeleteStart::Started(token)) => token,
        // Done at once: polling the resource itself then finds it gone.
        Ok(DeleteStart::Done { .. }) => ResumeToken {
            kind: OperationKind::Deletion,
            resource_id: id.clone(),
            async_operation: None,
            location: None,
            subject: String::new(),
            rejected: None,
        },
        Err(error) => {
            tracing::info!(error = %error, "the Radius DELETE failed");
            record_failed_request(ctx, object, "DELETE", id, "", &error).await?;
            return Ok(None);
        }
    };
    Ok(Some(ResourceOperation {
        resume_token: token.encode(),
        operation_kind: "DELETE".to_string(),
    }))
}

fn truncate_label(value: &str) -> String {
    value
        .chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.', '_'])
        .to_string()
}

/// Longest object name kube's recorder can name an Event after: it names
/// events `{object}.{nanoseconds in hex}`, and names are at most 253.
const RECORDER_NAME_LIMIT: usize = 253 - 17;

/// Publish a Kubernetes Event about `object`. Failing to record an event
/// never fails the reconcile.
pub async fn emit<K: Reconciled>(ctx: &Context, object: &K, event: &model::Event) {
    let type_ = match event.event_type {
        model::EventType::Normal => EventType::Normal,
        model::EventType::Warning => EventType::Warning,
    };
    let note = cut(&event.message, 1000);
    let reason: String = event.reason.chars().take(128).collect();
    let reference = object.object_ref(&());
    let published = if object.name_any().len() <= RECORDER_NAME_LIMIT {
        ctx.recorders
            .publish(
                &Event {
                    type_,
                    reason: reason.clone(),
                    note: Some(note),
                    action: "Reconcile".to_string(),
                    secondary: None,
                },
                &reference,
            )
            .await
    } else {
        publish_for_long_name(ctx, reference, type_, reason.clone(), note).await
    };
    if let Err(error) = published {
        tracing::warn!(reason = %reason, error = %super::describe_kube_error(&error), "could not record an event");
    }
}

/// The recorder cannot name an event after an object whose name is near the
/// 253-character limit: create it here under a shortened name instead.
async fn publish_for_long_name(
    ctx: &Context,
    reference: k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    reason: String,
    note: String,
) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let name = reference.name.clone().unwrap_or_default();
    let short: String = name.chars().take(200).collect();
    let event = K8sEvent {
        metadata: ObjectMeta {
            name: Some(format!("{short}.{:x}", now.as_nanosecond())),
            namespace: reference.namespace.clone(),
            ..Default::default()
        },
        action: Some("Reconcile".to_string()),
        reason: Some(reason),
        note: Some(note),
        event_time: Some(MicroTime(now)),
        regarding: Some(reference.clone()),
        reporting_controller: Some("radwasm".to_string()),
        reporting_instance: Some(
            std::env::var("POD_NAME").unwrap_or_else(|_| "radwasm".to_string()),
        ),
        type_: Some(
            match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        ..Default::default()
    };
    let events: Api<K8sEvent> = Api::namespaced(
        ctx.client.clone(),
        reference.namespace.as_deref().unwrap_or("default"),
    );
    events.create(&PostParams::default(), &event).await?;
    Ok(())
}

fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests;
