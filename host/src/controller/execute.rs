//! Carrying out checked plans: finalizers, status, events and the Kubernetes
//! objects a plan creates or deletes. Radius calls are made by the
//! reconcilers, which know which object an operation belongs to.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use radwasm_policy_model as model;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::{Context, Error};
use crate::crd::PolicyRef;
use crate::policy::LoadedPolicy;

/// Add or remove `finalizer`, with the object's resourceVersion as a
/// precondition so a concurrent change is not overwritten.
pub async fn set_finalizer<K>(
    api: &Api<K>,
    object: &K,
    finalizer: &str,
    present: bool,
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut finalizers: Vec<String> = object.finalizers().to_vec();
    if present {
        if finalizers.iter().any(|f| f == finalizer) {
            return Ok(());
        }
        finalizers.push(finalizer.to_string());
    } else {
        finalizers.retain(|f| f != finalizer);
    }
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": object.resource_version(),
    }});
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::kube(if present {
        "add finalizer"
    } else {
        "remove finalizer"
    }))?;
    Ok(())
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

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Which policy took the decision, for `status.policy`.
pub fn policy_ref(policy: &LoadedPolicy) -> PolicyRef {
    PolicyRef {
        name: policy.description().name.clone(),
        version: policy.description().version.clone(),
        digest: policy.digest().to_string(),
    }
}

/// Merge-patch the status subresource with `fields`.
pub async fn patch_status<K>(
    api: &Api<K>,
    name: &str,
    fields: Map<String, Value>,
) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if fields.is_empty() {
        return Ok(());
    }
    let patch = json!({"status": Value::Object(fields)});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube("write status"))?;
    Ok(())
}

/// Publish a Kubernetes Event about `object`. Failing to record an event
/// never fails the reconcile.
pub async fn emit<K>(ctx: &Context, object: &K, event: &model::Event)
where
    K: Resource<DynamicType = ()>,
{
    let type_ = match event.event_type {
        model::EventType::Normal => EventType::Normal,
        model::EventType::Warning => EventType::Warning,
    };
    let mut note = event.message.clone();
    if note.len() > 1000 {
        let mut cut = 1000;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    let published = ctx
        .recorder
        .publish(
            &Event {
                type_,
                reason: event.reason.chars().take(128).collect(),
                note: Some(note),
                action: "Reconcile".to_string(),
                secondary: None,
            },
            &object.object_ref(&()),
        )
        .await;
    if let Err(error) = published {
        tracing::warn!(%error, reason = %event.reason, "could not record an event");
    }
}

/// Turn a decision failure or a rejected plan into status fields and a
/// Warning event: the object goes `Failed` with `message`.
pub fn failure_fields(
    message: &str,
    reason: &str,
    current: &[Condition],
    generation: Option<i64>,
) -> Map<String, Value> {
    let conditions = merge_conditions(
        current,
        &[model::Condition {
            kind: model::READY_CONDITION.to_string(),
            status: model::ConditionStatus::False,
            reason: reason.to_string(),
            message: message.to_string(),
        }],
        generation,
    );
    let mut fields = Map::new();
    fields.insert("phrase".into(), json!("Failed"));
    fields.insert("message".into(), json!(message));
    fields.insert(
        "conditions".into(),
        serde_json::to_value(conditions).unwrap_or(Value::Null),
    );
    // The failure is about this generation: clients waiting for the outcome
    // of their change (kubectl wait, `radwasm dev`) must see it as current.
    if let Some(generation) = generation {
        fields.insert("observedGeneration".into(), json!(generation));
    }
    fields
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
    fn failure_fields_mark_the_object_failed_with_the_message() {
        let fields = failure_fields("plan rejected at action 2", "PlanRejected", &[], Some(3));
        assert_eq!(fields["phrase"], "Failed");
        assert_eq!(fields["message"], "plan rejected at action 2");
        assert_eq!(fields["conditions"][0]["reason"], "PlanRejected");
        assert_eq!(fields["conditions"][0]["status"], "False");
        assert_eq!(fields["observedGeneration"], 3);
    }
}
