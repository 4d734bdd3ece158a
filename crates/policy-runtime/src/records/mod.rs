//! Decision records: one JSON line per policy decision, with the exact
//! observation the policy saw and what it answered, so a surprising decision
//! in production can be replayed against another policy build
//! (`radwasm policy replay`) or turned into a fixture case
//! (`radwasm policy record-to-case`). The format is in
//! `docs/decision-records.md`.
//!
//! This file holds the record format: [`DecisionRecord`] and the types it
//! is made of, and how a record is made from a decision. The recorder that
//! writes records is in `recorder.rs`, the size-rotated files it writes to
//! in `files.rs`; both are re-exported here, so callers name everything as
//! `policy::records::...`.
//!
//! [`Recorder::record`] is called on the reconcile path and never waits for
//! the disk: it hands the record to a bounded queue drained by one background
//! thread, which serialises it, keeps the last N lines in memory (served on
//! `/debug/decisions`) and appends it to size-rotated files. When the queue
//! is full the record is dropped and counted.

use std::time::Duration;

use chrono::{DateTime, Utc};
use radwasm_policy_model as model;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Decision, DecisionError, LoadedPolicy};

mod files;
mod recorder;
#[cfg(test)]
mod tests;

pub use files::{FILE_EXTENSION, FILE_PREFIX, record_files_in};
pub use recorder::{DropLabels, QUEUE_CAPACITY, RecordCounters, Recorder, RecorderSettings};

/// The object kind a decision was taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordKind {
    DeploymentTemplate,
    DeploymentResource,
}

impl RecordKind {
    /// The kind as Kubernetes names it.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordKind::DeploymentTemplate => "DeploymentTemplate",
            RecordKind::DeploymentResource => "DeploymentResource",
        }
    }
}

/// Whether the decision was carried out (`enforce`) or only computed to
/// compare with the enforced one (`shadow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    Enforce,
    Shadow,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Enforce => "enforce",
            Role::Shadow => "shadow",
        }
    }
}

/// How the decision ended: a plan (`ok`) or no plan (`error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Ok,
    Error,
}

/// The policy build that decided, as in the objects' `status.policy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyIdentity {
    pub name: String,
    #[serde(default)]
    pub version: String,
    /// SHA-256 of the component bytes, hex.
    #[serde(default)]
    pub digest: String,
}

impl PolicyIdentity {
    pub fn of(policy: &LoadedPolicy) -> Self {
        Self {
            name: policy.description().name.clone(),
            version: policy.description().version.clone(),
            digest: policy.digest().to_string(),
        }
    }

    /// `name@version`, as shown in status and logs.
    pub fn display_name(&self) -> String {
        if self.version.is_empty() {
            self.name.clone()
        } else {
            format!("{}@{}", self.name, self.version)
        }
    }
}

/// Why a decision gave no plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedError {
    /// `DecisionError::reason()`: `PolicyError` when the policy refused to
    /// decide; `Trap`, `OutOfFuel`, `MemoryLimit`, `Instantiate` or
    /// `KindNotSupported` when the sandbox stopped it.
    pub reason: String,
    /// The policy's error code (`PolicyError` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The policy's message (`PolicyError`), or the whole error text.
    pub message: String,
}

impl From<&DecisionError> for RecordedError {
    fn from(error: &DecisionError) -> Self {
        match error {
            DecisionError::Policy { error, .. } => Self {
                reason: "PolicyError".to_string(),
                code: Some(error.code.clone()),
                message: error.message.clone(),
            },
            other => Self {
                reason: other.reason().to_string(),
                code: None,
                message: other.to_string(),
            },
        }
    }
}

impl RecordedError {
    /// True when the policy itself refused to decide (as opposed to the
    /// sandbox stopping it).
    pub fn is_policy_error(&self) -> bool {
        self.reason == "PolicyError"
    }

    /// One line: `PolicyError Invalid: message` or `OutOfFuel: message`.
    pub fn summary(&self) -> String {
        match &self.code {
            Some(code) => format!("{} {code}: {}", self.reason, self.message),
            None => format!("{}: {}", self.reason, self.message),
        }
    }
}

/// One policy decision: what was observed and what the policy answered.
/// Written as one JSON line, camelCase; `plan` and `error` are exclusive.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionRecord {
    /// When the decision finished (RFC 3339, UTC).
    pub at: DateTime<Utc>,
    pub kind: RecordKind,
    /// `namespace/name`.
    pub object: String,
    pub policy: PolicyIdentity,
    pub role: Role,
    /// The observation exactly as `radwasm policy run -o` and fixture cases
    /// take it: `{"deploymentTemplate": {...}}` or `{"deploymentResource": {...}}`.
    pub observation: model::Observation,
    /// The plan's actions, as a fixture case's `expect.actions` writes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<Vec<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
    /// For a layer that decided: the plan of every policy below it, bottom
    /// first (the built-in default, or its `ReconcilePolicy` base, first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below: Vec<RecordedLayer>,
    /// Time to instantiate the guest and decide, in microseconds.
    pub duration_us: u64,
    /// Fuel the decision used (0 when it failed before reporting any).
    pub fuel: u64,
    pub outcome: Outcome,
}

/// The plan one policy under a layer decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedLayer {
    /// `name@version` of that policy.
    pub policy: String,
    /// Its plan's actions, as in `plan`.
    pub plan: Vec<Value>,
}

