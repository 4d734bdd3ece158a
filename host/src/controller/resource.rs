//! What is particular to `DeploymentResource`s on the shared reconcile path:
//! its observation, its guard rails, which of its actions change Radius (the
//! one DELETE of the resource it stands for).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use radwasm_policy_model::{OperationObservation, ResourceAction, ResourceObservation};

use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::object::{Executed, PolicySubject, Reconciled};
use super::{Caches, Context, Error, execute, guard, observe};
use crate::crd::{DeploymentResource, DeploymentTemplate, PolicyRef};
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

    /// The policy that decides for its owner template decides for it.
    fn policy_subject(&self, caches: &Caches) -> PolicySubject<'_> {
        let namespace = self.namespace().unwrap_or_default();
        self.owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == DeploymentTemplate::kind(&()))
            .and_then(|owner| {
                let template = caches
                    .templates
                    .get(&ObjectRef::new(&owner.name).within(&namespace))?;
                (template.metadata.uid.as_deref() == Some(owner.uid.as_str()))
                    .then_some(PolicySubject::Owner(template))
            })
            .unwrap_or(PolicySubject::Orphan)
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

    /// Settled: not being deleted, no Radius operation or failure, nothing
    /// found missing. Its inputs are then the object and its owner template
    /// (by resourceVersion; and which template holds the owner's name) and
    /// the policy.
    fn settled_inputs(
        &self,
        ctx: &Context,
        observation: &ResourceObservation,
        policy_digest: &str,
    ) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        if observation.meta.deletion_requested
            || observation.operation.is_some()
            || observation.last_failure.is_some()
            || observation.missing_age_ms.is_some()
        {
            return None;
        }
        let caches = ctx.caches().ok()?;
        let owner = match self.policy_subject(caches) {
            PolicySubject::Owner(template) => template.resource_version(),
            _ => None,
        };
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.resource_version().hash(&mut hasher);
        owner.hash(&mut hasher);
        observation
            .owner
            .as_ref()
            .map(|o| (&o.found_uid, o.deletion_requested))
            .hash(&mut hasher);
        policy_digest.hash(&mut hasher);
        Some(hasher.finish())
    }

    fn next_check(&self, ctx: &Context) -> Option<std::time::Duration> {
        super::drift::next_check(ctx, self)
    }

    async fn execute(
        &self,
        ctx: &Context,
        policy: &PolicyRef,
        observation: &ResourceObservation,
        actions: &[ResourceAction],
    ) -> Result<Executed, Error> {
        super::ownership::warn_if_not_an_output(ctx, self).await;
        execute::resource_plan(ctx, self, policy, observation, actions).await
    }

    fn held_back(&self, ctx: &Context) -> Option<String> {
        // Only a deletion waits for others.
        self.metadata.deletion_timestamp.as_ref()?;
        super::ownership::deletion_held_by(ctx.caches().ok()?, &ctx.owners, self)
    }
}
