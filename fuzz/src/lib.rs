//! Helpers shared by the fuzz targets: the host's guard rails restated (as in
//! `guests/policy-core/tests/props.rs`), observations built from fuzz input,
//! and splitting raw input into parts.

use std::collections::BTreeMap;

use arbitrary::{Result, Unstructured};
use radwasm_policy_model::annotations::{
    DEPENDS_ON, DEPLOYMENT_RETRY, DRIFT, HOLD, RECONCILE_POLICY,
};

use radwasm_policy_model::*;

/// Split raw input at NUL bytes (which JSON and the texts read here never
/// need) into at most `n` parts; missing parts are empty.
pub fn split_nul(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts: Vec<&[u8]> = data.splitn(n, |&b| b == 0).collect();
    parts.resize(n, &[]);
    parts
}

#[path = "../../guests/policy-core/tests/support/guard_rails.rs"]
mod guard_rails;
pub use guard_rails::{MAX_ACTIONS, MAX_MESSAGE_BYTES, guard_resource, guard_template};

/// Decide for `observation` twice: never a panic, the same answer both
/// times, and a plan the host's guard rails accept.
pub fn check_template_decision(observation: &TemplateObservation) {
    let decided = radwasm_policy_core::decide_template(observation);
    assert_eq!(
        decided,
        radwasm_policy_core::decide_template(observation),
        "not deterministic"
    );
    if let Ok(plan) = &decided
        && let Err(why) = guard_template(observation, plan)
    {
        panic!("the host would refuse the plan: {why}\n{plan:?}");
    }
}

/// As [`check_template_decision`], for a `DeploymentResource`.
pub fn check_resource_decision(observation: &ResourceObservation) {
    let decided = radwasm_policy_core::decide_resource(observation);
    assert_eq!(
        decided,
        radwasm_policy_core::decide_resource(observation),
        "not deterministic"
    );
    if let Ok(plan) = &decided
        && let Err(why) = guard_resource(observation, plan)
    {
        panic!("the host would refuse the plan: {why}\n{plan:?}");
    }
}

// ----- observations from fuzz input -------------------------------------------

const DEFAULT: &str = "/planes/radius/local/resourceGroups/default";

/// One of `items`, or now and then any text.
fn pick(u: &mut Unstructured<'_>, items: &[&str]) -> Result<String> {
    if u.ratio(7, 8)? {
        Ok(u.choose(items)?.to_string())
    } else {
        u.arbitrary()
    }
}

/// A long text (a message, value or id that quotes user input without
/// bound would break the 32 KiB limit).
fn huge(u: &mut Unstructured<'_>) -> Result<String> {
    let unit = *u.choose(&["x", "é", ",", " ", "a,"])?;
    Ok(unit.repeat(u.int_in_range(40_000..=70_000)?))
}

/// Text, mostly from `items`, sometimes very long.
fn text(u: &mut Unstructured<'_>, items: &[&str]) -> Result<String> {
    if u.ratio(1, 40)? {
        huge(u)
    } else {
        pick(u, items)
    }
}

