//! Hot swap: the policy the controllers use, replaceable at run time.
//!
//! A [`PolicySlot`] holds the current [`LoadedPolicy`]. A decision takes a
//! clone of it (an `Arc`), so a swap never disturbs a decision in flight. The
//! policy is built in or a file ([`Source::fetch_local`]). From a file (for
//! example a mounted ConfigMap), [`PolicySlot::reload`] reads it again and
//! swaps only if the bytes changed *and* the new policy loads and passes every
//! check; a broken replacement is reported and the old policy stays in charge.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{LoadError, LoadedPolicy, PolicyEngine, Source};

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
}

impl PolicySlot {
    /// Load the policy from `source` (built in or a file); fails if it does
    /// not load.
    pub fn load(engine: PolicyEngine, source: Source) -> Result<Self, LoadError> {
        let fetched = source.fetch_local()?;
        let policy = engine.load_bytes(&fetched.source_name, &fetched.bytes)?;
        Ok(Self {
            engine,
            source,
            current: Arc::new(RwLock::new(policy)),
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
    pub fn reload(&self) -> Result<Reload, LoadError> {
        if !matches!(self.source, Source::File(_)) {
            return Ok(Reload::Unchanged);
        }
        let fetched = self.source.fetch_local()?;
        if fetched.digest == self.current().digest() {
            return Ok(Reload::Unchanged);
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
