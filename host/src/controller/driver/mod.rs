//! The one reconcile path both kinds share, read top to bottom in
//! [`reconcile`]: wait out a cache that has not seen our last write, observe,
//! ask the policy (on the worker, or on the blocking pool if it needs more
//! fuel than a worker gives), check the plan against the guard rails, hold
//! back a Radius mutation that comes too soon after a failed one, carry the
//! plan out, requeue as it says. Each kind supplies what differs in
//! a [`Reconciled`] implementation (`template.rs`, `resource.rs`).

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use radwasm_policy_model as model;
use serde::Serialize;
use tracing::Instrument;

use super::guard::Violation;
use super::object::{Executed, PolicySubject, Reconciled, key};
use super::status::{Current, StatusPatch};
use super::worker_fuel::{Placement, Ran, WorkerFuel};
use super::{Caches, Context, Error, REJECTED_RETRY, RESYNC, execute, writes};
use crate::crd::PolicyRef;
use crate::metrics::{DecisionLabels, Metrics, PolicyLabels};
use crate::policy::records::{DecisionRecord, RecordedObservation, Recorder, Role};
use crate::policy::{Decision, DecisionError, LoadedPolicy, LogLevel};
use crate::reconcile_policy::{Chosen, Selection, Shadow, Subject};

/// Look again this soon when the cache has not yet seen our own last write.
pub const STALE_CACHE_RECHECK: Duration = Duration::from_millis(100);
/// Look again this soon when a deletion waits for others to go first.
pub const DELETION_ORDER_RECHECK: Duration = Duration::from_secs(1);
/// Look again this soon when the object's policy is loading its first version.
pub const POLICY_LOADING_RECHECK: Duration = Duration::from_secs(1);

/// What a user changes about an object, as opposed to what the controller
/// writes: pacing of Radius mutations is lifted when this moves.
fn fingerprint<K: Resource>(object: &K) -> u64 {
    let meta = object.meta();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    meta.generation.hash(&mut hasher);
    meta.deletion_timestamp.is_some().hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    // Not the annotation the controller keeps its deployment records in.
    meta.annotations
        .as_ref()
        .map(|annotations| {
            annotations
                .iter()
                .filter(|(name, _)| name.as_str() != super::deployment_records::ANNOTATION)
                .collect::<Vec<_>>()
        })
        .hash(&mut hasher);
    hasher.finish()
}

/// Reconcile one object (`crate::runner::run_queue` calls this when its turn comes,
/// after `waited` for a slot): one span per reconcile, metrics by kind and
/// outcome. Answers when to look at the object again: as the plan says, or
/// after a failed reconcile, 1 s doubling to 60 s per object.
pub async fn reconcile<K: Reconciled>(
    object: Arc<K>,
    waited: Duration,
    ctx: Arc<Context>,
) -> Duration {
    ctx.metrics.observe_reconcile_wait(K::KIND, waited);
    let key = key(&*object);
    let span = tracing::info_span!(
        "reconcile",
        kind = K::KIND,
        object = %format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any()),
        generation = object.meta().generation.unwrap_or_default(),
        policy = tracing::field::Empty,
    );
    let started = Instant::now();
    let result = decide_and_execute(&*object, &ctx, &key)
        .instrument(span)
        .await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(_) => "error",
    };
    ctx.metrics
        .observe_reconcile(K::KIND, outcome, started.elapsed());
    let requeue = match result {
        Ok(requeue) => {
            ctx.memory.errors.succeeded(&key);
            requeue
        }
        Err(error) => {
            let delay = ctx.memory.errors.next_delay(&key);
            if error.is_transient() {
                tracing::info!(kind = K::KIND, object = %key, error = %error.display(), delay_ms = millis(delay), "reconcile failed; retrying");
            } else {
                tracing::warn!(kind = K::KIND, object = %key, error = %error.display(), delay_ms = millis(delay), "reconcile failed; retrying");
            }
            delay
        }
    };
    ctx.metrics.set_remembered_objects(ctx.memory.len());
    requeue
}