fn list<T>(
    u: &mut Unstructured<'_>,
    max: usize,
    mut item: impl FnMut(&mut Unstructured<'_>) -> Result<T>,
) -> Result<Vec<T>> {
    let n = u.int_in_range(0..=max)?;
    (0..n).map(|_| item(u)).collect()
}

fn scope_text(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(3, 4)? {
        return Ok(DEFAULT.to_string());
    }
    pick(
        u,
        &[
            "/planes/radius/local/resourceGroups/other",
            "/Planes/Radius/local/resourcegroups/DEFAULT",
            "/planes/radius/local/resourceGroups/default/",
            "/planes/radius/local/resourceGroups/..",
            "/planes/radius/local/resourceGroups/providers",
            "/planes/aws/aws/accounts/1",
            "default",
            "",
        ],
    )
}

fn provider_config(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(6, 8)? {
        let scope = scope_text(u)?;
        return Ok(
            serde_json::json!({"radius": {"type": "Radius", "value": {"scope": scope}}})
                .to_string(),
        );
    }
    pick(
        u,
        &[
            "",
            "{}",
            "{",
            "null",
            "[]",
            r#"{"radius":{"value":{"scope":5}}}"#,
        ],
    )
}

fn radius_id(u: &mut Unstructured<'_>) -> Result<String> {
    match u.int_in_range(0..=9u8)? {
        0..=6 => {
            let kind = u.choose(&["containers", "environments", "applications", "gateways"])?;
            let n = u.int_in_range(0..=11u8)?;
            Ok(format!("{DEFAULT}/providers/Applications.Core/{kind}/c{n}"))
        }
        7 => {
            let scope = scope_text(u)?;
            let n = u.int_in_range(0..=3u8)?;
            let case = *u.choose(&["", "Applications.Core/containers/", "A.B/t/x/"])?;
            Ok(format!("{scope}/providers/{case}c{n}"))
        }
        8 => pick(
            u,
            &[
                "",
                "c1",
                "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/x/../../../../other/providers/A.B/t/n",
                "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/a?b",
                "/PLANES/radius/local/resourceGroups/DEFAULT/providers/Applications.Core/containers/C1",
                "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers",
            ],
        ),
        _ => {
            let name: String = huge(u)?.chars().filter(|c| c.is_alphanumeric()).collect();
            Ok(format!(
                "{DEFAULT}/providers/Applications.Core/containers/c{name}"
            ))
        }
    }
}

fn ids(u: &mut Unstructured<'_>) -> Result<Vec<String>> {
    if u.ratio(1, 30)? {
        let n = u.int_in_range(900..=2200usize)?;
        return Ok((0..n)
            .map(|i| format!("{DEFAULT}/providers/Applications.Core/containers/c{i}"))
            .collect());
    }
    list(u, 6, radius_id)
}

fn name(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 30)? {
        return Ok("a".repeat(u.int_in_range(250..=300)?));
    }
    pick(
        u,
        &[
            "app", "db", "c0", "c1", "c2", "r0", "r1", "UPPER", "a.b", "-x", "név", " app ", "",
        ],
    )
}

fn annotation_value(u: &mut Unstructured<'_>) -> Result<String> {
    text(
        u,
        &[
            "manage",
            "skip",
            "detach-on-delete",
            " skip ",
            "Skip",
            "",
            "true",
            " TRUE ",
            "false",
            "yes",
            "app",
            "app,db",
            " db , app ,, db",
            "never",
            "30s",
            "2m",
            "0s",
            "1s",
            "redeploy",
            "report",
        ],
    )
}

fn annotations(u: &mut Unstructured<'_>) -> Result<BTreeMap<String, String>> {
    let mut annotations = BTreeMap::new();
    for key in [
        RECONCILE_POLICY,
        HOLD,
        DEPENDS_ON,
        DEPLOYMENT_RETRY,
        DRIFT,
        "radapp.io/other",
    ] {
        if u.ratio(1, 4)? {
            annotations.insert(key.to_string(), annotation_value(u)?);
        }
    }
    Ok(annotations)
}

/// The namespace's labels and annotations (the default policy reads
/// neither; a layer may).
fn namespace_meta(u: &mut Unstructured<'_>) -> Result<NamespaceMeta> {
    Ok(NamespaceMeta {
        labels: annotations(u)?,
        annotations: annotations(u)?,
    })
}

fn generation(u: &mut Unstructured<'_>) -> Result<i64> {
    Ok(match u.int_in_range(0..=5u8)? {
        0 => i64::MAX,
        1 => -1,
        2 => u.arbitrary()?,
        _ => u.int_in_range(0..=3)?,
    })
}

fn meta(u: &mut Unstructured<'_>, finalizer: &str) -> Result<ObjectMeta> {
    Ok(ObjectMeta {
        name: name(u)?,
        namespace: pick(u, &["default", "", "ns"])?,
        uid: pick(u, &["u1", "u2", ""])?,
        generation: generation(u)?,
        deletion_requested: u.ratio(1, 4)?,
        finalizers: list(u, 2, |u| pick(u, &[finalizer, "other"]))?,
        labels: BTreeMap::new(),
        annotations: annotations(u)?,
    })
}

