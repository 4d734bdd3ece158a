//! Hot swap: the policy the controllers use, replaceable at run time.
//!
//! A [`PolicySlot`] holds the current [`LoadedPolicy`]. A decision takes a
//! clone of it (an `Arc`), so a swap never disturbs a decision in flight. The
//! policy is built in or a file ([`Source::fetch_local`]). From a file (for
//! example a mounted ConfigMap), [`PolicySlot::reload`] reads it again and
//! swaps only if the bytes changed *and* the new policy loads and passes every
//! check; a broken replacement is reported and the old policy stays in charge.
//! With a [`FileGate`] (`--policy-verify-keys`), a file loads, at start and at
//! each reload, only if its blob signature (`<file>.sig`) verifies.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use radwasm_policy_fetch::trust::TrustError;
use radwasm_policy_fetch::trust::blob::KeyFiles;
use radwasm_policy_fetch::{Fetched, Source};

use super::{LoadError, LoadedPolicy, PolicyEngine};

/// Why the slot's source was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// Its signature did not verify (`--policy-verify-keys`).
    #[error("{0}")]
    Refused(#[from] TrustError),
}

/// The signature check every version of a file policy passes before it
/// loads, and where its outcome is counted: `Verified` or the refusal's
/// reason (`SignatureMissing`, ...).
#[derive(Clone)]
pub struct FileGate {
    pub keys: KeyFiles,
    pub observe: Arc<dyn Fn(&'static str) + Send + Sync>,
}

impl FileGate {
    fn check(&self, fetched: &Fetched) -> Result<(), TrustError> {
        let outcome = fetched.verify_blob_signature(&self.keys);
        (self.observe)(match &outcome {
            Ok(_) => "Verified",
            Err(error) => error.reason(),
        });
        let verified = outcome?;
        tracing::info!(policy = %fetched.source_name, key = %verified.key, "policy file signature verified");
        Ok(())
    }
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// Same bytes as the current policy; nothing changed.
    Unchanged,
    /// A new policy is in charge; its `name@version` and digest.
    Swapped { policy: String, digest: String },
}

/// The current policy, shared by all controllers.
#[derive(Clone)]
pub struct PolicySlot {
    engine: PolicyEngine,
    source: Source,
    current: Arc<RwLock<LoadedPolicy>>,
    gate: Option<FileGate>,
    /// The last replacement refused for its signature (its module digest,
    /// signature and keys), so one refusal is said and counted once.
    refused: Arc<Mutex<Option<String>>>,
}

impl PolicySlot {
    /// Load the policy from `source` (built in or a file); fails if it does
    /// not load.
    pub fn load(engine: PolicyEngine, source: Source) -> Result<Self, SlotError> {
        Self::load_gated(engine, source, None)
    }

    /// [`PolicySlot::load`], a file loaded (now and at each reload) only
    /// if `gate` verifies its signature. The built-in policy needs none.
    pub fn load_gated(
        engine: PolicyEngine,
        source: Source,
        gate: Option<FileGate>,
    ) -> Result<Self, SlotError> {
        let gate = gate.filter(|_| matches!(source, Source::File(_)));
        let fetched = source.fetch_local().map_err(LoadError::from)?;
        if let Some(gate) = &gate {
            gate.check(&fetched)?;
        }
        let policy = engine.load_bytes(&fetched.source_name, &fetched.bytes)?;
        Ok(Self {
            engine,
            source,
            current: Arc::new(RwLock::new(policy)),
            gate,
            refused: Default::default(),
        })
    }

    /// The policy in charge now.
    pub fn current(&self) -> LoadedPolicy {
        match self.current.read() {
            Ok(policy) => policy.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Where the policy is loaded from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Re-read the source; swap if the bytes changed and the new policy loads.
    pub fn reload(&self) -> Result<Reload, SlotError> {
        if !matches!(self.source, Source::File(_)) {
            return Ok(Reload::Unchanged);
        }
        let fetched = self.source.fetch_local().map_err(LoadError::from)?;
        if fetched.digest == self.current().digest() {
            return Ok(Reload::Unchanged);
        }
        if let Some(gate) = &self.gate {
            // The same refused file, signature and keys: refused already.
            let attempt = format!(
                "{} {:?} {:?}",
                fetched.digest,
                fetched.signature.as_ref().map(|s| &s.bytes),
                gate.keys.read().map(|keys| keys
                    .iter()
                    .map(|k| k.fingerprint.clone())
                    .collect::<Vec<_>>())
            );
            let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
            if refused.as_deref() == Some(attempt.as_str()) {
                return Ok(Reload::Unchanged);
            }
            if let Err(error) = gate.check(&fetched) {
                *refused = Some(attempt);
                return Err(error.into());
            }
            *refused = None;
        }
        let policy = self
            .engine
            .load_bytes(&fetched.source_name, &fetched.bytes)?;
        let swapped = Reload::Swapped {
            policy: policy.display_name(),
            digest: policy.digest().to_string(),
        };
        match self.current.write() {
            Ok(mut current) => *current = policy,
            Err(poisoned) => *poisoned.into_inner() = policy,
        }
        Ok(swapped)
    }

    /// Reload every `interval` until `shutdown`, logging swaps and refusals.
    pub async fn watch(self, interval: Duration, shutdown: CancellationToken) {
        if !matches!(self.source, Source::File(_)) {
            return;
        }
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let slot = self.clone();
            match tokio::task::spawn_blocking(move || slot.reload()).await {
                Ok(Ok(Reload::Unchanged)) => {}
                Ok(Ok(Reload::Swapped { policy, digest })) => {
                    tracing::info!(%policy, %digest, "policy replaced at run time");
                }
                Ok(Err(error)) => {
                    tracing::error!(%error, current = %self.current().display_name(), "new policy refused; keeping the current one");
                }
                Err(error) => tracing::error!(%error, "policy reload task failed"),
            }
        }
    }
}
