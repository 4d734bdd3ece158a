//! Where a loaded guest's exports are, for the contract version it was
//! built against (0.1–0.6), looked up once at load: the one place that
//! names every version's generated export indices. `loaded.rs` decides
//! through them, each version through its own conversions.

use wasmtime::component::InstancePre;

use super::super::bindings::{v0_1, v0_2, v0_3, v0_4, v0_5, v0_6};
use super::super::sandbox::SandboxState;
use super::super::validate::{Contract, Worlds};

/// Where a guest's exports are, for the contract version it was built
/// against. Each version's observations and plans go through its own
/// conversions (`convert.rs`); everything else is shared.
pub(super) enum Exports {
    V0_6(
        Indices<
            v0_6_exports::metadata::GuestIndices,
            Role<
                v0_6_exports::template_policy::GuestIndices,
                v0_6_exports::template_layer::GuestIndices,
            >,
            Role<
                v0_6_exports::resource_policy::GuestIndices,
                v0_6_exports::resource_layer::GuestIndices,
            >,
        >,
    ),
    V0_5(
        Indices<
            v0_5_exports::metadata::GuestIndices,
            Role<
                v0_5_exports::template_policy::GuestIndices,
                v0_5_exports::template_layer::GuestIndices,
            >,
            Role<
                v0_5_exports::resource_policy::GuestIndices,
                v0_5_exports::resource_layer::GuestIndices,
            >,
        >,
    ),
    V0_4(
        Indices<
            v0_4_exports::metadata::GuestIndices,
            Role<
                v0_4_exports::template_policy::GuestIndices,
                v0_4_exports::template_layer::GuestIndices,
            >,
            Role<
                v0_4_exports::resource_policy::GuestIndices,
                v0_4_exports::resource_layer::GuestIndices,
            >,
        >,
    ),
    V0_3(
        Indices<
            v0_3_exports::metadata::GuestIndices,
            v0_3_exports::template_policy::GuestIndices,
            v0_3_exports::resource_policy::GuestIndices,
        >,
    ),
    V0_2(
        Indices<
            v0_2_exports::metadata::GuestIndices,
            v0_2_exports::template_policy::GuestIndices,
            v0_2_exports::resource_policy::GuestIndices,
        >,
    ),
    V0_1(
        Indices<
            v0_1_exports::metadata::GuestIndices,
            v0_1_exports::template_policy::GuestIndices,
            v0_1_exports::resource_policy::GuestIndices,
        >,
    ),
}

use v0_1::exports::radapp::policy as v0_1_exports;
use v0_2::exports::radapp::policy as v0_2_exports;
use v0_3::exports::radapp::policy as v0_3_exports;
use v0_4::exports::radapp::policy as v0_4_exports;
use v0_5::exports::radapp::policy as v0_5_exports;
use v0_6::exports::radapp::policy as v0_6_exports;

pub(super) struct Indices<M, T, R> {
    pub(super) metadata: M,
    pub(super) template: Option<T>,
    pub(super) resource: Option<R>,
}

/// A 0.4 guest decides for a kind alone (`P`) or as a layer (`L`).
pub(super) enum Role<P, L> {
    Policy(P),
    Layer(L),
}

impl<P, L> Role<P, L> {
    fn new(
        layer: bool,
        policy: impl FnOnce() -> wasmtime::Result<P>,
        over: impl FnOnce() -> wasmtime::Result<L>,
    ) -> wasmtime::Result<Self> {
        Ok(if layer {
            Role::Layer(over()?)
        } else {
            Role::Policy(policy()?)
        })
    }
}

/// Look up one contract version's exports.
macro_rules! indices {
    ($exports:ident, $pre:expr, $worlds:expr) => {
        Indices {
            metadata: $exports::metadata::GuestIndices::new($pre)?,
            template: if $worlds.template {
                Some($exports::template_policy::GuestIndices::new($pre)?)
            } else {
                None
            },
            resource: if $worlds.resource {
                Some($exports::resource_policy::GuestIndices::new($pre)?)
            } else {
                None
            },
        }
    };
}

/// Look up the exports of a contract version whose guests are a policy or
/// a layer (0.4 on).
macro_rules! roles {
    ($exports:ident, $variant:ident, $pre:expr, $worlds:expr) => {{
        use $exports::{resource_layer, resource_policy, template_layer, template_policy};
        let layer = $worlds.layer;
        Exports::$variant(Indices {
            metadata: $exports::metadata::GuestIndices::new($pre)?,
            template: if $worlds.template {
                Some(Role::new(
                    layer,
                    || template_policy::GuestIndices::new($pre),
                    || template_layer::GuestIndices::new($pre),
                )?)
            } else {
                None
            },
            resource: if $worlds.resource {
                Some(Role::new(
                    layer,
                    || resource_policy::GuestIndices::new($pre),
                    || resource_layer::GuestIndices::new($pre),
                )?)
            } else {
                None
            },
        })
    }};
}

impl Exports {
    pub(super) fn new(pre: &InstancePre<SandboxState>, worlds: Worlds) -> wasmtime::Result<Self> {
        Ok(match worlds.contract {
            Contract::V0_6 => roles!(v0_6_exports, V0_6, pre, worlds),
            Contract::V0_5 => roles!(v0_5_exports, V0_5, pre, worlds),
            Contract::V0_4 => roles!(v0_4_exports, V0_4, pre, worlds),
            Contract::V0_3 => Exports::V0_3(indices!(v0_3_exports, pre, worlds)),
            Contract::V0_2 => Exports::V0_2(indices!(v0_2_exports, pre, worlds)),
            Contract::V0_1 => Exports::V0_1(indices!(v0_1_exports, pre, worlds)),
        })
    }
}
