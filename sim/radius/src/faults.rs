//! Fault injection: what the simulator does wrong on purpose, switchable at
//! run time through [`FaultsHandle`] or `POST /_sim/faults`, and the
//! operation timings (`deploy_ms`, `delete_ms`, `retry_after_secs`).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{ArmError, codes};

/// The ARM error a failed deployment ends with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InjectedError {
    pub code: String,
    pub message: String,
}

impl Default for InjectedError {
    fn default() -> Self {
        Self {
            code: codes::DEPLOYMENT_FAILED.into(),
            message: "The deployment failed (injected by the Radius simulator)".into(),
        }
    }
}

/// Faults in force. Counters (`fail_deployments`, `throttle_requests`,
/// `drop_connections`, `vanish_operations`) count down as they fire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Faults {
    /// The next N deployments are accepted but their operation ends `Failed`
    /// with `deployment_error`.
    pub fail_deployments: u32,
    pub deployment_error: InjectedError,
    /// Fraction (0..=1) of requests answered 500 or 503 with an ARM error.
    pub error_rate: f64,
    /// The next N requests are answered 429 with `Retry-After`.
    pub throttle_requests: u32,
    /// The `Retry-After` seconds sent with an injected 429 or 503.
    pub throttle_retry_after_secs: u64,
    /// Added to every request before it is answered.
    pub latency_ms: u64,
    /// The next N requests get their TCP connection closed without an answer.
    pub drop_connections: u32,
    /// The next N operations started are unknown to their URLs (404).
    pub vanish_operations: u32,
    /// While set, every operation URL answers 404.
    pub vanish_all_operations: bool,
    /// The next N resource DELETEs are answered 409 `Conflict` (as Radius
    /// answers while something else holds the resource).
    pub refuse_deletes: u32,
    /// The next N resource deletions are accepted but their operation ends
    /// `Failed` (the resource stays).
    pub fail_deletes: u32,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            fail_deployments: 0,
            deployment_error: InjectedError::default(),
            error_rate: 0.0,
            throttle_requests: 0,
            throttle_retry_after_secs: 1,
            latency_ms: 0,
            drop_connections: 0,
            vanish_operations: 0,
            vanish_all_operations: false,
            refuse_deletes: 0,
            fail_deletes: 0,
        }
    }
}

/// How long operations take and what `Retry-After` they advertise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    pub deploy: Duration,
    pub delete: Duration,
    pub retry_after_secs: u64,
}

/// Faults and timings as `GET /_sim/faults` shows them; `POST /_sim/faults`
/// takes any subset of these fields and changes only those.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    #[serde(flatten)]
    pub faults: Faults,
    pub deploy_ms: u64,
    pub delete_ms: u64,
    pub retry_after_secs: u64,
}

/// A partial update of [`Settings`] (the body of `POST /_sim/faults`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SettingsPatch {
    pub fail_deployments: Option<u32>,
    pub deployment_error: Option<InjectedError>,
    pub error_rate: Option<f64>,
    pub throttle_requests: Option<u32>,
    pub throttle_retry_after_secs: Option<u64>,
    pub latency_ms: Option<u64>,
    pub drop_connections: Option<u32>,
    pub vanish_operations: Option<u32>,
    pub vanish_all_operations: Option<bool>,
    pub refuse_deletes: Option<u32>,
    pub fail_deletes: Option<u32>,
    pub deploy_ms: Option<u64>,
    pub delete_ms: Option<u64>,
    pub retry_after_secs: Option<u64>,
}

/// How many times each fault fired.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    pub failed_deployments: u64,
    pub server_errors: u64,
    pub throttled: u64,
    pub dropped_connections: u64,
    pub vanished_operations: u64,
    pub delayed_requests: u64,
    pub refused_deletes: u64,
    pub failed_deletes: u64,
}

/// What to do with one incoming request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RequestFault {
    None,
    Drop,
    Throttle { retry_after_secs: u64 },
    ServerError { status: u16, retry_after_secs: u64 },
}

#[derive(Debug)]
pub(crate) struct FaultState {
    pub faults: Faults,
    pub timings: Timings,
    pub counts: FaultCounts,
}

/// A handle to switch faults and timings of a running simulator. Cheap to
/// clone; changes apply to the next request or operation.
#[derive(Debug, Clone)]
pub struct FaultsHandle {
    pub(crate) state: Arc<Mutex<FaultState>>,
}

