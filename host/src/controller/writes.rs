//! The controller's writes to its own objects on the API server: the
//! finalizer (with the resourceVersion decided on as a precondition) and
//! merge patches of the status subresource, each reading back only the
//! metadata of the version it left, which `memory` remembers so a decision
//! on a cache that does not show it yet waits for it (and, unless it
//! carries a change the decision did not see, so its watch event wakes no
//! one).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::crd::DeploymentTemplate;

use super::deployment_records;
use super::memory::ObjectMemory;
use super::object::{Reconciled, key};
use super::status::StatusPatch;
use super::{Context, Error};

pub(super) fn api<K: Reconciled>(ctx: &Context, object: &K) -> Api<K> {
    Api::namespaced(ctx.client.clone(), &object.namespace().unwrap_or_default())
}

/// What a write asks the API server to answer with: the written object's
/// metadata only (`PartialObjectMetadata`), else the object. The controller
/// needs only the new resourceVersion, and the watch brings the object
/// anyway; a server that knows the form is spared encoding the whole
/// object, its ARM template included, once more per write.
const METADATA_ONLY: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";

/// Send a write built by kube's request builder for `api`, and read back
/// only the metadata of the version it left ([`METADATA_ONLY`]).
pub(super) async fn send_write<K: Reconciled>(
    ctx: &Context,
    api: &Api<K>,
    build: impl FnOnce(
        &kube::core::Request,
    ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<ObjectMeta, kube::Error> {
    #[derive(serde::Deserialize)]
    struct Written {
        metadata: ObjectMeta,
    }
    let mut request =
        build(&kube::core::Request::new(api.resource_url())).map_err(kube::Error::BuildRequest)?;
    request.headers_mut().insert(
        http::header::ACCEPT,
        http::HeaderValue::from_static(METADATA_ONLY),
    );
    let written: Written = ctx.client.request(request).await?;
    Ok(written.metadata)
}

/// Remember the version a write left (`written`, as the server answered),
/// made by a plan decided on `decided` (the object's metadata then) and
/// sent with `decided_on` as its precondition, if any. The version is the
/// controller's own only if it carries no change the decision did not see
/// (`unseen`): a write without a precondition may land on a user's change.
pub(super) fn remember(
    memory: &ObjectMemory,
    key: &str,
    decided: &ObjectMeta,
    decided_on: Option<&str>,
    written: &ObjectMeta,
) {
    let unseen = super::unseen::unseen_changes(decided, written);
    if unseen {
        tracing::debug!(
            object = %key,
            written = written.resource_version.as_deref().unwrap_or_default(),
            "the write landed on a change its decision did not see; the watch will show it"
        );
    }
    memory
        .versions
        .wrote(key, decided_on, written.resource_version.clone(), unseen);
}

/// What a finalizer write did.
#[derive(Debug, PartialEq, Eq)]
pub enum Finalizer {
    /// The object already was as asked, or is gone and a finalizer was to
    /// be removed: nothing was written.
    AsAsked,
    /// Written; the object's new resourceVersion, as the server answered.
    Written(Option<String>),
    /// The object changed on the server after the version decided on (the
    /// watch cache lags, or someone edited or deleted it): nothing was
    /// written.
    ObjectMoved,
}

/// Add or remove `finalizer`, with the object's resourceVersion as a
/// precondition so a concurrent change is not overwritten: if the object
/// has moved on, nothing is written and the caller decides again on the
/// newer object ([`Finalizer::ObjectMoved`]).
pub async fn set_finalizer<K: Reconciled>(
    ctx: &Context,
    object: &K,
    finalizer: &str,
    present: bool,
    annotation: Option<(&str, String)>,
) -> Result<Finalizer, Error> {
    let mut finalizers: Vec<String> = object.finalizers().to_vec();
    if present {
        if finalizers.iter().any(|f| f == finalizer) {
            return Ok(Finalizer::AsAsked);
        }
        finalizers.push(finalizer.to_string());
    } else {
        finalizers.retain(|f| f != finalizer);
    }
    let mut patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.resource_version(),
    }});
    if let Some((name, value)) = annotation {
        let mut annotations = serde_json::Map::new();
        annotations.insert(name.to_string(), Value::String(value));
        patch["metadata"]["annotations"] = Value::Object(annotations);
    }
    let name = object.name_any();
    let written = match send_write(ctx, &api(ctx, object), |request| {
        request.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
    })
    .await
    {
        Ok(written) => written,
        Err(kube::Error::Api(response)) if response.code == 409 => {
            tracing::debug!(
                object = %key(object),
                "the object changed after the version decided on; deciding again on the newer one"
            );
            return Ok(Finalizer::ObjectMoved);
        }
        // Gone from the server (the cache has not seen the deletion yet):
        // a finalizer to remove is removed; one to add has nothing to hold.
        Err(kube::Error::Api(response)) if response.code == 404 => {
            return Ok(if present {
                Finalizer::ObjectMoved
            } else {
                Finalizer::AsAsked
            });
        }
        Err(source) => {
            return Err(Error::Kube {
                what: if present {
                    "add finalizer"
                } else {
                    "remove finalizer"
                },
                source,
            });
        }
    };
    if present {
        // Removing our finalizer from an object being deleted lets it go:
        // nothing is left to wait for, nor to remember.
        remember(
            &ctx.memory,
            &key(object),
            object.meta(),
            object.resource_version().as_deref(),
            &written,
        );
    }
    Ok(Finalizer::Written(written.resource_version))
}

