//! Property tests of the default policy's input handling: the annotation
//! knobs, and `decide_template` / `decide_resource` on generated
//! observations (bounded sizes, valid and adversarial values).
//!
//! Besides "never panics", every plan must pass the checks the host applies
//! before any effect (`host/src/controller/guard.rs`, restated here from its
//! documentation): at most 1,024 actions, messages of at most 32 KiB, events
//! with a reason, deployments only into the template's own scope and not
//! while one is in flight, resources created with a valid name and id, only
//! owned resources deleted. A plan the host refuses leaves the object stuck.
//!
//! `cargo test` runs a few hundred cases; set `PROPTEST_CASES` for a long run
//! (docs/reliability.md).

// The model grows fields (the host and the WIT contract evolve together);
// literals name the fields the strategies generate and default the rest.
#![allow(clippy::needless_update)]

use std::collections::BTreeMap;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use radwasm_policy_core::annotations::{
    DEFAULT_RETRY_BASE_MS, DeploymentRetry, MAX_RETRY_MS, ReconcileMode, depends_on,
    deployment_retry, hold, is_held, reconcile_mode,
};
use radwasm_policy_core::{decide_resource, decide_template};
use radwasm_policy_model::annotations::{DEPENDS_ON, DEPLOYMENT_RETRY, HOLD, RECONCILE_POLICY};
use radwasm_policy_model::*;

fn config(cases: u32) -> ProptestConfig {
    let mut config = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = cases;
    }
    config.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(
        "tests/regressions/props.txt",
    )));
    config
}

const DEFAULT: &str = "/planes/radius/local/resourceGroups/default";

// ----- strategies --------------------------------------------------------------

fn pick(items: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(items).prop_map(str::to_string)
}

/// A long text, to find messages that quote user input without bound.
fn huge() -> impl Strategy<Value = String> {
    (40_000usize..70_000, pick(&["x", "é", ",", " ", "a,"])).prop_map(|(n, unit)| unit.repeat(n))
}

fn scope_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => Just(DEFAULT.to_string()),
        1 => pick(&[
            "/planes/radius/local/resourceGroups/other",
            "/Planes/Radius/local/resourcegroups/DEFAULT",
            "/planes/radius/local/resourceGroups/default/",
            "/planes/radius/local/resourceGroups/..",
            "/planes/aws/aws/accounts/1",
            "default",
            "",
        ]),
        1 => "\\PC{0,30}",
    ]
    .boxed()
}

