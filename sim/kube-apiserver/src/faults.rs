//! Fault injection, switchable at run time from Rust or over HTTP
//! (`/_sim/...`): fail a fraction of requests, add latency, make watches
//! lag behind the store, drop every open watch, forget history so that
//! resuming watches get 410 Gone.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

#[derive(Debug, Clone, Default)]
pub(crate) struct FaultSettings {
    /// Fraction (0..=1) of API requests answered with `error_code`.
    pub error_rate: f64,
    pub error_code: u16,
    pub latency: Duration,
    /// How long after a change every watch stream delivers it.
    pub watch_lag: Duration,
}

/// Handle to switch faults on a running server.
#[derive(Clone)]
pub struct FaultsHandle {
    pub(crate) settings: Arc<Mutex<FaultSettings>>,
    /// Bumped to end every open watch.
    pub(crate) drop_watches: Arc<watch::Sender<u64>>,
    pub(crate) store: Arc<Mutex<crate::store::Store>>,
}

impl FaultsHandle {
    /// Answer a fraction of requests with `code` (500 or 429 with Retry-After: 1).
    pub fn set_error_rate(&self, rate: f64, code: u16) {
        if let Ok(mut s) = self.settings.lock() {
            s.error_rate = rate.clamp(0.0, 1.0);
            s.error_code = code;
        }
    }

    /// Delay every API request by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        if let Ok(mut s) = self.settings.lock() {
            s.latency = latency;
        }
    }

    /// Deliver every change on every watch stream `lag` after it was made,
    /// as a real API server's watch cache can lag behind etcd under load:
    /// reads and writes see the newest object, watchers an older one.
    pub fn set_watch_lag(&self, lag: Duration) {
        if let Ok(mut s) = self.settings.lock() {
            s.watch_lag = lag;
        }
    }

    /// End every open watch stream now (clients must re-watch).
    pub fn drop_watches(&self) {
        self.drop_watches.send_modify(|n| *n += 1);
    }

    /// Forget the change history: resuming a watch from any earlier
    /// resourceVersion answers 410 Gone, so clients must relist.
    pub fn expire_history(&self) {
        crate::store::lock(&self.store).expire_history();
    }

    /// Switch every fault off.
    pub fn clear(&self) {
        if let Ok(mut s) = self.settings.lock() {
            *s = FaultSettings::default();
        }
    }

    pub(crate) fn current(&self) -> FaultSettings {
        self.settings.lock().map(|s| s.clone()).unwrap_or_default()
    }
}
