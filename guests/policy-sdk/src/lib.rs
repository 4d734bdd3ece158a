//! The guest side of the radwasm policy contract.
//!
//! A custom policy implements [`Policy`] on the plain model types
//! (`radwasm-policy-model`); every method defaults to the default policy
//! (`radwasm-policy-core`), so a policy overrides only what it changes.
//! [`export_policy!`] turns it into the component exports of world
//! `radapp:policy/policy@0.6.0`:
//!
//! ```ignore
//! use radwasm_policy_sdk::{Policy, model};
//!
//! struct Strict;
//!
//! impl Policy for Strict {
//!     fn describe() -> model::Description {
//!         let mut description = radwasm_policy_core::describe();
//!         description.name = "strict".into();
//!         description
//!     }
//! }
//!
//! radwasm_policy_sdk::export_policy!(Strict);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the component the host loads.
//! `radwasm policy new` makes a crate set up for exactly that.
//!
//! A *layer* ([`Layer`], exported with [`export_layer!`], world
//! `radapp:policy/layer@0.6.0`) does not link the default logic at all: the
//! host gives each decision the plan of the policy below (the built-in
//! default unless its `ReconcilePolicy` names another base), and the layer
//! returns it amended. Layers are what `radwasm policy new` makes.
//!
//! What a policy author uses:
//!
//! * [`Layer`]: the trait to implement for a layer, one method per kind;
//! * [`export_layer!`]: exports a layer as the component;
//! * [`export_linked_layer!`]: exports a layer with the default policy
//!   linked in as its base, one instance per decision;
//! * [`Policy`]: the trait to implement for a policy that decides alone;
//! * [`export_policy!`]: exports a policy as the component;
//! * [`log`] with a [`Level`]: messages into the controller's log;
//! * [`model`]: the observation and plan types a decision reads and returns;
//! * from `radwasm-policy-core` (a dependency of its own): the default
//!   policy's decisions (`decide_template`, `decide_resource`, `describe`)
//!   to delegate to, and the plan builders of its `plan` module
//!   (`TemplatePlanner`, `ResourcePlanner`, `ready_condition`) that order a
//!   plan's actions and write status only when it changes;
//! * [`arena`]: the allocator installed by default (feature `arena`).

/// The observation and plan types of the policy contract
/// (`radwasm-policy-model`): what a decision is given
/// ([`TemplateObservation`], [`ResourceObservation`]) and what it returns
/// ([`TemplatePlan`], [`ResourcePlan`], or a [`PolicyError`]). Re-exported so
/// that a policy needs no dependency of its own on the model crate, and
/// always gets the version the SDK converts from and to.
pub use radwasm_policy_model as model;

/// The default policy, for [`export_linked_layer!`] to name whatever the
/// guest crate calls its own dependency.
#[doc(hidden)]
pub use radwasm_policy_core;

#[doc(hidden)]
pub mod convert;

pub mod arena;

/// Every guest built with the SDK (feature `arena`, on by default) allocates
/// from a bump arena: the host gives each decision a fresh instance.
#[cfg(all(feature = "arena", target_arch = "wasm32"))]
#[global_allocator]
static ALLOCATOR: arena::DecisionArena = arena::DecisionArena::new();

/// Bindings generated from `wit/policy.wit` (the records, the `log` import
/// and the `metadata` export every guest has), in three parts so that one
/// crate can export either a policy or a layer: the export macros of one
/// `generate!` are named after their interfaces, and `metadata` is in both
/// worlds. `wasm-component-ld` merges the type information of the parts a
/// guest exports into its component.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        inline: "
            package radwasm:sdk;
            world common {
                import radapp:policy/log@0.6.0;
                import radapp:policy/template-types@0.6.0;
                import radapp:policy/resource-types@0.6.0;
                export radapp:policy/metadata@0.6.0;
            }
        ",
        path: "../../wit",
        world: "radwasm:sdk/common",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_common",
        default_bindings_module: "radwasm_policy_sdk::bindings",
    });
}

/// The exports of world `radapp:policy/policy` beyond [`bindings`].
#[doc(hidden)]
pub mod policy_bindings {
    wit_bindgen::generate!({
        inline: "
            package radwasm:sdk;
            world policy-exports {
                export radapp:policy/template-policy@0.6.0;
                export radapp:policy/resource-policy@0.6.0;
            }
        ",
        path: "../../wit",
        world: "radwasm:sdk/policy-exports",
        pub_export_macro: true,
        export_macro_name: "export_policy_exports",
        default_bindings_module: "radwasm_policy_sdk::policy_bindings",
        with: {
            "radapp:policy/types@0.6.0": crate::bindings::radapp::policy::types,
            "radapp:policy/template-types@0.6.0": crate::bindings::radapp::policy::template_types,
            "radapp:policy/resource-types@0.6.0": crate::bindings::radapp::policy::resource_types,
        },
    });
}

