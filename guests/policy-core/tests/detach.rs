//! A layer that keeps a template's data stores turns the base's
//! `deleteResource` for them into `detachResource`; the default then
//! completes the deletion around them: the rest goes wave by wave as
//! before, it waits for the detached ones to go too, removes the finalizer
//! last, and its `Deleted` event says how many were deleted and kept.

use radwasm_policy_core::decide_template;
use radwasm_policy_model::annotations::DELETION_TALLY;
use radwasm_policy_model::{EventType, TemplateAction, TemplateObservation, TemplatePlan};
use serde_json::json;

const SCOPE: &str = "/planes/radius/local/resourceGroups/default";
const FINALIZER: &str = "radapp.io/deployment-template-finalizer";

fn id(kind: &str, name: &str) -> String {
    format!("{SCOPE}/providers/{kind}/{name}")
}

/// The rule under test, as a layer writes it: keep every data store.
fn keep_data_stores(observation: &TemplateObservation, base: TemplatePlan) -> TemplatePlan {
    let data_store = |name: &str| {
        observation.owned_resources.iter().any(|owned| {
            owned.name == name
                && owned
                    .radius_id
                    .to_ascii_lowercase()
                    .contains("/providers/applications.datastores/")
        })
    };
    let actions = base
        .actions
        .into_iter()
        .map(|action| match action {
            TemplateAction::DeleteResource(name) if data_store(&name) => {
                TemplateAction::DetachResource(name)
            }
            other => other,
        })
        .collect();
    TemplatePlan { actions }
}

/// A template being deleted, owning `owned` (name, Radius id, deletion
/// requested), with the host's tally so far.
fn deleting(owned: &[(&str, String, bool)], tally: Option<&str>) -> TemplateObservation {
    let owned: Vec<_> = owned
        .iter()
        .map(|(name, radius_id, requested)| {
            json!({"name": name, "radiusId": radius_id, "deletionRequested": requested,
                   "phase": if *requested { "Deleting" } else { "Ready" }})
        })
        .collect();
    let annotations = match tally {
        Some(text) => json!({ DELETION_TALLY: text }),
        None => json!({}),
    };
    serde_json::from_value(json!({
        "meta": {"name": "app", "namespace": "default", "uid": "uid-app", "generation": 1,
                 "deletionRequested": true, "finalizers": [FINALIZER],
                 "annotations": annotations},
        "spec": {
            "template": {"resources": {}},
            "parameters": {},
            "providerConfig": {"radius": {"type": "Radius", "value": {"scope": SCOPE}}}
        },
        "specHash": "h1",
        "status": {"phase": "Deleting", "observedGeneration": 1, "statusHash": "h1",
                   "message": "deleting its resources"}
    }))
    .map(|mut observation: TemplateObservation| {
        observation.owned_resources =
            serde_json::from_value(json!(owned)).expect("owned resources");
        observation
    })
    .expect("observation")
}

fn decide(observation: &TemplateObservation) -> Vec<TemplateAction> {
    let base = decide_template(observation).expect("the default decides");
    keep_data_stores(observation, base).actions
}

fn children(actions: &[TemplateAction]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|action| match action {
            TemplateAction::DeleteResource(name) => Some(format!("delete {name}")),
            TemplateAction::DetachResource(name) => Some(format!("detach {name}")),
            _ => None,
        })
        .collect()
}

fn removes_finalizer(actions: &[TemplateAction]) -> bool {
    actions.contains(&TemplateAction::RemoveFinalizer)
}

#[test]
fn the_data_store_is_detached_in_the_first_wave_and_the_rest_keeps_its_order() {
    let container = id("Applications.Core/containers", "web");
    let store = id("Applications.Datastores/redisCaches", "cache");
    let app = id("Applications.Core/applications", "app");
    let env = id("Applications.Core/environments", "env");

    // First decision: the lowest wave (containers, data stores) goes; the
    // data store is released, not deleted; application and environment wait.
    let all = [
        ("web", container.clone(), false),
        ("cache", store.clone(), false),
        ("app", app.clone(), false),
        ("env", env.clone(), false),
    ];
    let actions = decide(&deleting(&all, None));
    assert_eq!(children(&actions), ["delete web", "detach cache"]);
    assert!(!removes_finalizer(&actions));

    // Both still going: nothing new, and the finalizer stays.
    let going = [
        ("web", container.clone(), true),
        ("cache", store.clone(), true),
        ("app", app.clone(), false),
        ("env", env.clone(), false),
    ];
    let actions = decide(&deleting(&going, Some(r#"{"deleted":1,"kept":1}"#)));
    assert!(children(&actions).is_empty(), "{actions:?}");
    assert!(!removes_finalizer(&actions));

    // Gone: the application, then the environment, each after the other.
    let rest = [("app", app.clone(), false), ("env", env.clone(), false)];
    let actions = decide(&deleting(&rest, Some(r#"{"deleted":1,"kept":1}"#)));
    assert_eq!(children(&actions), ["delete app"]);
    let last = [("env", env.clone(), false)];
    let actions = decide(&deleting(&last, Some(r#"{"deleted":2,"kept":1}"#)));
    assert_eq!(children(&actions), ["delete env"]);
}

#[test]
fn when_the_last_child_is_gone_the_finalizer_goes_and_the_event_says_what_was_kept() {
    let actions = decide(&deleting(&[], Some(r#"{"deleted":3,"kept":1}"#)));
    assert!(removes_finalizer(&actions));
    let deleted = actions
        .iter()
        .find_map(|action| match action {
            TemplateAction::EmitEvent(event) if event.reason == "Deleted" => Some(event),
            _ => None,
        })
        .expect("a Deleted event");
    assert_eq!(deleted.event_type, EventType::Normal);
    assert_eq!(
        deleted.message,
        "3 resources deleted, 1 kept in Radius (detached by the policy)"
    );
}

#[test]
fn a_deletion_that_kept_nothing_says_how_many_it_deleted() {
    let actions = decide(&deleting(&[], Some(r#"{"deleted":1,"kept":0}"#)));
    assert!(
        actions.iter().any(|action| matches!(action,
        TemplateAction::EmitEvent(event) if event.message == "all resources deleted (1 resource)"))
    );
    // A template deleted before any tally was kept says what it always said.
    let actions = decide(&deleting(&[], None));
    assert!(actions.iter().any(|action| matches!(action,
        TemplateAction::EmitEvent(event) if event.message == "all resources deleted")));
}

#[test]
fn only_data_stores_are_kept() {
    let owned = [
        (
            "db",
            id("Applications.Datastores/sqlDatabases", "db"),
            false,
        ),
        ("gw", id("Applications.Core/gateways", "gw"), false),
    ];
    let actions = decide(&deleting(&owned, None));
    assert_eq!(children(&actions), ["detach db", "delete gw"]);
}
