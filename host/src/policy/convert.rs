//! The one place where the host converts between the JSON model
//! (`radwasm-policy-model`) and the WIT bindings: observations go in,
//! plans, descriptions and policy errors come out.

use std::collections::BTreeMap;

use radwasm_policy_model as model;

use super::bindings::exports::radapp::policy::{
    metadata, resource_policy as rp, template_policy as tp,
};
use super::bindings::radapp::policy::types as wit;

fn key_values(map: &BTreeMap<String, String>) -> Vec<wit::KeyValue> {
    map.iter()
        .map(|(key, value)| wit::KeyValue {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

fn meta(meta: &model::ObjectMeta) -> wit::ObjectMeta {
    wit::ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        generation: meta.generation,
        deletion_requested: meta.deletion_requested,
        finalizers: meta.finalizers.clone(),
        labels: key_values(&meta.labels),
        annotations: key_values(&meta.annotations),
    }
}

fn condition_to_wit(condition: &model::Condition) -> wit::Condition {
    wit::Condition {
        kind: condition.kind.clone(),
        status: match condition.status {
            model::ConditionStatus::True => wit::ConditionStatus::True,
            model::ConditionStatus::False => wit::ConditionStatus::False,
            model::ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
        },
        reason: condition.reason.clone(),
        message: condition.message.clone(),
    }
}

fn condition_from_wit(condition: wit::Condition) -> model::Condition {
    model::Condition {
        kind: condition.kind,
        status: match condition.status {
            wit::ConditionStatus::True => model::ConditionStatus::True,
            wit::ConditionStatus::False => model::ConditionStatus::False,
            wit::ConditionStatus::Unknown => model::ConditionStatus::Unknown,
        },
        reason: condition.reason,
        message: condition.message,
    }
}

fn event_from_wit(event: wit::Event) -> model::Event {
    model::Event {
        event_type: match event.event_type {
            wit::EventType::Normal => model::EventType::Normal,
            wit::EventType::Warning => model::EventType::Warning,
        },
        reason: event.reason,
        message: event.message,
    }
}

fn operation(operation: &model::OperationObservation) -> wit::OperationObservation {
    wit::OperationObservation {
        kind: match operation.kind {
            model::OperationKind::Deployment => wit::OperationKind::Deployment,
            model::OperationKind::Deletion => wit::OperationKind::Deletion,
        },
        subject: operation.subject.clone(),
        result: match &operation.result {
            model::OperationResult::InProgress { retry_after_ms } => {
                wit::OperationResult::InProgress(*retry_after_ms)
            }
            model::OperationResult::Succeeded { output_resources } => {
                wit::OperationResult::Succeeded(output_resources.clone())
            }
            model::OperationResult::Failed(error) => {
                wit::OperationResult::Failed(wit::RadiusError {
                    code: error.code.clone(),
                    message: error.message.clone(),
                })
            }
            model::OperationResult::Canceled => wit::OperationResult::Canceled,
            model::OperationResult::NotFound => wit::OperationResult::NotFound,
            model::OperationResult::PollError(reason) => {
                wit::OperationResult::PollError(reason.clone())
            }
        },
    }
}

fn template_phase_to_wit(phase: model::TemplatePhase) -> tp::TemplatePhase {
    match phase {
        model::TemplatePhase::Updating => tp::TemplatePhase::Updating,
        model::TemplatePhase::Ready => tp::TemplatePhase::Ready,
        model::TemplatePhase::ReadyPendingCleanup => tp::TemplatePhase::ReadyPendingCleanup,
        model::TemplatePhase::Deleting => tp::TemplatePhase::Deleting,
        model::TemplatePhase::Failed => tp::TemplatePhase::Failed,
        model::TemplatePhase::Held => tp::TemplatePhase::Held,
    }
}

fn template_phase_from_wit(phase: tp::TemplatePhase) -> model::TemplatePhase {
    match phase {
        tp::TemplatePhase::Updating => model::TemplatePhase::Updating,
        tp::TemplatePhase::Ready => model::TemplatePhase::Ready,
        tp::TemplatePhase::ReadyPendingCleanup => model::TemplatePhase::ReadyPendingCleanup,
        tp::TemplatePhase::Deleting => model::TemplatePhase::Deleting,
        tp::TemplatePhase::Failed => model::TemplatePhase::Failed,
        tp::TemplatePhase::Held => model::TemplatePhase::Held,
    }
}

fn resource_phase_to_wit(phase: model::ResourcePhase) -> rp::ResourcePhase {
    match phase {
        model::ResourcePhase::Ready => rp::ResourcePhase::Ready,
        model::ResourcePhase::Deleting => rp::ResourcePhase::Deleting,
        model::ResourcePhase::Failed => rp::ResourcePhase::Failed,
    }
}

fn resource_phase_from_wit(phase: rp::ResourcePhase) -> model::ResourcePhase {
    match phase {
        rp::ResourcePhase::Ready => model::ResourcePhase::Ready,
        rp::ResourcePhase::Deleting => model::ResourcePhase::Deleting,
        rp::ResourcePhase::Failed => model::ResourcePhase::Failed,
    }
}

/// A template observation in WIT form.
pub fn template_observation(observation: &model::TemplateObservation) -> tp::TemplateObservation {
    let status = &observation.status;
    tp::TemplateObservation {
        meta: meta(&observation.meta),
        spec: tp::TemplateSpec {
            template: observation.spec.template.clone(),
            parameters: observation.spec.parameters.clone(),
            provider_config: observation.spec.provider_config.clone(),
        },
        spec_hash: observation.spec_hash.clone(),
        status: tp::TemplateStatus {
            phase: status.phase.map(template_phase_to_wit),
            message: status.message.clone(),
            observed_generation: status.observed_generation,
            status_hash: status.status_hash.clone(),
            output_resources: status.output_resources.clone(),
            conditions: status.conditions.iter().map(condition_to_wit).collect(),
        },
        owned_resources: observation
            .owned_resources
            .iter()
            .map(|owned| tp::OwnedResource {
                name: owned.name.clone(),
                radius_id: owned.radius_id.clone(),
                deletion_requested: owned.deletion_requested,
                phase: owned.phase.clone(),
            })
            .collect(),
        operation: observation.operation.as_ref().map(operation),
        dependencies: observation
            .dependencies
            .iter()
            .map(|dependency| tp::Dependency {
                name: dependency.name.clone(),
                exists: dependency.exists,
                phase: dependency.phase.map(template_phase_to_wit),
            })
            .collect(),
    }
}

/// A resource observation in WIT form.
pub fn resource_observation(observation: &model::ResourceObservation) -> rp::ResourceObservation {
    rp::ResourceObservation {
        meta: meta(&observation.meta),
        radius_id: observation.radius_id.clone(),
        status: rp::ResourceStatus {
            phase: observation.status.phase.map(resource_phase_to_wit),
            message: observation.status.message.clone(),
            conditions: observation
                .status
                .conditions
                .iter()
                .map(condition_to_wit)
                .collect(),
        },
        owner: observation.owner.as_ref().map(|owner| rp::OwnerTemplate {
            name: owner.name.clone(),
            reference_uid: owner.reference_uid.clone(),
            found_uid: owner.found_uid.clone(),
            deletion_requested: owner.deletion_requested,
            annotations: key_values(&owner.annotations),
            provider_config: owner.provider_config.clone(),
        }),
        operation: observation.operation.as_ref().map(operation),
    }
}

/// A template plan from its WIT form.
pub fn template_plan(plan: tp::TemplatePlan) -> model::TemplatePlan {
    let actions = plan
        .actions
        .into_iter()
        .map(|action| match action {
            tp::TemplateAction::AddFinalizer => model::TemplateAction::AddFinalizer,
            tp::TemplateAction::RemoveFinalizer => model::TemplateAction::RemoveFinalizer,
            tp::TemplateAction::EnsureResourceGroup(scope) => {
                model::TemplateAction::EnsureResourceGroup(scope)
            }
            tp::TemplateAction::StartDeployment(start) => {
                model::TemplateAction::StartDeployment(model::StartDeployment {
                    scope: start.scope,
                    deployment_name: start.deployment_name,
                })
            }
            tp::TemplateAction::CreateResource(create) => {
                model::TemplateAction::CreateResource(model::CreateResource {
                    name: create.name,
                    radius_id: create.radius_id,
                })
            }
            tp::TemplateAction::DeleteResource(name) => model::TemplateAction::DeleteResource(name),
            tp::TemplateAction::SetStatus(update) => {
                model::TemplateAction::SetStatus(model::TemplateStatusUpdate {
                    phase: update.phase.map(template_phase_from_wit),
                    message: update.message,
                    observed_generation: update.observed_generation,
                    status_hash: update.status_hash,
                    output_resources: update.output_resources,
                    conditions: update
                        .conditions
                        .into_iter()
                        .map(condition_from_wit)
                        .collect(),
                    clear_operation: update.clear_operation,
                })
            }
            tp::TemplateAction::EmitEvent(event) => {
                model::TemplateAction::EmitEvent(event_from_wit(event))
            }
            tp::TemplateAction::RequeueAfter(millis) => model::TemplateAction::RequeueAfter(millis),
        })
        .collect();
    model::TemplatePlan { actions }
}

/// A resource plan from its WIT form.
pub fn resource_plan(plan: rp::ResourcePlan) -> model::ResourcePlan {
    let actions = plan
        .actions
        .into_iter()
        .map(|action| match action {
            rp::ResourceAction::AddFinalizer => model::ResourceAction::AddFinalizer,
            rp::ResourceAction::RemoveFinalizer => model::ResourceAction::RemoveFinalizer,
            rp::ResourceAction::StartRadiusDelete => model::ResourceAction::StartRadiusDelete,
            rp::ResourceAction::SetStatus(update) => {
                model::ResourceAction::SetStatus(model::ResourceStatusUpdate {
                    phase: update.phase.map(resource_phase_from_wit),
                    message: update.message,
                    conditions: update
                        .conditions
                        .into_iter()
                        .map(condition_from_wit)
                        .collect(),
                    clear_operation: update.clear_operation,
                })
            }
            rp::ResourceAction::EmitEvent(event) => {
                model::ResourceAction::EmitEvent(event_from_wit(event))
            }
            rp::ResourceAction::RequeueAfter(millis) => model::ResourceAction::RequeueAfter(millis),
        })
        .collect();
    model::ResourcePlan { actions }
}

/// A policy error from its WIT form.
pub fn policy_error(error: wit::PolicyError) -> model::PolicyError {
    model::PolicyError {
        code: error.code,
        message: error.message,
    }
}

/// A guest's description from its WIT form.
pub fn description(description: metadata::Description) -> model::Description {
    model::Description {
        name: description.name,
        version: description.version,
        summary: description.summary,
        annotations: description
            .annotations
            .into_iter()
            .map(|annotation| model::AnnotationDoc {
                name: annotation.name,
                description: annotation.description,
            })
            .collect(),
    }
}
