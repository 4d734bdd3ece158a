//! The `ReconcilePolicy` controller: for each policy object, fetch its
//! module, check its digest, compile it, check its world and contract,
//! run its fixture cases, and only then swap it in ([`PolicyRegistry::activate`]).
//! A candidate that fails any step is refused: the version loaded before
//! stays in charge, and the policy's status and an Event say why.
//!
//! What wakes a policy: a change of its spec (generation), or a change of a
//! ConfigMap it reads (its module, its cases or its `spec.verify` keys;
//! ConfigMaps are watched by their metadata only). A refused candidate
//! re-checks the running version when its keys or annotations changed
//! (`revocation.rs`). A fetch that failed (registry or URL unreachable) is
//! retried with backoff. It runs on the same queue and runner as the
//! template and resource controllers (`runner.rs`), with no limit on
//! concurrency and on every replica, leader or not.
//!
//! Checking a candidate version is `candidate.rs`; what is written to a
//! policy's status, `status.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::crd::{ReconcilePolicy, ReconcilePolicySpec};
use super::registry::{Active, Entry, PolicyRegistry, Problem};
use crate::kube_client::KubeReader;
use crate::kube_client::events::EventRecorders;
use crate::policy::source;
use crate::policy::{Fetcher, PolicyEngine};
use crate::runner::{self, objects};

mod candidate;
mod refusal;
mod revocation;
mod status;
mod trust;

use candidate::{Candidate, candidate};
use status::{flush_counts, write_status};

/// How often decision counts are written to the policies' status.
const STATUS_FLUSH: Duration = Duration::from_secs(10);

/// What the policy controller needs.
pub struct Loader {
    pub client: Client,
    pub registry: Arc<PolicyRegistry>,
    pub engine: PolicyEngine,
    pub recorders: EventRecorders,
    /// Reads modules (and cases ConfigMaps) from their sources.
    pub fetcher: Fetcher,
    /// The one namespace whose ConfigMaps modules and cases come from.
    pub policy_namespace: String,
    /// `--require-signatures`: any module but the built-in default loads
    /// only with `spec.verify`, and a layer only over verified bases.
    pub require_signatures: bool,
    /// How often a policy following a tag (`spec.verify` and no digest)
    /// resolves it again.
    pub tag_interval: Duration,
    /// Where signature checks are counted.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// `--policy-label-selector`: the policies this controller loads (all
    /// when `None`).
    pub label_selector: Option<String>,
    failures: std::sync::Mutex<BTreeMap<String, u32>>,
}

impl Loader {
    pub fn new(
        client: Client,
        registry: Arc<PolicyRegistry>,
        engine: PolicyEngine,
        recorders: EventRecorders,
        insecure_registries: Vec<String>,
        policy_namespace: String,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            fetcher: Fetcher::new(
                Some(Arc::new(KubeReader(client.clone()))),
                insecure_registries,
                crate::USER_AGENT,
            )?,
            client,
            registry,
            engine,
            recorders,
            policy_namespace,
            require_signatures: false,
            tag_interval: DEFAULT_TAG_INTERVAL,
            metrics: None,
            label_selector: None,
            failures: Default::default(),
        })
    }

    /// With `--require-signatures`, `--policy-tag-interval` and the metrics
    /// signature checks are counted in.
    pub fn with_trust(
        mut self,
        require_signatures: bool,
        tag_interval: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Self {
        self.require_signatures = require_signatures;
        self.tag_interval = tag_interval;
        self.metrics = Some(metrics);
        self
    }

    /// Load only the policies `selector` matches (`--policy-label-selector`).
    pub fn with_label_selector(mut self, selector: Option<String>) -> Self {
        self.label_selector = selector;
        self
    }
}

/// The default of `--policy-tag-interval`.
pub const DEFAULT_TAG_INTERVAL: Duration = Duration::from_secs(60);

/// Whether the `ReconcilePolicy` CRD is served. Without it, every object is
/// decided by `--policy` (said once in the log).
pub async fn crd_installed(client: &Client) -> Result<bool, kube::Error> {
    let api: Api<ReconcilePolicy> = Api::all(client.clone());
    match api.list(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error),
    }
}

