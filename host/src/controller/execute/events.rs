//! A plan's Kubernetes Events, about the object they concern; an object
//! whose name is too long for kube's recorder gets one written directly.

use k8s_openapi::api::events::v1::Event as K8sEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType};
use radwasm_policy_model as model;

use crate::controller::Context;
use crate::controller::object::Reconciled;

/// Longest object name kube's recorder can name an Event after: it names
/// events `{object}.{nanoseconds in hex}`, and names are at most 253.
pub(super) const RECORDER_NAME_LIMIT: usize = 253 - 17;

/// Publish a Kubernetes Event about `object`. Failing to record an event
/// never fails the reconcile.
pub async fn emit<K: Reconciled>(ctx: &Context, object: &K, event: &model::Event) {
    let type_ = match event.event_type {
        model::EventType::Normal => EventType::Normal,
        model::EventType::Warning => EventType::Warning,
    };
    let note = cut(&event.message, 1000);
    let reason: String = event.reason.chars().take(128).collect();
    let reference = object.object_ref(&());
    let published = if object.name_any().len() <= RECORDER_NAME_LIMIT {
        ctx.recorders
            .publish(
                &Event {
                    type_,
                    reason: reason.clone(),
                    note: Some(note),
                    action: "Reconcile".to_string(),
                    secondary: None,
                },
                &reference,
            )
            .await
    } else {
        publish_for_long_name(ctx, reference, type_, reason.clone(), note).await
    };
    if let Err(error) = published {
        tracing::warn!(reason = %reason, error = %crate::controller::describe_kube_error(&error), "could not record an event");
    }
}

/// The recorder cannot name an event after an object whose name is near the
/// 253-character limit: create it here under a shortened name instead.
pub(super) async fn publish_for_long_name(
    ctx: &Context,
    reference: k8s_openapi::api::core::v1::ObjectReference,
    type_: EventType,
    reason: String,
    note: String,
) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let name = reference.name.clone().unwrap_or_default();
    let short: String = name.chars().take(200).collect();
    let event = K8sEvent {
        metadata: ObjectMeta {
            name: Some(format!("{short}.{:x}", now.as_nanosecond())),
            namespace: reference.namespace.clone(),
            ..Default::default()
        },
        action: Some("Reconcile".to_string()),
        reason: Some(reason),
        note: Some(note),
        event_time: Some(MicroTime(now)),
        regarding: Some(reference.clone()),
        reporting_controller: Some("radwasm".to_string()),
        reporting_instance: Some(
            std::env::var("POD_NAME").unwrap_or_else(|_| "radwasm".to_string()),
        ),
        type_: Some(
            match type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        ..Default::default()
    };
    let events: Api<K8sEvent> = Api::namespaced(
        ctx.client.clone(),
        reference.namespace.as_deref().unwrap_or("default"),
    );
    events.create(&PostParams::default(), &event).await?;
    Ok(())
}

pub(super) fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
