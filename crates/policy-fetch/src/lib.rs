//! Where reconcile-policy components come from, and whether to trust them:
//! the fetch-and-verify half of radwasm's policy runtime, with no
//! Kubernetes and no WebAssembly dependency.
//!
//! - [`source`]: a [`Source`] (built in, a file, a ConfigMap key, an `https`
//!   URL or an OCI registry) supplies a component's bytes through
//!   [`Source::fetch`], bounded in size; [`source::oci`] pushes and pulls
//!   Wasm OCI artifacts and their signatures.
//! - [`trust`]: cosign signatures (keys, blob signatures, cosign 3 bundles,
//!   certificates chaining to a platform CA), checked offline.
//! - [`error_chain`]: an error's causes as one message.
//!
//! Kubernetes objects (a module's ConfigMap, a pull Secret, the ConfigMaps
//! of trusted keys) are read by the embedding program through
//! [`ClusterReader`]; the README shows an embedding.

// The README's examples are compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

pub mod error_chain;
pub mod source;
pub mod trust;

use sha2::{Digest, Sha256};

pub use source::{
    BuiltIn, ClusterReader, ConfigMapData, Fetched, Fetcher, Source, SourceError, SourceErrorKind,
};

/// The `User-Agent` this crate's requests carry unless the embedding
/// program names its own ([`source::oci::OciOptions::user_agent`],
/// [`Fetcher::new`]).
pub const USER_AGENT: &str = concat!("radwasm-policy-fetch/", env!("CARGO_PKG_VERSION"));

/// SHA-256 of component bytes, hex: the identity of a policy build.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
