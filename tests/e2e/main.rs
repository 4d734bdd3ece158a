//! End-to-end scenarios: the real `radwasm run` and `radwasm dev` processes
//! against the embedded API server and the Radius simulator over HTTP
//! Each scenario starts its own stand-ins so they run in parallel.

mod churn;
mod control_plane;
mod crd_schema;
mod dev;
mod drift;
mod harness;
mod helm;
mod image;
mod modules;
mod ownership;
mod policies;
mod radius_shape;
mod rbac;
mod realkube;
#[path = "../support/registry.rs"]
mod registry;
mod scenarios;
mod sharding;
mod truth;
