//! Which policy modules the controller (`run`, `dev`) trusts:
//! `--require-signatures` and the keys the `--policy` file's blob
//! signature is checked with (`docs/policy-trust.md`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;

use crate::metrics::Metrics;
use crate::policy::trust::blob::{KeyFiles, signature_name};
use crate::policy::{FileGate, Source, embedded};

/// The `reconcile_policy` label of `radwasm_policy_verifications_total`
/// for the checks of the `--policy` file.
pub const POLICY_FILE_LABEL: &str = "--policy";

/// `--require-signatures` and `--policy-verify-keys`.
#[derive(Debug, Clone, Default, Args)]
pub struct TrustArgs {
    /// Load no module that is not signed: a `ReconcilePolicy` module (from
    /// a registry, a URL or a ConfigMap) only with `spec.verify` and a
    /// signature that verifies, and a `--policy` file only with
    /// `--policy-verify-keys` and a signature `<file>.sig` that verifies.
    /// The built-in default policy is part of the binary and needs none
    /// (docs/policy-trust.md).
    #[arg(long)]
    pub require_signatures: bool,
    /// The public keys the `--policy` file's signature (`<file>.sig`, as
    /// `cosign sign-blob --output-signature` writes it) is checked with: a
    /// PEM public key file (`cosign.pub`), or a directory of them (a
    /// ConfigMap mounted as a volume). With it, the file loads, at start and
    /// at each reload, only if the signature verifies with one of them.
    #[arg(long, value_name = "FILE|DIR")]
    pub policy_verify_keys: Option<PathBuf>,
}

impl TrustArgs {
    /// The check the `--policy` file `policy` must pass before it loads
    /// (none for the built-in policy, or for a file when nothing asks for
    /// one); checks are counted in `metrics`. A file under
    /// `--require-signatures` without keys to check it with is an error.
    pub fn policy_gate(
        &self,
        policy: &str,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Option<FileGate>> {
        if !matches!(embedded::source(policy), Source::File(_)) {
            return Ok(None);
        }
        let Some(keys) = &self.policy_verify_keys else {
            if self.require_signatures {
                anyhow::bail!(
                    "--policy {policy}: the controller runs with --require-signatures and this \
                     file's signature cannot be checked: pass --policy-verify-keys with the \
                     public keys (a PEM file or a directory of them) that its signature {} \
                     verifies with, or use the built-in policy (--policy default)",
                    signature_name(policy)
                );
            }
            return Ok(None);
        };
        Ok(Some(FileGate {
            keys: KeyFiles(keys.clone()),
            observe: Arc::new(move |result| {
                metrics.observe_verification(POLICY_FILE_LABEL, result)
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_file_under_require_signatures_needs_keys_and_the_built_in_does_not() {
        let metrics = Arc::new(Metrics::default());
        let required = TrustArgs {
            require_signatures: true,
            policy_verify_keys: None,
        };
        let error = required
            .policy_gate("/etc/radwasm/policy/policy.wasm", metrics.clone())
            .err()
            .expect("refused");
        let message = error.to_string();
        assert!(
            message.starts_with("--policy /etc/radwasm/policy/policy.wasm: ")
                && message.contains("--policy-verify-keys")
                && message.contains("/etc/radwasm/policy/policy.wasm.sig"),
            "{message}"
        );
        assert!(
            required
                .policy_gate("default", metrics.clone())
                .expect("built in")
                .is_none()
        );
        let keyed = TrustArgs {
            require_signatures: false,
            policy_verify_keys: Some(PathBuf::from("/keys")),
        };
        let gate = keyed
            .policy_gate("p.wasm", metrics.clone())
            .expect("gate")
            .expect("a gate for a file");
        assert_eq!(gate.keys, KeyFiles(PathBuf::from("/keys")));
        assert!(
            TrustArgs::default()
                .policy_gate("p.wasm", metrics)
                .expect("nothing asked")
                .is_none()
        );
    }
}
