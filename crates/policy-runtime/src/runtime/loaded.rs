//! A loaded policy deciding: each decision in a fresh store and instance,
//! through the exports of the contract version the guest was built
//! against; a layer after the policy below it.

use std::sync::Arc;

use radwasm_policy_model as model;
use wasmtime::Store;
use wasmtime::Trap;
use wasmtime::component::InstancePre;

use super::super::convert;
use super::super::sandbox::{GuestLog, SandboxState};
use super::super::validate::{LoadError, Worlds};
use super::exports::{Exports, Role};
use super::{Decision, DecisionError, LayerPlan, PolicyEngine};

/// A validated, compiled policy ready to decide. Cheap to clone.
///
/// A layer carries the policy it decides over (`base`), itself possibly a
/// layer: the stack bottoms out in a policy that decides alone.
#[derive(Clone)]
pub struct LoadedPolicy {
    inner: Arc<LoadedInner>,
    limits: DecisionLimits,
    base: Option<Box<LoadedPolicy>>,
}

/// The fuel and memory one decision of a policy may use: the engine's
/// [`Limits`] unless the policy was given lower ones
/// ([`LoadedPolicy::with_limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionLimits {
    pub fuel: u64,
    pub memory_bytes: usize,
}

struct LoadedInner {
    engine: PolicyEngine,
    source_name: String,
    digest: String,
    worlds: Worlds,
    description: model::Description,
    instance_pre: InstancePre<SandboxState>,
    exports: Exports,
    uses_wasi: bool,
}

impl LoadedPolicy {
    /// A compiled component of `worlds`, linked as `instance_pre`, made a
    /// policy: its exports looked up, a layer put over the built-in
    /// default, and its `describe` answered within the sandbox's limits.
    pub(super) fn new(
        engine: &PolicyEngine,
        source_name: &str,
        digest: String,
        worlds: Worlds,
        instance_pre: InstancePre<SandboxState>,
        uses_wasi: bool,
    ) -> Result<Self, LoadError> {
        let incompatible = |error: wasmtime::Error| LoadError::Incompatible {
            source_name: source_name.to_string(),
            detail: format!("{error:#}"),
        };
        let exports = Exports::new(&instance_pre, worlds).map_err(incompatible)?;
        // A layer decides over a base: the engine's (the embedding
        // program's built-in policy) until it is given another
        // (`LoadedPolicy::on_base`).
        let base = if worlds.layer {
            let base = engine.base().ok_or_else(|| LoadError::Link {
                source_name: source_name.to_string(),
                detail: "a layer needs a policy to decide over, and this engine has none \
                         (EngineOptions::base)"
                    .to_string(),
            })?;
            Some(Box::new(engine.load_bytes(base.name, base.bytes)?))
        } else {
            None
        };
        let limits = engine.limits();
        let mut policy = LoadedPolicy {
            limits: DecisionLimits {
                fuel: limits.fuel,
                memory_bytes: limits.memory_bytes,
            },
            base,
            inner: Arc::new(LoadedInner {
                engine: engine.clone(),
                source_name: source_name.to_string(),
                digest,
                worlds,
                description: model::Description {
                    name: source_name.to_string(),
                    version: String::new(),
                    summary: String::new(),
                    annotations: Vec::new(),
                },
                instance_pre,
                exports,
                uses_wasi,
            }),
        };
        // Validate at load time, not on first use: `describe` must answer
        // within the sandbox limits.
        let description = policy
            .call_describe()
            .map_err(|error| LoadError::Describe {
                source_name: source_name.to_string(),
                detail: error.to_string(),
            })?;
        if let Some(inner) = Arc::get_mut(&mut policy.inner) {
            inner.description = description;
        }
        Ok(policy)
    }
}

/// One decision of a guest that decides alone (contract version
/// `$convert`), for the kind named `$kind`: its observation lowered, the
/// guest called in a fresh instance, its plan lifted.
macro_rules! policy_decide {
    ($policy:expr, $indices:expr, $observation:expr, $convert:ident, $kind:literal,
     $observation_to_wit:ident, $plan_from_wit:ident) => {{
        let policy = $policy;
        let indices = $indices.ok_or_else(|| policy.unsupported($kind))?;
        let input = convert::$convert::$observation_to_wit($observation.clone());
        let (result, state) = policy.run(|store, instance| {
            let guest = indices.load(&mut *store, instance)?;
            guest.call_decide(&mut *store, &input)
        })?;
        policy.finish(
            result
                .map(convert::$convert::$plan_from_wit)
                .map_err(convert::$convert::policy_error_from_wit),
            state,
        )
    }};
}

