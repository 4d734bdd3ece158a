//! The `ReconcilePolicy` controller: for each policy object, fetch its
//! module, check its digest, compile it, check its world and contract,
//! run its fixture cases, and only then swap it in ([`PolicyRegistry::activate`]).
//! A candidate that fails any step is refused: the version loaded before
//! stays in charge, and the policy's status and an Event say why.
//!
//! What wakes a policy: a change of its spec (generation), or a change of a
//! ConfigMap it reads (its module or its cases; ConfigMaps are watched by
//! their metadata only). A fetch that failed (registry or URL unreachable)
//! is retried with backoff. It runs on the same queue and runner as the
//! template and resource controllers (`runner.rs`), with no
//! limit on concurrency and on every replica, leader or not.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use radwasm_policy_model::cases;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::crd::{PolicyModule, ReconcilePolicy, ReconcilePolicySpec};
use super::registry::{Active, PolicyRegistry, Problem};
use crate::controller::events::EventRecorders;
use crate::policy::source::{self, SecretRef, Source, SourceError, SourceErrorKind};
use crate::policy::{self, Fetcher, LoadError, LoadedPolicy, PolicyEngine};
use crate::runner::{self, objects};

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
            fetcher: Fetcher::new(client.clone(), insecure_registries)?,
            client,
            registry,
            engine,
            recorders,
            policy_namespace,
            failures: Default::default(),
        })
    }
}

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
pub async fn run(loader: Arc<Loader>, shutdown: CancellationToken) {
    let policies: Api<ReconcilePolicy> = Api::all(loader.client.clone());
    let (store, writer) = reflector::store();
    let registry = loader.registry.clone();
    let trigger = watcher(policies, watcher::Config::default())
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
    runner::run(
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
    module || cases
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
        Ok(Candidate::Unchanged) => None,
        Ok(Candidate::Loaded(active)) => {
            let loaded = active.policy.display_name();
            let digest = active.policy.digest().to_string();
            loader.registry.activate(&name, active);
            tracing::info!(reconcile_policy = %name, policy = %loaded, %digest, "policy version activated");
            event(
                loader,
                policy,
                EventType::Normal,
                "Activated",
                format!("{loaded} (sha256:{digest}) decides from now on"),
            )
            .await;
            None
        }
        Err(problem) => {
            let keeps = entry
                .as_ref()
                .and_then(|e| e.active.as_ref())
                .map(|a| a.policy.display_name());
            let message = match &keeps {
                Some(current) => format!("{}; {current} stays in charge", problem.message),
                None => problem.message.clone(),
            };
            tracing::warn!(reconcile_policy = %name, reason = problem.reason, "policy candidate refused: {message}");
            let news = entry.as_ref().and_then(|e| e.problem.as_ref()) != Some(&problem);
            if news {
                event(loader, policy, EventType::Warning, problem.reason, message).await;
            }
            // A fetch may work later, and a base may be created or become
            // Ready: both are looked at again, paced by the same backoff.
            let retry = (problem.reason == "FetchFailed" || problem.reason.starts_with("Base"))
                .then(|| fetch_backoff(loader, &name));
            loader.registry.refuse(&name, problem);
            retry
        }
    };
    if retry.is_none()
        && let Ok(mut failures) = loader.failures.lock()
    {
        failures.remove(&name);
    }
    write_status(loader, policy).await?;
    Ok(retry)
}

fn fetch_backoff(loader: &Loader, name: &str) -> Duration {
    let Ok(mut failures) = loader.failures.lock() else {
        return source::retry_delay(u32::MAX);
    };
    let count = failures.entry(name.to_string()).or_default();
    *count = count.saturating_add(1);
    source::retry_delay(*count)
}

enum Candidate {
    /// The loaded version is exactly this candidate.
    Unchanged,
    Loaded(Active),
}

fn problem(reason: &'static str, message: impl Into<String>) -> Problem {
    Problem {
        reason,
        message: message.into(),
    }
}

