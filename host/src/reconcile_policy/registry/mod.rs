//! Which policy decides for an object: the loaded versions of every
//! `ReconcilePolicy`, and the selection rule over them.
//!
//! Selection, for a `DeploymentTemplate` (a `DeploymentResource` takes its
//! owner template's):
//! 1. the annotation `radapp.io/policy: <ReconcilePolicy name>`, if present
//!    (whatever that policy's mode and selectors);
//! 2. else the `Enforce` policy with the highest `priority` whose
//!    `namespaceSelector` matches the namespace's labels and whose
//!    `objectSelector` matches the template's labels (ties: the name that
//!    sorts first);
//! 3. else the controller's `--policy`.
//!
//! A chosen policy whose module is a layer decides over its `spec.base`
//! (another `ReconcilePolicy`, itself possibly a layer) or, without one,
//! over the built-in default policy. The stack is put together at each
//! selection from the versions loaded then, so a new version of a base
//! takes effect for every layer above it at once.
//!
//! A policy chosen by 1 or 2 that has no loaded version yet makes the object
//! wait while its first version loads, and fails it (naming the policies
//! that are Ready) once that load was refused: nothing reaches Radius. A
//! refused *new* version leaves the loaded one in charge.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use kube::core::{Selector, SelectorExt};

use super::crd::{PolicyMode, PolicyModule, PolicyVerify, ReconcilePolicy};
use crate::policy::{LoadedPolicy, PolicySlot};

/// The annotation that names an object's policy.
pub const POLICY_ANNOTATION: &str = "radapp.io/policy";

/// Decisions taken by a policy, and how often a shadow disagreed.
#[derive(Debug, Default)]
pub struct Counters {
    pub decisions: AtomicU64,
    pub shadow_disagreements: AtomicU64,
}

/// A loaded version of a `ReconcilePolicy`'s module and what it was loaded
/// from: the same identity is not loaded twice.
#[derive(Clone)]
pub struct Active {
    pub policy: LoadedPolicy,
    /// Component digest, limits and cases it was checked with.
    pub identity: String,
    /// The signature check that let it in (with `spec.verify`).
    pub verified: Option<crate::policy::trust::Verified>,
}

/// Why the latest candidate of a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `InvalidSpec`, `FetchFailed`, `DigestMismatch`, `LoadFailed`,
    /// `BaseNotFound`, `BaseNotReady`, `BaseCycle`,
    /// `WorldMismatch`, `CasesFailed`, and the trust refusals
    /// ([`crate::policy::trust::TRUST_REASONS`]).
    pub reason: &'static str,
    pub message: String,
}

/// One `ReconcilePolicy` as the controller holds it.
#[derive(Clone)]
pub struct Entry {
    pub name: String,
    /// The spec generation taken in.
    pub generation: Option<i64>,
    pub mode: PolicyMode,
    pub priority: i32,
    /// `None`: matches every namespace.
    pub namespace_selector: Option<Selector>,
    /// `None`: matches every object.
    pub object_selector: Option<Selector>,
    /// The selectors do not parse: the policy matches nothing.
    pub invalid_selector: Option<String>,
    pub active: Option<Active>,
    /// `spec.base`: the policy a layer decides over (`None`: the built-in
    /// default).
    pub base: Option<String>,
    /// The latest candidate's refusal; cleared when a candidate loads.
    pub problem: Option<Problem>,
    /// What the loaded version was last verified under (with
    /// `spec.verify`): when the keys or annotations change, it is checked
    /// again ([`PolicyRegistry::retire`] stops it if it no longer verifies).
    pub verified_under: Option<TrustBasis>,
    pub counters: Arc<Counters>,
}

/// The spec a loaded version's signature was checked against: where the
/// module came from and what `spec.verify` asked.
#[derive(Clone, Debug, PartialEq)]
pub struct TrustBasis {
    pub module: PolicyModule,
    pub verify: PolicyVerify,
}

impl Entry {
    fn matches(&self, subject: &Subject<'_>) -> bool {
        if self.invalid_selector.is_some() {
            return false;
        }
        let empty = BTreeMap::new();
        self.namespace_selector
            .as_ref()
            .is_none_or(|s| s.matches(subject.namespace_labels.unwrap_or(&empty)))
            && self
                .object_selector
                .as_ref()
                .is_none_or(|s| s.matches(subject.labels))
    }

