//! The `DeploymentTemplate` reconciler: observe, decide (policy guest),
//! check (guard rails), act.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use radwasm_policy_model::{self as model, TEMPLATE_FINALIZER, TemplateAction};
use serde_json::{Map, Value, json};

use super::execute::{
    self, emit, failure_fields, merge_conditions, patch_status, policy_ref, set_finalizer,
};
use super::observe::{self, SpecTexts};
use super::{
    Context, Error, OWNER_NAME_LABEL, OWNER_UID_LABEL, REJECTED_RETRY, decide, guard, requeue,
};
use crate::crd::{
    DeploymentResource, DeploymentResourceSpec, DeploymentTemplate, ResourceOperation,
};
use crate::policy::LoadedPolicy;
use crate::radius::{DeploymentRequest, OperationKind, Rejection, ResumeToken};

const KIND: &str = "DeploymentTemplate";
/// ARM's answer to a PUT of a deployment whose previous run is still active.
const DEPLOYMENT_ACTIVE: &str = "DeploymentActive";

pub async fn reconcile(
    object: Arc<DeploymentTemplate>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let key = key(&object);
    let action = reconcile_inner(&object, &ctx).await;
    let outcome = if action.is_ok() { "ok" } else { "error" };
    ctx.metrics
        .reconciles
        .get_or_create(&crate::metrics::ReconcileLabels {
            kind: KIND,
            outcome,
        })
        .inc();
    if action.is_ok() {
        ctx.reset_failures(&key);
    }
    action
}

pub fn error_policy(object: Arc<DeploymentTemplate>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff(&key(&object));
    tracing::warn!(template = %key(&object), %error, ?delay, "reconcile failed; retrying");
    Action::requeue(delay)
}

fn key(object: &DeploymentTemplate) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

async fn reconcile_inner(object: &DeploymentTemplate, ctx: &Context) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<DeploymentTemplate> = Api::namespaced(ctx.client.clone(), &namespace);
    let spec = observe::spec_texts(object);
    let spec_hash = observe::spec_hash(&spec);
    let observation = observe::template(object, ctx, &spec, &spec_hash).await?;

    let policy = ctx.policy.current();
    let status = object.status.clone().unwrap_or_default();
    let (decision, observation, took) =
        match decide(&policy, observation, LoadedPolicy::decide_template).await {
            Ok(answer) => answer,
            Err(error) => {
                let message = format!("policy {} could not decide: {error}", policy.display_name());
                return fail(
                    ctx,
                    &api,
                    object,
                    &status.conditions,
                    &message,
                    "PolicyFailed",
                    &policy,
                )
                .await;
            }
        };
    ctx.metrics
        .observe_decision("template", policy.display_name(), took);
    let decision = match decision {
        Ok(decision) => decision,
        Err(error) => {
            ctx.metrics
                .decision_failures
                .get_or_create(&crate::metrics::FailureLabels {
                    kind: KIND,
                    reason: error.reason(),
                })
                .inc();
            let message = format!("policy {} could not decide: {error}", policy.display_name());
            return fail(
                ctx,
                &api,
                object,
                &status.conditions,
                &message,
                "PolicyFailed",
                &policy,
            )
            .await;
        }
    };
    for log in &decision.logs {
        tracing::info!(template = %key(object), policy = %policy.display_name(), level = ?log.level, "{}", log.message);
    }
    if let Err(violation) = guard::check_template_plan(&observation, &decision.plan.actions) {
        ctx.metrics
            .decision_failures
            .get_or_create(&crate::metrics::FailureLabels {
                kind: KIND,
                reason: "PlanRejected",
            })
            .inc();
        let message = format!(
            "policy {} returned a rejected plan: {violation}",
            policy.display_name()
        );
        return fail(
            ctx,
            &api,
            object,
            &status.conditions,
            &message,
            "PlanRejected",
            &policy,
        )
        .await;
    }

    let mut status_fields: Map<String, Value> = Map::new();
    let mut requeue_ms = None;
    for action in &decision.plan.actions {
        match action {
            TemplateAction::AddFinalizer => {
                set_finalizer(&api, object, TEMPLATE_FINALIZER, true).await?
            }
            TemplateAction::RemoveFinalizer => {
                set_finalizer(&api, object, TEMPLATE_FINALIZER, false).await?
            }
            TemplateAction::EnsureResourceGroup(scope) => {
                if let Err(error) = ctx.radius.ensure_resource_group(scope).await {
                    if error.is_transient() {
                        return Err(error.into());
                    }
                    record_rejection(&api, object, &spec_hash, &error).await?;
                    return Ok(Action::requeue(std::time::Duration::ZERO));
                }
            }
            TemplateAction::StartDeployment(start) => {
                if already_deploying(&api, object).await? {
                    // Our cache had not yet seen our own earlier write; the
                    // watch brings it and reconciles again.
                    return Ok(Action::requeue(std::time::Duration::from_secs(1)));
                }
                let token = start_deployment(
                    ctx,
                    object,
                    &spec,
                    &spec_hash,
                    &start.scope,
                    &start.deployment_name,
                )
                .await?;
                // Record the operation at once: a controller killed after this
                // point resumes polling instead of deploying again.
                let mut fields = Map::new();
                fields.insert("operation".into(), operation_json(&token, "PUT"));
                fields.insert("resource".into(), json!(token.resource_id));
                patch_status(&api, &object.name_any(), fields).await?;
            }
            TemplateAction::CreateResource(create) => {
                create_resource(ctx, object, &create.name, &create.radius_id).await?
            }
            TemplateAction::DeleteResource(name) => {
                let resources: Api<DeploymentResource> =
                    Api::namespaced(ctx.client.clone(), &namespace);
                match resources.delete(name, &DeleteParams::background()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(response)) if response.code == 404 => {}
                    Err(source) => {
                        return Err(Error::Kube {
                            what: "delete a DeploymentResource",
                            source,
                        });
                    }
                }
            }
            TemplateAction::SetStatus(update) => {
                status_fields.extend(status_update(object, update, &spec, &spec_hash));
            }
            TemplateAction::EmitEvent(event) => emit(ctx, object, event).await,
            TemplateAction::RequeueAfter(ms) => requeue_ms = Some(*ms),
        }
    }
    let deleted = decision
        .plan
        .actions
        .iter()
        .any(|a| matches!(a, TemplateAction::RemoveFinalizer));
    if !status_fields.is_empty() && !deleted {
        status_fields.insert(
            "policy".into(),
            serde_json::to_value(policy_ref(&policy)).unwrap_or(Value::Null),
        );
        patch_status(&api, &object.name_any(), status_fields).await?;
    }
    Ok(requeue(requeue_ms))
}

