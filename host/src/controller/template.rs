//! What is particular to `DeploymentTemplate`s on the shared reconcile path:
//! its observation, its guard rails, which of its actions change Radius.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use radwasm_policy_model::{OperationObservation, TemplateAction, TemplateObservation};

use super::object::{Executed, PolicySubject, Reconciled};
use super::{Caches, Context, Error, execute, guard, observe};
use crate::crd::{DeploymentTemplate, PolicyRef};
use crate::policy::{Decision, DecisionError, LoadedPolicy};

impl Reconciled for DeploymentTemplate {
    const KIND: &'static str = "DeploymentTemplate";
    type Observation = TemplateObservation;
    type Action = TemplateAction;

    async fn observe(&self, ctx: &Context) -> Result<TemplateObservation, Error> {
        super::nudge::children_waited_on(ctx, self);
        observe::template(self, ctx).await
    }

    fn ask(
        policy: &LoadedPolicy,
        observation: &TemplateObservation,
    ) -> Result<Decision<Vec<TemplateAction>>, DecisionError> {
        policy
            .decide_template(observation)
            .map(|decision| decision.map_plan(|plan| plan.actions))
    }

    fn guard(
        observation: &TemplateObservation,
        actions: &[TemplateAction],
    ) -> Result<(), guard::Violation> {
        guard::check_template_plan(observation, actions)
    }

    fn operation(observation: &TemplateObservation) -> Option<&OperationObservation> {
        observation.operation.as_ref()
    }

    fn mutates_radius(action: &TemplateAction) -> bool {
        matches!(
            action,
            TemplateAction::EnsureResourceGroup(_) | TemplateAction::StartDeployment(_)
        )
    }

    fn policy_subject(&self, _caches: &Caches) -> PolicySubject<'_> {
        PolicySubject::Meta(&self.metadata)
    }

    fn status_policy(&self) -> Option<&PolicyRef> {
        self.status.as_ref()?.policy.as_ref()
    }

    fn status_parts(&self) -> (&[Condition], Option<&str>) {
        match &self.status {
            Some(status) => (&status.conditions, status.message.as_deref()),
            None => (&[], None),
        }
    }

    async fn execute(
        &self,
        ctx: &Context,
        policy: &PolicyRef,
        observation: &TemplateObservation,
        actions: &[TemplateAction],
    ) -> Result<Executed, Error> {
        execute::template_plan(ctx, self, policy, observation, actions).await
    }
}
