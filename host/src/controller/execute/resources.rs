//! A plan's `DeploymentResource`s: created for a deployment's outputs
//! (never over another template's), deleted, and their Radius DELETEs
//! started.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use radwasm_policy_model::{self as model, RESOURCE_FINALIZER};

use crate::controller::object::key;
use crate::controller::ownership::truncate_label;
use crate::controller::writes::send_write;
use crate::controller::{Context, Error, OWNER_NAME_LABEL, OWNER_UID_LABEL};
use crate::crd::{
    DeploymentResource, DeploymentResourceSpec, DeploymentTemplate, ResourceOperation,
};
use crate::radius::{DeleteStart, OperationKind, ResumeToken};

use super::record_failed_request;

/// Create a `DeploymentResource` owned by this template.
pub(super) async fn create_resource(
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
        // Only the id, as Radius's controller writes it: every field is
        // held again, decoded, in each of the object's versions the API
        // server's watch cache keeps (the scope is read from the owner
        // template when it is needed).
        spec: DeploymentResourceSpec {
            id: create.radius_id.clone(),
            provider_config: None,
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
pub(super) fn claimed_by_another(
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
pub(super) async fn delete_resource(
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

/// Release an owned `DeploymentResource` and keep its Radius resource: mark
/// it `radapp.io/reconcile-policy: detach-on-delete` (which its own policy
/// reads as "leave Radius alone"), then delete it. The mark goes first, so
/// the resource's policy never sees the deletion without it. A resource
/// already gone is not an error.
pub(super) async fn detach_resource(
    ctx: &Context,
    object: &DeploymentTemplate,
    name: &str,
) -> Result<(), Error> {
    let resources: Api<DeploymentResource> =
        Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    let mark = serde_json::json!({
        "metadata": {"annotations": {model::annotations::RECONCILE_POLICY: "detach-on-delete"}}
    });
    match resources
        .patch(name, &PatchParams::default(), &Patch::Merge(&mark))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(response)) if response.code == 404 => return Ok(()),
        Err(source) => {
            return Err(Error::Kube {
                what: "mark a DeploymentResource detach-on-delete",
                source,
            });
        }
    }
    delete_resource(ctx, object, name).await
}

/// Add what this plan deleted and detached to the template's
/// `radwasm.io/deletion-tally`, which its policy reads to say, when the
/// template goes, how many resources were deleted and how many kept.
pub(super) async fn record_tally(
    ctx: &Context,
    object: &DeploymentTemplate,
    plan: model::annotations::DeletionTally,
) -> Result<(), Error> {
    let templates: Api<DeploymentTemplate> =
        Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default());
    let name = object.name_any();
    // Read fresh and write over that version only: the cache may not hold
    // the last plan's tally yet, and a sum over a stale one would lose it.
    for _ in 0..TALLY_ATTEMPTS {
        let fresh = match templates.get_opt(&name).await {
            Ok(Some(fresh)) => fresh,
            Ok(None) => return Ok(()),
            Err(source) => {
                return Err(Error::Kube {
                    what: "read a DeploymentTemplate to record its deletion tally",
                    source,
                });
            }
        };
        let before = model::annotations::deletion_tally(fresh.annotations()).unwrap_or_default();
        let after = crate::controller::memory::add_tallies(before, plan);
        let text = format!(r#"{{"deleted":{},"kept":{}}}"#, after.deleted, after.kept);
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": fresh.resource_version(),
                "annotations": {model::annotations::DELETION_TALLY: text},
            }
        });
        match templates
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(written) => {
                // Remembered as the plan's other writes are: the decision
                // that removes the finalizer, and so says what was kept,
                // waits until the cache shows the tally.
                // Compared with the version decided on: a change the fresh
                // read brought is one that decision did not see.
                let key = key(object);
                for decided_on in [fresh.resource_version(), object.resource_version()] {
                    crate::controller::writes::remember(
                        &ctx.memory,
                        &key,
                        &object.metadata,
                        decided_on.as_deref(),
                        &written.metadata,
                    );
                }
                return Ok(());
            }
            Err(kube::Error::Api(response)) if response.code == 404 => return Ok(()),
            Err(kube::Error::Api(response)) if response.code == 409 => continue,
            Err(source) => {
                return Err(Error::Kube {
                    what: "record the deletion tally on a DeploymentTemplate",
                    source,
                });
            }
        }
    }
    tracing::info!(
        attempts = TALLY_ATTEMPTS,
        "the deletion tally was not recorded: the template kept changing"
    );
    Ok(())
}

/// Read-and-write rounds for one tally before it is given up (each lost
/// round means another writer moved the template in between).
const TALLY_ATTEMPTS: usize = 3;

/// Start the Radius DELETE of the resource's id, and give the operation to
/// record: the plan's status write records it (with the phase the policy
/// sets), one write where there were two. A controller stopped between the
/// DELETE and that write sends the DELETE again on its next decision, which
/// Radius answers as it answered the first (a DELETE is idempotent), so
/// unlike a deployment it needs no record written ahead.
/// `None`: Radius refused it or could not be reached after the client's
/// retries; that is recorded instead, so the status says what is failing
/// and the policy paces the next attempt.
pub(super) async fn start_radius_delete(
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
