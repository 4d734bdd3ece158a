use super::*;
use crate::policy::{Limits, Source};
use serde_json::json;

fn registry() -> PolicyRegistry {
    let engine = crate::policy::engine(Limits {
        concurrent_decisions: 2,
        ..Limits::default()
    })
    .expect("engine");
    let slot = PolicySlot::load(engine, Source::BuiltIn(crate::policy::embedded::DEFAULT))
        .expect("default policy");
    let registry = PolicyRegistry::new(slot);
    registry.set_listed();
    registry
}

fn object(name: &str, spec: serde_json::Value) -> ReconcilePolicy {
    let mut spec = spec;
    spec["module"] = json!({"builtin": "default"});
    serde_json::from_value(json!({
        "apiVersion": "radwasm.io/v1alpha1",
        "kind": "ReconcilePolicy",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("policy")
}

/// Add a policy whose loaded version is the Rust team-label layer.
fn layer(registry: &PolicyRegistry, name: &str, spec: serde_json::Value) {
    registry.upsert(&object(name, spec));
    let engine = crate::policy::engine(Limits {
        concurrent_decisions: 2,
        ..Limits::default()
    })
    .expect("engine");
    let path = std::path::Path::new(env!("RADWASM_GUEST_DIR")).join("team-label-layer.wasm");
    let policy = engine.load_file(&path).expect("the layer loads");
    registry.activate(
        name,
        Active {
            policy,
            identity: name.to_string(),
            verified: None,
        },
    );
}

fn decided(selection: Selection) -> Chosen {
    match selection {
        Selection::Decide(chosen) => chosen,
        Selection::Wait(why) => panic!("waits: {why}"),
        Selection::Refuse(why) => panic!("refused: {why}"),
    }
}

#[test]
fn a_layer_decides_over_its_base_policy_put_together_at_selection() {
    let registry = registry();
    loaded(&registry, "base", json!({"priority": 0}));
    layer(&registry, "top", json!({"priority": 5, "base": "base"}));
    let labels = BTreeMap::new();
    let annotations = BTreeMap::new();
    let subject = Subject {
        labels: &labels,
        annotations: &annotations,
        namespace_labels: None,
    };
    let chosen = decided(registry.select(&subject));
    assert_eq!(chosen.reconcile_policy.as_deref(), Some("top"));
    let stack = chosen.policy.stack();
    assert_eq!(stack.len(), 2, "{stack:?}");
    assert!(stack[1].starts_with("default"), "{stack:?}");
    // Layered over another layer: three deep.
    layer(&registry, "middle", json!({"priority": 0, "base": "base"}));
    layer(&registry, "top", json!({"priority": 5, "base": "middle"}));
    assert_eq!(decided(registry.select(&subject)).policy.stack().len(), 3);
    assert_eq!(
        registry
            .base_stack("other", "middle")
            .expect("stack")
            .stack()
            .len(),
        2
    );
}

#[test]
fn a_missing_base_or_a_cycle_refuses_with_the_reason() {
    let registry = registry();
    layer(&registry, "a", json!({"priority": 5, "base": "nowhere"}));
    let labels = BTreeMap::new();
    let annotations = BTreeMap::new();
    let subject = Subject {
        labels: &labels,
        annotations: &annotations,
        namespace_labels: None,
    };
    match registry.select(&subject) {
        Selection::Refuse(why) => {
            assert!(
                why.contains("BaseNotFound") && why.contains("nowhere"),
                "{why}"
            )
        }
        _ => panic!("a missing base refuses"),
    }
    let problem = registry.base_stack("a", "nowhere").err().expect("missing");
    assert_eq!(problem.reason, "BaseNotFound");

    layer(&registry, "b", json!({"priority": 0, "base": "a"}));
    layer(&registry, "a", json!({"priority": 5, "base": "b"}));
    match registry.select(&subject) {
        Selection::Refuse(why) => {
            assert!(
                why.contains("BaseCycle") && why.contains("a -> b -> a"),
                "{why}"
            )
        }
        _ => panic!("a cycle refuses"),
    }
    // A base still loading its first version makes the object wait.
    registry.upsert(&object("c", json!({"priority": 0})));
    layer(&registry, "a", json!({"priority": 5, "base": "c"}));
    assert!(matches!(registry.select(&subject), Selection::Wait(_)));
}

/// Add a policy and give it a loaded version.
fn loaded(registry: &PolicyRegistry, name: &str, spec: serde_json::Value) {
    registry.upsert(&object(name, spec));
    let policy = registry.fallback().current();
    registry.activate(
        name,
        Active {
            policy,
            identity: name.to_string(),
            verified: None,
        },
    );
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn select(
    registry: &PolicyRegistry,
    object_labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
    namespace_labels: Option<&[(&str, &str)]>,
) -> Selection {
    let (object_labels, annotations) = (labels(object_labels), labels(annotations));
    let namespace_labels = namespace_labels.map(labels);
    registry.select(&Subject {
        labels: &object_labels,
        annotations: &annotations,
        namespace_labels: namespace_labels.as_ref(),
    })
}

fn decided_by(selection: Selection) -> Option<String> {
    match selection {
        Selection::Decide(chosen) => chosen.reconcile_policy,
        Selection::Wait(why) => Some(format!("wait: {why}")),
        Selection::Refuse(why) => Some(format!("refuse: {why}")),
    }
}

#[test]
fn the_highest_priority_wins_and_a_tie_goes_to_the_name_sorting_first() {
    let registry = registry();
    let team = json!({"objectSelector": {"matchLabels": {"team": "a"}}});
    let mut high = team.clone();
    high["priority"] = json!(5);
    loaded(&registry, "b-high", high.clone());
    loaded(&registry, "a-high", high);
    loaded(&registry, "c-low", team);
    assert_eq!(
        decided_by(select(&registry, &[("team", "a")], &[], None)).as_deref(),
        Some("a-high")
    );
    // No selector matches: the controller's --policy.
    assert_eq!(
        decided_by(select(&registry, &[("team", "b")], &[], None)),
        None
    );
}

#[test]
fn the_annotation_chooses_among_the_policies_that_admit_the_object() {
    let registry = registry();
    loaded(&registry, "everything", json!({"priority": 100}));
    loaded(
        &registry,
        "team-a",
        json!({"objectSelector": {"matchLabels": {"team": "a"}}}),
    );
    // Admitted by its selectors, the named policy wins over priority.
    assert_eq!(
        decided_by(select(
            &registry,
            &[("team", "a")],
            &[(POLICY_ANNOTATION, "team-a")],
            None
        ))
        .as_deref(),
        Some("team-a")
    );
    // Not admitted: refused, naming the policies that do admit it, so a
    // template's editor cannot escape a guardrail by naming another
    // team's policy.
    let refused = decided_by(select(
        &registry,
        &[("team", "b")],
        &[(POLICY_ANNOTATION, "team-a")],
        None,
    ))
    .unwrap_or_default();
    assert!(
        refused.starts_with("refuse: ")
            && refused.contains("\"team-a\", whose selectors do not admit this object")
            && refused.ends_with("policies that admit it: everything"),
        "{refused}"
    );
    let refused = decided_by(select(&registry, &[], &[(POLICY_ANNOTATION, "gone")], None))
        .unwrap_or_default();
    assert!(
        refused.starts_with("refuse: ")
            && refused.contains("\"gone\"")
            && refused.ends_with("Ready policies: everything, team-a"),
        "{refused}"
    );
}

#[test]
fn a_policy_without_a_version_waits_while_loading_and_refuses_once_refused() {
    let registry = registry();
    registry.upsert(&object("new", json!({})));
    let waiting = decided_by(select(&registry, &[], &[], None)).unwrap_or_default();
    assert!(waiting.starts_with("wait: "), "{waiting}");
    registry.refuse(
        "new",
        Problem {
            reason: "DigestMismatch",
            message: "not that one".into(),
        },
    );
    let refused = decided_by(select(&registry, &[], &[], None)).unwrap_or_default();
    assert!(
        refused.starts_with("refuse: ") && refused.contains("DigestMismatch: not that one"),
        "{refused}"
    );
    // A refused newer candidate leaves a loaded version in charge.
    loaded(&registry, "new", json!({}));
    registry.refuse(
        "new",
        Problem {
            reason: "CasesFailed",
            message: "1 of 1".into(),
        },
    );
    assert_eq!(
        decided_by(select(&registry, &[], &[], None)).as_deref(),
        Some("new")
    );
}

#[test]
fn namespace_selectors_match_the_namespaces_labels() {
    let registry = registry();
    loaded(
        &registry,
        "prod",
        json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}}),
    );
    assert_eq!(
        decided_by(select(&registry, &[], &[], Some(&[("env", "prod")]))).as_deref(),
        Some("prod")
    );
    assert_eq!(
        decided_by(select(&registry, &[], &[], Some(&[("env", "dev")]))),
        None
    );
    assert_eq!(decided_by(select(&registry, &[], &[], None)), None);
}

#[test]
fn shadows_that_match_watch_and_never_the_enforcing_one() {
    let registry = registry();
    loaded(&registry, "enforcing", json!({}));
    loaded(&registry, "canary", json!({"mode": "Shadow"}));
    loaded(
        &registry,
        "other-canary",
        json!({"mode": "Shadow", "objectSelector": {"matchLabels": {"team": "b"}}}),
    );
    registry.upsert(&object("unloaded-canary", json!({"mode": "Shadow"})));
    let Selection::Decide(chosen) = select(&registry, &[("team", "a")], &[], None) else {
        panic!("decides");
    };
    assert_eq!(chosen.reconcile_policy.as_deref(), Some("enforcing"));
    let shadows: Vec<&str> = chosen.shadows.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(shadows, ["canary"]);
    // A shadow named by the annotation enforces, and is no shadow then.
    let Selection::Decide(chosen) = select(&registry, &[], &[(POLICY_ANNOTATION, "canary")], None)
    else {
        panic!("decides");
    };
    assert_eq!(chosen.reconcile_policy.as_deref(), Some("canary"));
    assert!(chosen.shadows.is_empty());
}

#[test]
fn nothing_is_chosen_before_the_policies_are_listed() {
    let engine = crate::policy::engine(Limits {
        concurrent_decisions: 2,
        ..Limits::default()
    })
    .expect("engine");
    let slot = PolicySlot::load(engine, Source::BuiltIn(crate::policy::embedded::DEFAULT))
        .expect("default policy");
    let registry = PolicyRegistry::new(slot);
    assert!(matches!(
        select(&registry, &[], &[], None),
        Selection::Wait(_)
    ));
    registry.set_listed();
    assert!(matches!(
        select(&registry, &[], &[], None),
        Selection::Decide(_)
    ));
}

#[test]
fn an_invalid_selector_matches_nothing() {
    let registry = registry();
    loaded(
        &registry,
        "broken",
        json!({"objectSelector": {"matchExpressions": [{"key": "a", "operator": "Sideways"}]}}),
    );
    assert!(
        registry
            .get("broken")
            .expect("entry")
            .invalid_selector
            .is_some()
    );
    assert_eq!(decided_by(select(&registry, &[], &[], None)), None);
}

#[test]
fn a_layer_refused_while_its_base_loads_makes_its_objects_wait_not_fail() {
    let registry = registry();
    registry.upsert(&object("base", json!({"priority": 0})));
    registry.upsert(&object("top", json!({"priority": 5, "base": "base"})));
    // The layer's candidate found its base loading its first version.
    let problem = registry.base_stack("top", "base").err().expect("not ready");
    assert_eq!(problem.reason, "BaseNotReady");
    registry.refuse("top", problem);
    let waiting = decided_by(select(&registry, &[], &[], None)).unwrap_or_default();
    assert!(
        waiting.starts_with("wait: ") && waiting.contains("waits for its base"),
        "{waiting}"
    );
    // The base loaded; the layer loads again with the backoff: still a wait.
    loaded(&registry, "base", json!({"priority": 0}));
    let waiting = decided_by(select(&registry, &[], &[], None)).unwrap_or_default();
    assert!(waiting.starts_with("wait: "), "{waiting}");
    // A base that was refused fails the objects, naming why.
    registry.upsert(&object("broken", json!({"priority": 0})));
    registry.refuse(
        "broken",
        Problem {
            reason: "DigestMismatch",
            message: "not that one".into(),
        },
    );
    registry.upsert(&object("top", json!({"priority": 5, "base": "broken"})));
    let problem = registry.base_stack("top", "broken").err().expect("refused");
    registry.refuse("top", problem);
    let refused = decided_by(select(&registry, &[], &[], None)).unwrap_or_default();
    assert!(
        refused.starts_with("refuse: ") && refused.contains("BaseNotReady"),
        "{refused}"
    );
}

#[test]
fn a_retired_version_stops_deciding_and_its_objects_fail_naming_why() {
    let registry = registry();
    loaded(&registry, "signed", json!({"priority": 3}));
    let basis = TrustBasis {
        module: PolicyModule::default(),
        verify: PolicyVerify::default(),
    };
    registry.verified_under("signed", Some(basis.clone()));
    assert_eq!(
        registry.get("signed").and_then(|e| e.verified_under),
        Some(basis)
    );
    let ticks = registry.subscribe();
    assert!(registry.retire("signed"));
    assert!(ticks.has_changed().expect("open"), "selection is told");
    let entry = registry.get("signed").expect("kept");
    assert!(entry.active.is_none() && entry.verified_under.is_none());
    assert!(!registry.retire("signed"), "nothing left to stop");
    registry.refuse(
        "signed",
        Problem {
            reason: "SignatureUntrusted",
            message: "no remaining key verifies it".to_string(),
        },
    );
    match select(&registry, &[], &[], None) {
        Selection::Refuse(why) => {
            assert!(why.contains("SignatureUntrusted"), "{why}");
            assert!(why.contains("no remaining key"), "{why}");
        }
        _ => panic!("a policy whose version was retired decides nothing"),
    }
}
