//! How a [`PolicyEngine`](super::PolicyEngine) is set up beyond the
//! per-decision [`Limits`](super::Limits): the size of guest the instance
//! pool takes, where compiled components are kept, and the counter of loads.

use super::compile_cache::{DiskCacheConfig, LoadCounter};
use super::pool::PoolLimits;
use radwasm_policy_fetch::BuiltIn;

/// Engine settings other than the per-decision limits.
#[derive(Debug, Clone, Default)]
pub struct EngineOptions {
    /// How large a guest the instance pool takes.
    pub pool: PoolLimits,
    /// Where compiled components are kept across restarts; `None` keeps
    /// them in memory only.
    pub compile_cache: Option<DiskCacheConfig>,
    /// Counts each load by where its compiled code came from (shared with
    /// the metrics registry: `radwasm_policy_loads_total`).
    pub loads: LoadCounter,
    /// The policy a layer decides over until it is given another: radwasm
    /// gives its built-in default policy. Without one, loading a layer
    /// fails.
    pub base: Option<BuiltIn>,
}