/// Fetch, check, compile and test the policy's module as its spec says now.
async fn candidate(policy: &ReconcilePolicy, loader: &Loader) -> Result<Candidate, Problem> {
    let spec = &policy.spec;
    let source =
        check_spec(spec, &loader.policy_namespace).map_err(|m| problem("InvalidSpec", m))?;
    let fetched = source.fetch(&loader.fetcher).await.map_err(fetch_problem)?;
    let (source_name, bytes, digest) = (fetched.source_name, fetched.bytes, fetched.digest);
    if let Some(expected) = spec.module.sha256.as_deref() {
        let expected = expected.trim_start_matches("sha256:").to_ascii_lowercase();
        if expected != digest {
            return Err(problem(
                "DigestMismatch",
                format!(
                    "{source_name}: the component's SHA-256 is {digest}, not the {expected} spec.module.sha256 requires; not loaded"
                ),
            ));
        }
    }
    let cases = fetch_cases(spec, loader).await?;
    let limits = spec.limits.unwrap_or_default();
    let identity = format!(
        "{digest} fuel={:?} memory={:?} cases={} base={:?}",
        limits.fuel,
        limits.memory_bytes,
        cases_fingerprint(&cases),
        spec.base
    );
    if let Some(entry) = loader.registry.get(&policy.name_any())
        && entry
            .active
            .as_ref()
            .is_some_and(|a| a.identity == identity)
        && entry.problem.is_none()
    {
        return Ok(Candidate::Unchanged);
    }
    let engine = loader.engine.clone();
    let registry = loader.registry.clone();
    let (name, base) = (policy.name_any(), spec.base.clone());
    let loaded = tokio::task::spawn_blocking(move || -> Result<LoadedPolicy, Problem> {
        let loaded = engine
            .load_bytes(&source_name, &bytes)
            .map_err(load_problem)?;
        let loaded = loaded.with_limits(
            limits.fuel,
            limits
                .memory_bytes
                .map(|m| usize::try_from(m).unwrap_or(usize::MAX)),
        );
        // The cases run over the stack the layer decides over now; the
        // registry puts the stack together again at every selection.
        let stack = match (&base, loaded.is_layer()) {
            (Some(base), false) => {
                return Err(problem(
                    "InvalidSpec",
                    format!(
                        "spec.base names {base:?}, but {} is a policy that decides alone ({}); only a layer (world layer) decides over a base",
                        loaded.display_name(),
                        loaded.worlds()
                    ),
                ));
            }
            (Some(base), true) => loaded.on_base(registry.base_stack(&name, base)?),
            (None, _) => loaded.clone(),
        };
        run_cases(&stack, &cases)?;
        Ok(loaded)
    })
    .await
    .map_err(|e| problem("LoadFailed", format!("the load task failed: {e}")))??;
    Ok(Candidate::Loaded(Active {
        policy: loaded,
        identity,
    }))
}

/// Where the module comes from, once the spec is known to name exactly one.
fn check_spec(spec: &ReconcilePolicySpec, policy_namespace: &str) -> Result<Source, String> {
    for (field, namespace) in [
        (
            "module.configMap",
            spec.module.config_map.as_ref().map(|c| &c.namespace),
        ),
        (
            "cases.configMap",
            spec.cases.as_ref().map(|c| &c.config_map.namespace),
        ),
    ] {
        if let Some(namespace) = namespace
            && namespace != policy_namespace
        {
            return Err(format!(
                "spec.{field}.namespace is {namespace:?}: this controller reads policy ConfigMaps in {policy_namespace:?} only (--policy-namespace)"
            ));
        }
    }
    let module: &PolicyModule = &spec.module;
    let named: Vec<&str> = [
        module.builtin.is_some().then_some("builtin"),
        module.config_map.is_some().then_some("configMap"),
        module.oci.is_some().then_some("oci"),
        module.url.is_some().then_some("url"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if named.len() != 1 {
        return Err(format!(
            "spec.module must name exactly one of builtin, configMap, oci and url; it names {}",
            if named.is_empty() {
                "none".to_string()
            } else {
                named.join(", ")
            }
        ));
    }
    for (field, selector) in [
        ("namespaceSelector", &spec.namespace_selector),
        ("objectSelector", &spec.object_selector),
    ] {
        if let Some(selector) = selector {
            kube::core::Selector::try_from(selector.clone())
                .map_err(|e| format!("spec.{field}: {e}"))?;
        }
    }
    if let Some(sha) = &module.sha256 {
        let hex = sha.trim_start_matches("sha256:");
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "spec.module.sha256 must be 64 hex digits (optionally after sha256:); got {sha:?}"
            ));
        }
    }
    if module.builtin.is_some() {
        // `default` is the only built-in policy.
        return Ok(Source::BuiltIn);
    }
    if let Some(config_map) = &module.config_map {
        if config_map.namespace.is_empty()
            || config_map.name.is_empty()
            || config_map.key.is_empty()
        {
            return Err("spec.module.configMap needs namespace, name and key".to_string());
        }
        return Ok(Source::ConfigMap {
            namespace: config_map.namespace.clone(),
            name: config_map.name.clone(),
            key: config_map.key.clone(),
        });
    }
    if let Some(url) = &module.url {
        let parsed =
            reqwest::Url::parse(url).map_err(|e| format!("spec.module.url {url:?}: {e}"))?;
        let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
            return Err(format!(
                "spec.module.url must be https (plain http only on loopback); got {url:?}"
            ));
        }
        if module.sha256.is_none() {
            return Err("spec.module.url needs spec.module.sha256: a component from a URL is loaded only by its digest".to_string());
        }
        return Ok(Source::Url(url.clone()));
    }
    let reference = module.oci.as_deref().unwrap_or_default();
    let pinned = match (reference.rsplit_once('@'), &module.digest) {
        (Some((_, digest)), None) => {
            check_oci_digest(digest)?;
            reference.to_string()
        }
        (None, Some(digest)) => {
            check_oci_digest(digest)?;
            format!("{reference}@{digest}")
        }
        (Some((_, inline)), Some(digest)) if inline == digest => reference.to_string(),
        (Some((_, inline)), Some(digest)) => {
            return Err(format!(
                "spec.module.oci pins {inline} but spec.module.digest says {digest}"
            ));
        }
        (None, None) => {
            return Err(format!(
                "spec.module.oci {reference:?} needs a digest: write it as repository@sha256:… or set spec.module.digest"
            ));
        }
    };
    Ok(Source::Oci {
        reference: pinned,
        pull_secret: module.pull_secret.as_ref().map(|secret| SecretRef {
            namespace: secret.namespace.clone(),
            name: secret.name.clone(),
        }),
    })
}