/// The exports of world `radapp:policy/layer` beyond [`bindings`].
#[doc(hidden)]
pub mod layer_bindings {
    wit_bindgen::generate!({
        inline: "
            package radwasm:sdk;
            world layer-exports {
                export radapp:policy/template-layer@0.6.0;
                export radapp:policy/resource-layer@0.6.0;
            }
        ",
        path: "../../wit",
        world: "radwasm:sdk/layer-exports",
        pub_export_macro: true,
        export_macro_name: "export_layer_exports",
        default_bindings_module: "radwasm_policy_sdk::layer_bindings",
        with: {
            "radapp:policy/types@0.6.0": crate::bindings::radapp::policy::types,
            "radapp:policy/template-types@0.6.0": crate::bindings::radapp::policy::template_types,
            "radapp:policy/resource-types@0.6.0": crate::bindings::radapp::policy::resource_types,
        },
    });
}

use model::{
    Description, PolicyError, ResourceObservation, ResourcePlan, TemplateObservation, TemplatePlan,
};

/// A reconcile policy on model types: implement it on a unit struct and
/// export it with [`export_policy!`].
///
/// Every method defaults to the default policy (`radwasm-policy-core`), so
/// implement only the decisions you change; inside one, call the default
/// (`radwasm_policy_core::decide_template(observation)`) for every case your
/// rule does not cover. The methods are associated functions, with no
/// `self`: the host runs each decision in a fresh instance of the component,
/// so a policy has no state between decisions, and a decision must be a pure
/// function of its observation (the sandbox gives no clock, randomness,
/// files or network to depend on).
pub trait Policy {
    /// The policy's name, version, one-line summary and the annotations it
    /// understands, as `radwasm policy check` and a `ReconcilePolicy`'s
    /// status show them. The default is the default policy's description
    /// (name `default`): override it to give your policy its own name and
    /// version, starting from `radwasm_policy_core::describe()` to keep the
    /// annotation docs of the default behaviour you reuse.
    fn describe() -> Description {
        radwasm_policy_core::describe()
    }

    /// Decide what to do next for one `DeploymentTemplate`: the actions of
    /// the returned plan (finalizers, Radius calls, `DeploymentResource`
    /// changes, status, events, a requeue) are carried out by the host in
    /// order. Return a [`PolicyError`] only when no decision can be made;
    /// the host then marks the object failed (`PolicyFailed`) and decides
    /// afresh later. Build plans with
    /// `radwasm_policy_core::plan::TemplatePlanner`. The default is the
    /// default policy's decision.
    fn decide_template(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
        radwasm_policy_core::decide_template(observation)
    }

    /// Decide what to do next for one `DeploymentResource` (one Radius
    /// resource a template deployed): as [`Policy::decide_template`], with
    /// `radwasm_policy_core::plan::ResourcePlanner` to build the plan. The
    /// default is the default policy's decision, which most policies keep.
    fn decide_resource(observation: &ResourceObservation) -> Result<ResourcePlan, PolicyError> {
        radwasm_policy_core::decide_resource(observation)
    }
}

/// A layer over the policy below it, on model types: implement it on a
/// unit struct and export it with [`export_layer!`].
///
/// Each method is given the observation and `base`, the plan the policy
/// below decided for it, and returns the plan to carry out: `base` as it
/// is (the default, so implement only the kinds you change), amended
/// (actions dropped, added or changed), or a [`PolicyError`] to refuse (the
/// host marks the object's decision failed and changes nothing else). As
/// with [`Policy`], a decision is a pure function of what it is given.
///
/// ```ignore
/// use radwasm_policy_sdk::{Layer, model};
///
/// struct TeamLabel;
///
/// impl Layer for TeamLabel {
///     fn describe() -> model::Description {
///         model::Description { name: "team-label".into(), version: "0.1.0".into(),
///             summary: "Refuses templates without a team label".into(), annotations: vec![] }
///     }
///     fn decide_template(
///         observation: &model::TemplateObservation,
///         base: model::TemplatePlan,
///     ) -> Result<model::TemplatePlan, model::PolicyError> {
///         if !observation.meta.deletion_requested && !observation.meta.labels.contains_key("team") {
///             return Err(model::PolicyError { code: "MissingTeamLabel".into(),
///                 message: "label the template with its team".into() });
///         }
///         Ok(base)
///     }
/// }
///
/// radwasm_policy_sdk::export_layer!(TeamLabel);
/// ```
pub trait Layer {
    /// The layer's name, version, summary and the annotations it reads.
    fn describe() -> Description;