    /// `Ready` on its status: a version is loaded.
    pub fn is_ready(&self) -> bool {
        self.active.is_some()
    }
}

/// What selection looks at.
pub struct Subject<'a> {
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    /// The labels of the object's namespace (`None`: not known).
    pub namespace_labels: Option<&'a BTreeMap<String, String>>,
}

/// The policy that decides, and the shadows that watch.
#[derive(Clone)]
pub struct Chosen {
    pub policy: LoadedPolicy,
    /// The `ReconcilePolicy` it came from; `None` for `--policy`.
    pub reconcile_policy: Option<String>,
    pub counters: Option<Arc<Counters>>,
    pub shadows: Vec<Shadow>,
}

/// A `Shadow` policy that sees an observation after the enforcing one.
#[derive(Clone)]
pub struct Shadow {
    pub name: String,
    pub policy: LoadedPolicy,
    pub counters: Arc<Counters>,
}

/// The outcome of selection.
pub enum Selection {
    Decide(Chosen),
    /// The policies are not listed yet, or the chosen one is loading its
    /// first version: look again shortly.
    Wait(String),
    /// The object names (or its selectors choose) a policy that cannot
    /// decide: the object fails with this message.
    Refuse(String),
}

/// Every `ReconcilePolicy` the controller knows, and `--policy`.
pub struct PolicyRegistry {
    fallback: PolicySlot,
    entries: RwLock<BTreeMap<String, Entry>>,
    listed: AtomicBool,
    changes: tokio::sync::watch::Sender<u64>,
}

impl PolicyRegistry {
    pub fn new(fallback: PolicySlot) -> Self {
        Self {
            fallback,
            entries: RwLock::new(BTreeMap::new()),
            listed: AtomicBool::new(false),
            changes: tokio::sync::watch::Sender::new(0),
        }
    }

    /// A registry with no `ReconcilePolicy` objects, already listed: every
    /// object gets `--policy` (the CRD is not installed, or tests).
    pub fn fallback_only(fallback: PolicySlot) -> Self {
        let registry = Self::new(fallback);
        registry.set_listed();
        registry
    }

    /// The controller's `--policy`.
    pub fn fallback(&self) -> &PolicySlot {
        &self.fallback
    }

    /// The `ReconcilePolicy` objects have been listed once.
    pub fn set_listed(&self) {
        if !self.listed.swap(true, Ordering::SeqCst) {
            self.changed();
        }
    }

    pub fn is_listed(&self) -> bool {
        self.listed.load(Ordering::SeqCst)
    }

    /// Ticks whenever selection may give another answer.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Take in a `ReconcilePolicy`'s spec (selectors, mode, priority),
    /// keeping its loaded version.
    pub fn upsert(&self, object: &ReconcilePolicy) {
        let name = kube::ResourceExt::name_any(object);
        let spec = &object.spec;
        let parse =
            |selector: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
             field: &str| {
                selector
                    .clone()
                    .map(|s| Selector::try_from(s).map_err(|e| format!("spec.{field}: {e}")))
                    .transpose()
            };
        let namespace_selector = parse(&spec.namespace_selector, "namespaceSelector");
        let object_selector = parse(&spec.object_selector, "objectSelector");
        let invalid_selector = namespace_selector
            .as_ref()
            .err()
            .or(object_selector.as_ref().err())
            .cloned();
        let generation = object.metadata.generation;
        let mut entries = self.write();
        if entries
            .get(&name)
            .is_some_and(|e| e.generation == generation && generation.is_some())
        {
            // A status write, or a resync: nothing selection reads changed.
            return;
        }
        let previous = entries.remove(&name);
        let entry = Entry {
            name: name.clone(),
            generation,
            mode: spec.mode,
            priority: spec.priority,
            namespace_selector: namespace_selector.ok().flatten(),
            object_selector: object_selector.ok().flatten(),
            invalid_selector,
            active: previous.as_ref().and_then(|p| p.active.clone()),
            base: spec.base.clone(),
            problem: previous.as_ref().and_then(|p| p.problem.clone()),
            verified_under: previous.as_ref().and_then(|p| p.verified_under.clone()),
            counters: previous.map(|p| p.counters).unwrap_or_default(),
        };
        entries.insert(name, entry);
        drop(entries);
        self.changed();
    }

