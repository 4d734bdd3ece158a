//! The wasm policy runtime: loading and validating guests, running one
//! decision per fresh sandboxed instance, and converting between the JSON
//! model and the WIT contract.

pub mod bindings;
mod convert;
pub mod embedded;
pub mod oci;
pub mod records;
mod runtime;
mod sandbox;
pub mod slot;
pub mod validate;

pub use runtime::{
    COMPILED_KEPT, Decision, DecisionError, DecisionLimits, Limits, LoadedPolicy, PolicyEngine,
    digest,
};
pub use sandbox::{GuestLog, LogLevel, MAX_LOG_MESSAGE_BYTES, MAX_LOG_MESSAGES};
pub use slot::{PolicySlot, PolicySource, Reload};
pub use validate::{LoadError, Worlds};
