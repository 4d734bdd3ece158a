//! End-to-end scenarios: the real `radwasm run` and `radwasm dev` processes
//! against the embedded API server and the Radius simulator over HTTP
//! Each scenario starts its own stand-ins so they run in parallel.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

mod churn;
mod control_plane;
mod crd_schema;
mod dev;
mod drift;
mod events;
mod harness;
mod helm;
mod image;
mod layers;
mod lease_release;
mod logs;
mod modules;
mod namespace_meta;
mod node;
mod ownership;
mod policies;
mod radius_shape;
mod rbac;
mod real_radius;
mod scenarios;
mod sharding;
mod trust;
mod trust_fixture;
mod trust_certificates;
mod trust_cosign3;
mod trust_revocation;
mod trust_refusals;
mod trust_sources;
mod truth;
mod unseen;

// The real control plane and the OCI registry, shared with the controller
// benchmark and `host/tests` (crate `radwasm-test-support`, tests/support).
use radwasm_test_support::{realkube, realradius, registry};
