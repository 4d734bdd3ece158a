//! Building the observation a policy decides on: the object, what it owns,
//! the templates it depends on, its namespace's labels and annotations (from
//! the namespaces' cache, `namespaces.rs`), and one poll of the recorded
//! Radius operation. Only reads happen here.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use radwasm_policy_model as model;
use sha2::{Digest, Sha256};

use super::{Caches, Context, Error};
use crate::crd::{
    DeploymentResource, DeploymentTemplate, DeploymentTemplateStatus, FailedRequest, LastFailure,
    ResourceOperation,
};
use crate::radius::{self, PollOutcome, ResumeToken};

/// The spec as the three JSON texts the policy and Radius see.
pub struct SpecTexts {
    pub template: String,
    pub parameters: String,
    pub provider_config: String,
}

pub fn spec_texts(template: &DeploymentTemplate) -> SpecTexts {
    SpecTexts {
        template: template.spec.template.clone(),
        parameters: template.spec.parameters_text(),
        provider_config: template.spec.provider_config_text(),
    }
}

/// Hash of the spec: any change to template, parameters or provider config
/// changes it; nothing else does.
pub fn spec_hash(spec: &SpecTexts) -> String {
    let mut hasher = Sha256::new();
    for part in [&spec.template, &spec.parameters, &spec.provider_config] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

fn meta(meta: &ObjectMeta) -> model::ObjectMeta {
    model::ObjectMeta {
        name: meta.name.clone().unwrap_or_default(),
        namespace: meta.namespace.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        generation: meta.generation.unwrap_or_default(),
        deletion_requested: meta.deletion_timestamp.is_some(),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
    }
}

/// A template's deletion tally as its policy sees it: the annotation's
/// counts and those the host keeps unwritten (see `memory::tally`), under
/// the annotation's name. An object not being deleted is shown as it is.
fn with_unwritten_tally(
    mut meta: model::ObjectMeta,
    ctx: &Context,
    object: &DeploymentTemplate,
) -> model::ObjectMeta {
    if !meta.deletion_requested {
        return meta;
    }
    let unwritten = ctx.memory.tallies.unwritten(&super::object::key(object));
    if unwritten == model::annotations::DeletionTally::default() {
        return meta;
    }
    let written = model::annotations::deletion_tally(&meta.annotations).unwrap_or_default();
    let shown = super::memory::add_tallies(written, unwritten);
    if let Ok(text) = serde_json::to_string(&shown) {
        meta.annotations
            .insert(model::annotations::DELETION_TALLY.to_string(), text);
    }
    meta
}

pub fn conditions(conditions: &[Condition]) -> Vec<model::Condition> {
    conditions
        .iter()
        .map(|c| model::Condition {
            kind: c.type_.clone(),
            status: match c.status.as_str() {
                "True" => model::ConditionStatus::True,
                "False" => model::ConditionStatus::False,
                _ => model::ConditionStatus::Unknown,
            },
            reason: c.reason.clone(),
            message: c.message.clone(),
        })
        .collect()
}

/// Everything the template policy needs for one reconcile. What it owns and
/// the templates it depends on are read from the watch caches; only the
/// recorded operation is asked of Radius.
pub async fn template(
    object: &DeploymentTemplate,
    ctx: &Context,
) -> Result<model::TemplateObservation, Error> {
    let caches = ctx.caches()?;
    let spec = &spec_texts(object);
    let spec_hash = &spec_hash(spec);
    let namespace = object.namespace().unwrap_or_default();
    // One clock reading for every age in the observation, so that two times
    // recorded in the same instant compare as equal.
    let now = k8s_openapi::jiff::Timestamp::now();
    let status = object.status.clone().unwrap_or_default();
    let operation = operation(
        ctx,
        &super::object::key(object),
        status.operation.as_deref(),
        status.failed_request.as_deref(),
    )
    .await;
    let just_deployed: &[String] = match operation.as_ref().map(|op| &op.result) {
        Some(model::OperationResult::Succeeded { output_resources }) => output_resources,
        _ => &[],
    };
    let owned_resources = owned_resources(object, ctx, caches, just_deployed, now);
    let last_failure = failure_record(status.last_failure.as_deref(), operation.as_ref());
    let dependencies = dependencies(object, caches);
    let dependency_cycle = dependency_cycle(&object.name_any(), |name| {
        caches
            .templates
            .get(&ObjectRef::new(name).within(&namespace))
            .map(|t| model::annotations::depends_on(t.annotations()))
            .unwrap_or_default()
    });

    Ok(model::TemplateObservation {
        meta: with_unwritten_tally(meta(object.meta()), ctx, object),
        spec: model::TemplateSpec {
            template: spec.template.clone(),
            parameters: spec.parameters.clone(),
            provider_config: spec.provider_config.clone(),
        },
        spec_hash: spec_hash.to_string(),
        status: template_status(object, &status, spec_hash),
        owned_resources,
        operation,
        dependencies,
        last_failure,
        dependency_cycle,
        deployments: super::deployment_records::recorded(object),
        deployed_age_ms: status
            .last_deployed
            .as_ref()
            .map(|at| super::drift::age_ms(at.0, now)),
        namespace: ctx.namespace_meta(&namespace),
    })
}

/// What the template owns: its own children (see `ownership`;
/// `just_deployed` are the outputs of a deployment that just succeeded),
/// and any other child already being deleted, which it waits for but
/// cannot delete again. A child that is neither is not shown to its policy,
/// so no plan can delete it: it is tracked by its own reconcile.
fn owned_resources(
    object: &DeploymentTemplate,
    ctx: &Context,
    caches: &Caches,
    just_deployed: &[String],
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<model::OwnedResource> {
    let namespace = object.namespace().unwrap_or_default();
    let uid = object.uid().unwrap_or_default();
    ctx.owners
        .get(&uid)
        .iter()
        .filter_map(|child| caches.resources.get(child))
        .filter(|r| {
            r.namespace().as_deref() == Some(namespace.as_str())
                && (r.meta().deletion_timestamp.is_some()
                    && r.owner_references()
                        .iter()
                        .any(|o| o.controller == Some(true) && o.uid == uid)
                    || super::ownership::produced_by(object, r, just_deployed))
        })
        .map(|r| model::OwnedResource {
            name: r.name_any(),
            radius_id: r.spec.id.clone(),
            deletion_requested: r.meta().deletion_timestamp.is_some(),
            phase: r
                .status
                .as_ref()
                .and_then(|s| s.phrase.clone())
                .unwrap_or_default(),
            missing_age_ms: r
                .status
                .as_ref()
                .and_then(|s| s.missing_since.as_ref())
                .map(|since| super::drift::age_ms(since.0, now)),
        })
        .collect()
}

/// The templates this one names in `depends-on`, as the cache shows them.
fn dependencies(object: &DeploymentTemplate, caches: &Caches) -> Vec<model::Dependency> {
    let namespace = object.namespace().unwrap_or_default();
    let names = model::annotations::depends_on(object.annotations());
    names
        .into_iter()
        .map(|name| {
            let found = caches
                .templates
                .get(&ObjectRef::new(&name).within(&namespace));
            model::Dependency {
                exists: found.is_some(),
                phase: found
                    .as_ref()
                    .and_then(|t| t.status.as_ref())
                    .and_then(|s| s.phrase.as_deref())
                    .and_then(|p| p.parse().ok()),
                name,
            }
        })
        .collect()
}

/// The template's status as its policy sees it.
fn template_status(
    object: &DeploymentTemplate,
    status: &DeploymentTemplateStatus,
    spec_hash: &str,
) -> model::TemplateStatus {
    model::TemplateStatus {
        phase: status.phrase.as_deref().and_then(|p| p.parse().ok()),
        message: status.message.clone().unwrap_or_default(),
        observed_generation: status.observed_generation.unwrap_or_default(),
        status_hash: status.status_hash.as_ref().map(|stored| {
            // The hash Radius's own controller wrote for this very spec
            // means the same as radwasm's own: deployed, up to date.
            if stored != spec_hash
                && super::radius_hash::written_by_radius_for(&object.spec, stored)
            {
                spec_hash.to_string()
            } else {
                stored.clone()
            }
        }),
        output_resources: status.output_resources.clone(),
        conditions: conditions(&status.conditions),
    }
}

/// The shortest `depends-on` path from `start` back to itself, as names
/// starting and ending with `start`; empty if there is none. `depends_on`
/// gives the names a template lists (none for a template that does not
/// exist). Bounded by the number of templates reachable.
pub fn dependency_cycle(start: &str, depends_on: impl Fn(&str) -> Vec<String>) -> Vec<String> {
    use std::collections::{HashMap, VecDeque};
    let mut came_from: HashMap<String, String> = HashMap::new();
    let mut queue: VecDeque<String> = VecDeque::new();
    for next in depends_on(start) {
        if next == start {
            return vec![start.to_string(), start.to_string()];
        }
        if !came_from.contains_key(&next) {
            came_from.insert(next.clone(), start.to_string());
            queue.push_back(next);
        }
    }
    while let Some(name) = queue.pop_front() {
        for next in depends_on(&name) {
            if next == start {
                // Walk back to the start: name, its parent, ..., the first hop.
                let mut hops = vec![name.clone()];
                let mut at = name.clone();
                while let Some(previous) = came_from.get(&at).filter(|p| *p != start) {
                    hops.push(previous.clone());
                    at = previous.clone();
                }
                hops.reverse();
                let mut path = vec![start.to_string()];
                path.extend(hops);
                path.push(start.to_string());
                return path;
            }
            if !came_from.contains_key(&next) {
                came_from.insert(next.clone(), name.clone());
                queue.push_back(next);
            }
        }
    }
    Vec::new()
}

/// The failure record the policy sees: the one in status, counted forward
/// when this observation reports another failed attempt.
fn failure_record(
    recorded: Option<&LastFailure>,
    operation: Option<&model::OperationObservation>,
) -> Option<model::FailureRecord> {
    let failed = operation.and_then(|op| match &op.result {
        model::OperationResult::Failed(error) | model::OperationResult::Refused(error) => {
            Some((op.subject.clone(), error.clone()))
        }
        model::OperationResult::Canceled => Some((
            op.subject.clone(),
            model::RadiusError {
                code: "Canceled".to_string(),
                message: "the operation was canceled".to_string(),
            },
        )),
        _ => None,
    });
    match (failed, recorded) {
        (Some((subject, error)), recorded) => {
            let earlier = recorded
                .filter(|r| r.subject == subject)
                .map_or(0, |r| r.count);
            Some(model::FailureRecord {
                subject,
                count: earlier.saturating_add(1),
                age_ms: 0,
                error,
            })
        }
        (None, Some(recorded)) => Some(model::FailureRecord {
            subject: recorded.subject.clone(),
            count: recorded.count,
            age_ms: super::drift::age_ms(recorded.time.0, k8s_openapi::jiff::Timestamp::now()),
            error: model::RadiusError {
                code: recorded.code.clone(),
                message: recorded.message.clone(),
            },
        }),
        (None, None) => None,
    }
}

/// Everything the resource policy needs for one reconcile; the owner
/// template is read from the watch cache.
pub async fn resource(
    object: &DeploymentResource,
    ctx: &Context,
) -> Result<model::ResourceObservation, Error> {
    let caches = ctx.caches()?;
    let namespace = object.namespace().unwrap_or_default();
    let owner = object
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "DeploymentTemplate")
        .map(|reference| {
            // A template being deleted goes without waiting for a resource
            // none of its deployments produced (`ownership`): to such a
            // resource it is as good as gone already, so deleting it (by
            // hand, or garbage collection a moment after the template went
            // while the cache still holds it) releases it, never deletes
            // it in Radius.
            let found = caches
                .templates
                .get(&ObjectRef::new(&reference.name).within(&namespace))
                .filter(|template| {
                    template.meta().deletion_timestamp.is_none()
                        || super::ownership::produced_by(template, object, &[])
                });
            model::OwnerTemplate {
                name: reference.name.clone(),
                reference_uid: reference.uid.clone(),
                found_uid: found.as_ref().and_then(|t| t.uid()),
                deletion_requested: found
                    .as_ref()
                    .is_some_and(|t| t.meta().deletion_timestamp.is_some()),
                annotations: found
                    .as_ref()
                    .map(|t| t.annotations().clone())
                    .unwrap_or_else(BTreeMap::new),
                provider_config: found
                    .as_ref()
                    .map(|t| t.spec.provider_config_text())
                    .unwrap_or_default(),
            }
        });
    let status = object.status.clone().unwrap_or_default();
    let operation = operation(
        ctx,
        &super::object::key(object),
        status.operation.as_deref(),
        status.failed_request.as_deref(),
    )
    .await;
    let last_failure = failure_record(status.last_failure.as_deref(), operation.as_ref());
    let missing_age_ms = super::drift::missing_age_ms(ctx, object, &status).await;
    Ok(model::ResourceObservation {
        meta: meta(object.meta()),
        radius_id: object.spec.id.clone(),
        status: model::ResourceStatus {
            phase: status.phrase.as_deref().and_then(|p| p.parse().ok()),
            message: status.message.clone().unwrap_or_default(),
            conditions: conditions(&status.conditions),
        },
        owner,
        operation,
        last_failure,
        missing_age_ms,
        namespace: ctx.namespace_meta(&namespace),
    })
}

/// What the policy is told of the last Radius attempt: the recorded
/// operation, polled once; or else a request Radius refused, as an attempt
/// that failed.
async fn operation(
    ctx: &Context,
    key: &str,
    recorded: Option<&ResourceOperation>,
    failed: Option<&FailedRequest>,
) -> Option<model::OperationObservation> {
    // The operation's URLs Radius gave when the controller started it,
    // while status still records that operation (else forgotten).
    let remembered = ctx
        .memory
        .operations
        .for_record(key, recorded.map(|r| r.resume_token.as_str()));
    match (recorded, failed) {
        (Some(recorded), _) => Some(poll(ctx, recorded, remembered).await),
        (None, Some(failed)) => {
            let deletion = failed.operation_kind == "DELETE";
            Some(model::OperationObservation {
                kind: if deletion {
                    model::OperationKind::Deletion
                } else {
                    model::OperationKind::Deployment
                },
                subject: if deletion {
                    failed.target.clone()
                } else {
                    failed.subject.clone()
                },
                result: model::OperationResult::Refused(model::RadiusError {
                    code: failed.code.clone(),
                    message: failed.message.clone(),
                }),
            })
        }
        (None, None) => None,
    }
}

/// Poll the recorded operation once (through `remembered`, if given) and
/// say what it is doing.
async fn poll(
    ctx: &Context,
    recorded: &ResourceOperation,
    remembered: Option<ResumeToken>,
) -> model::OperationObservation {
    let token = match remembered.map_or_else(|| ResumeToken::decode(&recorded.resume_token), Ok) {
        Ok(token) => token,
        Err(problem) => {
            tracing::warn!(%problem, "dropping an unreadable operation record");
            // Unreadable: report it lost, so the policy forgets it.
            return model::OperationObservation {
                kind: if recorded.operation_kind == "DELETE" {
                    model::OperationKind::Deletion
                } else {
                    model::OperationKind::Deployment
                },
                subject: String::new(),
                result: model::OperationResult::NotFound,
            };
        }
    };
    let (kind, subject) = match token.kind {
        radius::OperationKind::Deployment => {
            (model::OperationKind::Deployment, token.subject.clone())
        }
        radius::OperationKind::Deletion => {
            (model::OperationKind::Deletion, token.resource_id.clone())
        }
    };
    let result = match ctx.radius.poll(&token).await {
        Ok(PollOutcome::InProgress { retry_after }) => model::OperationResult::InProgress {
            retry_after_ms: retry_after.map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
        },
        Ok(PollOutcome::Succeeded { output_resources }) => {
            model::OperationResult::Succeeded { output_resources }
        }
        Ok(PollOutcome::Failed { code, message }) => {
            model::OperationResult::Failed(model::RadiusError { code, message })
        }
        Ok(PollOutcome::Canceled) => model::OperationResult::Canceled,
        Ok(PollOutcome::NotFound) => model::OperationResult::NotFound,
        Err(error) => model::OperationResult::PollError(error.to_string()),
    };
    model::OperationObservation {
        kind,
        subject,
        result,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(template: &str, parameters: &str, provider_config: &str) -> SpecTexts {
        SpecTexts {
            template: template.into(),
            parameters: parameters.into(),
            provider_config: provider_config.into(),
        }
    }

    #[test]
    fn dependency_cycles_are_found_and_named_in_order() {
        let graph = |edges: &'static [(&'static str, &'static str)]| {
            move |name: &str| -> Vec<String> {
                edges
                    .iter()
                    .filter(|(from, _)| *from == name)
                    .map(|(_, to)| to.to_string())
                    .collect()
            }
        };
        assert_eq!(dependency_cycle("a", graph(&[("a", "a")])), ["a", "a"]);
        assert_eq!(
            dependency_cycle("a", graph(&[("a", "b"), ("b", "a")])),
            ["a", "b", "a"]
        );
        assert_eq!(
            dependency_cycle(
                "a",
                graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])
            ),
            ["a", "b", "c", "a"]
        );
        // A cycle elsewhere that does not come back to a is not a's cycle.
        assert!(dependency_cycle("a", graph(&[("a", "b"), ("b", "c"), ("c", "b")])).is_empty());
        assert!(dependency_cycle("a", graph(&[("a", "b"), ("b", "c")])).is_empty());
    }

    #[test]
    fn the_spec_hash_moves_with_every_part_of_the_spec_and_only_with_it() {
        let base = spec_hash(&spec("{}", "{\"a\":{\"value\":1}}", "{}"));
        assert_eq!(base, spec_hash(&spec("{}", "{\"a\":{\"value\":1}}", "{}")));
        assert_ne!(base, spec_hash(&spec("{ }", "{\"a\":{\"value\":1}}", "{}")));
        assert_ne!(base, spec_hash(&spec("{}", "{\"a\":{\"value\":2}}", "{}")));
        assert_ne!(
            base,
            spec_hash(&spec("{}", "{\"a\":{\"value\":1}}", "{\"radius\":{}}"))
        );
        // Moving text between fields is a different spec.
        assert_ne!(
            spec_hash(&spec("ab", "", "")),
            spec_hash(&spec("a", "b", ""))
        );
    }
}
