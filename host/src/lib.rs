//! radwasm: a Kubernetes controller host for Radius `DeploymentTemplate`s whose
//! reconcile policy runs in sandboxed WebAssembly components.
//!
//! Map of the crate:
//!
//! - [`controller`]: the template and resource controllers, one reconcile
//!   path (observe, decide, guard, execute) for both kinds;
//! - [`runner`]: the queue and runner every controller runs on;
//! - [`reconcile_policy`]: `ReconcilePolicy` objects, their loader and the
//!   registry that chooses the policy for each object;
//! - [`policy`]: the policy runtime, from the workspace's crates
//!   `radwasm-policy-fetch` (sources, registries, signatures) and
//!   `radwasm-policy-runtime` (loading and running guests, decision
//!   records), and the default policy built into the binary;
//! - [`radius`]: the Radius (UCP) client;
//! - [`kube_client`]: the Kubernetes client, counting (and, with
//!   `--kube-api-qps`, pacing) its requests;
//! - [`leader`]: leader election on a Lease;
//! - [`crd`]: the `DeploymentTemplate` and `DeploymentResource` types;
//!   [`crd_schema`]: CRD schemas compared field by field;
//! - [`manifest`]: `DeploymentTemplate` manifests from Bicep or ARM
//!   templates;
//! - [`scaffold`]: the policy layers `radwasm policy new` writes;
//! - [`go_text`]: JSON exactly as Go writes it; `error_chain`: an
//!   error's causes as one message;
//! - [`metrics`]: Prometheus metrics, and the server of metrics, probes
//!   and decision records; [`telemetry`]: logging;
//! - [`cli`]: the command line, each subcommand parsing its arguments and
//!   calling the library.

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

/// An error's causes as one message (from `radwasm-policy-fetch`, whose
/// messages need it too).
use radwasm_policy_fetch::error_chain;

/// The `User-Agent` of every request radwasm sends: to Kubernetes (where the
/// API server names the field manager of a write after the part before
/// `/`, so `managedFields` say `radwasm`), to Radius and to registries.
pub const USER_AGENT: &str = concat!("radwasm/", env!("CARGO_PKG_VERSION"));
