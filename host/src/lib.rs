//! radwasm: a Kubernetes controller host for Radius `DeploymentTemplate`s whose
//! reconcile policy runs in sandboxed WebAssembly components.
//!
//! Map of the crate: [`policy`] runs guests, [`radius`] talks to Radius,
//! [`crd`] holds the custom resource types, [`manifest`] generates
//! `DeploymentTemplate` manifests from Bicep or ARM templates, [`cli`] is the
//! command line.

pub mod cli;
pub mod controller;
pub mod crd;
pub mod crd_schema;
pub mod go_text;
pub mod kube_client;
pub mod leader;
pub mod manifest;
pub mod metrics;
pub mod policy;
pub mod radius;
pub mod reconcile_policy;
pub mod runner;
pub mod scaffold;

pub mod telemetry;

/// The `User-Agent` of every request radwasm sends: to Kubernetes (where the
/// API server names the field manager of a write after the part before
/// `/`, so `managedFields` say `radwasm`), to Radius and to registries.
pub const USER_AGENT: &str = concat!("radwasm/", env!("CARGO_PKG_VERSION"));