    /// The plan for one `DeploymentTemplate`, given the base's. The default
    /// keeps the base's plan.
    fn decide_template(
        observation: &TemplateObservation,
        base: TemplatePlan,
    ) -> Result<TemplatePlan, PolicyError> {
        let _ = observation;
        Ok(base)
    }

    /// The plan for one `DeploymentResource`, given the base's. The default
    /// keeps the base's plan.
    fn decide_resource(
        observation: &ResourceObservation,
        base: ResourcePlan,
    ) -> Result<ResourcePlan, PolicyError> {
        let _ = observation;
        Ok(base)
    }
}

/// Severity of a [`log`] message: `Level::Trace`, `Debug`, `Info`, `Warn` or
/// `Error`, mapped onto the controller's log levels.
/// A template plan in this contract's WIT form, or the policy error a plan
/// holding an action the contract cannot carry becomes (the host then marks
/// the decision failed, naming it). Used by the export macros.
#[doc(hidden)]
pub fn template_plan_lowered(
    plan: model::TemplatePlan,
) -> Result<bindings::radapp::policy::template_types::TemplatePlan, model::PolicyError> {
    convert::template_plan_to_wit(plan).map_err(|message| model::PolicyError {
        code: "UnsupportedAction".to_string(),
        message,
    })
}

pub use bindings::radapp::policy::log::Level;

/// Write a message to the controller's log (its tracing output, target
/// `guest`, at the matching level); `radwasm policy run` prints the messages
/// on stderr. Use it to explain a decision or to report input the policy
/// could not understand: a guest has no other output (its stdout and stderr
/// go nowhere). Name the object in the message
/// (`observation.meta.namespace`/`name`) so that a reader can tell which one
/// it is about. The host keeps the first 64 messages of a decision, each cut
/// at 4 KiB, and only counts the rest, so do not log once per item of a long
/// list. Logging never changes the decision.
pub fn log(level: Level, message: &str) {
    bindings::radapp::policy::log::log(level, message);
}

/// Export a [`Policy`] implementation as the guest's component exports
/// (world `radapp:policy/policy@0.6.0`: `metadata.describe`,
/// `template-policy.decide` and `resource-policy.decide`), converting between
/// the WIT types and the [`model`] types. Invoke it once, at the crate root
/// of a `cdylib` crate, with the type implementing [`Policy`]:
///
/// ```ignore
/// radwasm_policy_sdk::export_policy!(MyPolicy);
/// ```
#[macro_export]
macro_rules! export_policy {
    ($policy:ty) => {
        #[doc(hidden)]
        struct __RadwasmPolicyExport;

        impl $crate::bindings::exports::radapp::policy::metadata::Guest for __RadwasmPolicyExport {
            fn describe() -> $crate::bindings::exports::radapp::policy::metadata::Description {
                $crate::convert::description_to_wit(<$policy as $crate::Policy>::describe())
            }
        }

        impl $crate::policy_bindings::exports::radapp::policy::template_policy::Guest for __RadwasmPolicyExport {
            fn decide(
                observation: $crate::bindings::radapp::policy::template_types::TemplateObservation,
            ) -> ::core::result::Result<
                $crate::bindings::radapp::policy::template_types::TemplatePlan,
                $crate::bindings::radapp::policy::types::PolicyError,
            > {
                let observation = $crate::convert::template_observation_from_wit(observation);
                <$policy as $crate::Policy>::decide_template(&observation)
                    .and_then($crate::template_plan_lowered)
                    .map_err($crate::convert::policy_error_to_wit)
            }
        }

        impl $crate::policy_bindings::exports::radapp::policy::resource_policy::Guest for __RadwasmPolicyExport {
            fn decide(
                observation: $crate::bindings::radapp::policy::resource_types::ResourceObservation,
            ) -> ::core::result::Result<
                $crate::bindings::radapp::policy::resource_types::ResourcePlan,
                $crate::bindings::radapp::policy::types::PolicyError,
            > {
                let observation = $crate::convert::resource_observation_from_wit(observation);
                <$policy as $crate::Policy>::decide_resource(&observation)
                    .map($crate::convert::resource_plan_to_wit)
                    .map_err($crate::convert::policy_error_to_wit)
            }
        }

        $crate::bindings::export_common!(__RadwasmPolicyExport with_types_in $crate::bindings);
        $crate::policy_bindings::export_policy_exports!(__RadwasmPolicyExport with_types_in $crate::policy_bindings);
    };
}

