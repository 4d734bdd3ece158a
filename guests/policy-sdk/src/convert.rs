//! The one place on the guest side that converts between the WIT bindings and
//! the model: observations come in, plans, descriptions and errors go out.

use std::collections::BTreeMap;

use radwasm_policy_model as model;

use crate::bindings::exports::radapp::policy::{
    metadata, resource_policy as rp, template_policy as tp,
};
use crate::bindings::radapp::policy::types as wit;

fn map(pairs: Vec<wit::KeyValue>) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|pair| (pair.key, pair.value))
        .collect()
}

fn meta(meta: wit::ObjectMeta) -> model::ObjectMeta {
    model::ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        generation: meta.generation,
        deletion_requested: meta.deletion_requested,
        finalizers: meta.finalizers,
        labels: map(meta.labels),
        annotations: map(meta.annotations),
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

fn condition_to_wit(condition: model::Condition) -> wit::Condition {
    wit::Condition {
        kind: condition.kind,
        status: match condition.status {
            model::ConditionStatus::True => wit::ConditionStatus::True,
            model::ConditionStatus::False => wit::ConditionStatus::False,
            model::ConditionStatus::Unknown => wit::ConditionStatus::Unknown,
        },
        reason: condition.reason,
        message: condition.message,
    }
}

fn event_to_wit(event: model::Event) -> wit::Event {
    wit::Event {
        event_type: match event.event_type {
            model::EventType::Normal => wit::EventType::Normal,
            model::EventType::Warning => wit::EventType::Warning,
        },
        reason: event.reason,
        message: event.message,
    }
}

fn operation(operation: wit::OperationObservation) -> model::OperationObservation {
    model::OperationObservation {
        kind: match operation.kind {
            wit::OperationKind::Deployment => model::OperationKind::Deployment,
            wit::OperationKind::Deletion => model::OperationKind::Deletion,
        },
        subject: operation.subject,
        result: match operation.result {
            wit::OperationResult::InProgress(retry_after_ms) => {
                model::OperationResult::InProgress { retry_after_ms }
            }
            wit::OperationResult::Succeeded(output_resources) => {
                model::OperationResult::Succeeded { output_resources }
            }
            wit::OperationResult::Failed(error) => {
                model::OperationResult::Failed(model::RadiusError {
                    code: error.code,
                    message: error.message,
                })
            }
            wit::OperationResult::Canceled => model::OperationResult::Canceled,
            wit::OperationResult::NotFound => model::OperationResult::NotFound,
            wit::OperationResult::PollError(reason) => model::OperationResult::PollError(reason),
        },
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

fn resource_phase_from_wit(phase: rp::ResourcePhase) -> model::ResourcePhase {
    match phase {
        rp::ResourcePhase::Ready => model::ResourcePhase::Ready,
        rp::ResourcePhase::Deleting => model::ResourcePhase::Deleting,
        rp::ResourcePhase::Failed => model::ResourcePhase::Failed,
    }
}

fn resource_phase_to_wit(phase: model::ResourcePhase) -> rp::ResourcePhase {
    match phase {
        model::ResourcePhase::Ready => rp::ResourcePhase::Ready,
        model::ResourcePhase::Deleting => rp::ResourcePhase::Deleting,
        model::ResourcePhase::Failed => rp::ResourcePhase::Failed,
    }
}

/// A template observation from its WIT form.
pub fn template_observation(observation: tp::TemplateObservation) -> model::TemplateObservation {
    let status = observation.status;
    model::TemplateObservation {
        meta: meta(observation.meta),
        spec: model::TemplateSpec {
            template: observation.spec.template,
            parameters: observation.spec.parameters,
            provider_config: observation.spec.provider_config,
        },
        spec_hash: observation.spec_hash,
        status: model::TemplateStatus {
            phase: status.phase.map(template_phase_from_wit),
            message: status.message,
            observed_generation: status.observed_generation,
            status_hash: status.status_hash,
            output_resources: status.output_resources,
            conditions: status
                .conditions
                .into_iter()
                .map(condition_from_wit)
                .collect(),
        },
        owned_resources: observation
            .owned_resources
            .into_iter()
            .map(|owned| model::OwnedResource {
                name: owned.name,
                radius_id: owned.radius_id,
                deletion_requested: owned.deletion_requested,
                phase: owned.phase,
            })
            .collect(),
        operation: observation.operation.map(operation),
        dependencies: observation
            .dependencies
            .into_iter()
            .map(|dependency| model::Dependency {
                name: dependency.name,
                exists: dependency.exists,
                phase: dependency.phase.map(template_phase_from_wit),
            })
            .collect(),
    }
}

/// A resource observation from its WIT form.
pub fn resource_observation(observation: rp::ResourceObservation) -> model::ResourceObservation {
    model::ResourceObservation {
        meta: meta(observation.meta),
        radius_id: observation.radius_id,
        status: model::ResourceStatus {
            phase: observation.status.phase.map(resource_phase_from_wit),
            message: observation.status.message,
            conditions: observation
                .status
                .conditions
                .into_iter()
                .map(condition_from_wit)
                .collect(),
        },
        owner: observation.owner.map(|owner| model::OwnerTemplate {
            name: owner.name,
            reference_uid: owner.reference_uid,
            found_uid: owner.found_uid,
            deletion_requested: owner.deletion_requested,
            annotations: map(owner.annotations),
            provider_config: owner.provider_config,
        }),
        operation: observation.operation.map(operation),
    }
}

/// A template plan in WIT form.
pub fn template_plan(plan: model::TemplatePlan) -> tp::TemplatePlan {
    let actions = plan
        .actions
        .into_iter()
        .map(|action| match action {
            model::TemplateAction::AddFinalizer => tp::TemplateAction::AddFinalizer,
            model::TemplateAction::RemoveFinalizer => tp::TemplateAction::RemoveFinalizer,
            model::TemplateAction::EnsureResourceGroup(scope) => {
                tp::TemplateAction::EnsureResourceGroup(scope)
            }
            model::TemplateAction::StartDeployment(start) => {
                tp::TemplateAction::StartDeployment(tp::StartDeployment {
                    scope: start.scope,
                    deployment_name: start.deployment_name,
                })
            }
            model::TemplateAction::CreateResource(create) => {
                tp::TemplateAction::CreateResource(tp::CreateResource {
                    name: create.name,
                    radius_id: create.radius_id,
                })
            }
            model::TemplateAction::DeleteResource(name) => tp::TemplateAction::DeleteResource(name),
            model::TemplateAction::SetStatus(update) => {
                tp::TemplateAction::SetStatus(tp::TemplateStatusUpdate {
                    phase: update.phase.map(template_phase_to_wit),
                    message: update.message,
                    observed_generation: update.observed_generation,
                    status_hash: update.status_hash,
                    output_resources: update.output_resources,
                    conditions: update
                        .conditions
                        .into_iter()
                        .map(condition_to_wit)
                        .collect(),
                    clear_operation: update.clear_operation,
                })
            }
            model::TemplateAction::EmitEvent(event) => {
                tp::TemplateAction::EmitEvent(event_to_wit(event))
            }
            model::TemplateAction::RequeueAfter(millis) => tp::TemplateAction::RequeueAfter(millis),
        })
        .collect();
    tp::TemplatePlan { actions }
}

/// A resource plan in WIT form.
pub fn resource_plan(plan: model::ResourcePlan) -> rp::ResourcePlan {
    let actions = plan
        .actions
        .into_iter()
        .map(|action| match action {
            model::ResourceAction::AddFinalizer => rp::ResourceAction::AddFinalizer,
            model::ResourceAction::RemoveFinalizer => rp::ResourceAction::RemoveFinalizer,
            model::ResourceAction::StartRadiusDelete => rp::ResourceAction::StartRadiusDelete,
            model::ResourceAction::SetStatus(update) => {
                rp::ResourceAction::SetStatus(rp::ResourceStatusUpdate {
                    phase: update.phase.map(resource_phase_to_wit),
                    message: update.message,
                    conditions: update
                        .conditions
                        .into_iter()
                        .map(condition_to_wit)
                        .collect(),
                    clear_operation: update.clear_operation,
                })
            }
            model::ResourceAction::EmitEvent(event) => {
                rp::ResourceAction::EmitEvent(event_to_wit(event))
            }
            model::ResourceAction::RequeueAfter(millis) => rp::ResourceAction::RequeueAfter(millis),
        })
        .collect();
    rp::ResourcePlan { actions }
}

/// A policy error in WIT form.
pub fn policy_error(error: model::PolicyError) -> wit::PolicyError {
    wit::PolicyError {
        code: error.code,
        message: error.message,
    }
}

/// A description in WIT form.
pub fn description(description: model::Description) -> metadata::Description {
    metadata::Description {
        name: description.name,
        version: description.version,
        summary: description.summary,
        annotations: description
            .annotations
            .into_iter()
            .map(|annotation| metadata::AnnotationDoc {
                name: annotation.name,
                description: annotation.description,
            })
            .collect(),
    }
}