fn check_oci_digest(digest: &str) -> Result<(), String> {
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(format!(
            "OCI digest {digest:?} is not sha256: followed by 64 hex digits"
        ))
    }
}

/// A refused fetch: `DigestMismatch` if a registry's bytes are not the ones
/// its digests name, else `FetchFailed` (retried with backoff).
fn fetch_problem(error: SourceError) -> Problem {
    match error.kind {
        SourceErrorKind::DigestMismatch => {
            problem("DigestMismatch", format!("{error}; not loaded"))
        }
        SourceErrorKind::Unavailable | SourceErrorKind::TooLarge => {
            problem("FetchFailed", error.to_string())
        }
    }
}

/// The fixture cases the module must pass: every `*.json` key of the
/// ConfigMap, by key.
async fn fetch_cases(
    spec: &ReconcilePolicySpec,
    loader: &Loader,
) -> Result<Vec<(String, String)>, Problem> {
    let Some(source) = &spec.cases else {
        return Ok(Vec::new());
    };
    let key = &source.config_map;
    let what = format!("cases ConfigMap {}/{}", key.namespace, key.name);
    let config_map = loader
        .fetcher
        .config_map(&key.namespace, &key.name, &what)
        .await
        .map_err(|error| problem("FetchFailed", error.to_string()))?;
    let cases: Vec<(String, String)> = config_map
        .data
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k.ends_with(".json"))
        .collect();
    if cases.is_empty() {
        return Err(problem(
            "CasesFailed",
            format!("{what}: no *.json keys in data"),
        ));
    }
    Ok(cases)
}

fn cases_fingerprint(cases: &[(String, String)]) -> String {
    let mut hasher = Sha256::new();
    for (key, text) in cases {
        hasher.update(key.as_bytes());
        hasher.update([0]);
        hasher.update(text.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..8])
}

