//! Guard rails: every plan a policy returns is checked here before any effect.
//!
//! A policy is trusted to decide, not to reach outside its object. A template
//! plan may only touch `DeploymentResource`s this template owns, may only
//! deploy into the template's own scope, may not start a second deployment
//! while one is in flight, and is bounded in size. A resource plan may only
//! delete a Radius resource controlled by its live owner template and inside
//! that template's deployment scope. A rejected plan names the rejected action.

use radwasm_policy_model::{
    CreateResource, OperationResult, ResourceAction, ResourceObservation, StartDeployment,
    TemplateAction, TemplateObservation,
};

use radwasm_policy_model::scope;

/// Most actions one plan may hold.
pub const MAX_ACTIONS: usize = 1024;
/// Longest status message or event message a plan may set, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("plan rejected at action {index} ({action}): {reason}")]
pub struct Violation {
    /// Zero-based position of the offending action (the plan length for size).
    pub index: usize,
    /// The action's JSON form, shortened.
    pub action: String,
    pub reason: String,
}

fn violation(index: usize, action: &impl serde::Serialize, reason: impl Into<String>) -> Violation {
    let mut text = serde_json::to_string(action).unwrap_or_else(|_| "<unprintable>".to_string());
    if text.len() > 200 {
        let mut cut = 200;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    Violation {
        index,
        action: text,
        reason: reason.into(),
    }
}

fn check_size(len: usize) -> Result<(), Violation> {
    if len > MAX_ACTIONS {
        return Err(Violation {
            index: MAX_ACTIONS,
            action: format!("{len} actions"),
            reason: format!("a plan may hold at most {MAX_ACTIONS} actions"),
        });
    }
    Ok(())
}

fn check_message(
    index: usize,
    action: &impl serde::Serialize,
    message: Option<&str>,
) -> Result<(), Violation> {
    match message {
        Some(message) if message.len() > MAX_MESSAGE_BYTES => Err(violation(
            index,
            action,
            format!(
                "message is {} bytes; at most {MAX_MESSAGE_BYTES}",
                message.len()
            ),
        )),
        _ => Ok(()),
    }
}

/// Check a template plan against what was observed.
pub fn check_template_plan(
    observation: &TemplateObservation,
    actions: &[TemplateAction],
) -> Result<(), Violation> {
    check_size(actions.len())?;
    // Parsed only for a plan that names a scope (most plans poll).
    let own_scope = std::cell::OnceCell::new();
    let own_scope = || {
        own_scope
            .get_or_init(|| scope::deployment_scope(&observation.spec.provider_config).ok())
            .as_ref()
    };
    let deployment_in_flight = observation.operation.as_ref().is_some_and(|op| {
        matches!(
            op.result,
            OperationResult::InProgress { .. } | OperationResult::PollError(_)
        )
    });
    let mut started = false;
    for (index, action) in actions.iter().enumerate() {
        match action {
            TemplateAction::EnsureResourceGroup(target) => {
                require_own_scope(index, action, own_scope(), target)?;
            }
            TemplateAction::StartDeployment(start) => {
                require_own_scope(index, action, own_scope(), &start.scope)?;
                check_start(index, action, start, deployment_in_flight, started)?;
                started = true;
            }
            TemplateAction::CreateResource(create) => check_create(index, action, create)?,
            TemplateAction::DeleteResource(name) | TemplateAction::DetachResource(name) => {
                require_owned(index, action, observation, name)?;
            }
            TemplateAction::DeleteDeployment(id) => {
                require_recorded(index, action, observation, id)?;
            }
            TemplateAction::SetStatus(update) => {
                check_message(index, action, update.message.as_deref())?;
            }
            TemplateAction::EmitEvent(event) => {
                if event.reason.is_empty() {
                    return Err(violation(index, action, "an event needs a reason"));
                }
                check_message(index, action, Some(&event.message))?;
            }
            TemplateAction::AddFinalizer
            | TemplateAction::RemoveFinalizer
            | TemplateAction::RequeueAfter(_) => {}
        }
    }
    Ok(())
}

/// A deployment may start only if none is in flight, only one per plan
/// (`started`: an earlier action of the plan started one), and only under
/// a name Radius takes.
fn check_start(
    index: usize,
    action: &TemplateAction,
    start: &StartDeployment,
    deployment_in_flight: bool,
    started: bool,
) -> Result<(), Violation> {
    if deployment_in_flight {
        return Err(violation(
            index,
            action,
            "a deployment is already in flight for this template",
        ));
    }
    if started {
        return Err(violation(
            index,
            action,
            "a plan may start at most one deployment",
        ));
    }
    if !valid_deployment_name(&start.deployment_name) {
        return Err(violation(
            index,
            action,
            "deployment name must be 1-64 characters of letters, digits, '-', '_', '.', '(' or ')'",
        ));
    }
    Ok(())
}

/// A `DeploymentResource` is created under a valid object name, for a
/// Radius id that parses.
fn check_create(
    index: usize,
    action: &TemplateAction,
    create: &CreateResource,
) -> Result<(), Violation> {
    if !radwasm_policy_model::is_object_name(&create.name) {
        return Err(violation(
            index,
            action,
            "name is not a valid Kubernetes object name (RFC 1123 subdomain)",
        ));
    }
    if let Err(error) = scope::parse_resource_id(&create.radius_id) {
        return Err(violation(index, action, format!("radius id: {error}")));
    }
    Ok(())
}

/// Only a `DeploymentResource` the template owns is deleted or detached.
fn require_owned(
    index: usize,
    action: &TemplateAction,
    observation: &TemplateObservation,
    name: &str,
) -> Result<(), Violation> {
    if observation
        .owned_resources
        .iter()
        .any(|owned| owned.name == name)
    {
        return Ok(());
    }
    Err(violation(
        index,
        action,
        "this template does not own a DeploymentResource of that name",
    ))
}

/// Only a deployment record the template started is deleted.
fn require_recorded(
    index: usize,
    action: &TemplateAction,
    observation: &TemplateObservation,
    id: &str,
) -> Result<(), Violation> {
    if observation
        .deployments
        .iter()
        .any(|recorded| recorded.eq_ignore_ascii_case(id))
    {
        return Ok(());
    }
    Err(violation(
        index,
        action,
        "not a deployment record this template started",
    ))
}

fn require_own_scope(
    index: usize,
    action: &TemplateAction,
    own_scope: Option<&scope::Scope>,
    target: &str,
) -> Result<(), Violation> {
    let Some(own) = own_scope else {
        return Err(violation(
            index,
            action,
            "the template's providerConfig names no valid Radius scope",
        ));
    };
    match scope::Scope::parse(target) {
        Ok(target) if target.same_as(own) => Ok(()),
        Ok(_) => Err(violation(
            index,
            action,
            format!(
                "scope is not this template's deployment scope {}",
                own.as_str()
            ),
        )),
        Err(error) => Err(violation(index, action, format!("scope: {error}"))),
    }
}

/// Check a resource plan against what was observed.
pub fn check_resource_plan(
    observation: &ResourceObservation,
    actions: &[ResourceAction],
) -> Result<(), Violation> {
    check_size(actions.len())?;
    for (index, action) in actions.iter().enumerate() {
        match action {
            ResourceAction::StartRadiusDelete => {
                let Some(owner) = &observation.owner else {
                    return Err(violation(
                        index,
                        action,
                        "the resource has no controller owner template",
                    ));
                };
                if owner.found_uid.as_deref() != Some(owner.reference_uid.as_str()) {
                    return Err(violation(
                        index,
                        action,
                        format!(
                            "the owner template {} no longer exists with the referenced uid",
                            owner.name
                        ),
                    ));
                }
                let own = scope::deployment_scope(&owner.provider_config).map_err(|error| {
                    violation(index, action, format!("owner providerConfig: {error}"))
                })?;
                if !own.contains(&observation.radius_id) {
                    return Err(violation(
                        index,
                        action,
                        format!(
                            "{} is outside the owner's deployment scope {}",
                            observation.radius_id,
                            own.as_str()
                        ),
                    ));
                }
            }
            ResourceAction::SetStatus(update) => {
                check_message(index, action, update.message.as_deref())?
            }
            ResourceAction::EmitEvent(event) => {
                if event.reason.is_empty() {
                    return Err(violation(index, action, "an event needs a reason"));
                }
                check_message(index, action, Some(&event.message))?;
            }
            ResourceAction::AddFinalizer
            | ResourceAction::RemoveFinalizer
            | ResourceAction::RequeueAfter(_) => {}
        }
    }
    Ok(())
}

fn valid_deployment_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')'))
}