/// Merge-patch the status subresource (see `patch_status`); nothing is
/// sent for an empty patch.
pub async fn write_status<K: Reconciled>(
    ctx: &Context,
    object: &K,
    key: &str,
    patch: &StatusPatch,
) -> Result<(), Error> {
    if patch.is_empty() {
        return Ok(());
    }
    patch_status(ctx, object, key, patch.to_body())
        .await
        .map_err(Error::kube("write status"))
}

/// Like [`write_status`], but only if the object is still at `version` on
/// the server: `Ok(false)`, and nothing written, if it has moved on.
pub async fn write_status_at<K: Reconciled>(
    ctx: &Context,
    object: &K,
    patch: &StatusPatch,
    version: &str,
) -> Result<bool, Error> {
    let mut body = patch.to_body();
    body["metadata"] = json!({ "resourceVersion": version });
    match patch_status(ctx, object, &key(object), body).await {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(response)) if response.code == 409 => Ok(false),
        Err(source) => Err(Error::Kube {
            what: "record the deployment before sending it",
            source,
        }),
    }
}

/// Send a merge patch of the status subresource. What the write replaced is
/// remembered: a decision on a cache that does not show it yet waits for
/// it to arrive.
async fn patch_status<K: Reconciled>(
    ctx: &Context,
    object: &K,
    key: &str,
    body: Value,
) -> Result<(), kube::Error> {
    let name = object.name_any();
    let written = send_write(ctx, &api(ctx, object), |request| {
        request.patch_subresource(
            "status",
            &name,
            &PatchParams::default(),
            &Patch::Merge(&body),
        )
    })
    .await?;
    let decided = object.meta();
    remember(
        &ctx.memory,
        key,
        decided,
        decided.resource_version.as_deref(),
        &written,
    );
    Ok(())
}

/// Write `ids` to a template's deployment records annotation
/// (`deployment_records`), with `version` as the precondition if
/// given (ahead of a deployment: the decision stands on that version).
pub async fn write_deployment_records(
    ctx: &Context,
    template: &DeploymentTemplate,
    version: Option<&str>,
    ids: &[String],
) -> Result<Finalizer, Error> {
    let mut annotations = serde_json::Map::new();
    annotations.insert(
        deployment_records::ANNOTATION.to_string(),
        deployment_records::annotation_value(ids).into(),
    );
    let mut metadata = json!({ "annotations": annotations });
    if let Some(version) = version {
        metadata["resourceVersion"] = json!(version);
    }
    let patch = json!({ "metadata": metadata });
    let name = template.name_any();
    match send_write(ctx, &api(ctx, template), |request| {
        request.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
    })
    .await
    {
        Ok(written) => {
            remember(
                &ctx.memory,
                &key(template),
                &template.metadata,
                version,
                &written,
            );
            Ok(Finalizer::Written(written.resource_version))
        }
        Err(kube::Error::Api(response)) if response.code == 409 || response.code == 404 => {
            Ok(Finalizer::ObjectMoved)
        }
        Err(source) => Err(Error::Kube {
            what: "record deployments",
            source,
        }),
    }
}