impl FaultsHandle {
    pub(crate) fn new(faults: Faults, timings: Timings) -> Self {
        Self {
            state: Arc::new(Mutex::new(FaultState {
                faults,
                timings,
                counts: FaultCounts::default(),
            })),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, FaultState> {
        // A panic while holding the lock cannot leave the plain data in it
        // inconsistent, so a poisoned lock is still usable.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The faults in force.
    pub fn get(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// Replace all faults.
    pub fn set(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// Change the faults in place.
    pub fn update(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut self.lock().faults);
    }

    /// Switch every fault off (timings stay).
    pub fn clear(&self) {
        self.set(Faults::default());
    }

    /// The next `count` deployments end `Failed` with this ARM error.
    pub fn fail_next_deployments(&self, count: u32, code: &str, message: &str) {
        self.update(|f| {
            f.fail_deployments = count;
            f.deployment_error = InjectedError {
                code: code.into(),
                message: message.into(),
            };
        });
    }

    /// Answer this fraction (0..=1) of requests with 500 or 503.
    pub fn set_error_rate(&self, rate: f64) {
        self.update(|f| f.error_rate = rate.clamp(0.0, 1.0));
    }

    /// Answer the next `count` requests 429 with `Retry-After: retry_after_secs`.
    pub fn throttle_next(&self, count: u32, retry_after_secs: u64) {
        self.update(|f| {
            f.throttle_requests = count;
            f.throttle_retry_after_secs = retry_after_secs;
        });
    }

    /// Delay every request by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.update(|f| f.latency_ms = latency.as_millis().try_into().unwrap_or(u64::MAX));
    }

    /// Close the connection of the next `count` requests without answering.
    pub fn drop_next_connections(&self, count: u32) {
        self.update(|f| f.drop_connections = count);
    }

    /// The next `count` operations started are unknown to their URLs.
    pub fn vanish_next_operations(&self, count: u32) {
        self.update(|f| f.vanish_operations = count);
    }

    /// While `on`, every operation URL answers 404.
    /// Answer the next `count` resource DELETEs 409 `Conflict`.
    pub fn refuse_next_deletes(&self, count: u32) {
        self.update(|f| f.refuse_deletes = count);
    }

    /// Let the next `count` deletions end `Failed`.
    pub fn fail_next_deletes(&self, count: u32) {
        self.update(|f| f.fail_deletes = count);
    }

    pub fn vanish_all_operations(&self, on: bool) {
        self.update(|f| f.vanish_all_operations = on);
    }

    /// How long a deployment takes from now on.
    pub fn set_deploy_duration(&self, duration: Duration) {
        self.lock().timings.deploy = duration;
    }

    /// How long a delete takes from now on.
    pub fn set_delete_duration(&self, duration: Duration) {
        self.lock().timings.delete = duration;
    }

    /// The `Retry-After` seconds of accepted operations from now on.
    pub fn set_retry_after_secs(&self, seconds: u64) {
        self.lock().timings.retry_after_secs = seconds;
    }

    /// Faults and timings together.
    pub fn settings(&self) -> Settings {
        let state = self.lock();
        Settings {
            faults: state.faults.clone(),
            deploy_ms: millis(state.timings.deploy),
            delete_ms: millis(state.timings.delete),
            retry_after_secs: state.timings.retry_after_secs,
        }
    }

    /// Apply a partial update; `error_rate` outside 0..=1 is refused.
    pub fn apply(&self, patch: SettingsPatch) -> Result<Settings, String> {
        if let Some(rate) = patch.error_rate
            && !(0.0..=1.0).contains(&rate)
        {
            return Err(format!("error_rate must be between 0 and 1, not {rate}"));
        }
        {
            let mut state = self.lock();
            let f = &mut state.faults;
            macro_rules! set {
                ($($field:ident),*) => {$(if let Some(v) = patch.$field { f.$field = v; })*};
            }
            set!(
                fail_deployments,
                deployment_error,
                error_rate,
                throttle_requests,
                throttle_retry_after_secs,
                latency_ms,
                drop_connections,
                vanish_operations,
                vanish_all_operations,
                refuse_deletes,
                fail_deletes
            );
            if let Some(ms) = patch.deploy_ms {
                state.timings.deploy = Duration::from_millis(ms);
            }
            if let Some(ms) = patch.delete_ms {
                state.timings.delete = Duration::from_millis(ms);
            }
            if let Some(secs) = patch.retry_after_secs {
                state.timings.retry_after_secs = secs;
            }
        }
        Ok(self.settings())
    }

    /// How often each fault fired.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts.clone()
    }

    pub(crate) fn timings(&self) -> Timings {
        self.lock().timings
    }

    /// Decide the fate of one request (counters count down here) and how
    /// long to delay it.
    pub(crate) fn on_request(&self) -> (RequestFault, Duration) {
        let mut state = self.lock();
        let latency = Duration::from_millis(state.faults.latency_ms);
        if !latency.is_zero() {
            state.counts.delayed_requests += 1;
        }
        if state.faults.drop_connections > 0 {
            state.faults.drop_connections -= 1;
            state.counts.dropped_connections += 1;
            return (RequestFault::Drop, latency);
        }
        if state.faults.throttle_requests > 0 {
            state.faults.throttle_requests -= 1;
            state.counts.throttled += 1;
            return (
                RequestFault::Throttle {
                    retry_after_secs: state.faults.throttle_retry_after_secs,
                },
                latency,
            );
        }
        let rate = state.faults.error_rate;
        if rate > 0.0 && rand::random::<f64>() < rate {
            state.counts.server_errors += 1;
            let status = if rand::random::<bool>() { 500 } else { 503 };
            return (
                RequestFault::ServerError {
                    status,
                    retry_after_secs: state.faults.throttle_retry_after_secs,
                },
                latency,
            );
        }
        (RequestFault::None, latency)
    }

    /// The error a new deployment must end with, if one is due to fail.
    pub(crate) fn on_new_deployment(&self) -> Option<ArmError> {
        let mut state = self.lock();
        if state.faults.fail_deployments == 0 {
            return None;
        }
        state.faults.fail_deployments -= 1;
        state.counts.failed_deployments += 1;
        let error = &state.faults.deployment_error;
        Some(ArmError::new(error.code.clone(), error.message.clone()))
    }

    /// Whether the next resource DELETE is to be refused with 409.
    pub(crate) fn on_delete_request(&self) -> bool {
        let mut state = self.lock();
        if state.faults.refuse_deletes == 0 {
            return false;
        }
        state.faults.refuse_deletes -= 1;
        state.counts.refused_deletes += 1;
        true
    }

    /// The error a new deletion must end with, if one is due to fail.
    pub(crate) fn on_new_deletion(&self) -> Option<ArmError> {
        let mut state = self.lock();
        if state.faults.fail_deletes == 0 {
            return None;
        }
        state.faults.fail_deletes -= 1;
        state.counts.failed_deletes += 1;
        Some(ArmError::new(
            "DeleteFailed",
            "The deletion failed (injected by the Radius simulator)",
        ))
    }

    /// Whether a new operation is to vanish.
    pub(crate) fn on_new_operation(&self) -> bool {
        let mut state = self.lock();
        if state.faults.vanish_operations == 0 {
            return false;
        }
        state.faults.vanish_operations -= 1;
        state.counts.vanished_operations += 1;
        true
    }

    pub(crate) fn all_operations_vanished(&self) -> bool {
        self.lock().faults.vanish_all_operations
    }

    pub(crate) fn reset(&self, faults: Faults, timings: Timings) {
        let mut state = self.lock();
        state.faults = faults;
        state.timings = timings;
        state.counts = FaultCounts::default();
    }
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis().try_into().unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle() -> FaultsHandle {
        FaultsHandle::new(
            Faults::default(),
            Timings {
                deploy: Duration::from_millis(200),
                delete: Duration::from_millis(100),
                retry_after_secs: 1,
            },
        )
    }

    #[test]
    fn counters_count_down_in_order() {
        let faults = handle();
        faults.drop_next_connections(1);
        faults.throttle_next(1, 7);
        assert_eq!(faults.on_request().0, RequestFault::Drop);
        assert_eq!(
            faults.on_request().0,
            RequestFault::Throttle {
                retry_after_secs: 7
            }
        );
        assert_eq!(faults.on_request().0, RequestFault::None);
        assert_eq!(faults.counts().dropped_connections, 1);
        assert_eq!(faults.counts().throttled, 1);
    }

    #[test]
    fn full_error_rate_fails_every_request() {
        let faults = handle();
        faults.set_error_rate(1.0);
        for _ in 0..20 {
            assert!(matches!(
                faults.on_request().0,
                RequestFault::ServerError {
                    status: 500 | 503,
                    ..
                }
            ));
        }
    }

    #[test]
    fn patches_change_only_named_fields() {
        let faults = handle();
        faults.set_latency(Duration::from_millis(5));
        let patch: SettingsPatch =
            serde_json::from_str(r#"{"fail_deployments": 2, "deploy_ms": 10}"#).unwrap();
        let settings = faults.apply(patch).unwrap();
        assert_eq!(settings.faults.fail_deployments, 2);
        assert_eq!(settings.faults.latency_ms, 5);
        assert_eq!(settings.deploy_ms, 10);
        assert_eq!(settings.delete_ms, 100);
        assert!(
            faults
                .apply(SettingsPatch {
                    error_rate: Some(2.0),
                    ..SettingsPatch::default()
                })
                .is_err()
        );
        assert!(serde_json::from_str::<SettingsPatch>(r#"{"typo": 1}"#).is_err());
        // What GET /_sim/faults shows parses back.
        let shown = serde_json::to_string(&settings).unwrap();
        assert_eq!(serde_json::from_str::<Settings>(&shown).unwrap(), settings);
        assert!(faults.on_new_deployment().is_some());
        assert!(faults.on_new_deployment().is_some());
        assert!(faults.on_new_deployment().is_none());
    }
}