/// RFC 1123 subdomain, as Kubernetes requires for object names.
#[cfg(test)]
mod tests {
    use super::*;
    use radwasm_policy_model::{
        CreateResource, OperationKind, OperationObservation, OwnedResource, OwnerTemplate,
        StartDeployment,
    };

    const SCOPE: &str = "/planes/radius/local/resourceGroups/default";

    fn template() -> TemplateObservation {
        let mut observation = TemplateObservation::default();
        observation.spec.provider_config =
            format!(r#"{{"radius":{{"type":"Radius","value":{{"scope":"{SCOPE}"}}}}}}"#);
        observation.owned_resources.push(OwnedResource {
            name: "frontend-containers-1a2b3c4d".to_string(),
            radius_id: format!("{SCOPE}/providers/Applications.Core/containers/frontend"),
            deletion_requested: false,
            phase: "Ready".to_string(),
            missing_age_ms: None,
        });
        observation
    }

    fn start(scope: &str) -> TemplateAction {
        TemplateAction::StartDeployment(StartDeployment {
            scope: scope.to_string(),
            deployment_name: "app-1234".to_string(),
        })
    }

    #[test]
    fn a_deployment_into_the_templates_own_scope_passes() {
        let plan = vec![
            TemplateAction::EnsureResourceGroup(SCOPE.to_string()),
            start(SCOPE),
        ];
        check_template_plan(&template(), &plan).expect("allowed");
    }

    #[test]
    fn a_deployment_into_another_scope_is_rejected_naming_the_action() {
        let plan = vec![
            TemplateAction::AddFinalizer,
            start("/planes/radius/local/resourceGroups/prod"),
        ];
        let error = check_template_plan(&template(), &plan).expect_err("other scope");
        assert_eq!(error.index, 1);
        assert!(error.to_string().contains("startDeployment"), "{error}");
    }

    #[test]
    fn a_second_deployment_while_one_is_in_flight_is_rejected() {
        let mut observation = template();
        observation.operation = Some(OperationObservation {
            kind: OperationKind::Deployment,
            subject: "h".to_string(),
            result: OperationResult::InProgress {
                retry_after_ms: None,
            },
        });
        let error = check_template_plan(&observation, &[start(SCOPE)]).expect_err("in flight");
        assert!(error.reason.contains("already in flight"), "{error}");
    }

    #[test]
    fn only_owned_resources_may_be_deleted() {
        let observation = template();
        check_template_plan(
            &observation,
            &[TemplateAction::DeleteResource(
                "frontend-containers-1a2b3c4d".into(),
            )],
        )
        .expect("owned");
        let error = check_template_plan(
            &observation,
            &[TemplateAction::DeleteResource("someone-else".into())],
        )
        .expect_err("not owned");
        assert!(error.reason.contains("does not own"), "{error}");
    }

    #[test]
    fn created_resources_need_valid_names_and_ids() {
        let create = |name: &str, id: &str| {
            TemplateAction::CreateResource(CreateResource {
                name: name.to_string(),
                radius_id: id.to_string(),
            })
        };
        let id = format!("{SCOPE}/providers/Applications.Core/containers/frontend");
        check_template_plan(&template(), &[create("frontend-containers-1", &id)]).expect("valid");
        assert!(check_template_plan(&template(), &[create("Frontend_1", &id)]).is_err());
        assert!(check_template_plan(&template(), &[create("frontend", "not-an-id")]).is_err());
    }

    #[test]
    fn oversized_plans_are_rejected() {
        let plan = vec![TemplateAction::AddFinalizer; MAX_ACTIONS + 1];
        assert!(check_template_plan(&template(), &plan).is_err());
    }

    fn resource(id: &str, found_uid: Option<&str>) -> ResourceObservation {
        ResourceObservation {
            radius_id: id.to_string(),
            owner: Some(OwnerTemplate {
                name: "app".to_string(),
                reference_uid: "uid-1".to_string(),
                found_uid: found_uid.map(str::to_string),
                deletion_requested: true,
                annotations: Default::default(),
                provider_config: format!(r#"{{"radius":{{"value":{{"scope":"{SCOPE}"}}}}}}"#),
            }),
            ..ResourceObservation::default()
        }
    }

    #[test]
    fn radius_deletes_need_a_live_owner_and_an_id_in_its_scope() {
        let inside = format!("{SCOPE}/providers/Applications.Core/containers/frontend");
        check_resource_plan(
            &resource(&inside, Some("uid-1")),
            &[ResourceAction::StartRadiusDelete],
        )
        .expect("allowed");

        let error = check_resource_plan(
            &resource(&inside, Some("uid-2")),
            &[ResourceAction::StartRadiusDelete],
        )
        .expect_err("owner replaced");
        assert!(error.reason.contains("uid"), "{error}");

        let outside = "/planes/radius/local/resourceGroups/defaultx/providers/Applications.Core/containers/frontend";
        let error = check_resource_plan(
            &resource(outside, Some("uid-1")),
            &[ResourceAction::StartRadiusDelete],
        )
        .expect_err("outside scope");
        assert!(error.reason.contains("outside"), "{error}");
    }
}