/// Export a [`Layer`] with the default policy linked in as its base: the
/// component is a policy (world `radapp:policy/policy@0.6.0`) whose every
/// decision runs `radwasm_policy_core`'s default and then the layer over
/// its plan, in one instance.
///
/// The same layer exported with [`export_layer!`] is run by the host over
/// whatever base its `ReconcilePolicy` names, each in an instance of its
/// own, and its decision records show the base's plan. Linked, a decision
/// costs about what the default alone does (one instance, the observation
/// lowered once), but the base can only be the default this SDK carries,
/// fixed when the layer is built, and the records show only the final plan.
/// A base that refuses refuses the whole decision, as it does when the host
/// stacks them.
///
/// ```ignore
/// radwasm_policy_sdk::export_linked_layer!(MyLayer);
/// ```
#[macro_export]
macro_rules! export_linked_layer {
    ($layer:ty) => {
        #[doc(hidden)]
        struct __RadwasmLinkedLayer;

        impl $crate::Policy for __RadwasmLinkedLayer {
            fn describe() -> $crate::model::Description {
                <$layer as $crate::Layer>::describe()
            }

            fn decide_template(
                observation: &$crate::model::TemplateObservation,
            ) -> ::core::result::Result<$crate::model::TemplatePlan, $crate::model::PolicyError>
            {
                let base = $crate::radwasm_policy_core::decide_template(observation)?;
                <$layer as $crate::Layer>::decide_template(observation, base)
            }

            fn decide_resource(
                observation: &$crate::model::ResourceObservation,
            ) -> ::core::result::Result<$crate::model::ResourcePlan, $crate::model::PolicyError>
            {
                let base = $crate::radwasm_policy_core::decide_resource(observation)?;
                <$layer as $crate::Layer>::decide_resource(observation, base)
            }
        }

        $crate::export_policy!(__RadwasmLinkedLayer);
    };
}

/// Export a [`Layer`] implementation as the guest's component exports
/// (world `radapp:policy/layer@0.6.0`: `metadata.describe`,
/// `template-layer.decide` and `resource-layer.decide`). Invoke it once, at
/// the crate root of a `cdylib` crate:
///
/// ```ignore
/// radwasm_policy_sdk::export_layer!(MyLayer);
/// ```
#[macro_export]
macro_rules! export_layer {
    ($layer:ty) => {
        #[doc(hidden)]
        struct __RadwasmLayerExport;

        impl $crate::bindings::exports::radapp::policy::metadata::Guest for __RadwasmLayerExport {
            fn describe() -> $crate::bindings::exports::radapp::policy::metadata::Description {
                $crate::convert::description_to_wit(<$layer as $crate::Layer>::describe())
            }
        }

        impl $crate::layer_bindings::exports::radapp::policy::template_layer::Guest for __RadwasmLayerExport {
            fn decide(
                observation: $crate::bindings::radapp::policy::template_types::TemplateObservation,
                base: $crate::bindings::radapp::policy::template_types::TemplatePlan,
            ) -> ::core::result::Result<
                $crate::bindings::radapp::policy::template_types::TemplatePlan,
                $crate::bindings::radapp::policy::types::PolicyError,
            > {
                let observation = $crate::convert::template_observation_from_wit(observation);
                let base = $crate::convert::template_plan_from_wit(base);
                <$layer as $crate::Layer>::decide_template(&observation, base)
                    .and_then($crate::template_plan_lowered)
                    .map_err($crate::convert::policy_error_to_wit)
            }
        }

        impl $crate::layer_bindings::exports::radapp::policy::resource_layer::Guest for __RadwasmLayerExport {
            fn decide(
                observation: $crate::bindings::radapp::policy::resource_types::ResourceObservation,
                base: $crate::bindings::radapp::policy::resource_types::ResourcePlan,
            ) -> ::core::result::Result<
                $crate::bindings::radapp::policy::resource_types::ResourcePlan,
                $crate::bindings::radapp::policy::types::PolicyError,
            > {
                let observation = $crate::convert::resource_observation_from_wit(observation);
                let base = $crate::convert::resource_plan_from_wit(base);
                <$layer as $crate::Layer>::decide_resource(&observation, base)
                    .map($crate::convert::resource_plan_to_wit)
                    .map_err($crate::convert::policy_error_to_wit)
            }
        }

        $crate::bindings::export_common!(__RadwasmLayerExport with_types_in $crate::bindings);
        $crate::layer_bindings::export_layer_exports!(__RadwasmLayerExport with_types_in $crate::layer_bindings);
    };
}