/// Run the policy controller until `shutdown`.
pub async fn run_policy_loader(loader: Arc<Loader>, shutdown: CancellationToken) {
    let policies: Api<ReconcilePolicy> = Api::all(loader.client.clone());
    let (store, writer) = reflector::store();
    let registry = loader.registry.clone();
    // A policy this controller does not select is never listed: it is not
    // loaded, chosen or written here (another controller owns it).
    let config = match &loader.label_selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    };
    let trigger = watcher(policies, config)
        .default_backoff()
        // Until the policies are listed nothing is decided: say why.
        .inspect_err(|error| tracing::warn!(%error, "watching ReconcilePolicy objects"))
        .reflect(writer)
        .inspect_ok(move |event| match event {
            watcher::Event::Apply(policy) | watcher::Event::InitApply(policy) => {
                registry.upsert(policy)
            }
            watcher::Event::Delete(policy) => registry.remove(&policy.name_any()),
            watcher::Event::InitDone => registry.set_listed(),
            watcher::Event::Init => {}
        })
        .applied_objects()
        // The policy's own status writes do not wake it.
        .predicate_filter(predicates::generation, Default::default());
    // Which policies read a ConfigMap, from the policies' cache.
    let readers = store.clone();
    let config_maps = watcher(
        Api::<PartialObjectMeta<ConfigMap>>::namespaced(
            loader.client.clone(),
            &loader.policy_namespace,
        ),
        watcher::Config::default(),
    )
    .default_backoff()
    .touched_objects()
    .predicate_filter(predicates::resource_version, Default::default())
    .flat_map(move |event| {
        let readers = match event {
            Ok(config_map) => {
                let namespace = config_map.namespace().unwrap_or_default();
                let name = config_map.name_any();
                readers
                    .state()
                    .into_iter()
                    .filter(|policy| reads_config_map(&policy.spec, &namespace, &name))
                    .map(|policy| ObjectRef::from_obj(&*policy))
                    .collect()
            }
            Err(error) => {
                tracing::debug!(%error, "ConfigMap watch");
                Vec::new()
            }
        };
        futures::stream::iter(readers)
    });
    let flush = tokio::spawn(flush_counts(loader.clone(), shutdown.clone()));
    // Every replica loads the policies, leader or not: a standby that takes
    // over decides at once with what is loaded. Policies are few, so there
    // is no limit on how many load at once.
    runner::run_queue(
        futures::stream::select(objects(trigger, "ReconcilePolicy watch"), config_maps),
        store,
        0,
        shutdown,
        std::future::ready(()),
        move |policy, _waited| reconcile(policy, loader.clone()),
    )
    .await;
    flush.abort();
}

fn reads_config_map(spec: &ReconcilePolicySpec, namespace: &str, name: &str) -> bool {
    let module = spec
        .module
        .config_map
        .as_ref()
        .is_some_and(|c| c.namespace == namespace && c.name == name);
    let cases = spec
        .cases
        .as_ref()
        .is_some_and(|c| c.config_map.namespace == namespace && c.config_map.name == name);
    let keys = spec.verify.as_ref().is_some_and(|v| {
        let roots = v.certificate.as_ref().map(|c| &c.roots.config_map);
        v.config_map
            .iter()
            .chain(roots)
            .any(|c| c.namespace == namespace && c.name == name)
    });
    module || cases || keys
}

/// Why a reconcile of a policy could not finish (retried with backoff).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LoaderError(String);

/// Load `policy`'s module if it changed; when to look at it again. A policy
/// whose status could not be written is looked at again soon; one that
/// loaded, or was refused for good, only when it or what it reads changes.
async fn reconcile(policy: Arc<ReconcilePolicy>, loader: Arc<Loader>) -> Duration {
    match load(&policy, &loader).await {
        Ok(Some(retry)) => retry,
        Ok(None) => runner::LATEST,
        Err(error) => {
            tracing::info!(%error, "policy status not written; retrying");
            source::retry_delay(1)
        }
    }
}

/// One look at `policy`: load it or say why not, and write its status; how
/// soon to retry a problem that may pass (a fetch, a base).
async fn load(policy: &ReconcilePolicy, loader: &Loader) -> Result<Option<Duration>, LoaderError> {
    let name = policy.name_any();
    let outcome = candidate(policy, loader).await;
    let entry = loader.registry.get(&name);
    let retry = match outcome {
        Ok(Candidate::Unchanged) => {
            // Verified again, with the keys and annotations of now.
            let verified = entry
                .as_ref()
                .and_then(|e| e.active.as_ref()?.verified.as_ref());
            let basis = verified.and_then(|_| revocation::basis(policy));
            loader.registry.verified_under(&name, basis);
            follows_tag(policy).then_some(loader.tag_interval)
        }
        Ok(Candidate::Loaded(active)) => activate(policy, loader, &name, active).await,
        Err(problem) => refuse(policy, loader, &name, entry.as_ref(), problem).await,
    };
    if retry.is_none()
        && let Ok(mut failures) = loader.failures.lock()
    {
        failures.remove(&name);
    }
    write_status(loader, policy).await?;
    Ok(retry)
}

