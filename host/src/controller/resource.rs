//! The `DeploymentResource` reconciler: observe, decide (policy guest),
//! check (guard rails), act. Its one Radius effect is the DELETE of the
//! resource it stands for.

use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use radwasm_policy_model::{RESOURCE_FINALIZER, ResourceAction};
use serde_json::{Map, Value, json};

use super::execute::{
    emit, failure_fields, merge_conditions, patch_status, policy_ref, set_finalizer,
};
use super::{Context, Error, REJECTED_RETRY, decide, guard, observe, requeue};
use crate::crd::{DeploymentResource, ResourceOperation};
use crate::policy::{DecisionError, LoadedPolicy};
use crate::radius::{DeleteStart, OperationKind, Rejection, ResumeToken};

const KIND: &str = "DeploymentResource";

pub async fn reconcile(
    object: Arc<DeploymentResource>,
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

pub fn error_policy(object: Arc<DeploymentResource>, error: &Error, ctx: Arc<Context>) -> Action {
    let delay = ctx.backoff(&key(&object));
    tracing::warn!(resource = %key(&object), %error, ?delay, "reconcile failed; retrying");
    Action::requeue(delay)
}

fn key(object: &DeploymentResource) -> String {
    format!(
        "dr:{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

async fn reconcile_inner(object: &DeploymentResource, ctx: &Context) -> Result<Action, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<DeploymentResource> = Api::namespaced(ctx.client.clone(), &namespace);
    let observation = observe::resource(object, ctx).await?;
    let status = object.status.clone().unwrap_or_default();

    let policy = ctx.policy.current();
    let (decision, observation) =
        match decide(&policy, observation, LoadedPolicy::decide_resource).await {
            Ok((decision, observation, took)) => {
                ctx.metrics
                    .observe_decision("resource", policy.display_name(), took);
                (decision, Some(observation))
            }
            Err(error) => (
                Err(DecisionError::Trap {
                    policy: policy.display_name(),
                    detail: format!("the decision task failed: {error}"),
                }),
                None,
            ),
        };
    let failure = match (&decision, &observation) {
        (Err(error), _) => {
            ctx.metrics
                .decision_failures
                .get_or_create(&crate::metrics::FailureLabels {
                    kind: KIND,
                    reason: error.reason(),
                })
                .inc();
            Some((
                format!("policy {} could not decide: {error}", policy.display_name()),
                "PolicyFailed",
            ))
        }
        (Ok(_), None) => None,
        (Ok(decision), Some(observation)) => {
            guard::check_resource_plan(observation, &decision.plan.actions)
                .err()
                .map(|violation| {
                    (
                        format!(
                            "policy {} returned a rejected plan: {violation}",
                            policy.display_name()
                        ),
                        "PlanRejected",
                    )
                })
        }
    };
    if let Some((message, reason)) = failure {
        tracing::warn!(resource = %key(object), %message);
        let mut fields = failure_fields(
            &message,
            reason,
            &status.conditions,
            object.meta().generation,
        );
        fields.insert(
            "policy".into(),
            serde_json::to_value(policy_ref(&policy)).unwrap_or(Value::Null),
        );
        let already = status.message.as_deref() == Some(message.as_str());
        patch_status(&api, &object.name_any(), fields).await?;
        if !already {
            let event = radwasm_policy_model::Event {
                event_type: radwasm_policy_model::EventType::Warning,
                reason: reason.to_string(),
                message,
            };
            emit(ctx, object, &event).await;
        }
        return Ok(Action::requeue(REJECTED_RETRY));
    }
    let Ok(decision) = decision else {
        return Ok(Action::requeue(REJECTED_RETRY));
    };
    for log in &decision.logs {
        tracing::info!(resource = %key(object), policy = %policy.display_name(), level = ?log.level, "{}", log.message);
    }

    let mut fields: Map<String, Value> = Map::new();
    let mut requeue_ms = None;
    let mut finalizer_removed = false;
    for action in &decision.plan.actions {
        match action {
            ResourceAction::AddFinalizer => {
                set_finalizer(&api, object, RESOURCE_FINALIZER, true).await?
            }
            ResourceAction::RemoveFinalizer => {
                set_finalizer(&api, object, RESOURCE_FINALIZER, false).await?;
                finalizer_removed = true;
            }
            ResourceAction::StartRadiusDelete => {
                let token = start_delete(ctx, &object.spec.id).await?;
                let mut recorded = Map::new();
                recorded.insert(
                    "operation".into(),
                    serde_json::to_value(ResourceOperation {
                        resume_token: token.encode(),
                        operation_kind: "DELETE".to_string(),
                    })
                    .unwrap_or(Value::Null),
                );
                patch_status(&api, &object.name_any(), recorded).await?;
            }
            ResourceAction::SetStatus(update) => {
                if let Some(phase) = update.phase {
                    fields.insert("phrase".into(), json!(phase.as_str()));
                }
                if let Some(message) = &update.message {
                    fields.insert("message".into(), json!(message));
                }
                if !update.conditions.is_empty() {
                    let merged = merge_conditions(
                        &status.conditions,
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
                fields.insert("observedGeneration".into(), json!(object.meta().generation));
            }
            ResourceAction::EmitEvent(event) => emit(ctx, object, event).await,
            ResourceAction::RequeueAfter(ms) => requeue_ms = Some(*ms),
        }
    }
    if !fields.is_empty() && !finalizer_removed {
        fields.insert(
            "policy".into(),
            serde_json::to_value(policy_ref(&policy)).unwrap_or(Value::Null),
        );
        patch_status(&api, &object.name_any(), fields).await?;
    }
    Ok(requeue(requeue_ms))
}

/// Start the Radius DELETE; the token always records the outcome, so the
/// next reconcile's poll tells the policy how it went.
async fn start_delete(ctx: &Context, id: &str) -> Result<ResumeToken, Error> {
    let token = |rejected| ResumeToken {
        kind: OperationKind::Deletion,
        resource_id: id.to_string(),
        async_operation: None,
        location: None,
        subject: String::new(),
        rejected,
    };
    match ctx.radius.start_delete(id).await {
        Ok(DeleteStart::Started(token)) => Ok(token),
        // Done at once: polling the resource itself then finds it gone.
        Ok(DeleteStart::Done { .. }) => Ok(token(None)),
        Err(error) if error.is_transient() => Err(error.into()),
        Err(crate::radius::RadiusError::Arm { code, message, .. }) => {
            Ok(token(Some(Rejection { code, message })))
        }
        Err(other) => Ok(token(Some(Rejection {
            code: other.reason().to_string(),
            message: other.to_string(),
        }))),
    }
}
