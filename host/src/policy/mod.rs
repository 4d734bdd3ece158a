//! The policy runtime as radwasm uses it. The runtime itself is two crates
//! of this workspace, re-exported here so the host names everything
//! `policy::...`:
//!
//! - `radwasm-policy-fetch` (`crates/policy-fetch`): where components come
//!   from ([`source`], OCI registries included) and whether to trust them
//!   ([`trust`]), with no Kubernetes dependency: the host reads ConfigMaps
//!   and Secrets for it (`kube_client::KubeReader`);
//! - `radwasm-policy-runtime` (`crates/policy-runtime`): loading and
//!   validating guests, running one decision per fresh sandboxed instance,
//!   the policy slot, decision records and the WIT files.
//!
//! What stays here is radwasm's own: the default policy built into the
//! binary ([`embedded`]), the engine every layer decides over it with
//! ([`engine`]).

pub mod embedded;
#[cfg(test)]
pub(crate) mod records_tests;
#[cfg(test)]
mod slot_tests;

pub use radwasm_policy_fetch::{
    BuiltIn, ClusterReader, ConfigMapData, Fetched, Fetcher, Source, SourceError, error_chain,
    source, trust,
};
pub use radwasm_policy_runtime::*;

/// An engine with the given sandbox limits whose layers decide over the
/// built-in default policy.
pub fn engine(limits: Limits) -> anyhow::Result<PolicyEngine> {
    engine_with_options(limits, EngineOptions::default())
}

/// [`engine`] with pool limits, a disk cache and a load counter.
pub fn engine_with_options(
    limits: Limits,
    mut options: EngineOptions,
) -> anyhow::Result<PolicyEngine> {
    options.base.get_or_insert(embedded::DEFAULT);
    PolicyEngine::with_options(limits, options)
}
