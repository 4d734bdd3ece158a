//! A plan's Events, published through the controller's recorders
//! (`kube_client::events`).

use kube::runtime::events::{Event, EventType};
use radwasm_policy_model as model;

use super::Context;
use super::object::Reconciled;

/// A plan's Event: publish a Kubernetes Event about `object`. Failing to
/// record an event never fails the reconcile.
pub async fn emit<K: Reconciled>(ctx: &Context, object: &K, event: &model::Event) {
    let type_ = match event.event_type {
        model::EventType::Normal => EventType::Normal,
        model::EventType::Warning => EventType::Warning,
    };
    let note = cut(&event.message, 1000);
    let reason: String = event.reason.chars().take(128).collect();
    let reference = object.object_ref(&());
    let published = ctx
        .recorders
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
        .await;
    if let Err(error) = published {
        tracing::warn!(reason = %reason, error = %crate::kube_client::describe_kube_error(&error), "could not record an event");
    }
}

fn cut(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
