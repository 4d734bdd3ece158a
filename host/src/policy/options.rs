//! How a [`PolicyEngine`](super::PolicyEngine) is set up beyond the
//! per-decision [`Limits`](super::Limits): the size of guest the instance
//! pool takes, where compiled components are kept, and the counter of loads.

use super::compile_cache::{DiskCacheConfig, LoadCounter};
use super::pool::PoolLimits;

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
}
