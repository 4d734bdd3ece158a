//! Fault injection, switchable at run time from Rust or over HTTP
//! (`/_sim/...`): fail a fraction of requests, add latency, make watches
//! lag behind the store, drop every open watch, forget history so that
//! resuming watches get 410 Gone, hold writes to one resource's status
//! until the test lets them through.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::Method;
use tokio::sync::watch;

#[derive(Debug, Clone, Default)]
pub(crate) struct FaultSettings {
    /// Fraction (0..=1) of API requests answered with `error_code`.
    pub error_rate: f64,
    pub error_code: u16,
    pub latency: Duration,
    /// How long after a change every watch stream delivers it.
    pub watch_lag: Duration,
    /// Requests whose path ends with this are refused 403 Forbidden.
    pub forbidden: Option<String>,
}

impl FaultSettings {
    /// The 403 answer to a request for `path`, if it is forbidden: as RBAC
    /// answers for an object the client may not read.
    pub(crate) fn forbidden(&self, path: &str) -> Option<String> {
        let suffix = self.forbidden.as_deref()?;
        if !path.ends_with(suffix) {
            return None;
        }
        let mut segments = path.rsplit('/');
        let name = segments.next().unwrap_or_default();
        let resource = segments.next().unwrap_or_default();
        Some(format!(
            "{resource} \"{name}\" is forbidden: the client cannot get resource \"{resource}\" \
             (injected)"
        ))
    }
}

/// Handle to switch faults on a running server.
#[derive(Clone)]
pub struct FaultsHandle {
    pub(crate) settings: Arc<Mutex<FaultSettings>>,
    /// Bumped to end every open watch.
    pub(crate) drop_watches: Arc<watch::Sender<u64>>,
    pub(crate) store: Arc<Mutex<crate::store::Store>>,
    pub(crate) status_hold: Arc<StatusHold>,
}

/// Writes to the status of one resource's objects, held back until
/// released: a slow request, whose object may change before it lands.
#[derive(Default)]
pub(crate) struct StatusHold {
    /// The resource (plural) whose status writes are held, if any.
    plural: Mutex<Option<String>>,
    /// How many are waiting now.
    waiting: AtomicUsize,
    /// Bumped to let every waiting write through.
    released: watch::Sender<u64>,
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

    /// Refuse every request whose path ends with `suffix` (for example
    /// `/configmaps/keys`) with 403 Forbidden, as RBAC does for an object
    /// the client may not read; `None` lifts it.
    pub fn forbid(&self, suffix: Option<&str>) {
        if let Ok(mut s) = self.settings.lock() {
            s.forbidden = suffix.map(str::to_string);
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

    /// From now on, hold every write (PATCH or PUT) to the status
    /// subresource of objects of resource `plural` (`deploymentresources`,
    /// say) before it is applied, until [`Self::release_status_writes`]:
    /// a request in flight that a later change may overtake.
    pub fn hold_status_writes(&self, plural: &str) {
        if let Ok(mut held) = self.status_hold.plural.lock() {
            *held = Some(plural.to_string());
        }
    }

    /// How many status writes are held now.
    pub fn held_status_writes(&self) -> usize {
        self.status_hold.waiting.load(Ordering::SeqCst)
    }

    /// Stop holding status writes; those held are applied now.
    pub fn release_status_writes(&self) {
        if let Ok(mut held) = self.status_hold.plural.lock() {
            *held = None;
        }
        self.status_hold.released.send_modify(|n| *n += 1);
    }

    /// Wait here if the request is a status write being held.
    pub(crate) async fn hold_if_asked(&self, method: &Method, path: &str) {
        let mut released = self.status_hold.released.subscribe();
        let held = self
            .status_hold
            .plural
            .lock()
            .ok()
            .and_then(|plural| plural.clone())
            .is_some_and(|plural| is_status_write(method, path, &plural));
        if held {
            self.status_hold.waiting.fetch_add(1, Ordering::SeqCst);
            let _ = released.changed().await;
            self.status_hold.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Switch every fault off (held status writes go through).
    pub fn clear(&self) {
        if let Ok(mut s) = self.settings.lock() {
            *s = FaultSettings::default();
        }
        self.release_status_writes();
    }

    pub(crate) fn current(&self) -> FaultSettings {
        self.settings.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// A PATCH or PUT of `.../{plural}/{name}/status`.
fn is_status_write(method: &Method, path: &str, plural: &str) -> bool {
    let segments: Vec<&str> = path.trim_end_matches('/').rsplit('/').take(3).collect();
    matches!(*method, Method::PATCH | Method::PUT)
        && segments.len() == 3
        && segments[0] == "status"
        && segments[2] == plural
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_status_writes_of_the_resource_held_are_held() {
        let path = "/apis/radapp.io/v1alpha3/namespaces/ns/deploymentresources/a/status";
        assert!(is_status_write(&Method::PATCH, path, "deploymentresources"));
        assert!(is_status_write(&Method::PUT, path, "deploymentresources"));
        assert!(!is_status_write(&Method::GET, path, "deploymentresources"));
        assert!(!is_status_write(
            &Method::PATCH,
            path,
            "deploymenttemplates"
        ));
        let object = "/apis/radapp.io/v1alpha3/namespaces/ns/deploymentresources/a";
        assert!(!is_status_write(
            &Method::PATCH,
            object,
            "deploymentresources"
        ));
    }
}