    /// The `ReconcilePolicy` was deleted: objects it decided for go back to
    /// selection.
    pub fn remove(&self, name: &str) {
        if self.write().remove(name).is_some() {
            self.changed();
        }
    }

    /// A candidate passed every check: it decides from now on. Decisions
    /// in flight finish on the version they started with (they hold it).
    pub fn activate(&self, name: &str, active: Active) {
        if let Some(entry) = self.write().get_mut(name) {
            entry.active = Some(active);
            entry.problem = None;
        }
        self.changed();
    }

    /// A candidate was refused; the loaded version (if any) stays.
    pub fn refuse(&self, name: &str, problem: Problem) {
        let mut entries = self.write();
        if let Some(entry) = entries.get_mut(name) {
            let first = entry.active.is_none() && entry.problem.is_none();
            entry.problem = Some(problem);
            drop(entries);
            if first {
                // Objects waiting for its first version now fail.
                self.changed();
            }
        }
    }

    /// The policy now asks for a signature check (`spec.verify`): a running
    /// version loaded without one stops deciding, so no object is decided
    /// by code nobody verified while its candidates are refused. True if
    /// one was stopped.
    pub fn retire_unverified(&self, name: &str) -> bool {
        let mut entries = self.write();
        let Some(entry) = entries.get_mut(name) else {
            return false;
        };
        if entry.active.as_ref().is_none_or(|a| a.verified.is_some()) {
            return false;
        }
        entry.active = None;
        drop(entries);
        self.changed();
        true
    }

    /// The loaded version of `name` verified under `basis` (just loaded,
    /// or checked again with the same verdict).
    pub fn verified_under(&self, name: &str, basis: Option<TrustBasis>) {
        if let Some(entry) = self.write().get_mut(name) {
            entry.verified_under = basis;
        }
    }

    /// The loaded version of `name` no longer verifies with the keys and
    /// annotations its policy trusts now (a key was removed): it stops
    /// deciding, so objects selecting the policy are decided by nothing
    /// until a version that verifies loads. True if one was stopped.
    pub fn retire(&self, name: &str) -> bool {
        let mut entries = self.write();
        let Some(entry) = entries.get_mut(name) else {
            return false;
        };
        if entry.active.take().is_none() {
            return false;
        }
        entry.verified_under = None;
        drop(entries);
        self.changed();
        true
    }

    /// A copy of one entry.
    pub fn get(&self, name: &str) -> Option<Entry> {
        self.read().get(name).cloned()
    }

    /// Copies of every entry, by name.
    pub fn entries(&self) -> Vec<Entry> {
        self.read().values().cloned().collect()
    }

    /// `--policy`, with no shadows (for a resource whose owner is gone).
    pub fn fallback_selection(&self) -> Selection {
        Selection::Decide(Chosen {
            policy: self.fallback.current(),
            reconcile_policy: None,
            counters: None,
            shadows: Vec::new(),
        })
    }

    /// Something outside the policies changed what selection sees (a
    /// namespace's labels).
    pub fn poke(&self) {
        self.changed();
    }

