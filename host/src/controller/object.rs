//! What one object kind brings to the shared reconcile path (`driver/`):
//! the [`Reconciled`] trait the two kinds implement, how a plan's execution
//! went, and the key an object is remembered under.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Resource, ResourceExt};
use radwasm_policy_model as model;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::guard::Violation;
use super::{Caches, Context, Error};
use crate::crd::{DeploymentTemplate, PolicyRef};
use crate::policy::records::RecordedObservation;
use crate::policy::{Decision, DecisionError, LoadedPolicy};

/// Whose labels and annotations choose an object's policy
/// (`reconcile_policy::registry`).
pub enum PolicySubject<'a> {
    /// The object's own (a template's).
    Meta(&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta),
    /// Its owner template's (a resource's).
    Owner(Arc<DeploymentTemplate>),
    /// A resource whose owner template is gone: the controller's `--policy`.
    Orphan,
}

/// What one object kind brings to the shared reconcile path.
pub trait Reconciled:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// The kind as Kubernetes names it; also the `kind` label of metrics.
    const KIND: &'static str;
    type Observation: RecordedObservation + Send + Sync + 'static;
    type Action: PartialEq + Serialize + Send + Sync + 'static;

    /// Everything the policy decides on (only reads happen here).
    fn observe(
        &self,
        ctx: &Context,
    ) -> impl Future<Output = Result<Self::Observation, Error>> + Send;

    /// Ask the guest for a plan.
    fn ask(
        policy: &LoadedPolicy,
        observation: &Self::Observation,
    ) -> Result<Decision<Vec<Self::Action>>, DecisionError>;

    /// The guard rails every plan passes before any effect.
    fn guard(observation: &Self::Observation, actions: &[Self::Action]) -> Result<(), Violation>;

    /// The Radius operation (or refused request) the observation reports.
    fn operation(observation: &Self::Observation) -> Option<&model::OperationObservation>;

    /// True if carrying out this action changes something in Radius.
    fn mutates_radius(action: &Self::Action) -> bool;

    /// Whose labels and annotations choose the policy.
    fn policy_subject(&self, caches: &Caches) -> PolicySubject<'_>;

    /// The policy its status says decided last.
    fn status_policy(&self) -> Option<&PolicyRef>;

    /// The object's current conditions (to merge a failure into) and
    /// status message.
    fn status_parts(&self) -> (&[Condition], Option<&str>);

    /// A digest of everything the observation was made of, if it is one a
    /// decision that left nothing to do can be trusted to answer the same
    /// way again (no operation, no failure, nothing found by a check); `None`
    /// otherwise. A policy is a pure function of its observation, so the
    /// same inputs are not decided twice.
    fn settled_inputs(
        &self,
        _ctx: &Context,
        _observation: &Self::Observation,
        _policy_digest: &str,
    ) -> Option<u64> {
        None
    }

    /// Why this object's Radius mutations must wait for other objects now
    /// (an application's or environment's deletion waits for the rest of
    /// its template's resources: `ownership`), if they must.
    fn held_back(&self, _ctx: &Context) -> Option<String> {
        None
    }

    /// How soon the object must be looked at again whatever its plan says
    /// (a drift check due); `None` if nothing is scheduled.
    fn next_check(&self, _ctx: &Context) -> Option<Duration> {
        None
    }

    /// Carry out a checked plan, in order, stopping at the first error.
    fn execute(
        &self,
        ctx: &Context,
        policy: &PolicyRef,
        observation: &Self::Observation,
        actions: &[Self::Action],
    ) -> impl Future<Output = Result<Executed, Error>> + Send;
}

/// How carrying out a plan went.
#[derive(Debug, Default)]
pub struct Executed {
    /// The plan's `requeue-after`, if it had one.
    pub requeue_ms: Option<u32>,
    /// A Radius mutation of this plan was refused or failed.
    pub mutation_failed: bool,
}

impl Executed {
    /// A write's precondition found the object changed on the server after
    /// the version the plan was decided on: the plan stops there, writes
    /// nothing more, and the newer object is decided on when the watch
    /// brings it (or after a second, whichever comes first).
    pub fn object_moved(self) -> Self {
        Executed {
            requeue_ms: Some(1_000),
            ..self
        }
    }
}

/// The key an object is remembered under (kind, namespace, name).
pub fn key<K: Reconciled>(object: &K) -> String {
    format!(
        "{}:{}/{}",
        K::KIND,
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}