/// A layer's decision (contract 0.4 on) for one kind: the base decides first, then the
/// layer is given the observation and the base's plan.
macro_rules! layer_decide {
    ($policy:expr, $indices:expr, $observation:expr, $convert:ident, $base_decide:ident, $kind:literal,
     $observation_to_wit:ident, $plan_to_wit:ident, $plan_from_wit:ident) => {{
        let policy = $policy;
        let base = policy.base_decision(|base| base.$base_decide($observation), $kind)?;
        let input = convert::$convert::$observation_to_wit($observation.clone());
        let below = match convert::$convert::$plan_to_wit(base.plan.clone()) {
            Ok(below) => below,
            // The base planned what a 0.4 layer cannot be shown: fail the
            // stack rather than show it a plan that says something else.
            Err(error) => {
                return Err(DecisionError::Policy {
                    policy: policy.display_name(),
                    error: model::PolicyError {
                        code: "BaseNotShowable".to_string(),
                        message: format!("its base planned {error}; rebuild the layer against the current contract"),
                    },
                });
            }
        };
        let (result, state) = policy.run(|store, instance| {
            let guest = $indices.load(&mut *store, instance)?;
            guest.call_decide(&mut *store, &input, &below)
        })?;
        let top = policy.finish(
            result
                .map(convert::$convert::$plan_from_wit)
                .map_err(convert::$convert::policy_error_from_wit),
            state,
        );
        policy.stack_on(base, top)
    }};
}

impl LoadedPolicy {
    /// What the guest's `describe` said at load time.
    pub fn description(&self) -> &model::Description {
        &self.inner.description
    }

    /// SHA-256 of the component bytes, hex.
    pub fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// Where the policy was loaded from.
    pub fn source_name(&self) -> &str {
        &self.inner.source_name
    }

    /// Which worlds of the contract the guest implements.
    pub fn worlds(&self) -> Worlds {
        self.inner.worlds
    }

    /// The fuel and memory each of its decisions may use.
    pub fn limits(&self) -> DecisionLimits {
        self.limits
    }

    /// Whether it is a layer, deciding over the plan of [`Self::base`].
    pub fn is_layer(&self) -> bool {
        self.inner.worlds.layer
    }

    /// The policy a layer decides over; `None` for a policy that decides
    /// alone.
    pub fn base(&self) -> Option<&LoadedPolicy> {
        self.base.as_deref()
    }

    /// This layer over `base` instead of the base it has. A policy that
    /// decides alone has no base and is returned unchanged.
    pub fn on_base(&self, base: LoadedPolicy) -> LoadedPolicy {
        LoadedPolicy {
            base: self.is_layer().then(|| Box::new(base)),
            ..self.clone()
        }
    }

    /// `name@version` of every policy of the stack, top first.
    pub fn stack(&self) -> Vec<String> {
        let mut names = vec![self.display_name()];
        let mut below = self.base();
        while let Some(policy) = below {
            names.push(policy.display_name());
            below = policy.base();
        }
        names
    }

    /// The same policy with its own limits for each decision, each at most
    /// the engine's (which are caps: a larger value is lowered to the cap).
    pub fn with_limits(&self, fuel: Option<u64>, memory_bytes: Option<usize>) -> LoadedPolicy {
        let caps = self.inner.engine.limits();
        LoadedPolicy {
            inner: self.inner.clone(),
            base: self.base.clone(),
            limits: DecisionLimits {
                fuel: fuel.map_or(caps.fuel, |f| f.min(caps.fuel)),
                memory_bytes: memory_bytes.map_or(caps.memory_bytes, |m| m.min(caps.memory_bytes)),
            },
        }
    }

    /// The same policy with at most `fuel` for each decision of each
    /// policy of its stack; never more than their own budgets, and the same
    /// memory caps.
    pub fn with_fuel(&self, fuel: u64) -> LoadedPolicy {
        LoadedPolicy {
            inner: self.inner.clone(),
            base: self
                .base
                .as_ref()
                .map(|base| Box::new(base.with_fuel(fuel))),
            limits: DecisionLimits {
                fuel: fuel.min(self.limits.fuel),
                ..self.limits
            },
        }
    }

    /// Whether the guest, or a policy below it, imports any WASI
    /// interface. One that imports none can make no host call that blocks
    /// (WASI's synchronous calls wait on the async runtime), so it may
    /// decide on an async worker.
    pub fn uses_wasi(&self) -> bool {
        self.inner.uses_wasi || self.base().is_some_and(LoadedPolicy::uses_wasi)
    }

