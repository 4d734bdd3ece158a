//! Building the observation a policy decides on: the object, what it owns,
//! the templates it depends on, and one poll of the recorded Radius operation.
//! Only reads happen here.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};
use radwasm_policy_model as model;
use sha2::{Digest, Sha256};

use super::{Context, Error, OWNER_UID_LABEL};
use crate::crd::{
    DeploymentResource, DeploymentTemplate, FailedRequest, ProviderConfig, ResourceOperation,
};
use crate::radius::{self, PollOutcome, ResumeToken};

/// The spec as the three JSON texts the policy and Radius see.
pub struct SpecTexts {
    pub template: String,
    pub parameters: String,
    pub provider_config: String,
}

pub fn spec_texts(template: &DeploymentTemplate) -> SpecTexts {
    SpecTexts {
        template: template.spec.template.clone(),
        parameters: template.spec.parameters.clone(),
        provider_config: provider_config_text(template.spec.provider_config.as_ref()),
    }
}

pub fn provider_config_text(config: Option<&ProviderConfig>) -> String {
    config
        .and_then(|c| serde_json::to_string(c).ok())
        .unwrap_or_default()
}

/// Hash of the spec: any change to template, parameters or provider config
/// changes it; nothing else does.
pub fn spec_hash(spec: &SpecTexts) -> String {
    let mut hasher = Sha256::new();
    for part in [&spec.template, &spec.parameters, &spec.provider_config] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

fn meta(meta: &ObjectMeta) -> model::ObjectMeta {
    model::ObjectMeta {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        generation: meta.generation.unwrap_or_default(),
        deletion_requested: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
    }
}

pub fn conditions(conditions: &[Condition]) -> Vec<model::Condition> {
    conditions
        .iter()
        .map(|c| model::Condition {
            kind: c.type_.clone(),
            status: match c.status.as_str() {
                "True" => model::ConditionStatus::True,
                "False" => model::ConditionStatus::False,
                _ => model::ConditionStatus::Unknown,
            },
            reason: c.reason.clone(),
            message: c.message.clone(),
        })
        .collect()
}

/// Everything the template policy needs for one reconcile.
pub async fn template(
    object: &DeploymentTemplate,
    ctx: &Context,
) -> Result<model::TemplateObservation, Error> {
    let spec = &spec_texts(object);
    let spec_hash = &spec_hash(spec);
    let namespace = object.namespace().unwrap_or_default();
    let uid = object.uid().unwrap_or_default();
    let resources: Api<DeploymentResource> = Api::namespaced(ctx.client.clone(), &namespace);
    let owned = resources
        .list(&ListParams::default().labels(&format!("{OWNER_UID_LABEL}={uid}")))
        .await
        .map_err(Error::kube("list owned DeploymentResources"))?;
    let owned_resources = owned
        .items
        .iter()
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .map(|r| model::OwnedResource {
            name: r.name_any(),
            radius_id: r.spec.id.clone(),
            deletion_requested: r.meta().deletion_timestamp.is_some(),
            phase: r
                .status
                .as_ref()
                .and_then(|s| s.phrase.clone())
                .unwrap_or_default(),
        })
        .collect();

    let status = object.status.clone().unwrap_or_default();
    let operation = operation(
        ctx,
        status.operation.as_ref(),
        status.failed_request.as_ref(),
    )
    .await;

    let annotations = object.annotations();
    let mut dependencies = Vec::new();
    let names = model::annotations::depends_on(annotations);
    if !names.is_empty() {
        let templates: Api<DeploymentTemplate> = Api::namespaced(ctx.client.clone(), &namespace);
        for name in names {
            let found = templates
                .get_opt(&name)
                .await
                .map_err(Error::kube("get a depends-on template"))?;
            dependencies.push(model::Dependency {
                exists: found.is_some(),
                phase: found
                    .as_ref()
                    .and_then(|t| t.status.as_ref())
                    .and_then(|s| s.phrase.as_deref())
                    .and_then(|p| p.parse().ok()),
                name,
            });
        }
    }

    Ok(model::TemplateObservation {
        meta: meta(object.meta()),
        spec: model::TemplateSpec {
            template: spec.template.clone(),
            parameters: spec.parameters.clone(),
            provider_config: spec.provider_config.clone(),
        },
        spec_hash: spec_hash.to_string(),
        status: model::TemplateStatus {
            phase: status.phrase.as_deref().and_then(|p| p.parse().ok()),
            message: status.message.clone().unwrap_or_default(),
            observed_generation: status.observed_generation.unwrap_or_default(),
            status_hash: status.status_hash.clone(),
            output_resources: status.output_resources.clone(),
            conditions: conditions(&status.conditions),
        },
        owned_resources,
        operation,
        dependencies,
    })
}

/// Everything the resource policy needs for one reconcile.
pub async fn resource(
    object: &DeploymentResource,
    ctx: &Context,
) -> Result<model::ResourceObservation, Error> {
    let namespace = object.namespace().unwrap_or_default();
    let owner_ref = object
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "DeploymentTemplate")
        .cloned();
    let owner = match owner_ref {
        None => None,
        Some(reference) => {
            let templates: Api<DeploymentTemplate> =
                Api::namespaced(ctx.client.clone(), &namespace);
            let found = templates
                .get_opt(&reference.name)
                .await
                .map_err(Error::kube("get the owner template"))?;
            Some(model::OwnerTemplate {
                name: reference.name.clone(),
                reference_uid: reference.uid.clone(),
                found_uid: found.as_ref().and_then(|t| t.uid()),
                deletion_requested: found
                    .as_ref()
                    .is_some_and(|t| t.meta().deletion_timestamp.is_some()),
                annotations: found
                    .as_ref()
                    .map(|t| t.annotations().clone())
                    .unwrap_or_else(BTreeMap::new),
                provider_config: found
                    .as_ref()
                    .map(|t| provider_config_text(t.spec.provider_config.as_ref()))
                    .unwrap_or_default(),
            })
        }
    };
    let status = object.status.clone().unwrap_or_default();
    let operation = operation(
        ctx,
        status.operation.as_ref(),
        status.failed_request.as_ref(),
    )
    .await;
    Ok(model::ResourceObservation {
        meta: meta(object.meta()),
        radius_id: object.spec.id.clone(),
        status: model::ResourceStatus {
            phase: status.phrase.as_deref().and_then(|p| p.parse().ok()),
            message: status.message.clone().unwrap_or_default(),
            conditions: conditions(&status.conditions),
        },
        owner,
        operation,
    })
}

