//! The set-up the trust scenarios share: a signing key from a seed, a
//! module pushed and signed in one step, the controller started to reach
//! the scenario's loopback registry, and a keys ConfigMap with the label
//! its policies select, from which a `spec.verify` policy is made.

use p256::ecdsa::SigningKey;
use radwasm::policy::source::oci::{self, OciOptions, Pushed};
use radwasm_test_support::registry::Registry;
use serde_json::{Value, json};

use crate::harness::System;
use crate::policies::short;
use crate::trust::{public_pem, put_keys, sign};

/// The P-256 key whose scalar is `seed` repeated: the same key every run.
pub(crate) fn signing_key(seed: u8) -> SigningKey {
    SigningKey::from_slice(&[seed; 32]).expect("key")
}

/// Push `module` to `reference` and sign the pushed digest with `key`.
pub(crate) async fn push_signed(
    reference: &str,
    module: &[u8],
    key: &SigningKey,
    options: &OciOptions,
) -> Pushed {
    let pushed = oci::push(reference, module, options)
        .await
        .expect("push the module");
    sign(&pushed.reference, key, options).await;
    pushed
}

/// The controller with `flags`, allowed to reach `registry` over plain HTTP.
pub(crate) async fn start_with_registry(registry: &Registry, flags: &[&str]) -> System {
    let mut args = vec!["--policy-insecure-registry", registry.addr.as_str()];
    args.extend_from_slice(flags);
    System::start(&args).await
}

/// A scenario's keys ConfigMap (`<namespace>-<name>-keys`) and the value
/// (`<name>-<short>`) of the `policy` label its policies select.
pub(crate) struct TrustedKeys {
    pub(crate) keys: String,
    pub(crate) select: String,
}

impl TrustedKeys {
    /// Put the keys ConfigMap holding `data`.
    pub(crate) async fn put(system: &System, name: &str, data: &[(&str, String)]) -> Self {
        let keys = format!("{}-{name}-keys", system.namespace);
        put_keys(system, &keys, data).await;
        Self {
            keys,
            select: format!("{name}-{}", short(system)),
        }
    }

    /// Put the keys ConfigMap trusting `key` alone, as `cosign.pub`.
    pub(crate) async fn cosign_pub(system: &System, name: &str, key: &SigningKey) -> Self {
        Self::put(system, name, &[("cosign.pub", public_pem(key))]).await
    }

    /// `spec.verify` naming these keys.
    pub(crate) fn verify(&self, system: &System) -> Value {
        json!({"configMap": {"namespace": system.policy_namespace(), "name": self.keys}})
    }

    /// The spec of a policy following `oci` under `spec.verify` with these
    /// keys, selecting the templates labelled `policy=<select>`.
    pub(crate) fn oci_spec(&self, system: &System, oci: &str) -> Value {
        json!({"module": {"oci": oci},
               "verify": self.verify(system),
               "objectSelector": {"matchLabels": {"policy": self.select}}})
    }
}
