//! Policies as Kubernetes objects: the `ReconcilePolicy` kind ([`crd`]), the
//! controller that loads and checks each one's module ([`loader`]), and the
//! registry that chooses, for every object, the policy that decides for it
//! ([`registry`]). `docs/reconcile-policies.md` is the user's guide.

pub mod crd;
pub mod loader;
pub mod registry;

pub use crd::ReconcilePolicy;
pub use registry::{Chosen, PolicyRegistry, Selection, Shadow, Subject};