/// What the policy is told of the last Radius attempt: the recorded
/// operation, polled once; or else a request Radius refused, as an attempt
/// that failed.
async fn operation(
    ctx: &Context,
    recorded: Option<&ResourceOperation>,
    failed: Option<&FailedRequest>,
) -> Option<model::OperationObservation> {
    match (recorded, failed) {
        (Some(recorded), _) => Some(poll(ctx, recorded).await),
        (None, Some(failed)) => {
            let deletion = failed.operation_kind == "DELETE";
            Some(model::OperationObservation {
                kind: if deletion {
                    model::OperationKind::Deletion
                } else {
                    model::OperationKind::Deployment
                },
                subject: if deletion {
                    failed.target.clone()
                } else {
                    failed.subject.clone()
                },
                result: model::OperationResult::Failed(model::RadiusError {
                    code: failed.code.clone(),
                    message: failed.message.clone(),
                }),
            })
        }
        (None, None) => None,
    }
}

/// Poll the recorded operation once and say what it is doing.
async fn poll(ctx: &Context, recorded: &ResourceOperation) -> model::OperationObservation {
    let token = match ResumeToken::decode(&recorded.resume_token) {
        Ok(token) => token,
        Err(problem) => {
            tracing::warn!(%problem, "dropping an unreadable operation record");
            // Unreadable: report it lost, so the policy forgets it.
            return model::OperationObservation {
                kind: if recorded.operation_kind == "DELETE" {
                    model::OperationKind::Deletion
                } else {
                    model::OperationKind::Deployment
                },
                subject: String::new(),
                result: model::OperationResult::NotFound,
            };
        }
    };
    let (kind, subject) = match token.kind {
        radius::OperationKind::Deployment => {
            (model::OperationKind::Deployment, token.subject.clone())
        }
        radius::OperationKind::Deletion => {
            (model::OperationKind::Deletion, token.resource_id.clone())
        }
    };
    let result = match ctx.radius.poll(&token).await {
        Ok(PollOutcome::InProgress { retry_after }) => model::OperationResult::InProgress {
            retry_after_ms: retry_after.map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
        },
        Ok(PollOutcome::Succeeded { output_resources }) => {
            model::OperationResult::Succeeded { output_resources }
        }
        Ok(PollOutcome::Failed { code, message }) => {
            model::OperationResult::Failed(model::RadiusError { code, message })
        }
        Ok(PollOutcome::Canceled) => model::OperationResult::Canceled,
        Ok(PollOutcome::NotFound) => model::OperationResult::NotFound,
        Err(error) => model::OperationResult::PollError(error.to_string()),
    };
    model::OperationObservation {
        kind,
        subject,
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(template: &str, parameters: &str, provider_config: &str) -> SpecTexts {
        SpecTexts {
            template: template.into(),
            parameters: parameters.into(),
            provider_config: provider_config.into(),
        }
    }

    #[test]
    fn the_spec_hash_moves_with_every_part_of_the_spec_and_only_with_it() {
        let base = spec_hash(&spec("{}", "{\"a\":{\"value\":1}}", "{}"));
        assert_eq!(base, spec_hash(&spec("{}", "{\"a\":{\"value\":1}}", "{}")));
        assert_ne!(base, spec_hash(&spec("{ }", "{\"a\":{\"value\":1}}", "{}")));
        assert_ne!(base, spec_hash(&spec("{}", "{\"a\":{\"value\":2}}", "{}")));
        assert_ne!(
            base,
            spec_hash(&spec("{}", "{\"a\":{\"value\":1}}", "{\"radius\":{}}"))
        );
        // Moving text between fields is a different spec.
        assert_ne!(
            spec_hash(&spec("ab", "", "")),
            spec_hash(&spec("a", "b", ""))
        );
    }
}