const TEMPLATE: &str = r#"{"$schema":"https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#","languageVersion":"2.1-experimental","contentVersion":"1.0.0.0","imports":{"Radius":{"provider":"Radius","version":"latest"}},"resources":{"app":{"import":"Radius","type":"Applications.Core/applications@2023-10-01-preview","properties":{"name":"app","properties":{"environment":"env"}}}}}"#;

fn template_text(u: &mut Unstructured<'_>) -> Result<String> {
    match u.int_in_range(0..=9u8)? {
        0..=5 => Ok(TEMPLATE.to_string()),
        6 => {
            let depth = u.int_in_range(1..=300usize)?;
            Ok(format!(
                r#"{{"resources":{{}},"x":{}{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            ))
        }
        7 => Ok(format!(r#"{{"resources": {{}}, "x": "{}"#, huge(u)?)),
        _ => pick(
            u,
            &[
                r#"{"resources":{}}"#,
                r#"{"resources":[]}"#,
                "",
                " ",
                "{",
                "[]",
                "null",
                r#"{"resources":5}"#,
                r#"{"resources":{}} trailing"#,
            ],
        ),
    }
}

fn phase(u: &mut Unstructured<'_>) -> Result<Option<TemplatePhase>> {
    if u.arbitrary()? {
        Ok(Some(*u.choose(TemplatePhase::ALL)?))
    } else {
        Ok(None)
    }
}

fn message(u: &mut Unstructured<'_>) -> Result<String> {
    text(u, &["", "deployed", "failed to deploy"])
}

fn radius_message(u: &mut Unstructured<'_>) -> Result<String> {
    if u.ratio(1, 20)? {
        return Ok("m ".repeat(u.int_in_range(2000..=4100)?));
    }
    message(u)
}

fn condition(u: &mut Unstructured<'_>) -> Result<Condition> {
    Ok(Condition {
        kind: pick(u, &["Ready", "Other"])?,
        status: u
            .choose(&[
                ConditionStatus::True,
                ConditionStatus::False,
                ConditionStatus::Unknown,
            ])?
            .clone(),
        reason: pick(u, &["", "Deployed", "Failed"])?,
        message: message(u)?,
    })
}

fn radius_error(u: &mut Unstructured<'_>) -> Result<RadiusError> {
    Ok(RadiusError {
        code: pick(u, &["Conflict", "InvalidTemplate", ""])?,
        message: radius_message(u)?,
    })
}

fn age(u: &mut Unstructured<'_>) -> Result<Option<u64>> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 => None,
        1 => Some(u.arbitrary()?),
        _ => Some(u.int_in_range(0..=1_000_000)?),
    })
}

fn operation(u: &mut Unstructured<'_>, spec_hash: &str) -> Result<OperationObservation> {
    let result = match u.int_in_range(0..=6u8)? {
        0 => OperationResult::InProgress {
            retry_after_ms: if u.arbitrary()? {
                Some(u.arbitrary()?)
            } else {
                None
            },
        },
        1 => OperationResult::Succeeded {
            output_resources: ids(u)?,
        },
        2 => OperationResult::Failed(radius_error(u)?),
        3 => OperationResult::Canceled,
        4 => OperationResult::NotFound,
        5 => OperationResult::PollError(radius_message(u)?),
        _ => OperationResult::Refused(radius_error(u)?),
    };
    let kind = u
        .choose(&[OperationKind::Deployment, OperationKind::Deletion])?
        .clone();
    let subject = match u.int_in_range(0..=2u8)? {
        0 => spec_hash.to_string(),
        1 => radius_id(u)?,
        _ => pick(u, &["h1", "h2", ""])?,
    };
    Ok(OperationObservation {
        kind,
        subject,
        result,
    })
}

fn failure(u: &mut Unstructured<'_>, subject: &str) -> Result<FailureRecord> {
    Ok(FailureRecord {
        subject: if u.arbitrary()? {
            subject.to_string()
        } else {
            pick(u, &["h1", "h2", ""])?
        },
        count: u.arbitrary()?,
        age_ms: u.arbitrary()?,
        error: radius_error(u)?,
    })
}

/// A `DeploymentTemplate` observation: mostly what the host observes, with
/// hostile values anywhere.
pub fn template_observation(u: &mut Unstructured<'_>) -> Result<TemplateObservation> {
    let meta = meta(u, TEMPLATE_FINALIZER)?;
    let spec = TemplateSpec {
        template: template_text(u)?,
        parameters: pick(u, &["", "{}", r#"{"a":{"value":1}}"#, "[]", "{", "null"])?,
        provider_config: provider_config(u)?,
    };
    let spec_hash = pick(u, &["h1", "h2", ""])?;
    let output_resources = ids(u)?;
    let owned_resources = if u.arbitrary()? {
        let k = u.int_in_range(0..=output_resources.len())?;
        output_resources[..k]
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
    } else {
        list(u, 5, |u| {
            Ok(OwnedResource {
                name: name(u)?,
                radius_id: radius_id(u)?,
                deletion_requested: u.ratio(1, 4)?,
                phase: pick(u, &["Ready", "Deleting", "Failed", "Missing", "", "x"])?,
                missing_age_ms: age(u)?,
            })
        })?
    };
    let status = TemplateStatus {
        phase: phase(u)?,
        message: message(u)?,
        observed_generation: generation(u)?,
        status_hash: if u.arbitrary()? {
            Some(pick(u, &["h1", "h2", ""])?)
        } else {
            None
        },
        output_resources,
        conditions: list(u, 2, condition)?,
    };
    let operation = if u.arbitrary()? {
        Some(operation(u, &spec_hash)?)
    } else {
        None
    };
    let dependencies = list(u, 3, |u| {
        Ok(Dependency {
            name: name(u)?,
            exists: u.arbitrary()?,
            phase: phase(u)?,
        })
    })?;
    let last_failure = if u.ratio(1, 4)? {
        Some(failure(u, &spec_hash)?)
    } else {
        None
    };
    let dependency_cycle = if u.ratio(1, 8)? {
        let mut cycle = vec![meta.name.clone()];
        cycle.extend(list(u, 3, name)?);
        cycle.push(meta.name.clone());
        cycle
    } else {
        Vec::new()
    };
    let deployments = list(u, 4, |u| {
        let n = u.int_in_range(0..=5u8)?;
        Ok(format!(
            "{DEFAULT}/providers/Microsoft.Resources/deployments/app-h{n}"
        ))
    })?;
    Ok(TemplateObservation {
        meta,
        spec,
        spec_hash,
        status,
        owned_resources,
        operation,
        dependencies,
        last_failure,
        dependency_cycle,
        deployments,
        deployed_age_ms: age(u)?,
        namespace: namespace_meta(u)?,
    })
}

/// A `DeploymentResource` observation.
pub fn resource_observation(u: &mut Unstructured<'_>) -> Result<ResourceObservation> {
    let meta = meta(u, RESOURCE_FINALIZER)?;
    let radius_id = radius_id(u)?;
    let status = ResourceStatus {
        phase: if u.arbitrary()? {
            Some(*u.choose(ResourcePhase::ALL)?)
        } else {
            None
        },
        message: message(u)?,
        conditions: list(u, 2, condition)?,
    };
    let owner = if u.ratio(3, 4)? {
        Some(OwnerTemplate {
            name: name(u)?,
            reference_uid: pick(u, &["u1", "u2"])?,
            found_uid: if u.ratio(3, 4)? {
                Some(pick(u, &["u1", "u2", ""])?)
            } else {
                None
            },
            deletion_requested: u.ratio(1, 3)?,
            annotations: annotations(u)?,
            provider_config: provider_config(u)?,
        })
    } else {
        None
    };
    let operation = if u.arbitrary()? {
        Some(operation(u, &radius_id)?)
    } else {
        None
    };
    let last_failure = if u.ratio(1, 4)? {
        Some(failure(u, &radius_id)?)
    } else {
        None
    };
    Ok(ResourceObservation {
        meta,
        radius_id,
        status,
        owner,
        operation,
        last_failure,
        missing_age_ms: age(u)?,
        namespace: namespace_meta(u)?,
    })
}
