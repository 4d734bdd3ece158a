//! Radius (UCP) I/O: the ARM-style HTTP client the controllers use to create
//! resource groups, start deployments and deletions, and follow long-running
//! operations. Nothing here decides anything; the policy does.
//!
//! * [`RadiusClient`] speaks the Radius (UCP) endpoints listed in docs/radius.md with timeouts on every
//!   request and jittered retries on 429/5xx/connection errors that honour
//!   `Retry-After`.
//! * [`ResumeToken`] is everything needed to continue polling an operation,
//!   small enough for `status.operation`, so a restarted controller continues
//!   where it left off.
//! * [`Endpoint`] is either a direct base URL or the Kubernetes API server's
//!   aggregated path `/apis/api.ucp.dev/v1alpha3` with the Kubernetes
//!   credentials.

mod client;
mod endpoint;
mod error;
mod operation;
pub mod parameters;

pub use client::{DeleteStart, DeploymentRequest, RadiusClient, RetryPolicy};
pub use endpoint::{AGGREGATED_PATH, Endpoint};
pub use error::RadiusError;
pub use operation::{OperationKind, PollOutcome, Rejection, ResumeToken};

/// `api-version` for deployments (`Microsoft.Resources/deployments`).
pub const DEPLOYMENT_API_VERSION: &str = "2020-10-01";
/// `api-version` for resource groups and Radius resources.
pub const RESOURCE_API_VERSION: &str = "2023-10-01-preview";