fn provider_config() -> BoxedStrategy<String> {
    prop_oneof![
        6 => scope_text().prop_map(|scope| {
            serde_json::json!({"radius": {"type": "Radius", "value": {"scope": scope}}}).to_string()
        }),
        1 => pick(&["", "{}", "{", "null", "[]", r#"{"radius":{"value":{"scope":5}}}"#]),
        1 => "\\PC{0,40}",
    ]
    .boxed()
}

/// A Radius id: mostly in the default scope, some elsewhere, some hostile.
fn radius_id() -> BoxedStrategy<String> {
    prop_oneof![
        8 => (0u32..12, pick(&["containers", "environments", "applications", "gateways"]))
            .prop_map(|(n, kind)| format!("{DEFAULT}/providers/Applications.Core/{kind}/c{n}")),
        1 => (0u32..4).prop_map(|n| format!("/planes/radius/local/resourceGroups/other/providers/Applications.Core/containers/c{n}")),
        1 => pick(&[
            "",
            "c1",
            "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/x/../../../../other/providers/A.B/t/n",
            "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/a?b",
            "/PLANES/radius/local/resourceGroups/DEFAULT/providers/Applications.Core/containers/C1",
            "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers",
        ]),
        1 => "\\PC{0,40}",
    ]
    .boxed()
}

/// An id as Radius reports it in `outputResources`: in the default scope or
/// another, in any case, and now and then one the grammar refuses (the
/// policy must not ask to create a `DeploymentResource` for it) or a very
/// long one.
fn output_id() -> BoxedStrategy<String> {
    prop_oneof![
        12 => radius_id(),
        1 => long_id(),
    ]
    .boxed()
}

/// A valid id longer than a status message may be.
fn long_id() -> BoxedStrategy<String> {
    huge()
        .prop_map(|name| {
            let name: String = name.chars().filter(|c| c.is_alphanumeric()).collect();
            format!("{DEFAULT}/providers/Applications.Core/containers/c{name}")
        })
        .boxed()
}

/// Output resource ids: a few, or more than one plan may carry.
fn ids() -> BoxedStrategy<Vec<String>> {
    prop_oneof![
        12 => vec(output_id(), 0..6),
        1 => (900usize..2200).prop_map(|n| {
            (0..n)
                .map(|i| format!("{DEFAULT}/providers/Applications.Core/containers/c{i}"))
                .collect()
        }),
    ]
    .boxed()
}

fn name() -> BoxedStrategy<String> {
    prop_oneof![
        6 => pick(&["app", "db", "c0", "c1", "c2", "frontend-containers-1a2b3c4d"]),
        1 => pick(&["", "UPPER", "a.b", "-x", "név", " app "]),
        1 => "[a-z0-9-]{250,300}",
        1 => "\\PC{0,20}",
    ]
    .boxed()
}

fn annotation_value() -> BoxedStrategy<String> {
    prop_oneof![
        6 => short_annotation_value(),
        1 => huge(),
    ]
    .boxed()
}

fn short_annotation_value() -> BoxedStrategy<String> {
    prop_oneof![
        6 => pick(&[
            "manage", "skip", "detach-on-delete", " skip ", "Skip", "SKIP", "", "true", "True",
            " TRUE ", "false", "yes", "app", "app,db", " db , app ,, db", "c0,c1,c2", "never",
            "30s", "2m", "0s",
        ]),
        1 => "\\PC{0,30}",
        1 => "[a-z0-9,-]{200,400}",
    ]
    .boxed()
}

/// The annotations the default policy reads, with values of any length.
fn annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
    (
        proptest::option::weighted(0.3, annotation_value()),
        proptest::option::weighted(0.2, annotation_value()),
        proptest::option::weighted(0.3, annotation_value()),
        proptest::option::weighted(0.2, annotation_value()),
        proptest::option::weighted(0.2, annotation_value()),
    )
        .prop_map(|(policy, hold, depends, retry, other)| {
            [
                (RECONCILE_POLICY, policy),
                (HOLD, hold),
                (DEPENDS_ON, depends),
                ("radapp.io/deployment-retry", retry),
                ("radapp.io/other", other),
            ]
            .into_iter()
            .filter_map(|(key, value)| Some((key.to_string(), value?)))
            .collect()
        })
}

fn meta(finalizer: &'static str) -> impl Strategy<Value = ObjectMeta> {
    (
        name(),
        pick(&["default", "", "ns"]),
        pick(&["u1", "u2", ""]),
        prop_oneof![4 => 0i64..4, 1 => Just(i64::MAX), 1 => Just(-1i64)],
        prop::bool::weighted(0.2),
        vec(prop_oneof![4 => Just(finalizer), 1 => Just("other")], 0..3),
        annotations(),
    )
        .prop_map(
            |(name, namespace, uid, generation, deletion_requested, finalizers, annotations)| {
                ObjectMeta {
                    name,
                    namespace,
                    uid,
                    generation,
                    deletion_requested,
                    finalizers: finalizers.into_iter().map(str::to_string).collect(),
                    labels: BTreeMap::new(),
                    annotations,
                }
            },
        )
}

fn template_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => Just(
            r#"{"$schema":"https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#","languageVersion":"2.1-experimental","contentVersion":"1.0.0.0","imports":{"Radius":{"provider":"Radius","version":"latest"}},"resources":{"app":{"import":"Radius","type":"Applications.Core/applications@2023-10-01-preview","properties":{"name":"app","properties":{"environment":"env"}}}}}"#
                .to_string()
        ),
        2 => pick(&[r#"{"resources":{}}"#, r#"{"resources":[]}"#, "", " ", "{", "[]", "null",
            r#"{"resources":5}"#, r#"{"resources":{}} trailing"#]),
        1 => "\\PC{0,40}",
        1 => huge().prop_map(|text| format!("{{\"resources\": {{}}, \"x\": \"{text}")),
    ]
    .boxed()
}

fn template_phase() -> impl Strategy<Value = TemplatePhase> {
    prop::sample::select(TemplatePhase::ALL.to_vec())
}

fn message() -> BoxedStrategy<String> {
    prop_oneof![8 => "[a-z ]{0,20}", 1 => "\\PC{0,20}", 1 => huge()].boxed()
}

/// A message from Radius, now and then longer than a status message may be.
fn radius_message() -> BoxedStrategy<String> {
    prop_oneof![8 => "[a-z ]{0,20}", 1 => "\\PC{0,20}", 1 => "[a-z ]{4000,8000}", 1 => huge()]
        .boxed()
}

fn condition() -> impl Strategy<Value = Condition> {
    (
        pick(&["Ready", "Other"]),
        prop::sample::select(vec![
            ConditionStatus::True,
            ConditionStatus::False,
            ConditionStatus::Unknown,
        ]),
        pick(&["", "Deployed", "Failed"]),
        message(),
    )
        .prop_map(|(kind, status, reason, message)| Condition {
            kind,
            status,
            reason,
            message,
        })
}

fn operation() -> impl Strategy<Value = OperationObservation> {
    let result = prop_oneof![
        prop_oneof![
            Just(None),
            any::<u32>().prop_map(Some),
            (0u32..10_000).prop_map(Some)
        ]
        .prop_map(|retry_after_ms| OperationResult::InProgress { retry_after_ms }),
        ids().prop_map(|output_resources| OperationResult::Succeeded { output_resources }),
        (pick(&["Conflict", "InvalidTemplate", ""]), radius_message())
            .prop_map(|(code, message)| OperationResult::Failed(RadiusError { code, message })),
        Just(OperationResult::Canceled),
        Just(OperationResult::NotFound),
        radius_message().prop_map(OperationResult::PollError),
    ];
    (
        prop::sample::select(vec![OperationKind::Deployment, OperationKind::Deletion]),
        prop_oneof![2 => pick(&["h1", "h2", ""]), 1 => radius_id()],
        result,
    )
        .prop_map(|(kind, subject, result)| OperationObservation {
            kind,
            subject,
            result,
        })
}

fn owned_resources(outputs: Vec<String>) -> impl Strategy<Value = Vec<OwnedResource>> {
    let few = vec(
        (
            name(),
            radius_id(),
            prop::bool::weighted(0.2),
            pick(&["Ready", "Deleting", "Failed", "Missing", "", "x"]),
            prop::option::weighted(0.2, 0u64..100_000),
        )
            .prop_map(
                |(name, radius_id, deletion_requested, phase, missing_age_ms)| OwnedResource {
                    name,
                    radius_id,
                    deletion_requested,
                    phase,
                    missing_age_ms,
                },
            ),
        0..6,
    );
    // Or: the first `k` outputs already have their resource.
    let prefix = (0..=outputs.len()).prop_map(move |k| {
        outputs[..k]
            .iter()
            .enumerate()
            .map(|(n, id)| OwnedResource {
                name: format!("r{n}"),
                radius_id: id.clone(),
                deletion_requested: false,
                phase: "Ready".to_string(),
                missing_age_ms: None,
            })
            .collect()
    });
    prop_oneof![few, prefix]
}

fn template_observation() -> impl Strategy<Value = TemplateObservation> {
    let spec = (
        template_text(),
        pick(&["", "{}", r#"{"a":{"value":1}}"#, "[]", "{", "null"]),
        provider_config(),
    )
        .prop_map(|(template, parameters, provider_config)| TemplateSpec {
            template,
            parameters,
            provider_config,
        });
    let status = (
        proptest::option::of(template_phase()),
        message(),
        0i64..4,
        proptest::option::of(pick(&["h1", "h2", ""])),
        ids(),
        vec(condition(), 0..2),
    )
        .prop_map(
            |(phase, message, observed_generation, status_hash, output_resources, conditions)| {
                TemplateStatus {
                    phase,
                    message,
                    observed_generation,
                    status_hash,
                    output_resources,
                    conditions,
                }
            },
        );
    let dependency = (
        name(),
        any::<bool>(),
        proptest::option::of(template_phase()),
    )
        .prop_map(|(name, exists, phase)| Dependency {
            name,
            exists,
            phase,
        });
    (
        meta(TEMPLATE_FINALIZER),
        spec,
        pick(&["h1", "h2", ""]),
        status,
        proptest::option::of(operation()),
        vec(dependency, 0..3),
    )
        .prop_flat_map(|(meta, spec, spec_hash, status, operation, dependencies)| {
            let outputs = status.output_resources.clone();
            owned_resources(outputs).prop_map(move |owned_resources| TemplateObservation {
                meta: meta.clone(),
                spec: spec.clone(),
                spec_hash: spec_hash.clone(),
                status: status.clone(),
                owned_resources,
                operation: operation.clone(),
                dependencies: dependencies.clone(),
                ..Default::default()
            })
        })
}

fn resource_observation() -> impl Strategy<Value = ResourceObservation> {
    let status = (
        proptest::option::of(prop::sample::select(ResourcePhase::ALL.to_vec())),
        message(),
        vec(condition(), 0..2),
    )
        .prop_map(|(phase, message, conditions)| ResourceStatus {
            phase,
            message,
            conditions,
        });
    let owner = (
        name(),
        pick(&["u1", "u2"]),
        proptest::option::of(pick(&["u1", "u2", ""])),
        prop::bool::weighted(0.3),
        annotations(),
        provider_config(),
    )
        .prop_map(
            |(name, reference_uid, found_uid, deletion_requested, annotations, provider_config)| {
                OwnerTemplate {
                    name,
                    reference_uid,
                    found_uid,
                    deletion_requested,
                    annotations,
                    provider_config,
                }
            },
        );
    (
        meta(RESOURCE_FINALIZER),
        output_id(),
        status,
        proptest::option::of(owner),
        proptest::option::of(operation()),
    )
        .prop_map(
            |(meta, radius_id, status, owner, operation)| ResourceObservation {
                meta,
                radius_id,
                status,
                owner,
                operation,
                ..Default::default()
            },
        )
}

#[path = "support/guard_rails.rs"]
mod guard_rails;
use guard_rails::{MAX_ACTIONS, guard_resource, guard_template};

// ----- properties ------------------------------------------------------------------

proptest! {
    #![proptest_config(config(192))]

    /// Never a panic; the same observation gets the same answer; a plan
    /// passes the host's guard rails.
    #[test]
    fn template_decisions_pass_the_guard_rails(observation in template_observation()) {
        let decided = decide_template(&observation);
        prop_assert_eq!(&decided, &decide_template(&observation), "deterministic");
        if let Ok(plan) = decided {
            prop_assert!(plan.actions.len() <= MAX_ACTIONS, "{} actions", plan.actions.len());
            if let Err(why) = guard_template(&observation, &plan) {
                prop_assert!(false, "the host would refuse the plan: {}", why);
            }
        }
    }

    #[test]
    fn resource_decisions_pass_the_guard_rails(observation in resource_observation()) {
        let decided = decide_resource(&observation);
        prop_assert_eq!(&decided, &decide_resource(&observation), "deterministic");
        if let Ok(plan) = decided {
            prop_assert!(plan.actions.len() <= MAX_ACTIONS, "{} actions", plan.actions.len());
            if let Err(why) = guard_resource(&observation, &plan) {
                prop_assert!(false, "the host would refuse the plan: {}", why);
            }
        }
    }

    /// `radapp.io/reconcile-policy`: one of three values (trimmed), absent
    /// or empty means manage; anything else is an error naming the
    /// annotation, of bounded length.
    #[test]
    fn reconcile_mode_accepts_exactly_its_values(value in proptest::option::of(annotation_value())) {
        let mut annotations = BTreeMap::new();
        if let Some(value) = &value {
            annotations.insert(RECONCILE_POLICY.to_string(), value.clone());
        }
        let expected = match value.as_deref().map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("manage") => Some(ReconcileMode::Manage),
            Some("skip") => Some(ReconcileMode::Skip),
            Some("detach-on-delete") => Some(ReconcileMode::DetachOnDelete),
            Some(_) => None,
        };
        match (reconcile_mode(&annotations), expected) {
            (Ok(mode), Some(expected)) => prop_assert_eq!(mode, expected),
            (Err(message), None) => {
                prop_assert!(message.contains(RECONCILE_POLICY));
                prop_assert!(message.len() <= 1024, "a {}-byte message", message.len());
            }
            (got, expected) => prop_assert!(false, "{:?} for {:?}, expected {:?}", got, value, expected),
        }
    }

    /// `radapp.io/hold` is "true" in any case, trimmed; nothing else holds.
    /// A value other than true, false or empty comes with a short warning
    /// naming the annotation.
    #[test]
    fn hold_is_true_in_any_case(value in proptest::option::of(annotation_value()), upper in vec(any::<bool>(), 4)) {
        let mut annotations = BTreeMap::new();
        if let Some(value) = &value {
            annotations.insert(HOLD.to_string(), value.clone());
        }
        let expected = value.as_deref().is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        prop_assert_eq!(is_held(&annotations), expected);
        let understood = value.as_deref().is_none_or(|v| {
            matches!(v.trim().to_ascii_lowercase().as_str(), "" | "true" | "false")
        });
        match hold(&annotations).warning {
            None => prop_assert!(understood, "no warning for {:?}", value),
            Some(warning) => {
                prop_assert!(!understood, "a warning for {:?}", value);
                prop_assert!(warning.contains(HOLD), "{}", warning);
                prop_assert!(warning.len() <= 1024, "a {}-byte warning", warning.len());
            }
        }
        let spelled: String = "true"
            .chars()
            .zip(&upper)
            .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
            .collect();
        annotations.insert(HOLD.to_string(), format!(" {spelled}\t"));
        prop_assert!(is_held(&annotations));
    }

    /// `radapp.io/deployment-retry`: `never` or a whole number of seconds or
    /// minutes (trimmed, any case); anything else is the default, 30s, with
    /// a short warning naming the annotation.
    #[test]
    fn deployment_retry_is_understood_or_the_default(value in prop_oneof![
        annotation_value(),
        (
            0u64..2_000,
            pick(&["s", "m", "S", "M", "h", ""]),
            pick(&["", " ", "\t"]),
            pick(&["", "", "", "+", "-", "0"]),
            pick(&["", "", "", " ", "\t"]),
        )
            .prop_map(|(n, unit, pad, sign, gap)| format!("{pad}{sign}{n}{gap}{unit}{pad}")),
        "[0-9]{19,30}[smSM]",
    ]) {
        let annotations = [(DEPLOYMENT_RETRY.to_string(), value.clone())].into();
        let read = deployment_retry(&annotations);
        let normalized = value.trim().to_ascii_lowercase();
        // A whole number in decimal digits, greater than 0, then the unit;
        // past u64 it is capped like any other long delay.
        let number = normalized
            .strip_suffix('s')
            .map(|n| (n, 1_000u64))
            .or_else(|| normalized.strip_suffix('m').map(|n| (n, 60_000)))
            .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .filter(|(n, _)| n.bytes().any(|b| b != b'0'));
        let expected = match (normalized.as_str(), number) {
            ("never", _) => Some(DeploymentRetry::Never),
            ("", _) => Some(DeploymentRetry::Backoff { base_ms: DEFAULT_RETRY_BASE_MS }),
            (_, Some((n, unit))) => Some(DeploymentRetry::Backoff {
                base_ms: n.parse::<u64>().map_or(MAX_RETRY_MS, |n| n.saturating_mul(unit).min(MAX_RETRY_MS)),
            }),
            _ => None,
        };
        match (expected, read.warning) {
            (Some(expected), None) => prop_assert_eq!(read.value, expected),
            (None, Some(warning)) => {
                prop_assert_eq!(read.value, DeploymentRetry::Backoff { base_ms: DEFAULT_RETRY_BASE_MS });
                prop_assert!(warning.contains(DEPLOYMENT_RETRY), "{}", warning);
                prop_assert!(warning.len() <= 1024, "a {}-byte warning", warning.len());
            }
            (expected, warning) => prop_assert!(false, "{:?} read as {:?} with {:?}, expected {:?}", value, read.value, warning, expected),
        }
    }

    /// The policy's `depends_on` is the model's: trimmed, no empties, no
    /// duplicates, no entries that cannot be object names, in the order
    /// written.
    #[test]
    fn depends_on_is_clean(value in annotation_value()) {
        let mut annotations = BTreeMap::new();
        annotations.insert(DEPENDS_ON.to_string(), value.clone());
        let names = depends_on(&annotations);
        let mut expected: Vec<String> = Vec::new();
        for part in value
            .split(',')
            .map(str::trim)
            .filter(|p| radwasm_policy_model::is_object_name(p))
        {
            if !expected.iter().any(|seen| seen == part) {
                expected.push(part.to_string());
            }
        }
        prop_assert_eq!(names, expected);
    }
}

// ----- regressions and open findings -------------------------------------------------

fn template_with(annotations: &[(&str, String)]) -> TemplateObservation {
    TemplateObservation {
        meta: ObjectMeta {
            name: "app".to_string(),
            namespace: "default".to_string(),
            uid: "u1".to_string(),
            generation: 1,
            finalizers: vec![TEMPLATE_FINALIZER.to_string()],
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..Default::default()
        },
        spec: TemplateSpec {
            template: r#"{"resources":{}}"#.to_string(),
            parameters: "{}".to_string(),
            provider_config: format!(
                r#"{{"radius":{{"type":"Radius","value":{{"scope":"{DEFAULT}"}}}}}}"#
            ),
        },
        spec_hash: "h1".to_string(),
        ..Default::default()
    }
}

fn assert_accepted(observation: &TemplateObservation) {
    let plan = decide_template(observation).expect("decides");
    if let Err(why) = guard_template(observation, &plan) {
        panic!("the host would refuse the plan: {why}");
    }
}

/// A 40 kB `reconcile-policy` (or `deployment-retry`) value was quoted
/// whole in the Failed status message: the host refused the plan, so the
/// template never showed why it failed. (A `deployment-retry` value not
/// understood is now a Warning event; it is quoted short there.)
#[test]
fn regression_long_annotation_values_are_quoted_short() {
    for key in [RECONCILE_POLICY, "radapp.io/deployment-retry"] {
        let observation = template_with(&[(key, "x".repeat(40_000))]);
        assert_accepted(&observation);
        let plan = decide_template(&observation).expect("decides");
        let message = template_messages(&plan)
            .into_iter()
            .find(|message| message.contains(key))
            .unwrap_or_default();
        assert!(
            message.contains(key) && message.len() < 1024,
            "{key}: {message}"
        );
    }
}

/// `reconcile-policy` ignores case, like `hold` and `deployment-retry`.
#[test]
fn regression_reconcile_policy_ignores_case() {
    for (value, mode) in [
        ("Skip", ReconcileMode::Skip),
        (" DETACH-ON-DELETE ", ReconcileMode::DetachOnDelete),
        ("Manage", ReconcileMode::Manage),
    ] {
        let annotations = [(RECONCILE_POLICY.to_string(), value.to_string())].into();
        assert_eq!(reconcile_mode(&annotations), Ok(mode), "{value}");
    }
}

/// Every message of a plan, status and events.
fn template_messages(plan: &TemplatePlan) -> Vec<String> {
    plan.actions
        .iter()
        .flat_map(|action| match action {
            TemplateAction::SetStatus(update) => update
                .message
                .iter()
                .cloned()
                .chain(update.conditions.iter().map(|c| c.message.clone()))
                .collect(),
            TemplateAction::EmitEvent(event) => vec![event.message.clone()],
            _ => Vec::new(),
        })
        .collect()
}

/// The messages quoting a long value are cut visibly, short enough for the
/// host, and still say what they are about.
fn assert_cut_short(messages: &[String], about: &str) {
    assert!(!messages.is_empty(), "no message");
    for message in messages {
        assert!(
            message.len() <= 16 * 1024,
            "a {}-byte message",
            message.len()
        );
        assert!(
            message.contains("bytes in all)"),
            "not visibly cut: {message:.200}"
        );
        assert!(message.contains(about), "{message:.200}");
    }
}

/// A Radius error message was copied whole into status and events; one
/// longer than 32 KiB made the host refuse the plan.
#[test]
fn regression_radius_errors_longer_than_a_status_message() {
    let mut observation = template_with(&[]);
    observation.operation = Some(OperationObservation {
        kind: OperationKind::Deployment,
        subject: "h1".to_string(),
        result: OperationResult::Failed(RadiusError {
            code: "InvalidTemplate".to_string(),
            message: "x".repeat(40_000),
        }),
    });
    assert_accepted(&observation);
    let plan = decide_template(&observation).expect("decides");
    assert_cut_short(
        &template_messages(&plan),
        "deployment failed: InvalidTemplate: xxx",
    );
}

/// `waiting for dependencies: ...` listed the depends-on names whole.
#[test]
fn regression_depends_on_names_longer_than_a_status_message() {
    let many: Vec<String> = (0..5_000).map(|n| format!("template-{n}")).collect();
    let observation = template_with(&[(DEPENDS_ON, many.join(","))]);
    assert_accepted(&observation);
    let plan = decide_template(&observation).expect("decides");
    assert_cut_short(&template_messages(&plan), "waiting for dependencies: ");
    // One name longer than any object name is refused, quoted cut short.
    let observation = template_with(&[(DEPENDS_ON, "x".repeat(40_000))]);
    assert_accepted(&observation);
    let plan = decide_template(&observation).expect("decides");
    assert_cut_short(
        &template_messages(&plan),
        "annotation radapp.io/depends-on lists \"xxx",
    );
}

/// `tracking {id}` quoted a `DeploymentResource`'s `spec.id` whole, and the
/// CRD does not bound its length.
#[test]
fn regression_resource_ids_longer_than_a_status_message() {
    let observation = ResourceObservation {
        meta: ObjectMeta {
            name: "r".to_string(),
            namespace: "default".to_string(),
            finalizers: vec![RESOURCE_FINALIZER.to_string()],
            ..Default::default()
        },
        radius_id: format!(
            "{DEFAULT}/providers/Applications.Core/containers/{}",
            "x".repeat(40_000)
        ),
        ..Default::default()
    };
    let plan = decide_resource(&observation).expect("decides");
    if let Err(why) = guard_resource(&observation, &plan) {
        panic!("the host would refuse the plan: {why}");
    }
    let message = plan
        .actions
        .iter()
        .find_map(|action| match action {
            ResourceAction::SetStatus(update) => update.message.clone(),
            _ => None,
        })
        .expect("a status message");
    assert_cut_short(&[message], "tracking /planes/");
}

/// An output resource id the scope grammar refuses became a
/// `createResource` the host refused, and with it the whole plan. It is now
/// skipped, counted in the message and named in a Warning event, whether
/// the template settles, follows its deployment or is being deleted.
#[test]
fn regression_output_resources_the_grammar_refuses() {
    let bad = format!("{DEFAULT}/providers/Applications.Core/containers/a b");
    let good = format!("{DEFAULT}/providers/Applications.Core/containers/c0");
    let outputs = vec![bad.clone(), good.clone(), bad.clone()];
    let mut settled = template_with(&[]);
    settled.status = TemplateStatus {
        phase: Some(TemplatePhase::Ready),
        observed_generation: 1,
        status_hash: Some("h1".to_string()),
        output_resources: outputs.clone(),
        ..Default::default()
    };
    let mut followed = template_with(&[]);
    followed.operation = Some(OperationObservation {
        kind: OperationKind::Deployment,
        subject: "h1".to_string(),
        result: OperationResult::Succeeded {
            output_resources: outputs.clone(),
        },
    });
    let mut deleted = followed.clone();
    deleted.meta.deletion_requested = true;
    for observation in [&settled, &followed, &deleted] {
        assert_accepted(observation);
        let plan = decide_template(observation).expect("decides");
        let created: Vec<&str> = plan
            .actions
            .iter()
            .filter_map(|action| match action {
                TemplateAction::CreateResource(create) => Some(create.radius_id.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(created, [good.as_str()]);
        let warnings: Vec<&Event> = plan
            .actions
            .iter()
            .filter_map(|action| match action {
                TemplateAction::EmitEvent(event) if event.reason == "InvalidOutputResource" => {
                    Some(event)
                }
                _ => None,
            })
            .collect();
        assert_eq!(warnings.len(), 1, "{:?}", plan.actions);
        assert_eq!(warnings[0].event_type, EventType::Warning);
        assert!(
            warnings[0]
                .message
                .contains("not tracking 1 output resources")
                && warnings[0].message.contains(&format!("{bad:?}")),
            "{}",
            warnings[0].message
        );
    }
    // Once the settled status says so, the warning is not repeated.
    let plan = decide_template(&settled).expect("decides");
    let TemplateAction::SetStatus(update) = plan
        .actions
        .iter()
        .find(|action| matches!(action, TemplateAction::SetStatus(_)))
        .expect("a status")
    else {
        unreachable!()
    };
    let mut again = settled.clone();
    again.status.message = update.message.clone().expect("a message");
    again.status.conditions = update.conditions.clone();
    again.owned_resources = vec![OwnedResource {
        name: "c0".to_string(),
        radius_id: good.clone(),
        deletion_requested: false,
        phase: "Ready".to_string(),
        missing_age_ms: None,
    }];
    assert_eq!(
        decide_template(&again).expect("decides").actions,
        Vec::<TemplateAction>::new()
    );
}

/// `radapp.io/hold: -1` was silently taken as false. It still is (the
/// default), but a Warning event names the annotation and the value, once
/// per decision; so does a `deployment-retry` value not understood.
#[test]
fn regression_annotation_values_not_understood_are_warned_about() {
    for (annotations, named) in [
        (vec![(HOLD, "-1".to_string())], vec![HOLD]),
        (vec![(HOLD, "x".repeat(40_000))], vec![HOLD]),
        (
            vec![(DEPLOYMENT_RETRY, "soon".to_string())],
            vec![DEPLOYMENT_RETRY],
        ),
        (
            vec![
                (HOLD, " YES ".to_string()),
                (DEPLOYMENT_RETRY, "1h".to_string()),
            ],
            vec![HOLD, DEPLOYMENT_RETRY],
        ),
    ] {
        let observation = template_with(&annotations);
        assert_accepted(&observation);
        let plan = decide_template(&observation).expect("decides");
        assert!(
            plan.actions
                .iter()
                .any(|action| matches!(action, TemplateAction::StartDeployment(_))),
            "not held, deploys: {:?}",
            plan.actions
        );
        let warnings: Vec<&Event> = plan
            .actions
            .iter()
            .filter_map(|action| match action {
                TemplateAction::EmitEvent(event) if event.reason == "InvalidAnnotation" => {
                    Some(event)
                }
                _ => None,
            })
            .collect();
        assert_eq!(warnings.len(), named.len(), "{warnings:?}");
        for (warning, name) in warnings.iter().zip(&named) {
            assert_eq!(warning.event_type, EventType::Warning);
            assert!(
                warning
                    .message
                    .starts_with(&format!("annotation {name}: value ")),
                "{}",
                warning.message
            );
            assert!(warning.message.len() < 1024, "{}", warning.message);
        }
    }
}

/// A template nested 100,000 levels deep was reported as "must be a JSON
/// object" (a top-level array) or accepted (nested inside the object), and
/// the host then failed to parse it.
#[test]
fn regression_deep_templates_are_nested_too_deeply() {
    for template in [
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!(
            r#"{{"resources":{{}},"x":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
    ] {
        let mut observation = template_with(&[]);
        observation.spec.template = template;
        assert_accepted(&observation);
        let plan = decide_template(&observation).expect("decides");
        let messages = template_messages(&plan);
        assert!(!messages.is_empty());
        for message in messages {
            assert!(
                message.starts_with("spec.template: is nested too deeply"),
                "{message}"
            );
        }
    }
}

/// Found by the `annotations` fuzz target: `deployment-retry: 2 M ` was read
/// as two minutes (the number was trimmed again after the unit came off, and
/// `u64::from_str` takes a leading `+`), though the value is documented as
/// `Ns` or `Nm`. Now only decimal digits make the number; one past u64 is
/// capped like any other long delay.
#[test]
fn regression_fuzz_deployment_retry_whole_numbers_only() {
    let retry =
        |value: &str| deployment_retry(&[(DEPLOYMENT_RETRY.to_string(), value.to_string())].into());
    for bad in ["2 M ", "2 m", "+5s", "5\ts", "-1s", "0x10s", "٣s", "00s"] {
        let read = retry(bad);
        assert_eq!(
            read.value,
            DeploymentRetry::Backoff {
                base_ms: DEFAULT_RETRY_BASE_MS
            },
            "{bad:?}"
        );
        let warning = read.warning.expect(bad);
        assert!(warning.contains(DEPLOYMENT_RETRY), "{warning}");
    }
    for (good, base_ms) in [
        (" 2M ", 120_000),
        ("05s", 5_000),
        ("99999999999999999999999s", MAX_RETRY_MS),
        ("18446744073709551615m", MAX_RETRY_MS),
    ] {
        let read = retry(good);
        assert_eq!(read.warning, None, "{good:?}");
        assert_eq!(read.value, DeploymentRetry::Backoff { base_ms }, "{good:?}");
    }
}
