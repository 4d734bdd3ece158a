//! The evaluate half of radwasm's policy runtime: load a reconcile-policy
//! component, check it against the WIT contract, and run each decision in
//! a fresh sandboxed instance (fuel, memory and wall-clock limits, no
//! clock, no randomness, no I/O).
//!
//! - [`PolicyEngine`] loads components ([`LoadedPolicy`]), compiles each
//!   once ([`DiskCacheConfig`] keeps native code across restarts) and
//!   instantiates from a pool ([`PoolLimits`]);
//! - [`LoadedPolicy::decide`] runs one decision: the JSON model of
//!   `radwasm-policy-model` in, through the WIT contract ([`bindings`],
//!   every contract version from 0.1), a [`Decision`] out;
//! - [`validate`]: which contract and worlds a component implements;
//! - [`PolicySlot`]: the policy of a file, reloaded when the file changes,
//!   optionally only when a blob signature verifies ([`FileGate`]);
//! - [`records`]: decision records, the JSON lines a decision is replayed
//!   from, and the recorder that writes them;
//! - [`wit`]: the contract's WIT files.
//!
//! Components come from `radwasm-policy-fetch` ([`Source`],
//! [`Fetched`]). The README shows an embedding.

// The README's examples are compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

pub mod bindings;
mod cases;
mod compile_cache;
mod convert;
mod options;
mod pool;
pub mod records;
mod runtime;
mod sandbox;
pub mod slot;
pub mod validate;
pub mod wit;

pub use cases::check_case;
pub use compile_cache::{COMPILED_KEPT, DiskCacheConfig, LoadCounter, LoadLabels, LoadOutcome};
pub use options::EngineOptions;
pub use pool::{Misfit, POOL_CAPS, PoolLimits, PoolMisfit};
pub use radwasm_policy_fetch::{BuiltIn, Fetched, Source, SourceError};
pub use runtime::{
    Decision, DecisionError, DecisionLimits, Limits, LoadedPolicy, PolicyEngine, digest,
};
pub use sandbox::{GuestLog, LogLevel, MAX_LOG_MESSAGE_BYTES, MAX_LOG_MESSAGES};
pub use slot::{FileGate, PolicySlot, Reload, SlotError};
pub use validate::{LoadError, Worlds};
