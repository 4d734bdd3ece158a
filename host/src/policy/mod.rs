//! The wasm policy runtime: where components come from ([`source`]),
//! loading and validating guests, running one decision per fresh sandboxed
//! instance, and converting between the JSON model and the WIT contract.

pub mod bindings;
mod compile_cache;
mod convert;
pub mod embedded;
mod options;
mod pool;
pub mod records;
mod runtime;
mod sandbox;
pub mod slot;
pub mod source;
pub mod trust;
pub mod validate;
pub mod wit;

pub use compile_cache::{COMPILED_KEPT, DiskCacheConfig, LoadCounter, LoadLabels, LoadOutcome};
pub use options::EngineOptions;
pub use pool::{Misfit, POOL_CAPS, PoolLimits, PoolMisfit};
pub use runtime::{
    Decision, DecisionError, DecisionLimits, Limits, LoadedPolicy, PolicyEngine, digest,
};
pub use sandbox::{GuestLog, LogLevel, MAX_LOG_MESSAGE_BYTES, MAX_LOG_MESSAGES};
pub use slot::{FileGate, PolicySlot, Reload, SlotError};
pub use source::{Fetched, Fetcher, Source, SourceError};
pub use validate::{LoadError, Worlds};