/// The reconcile path as its steps: catch up the caches, choose the policy,
/// observe, skip inputs already settled, decide, check the plan, hold back
/// a Radius mutation that must wait, carry the plan out (and show it to the
/// shadows), and remember how it went. Any step may end the reconcile early
/// with when to look again.
async fn decide_and_execute<K: Reconciled>(
    object: &K,
    ctx: &Context,
    key: &str,
) -> Result<Duration, Error> {
    let Some(caches) = caught_up_caches(object, ctx, key)? else {
        return Ok(STALE_CACHE_RECHECK);
    };
    let chosen = match select(object, ctx, caches) {
        Selection::Decide(chosen) => chosen,
        Selection::Wait(why) => {
            tracing::debug!("{why}");
            return Ok(POLICY_LOADING_RECHECK);
        }
        Selection::Refuse(message) => {
            return fail(ctx, object, key, None, Failure::NoPolicy(message)).await;
        }
    };
    let policy_ref = execute::policy_ref(&chosen.policy, chosen.reconcile_policy.clone());
    let observation = object.observe(ctx).await?;
    tracing::Span::current().record("policy", chosen.policy.display_name());
    let settled = object.settled_inputs(ctx, &observation, chosen.policy.digest());
    if let Some(requeue) = settled_recheck(object, ctx, key, settled) {
        return Ok(requeue);
    }
    let saw_failure = saw_failed_operation::<K>(&observation);

    let (decision, observation) = match decide_enforcing::<K>(ctx, &chosen, observation).await {
        Ok(decided) => decided,
        Err(failure) => return fail(ctx, object, key, Some(&policy_ref), failure).await,
    };
    log_guest(&decision);
    if let Err(violation) = K::guard(&observation, &decision.plan) {
        let failure = Failure::Plan(violation);
        return fail(ctx, object, key, Some(&policy_ref), failure).await;
    }

    let fingerprint = fingerprint(object);
    let mutates = decision.plan.iter().any(K::mutates_radius);
    if mutates && let Some(wait) = mutation_held_back(object, ctx, key, fingerprint) {
        return Ok(wait);
    }

    let executed = object
        .execute(ctx, &policy_ref, &observation, &decision.plan)
        .await;
    // Shadows see the observation the enforcing policy saw, after the
    // enforcing plan was carried out, off the reconcile's own path.
    if !chosen.shadows.is_empty() {
        shadow::<K>(ctx, key, &chosen, observation, decision.plan);
    }
    let executed = match executed {
        Err(Error::Conflict(message)) => {
            let failure = Failure::Conflict(message);
            return fail(ctx, object, key, Some(&policy_ref), failure).await;
        }
        other => other?,
    };
    let requeue = requeue_after(object, ctx, &executed);
    if saw_failure || executed.mutation_failed {
        ctx.memory.pacing.pace(key, requeue, fingerprint);
    }
    let left_nothing = executed.requeue_ms.is_none() && !mutates;
    ctx.memory
        .settled
        .settled(key, settled.filter(|_| left_nothing));
    Ok(requeue)
}

/// The caches to decide on, or `None` while they lag behind what the
/// object needs (look again after [`STALE_CACHE_RECHECK`]).
fn caught_up_caches<'c, K: Reconciled>(
    object: &K,
    ctx: &'c Context,
    key: &str,
) -> Result<Option<&'c Caches>, Error> {
    if ctx
        .memory
        .versions
        .is_stale(key, object.meta().resource_version.as_deref())
    {
        // Deciding on a view from before our own last write would repeat
        // that write's effects; the watch brings the write shortly.
        return Ok(None);
    }
    // Never on a cache that has not been listed yet, nor one that lacks a
    // child this object just created: either would make its children look
    // fewer than they are.
    let Some(caches) = ctx.synced_caches()? else {
        return Ok(None);
    };
    let namespace = object.namespace().unwrap_or_default();
    let in_cache = |name: &str| {
        caches
            .resources
            .get(&ObjectRef::new(name).within(&namespace))
            .is_some()
    };
    if ctx.memory.expectations.awaits_created(key, in_cache) {
        return Ok(None);
    }
    Ok(Some(caches))
}

/// When to look again, if the object was woken with nothing new (a drift
/// check that found what status says, or the periodic resync): the last
/// decision on these `settled` inputs left nothing to do, and would again.
/// `None` if it must be decided.
fn settled_recheck<K: Reconciled>(
    object: &K,
    ctx: &Context,
    key: &str,
    settled: Option<u64>,
) -> Option<Duration> {
    let inputs = settled?;
    ctx.memory.settled.is_settled_on(key, inputs).then(|| {
        object
            .next_check(ctx)
            .map_or(RESYNC, |check| RESYNC.min(check))
    })
}

/// True if the observation reports an operation that failed or was
/// canceled, or a refused request.
fn saw_failed_operation<K: Reconciled>(observation: &K::Observation) -> bool {
    K::operation(observation).is_some_and(|op| {
        matches!(
            op.result,
            model::OperationResult::Failed(_) | model::OperationResult::Canceled
        )
    })
}