/// An observation a record can be made of.
pub trait RecordedObservation {
    fn record_kind(&self) -> RecordKind;
    /// `namespace/name` of the object observed.
    fn object(&self) -> String;
    /// The tagged observation, as fixture files write it.
    fn to_observation(&self) -> model::Observation;
}

fn object_name(meta: &model::ObjectMeta) -> String {
    format!("{}/{}", meta.namespace, meta.name)
}

impl RecordedObservation for model::TemplateObservation {
    fn record_kind(&self) -> RecordKind {
        RecordKind::DeploymentTemplate
    }
    fn object(&self) -> String {
        object_name(&self.meta)
    }
    fn to_observation(&self) -> model::Observation {
        model::Observation::DeploymentTemplate(self.clone())
    }
}

impl RecordedObservation for model::ResourceObservation {
    fn record_kind(&self) -> RecordKind {
        RecordKind::DeploymentResource
    }
    fn object(&self) -> String {
        object_name(&self.meta)
    }
    fn to_observation(&self) -> model::Observation {
        model::Observation::DeploymentResource(self.clone())
    }
}

impl RecordedObservation for model::Observation {
    fn record_kind(&self) -> RecordKind {
        match self {
            model::Observation::DeploymentTemplate(_) => RecordKind::DeploymentTemplate,
            model::Observation::DeploymentResource(_) => RecordKind::DeploymentResource,
        }
    }
    fn object(&self) -> String {
        match self {
            model::Observation::DeploymentTemplate(o) => o.object(),
            model::Observation::DeploymentResource(o) => o.object(),
        }
    }
    fn to_observation(&self) -> model::Observation {
        self.clone()
    }
}

/// A plan (or a plan's action list) a record can be made of.
pub trait RecordedPlan {
    /// The actions as a fixture case's `expect.actions` writes them.
    fn actions_json(&self) -> Vec<Value>;
}

impl<A: Serialize> RecordedPlan for Vec<A> {
    fn actions_json(&self) -> Vec<Value> {
        self.iter()
            .map(|action| serde_json::to_value(action).unwrap_or(Value::Null))
            .collect()
    }
}

impl RecordedPlan for model::TemplatePlan {
    fn actions_json(&self) -> Vec<Value> {
        self.actions.actions_json()
    }
}

impl RecordedPlan for model::ResourcePlan {
    fn actions_json(&self) -> Vec<Value> {
        self.actions.actions_json()
    }
}

impl RecordedPlan for model::Plan {
    fn actions_json(&self) -> Vec<Value> {
        match self {
            model::Plan::DeploymentTemplate(plan) => plan.actions_json(),
            model::Plan::DeploymentResource(plan) => plan.actions_json(),
        }
    }
}

/// The name of an action's kind: `"addFinalizer"` for `"addFinalizer"`,
/// `"setStatus"` for `{"setStatus": {...}}`.
pub fn action_kind(action: &Value) -> String {
    match action {
        Value::String(name) => name.clone(),
        Value::Object(map) if map.len() == 1 => map.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}

impl DecisionRecord {
    /// A record of one decision that just finished, timestamped now.
    /// `took` is the time the decision took.
    pub fn new<O, P>(
        policy: &LoadedPolicy,
        role: Role,
        observation: &O,
        result: &Result<Decision<P>, DecisionError>,
        took: Duration,
    ) -> Self
    where
        O: RecordedObservation + ?Sized,
        P: RecordedPlan,
    {
        let below = match result {
            Ok(decision) => decision
                .below
                .iter()
                .map(|layer| RecordedLayer {
                    policy: layer.policy.clone(),
                    plan: layer.plan.actions_json(),
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let (plan, error, fuel, outcome) = match result {
            Ok(decision) => (
                Some(decision.plan.actions_json()),
                None,
                decision.fuel_used,
                Outcome::Ok,
            ),
            Err(error) => {
                let fuel = match error {
                    DecisionError::OutOfFuel { fuel, .. } => *fuel,
                    _ => 0,
                };
                (None, Some(RecordedError::from(error)), fuel, Outcome::Error)
            }
        };
        Self {
            at: Utc::now(),
            kind: observation.record_kind(),
            object: observation.object(),
            policy: PolicyIdentity::of(policy),
            role,
            observation: observation.to_observation(),
            plan,
            error,
            below,
            duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            fuel,
            outcome,
        }
    }

    /// Parse one line of a record file and check it is consistent (`kind`
    /// matches the observation, `outcome` matches `plan`/`error`).
    pub fn from_json_line(line: &str) -> Result<Self, String> {
        let record: DecisionRecord = serde_json::from_str(line)
            .map_err(|error| format!("not a decision record: {error}"))?;
        let observed = record.observation.record_kind();
        if observed != record.kind {
            return Err(format!(
                "kind is {} but the observation is a {}",
                record.kind.as_str(),
                observed.as_str()
            ));
        }
        match (record.outcome, &record.plan, &record.error) {
            (Outcome::Ok, Some(_), None) | (Outcome::Error, None, Some(_)) => Ok(record),
            (Outcome::Ok, _, _) => {
                Err("outcome is ok but the record has no plan, or an error too".into())
            }
            (Outcome::Error, _, _) => {
                Err("outcome is error but the record has no error, or a plan too".into())
            }
        }
    }

    /// The record as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        // Serialising these types cannot fail: every map key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What the policy answered: its actions, or why it gave none.
    pub fn answer(&self) -> Result<&[Value], &RecordedError> {
        match (&self.plan, &self.error) {
            (_, Some(error)) => Err(error),
            (Some(plan), None) => Ok(plan),
            (None, None) => Ok(&[]),
        }
    }
}
