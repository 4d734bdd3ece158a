//! What the simulated Radius knows: resource groups, resources, deployments
//! and long-running operations, plus the request counters tests assert on.
//!
//! Operations complete lazily: every read first calls [`Store::advance`],
//! which finishes the operations whose time has come, in due order. So
//! nothing runs in the background and every observer sees the same history.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::arm::EvaluatedResource;
use crate::error::{ArmError, codes};
use crate::faults::FaultCounts;
use crate::ids;

/// Counters and sizes, for tests and `GET /_sim/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Requests to the Radius API (not `/_sim/`), including faulted ones.
    pub requests: u64,
    /// Deployment PUTs that reached the deployment endpoint (after faults).
    pub deployment_puts: u64,
    /// The same, per deployment name as given in the URL.
    pub deployment_puts_by_name: BTreeMap<String, u64>,
    /// Resource DELETEs that reached the resource endpoint (any answer).
    pub deletes: u64,
    /// The same, per lower-cased resource id.
    pub deletes_by_id: BTreeMap<String, u64>,
    /// Lower-cased ids of DELETEs, in the order they arrived (to check the
    /// order a controller deletes in).
    pub deleted: Vec<String>,
    pub deployments_succeeded: u64,
    pub deployments_failed: u64,
    pub deployments_canceled: u64,
    /// Resources stored now.
    pub resources: usize,
    pub resource_groups: usize,
    pub operations_in_progress: usize,
    /// How often each injected fault fired.
    pub faults: FaultCounts,
}

impl Stats {
    /// Deployment PUTs for one deployment name.
    pub fn deployment_puts_for(&self, name: &str) -> u64 {
        self.deployment_puts_by_name.get(name).copied().unwrap_or(0)
    }

