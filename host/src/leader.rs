//! Leader election on a `coordination.k8s.io/v1` Lease, so that several
//! replicas of `radwasm run` can stand by while exactly one reconciles.
//!
//! The rules are client-go's: a candidate takes the Lease when it is free or
//! when its record has not changed for a whole lease duration *as observed
//! by this process* (so clocks need not agree); the holder renews it every
//! `renew_every`; writes use the Lease's `resourceVersion`, so two candidates
//! can never both win. A holder that cannot renew within the lease duration
//! stops reconciling at once, and a holder that stops cleanly releases the
//! Lease so a standby takes over without waiting.
//!
//! Hand-written because no crate does the last-but-one rule:
//! `kube-lease-manager` (for kube 5) keeps reporting leadership while its
//! renewals fail, so a holder cut off from the API server would go on
//! reconciling after a standby took over; `kube-leader-election` is built on
//! kube 0.96.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

/// Which Lease to hold, as whom, and how tightly.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub namespace: String,
    pub name: String,
    /// This process's identity (the pod name in a cluster).
    pub identity: String,
    /// How long a silent holder keeps the Lease.
    pub lease_duration: Duration,
    /// How often the holder renews, and a candidate retries.
    pub renew_every: Duration,
}

/// The Lease record a candidate last saw (holder, renew time) and when it
/// first saw it, to judge expiry by its own clock.
type Observed = Option<((Option<String>, Option<MicroTime>), Instant)>;

pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Observed,
}

/// How a term as leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermEnd {
    /// Shutdown was asked for.
    Shutdown,
    /// The Lease could not be renewed in time; another replica may lead now.
    Lost,
}