/// Every case must pass; the refusal names the first failures.
fn run_cases(policy: &LoadedPolicy, texts: &[(String, String)]) -> Result<(), Problem> {
    let mut failures = Vec::new();
    for (key, text) in texts {
        let case: cases::Case = match serde_json::from_str(text) {
            Ok(case) => case,
            Err(error) => {
                failures.push(format!("{key}: not a case file: {error}"));
                continue;
            }
        };
        let outcome = match policy.decide(&case.observation) {
            Ok(decision) => Ok(decision.plan),
            Err(policy::DecisionError::Policy { error, .. }) => Err(error),
            Err(error) => {
                failures.push(format!("{key}: the policy did not decide: {error}"));
                continue;
            }
        };
        if let Err(mismatch) = cases::check(&case, &outcome) {
            failures.push(format!("{key}: {mismatch}"));
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = failures.iter().take(3).map(String::as_str).collect();
    Err(problem(
        "CasesFailed",
        format!(
            "{} of {} cases failed: {}",
            failures.len(),
            texts.len(),
            shown.join("; ")
        ),
    ))
}

fn load_problem(error: LoadError) -> Problem {
    let reason = match &error {
        LoadError::WrongWorld { .. }
        | LoadError::ForbiddenImport { .. }
        | LoadError::Incompatible { .. }
        | LoadError::Link { .. } => "WorldMismatch",
        _ => "LoadFailed",
    };
    problem(reason, error.to_string())
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

/// Write what the controller holds for one policy into its status. The
/// decision counts are not part of it: only [`flush_counts`] writes them,
/// and only when they moved, so a controller that decided nothing for the
/// policy (one just started, a standby, another shard) never resets the
/// counts of the one that decides.
async fn write_status(loader: &Loader, policy: &ReconcilePolicy) -> Result<(), LoaderError> {
    let name = policy.name_any();
    let Some(entry) = loader.registry.get(&name) else {
        return Ok(());
    };
    let current = policy.status.clone().unwrap_or_default();
    let (status, reason, message) = match (&entry.active, &entry.problem) {
        (Some(active), None) => (
            "True",
            "Loaded",
            format!("{} decides", active.policy.display_name()),
        ),
        (Some(active), Some(problem)) => (
            "True",
            "CandidateRefused",
            format!(
                "{} decides; the new candidate was refused ({}): {}",
                active.policy.display_name(),
                problem.reason,
                problem.message
            ),
        ),
        (None, Some(problem)) => ("False", problem.reason, problem.message.clone()),
        (None, None) => ("False", "Loading", "loading the first version".to_string()),
    };
    let previous = current.conditions.iter().find(|c| c.type_ == "Ready");
    let since = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(k8s_openapi::jiff::Timestamp::now()),
    };
    let condition = Condition {
        type_: "Ready".to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.chars().take(4096).collect(),
        observed_generation: policy.meta().generation,
        last_transition_time: since,
    };
    let (loaded_name, version, digest, worlds) = match &entry.active {
        Some(active) => {
            let description = active.policy.description();
            let worlds = active.policy.worlds();
            let role = if worlds.layer { "layer" } else { "policy" };
            let mut names = Vec::new();
            if worlds.template {
                names.push(format!("template-{role}@{}", worlds.contract.version()));
            }
            if worlds.resource {
                names.push(format!("resource-{role}@{}", worlds.contract.version()));
            }
            (
                Some(description.name.clone()),
                Some(description.version.clone()),
                Some(format!("sha256:{}", active.policy.digest())),
                names,
            )
        }
        None => (None, None, None, Vec::new()),
    };
    let patch = serde_json::json!({
        "status": {
            "observedGeneration": policy.meta().generation,
            "conditions": [condition],
            "name": loaded_name,
            "version": version,
            "digest": digest,
            "worlds": worlds,
            "lastError": entry.problem.as_ref().map(|p| format!("{}: {}", p.reason, p.message)),
        }
    });
    let api: Api<ReconcilePolicy> = Api::all(loader.client.clone());
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| {
            LoaderError(format!(
                "status of ReconcilePolicy {name}: {}",
                crate::controller::describe_kube_error(&e)
            ))
        })
}

/// Write decision and disagreement counts into each policy's status when
/// they moved, every [`STATUS_FLUSH`].
async fn flush_counts(loader: Arc<Loader>, shutdown: CancellationToken) {
    let api: Api<ReconcilePolicy> = Api::all(loader.client.clone());
    let mut written: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut ticker = tokio::time::interval(STATUS_FLUSH);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        for entry in loader.registry.entries() {
            let counts = (
                entry
                    .counters
                    .decisions
                    .load(std::sync::atomic::Ordering::Relaxed),
                entry
                    .counters
                    .shadow_disagreements
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            // A process that decided nothing for a policy writes nothing
            // for it, so an idle controller (another shard, a standby)
            // never overwrites the counts of the one that decides.
            if written.get(&entry.name).unwrap_or(&(0, 0)) == &counts {
                continue;
            }
            let patch = serde_json::json!({"status": {"decisions": counts.0, "shadowDisagreements": counts.1}});
            match api
                .patch_status(&entry.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {
                    written.insert(entry.name.clone(), counts);
                }
                Err(error) => {
                    tracing::debug!(%error, policy = %entry.name, "decision counts not written")
                }
            }
        }
    }
}

/// The labels of every namespace, from a watch of their metadata (for
/// `namespaceSelector`), and a stream that ticks when labels change.
pub fn namespaces(
    client: &Client,
) -> (
    reflector::Store<PartialObjectMeta<Namespace>>,
    impl futures::Stream<Item = ()> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let stream = watcher(
        Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .touched_objects()
    .predicate_filter(predicates::labels, Default::default())
    .filter_map(|r| async move { r.ok().map(|_| ()) });
    (store, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::embedded;
    use serde_json::json;

    fn spec(value: serde_json::Value) -> ReconcilePolicySpec {
        serde_json::from_value(value).expect("spec")
    }

    fn refusal(value: serde_json::Value) -> String {
        match check_spec(&spec(value), "radwasm-system") {
            Ok(_) => "accepted".to_string(),
            Err(message) => message,
        }
    }

    #[test]
    fn a_spec_names_exactly_one_module_source_with_the_digests_it_needs() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for (value, expected) in [
            (
                json!({"module": {}}),
                "exactly one of builtin, configMap, oci and url; it names none",
            ),
            (
                json!({"module": {"builtin": "default", "url": "https://x/p.wasm"}}),
                "it names builtin, url",
            ),
            (
                json!({"module": {"url": "http://example.com/p.wasm", "sha256": "a".repeat(64)}}),
                "must be https",
            ),
            (
                json!({"module": {"url": "https://example.com/p.wasm"}}),
                "needs spec.module.sha256",
            ),
            (
                json!({"module": {"oci": "registry.example/p:v1"}}),
                "needs a digest",
            ),
            (
                json!({"module": {"oci": "registry.example/p@sha256:abc"}}),
                "is not sha256: followed by 64 hex digits",
            ),
            (
                json!({"module": {"oci": format!("registry.example/p@{digest}"), "digest": format!("sha256:{}", "b".repeat(64))}}),
                "but spec.module.digest says",
            ),
            (
                json!({"module": {"configMap": {"namespace": "team-a", "name": "p", "key": "k"}}}),
                "reads policy ConfigMaps in \"radwasm-system\" only",
            ),
            (
                json!({"module": {"builtin": "default"}, "cases": {"configMap": {"namespace": "team-a", "name": "c"}}}),
                "spec.cases.configMap.namespace",
            ),
            (
                json!({"module": {"builtin": "default", "sha256": "xyz"}}),
                "must be 64 hex digits",
            ),
            (
                json!({"module": {"builtin": "default"}, "objectSelector": {"matchExpressions": [{"key": "a", "operator": "Sideways"}]}}),
                "spec.objectSelector",
            ),
        ] {
            let got = refusal(value.clone());
            assert!(got.contains(expected), "{value}: {got}");
        }
        for value in [
            json!({"module": {"builtin": "default"}}),
            json!({"module": {"url": "http://127.0.0.1:8000/p.wasm", "sha256": "a".repeat(64)}}),
            json!({"module": {"oci": format!("registry.example/p@{digest}")}}),
            json!({"module": {"oci": "registry.example/p:v1", "digest": digest}}),
            json!({"module": {"configMap": {"namespace": "radwasm-system", "name": "p", "key": "k"}}}),
        ] {
            assert_eq!(refusal(value.clone()), "accepted", "{value}");
        }
    }

    #[test]
    fn every_case_must_pass_and_the_refusal_names_the_failing_ones() {
        let engine = PolicyEngine::new(crate::policy::Limits {
            concurrent_decisions: 2,
            ..Default::default()
        })
        .expect("engine");
        let policy = embedded::load_default(&engine).expect("default policy");
        let case = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../guests/default-policy/cases/template/01-new-template-gets-finalizer-and-deploys.json"
        ))
        .expect("case");
        let good = ("good.json".to_string(), case.clone());
        let bad = (
            "bad.json".to_string(),
            case.replace("app-abc123", "app-zzz"),
        );
        let junk = ("junk.json".to_string(), "{".to_string());
        assert!(run_cases(&policy, std::slice::from_ref(&good)).is_ok());
        let refused = run_cases(&policy, &[good, bad, junk]).expect_err("refused");
        assert_eq!(refused.reason, "CasesFailed");
        assert!(
            refused
                .message
                .starts_with("2 of 3 cases failed: bad.json: ")
                && refused.message.contains("junk.json: not a case file"),
            "{}",
            refused.message
        );
    }
}