/// Whether our cache is behind the API server on what matters before a
/// deployment: the operation in flight and the hash last deployed. The
/// watch cache can lag our own status write by a reconcile or two under
/// load, and a deployment is the one effect that must not be repeated, so
/// this one read is made before every deployment is started. (Comparing
/// with the cache, not just looking for a recorded operation, leaves a
/// policy free to redeploy an unchanged spec on purpose.)
async fn already_deploying(
    api: &Api<DeploymentTemplate>,
    object: &DeploymentTemplate,
) -> Result<bool, Error> {
    let fresh = api
        .get_opt(&object.name_any())
        .await
        .map_err(Error::kube("re-read the template before deploying"))?;
    let Some(fresh) = fresh else {
        return Ok(true);
    };
    let server = fresh.status.unwrap_or_default();
    let cached = object.status.clone().unwrap_or_default();
    Ok(server.operation != cached.operation || server.status_hash != cached.status_hash)
}

fn operation_json(token: &ResumeToken, kind: &str) -> Value {
    serde_json::to_value(ResourceOperation {
        resume_token: token.encode(),
        operation_kind: kind.to_string(),
    })
    .unwrap_or(Value::Null)
}

async fn start_deployment(
    ctx: &Context,
    object: &DeploymentTemplate,
    spec: &SpecTexts,
    spec_hash: &str,
    scope: &str,
    name: &str,
) -> Result<ResumeToken, Error> {
    let request = DeploymentRequest {
        scope,
        name,
        template: &spec.template,
        parameters: &spec.parameters,
        provider_config: &spec.provider_config,
        subject: spec_hash,
    };
    match ctx.radius.start_deployment(&request).await {
        Ok(token) => Ok(token),
        Err(error) if error.is_transient() => Err(error.into()),
        Err(crate::radius::RadiusError::Arm {
            status: 409, code, ..
        }) if code == DEPLOYMENT_ACTIVE && names_this_spec(name, spec_hash) => {
            // The deployment's name carries the spec hash, so the one still
            // running is this spec's, started by us before a crash or a lost
            // status write: follow it (polling the deployment itself)
            // instead of failing.
            tracing::info!(template = %key(object), deployment = %name, "deployment already running; following it");
            Ok(ResumeToken {
                kind: OperationKind::Deployment,
                resource_id: format!("{scope}/providers/Microsoft.Resources/deployments/{name}"),
                async_operation: None,
                location: None,
                subject: spec_hash.to_string(),
                rejected: None,
            })
        }
        Err(error) => {
            // Refused outright (bad template, missing parameter...): record
            // it as a failed operation so the policy decides what it means.
            tracing::info!(template = %key(object), %error, "Radius refused the deployment");
            Ok(rejected_token(spec_hash, scope, name, &error))
        }
    }
}

/// Whether a deployment name carries this spec's hash (the default policy
/// names deployments `{template}-{first 12 of the spec hash}`).
fn names_this_spec(name: &str, spec_hash: &str) -> bool {
    spec_hash.len() >= 12 && name.ends_with(&spec_hash[..12])
}

fn rejected_token(
    spec_hash: &str,
    scope: &str,
    name: &str,
    error: &crate::radius::RadiusError,
) -> ResumeToken {
    let (code, message) = match error {
        crate::radius::RadiusError::Arm { code, message, .. } => (code.clone(), message.clone()),
        other => (other.reason().to_string(), other.to_string()),
    };
    ResumeToken {
        kind: OperationKind::Deployment,
        resource_id: format!("{scope}/providers/Microsoft.Resources/deployments/{name}"),
        async_operation: None,
        location: None,
        subject: spec_hash.to_string(),
        rejected: Some(Rejection { code, message }),
    }
}

