//! The host's guard rails (`host/src/controller/guard.rs`), restated
//! independently of the host as a test oracle: a plan the default policy
//! returns must pass them. Shared by the policy's property tests
//! (`tests/props.rs`) and the fuzz targets in `fuzz/`, which include this
//! file by path.

use radwasm_policy_model::scope::{Scope, deployment_scope, parse_resource_id};
use radwasm_policy_model::*;

pub const MAX_ACTIONS: usize = 1024;
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;

fn valid_object_name(name: &str) -> bool {
    name.len() <= 253
        && !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn valid_deployment_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')'))
}

fn check_message(what: &str, message: Option<&str>) -> Result<(), String> {
    match message {
        Some(message) if message.len() > MAX_MESSAGE_BYTES => Err(format!(
            "{what}: message of {} bytes (at most {MAX_MESSAGE_BYTES})",
            message.len()
        )),
        _ => Ok(()),
    }
}

fn own_scope_check(observation: &TemplateObservation, target: &str) -> Result<(), String> {
    let own = deployment_scope(&observation.spec.provider_config)
        .map_err(|e| format!("targets {target} but the template has no valid scope: {e}"))?;
    let target = Scope::parse(target).map_err(|e| e.to_string())?;
    if target.same_as(&own) {
        Ok(())
    } else {
        Err(format!("targets {target} outside {own}"))
    }
}

/// Why the host would refuse `plan` for `observation`, if it would.
pub fn guard_template(
    observation: &TemplateObservation,
    plan: &TemplatePlan,
) -> Result<(), String> {
    if plan.actions.len() > MAX_ACTIONS {
        return Err(format!("{} actions", plan.actions.len()));
    }
    let in_flight = observation.operation.as_ref().is_some_and(|op| {
        matches!(
            op.result,
            OperationResult::InProgress { .. } | OperationResult::PollError(_)
        )
    });
    let mut started = false;
    for action in &plan.actions {
        match action {
            TemplateAction::EnsureResourceGroup(target) => own_scope_check(observation, target)?,
            TemplateAction::StartDeployment(start) => {
                own_scope_check(observation, &start.scope)?;
                if in_flight || started {
                    return Err("a second deployment".to_string());
                }
                started = true;
                if !valid_deployment_name(&start.deployment_name) {
                    return Err(format!("deployment name {:?}", start.deployment_name));
                }
            }
            TemplateAction::CreateResource(create) => {
                if !valid_object_name(&create.name) {
                    return Err(format!("object name {:?}", create.name));
                }
                parse_resource_id(&create.radius_id).map_err(|e| e.to_string())?;
            }
            TemplateAction::DeleteResource(name)
                if !observation.owned_resources.iter().any(|r| &r.name == name) =>
            {
                return Err(format!("deletes {name:?}, which it does not own"));
            }
            TemplateAction::SetStatus(update) => {
                check_message("setStatus", update.message.as_deref())?
            }
            TemplateAction::EmitEvent(event) => {
                if event.reason.is_empty() {
                    return Err("event without a reason".to_string());
                }
                check_message("emitEvent", Some(&event.message))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Why the host would refuse `plan` for `observation`, if it would.
pub fn guard_resource(
    observation: &ResourceObservation,
    plan: &ResourcePlan,
) -> Result<(), String> {
    if plan.actions.len() > MAX_ACTIONS {
        return Err(format!("{} actions", plan.actions.len()));
    }
    for action in &plan.actions {
        match action {
            ResourceAction::StartRadiusDelete => {
                let owner = observation
                    .owner
                    .as_ref()
                    .ok_or("delete without an owner")?;
                if owner.found_uid.as_deref() != Some(owner.reference_uid.as_str()) {
                    return Err("delete for an owner that is gone".to_string());
                }
                let own = deployment_scope(&owner.provider_config).map_err(|e| e.to_string())?;
                if !own.contains(&observation.radius_id) {
                    return Err(format!("deletes {} outside {own}", observation.radius_id));
                }
            }
            ResourceAction::SetStatus(update) => {
                check_message("setStatus", update.message.as_deref())?
            }
            ResourceAction::EmitEvent(event) => {
                if event.reason.is_empty() {
                    return Err("event without a reason".to_string());
                }
                check_message("emitEvent", Some(&event.message))?;
            }
            _ => {}
        }
    }
    Ok(())
}
