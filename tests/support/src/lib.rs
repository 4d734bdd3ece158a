//! Helpers shared by radwasm's integration tests (`host/tests`), its
//! end-to-end suite (`tests/e2e`, the `e2e` test of `host`) and its
//! controller benchmark (`host/benches/controller.rs`): one crate instead of
//! the same files included by `#[path]` into each.
//!
//! * [`registry`]: a loopback OCI registry (CNCF distribution).
//! * [`realkube`]: a real Kubernetes control plane (etcd, kube-apiserver and
//!   kube-controller-manager) on loopback.

pub mod realkube;
pub mod registry;
