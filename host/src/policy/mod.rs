//! The wasm policy runtime: where components come from ([`source`]),
//! loading and validating guests, running one decision per fresh sandboxed
//! instance, and converting between the JSON model and the WIT contract.

pub mod bindings;
mod convert;
pub mod embedded;
pub mod records;
mod runtime;
mod sandbox;
pub mod slot;
pub mod source;
pub mod validate;

pub use runtime::{
    COMPILED_KEPT, Decision, DecisionError, DecisionLimits, Limits, LoadedPolicy, PolicyEngine,
    digest,
};
pub use sandbox::{GuestLog, LogLevel, MAX_LOG_MESSAGE_BYTES, MAX_LOG_MESSAGES};
pub use slot::{PolicySlot, Reload};
pub use source::{Fetched, Fetcher, Source, SourceError};
pub use validate::{LoadError, Worlds};
