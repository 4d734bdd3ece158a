//! What the loader writes to a `ReconcilePolicy`'s status: the version in
//! charge, why a candidate was refused, and the decision counts, flushed
//! every [`super::STATUS_FLUSH`].

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::reconcile_policy::crd::ReconcilePolicy;
use crate::reconcile_policy::registry::{Active, Entry};

use super::{Loader, LoaderError, STATUS_FLUSH};

/// Write what the controller holds for one policy into its status. The
/// decision counts are not part of it: only [`flush_counts`] writes them,
/// and only when they moved, so a controller that decided nothing for the
/// policy (one just started, a standby, another shard) never resets the
/// counts of the one that decides.
pub(super) async fn write_status(
    loader: &Loader,
    policy: &ReconcilePolicy,
) -> Result<(), LoaderError> {
    let name = policy.name_any();
    let Some(entry) = loader.registry.get(&name) else {
        return Ok(());
    };
    let condition = ready_condition(policy, &entry);
    let (loaded_name, version, digest, worlds) = match &entry.active {
        Some(active) => {
            let description = active.policy.description();
            (
                Some(description.name.clone()),
                Some(description.version.clone()),
                Some(format!("sha256:{}", active.policy.digest())),
                world_names(active),
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
            "verified": entry.active.as_ref().and_then(|a| a.verified.as_ref()).map(|v| serde_json::json!({
                "reference": verified_reference(policy, &v.digest),
                "key": v.key,
            })),
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
                crate::kube_client::describe_kube_error(&e)
            ))
        })
}

/// The policy's `Ready` condition: which version decides, or why none
/// does; its transition time kept while its status stays.
fn ready_condition(policy: &ReconcilePolicy, entry: &Entry) -> Condition {
    let (status, reason, message) = match (&entry.active, &entry.problem) {
        (Some(active), None) => (
            "True",
            "Loaded",
            format!("{} decides", active.policy.display_name()),
        ),
        // A refusal for trust is loud: not Ready, with its own reason,
        // while the verified version keeps deciding.
        (Some(active), Some(problem)) if is_trust_refusal(policy, problem.reason) => (
            "False",
            problem.reason,
            format!(
                "{}; {}{} keeps deciding",
                problem.message,
                active.policy.display_name(),
                if active.verified.is_some() {
                    " (verified before)"
                } else {
                    ""
                }
            ),
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
    let current = policy.status.clone().unwrap_or_default();
    let previous = current.conditions.iter().find(|c| c.type_ == "Ready");
    let since = match previous {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(k8s_openapi::jiff::Timestamp::now()),
    };
    Condition {
        type_: "Ready".to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.chars().take(4096).collect(),
        observed_generation: policy.meta().generation,
        last_transition_time: since,
    }
}

/// The worlds the deciding version exports, as `status.worlds` names them
/// (`template-policy@…`, `resource-layer@…`).
fn world_names(active: &Active) -> Vec<String> {
    let worlds = active.policy.worlds();
    let role = if worlds.layer { "layer" } else { "policy" };
    let mut names = Vec::new();
    if worlds.template {
        names.push(format!("template-{role}@{}", worlds.contract.version()));
    }
    if worlds.resource {
        names.push(format!("resource-{role}@{}", worlds.contract.version()));
    }
    names
}

/// A refusal that makes the policy `Ready=False` even with a version
/// running: one for trust, and a digest mismatch of a verified policy.
fn is_trust_refusal(policy: &ReconcilePolicy, reason: &str) -> bool {
    (reason != "DigestMismatch" || policy.spec.verify.is_some())
        && crate::policy::trust::TRUST_REASONS.contains(&reason)
}

/// `registry/repository@digest` of the policy's module; for a ConfigMap
/// module, `ConfigMap NS/NAME key KEY@sha256:…` (the blob's digest).
fn verified_reference(policy: &ReconcilePolicy, digest: &str) -> String {
    if let Some(c) = &policy.spec.module.config_map {
        return format!(
            "ConfigMap {}/{} key {}@{digest}",
            c.namespace, c.name, c.key
        );
    }
    let reference = policy.spec.module.oci.as_deref().unwrap_or_default();
    let repository = match reference.rsplit_once('@') {
        Some((repository, _)) => repository,
        None => reference,
    };
    // Without the tag: a digest names the manifest alone.
    let repository = match repository.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => name,
        _ => repository,
    };
    format!("{repository}@{digest}")
}

/// Write decision and disagreement counts into each policy's status when
/// they moved, every [`STATUS_FLUSH`].
pub(super) async fn flush_counts(loader: Arc<Loader>, shutdown: CancellationToken) {
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
