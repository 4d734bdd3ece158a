//! Status patches, typed. A plan's `set-status` updates, a failed decision
//! and the host's own records (the operation started, a refused request) all
//! become one [`StatusPatch`], built by pure functions and sent as one JSON
//! merge patch of the status subresource. Fields left `None` are not sent;
//! `Some(None)` clears a field (merge-patch `null`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use radwasm_policy_model as model;
use serde::Serialize;

use crate::crd::{FailedRequest, LastFailure, PolicyRef, ResourceOperation};

/// The fields of either kind's status a reconcile may write.
#[derive(Debug, Default, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phrase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A resource's Radius id, written with its `Ready` phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_hash: Option<String>,
    /// Radius id of the last deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_resources: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<Option<ResourceOperation>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_request: Option<Option<FailedRequest>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<Option<LastFailure>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployments: Option<Vec<String>>,
    /// When a deployment of the template was last seen to succeed. With
    /// microseconds: a second's precision (`Time`) would make a resource
    /// found missing in the same second look as new as the deployment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<MicroTime>,
    /// When the drift check first found the resource missing; `Some(None)`
    /// clears it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_since: Option<Option<MicroTime>>,
    /// `Some(None)` clears it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<Option<PolicyRef>>,
}

/// What a template's status holds before the patch, as far as merging needs.
pub struct Current<'a> {
    pub conditions: &'a [Condition],
    /// `metadata.generation` of the object decided on.
    pub generation: Option<i64>,
}

impl<'a> Current<'a> {
    /// What `object`'s status holds now.
    pub fn of<K: super::object::Reconciled>(object: &'a K) -> Self {
        Current {
            conditions: object.status_parts().0,
            generation: object.meta().generation,
        }
    }
}

impl StatusPatch {
    /// True if nothing would be sent.
    pub fn is_empty(&self) -> bool {
        *self == StatusPatch::default()
    }

    /// Fold a template policy's `set-status` into this patch. The spec its
    /// `statusHash` stands for is not copied: every status write would carry
    /// the whole ARM template twice through the API server.
    pub fn template_update(&mut self, current: &Current<'_>, update: &model::TemplateStatusUpdate) {
        self.common(
            current,
            update.phase.map(|p| p.as_str()),
            &update.message,
            &update.conditions,
            update.clear_operation,
        );
        if let Some(generation) = update.observed_generation {
            self.observed_generation = Some(generation);
        }
        if let Some(hash) = &update.status_hash {
            self.status_hash = Some(hash.clone());
        }
        if let Some(ids) = &update.output_resources {
            self.output_resources = Some(ids.clone());
        }
    }

    /// Fold a resource policy's `set-status` into this patch. A resource's
    /// status always describes its current generation. With the `Ready`
    /// phase, `status.id` is set to the resource's `id` (its `spec.id`), as
    /// Radius's controller writes it.
    pub fn resource_update(
        &mut self,
        current: &Current<'_>,
        update: &model::ResourceStatusUpdate,
        id: &str,
    ) {
        if update.phase == Some(model::ResourcePhase::Ready) {
            self.id = Some(id.to_string());
        }
        self.common(
            current,
            update.phase.map(|p| p.as_str()),
            &update.message,
            &update.conditions,
            update.clear_operation,
        );
        self.observed_generation = current.generation;
    }

    fn common(
        &mut self,
        current: &Current<'_>,
        phase: Option<&str>,
        message: &Option<String>,
        conditions: &[model::Condition],
        clear_operation: bool,
    ) {
        if let Some(phase) = phase {
            self.phrase = Some(phase.to_string());
        }
        if let Some(message) = message {
            self.message = Some(message.clone());
        }
        if !conditions.is_empty() {
            let base = self.conditions.as_deref().unwrap_or(current.conditions);
            self.conditions = Some(merge_conditions(base, conditions, current.generation));
        }
        if clear_operation {
            // The operation is over or abandoned, and so is any refused
            // request the policy was shown in its place.
            self.operation = Some(None);
            self.failed_request = Some(None);
        }
    }

    /// The object goes `Failed` with `message` at its current generation: a
    /// decision failed or a plan was rejected.
    pub fn failure(current: &Current<'_>, reason: &str, message: &str) -> StatusPatch {
        let conditions = merge_conditions(
            current.conditions,
            &[model::Condition {
                kind: model::READY_CONDITION.to_string(),
                status: model::ConditionStatus::False,
                reason: reason.to_string(),
                message: message.to_string(),
            }],
            current.generation,
        );
        StatusPatch {
            phrase: Some("Failed".to_string()),
            message: Some(message.to_string()),
            conditions: Some(conditions),
            // The failure is about this generation: clients waiting for the
            // outcome of their change (kubectl wait, `radwasm dev`) must see
            // it as current.
            observed_generation: current.generation,
            ..Default::default()
        }
    }

    /// Record the operation just started, into a patch that may hold more
    /// (a plan's status).
    pub fn record_operation(&mut self, operation: ResourceOperation, resource: Option<String>) {
        self.operation = Some(Some(operation));
        self.failed_request = Some(None);
        self.resource = resource;
    }