/// Swap in a candidate that passed every check, and say so in an Event;
/// when to look again (a followed tag's interval).
async fn activate(
    policy: &ReconcilePolicy,
    loader: &Loader,
    name: &str,
    active: Active,
) -> Option<Duration> {
    let loaded = active.policy.display_name();
    let digest = active.policy.digest().to_string();
    let verified = active.verified.is_some();
    loader.registry.activate(name, active);
    let basis = verified.then(|| revocation::basis(policy)).flatten();
    loader.registry.verified_under(name, basis);
    tracing::info!(reconcile_policy = %name, policy = %loaded, %digest, "policy version activated");
    event(
        loader,
        policy,
        EventType::Normal,
        "Activated",
        format!("{loaded} (sha256:{digest}) decides from now on"),
    )
    .await;
    follows_tag(policy).then_some(loader.tag_interval)
}

/// Refuse a candidate: the version loaded before stays in charge, unless
/// it was never verified or no longer verifies; an Event when the refusal
/// is news; when to look again, if the problem may pass.
async fn refuse(
    policy: &ReconcilePolicy,
    loader: &Loader,
    name: &str,
    entry: Option<&Entry>,
    problem: Problem,
) -> Option<Duration> {
    let running = entry
        .and_then(|e| e.active.as_ref())
        .map(|a| a.policy.display_name());
    let retired = policy.spec.verify.is_some() && loader.registry.retire_unverified(name);
    // The keys or annotations the running version was verified
    // with changed (a key removed): it decides on only if it still
    // verifies.
    let revoked = match retired {
        true => None,
        false => revocation::revoked(policy, loader, entry).await,
    }
    .filter(|_| loader.registry.retire(name));
    let message = match (&running, retired, &revoked) {
        (Some(current), true, _) => format!(
            "{}; {current} was never verified and no longer decides",
            problem.message
        ),
        (Some(current), false, Some(why)) => revocation::message(&problem, why, current),
        (Some(current), false, None) => {
            format!("{}; {current} stays in charge", problem.message)
        }
        (None, ..) => problem.message.clone(),
    };
    let reason = revoked.as_ref().map_or(problem.reason, |why| why.reason);
    tracing::warn!(reconcile_policy = %name, reason, "policy candidate refused: {message}");
    let stored = match retired || revoked.is_some() {
        true => Problem {
            reason,
            message: message.clone(),
        },
        false => problem.clone(),
    };
    let news = entry.and_then(|e| e.problem.as_ref()) != Some(&stored);
    if news {
        event(loader, policy, EventType::Warning, reason, message.clone()).await;
    }
    let retry = retry_after_refusal(policy, loader, name, &problem);
    loader.registry.refuse(name, stored);
    retry
}

/// When to look again at a refused candidate whose problem may pass, paced
/// by the fetch backoff (a followed tag at least every tag interval);
/// `None` for a refusal that stands until the policy or what it reads
/// changes.
fn retry_after_refusal(
    policy: &ReconcilePolicy,
    loader: &Loader,
    name: &str,
    problem: &Problem,
) -> Option<Duration> {
    // A fetch may work later, a base may be created or become Ready, a
    // signature (or one with another certificate) may be pushed, the keys
    // become readable or a tag move: all are looked at again, paced by the
    // same backoff.
    (problem.reason == "FetchFailed"
        || problem.reason.starts_with("Base")
        || problem.reason.starts_with("Signature")
        || problem.reason.starts_with("Certificate")
        || problem.reason == "VerifyKeysUnreadable"
        || (problem.reason == "DigestMismatch" && follows_tag(policy)))
    .then(|| fetch_backoff(loader, name))
    // A tag is looked at every --policy-tag-interval, refused or not.
    .map(|backoff| match follows_tag(policy) {
        true => backoff.min(loader.tag_interval),
        false => backoff,
    })
}

/// The policy names an OCI tag, not a digest: the tag is resolved again
/// every `--policy-tag-interval`.
fn follows_tag(policy: &ReconcilePolicy) -> bool {
    let module = &policy.spec.module;
    module.digest.is_none() && module.oci.as_deref().is_some_and(|r| !r.contains('@'))
}

fn fetch_backoff(loader: &Loader, name: &str) -> Duration {
    let Ok(mut failures) = loader.failures.lock() else {
        return source::retry_delay(u32::MAX);
    };
    let count = failures.entry(name.to_string()).or_default();
    *count = count.saturating_add(1);
    source::retry_delay(*count)
}

async fn event(
    loader: &Loader,
    policy: &ReconcilePolicy,
    kind: EventType,
    reason: &str,
    note: String,
) {
    let reference = policy.object_ref(&());
    let event = Event {
        type_: kind,
        reason: reason.to_string(),
        note: Some(note.chars().take(1024).collect()),
        action: "Load".to_string(),
        secondary: None,
    };
    if let Err(error) = loader.recorders.publish(&event, &reference).await {
        tracing::debug!(%error, "policy event not recorded");
    }
}

#[cfg(test)]
mod tests;