/// Ask the enforcing policy for a plan ([`decide`]), keep its decision
/// record and metrics, and count it on its `ReconcilePolicy`. Gives back
/// the decision with the observation it was made on, or why the object
/// fails: the guest could not decide, or the decision task panicked.
async fn decide_enforcing<K: Reconciled>(
    ctx: &Context,
    chosen: &Chosen,
    observation: K::Observation,
) -> Result<(Decision<Vec<K::Action>>, K::Observation), Failure> {
    let policy = &chosen.policy;
    let decided = decide(policy, observation, K::ask, &ctx.worker_fuel, &ctx.metrics).await;
    let Decided {
        decision,
        observation,
        took,
        ran,
    } = decided.map_err(|panicked| {
        Failure::Decision(DecisionError::Trap {
            policy: policy.display_name(),
            detail: format!("the decision task failed: {panicked}"),
        })
    })?;
    tracing::debug!(?ran, took_ms = took.as_secs_f64() * 1e3, "decided");
    record(
        &ctx.decision_records,
        policy,
        Role::Enforce,
        &observation,
        &decision,
        took,
    );
    let outcome = if decision.is_ok() { "ok" } else { "error" };
    ctx.metrics.observe_decision(
        DecisionLabels::new(K::KIND, policy, outcome),
        took,
        decision.as_ref().map(|d| d.fuel_used).unwrap_or(0),
    );
    if let Some(counters) = &chosen.counters {
        counters
            .decisions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    match decision {
        Ok(decision) => Ok((decision, observation)),
        Err(error) => Err(Failure::Decision(error)),
    }
}

/// How long a plan that mutates Radius must wait before it is carried out,
/// if it must: after a failed mutation, or for the order of deletions.
fn mutation_held_back<K: Reconciled>(
    object: &K,
    ctx: &Context,
    key: &str,
    fingerprint: u64,
) -> Option<Duration> {
    if let Some(wait) = ctx.memory.pacing.mutation_wait(key, fingerprint) {
        // A failed Radius mutation is not repeated before the delay its
        // policy asked for, whatever woke this object early.
        tracing::debug!(
            wait_ms = millis(wait),
            "Radius mutation held back after a failed attempt"
        );
        ctx.metrics.count_paced(K::KIND);
        return Some(wait);
    }
    if let Some(why) = object.held_back(ctx) {
        // The order of deletions holds whoever started them and whatever
        // the policy decided: looked at again until what it waits for is
        // gone (each deletion also wakes the owner's objects).
        tracing::debug!(%why, "Radius mutation held back for the deletion order");
        ctx.metrics.count_held_for_order(K::KIND);
        return Some(DELETION_ORDER_RECHECK);
    }
    None
}

/// When to look again after the plan was carried out: as the plan says
/// (else after [`RESYNC`]), or sooner if a check is due.
fn requeue_after<K: Reconciled>(object: &K, ctx: &Context, executed: &Executed) -> Duration {
    let requeue = executed
        .requeue_ms
        .map_or(RESYNC, |ms| Duration::from_millis(u64::from(ms)));
    object
        .next_check(ctx)
        .map_or(requeue, |check| requeue.min(check))
}

/// True if the policy that would decide for the object now is not the one
/// its status names (by `ReconcilePolicy` and digest): a swap, a new or
/// deleted policy, or changed selectors moved it.
pub fn policy_moved<K: Reconciled>(object: &K, ctx: &Context, caches: &Caches) -> bool {
    let selected = match select(object, ctx, caches) {
        Selection::Decide(chosen) => {
            Some((chosen.reconcile_policy, chosen.policy.digest().to_string()))
        }
        Selection::Wait(_) | Selection::Refuse(_) => None,
    };
    let recorded = object
        .status_policy()
        .map(|p| (p.reconcile_policy.clone(), p.digest.clone()));
    selected != recorded
}

/// Choose the policy for an object (`reconcile_policy::registry`).
fn select<K: Reconciled>(object: &K, ctx: &Context, caches: &Caches) -> Selection {
    let subject = object.policy_subject(caches);
    let meta = match &subject {
        PolicySubject::Meta(meta) => *meta,
        PolicySubject::Owner(template) => &template.metadata,
        PolicySubject::Orphan => return ctx.policies.fallback_selection(),
    };
    let empty = std::collections::BTreeMap::new();
    let namespace = meta.namespace.as_deref().unwrap_or_default();
    let Some(namespace_labels) = ctx.namespace_labels(namespace) else {
        return Selection::Wait("the namespaces are not listed yet".into());
    };
    ctx.policies.select(&Subject {
        labels: meta.labels.as_ref().unwrap_or(&empty),
        annotations: meta.annotations.as_ref().unwrap_or(&empty),
        namespace_labels: namespace_labels.as_ref(),
    })
}

/// Run each shadow policy on the observation the enforcing policy decided
/// on, on the blocking pool and detached from the reconcile: compare plans,
/// count disagreements. A shadow that fails to decide is counted as a
/// failed shadow decision and never touches the object.
fn shadow<K: Reconciled>(
    ctx: &Context,
    key: &str,
    chosen: &Chosen,
    observation: K::Observation,
    enforced: Vec<K::Action>,
) {
    let shadows: Vec<Shadow> = chosen.shadows.clone();
    let enforcing = chosen
        .reconcile_policy
        .clone()
        .unwrap_or_else(|| "--policy".to_string());
    let metrics = ctx.metrics.clone();
    let records = ctx.decision_records.clone();
    let key = key.to_string();
    tokio::task::spawn_blocking(move || {
        for shadow in shadows {
            let started = Instant::now();
            let decision = K::ask(&shadow.policy, &observation);
            record(
                &records,
                &shadow.policy,
                Role::Shadow,
                &observation,
                &decision,
                started.elapsed(),
            );
            let outcome = match decision {
                Ok(decision) if decision.plan == enforced => "agreed",
                Ok(_) => {
                    shadow
                        .counters
                        .shadow_disagreements
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::info!(object = %key, shadow = %shadow.name, enforcing = %enforcing, "shadow policy disagrees with the enforcing plan");
                    "disagreed"
                }
                Err(error) => {
                    tracing::debug!(object = %key, shadow = %shadow.name, %error, "shadow policy could not decide");
                    "failed"
                }
            };
            shadow
                .counters
                .decisions
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            metrics.count_shadow(K::KIND, &enforcing, &shadow.name, outcome);
        }
    });
}

/// Keep a decision record, if records are kept (`docs/decision-records.md`).
fn record<O: RecordedObservation, A: Serialize>(
    records: &Recorder,
    policy: &LoadedPolicy,
    role: Role,
    observation: &O,
    decision: &Result<Decision<Vec<A>>, DecisionError>,
    took: Duration,
) {
    if records.is_enabled() {
        records.record(DecisionRecord::new(
            policy,
            role,
            observation,
            decision,
            took,
        ));
    }
}

fn log_guest<P>(decision: &Decision<P>) {
    for log in &decision.logs {
        match log.level {
            LogLevel::Trace => tracing::trace!(target: "guest", "{}", log.message),
            LogLevel::Debug => tracing::debug!(target: "guest", "{}", log.message),
            LogLevel::Info => tracing::info!(target: "guest", "{}", log.message),
            LogLevel::Warn => tracing::warn!(target: "guest", "{}", log.message),
            LogLevel::Error => tracing::error!(target: "guest", "{}", log.message),
        }
    }
    if decision.dropped_logs > 0 {
        tracing::debug!(
            dropped = decision.dropped_logs,
            "guest log messages over the cap"
        );
    }
}

/// Ask the guest. A decision is short, and handing it to another thread and
/// back costs more than deciding, so it runs where the reconcile runs, on
/// an async worker, with a slice of its fuel learned from the policy's
/// recent decisions (`worker_fuel.rs`): a worker is held that long at most.
/// A guest that needs more is stopped there and asked again from the start
/// on the blocking pool with its whole budget (a guest is a pure function
/// of its observation, so it decides the same; it may burn that budget
/// without stalling the watches), and counted in
/// `radwasm_policy_decision_reruns_total`; its next decisions get a slice
/// that fits, or, past the ceiling, start on the blocking pool. A guest
/// that imports WASI always decides on the blocking pool: WASI's
/// synchronous host calls (a trapping Rust guest writes its panic message
/// to stderr) block on the runtime, which tokio only allows outside its
/// workers. Gives back the observation for the guard rails, how long the
/// decision took and where it ran; an error only if the decision task
/// itself panicked (a host bug), which fails this one object.
async fn decide<O, P>(
    policy: &LoadedPolicy,
    observation: O,
    ask: fn(&LoadedPolicy, &O) -> Result<Decision<P>, DecisionError>,
    fuel: &WorkerFuel,
    metrics: &Metrics,
) -> Result<Decided<O, P>, tokio::task::JoinError>
where
    O: Send + 'static,
    P: Send + 'static,
{
    let started = Instant::now();
    let budget = policy.limits().fuel;
    let learns = !policy.uses_wasi();
    let mut ran = Ran::Blocking;
    if learns && let Placement::Worker(slice) = fuel.placement(policy.digest(), budget) {
        let decision = ask(&policy.with_fuel(slice), &observation);
        let needs_more = matches!(decision, Err(DecisionError::OutOfFuel { .. })) && budget > slice;
        if !needs_more {
            if let Ok(decided) = &decision {
                fuel.learn(policy.digest(), decided.fuel_used);
            }
            return Ok(Decided {
                decision,
                observation,
                took: started.elapsed(),
                ran: Ran::Worker,
            });
        }
        tracing::debug!(
            policy = %policy.display_name(),
            slice,
            "the decision needs more fuel than its worker slice; deciding again on the blocking pool"
        );
        metrics.count_decision_rerun(PolicyLabels::new(policy));
        ran = Ran::Rerun;
    }
    let guest = policy.clone();
    let (decision, observation) = tokio::task::spawn_blocking(move || {
        let decision = ask(&guest, &observation);
        (decision, observation)
    })
    .await?;
    if learns {
        match &decision {
            Ok(decided) => fuel.learn(policy.digest(), decided.fuel_used),
            Err(DecisionError::OutOfFuel { .. }) => fuel.learn(policy.digest(), budget),
            Err(_) => {}
        }
    }
    Ok(Decided {
        decision,
        observation,
        took: started.elapsed(),
        ran,
    })
}

/// A decision with the observation it was made on, how long it took and
/// where it ran.
struct Decided<O, P> {
    decision: Result<Decision<P>, DecisionError>,
    observation: O,
    took: Duration,
    ran: Ran,
}

/// Why a reconcile ends with the object `Failed` and nothing more done.
enum Failure {
    /// The guest trapped, ran out of fuel or memory, or refused to decide.
    Decision(DecisionError),
    /// The guard rails refused the plan.
    Plan(Violation),
    /// No policy may decide: the one the object names (or its selectors
    /// choose) does not exist or is not Ready.
    NoPolicy(String),
    /// Carrying the plan out would take over what another object owns.
    Conflict(String),
}

/// The decision failed, its plan was refused, or carrying it out would take
/// over what another object owns: the object goes `Failed` with the reason,
/// nothing else is done, and it is looked at again later (the same
/// observation gives the same answer, so not sooner).
async fn fail<K: Reconciled>(
    ctx: &Context,
    object: &K,
    key: &str,
    policy: Option<&PolicyRef>,
    failure: Failure,
) -> Result<Duration, Error> {
    let name = policy.map(display_name).unwrap_or_default();
    let (reason, label, message) = match failure {
        // The error names the policy (or the layer) and what went wrong.
        Failure::Decision(error) => ("PolicyFailed", error.reason(), error.to_string()),
        Failure::Plan(violation) => (
            "PlanRejected",
            "PlanRejected",
            format!("policy {name} returned a rejected plan: {violation}"),
        ),
        Failure::NoPolicy(message) => ("PolicyNotReady", "PolicyNotReady", message),
        Failure::Conflict(message) => ("ResourceConflict", "ResourceConflict", message),
    };
    tracing::warn!(reason = label, "{message}");
    ctx.metrics.count_decision_failure(K::KIND, label);
    let news = object.status_parts().1 != Some(message.as_str());
    let mut patch = StatusPatch::failure(&Current::of(object), reason, &message);
    // Cleared when no policy decided (the object names none that is Ready).
    patch.policy = Some(policy.cloned());
    writes::write_status(ctx, object, key, &patch).await?;
    if news {
        let event = model::Event {
            event_type: model::EventType::Warning,
            reason: reason.to_string(),
            message,
        };
        execute::emit(ctx, object, &event).await;
    }
    Ok(REJECTED_RETRY)
}

/// A delay as whole milliseconds, for a log field (a number, not Rust's
/// `Debug` text of a `Duration`).
fn millis(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

/// `name@version` of a policy reference, as logs and messages show it.
fn display_name(policy: &PolicyRef) -> String {
    if policy.version.is_empty() {
        policy.name.clone()
    } else {
        format!("{}@{}", policy.name, policy.version)
    }
}

#[cfg(test)]
mod tests;