    /// Record a request Radius refused (or that kept failing): the policy is
    /// shown it as a failed attempt on its next decision.
    pub fn request_failed(failed: FailedRequest) -> Self {
        StatusPatch {
            failed_request: Some(Some(failed)),
            // No operation began: not even the one recorded ahead of the
            // request.
            operation: Some(None),
            ..Default::default()
        }
    }

    /// Keep the failure record in step with what the observation reported:
    /// a failed attempt (already counted into `reported` by the observation)
    /// is recorded; a success of the failing subject clears the record.
    pub fn track_failures(
        &mut self,
        operation: Option<&model::OperationObservation>,
        reported: Option<&model::FailureRecord>,
    ) {
        let Some(operation) = operation else {
            return;
        };
        match (&operation.result, reported) {
            (
                model::OperationResult::Failed(_)
                | model::OperationResult::Canceled
                | model::OperationResult::Refused(_),
                Some(failure),
            ) => {
                self.last_failure = Some(Some(LastFailure {
                    subject: failure.subject.clone(),
                    count: failure.count,
                    code: failure.error.code.clone(),
                    message: failure.error.message.clone(),
                    time: now(),
                }));
            }
            (model::OperationResult::Succeeded { .. }, Some(failure))
                if failure.subject == operation.subject =>
            {
                self.last_failure = Some(None);
            }
            _ => {}
        }
        if operation.kind == model::OperationKind::Deployment
            && matches!(operation.result, model::OperationResult::Succeeded { .. })
        {
            self.last_deployed = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        }
    }

    /// Keep `missingSince` in step with what the drift check reported (the
    /// observation's `missing-age-ms`): set when first found missing,
    /// cleared when found again.
    /// `seen` is when the check that found it missing was sent, if known.
    pub fn track_missing(
        &mut self,
        recorded: Option<&MicroTime>,
        missing_age_ms: Option<u64>,
        seen: Option<k8s_openapi::jiff::Timestamp>,
    ) {
        match (recorded, missing_age_ms) {
            (None, Some(age_ms)) => {
                let since = seen.unwrap_or_else(|| {
                    k8s_openapi::jiff::Timestamp::now()
                        - k8s_openapi::jiff::SignedDuration::from_millis(
                            i64::try_from(age_ms).unwrap_or(0),
                        )
                });
                self.missing_since = Some(Some(MicroTime(since)));
            }
            (Some(_), None) => self.missing_since = Some(None),
            _ => {}
        }
    }

    /// The patch body: `{"status": {...}}`.
    pub fn to_body(&self) -> serde_json::Value {
        // A struct of strings, numbers and lists always serialises.
        serde_json::json!({ "status": self })
    }
}

/// Merge a policy's `Ready` (or other) conditions into the current list,
/// moving `lastTransitionTime` only when a condition's status changes.
pub fn merge_conditions(
    current: &[Condition],
    updates: &[model::Condition],
    generation: Option<i64>,
) -> Vec<Condition> {
    let mut merged: Vec<Condition> = current.to_vec();
    for update in updates {
        let status = match update.status {
            model::ConditionStatus::True => "True",
            model::ConditionStatus::False => "False",
            model::ConditionStatus::Unknown => "Unknown",
        };
        let reason = if update.reason.is_empty() {
            "Unknown".to_string()
        } else {
            update.reason.clone()
        };
        match merged.iter_mut().find(|c| c.type_ == update.kind) {
            Some(existing) => {
                if existing.status != status {
                    existing.last_transition_time = now();
                }
                existing.status = status.to_string();
                existing.reason = reason;
                existing.message = update.message.clone();
                existing.observed_generation = generation;
            }
            None => merged.push(Condition {
                type_: update.kind.clone(),
                status: status.to_string(),
                reason,
                message: update.message.clone(),
                observed_generation: generation,
                last_transition_time: now(),
            }),
        }
    }
    merged
}

pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: model::ConditionStatus, reason: &str) -> model::Condition {
        model::Condition {
            kind: "Ready".into(),
            status,
            reason: reason.into(),
            message: format!("{reason} message"),
        }
    }

    #[test]
    fn a_condition_keeps_its_transition_time_until_its_status_changes() {
        let first = merge_conditions(
            &[],
            &[ready(model::ConditionStatus::False, "Deploying")],
            Some(1),
        );
        assert_eq!(first.len(), 1);
        let mut aged = first.clone();
        aged[0].last_transition_time = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);

        let same_status = merge_conditions(
            &aged,
            &[ready(
                model::ConditionStatus::False,
                "WaitingForDependencies",
            )],
            Some(2),
        );
        assert_eq!(
            same_status[0].last_transition_time,
            aged[0].last_transition_time
        );
        assert_eq!(same_status[0].reason, "WaitingForDependencies");
        assert_eq!(same_status[0].observed_generation, Some(2));

        let flipped = merge_conditions(
            &aged,
            &[ready(model::ConditionStatus::True, "Deployed")],
            Some(2),
        );
        assert_ne!(
            flipped[0].last_transition_time,
            aged[0].last_transition_time
        );
        assert_eq!(flipped[0].status, "True");
    }

    #[test]
    fn a_failure_marks_the_object_failed_at_its_generation() {
        let patch = StatusPatch::failure(
            &Current {
                conditions: &[],
                generation: Some(3),
            },
            "PlanRejected",
            "plan rejected at action 2",
        );
        let body = patch.to_body();
        assert_eq!(body["status"]["phrase"], "Failed");
        assert_eq!(body["status"]["message"], "plan rejected at action 2");
        assert_eq!(body["status"]["conditions"][0]["reason"], "PlanRejected");
        assert_eq!(body["status"]["conditions"][0]["status"], "False");
        assert_eq!(body["status"]["observedGeneration"], 3);
        // Nothing else is touched: no null anywhere.
        assert!(!body.to_string().contains("null"), "{body}");
    }

    #[test]
    fn clearing_the_operation_sends_null_for_it_and_for_a_refused_request() {
        let mut patch = StatusPatch::default();
        patch.template_update(
            &Current {
                conditions: &[],
                generation: Some(1),
            },
            &model::TemplateStatusUpdate {
                clear_operation: true,
                ..Default::default()
            },
        );
        let body = patch.to_body();
        assert_eq!(
            body,
            serde_json::json!({"status": {"operation": null, "failedRequest": null}})
        );
    }

    #[test]
    fn observed_generation_is_the_policys_for_templates_and_current_for_resources() {
        let current = Current {
            conditions: &[],
            generation: Some(7),
        };
        let mut template = StatusPatch::default();
        template.template_update(
            &current,
            &model::TemplateStatusUpdate {
                message: Some("deploying".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            template.observed_generation, None,
            "the policy did not set it"
        );
        template.template_update(
            &current,
            &model::TemplateStatusUpdate {
                observed_generation: Some(6),
                ..Default::default()
            },
        );
        assert_eq!(template.observed_generation, Some(6));

        let mut resource = StatusPatch::default();
        resource.resource_update(
            &current,
            &model::ResourceStatusUpdate {
                phase: Some(model::ResourcePhase::Deleting),
                ..Default::default()
            },
            "/planes/radius/local/resourceGroups/g/providers/A.B/c/d",
        );
        assert_eq!(resource.observed_generation, Some(7));
        assert_eq!(resource.phrase.as_deref(), Some("Deleting"));
        assert_eq!(resource.id, None, "written with Ready only");
        resource.resource_update(
            &current,
            &model::ResourceStatusUpdate {
                phase: Some(model::ResourcePhase::Ready),
                ..Default::default()
            },
            "/planes/radius/local/resourceGroups/g/providers/A.B/c/d",
        );
        assert_eq!(
            serde_json::to_value(&resource).expect("json")["id"],
            "/planes/radius/local/resourceGroups/g/providers/A.B/c/d"
        );
    }

    #[test]
    fn recording_the_deployed_hash_writes_the_hash_and_no_copy_of_the_spec() {
        let current = Current {
            conditions: &[],
            generation: Some(2),
        };
        let mut patch = StatusPatch::default();
        patch.template_update(
            &current,
            &model::TemplateStatusUpdate {
                status_hash: Some("h-now".into()),
                ..Default::default()
            },
        );
        assert_eq!(
            patch.to_body(),
            serde_json::json!({"status": {"statusHash": "h-now"}})
        );
    }

    #[test]
    fn two_updates_in_one_plan_merge_their_conditions() {
        let current = Current {
            conditions: &[],
            generation: Some(1),
        };
        let mut patch = StatusPatch::default();
        patch.resource_update(
            &current,
            &model::ResourceStatusUpdate {
                conditions: vec![ready(model::ConditionStatus::False, "Deleting")],
                ..Default::default()
            },
            "id",
        );
        patch.resource_update(
            &current,
            &model::ResourceStatusUpdate {
                conditions: vec![model::Condition {
                    kind: "Drifted".into(),
                    status: model::ConditionStatus::True,
                    reason: "Missing".into(),
                    message: String::new(),
                }],
                ..Default::default()
            },
            "id",
        );
        let conditions = patch.conditions.expect("conditions");
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[0].reason, "Deleting");
    }

    #[test]
    fn missing_since_is_the_time_the_check_was_sent_and_goes_when_found() {
        let sent: k8s_openapi::jiff::Timestamp = "2026-11-24T10:00:00Z".parse().expect("time");
        let mut first = StatusPatch::default();
        first.track_missing(None, Some(40), Some(sent));
        assert_eq!(first.missing_since, Some(Some(MicroTime(sent))));

        let mut still = StatusPatch::default();
        still.track_missing(Some(&MicroTime(sent)), Some(9_000), None);
        assert!(still.is_empty(), "nothing new to write");

        let mut found = StatusPatch::default();
        found.track_missing(Some(&MicroTime(sent)), None, None);
        assert_eq!(found.missing_since, Some(None));
        assert_eq!(
            found.to_body(),
            serde_json::json!({"status": {"missingSince": null}})
        );
    }
}