async fn record_rejection(
    api: &Api<DeploymentTemplate>,
    object: &DeploymentTemplate,
    spec_hash: &str,
    error: &crate::radius::RadiusError,
) -> Result<(), Error> {
    let scope = object
        .spec
        .provider_config
        .as_ref()
        .and_then(|p| p.radius_scope())
        .unwrap_or_default();
    let token = rejected_token(spec_hash, scope, "resource-group", error);
    let mut fields = Map::new();
    fields.insert("operation".into(), operation_json(&token, "PUT"));
    patch_status(api, &object.name_any(), fields).await
}

async fn create_resource(
    ctx: &Context,
    object: &DeploymentTemplate,
    name: &str,
    radius_id: &str,
) -> Result<(), Error> {
    let namespace = object.namespace().unwrap_or_default();
    let resources: Api<DeploymentResource> = Api::namespaced(ctx.client.clone(), &namespace);
    let owner = object.controller_owner_ref(&()).into_iter().collect();
    let labels = BTreeMap::from([
        (
            OWNER_UID_LABEL.to_string(),
            object.uid().unwrap_or_default(),
        ),
        (
            OWNER_NAME_LABEL.to_string(),
            truncate_label(&object.name_any()),
        ),
    ]);
    let resource = DeploymentResource {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace),
            labels: Some(labels),
            owner_references: Some(owner),
            ..Default::default()
        },
        spec: DeploymentResourceSpec {
            id: radius_id.to_string(),
            provider_config: object.spec.provider_config.clone(),
        },
        status: None,
    };
    match resources.create(&PostParams::default(), &resource).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(response)) if response.code == 409 => {
            // Created by an earlier reconcile whose result we had not seen yet.
            Ok(())
        }
        Err(source) => Err(Error::Kube {
            what: "create a DeploymentResource",
            source,
        }),
    }
}

fn truncate_label(value: &str) -> String {
    value
        .chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.', '_'])
        .to_string()
}

/// The status fields a policy's `set-status` asks for.
fn status_update(
    object: &DeploymentTemplate,
    update: &model::TemplateStatusUpdate,
    spec: &SpecTexts,
    spec_hash: &str,
) -> Map<String, Value> {
    let current = object.status.clone().unwrap_or_default();
    let mut fields = Map::new();
    if let Some(phase) = update.phase {
        fields.insert("phrase".into(), json!(phase.as_str()));
    }
    if let Some(message) = &update.message {
        fields.insert("message".into(), json!(message));
    }
    if let Some(generation) = update.observed_generation {
        fields.insert("observedGeneration".into(), json!(generation));
    }
    if let Some(hash) = &update.status_hash {
        fields.insert("statusHash".into(), json!(hash));
        if hash == spec_hash {
            // Keep a copy of what was deployed, as the seed design does.
            fields.insert("template".into(), json!(spec.template));
            fields.insert("parameters".into(), json!(spec.parameters));
            fields.insert(
                "providerConfig".into(),
                serde_json::to_value(&object.spec.provider_config).unwrap_or(Value::Null),
            );
        }
    }
    if let Some(ids) = &update.output_resources {
        fields.insert("outputResources".into(), json!(ids));
    }
    if !update.conditions.is_empty() {
        let merged = merge_conditions(
            &current.conditions,
            &update.conditions,
            object.meta().generation,
        );
        fields.insert(
            "conditions".into(),
            serde_json::to_value(merged).unwrap_or(Value::Null),
        );
    }
    if update.clear_operation {
        fields.insert("operation".into(), Value::Null);
    }
    fields
}

async fn fail(
    ctx: &Context,
    api: &Api<DeploymentTemplate>,
    object: &DeploymentTemplate,
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    message: &str,
    reason: &str,
    policy: &crate::policy::LoadedPolicy,
) -> Result<Action, Error> {
    tracing::warn!(template = %key(object), %message);
    let mut fields = failure_fields(message, reason, conditions, object.meta().generation);
    fields.insert(
        "policy".into(),
        serde_json::to_value(policy_ref(policy)).unwrap_or(Value::Null),
    );
    let already = object.status.as_ref().and_then(|s| s.message.as_deref()) == Some(message);
    patch_status(api, &object.name_any(), fields).await?;
    if !already {
        let event = model::Event {
            event_type: model::EventType::Warning,
            reason: reason.to_string(),
            message: message.to_string(),
        };
        execute::emit(ctx, object, &event).await;
    }
    Ok(Action::requeue(REJECTED_RETRY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_deployment_named_after_this_spec_is_followed_on_409() {
        let hash = "0123456789abcdef0123456789abcdef";
        assert!(names_this_spec("app-0123456789ab", hash));
        assert!(!names_this_spec("app-fedcba987654", hash));
        assert!(!names_this_spec("app-0123456789ab", "0123"));
    }
}