    /// Which policy decides for this object, and which shadows watch.
    pub fn select(&self, subject: &Subject<'_>) -> Selection {
        if !self.is_listed() {
            return Selection::Wait("the ReconcilePolicy objects are not listed yet".into());
        }
        let entries = self.read();
        // The annotation chooses among the policies whose selectors admit
        // the object: whoever can edit a template must not escape a
        // guardrail by naming a policy meant for others.
        if let Some(name) = subject.annotations.get(POLICY_ANNOTATION) {
            return match entries.get(name) {
                Some(entry) if entry.matches(subject) => {
                    let how = format!("named by {POLICY_ANNOTATION}");
                    chosen(&entries, subject, entry, &how)
                }
                Some(_) => Selection::Refuse(format!(
                    "annotation {POLICY_ANNOTATION} names ReconcilePolicy {name:?}, whose selectors do not admit this object (its labels, or its namespace's); policies that admit it: {}",
                    admitting_names(&entries, subject)
                )),
                None => Selection::Refuse(format!(
                    "annotation {POLICY_ANNOTATION} names ReconcilePolicy {name:?}, which does not exist; Ready policies: {}",
                    ready_names(&entries)
                )),
            };
        }
        let best = entries
            .values()
            .filter(|e| e.mode == PolicyMode::Enforce && e.matches(subject))
            // Highest priority first; on a tie the name sorting first.
            .min_by(|a, b| {
                b.priority
                    .cmp(&a.priority)
                    .then_with(|| a.name.cmp(&b.name))
            });
        match best {
            Some(entry) => {
                let how = format!("selected, priority {}", entry.priority);
                chosen(&entries, subject, entry, &how)
            }
            None => Selection::Decide(Chosen {
                policy: self.fallback.current(),
                reconcile_policy: None,
                counters: None,
                shadows: shadows(&entries, subject, None),
            }),
        }
    }

