//! Hot swap: the policy the controllers use, replaceable at run time.
//!
//! A [`PolicySlot`] holds the current [`LoadedPolicy`]. A decision takes a
//! clone of it (an `Arc`), so a swap never disturbs a decision in flight. When
//! the policy comes from a file (for example a mounted ConfigMap), [`PolicySlot::reload`]
//! reads it again and swaps only if the bytes changed *and* the new policy
//! loads and passes every check; a broken replacement is reported and the old
//! policy stays in charge.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{LoadError, LoadedPolicy, PolicyEngine, embedded};

/// Where the policy comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySource {
    /// The default policy built into the binary.
    Embedded,
    /// A component file, re-read on [`PolicySlot::reload`].
    File(PathBuf),
}

impl PolicySource {
    /// `default` means the embedded policy; anything else is a path.
    pub fn parse(text: &str) -> Self {
        if text == "default" {
            PolicySource::Embedded
        } else {
            PolicySource::File(PathBuf::from(text))
        }
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
    source: PolicySource,
    current: Arc<RwLock<LoadedPolicy>>,
}

impl PolicySlot {
    /// Load the policy from `source`; fails if it does not load.
    pub fn load(engine: PolicyEngine, source: PolicySource) -> Result<Self, LoadError> {
        let policy = load_from(&engine, &source)?;
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
    pub fn source(&self) -> &PolicySource {
        &self.source
    }

    /// Re-read the source; swap if the bytes changed and the new policy loads.
    pub fn reload(&self) -> Result<Reload, LoadError> {
        let PolicySource::File(path) = &self.source else {
            return Ok(Reload::Unchanged);
        };
        let bytes = read(path)?;
        let digest = super::runtime::digest(&bytes);
        if digest == self.current().digest() {
            return Ok(Reload::Unchanged);
        }
        let policy = self
            .engine
            .load_bytes(&path.display().to_string(), &bytes)?;
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
        if !matches!(self.source, PolicySource::File(_)) {
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

fn load_from(engine: &PolicyEngine, source: &PolicySource) -> Result<LoadedPolicy, LoadError> {
    match source {
        PolicySource::Embedded => embedded::load_default(engine),
        PolicySource::File(path) => engine.load_file(path),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    std::fs::read(path).map_err(|error| LoadError::Read {
        source_name: path.display().to_string(),
        detail: error.to_string(),
    })
}