    /// `name@version`, as shown in status and logs.
    pub fn display_name(&self) -> String {
        let description = self.description();
        if description.version.is_empty() {
            description.name.clone()
        } else {
            format!("{}@{}", description.name, description.version)
        }
    }

    fn call_describe(&self) -> Result<model::Description, DecisionError> {
        macro_rules! describe {
            ($indices:expr, $convert:ident) => {{
                let (result, _) = self.run(|store, instance| {
                    let guest = $indices.metadata.load(&mut *store, instance)?;
                    guest.call_describe(&mut *store)
                })?;
                Ok(convert::$convert::description_from_wit(result))
            }};
        }
        match &self.inner.exports {
            Exports::V0_6(indices) => describe!(indices, v0_6),
            Exports::V0_5(indices) => describe!(indices, v0_5),
            Exports::V0_4(indices) => describe!(indices, v0_4),
            Exports::V0_3(indices) => describe!(indices, v0_3),
            Exports::V0_2(indices) => describe!(indices, v0_2),
            Exports::V0_1(indices) => describe!(indices, v0_1),
        }
    }

    /// Decide for one `DeploymentTemplate`.
    pub fn decide_template(
        &self,
        observation: &model::TemplateObservation,
    ) -> Result<Decision<model::TemplatePlan>, DecisionError> {
        macro_rules! decide {
            ($indices:expr, $convert:ident) => {
                policy_decide!(
                    self,
                    $indices,
                    observation,
                    $convert,
                    "DeploymentTemplate",
                    template_observation_to_wit,
                    template_plan_from_wit
                )
            };
        }
        macro_rules! roles_decide {
            ($roles:expr, $convert:ident) => {
                match &$roles {
                    Some(Role::Policy(indices)) => {
                        decide!(Some(indices), $convert)
                    }
                    Some(Role::Layer(indices)) => layer_decide!(
                        self,
                        indices,
                        observation,
                        $convert,
                        decide_template,
                        "DeploymentTemplate",
                        template_observation_to_wit,
                        template_plan_to_wit,
                        template_plan_from_wit
                    ),
                    None => self.base_decision(
                        |base| base.decide_template(observation),
                        "DeploymentTemplate",
                    ),
                }
            };
        }
        match &self.inner.exports {
            Exports::V0_6(indices) => roles_decide!(indices.template, v0_6),
            Exports::V0_5(indices) => roles_decide!(indices.template, v0_5),
            Exports::V0_4(indices) => roles_decide!(indices.template, v0_4),
            Exports::V0_3(indices) => decide!(indices.template.as_ref(), v0_3),
            Exports::V0_2(indices) => decide!(indices.template.as_ref(), v0_2),
            Exports::V0_1(indices) => decide!(indices.template.as_ref(), v0_1),
        }
    }

    /// Decide for one `DeploymentResource`.
    pub fn decide_resource(
        &self,
        observation: &model::ResourceObservation,
    ) -> Result<Decision<model::ResourcePlan>, DecisionError> {
        macro_rules! decide {
            ($indices:expr, $convert:ident) => {
                policy_decide!(
                    self,
                    $indices,
                    observation,
                    $convert,
                    "DeploymentResource",
                    resource_observation_to_wit,
                    resource_plan_from_wit
                )
            };
        }
        macro_rules! roles_decide {
            ($roles:expr, $convert:ident) => {
                match &$roles {
                    Some(Role::Policy(indices)) => {
                        decide!(Some(indices), $convert)
                    }
                    Some(Role::Layer(indices)) => layer_decide!(
                        self,
                        indices,
                        observation,
                        $convert,
                        decide_resource,
                        "DeploymentResource",
                        resource_observation_to_wit,
                        resource_base_to_wit,
                        resource_plan_from_wit
                    ),
                    None => self.base_decision(
                        |base| base.decide_resource(observation),
                        "DeploymentResource",
                    ),
                }
            };
        }
        match &self.inner.exports {
            Exports::V0_6(indices) => roles_decide!(indices.resource, v0_6),
            Exports::V0_5(indices) => roles_decide!(indices.resource, v0_5),
            Exports::V0_4(indices) => roles_decide!(indices.resource, v0_4),
            Exports::V0_3(indices) => decide!(indices.resource.as_ref(), v0_3),
            Exports::V0_2(indices) => decide!(indices.resource.as_ref(), v0_2),
            Exports::V0_1(indices) => decide!(indices.resource.as_ref(), v0_1),
        }
    }