    /// The stack a layer named `name` would decide over if its base were
    /// `base`, from the versions loaded now: the loader runs a candidate's
    /// cases over it.
    pub fn base_stack(&self, name: &str, base: &str) -> Result<LoadedPolicy, Problem> {
        let entries = self.read();
        resolve_base(&entries, &mut vec![name.to_string()], base).map_err(BaseProblem::into_problem)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Entry>> {
        self.entries.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Entry>> {
        self.entries.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a layer's base cannot be put under it.
struct BaseProblem {
    reason: &'static str,
    message: String,
    /// The base was refused (not just loading its first version).
    refused: bool,
}

impl BaseProblem {
    fn into_problem(self) -> Problem {
        Problem {
            reason: self.reason,
            message: self.message,
        }
    }
}

/// What selection answers once `entry` is the policy for the object
/// (`subject`; `how`: named or selected): it decides, with the shadows
/// that watch, once its stack is loaded; else wait for it to load (or its
/// base to), or refuse with why it cannot decide.
fn chosen(
    entries: &BTreeMap<String, Entry>,
    subject: &Subject<'_>,
    entry: &Entry,
    how: &str,
) -> Selection {
    match (&entry.active, &entry.problem) {
        (Some(_), _) => match stacked(entries, entry) {
            Ok(policy) => Selection::Decide(Chosen {
                policy,
                reconcile_policy: Some(entry.name.clone()),
                counters: Some(entry.counters.clone()),
                shadows: shadows(entries, subject, Some(&entry.name)),
            }),
            Err(problem) if problem.reason == "BaseNotReady" && !problem.refused => {
                Selection::Wait(format!(
                    "ReconcilePolicy {} ({how}): {}",
                    entry.name, problem.message
                ))
            }
            Err(problem) => Selection::Refuse(format!(
                "ReconcilePolicy {} ({how}) cannot decide ({}: {}); Ready policies: {}",
                entry.name,
                problem.reason,
                problem.message,
                ready_names(entries)
            )),
        },
        (None, None) => Selection::Wait(format!(
            "ReconcilePolicy {} ({how}) is loading its first version",
            entry.name
        )),
        (None, Some(problem)) if waits_for_its_base(entries, entry, problem) => {
            Selection::Wait(format!(
                "ReconcilePolicy {} ({how}) waits for its base: {}",
                entry.name, problem.message
            ))
        }
        (None, Some(problem)) => Selection::Refuse(format!(
            "ReconcilePolicy {} ({how}) is not Ready ({}: {}); Ready policies: {}",
            entry.name,
            problem.reason,
            problem.message,
            ready_names(entries)
        )),
    }
}

/// The `Shadow` policies that watch the object (`subject`), but the one
/// enforcing for it; each with its stack, if that is loaded.
fn shadows(
    entries: &BTreeMap<String, Entry>,
    subject: &Subject<'_>,
    enforcing: Option<&str>,
) -> Vec<Shadow> {
    entries
        .values()
        .filter(|e| e.mode == PolicyMode::Shadow && Some(e.name.as_str()) != enforcing)
        .filter(|e| e.matches(subject))
        .filter_map(|e| {
            Some(Shadow {
                name: e.name.clone(),
                policy: stacked(entries, e).ok()?,
                counters: e.counters.clone(),
            })
        })
        .collect()
}

/// An entry's loaded version over its base (for a layer), down to a policy
/// that decides alone.
fn stacked(entries: &BTreeMap<String, Entry>, entry: &Entry) -> Result<LoadedPolicy, BaseProblem> {
    let Some(active) = &entry.active else {
        return Err(BaseProblem {
            reason: "BaseNotReady",
            message: format!("ReconcilePolicy {} has no loaded version", entry.name),
            refused: entry.problem.is_some(),
        });
    };
    match (&entry.base, active.policy.is_layer()) {
        (Some(base), true) => {
            let below = resolve_base(entries, &mut vec![entry.name.clone()], base)?;
            Ok(active.policy.on_base(below))
        }
        // A layer without spec.base keeps the built-in default it was
        // loaded over; a policy that decides alone has no base (the loader
        // refuses one with spec.base).
        _ => Ok(active.policy.clone()),
    }
}

/// A layer refused only because its base had no version yet, whose base
/// is now loaded or still loading its first version: it loads again with
/// the fetch backoff, so its objects wait rather than fail. A base that
/// was refused, is missing or leads to a cycle fails them.
fn waits_for_its_base(entries: &BTreeMap<String, Entry>, entry: &Entry, problem: &Problem) -> bool {
    let Some(base) = (problem.reason == "BaseNotReady")
        .then_some(entry.base.as_deref())
        .flatten()
    else {
        return false;
    };
    match resolve_base(entries, &mut vec![entry.name.clone()], base) {
        Ok(_) => true,
        Err(below) => below.reason == "BaseNotReady" && !below.refused,
    }
}

/// The stack under a layer: ReconcilePolicy `base`, over its own base, and
/// so on. `path` holds the layers above it, to tell a cycle.
fn resolve_base(
    entries: &BTreeMap<String, Entry>,
    path: &mut Vec<String>,
    base: &str,
) -> Result<LoadedPolicy, BaseProblem> {
    if path.iter().any(|name| name == base) {
        path.push(base.to_string());
        return Err(BaseProblem {
            reason: "BaseCycle",
            message: format!("spec.base leads back to itself: {}", path.join(" -> ")),
            refused: true,
        });
    }
    let Some(entry) = entries.get(base) else {
        return Err(BaseProblem {
            reason: "BaseNotFound",
            message: format!("spec.base names ReconcilePolicy {base:?}, which does not exist"),
            refused: true,
        });
    };
    let Some(active) = &entry.active else {
        let why = match &entry.problem {
            Some(problem) => format!("is not Ready ({}: {})", problem.reason, problem.message),
            None => "is loading its first version".to_string(),
        };
        return Err(BaseProblem {
            reason: "BaseNotReady",
            message: format!("its base, ReconcilePolicy {base}, {why}"),
            refused: entry.problem.is_some(),
        });
    };
    match (&entry.base, active.policy.is_layer()) {
        (Some(below), true) => {
            path.push(base.to_string());
            let under = resolve_base(entries, path, below)?;
            Ok(active.policy.on_base(under))
        }
        _ => Ok(active.policy.clone()),
    }
}

fn ready_names(entries: &BTreeMap<String, Entry>) -> String {
    listed(entries.values().filter(|e| e.is_ready()))
}

/// The policies whose selectors admit `subject`.
fn admitting_names(entries: &BTreeMap<String, Entry>, subject: &Subject<'_>) -> String {
    listed(entries.values().filter(|e| e.matches(subject)))
}

/// Names for a message: at most 20, then how many more; "none" if none.
fn listed<'a>(entries: impl Iterator<Item = &'a Entry>) -> String {
    let names: BTreeSet<&str> = entries.map(|e| e.name.as_str()).collect();
    const LISTED: usize = 20;
    let mut shown: Vec<&str> = names.iter().take(LISTED).copied().collect();
    let more = names.len().saturating_sub(LISTED);
    let more = (more > 0).then(|| format!("{more} more"));
    if let Some(more) = &more {
        shown.push(more);
    }
    if shown.is_empty() {
        "none".to_string()
    } else {
        shown.join(", ")
    }
}

#[cfg(test)]
mod tests;
