//! What is particular to `DeploymentResource`s on the shared reconcile path:
//! its observation, its guard rails, which of its actions change Radius (the
//! one DELETE of the resource it stands for).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use radwasm_policy_model::{OperationObservation, ResourceAction, ResourceObservation};

use super::driver::{Executed, Reconciled};
use super::{Context, Error, execute, guard, observe};
use crate::crd::DeploymentResource;
use crate::policy::{Decision, DecisionError, LoadedPolicy};

impl Reconciled for DeploymentResource {
    const KIND: &'static str = "DeploymentResource";
    type Observation = ResourceObservation;
    type Action = ResourceAction;

    async fn observe(&self, ctx: &Context) -> Result<ResourceObservation, Error> {
        observe::resource(self, ctx).await
    }

    fn ask(
        policy: &LoadedPolicy,
        observation: &ResourceObservation,
    ) -> Result<Decision<Vec<ResourceAction>>, DecisionError> {
        policy
            .decide_resource(observation)
            .map(|decision| decision.map_plan(|plan| plan.actions))
    }

    fn guard(
        observation: &ResourceObservation,
        actions: &[ResourceAction],
    ) -> Result<(), guard::Violation> {
        guard::check_resource_plan(observation, actions)
    }

    fn operation(observation: &ResourceObservation) -> Option<&OperationObservation> {
        observation.operation.as_ref()
    }

    fn mutates_radius(action: &ResourceAction) -> bool {
        matches!(action, ResourceAction::StartRadiusDelete)
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
        policy: &LoadedPolicy,
        observation: &ResourceObservation,
        actions: &[ResourceAction],
    ) -> Result<Executed, Error> {
        execute::resource_plan(ctx, self, policy, observation, actions).await
    }
}