    /// The decision of the policy below this layer. A layer that does not
    /// decide for a kind leaves it to its base; a policy that decides alone
    /// has none, and does not decide for kinds it does not export.
    fn base_decision<P>(
        &self,
        decide: impl FnOnce(&LoadedPolicy) -> Result<Decision<P>, DecisionError>,
        kind: &'static str,
    ) -> Result<Decision<P>, DecisionError> {
        match self.base() {
            Some(base) => decide(base),
            None => Err(self.unsupported(kind)),
        }
    }

    /// A layer's own decision on top of its base's: the base's plan goes
    /// below, logs and fuel add up.
    fn stack_on<P>(
        &self,
        base: Decision<P>,
        top: Result<Decision<P>, DecisionError>,
    ) -> Result<Decision<P>, DecisionError> {
        let top = top?;
        let mut below = base.below;
        below.push(LayerPlan {
            policy: self
                .base()
                .map(LoadedPolicy::display_name)
                .unwrap_or_default(),
            plan: base.plan,
        });
        let mut logs = base.logs;
        logs.extend(top.logs);
        Ok(Decision {
            plan: top.plan,
            logs,
            dropped_logs: base.dropped_logs + top.dropped_logs,
            fuel_used: base.fuel_used + top.fuel_used,
            below,
        })
    }

    /// Decide for an observation of either kind.
    pub fn decide(
        &self,
        observation: &model::Observation,
    ) -> Result<Decision<model::Plan>, DecisionError> {
        match observation {
            model::Observation::DeploymentTemplate(observation) => Ok(self
                .decide_template(observation)?
                .map_plan(model::Plan::DeploymentTemplate)),
            model::Observation::DeploymentResource(observation) => Ok(self
                .decide_resource(observation)?
                .map_plan(model::Plan::DeploymentResource)),
        }
    }

    fn unsupported(&self, kind: &'static str) -> DecisionError {
        DecisionError::KindNotSupported {
            policy: self.display_name(),
            kind,
            worlds: self.inner.worlds,
        }
    }

    /// Instantiate in a fresh store, run `call`, and classify any failure.
    fn run<R>(
        &self,
        call: impl FnOnce(
            &mut Store<SandboxState>,
            &wasmtime::component::Instance,
        ) -> wasmtime::Result<R>,
    ) -> Result<(R, FinishedStore), DecisionError> {
        let engine = &self.inner.engine;
        let mut store =
            engine
                .new_store(&self.limits)
                .map_err(|error| DecisionError::Instantiate {
                    policy: self.display_name(),
                    detail: format!("{error:#}"),
                })?;
        let instance = match self.inner.instance_pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(error) => return Err(self.classify(&store, error, true)),
        };
        match call(&mut store, &instance) {
            Ok(result) => {
                let fuel_left = store.get_fuel().unwrap_or(0);
                let state = store.into_data();
                Ok((
                    result,
                    FinishedStore {
                        fuel_used: self.limits.fuel.saturating_sub(fuel_left),
                        logs: state.logs,
                        dropped_logs: state.dropped_logs,
                    },
                ))
            }
            Err(error) => Err(self.classify(&store, error, false)),
        }
    }

    fn classify(
        &self,
        store: &Store<SandboxState>,
        error: wasmtime::Error,
        instantiating: bool,
    ) -> DecisionError {
        let policy = self.display_name();
        if store.data().memory_limit_hit {
            return DecisionError::MemoryLimit {
                policy,
                limit_bytes: self.limits.memory_bytes,
            };
        }
        if let Some(Trap::OutOfFuel) = error.downcast_ref::<Trap>() {
            return DecisionError::OutOfFuel {
                policy,
                fuel: self.limits.fuel,
            };
        }
        let detail = format!("{error:#}");
        if instantiating {
            DecisionError::Instantiate { policy, detail }
        } else {
            DecisionError::Trap { policy, detail }
        }
    }

    fn finish<P>(
        &self,
        result: Result<P, model::PolicyError>,
        state: FinishedStore,
    ) -> Result<Decision<P>, DecisionError> {
        match result {
            Ok(plan) => Ok(Decision {
                plan,
                logs: state.logs,
                dropped_logs: state.dropped_logs,
                fuel_used: state.fuel_used,
                below: Vec::new(),
            }),
            Err(error) => Err(DecisionError::Policy {
                policy: self.display_name(),
                error,
            }),
        }
    }
}

struct FinishedStore {
    fuel_used: u64,
    logs: Vec<GuestLog>,
    dropped_logs: usize,
}