impl LeaderElector {
    pub fn new(client: kube::Client, settings: LeaseSettings) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
        }
    }

    /// Wait until this process holds the Lease. False if `shutdown` came first.
    pub async fn acquire(&mut self, shutdown: &CancellationToken) -> bool {
        let mut waiting_logged = false;
        loop {
            let attempt = tokio::select! {
                _ = shutdown.cancelled() => return false,
                attempt = self.attempt() => attempt,
            };
            match attempt {
                Ok(true) => {
                    tracing::info!(lease = %self.settings.name, identity = %self.settings.identity, "became the leader");
                    return true;
                }
                Ok(false) => {
                    if !waiting_logged {
                        tracing::info!(lease = %self.settings.name, holder = self.holder().as_deref(), "waiting for the leader lease");
                        waiting_logged = true;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, lease = %self.settings.name, "leader election")
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                _ = tokio::time::sleep(self.settings.renew_every) => {}
            }
        }
    }

    /// Renew until `shutdown`, or until a renewal fails for a whole lease
    /// duration; `lost` is cancelled the moment leadership ends. Hands the
    /// elector back so the caller can [`release`](Self::release) the Lease
    /// once its controllers have stopped.
    pub async fn hold(
        mut self,
        shutdown: CancellationToken,
        lost: CancellationToken,
    ) -> (TermEnd, Self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return (TermEnd::Shutdown, self),
                _ = tokio::time::sleep(self.settings.renew_every) => {}
            }
            match self.attempt().await {
                Ok(true) => last_renewal = Instant::now(),
                Ok(false) => {
                    tracing::error!(lease = %self.settings.name, holder = self.holder().as_deref(), "another replica holds the leader lease; stopping");
                    lost.cancel();
                    return (TermEnd::Lost, self);
                }
                Err(error) => {
                    tracing::warn!(%error, "renewing the leader lease failed");
                    if last_renewal.elapsed() >= self.settings.lease_duration {
                        tracing::error!(lease = %self.settings.name, "could not renew the leader lease in time; stopping");
                        lost.cancel();
                        return (TermEnd::Lost, self);
                    }
                }
            }
        }
    }

    fn holder(&self) -> Option<String> {
        self.observed
            .as_ref()
            .and_then(|((holder, _), _)| holder.clone())
    }

    /// [`Self::try_acquire_or_renew`], given up after one renew interval:
    /// an API server that stops answering must not hold a candidate (or a
    /// holder that should notice it can no longer renew) for ever.
    async fn attempt(&mut self) -> Result<bool, String> {
        let bound = self.settings.renew_every.max(Duration::from_secs(1));
        match tokio::time::timeout(bound, self.try_acquire_or_renew()).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "no answer from the API server within {}ms",
                bound.as_millis()
            )),
        }
    }

    /// One round: create, renew or take over the Lease. Ok(true) if this
    /// process holds it afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let me = self.settings.identity.clone();
        let duration_secs =
            i32::try_from(self.settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(response)) if response.code == 409 => Ok(false),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (holder.clone(), spec.renew_time.clone());
        if self.observed.as_ref().map(|(seen, _)| seen) != Some(&record) {
            self.observed = Some((record, Instant::now()));
        }
        let held_by_me = holder.as_deref() == Some(me.as_str());
        let lease_duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.settings.lease_duration, Duration::from_secs);
        let expired = self
            .observed
            .as_ref()
            .is_some_and(|(_, since)| since.elapsed() >= lease_duration);
        if !held_by_me && holder.is_some() && !expired {
            return Ok(false);
        }
        let mut spec = spec;
        if !held_by_me {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(me);
        spec.lease_duration_seconds = Some(duration_secs);
        spec.renew_time = Some(now);
        lease.spec = Some(spec);
        // `replace` carries the resourceVersion read above: a concurrent
        // writer makes this a 409, and the other candidate wins.
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(response)) if response.code == 409 => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Give the Lease up so a standby takes over at once. Logged either
    /// way: released at INFO, and at ERROR with the API server's reason when
    /// it cannot be (then a standby or a new install waits out the lease
    /// duration). Bounded by one renew interval, like every attempt.
    pub async fn release(&mut self) -> Result<(), ReleaseError> {
        let bound = self.settings.renew_every.max(Duration::from_secs(1));
        let released = match tokio::time::timeout(bound, self.try_release()).await {
            Ok(released) => released,
            Err(_) => Err(ReleaseError::NoAnswer(bound)),
        };
        match &released {
            Ok(()) => tracing::info!(lease = %self.settings.name, "released the leader lease"),
            Err(ReleaseError::NotHolder) => tracing::info!(
                lease = %self.settings.name,
                "the leader lease is held by another replica already; nothing to release"
            ),
            Err(error) => tracing::error!(
                lease = %self.settings.name,
                namespace = %self.settings.namespace,
                %error,
                "releasing the leader lease failed: a standby (or a new install) waits out the lease duration before it leads"
            ),
        }
        released
    }

    async fn try_release(&self) -> Result<(), ReleaseError> {
        let mut lease = self
            .api
            .get_opt(&self.settings.name)
            .await
            .map_err(ReleaseError::from_kube)?
            .ok_or(ReleaseError::NotHolder)?;
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Err(ReleaseError::NotHolder);
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        lease.spec = Some(spec);
        self.api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
            .map_err(ReleaseError::from_kube)?;
        Ok(())
    }
}

/// Why the Lease could not be released.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// Another replica holds it (or it is gone): nothing of ours to release.
    #[error("the lease is not held by this process")]
    NotHolder,
    /// The API server refused: the controller's permission on Leases (its
    /// Role, RoleBinding or ServiceAccount) is gone, typically because they
    /// were deleted before this pod stopped.
    #[error(
        "the API server refused ({code}): {message}; the controller's permission to update \
         Leases (its Role, RoleBinding or ServiceAccount) is gone before the controller stopped"
    )]
    Refused { code: u16, message: String },
    #[error("{0}")]
    Api(String),
    #[error("no answer from the API server within {}ms", .0.as_millis())]
    NoAnswer(Duration),
}

impl ReleaseError {
    fn from_kube(error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) if status.code == 401 || status.code == 403 => {
                ReleaseError::Refused {
                    code: status.code,
                    message: status.message,
                }
            }
            other => ReleaseError::Api(other.to_string()),
        }
    }
}