    /// Deployment PUTs of every deployment named `{template}-…`: a
    /// template's, under the default policy's naming.
    pub fn deployment_puts_of_template(&self, template: &str) -> u64 {
        let prefix = format!("{template}-");
        self.deployment_puts_by_name
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(_, count)| count)
            .sum()
    }

    /// DELETEs of one resource id (compared case-insensitively).
    pub fn deletes_for(&self, id: &str) -> u64 {
        self.deletes_by_id.get(&ids::key(id)).copied().unwrap_or(0)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ResourceGroup {
    pub id: String,
    pub name: String,
    pub location: String,
    pub tags: Option<Value>,
}

impl ResourceGroup {
    pub fn body(&self) -> Value {
        let mut body = json!({
            "id": self.id,
            "name": self.name,
            "type": "System.Resources/resourceGroups",
            "location": self.location,
            "properties": {},
        });
        if let Some(tags) = &self.tags {
            body["tags"] = tags.clone();
        }
        body
    }
}

#[derive(Debug, Clone)]
pub(crate) struct StoredResource {
    /// The body a GET answers with.
    pub body: Value,
    /// The delete operation in progress, if any.
    pub deleting: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum DeploymentState {
    Running,
    Succeeded,
    Failed(ArmError),
    Canceled,
}

#[derive(Debug, Clone)]
pub(crate) struct Deployment {
    pub id: String,
    pub name: String,
    pub state: DeploymentState,
    /// The operation of the latest run.
    pub operation: String,
    pub parameters: Value,
    pub timestamp: DateTime<Utc>,
    pub correlation_id: String,
    /// What the run creates, in order (existing resources included, flagged).
    pub planned: Vec<EvaluatedResource>,
    pub outputs: Map<String, Value>,
    pub output_resources: Vec<String>,
    /// Decided when accepted: the run ends `Failed` with this error.
    pub pending_failure: Option<ArmError>,
}

impl Deployment {
    /// The body of GET, and of the PUT answer when `accepted`.
    pub fn body(&self, accepted: bool) -> Value {
        let state = match (&self.state, accepted) {
            (_, true) => "Accepted",
            (DeploymentState::Running, false) => "Running",
            (DeploymentState::Succeeded, _) => "Succeeded",
            (DeploymentState::Failed(_), _) => "Failed",
            (DeploymentState::Canceled, _) => "Canceled",
        };
        let mut properties = json!({
            "provisioningState": state,
            "mode": "Incremental",
            "timestamp": self.timestamp.to_rfc3339(),
            "correlationId": self.correlation_id,
            "parameters": self.parameters,
        });
        match &self.state {
            DeploymentState::Succeeded if !accepted => {
                properties["outputResources"] = Value::Array(
                    self.output_resources
                        .iter()
                        .map(|id| json!({ "id": id }))
                        .collect(),
                );
                properties["outputs"] = Value::Object(self.outputs.clone());
            }
            DeploymentState::Failed(error) if !accepted => {
                properties["error"] = serde_json::to_value(error).unwrap_or(Value::Null);
            }
            _ => {}
        }
        json!({
            "id": self.id,
            "name": self.name,
            "type": "Microsoft.Resources/deployments",
            "properties": properties,
        })
    }

    pub fn is_running(&self) -> bool {
        self.state == DeploymentState::Running
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OperationKind {
    /// Runs the deployment stored under this key.
    Deployment { key: String },
    /// Deletes the resource stored under this key, or ends with `failure`
    /// and leaves it.
    Delete {
        key: String,
        failure: Option<ArmError>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OperationStatus {
    InProgress,
    Succeeded,
    Failed(ArmError),
    Canceled,
}

impl OperationStatus {
    pub fn name(&self) -> &'static str {
        match self {
            OperationStatus::InProgress => "InProgress",
            OperationStatus::Succeeded => "Succeeded",
            OperationStatus::Failed(_) => "Failed",
            OperationStatus::Canceled => "Canceled",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Operation {
    pub id: String,
    pub kind: OperationKind,
    pub status: OperationStatus,
    /// Where its URLs live: `/planes/radius/local`, `Microsoft.Resources`.
    pub plane: String,
    pub namespace: String,
    pub api_version: String,
    /// The resource the operation acts on.
    pub target_id: String,
    pub start: DateTime<Utc>,
    pub due: Instant,
    pub end: DateTime<Utc>,
    /// Its URLs answer 404 (fault injection).
    pub vanished: bool,
    /// Ended by the deployment engine's task (`engine.rs`), not by time.
    pub engine: bool,
}

impl Operation {
    /// The path of its status resource (`.../operationStatuses/{id}`).
    pub fn path(&self, which: &str) -> String {
        format!(
            "{}/providers/{}/locations/global/{which}/{}",
            self.plane, self.namespace, self.id
        )
    }

    /// The operation status body.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "id": self.path("operationStatuses"),
            "name": self.id,
            "resourceId": self.target_id,
            "status": self.status.name(),
            "startTime": self.start.to_rfc3339(),
        });
        if self.status != OperationStatus::InProgress {
            body["endTime"] = json!(self.end.to_rfc3339());
        }
        if let OperationStatus::Failed(error) = &self.status {
            body["error"] = serde_json::to_value(error).unwrap_or(Value::Null);
        }
        body
    }
}

#[derive(Debug, Default)]
pub(crate) struct Store {
    pub groups: BTreeMap<String, ResourceGroup>,
    pub resources: BTreeMap<String, StoredResource>,
    pub deployments: BTreeMap<String, Deployment>,
    pub operations: HashMap<String, Operation>,
    pub stats: Stats,
}

impl Store {
    /// Finish every operation due by `now`, in due order.
    pub fn advance(&mut self, now: Instant) {
        let mut due: Vec<(Instant, String)> = self
            .operations
            .values()
            .filter(|op| op.status == OperationStatus::InProgress && !op.engine && op.due <= now)
            .map(|op| (op.due, op.id.clone()))
            .collect();
        due.sort();
        for (_, id) in due {
            self.complete(&id);
        }
    }

    fn complete(&mut self, operation: &str) {
        let Some(op) = self.operations.get(operation) else {
            return;
        };
        let status = match op.kind.clone() {
            OperationKind::Deployment { key } => self.finish_deployment(&key, op.end),
            OperationKind::Delete { key, failure } => {
                let ours = self
                    .resources
                    .get(&key)
                    .is_some_and(|r| r.deleting.as_deref() == Some(operation));
                match failure {
                    Some(error) => {
                        if ours && let Some(resource) = self.resources.get_mut(&key) {
                            resource.deleting = None;
                        }
                        OperationStatus::Failed(error)
                    }
                    None => {
                        if ours {
                            self.resources.remove(&key);
                        }
                        OperationStatus::Succeeded
                    }
                }
            }
        };
        if let Some(op) = self.operations.get_mut(operation) {
            op.status = status;
        }
    }

    fn finish_deployment(&mut self, key: &str, now: DateTime<Utc>) -> OperationStatus {
        let Some(deployment) = self.deployments.get(key) else {
            return OperationStatus::Failed(ArmError::new(
                codes::DEPLOYMENT_NOT_FOUND,
                "The deployment was removed while it ran",
            ));
        };
        let outcome = match deployment.pending_failure.clone() {
            Some(error) => Err(error),
            None => {
                let planned = deployment.planned.clone();
                self.apply_resources(&planned, now)
            }
        };
        let Some(deployment) = self.deployments.get_mut(key) else {
            return OperationStatus::Succeeded;
        };
        match outcome {
            Ok(ids) => {
                deployment.output_resources = ids;
                deployment.state = DeploymentState::Succeeded;
                self.stats.deployments_succeeded += 1;
                OperationStatus::Succeeded
            }
            Err(error) => {
                deployment.state = DeploymentState::Failed(error.clone());
                self.stats.deployments_failed += 1;
                OperationStatus::Failed(error)
            }
        }
    }

    /// Create or update the planned resources; all or nothing.
    fn apply_resources(
        &mut self,
        planned: &[EvaluatedResource],
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, ArmError> {
        let mut problems = Vec::new();
        // Ids this run creates before the resource at hand: a module's
        // `existing` resource may be one its parent deploys first.
        let mut created = HashSet::new();
        for resource in planned {
            let key = ids::key(&resource.id);
            let stored = self.resources.get(&key);
            if !resource.existing {
                created.insert(key.clone());
            }
            if resource.existing && stored.is_none() && !created.contains(&key) {
                problems.push(ArmError::new(
                    codes::NOT_FOUND,
                    format!(
                        "The existing resource '{}' referenced by '{}' was not found",
                        resource.id, resource.symbolic_name
                    ),
                ));
            } else if !resource.existing && stored.is_some_and(|r| r.deleting.is_some()) {
                problems.push(ArmError::new(
                    codes::CONFLICT,
                    format!(
                        "The resource '{}' is being deleted and cannot be updated now",
                        resource.id
                    ),
                ));
            } else if !resource.existing
                && ids::resource_group_of(&resource.id).is_some_and(|(plane, rg)| {
                    !self
                        .groups
                        .contains_key(&ids::key(&ids::resource_group_id(&plane, &rg)))
                })
            {
                problems.push(ArmError::new(
                    codes::RESOURCE_GROUP_NOT_FOUND,
                    format!("The resource group of '{}' does not exist", resource.id),
                ));
            }
        }
        if !problems.is_empty() {
            let mut error = ArmError::new(
                codes::DEPLOYMENT_FAILED,
                "At least one resource deployment operation failed. Please list deployment operations for details.",
            );
            error.details = problems;
            return Err(error);
        }
        // Listed once even if the template and a module both deploy it.
        let mut output = Vec::new();
        let mut listed = HashSet::new();
        for resource in planned.iter().filter(|r| !r.existing) {
            let key = ids::key(&resource.id);
            let previous = self.resources.get(&key).map(|r| &r.body);
            let body = stored_body(resource, previous, now);
            self.resources.insert(
                key.clone(),
                StoredResource {
                    body,
                    deleting: None,
                },
            );
            if listed.insert(key) {
                output.push(resource.id.clone());
            }
        }
        Ok(output)
    }

    /// Stop a running deployment: nothing it planned is created.
    pub fn cancel_deployment(&mut self, key: &str, now: DateTime<Utc>) -> bool {
        let Some(deployment) = self.deployments.get_mut(key) else {
            return false;
        };
        if !deployment.is_running() {
            return false;
        }
        deployment.state = DeploymentState::Canceled;
        self.stats.deployments_canceled += 1;
        if let Some(op) = self.operations.get_mut(&deployment.operation) {
            op.status = OperationStatus::Canceled;
            op.end = now;
        }
        true
    }

    /// Start an operation that completes after `duration`.
    #[allow(clippy::too_many_arguments)]
    pub fn start_operation(
        &mut self,
        kind: OperationKind,
        target_id: &str,
        namespace: &str,
        api_version: &str,
        duration: Duration,
        vanished: bool,
        now: Instant,
    ) -> Operation {
        let start = Utc::now();
        let op = Operation {
            id: uuid::Uuid::new_v4().to_string(),
            kind,
            status: OperationStatus::InProgress,
            plane: ids::plane_scope(target_id),
            namespace: namespace.to_string(),
            api_version: api_version.to_string(),
            target_id: target_id.to_string(),
            start,
            due: now + duration,
            end: start + chrono::Duration::from_std(duration).unwrap_or_default(),
            vanished,
            engine: false,
        };
        self.operations.insert(op.id.clone(), op.clone());
        op
    }

    /// Hand an operation to the deployment engine: it ends when the
    /// engine's task says so, and its URLs lie under `scope` (UCP proxies
    /// only paths under a resource group that exists to the engine).
    pub fn hand_to_engine(&mut self, operation: &str, scope: &str) -> Option<Operation> {
        let op = self.operations.get_mut(operation)?;
        op.engine = true;
        op.plane = scope.to_string();
        Some(op.clone())
    }

    /// Whether the engine's operation still runs (not canceled, not ended).
    pub fn engine_operation_running(&self, operation: &str) -> bool {
        self.operations
            .get(operation)
            .is_some_and(|op| op.status == OperationStatus::InProgress)
    }

    /// Record how the engine's run of the deployment under `key` ended; a
    /// run canceled (or replaced) meanwhile keeps the state it has.
    pub fn finish_engine_deployment(
        &mut self,
        key: &str,
        operation: &str,
        outcome: Result<Vec<String>, ArmError>,
    ) {
        if !self.engine_operation_running(operation) {
            return;
        }
        let status = match (self.deployments.get_mut(key), outcome) {
            (Some(deployment), Ok(ids)) if deployment.operation == operation => {
                deployment.output_resources = ids;
                deployment.state = DeploymentState::Succeeded;
                self.stats.deployments_succeeded += 1;
                OperationStatus::Succeeded
            }
            (Some(deployment), Err(error)) if deployment.operation == operation => {
                deployment.state = DeploymentState::Failed(error.clone());
                self.stats.deployments_failed += 1;
                OperationStatus::Failed(error)
            }
            (_, Ok(_)) => OperationStatus::Succeeded,
            (_, Err(error)) => OperationStatus::Failed(error),
        };
        if let Some(op) = self.operations.get_mut(operation) {
            op.status = status;
            op.end = Utc::now();
        }
    }

    /// The current statistics (without fault counts).
    pub fn stats(&self) -> Stats {
        let mut stats = self.stats.clone();
        stats.resources = self.resources.len();
        stats.resource_groups = self.groups.len();
        stats.operations_in_progress = self
            .operations
            .values()
            .filter(|op| op.status == OperationStatus::InProgress)
            .count();
        stats
    }

    /// Whether the resource group holding `scope` exists.
    pub fn group_exists(&self, scope: &str) -> bool {
        ids::resource_group_of(scope).is_some_and(|(plane, name)| {
            self.groups
                .contains_key(&ids::key(&ids::resource_group_id(&plane, &name)))
        })
    }
}

/// The body a GET of a deployed resource returns.
pub(crate) fn stored_body(
    resource: &EvaluatedResource,
    previous: Option<&Value>,
    now: DateTime<Utc>,
) -> Value {
    let mut body = resource.body.as_object().cloned().unwrap_or_default();
    body.insert("id".into(), Value::String(resource.id.clone()));
    body.insert("name".into(), Value::String(resource.name.clone()));
    body.insert("type".into(), Value::String(resource.resource_type.clone()));
    let properties = body
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if !properties.is_object() {
        *properties = Value::Object(Map::new());
    }
    if let Value::Object(properties) = properties {
        properties.insert(
            "provisioningState".into(),
            Value::String("Succeeded".into()),
        );
    }
    let created = previous
        .and_then(|p| p.pointer("/systemData/createdAt"))
        .cloned()
        .unwrap_or_else(|| Value::String(now.to_rfc3339()));
    body.insert(
        "systemData".into(),
        json!({"createdAt": created, "lastModifiedAt": now.to_rfc3339()}),
    );
    Value::Object(body)
}
