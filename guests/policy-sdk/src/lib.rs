//! The guest side of the radwasm policy contract.
//!
//! A custom policy implements [`Policy`] on the plain model types
//! (`radwasm-policy-model`); every method defaults to the default policy
//! (`radwasm-policy-core`), so a policy overrides only what it changes.
//! [`export_policy!`] turns it into the component exports of world
//! `radapp:policy/policy@0.2.0`:
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

pub use radwasm_policy_model as model;

#[doc(hidden)]
pub mod convert;

pub mod arena;

/// Every guest built with the SDK (feature `arena`, on by default) allocates
/// from a bump arena: the host gives each decision a fresh instance.
#[cfg(all(feature = "arena", target_arch = "wasm32"))]
#[global_allocator]
static ALLOCATOR: arena::DecisionArena = arena::DecisionArena::new();

/// Bindings generated from `wit/policy.wit`.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "policy",
        path: "../../wit",
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "radwasm_policy_sdk::bindings",
    });
}

use model::{
    Description, PolicyError, ResourceObservation, ResourcePlan, TemplateObservation, TemplatePlan,
};

/// A reconcile policy on model types. Every method defaults to the default
/// policy.
pub trait Policy {
    /// Name, version, summary and annotations understood.
    fn describe() -> Description {
        radwasm_policy_core::describe()
    }

    /// Decide for one `DeploymentTemplate`.
    fn decide_template(observation: &TemplateObservation) -> Result<TemplatePlan, PolicyError> {
        radwasm_policy_core::decide_template(observation)
    }

    /// Decide for one `DeploymentResource`.
    fn decide_resource(observation: &ResourceObservation) -> Result<ResourcePlan, PolicyError> {
        radwasm_policy_core::decide_resource(observation)
    }
}

/// Severity of a log message.
pub use bindings::radapp::policy::log::Level;

/// Log through the host's tracing (capped per decision by the host).
pub fn log(level: Level, message: &str) {
    bindings::radapp::policy::log::log(level, message);
}

/// Export a [`Policy`] implementation as the guest's component exports.
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

        impl $crate::bindings::exports::radapp::policy::template_policy::Guest for __RadwasmPolicyExport {
            fn decide(
                observation: $crate::bindings::exports::radapp::policy::template_policy::TemplateObservation,
            ) -> ::core::result::Result<
                $crate::bindings::exports::radapp::policy::template_policy::TemplatePlan,
                $crate::bindings::radapp::policy::types::PolicyError,
            > {
                let observation = $crate::convert::template_observation_from_wit(observation);
                <$policy as $crate::Policy>::decide_template(&observation)
                    .map($crate::convert::template_plan_to_wit)
                    .map_err($crate::convert::policy_error_to_wit)
            }
        }

        impl $crate::bindings::exports::radapp::policy::resource_policy::Guest for __RadwasmPolicyExport {
            fn decide(
                observation: $crate::bindings::exports::radapp::policy::resource_policy::ResourceObservation,
            ) -> ::core::result::Result<
                $crate::bindings::exports::radapp::policy::resource_policy::ResourcePlan,
                $crate::bindings::radapp::policy::types::PolicyError,
            > {
                let observation = $crate::convert::resource_observation_from_wit(observation);
                <$policy as $crate::Policy>::decide_resource(&observation)
                    .map($crate::convert::resource_plan_to_wit)
                    .map_err($crate::convert::policy_error_to_wit)
            }
        }

        $crate::bindings::export_bindings!(__RadwasmPolicyExport with_types_in $crate::bindings);
    };
}
