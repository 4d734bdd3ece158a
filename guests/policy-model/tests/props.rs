//! Property tests of everything in `radwasm-policy-model` that parses user
//! input: the scope and resource-id grammar, the `radapp.io/depends-on`
//! annotation, and the JSON form of observations and plans.
//!
//! Every strategy mixes valid inputs with adversarial ones (any Unicode,
//! long strings, separators, empty parts, case variations, deep nesting).
//! `cargo test` runs a few hundred cases per property; set `PROPTEST_CASES`
//! for a long run (see docs/reliability.md). Crashing inputs found so far are
//! kept as explicit `#[test]`s at the end of this file.

// The model grows fields (the host and the WIT contract evolve together);
// literals name the fields the strategies generate and default the rest.
#![allow(clippy::needless_update)]

use std::collections::BTreeMap;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use radwasm_policy_model::annotations::{DEPENDS_ON, depends_on};
use radwasm_policy_model::scope::{
    Scope, deployment_scope, is_radius_group_scope, parse_resource_id, scope_contains,
};
use radwasm_policy_model::*;
use serde_json::Value;

/// `cases` per property unless `PROPTEST_CASES` says otherwise; new failures
/// are recorded under `tests/regressions/` (replayed first on the next run).
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

// ----- strategies: text ------------------------------------------------------

/// `word` with each ASCII letter in a random case.
fn any_case(word: &'static str) -> impl Strategy<Value = String> {
    vec(any::<bool>(), word.len()).prop_map(move |upper| recase(word, &upper))
}

fn recase(text: &str, upper: &[bool]) -> String {
    text.chars()
        .zip(upper.iter().copied().chain(std::iter::repeat(false)))
        .map(|(c, up)| {
            if up {
                c.to_ascii_uppercase()
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// A name Radius accepts as a plane, group, type or resource name: plain
/// ASCII, Unicode letters, long ones, and the grammar's own keywords.
fn name() -> BoxedStrategy<String> {
    prop_oneof![
        8 => "[A-Za-z0-9][A-Za-z0-9._()-]{0,20}",
        2 => "\\pL{1,8}",
        1 => "[a-z0-9][a-z0-9-]{200,600}",
        1 => any_case("providers"),
        1 => any_case("planes"),
        1 => any_case("resourceGroups"),
        1 => any_case("radius"),
    ]
    .boxed()
}

/// A path segment as an attacker might write it.
fn hostile_segment() -> BoxedStrategy<String> {
    prop_oneof![
        4 => name(),
        1 => Just(String::new()),
        1 => prop::sample::select(vec![
            ".", "..", "%2e%2e", "%2E.", ".%2e", "a%2Fb", "a?b", "a#b", "a\\b", " ", " a",
            "a b", "a\tb", "\n", "\u{0}", "é", "İ", "ß", "\u{202e}", "a/b", "//",
        ])
        .prop_map(str::to_string),
        2 => "[^/]{0,8}",
        1 => any::<String>(),
    ]
    .boxed()
}

/// A valid scope: its text, plane and group.
fn valid_scope() -> impl Strategy<Value = (String, String, String)> {
    (
        any_case("planes"),
        any_case("radius"),
        name(),
        any_case("resourceGroups"),
        name(),
    )
        .prop_map(|(planes, radius, plane, groups, group)| {
            (
                format!("/{planes}/{radius}/{plane}/{groups}/{group}"),
                plane,
                group,
            )
        })
}

/// Anything that might be written where a scope is expected.
fn any_scope_text() -> BoxedStrategy<String> {
    prop_oneof![
        2 => valid_scope().prop_map(|(text, _, _)| text),
        2 => (any_case("planes"), any_case("radius"), hostile_segment(), any_case("resourceGroups"), hostile_segment())
            .prop_map(|(a, b, c, d, e)| format!("/{a}/{b}/{c}/{d}/{e}")),
        2 => (prop::sample::select(vec!["", "/", "//", " /"]), vec(hostile_segment(), 0..8))
            .prop_map(|(lead, parts)| format!("{lead}{}", parts.join("/"))),
        1 => (valid_scope(), prop::sample::select(vec!["/", "//", " ", "/x", "?", "#"]))
            .prop_map(|((text, _, _), tail)| format!("{text}{tail}")),
        1 => any::<String>(),
    ]
    .boxed()
}

/// A provider namespace (`Applications.Core`).
fn namespace() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Z][A-Za-z0-9]{0,10}(\\.[A-Z][A-Za-z0-9]{0,10}){1,2}",
        Just("Applications.Core".to_string()),
        Just("Radius.Compute".to_string()),
    ]
}

/// A valid resource id and the parts it was made from.
#[derive(Debug, Clone)]
struct IdParts {
    scope: String,
    providers: String,
    namespace: String,
    pairs: Vec<(String, String)>,
}

impl IdParts {
    fn id(&self) -> String {
        let mut id = format!("{}/{}/{}", self.scope, self.providers, self.namespace);
        for (kind, name) in &self.pairs {
            id.push('/');
            id.push_str(kind);
            id.push('/');
            id.push_str(name);
        }
        id
    }

    fn resource_type(&self) -> String {
        let mut full = self.namespace.clone();
        for (kind, _) in &self.pairs {
            full.push('/');
            full.push_str(kind);
        }
        full
    }
}

fn id_parts() -> impl Strategy<Value = IdParts> {
    (
        valid_scope(),
        any_case("providers"),
        namespace(),
        vec((name(), name()), 1..4),
    )
        .prop_map(|((scope, _, _), providers, namespace, pairs)| IdParts {
            scope,
            providers,
            namespace,
            pairs,
        })
}

/// Anything that might be written where a resource id is expected.
fn any_id_text() -> BoxedStrategy<String> {
    prop_oneof![
        3 => id_parts().prop_map(|parts| parts.id()),
        2 => (any_scope_text(), any_case("providers"), vec(hostile_segment(), 0..7))
            .prop_map(|(scope, providers, rest)| format!("{scope}/{providers}/{}", rest.join("/"))),
        1 => (id_parts(), vec(prop::sample::select(vec!["..", ".", "%2e%2e", ""]), 1..5), vec(name(), 0..4))
            .prop_map(|(parts, dots, tail)| {
                let mut id = parts.id();
                for dot in dots {
                    id.push('/');
                    id.push_str(dot);
                }
                for segment in tail {
                    id.push('/');
                    id.push_str(&segment);
                }
                id
            }),
        1 => any::<String>(),
    ]
    .boxed()
}

// ----- reference implementations ---------------------------------------------

/// What a URL client does to `path`: the segments the server sees, after
/// dot-segment removal and percent-decoding; `None` if the path does not even
/// stay a path (a query or fragment starts inside it).
fn url_segments(path: &str) -> Option<Vec<String>> {
    let url = url::Url::parse(&format!("http://127.0.0.1:1{path}?api-version=1")).ok()?;
    if url.query() != Some("api-version=1") || url.fragment().is_some() {
        return None;
    }
    Some(
        url.path_segments()?
            .map(|segment| {
                let bytes: Vec<u8> = percent_decode(segment);
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .collect(),
    )
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && at + 2 < bytes.len()
            && let Ok(value) = u8::from_str_radix(
                std::str::from_utf8(&bytes[at + 1..at + 3]).unwrap_or("zz"),
                16,
            )
        {
            out.push(value);
            at += 3;
        } else {
            out.push(bytes[at]);
            at += 1;
        }
    }
    out
}

/// The segments of an id or scope as written (without the leading `/`).
fn written_segments(path: &str) -> Vec<String> {
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(str::to_string)
        .collect()
}

/// The scope grammar, written out plainly: five segments, the three keywords
/// in any ASCII case, plane and group names that stay one URL path segment.
fn reference_scope(text: &str) -> Option<(String, String)> {
    let segments = written_segments(text);
    if !text.starts_with('/') || segments.len() != 5 {
        return None;
    }
    let keyword = |at: usize, word: &str| segments[at].eq_ignore_ascii_case(word);
    if !(keyword(0, "planes") && keyword(1, "radius") && keyword(3, "resourceGroups")) {
        return None;
    }
    if !plain(&segments[2]) || !plain(&segments[4]) {
        return None;
    }
    Some((segments[2].clone(), segments[4].clone()))
}

/// A segment that a URL keeps as it is: not empty, not a dot segment, no
/// character a URL gives a meaning to, no whitespace or control character.
fn plain(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && !segment.chars().any(|c| {
            matches!(c, '/' | '?' | '#' | '%' | '\\') || c.is_whitespace() || c.is_control()
        })
}

/// `radapp.io/depends-on` as documented: split on commas, trim, drop
/// empties, keep the first of duplicates.
fn reference_depends_on(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in value.split(',') {
        let part = part.trim();
        if reference_object_name(part) && !out.iter().any(|seen| seen == part) {
            out.push(part.to_string());
        }
    }
    out
}

/// An RFC 1123 subdomain, written out as Kubernetes' validation reads it:
/// at most 253 characters, each dot-separated label matching
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn reference_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let mut chars = label.chars();
            match (chars.next(), label.chars().last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && label.chars().all(|c| alnum(c) || c == '-')
                }
                _ => false,
            }
        })
}

// ----- properties: scopes and ids --------------------------------------------

proptest! {
    #![proptest_config(config(256))]

    /// Any text: no panic, and the answer is the reference grammar's.
    #[test]
    fn scope_parse_agrees_with_the_grammar(text in any_scope_text()) {
        let parsed = Scope::parse(&text);
        prop_assert_eq!(is_radius_group_scope(&text), parsed.is_ok());
        let expected = reference_scope(&text);
        match (&parsed, &expected) {
            (Ok(scope), Some((plane, group))) => {
                prop_assert_eq!(scope.plane(), plane.as_str());
                prop_assert_eq!(scope.group(), group.as_str());
                prop_assert_eq!(scope.as_str(), text.as_str());
            }
            (Err(error), None) => {
                prop_assert_eq!(&error.text, &text);
                prop_assert!(!error.to_string().is_empty());
            }
            _ => prop_assert!(false, "parse {:?} but the grammar says {:?}", parsed, expected),
        }
    }

    /// Generated valid scopes parse, and parse(display(x)) == x.
    #[test]
    fn valid_scopes_round_trip((text, plane, group) in valid_scope()) {
        let scope = Scope::parse(&text).expect("a generated scope is valid");
        prop_assert_eq!(scope.plane(), plane.as_str());
        prop_assert_eq!(scope.group(), group.as_str());
        let again = Scope::parse(&scope.to_string()).expect("display parses");
        prop_assert_eq!(&again, &scope);
        prop_assert!(again.same_as(&scope));
    }

    /// A scope that parses is one URL path: a client sends exactly its
    /// segments (no dot segment, query or fragment can hide in it).
    #[test]
    fn parsed_scopes_are_what_the_client_requests(text in any_scope_text()) {
        if Scope::parse(&text).is_ok() {
            let path = format!("{text}/providers/Microsoft.Resources/deployments/d");
            prop_assert_eq!(url_segments(&path), Some(written_segments(&path)), "{}", path);
        }
    }

    /// Containment is "starts with the scope and then '/'", ignoring ASCII
    /// case, for any pair of texts.
    #[test]
    fn containment_is_a_prefix_on_a_path_boundary(scope in any_scope_text(), id in any_id_text()) {
        let expected = id.to_ascii_lowercase().starts_with(&format!("{}/", scope.to_ascii_lowercase()));
        prop_assert_eq!(scope_contains(&scope, &id), expected);
        if let Ok(parsed) = Scope::parse(&scope) {
            prop_assert_eq!(parsed.contains(&id), expected);
        }
    }

    /// Children of a scope, written in any case, are inside it; the scope
    /// itself, a longer group name and another group are not.
    #[test]
    fn containment_respects_boundaries_and_ignores_case(
        (text, _, group) in valid_scope(),
        parts in id_parts(),
        upper in vec(any::<bool>(), 0..1200),
        other_group in name(),
        suffix in "[A-Za-z0-9._-]{1,5}",
    ) {
        let scope = Scope::parse(&text).expect("valid");
        let child = format!("{text}/providers/{}", &parts.id()[parts.scope.len() + "/providers/".len()..]);
        prop_assert!(scope.contains(&child), "{} in {}", child, text);
        prop_assert!(scope.contains(&recase(&child, &upper)));
        prop_assert!(Scope::parse(&recase(&text, &upper)).expect("valid").contains(&child));
        prop_assert!(!scope.contains(&text));
        let longer = format!("{text}{suffix}/providers/A.B/t/n");
        prop_assert!(!scope.contains(&longer));
        let sibling = format!("{}{other_group}/providers/A.B/t/n", &text[..text.len() - group.len()]);
        if !other_group.eq_ignore_ascii_case(&group) {
            prop_assert!(!scope.contains(&sibling));
        }
    }

    /// Ids made from valid parts give those parts back.
    #[test]
    fn ids_from_valid_parts_parse_back(parts in id_parts()) {
        let id = parts.id();
        let parsed = parse_resource_id(&id).expect("a generated id is valid");
        prop_assert_eq!(&parsed.scope, &parts.scope);
        prop_assert_eq!(parsed.resource_type, parts.resource_type());
        prop_assert_eq!(&parsed.name, &parts.pairs.last().expect("one pair").1);
        prop_assert!(Scope::parse(&parsed.scope).expect("scope").contains(&id));
    }

    /// Any text: no panic; an id that parses is consistent with its parts
    /// and is exactly the path a client requests for it.
    #[test]
    fn resource_ids_never_panic_and_stay_one_path(id in any_id_text()) {
        if let Ok(parsed) = parse_resource_id(&id) {
            prop_assert!(id.starts_with(&parsed.scope));
            let tail = format!("/{}", parsed.name);
            prop_assert!(id.ends_with(&tail));
            prop_assert!(parsed.resource_type.split('/').count() >= 2);
            prop_assert!(parsed.resource_type.split('/').next().is_some_and(|ns| ns.contains('.')));
            prop_assert!(scope_contains(&parsed.scope, &id));
            prop_assert_eq!(url_segments(&id), Some(written_segments(&id)), "{}", id);
        }
    }

    /// `radius.value.scope` of any JSON text: no panic; the scope returned is
    /// the one written.
    #[test]
    fn provider_config_never_panics(scope in any_scope_text(), noise in "\\PC{0,20}", shape in 0..4u8) {
        let text = match shape {
            0 => serde_json::json!({"radius": {"type": "Radius", "value": {"scope": scope}}}).to_string(),
            1 => serde_json::json!({"radius": {"value": scope}}).to_string(),
            2 => format!("{{\"radius\":{{\"value\":{{\"scope\":\"{scope}\"}}}}}}{noise}"),
            _ => noise,
        };
        if let Ok(parsed) = deployment_scope(&text) {
            prop_assert!(is_radius_group_scope(parsed.as_str()));
        }
    }
}

// ----- properties: radapp.io/depends-on --------------------------------------

fn depends_on_value() -> BoxedStrategy<String> {
    prop_oneof![
        3 => vec(prop_oneof![
            Just(String::new()),
            Just(" ".to_string()),
            "[ab]{1,2}",
            " ?[a-z][a-z0-9-]{0,8} ?",
            "\\s{0,2}\\PC{0,6}\\s{0,2}",
            "\\pL{1,4}",
        ], 0..12)
        .prop_map(|parts| parts.join(",")),
        1 => any::<String>(),
        1 => ",*[a ]{0,3},*",
        1 => "[a-z,]{500,2000}",
    ]
    .boxed()
}

proptest! {
    #![proptest_config(config(256))]

    /// No empties, no duplicates, trimmed names without commas, in the
    /// order written; reading the output again gives the output.
    #[test]
    fn depends_on_is_a_clean_ordered_list(value in depends_on_value(), other in any::<String>()) {
        let mut annotations = BTreeMap::new();
        annotations.insert(DEPENDS_ON.to_string(), value.clone());
        annotations.insert("radapp.io/other".to_string(), other);
        let names = depends_on(&annotations);
        prop_assert_eq!(&names, &reference_depends_on(&value));
        for (at, name) in names.iter().enumerate() {
            prop_assert!(!name.is_empty());
            prop_assert_eq!(name.trim(), name.as_str());
            prop_assert!(!name.contains(','));
            prop_assert!(!names[..at].contains(name), "duplicate {:?}", name);
        }
        // Order preserved: first occurrences in the order written.
        let firsts: Vec<Option<usize>> = names
            .iter()
            .map(|name| value.split(',').position(|part| part.trim() == name))
            .collect();
        prop_assert!(firsts.iter().all(Option::is_some));
        prop_assert!(firsts.windows(2).all(|pair| pair[0] < pair[1]), "{:?}", firsts);
        annotations.insert(DEPENDS_ON.to_string(), names.join(","));
        prop_assert_eq!(depends_on(&annotations), names);
    }
}

#[test]
fn depends_on_without_the_annotation_is_empty() {
    assert!(depends_on(&BTreeMap::new()).is_empty());
}

// ----- strategies: the JSON model ---------------------------------------------

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-zA-Z0-9 ._/-]{0,12}",
        2 => any::<String>(),
        1 => "\\PC{100,300}",
        1 => Just("{\"resources\":{}}".to_string()),
    ]
    .boxed()
}

fn string_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    btree_map(text(), text(), 0..4)
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (
        (text(), text(), text(), any::<i64>(), any::<bool>()),
        vec(text(), 0..3),
        string_map(),
        string_map(),
    )
        .prop_map(
            |(
                (name, namespace, uid, generation, deletion_requested),
                finalizers,
                labels,
                annotations,
            )| {
                ObjectMeta {
                    name,
                    namespace,
                    uid,
                    generation,
                    deletion_requested,
                    finalizers,
                    labels,
                    annotations,
                }
            },
        )
}

fn condition() -> impl Strategy<Value = Condition> {
    (
        text(),
        prop::sample::select(vec![
            ConditionStatus::True,
            ConditionStatus::False,
            ConditionStatus::Unknown,
        ]),
        text(),
        text(),
    )
        .prop_map(|(kind, status, reason, message)| Condition {
            kind,
            status,
            reason,
            message,
        })
}

fn template_phase() -> impl Strategy<Value = TemplatePhase> {
    prop::sample::select(TemplatePhase::ALL.to_vec())
}

fn resource_phase() -> impl Strategy<Value = ResourcePhase> {
    prop::sample::select(ResourcePhase::ALL.to_vec())
}

fn radius_error() -> impl Strategy<Value = RadiusError> {
    (text(), text()).prop_map(|(code, message)| RadiusError { code, message })
}

fn operation() -> impl Strategy<Value = OperationObservation> {
    let result = prop_oneof![
        any::<Option<u32>>()
            .prop_map(|retry_after_ms| OperationResult::InProgress { retry_after_ms }),
        vec(text(), 0..4)
            .prop_map(|output_resources| OperationResult::Succeeded { output_resources }),
        radius_error().prop_map(OperationResult::Failed),
        Just(OperationResult::Canceled),
        Just(OperationResult::NotFound),
        text().prop_map(OperationResult::PollError),
    ];
    (
        prop::sample::select(vec![OperationKind::Deployment, OperationKind::Deletion]),
        text(),
        result,
    )
        .prop_map(|(kind, subject, result)| OperationObservation {
            kind,
            subject,
            result,
        })
}

fn template_observation() -> impl Strategy<Value = TemplateObservation> {
    let spec =
        (text(), text(), text()).prop_map(|(template, parameters, provider_config)| TemplateSpec {
            template,
            parameters,
            provider_config,
        });
    let status = (
        proptest::option::of(template_phase()),
        text(),
        any::<i64>(),
        proptest::option::of(text()),
        vec(text(), 0..3),
        vec(condition(), 0..3),
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
    let owned = (
        text(),
        text(),
        any::<bool>(),
        text(),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(
            |(name, radius_id, deletion_requested, phase, missing_age_ms)| OwnedResource {
                name,
                radius_id,
                deletion_requested,
                phase,
                missing_age_ms,
            },
        );
    let dependency = (
        text(),
        any::<bool>(),
        proptest::option::of(template_phase()),
    )
        .prop_map(|(name, exists, phase)| Dependency {
            name,
            exists,
            phase,
        });
    (
        meta(),
        spec,
        text(),
        status,
        vec(owned, 0..3),
        proptest::option::of(operation()),
        vec(dependency, 0..3),
    )
        .prop_map(
            |(meta, spec, spec_hash, status, owned_resources, operation, dependencies)| {
                TemplateObservation {
                    meta,
                    spec,
                    spec_hash,
                    status,
                    owned_resources,
                    operation,
                    dependencies,
                    ..Default::default()
                }
            },
        )
}

fn resource_observation() -> impl Strategy<Value = ResourceObservation> {
    let status = (
        proptest::option::of(resource_phase()),
        text(),
        vec(condition(), 0..3),
    )
        .prop_map(|(phase, message, conditions)| ResourceStatus {
            phase,
            message,
            conditions,
        });
    let owner = (
        text(),
        text(),
        proptest::option::of(text()),
        any::<bool>(),
        string_map(),
        text(),
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
        meta(),
        text(),
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

fn event() -> impl Strategy<Value = Event> {
    (
        prop::sample::select(vec![EventType::Normal, EventType::Warning]),
        text(),
        text(),
    )
        .prop_map(|(event_type, reason, message)| Event {
            event_type,
            reason,
            message,
        })
}

fn template_plan() -> impl Strategy<Value = TemplatePlan> {
    let update = (
        (
            proptest::option::of(template_phase()),
            proptest::option::of(text()),
            any::<Option<i64>>(),
            proptest::option::of(text()),
        ),
        proptest::option::of(vec(text(), 0..3)),
        vec(condition(), 0..2),
        any::<bool>(),
    )
        .prop_map(
            |(
                (phase, message, observed_generation, status_hash),
                output_resources,
                conditions,
                clear_operation,
            )| TemplateStatusUpdate {
                phase,
                message,
                observed_generation,
                status_hash,
                output_resources,
                conditions,
                clear_operation,
            },
        );
    let action = prop_oneof![
        Just(TemplateAction::AddFinalizer),
        Just(TemplateAction::RemoveFinalizer),
        text().prop_map(TemplateAction::EnsureResourceGroup),
        (text(), text()).prop_map(|(scope, deployment_name)| {
            TemplateAction::StartDeployment(StartDeployment {
                scope,
                deployment_name,
            })
        }),
        (text(), text()).prop_map(|(name, radius_id)| {
            TemplateAction::CreateResource(CreateResource { name, radius_id })
        }),
        text().prop_map(TemplateAction::DeleteResource),
        update.prop_map(TemplateAction::SetStatus),
        event().prop_map(TemplateAction::EmitEvent),
        any::<u32>().prop_map(TemplateAction::RequeueAfter),
    ];
    vec(action, 0..6).prop_map(|actions| TemplatePlan { actions })
}

fn resource_plan() -> impl Strategy<Value = ResourcePlan> {
    let update = (
        proptest::option::of(resource_phase()),
        proptest::option::of(text()),
        vec(condition(), 0..2),
        any::<bool>(),
    )
        .prop_map(
            |(phase, message, conditions, clear_operation)| ResourceStatusUpdate {
                phase,
                message,
                conditions,
                clear_operation,
            },
        );
    let action = prop_oneof![
        Just(ResourceAction::AddFinalizer),
        Just(ResourceAction::RemoveFinalizer),
        Just(ResourceAction::StartRadiusDelete),
        update.prop_map(ResourceAction::SetStatus),
        event().prop_map(ResourceAction::EmitEvent),
        any::<u32>().prop_map(ResourceAction::RequeueAfter),
    ];
    vec(action, 0..6).prop_map(|actions| ResourcePlan { actions })
}

/// Every field and tag name of the JSON form, so that random documents
/// reach deep into the deserializers.
const FIELD_NAMES: &[&str] = &[
    "deploymentTemplate",
    "deploymentResource",
    "meta",
    "spec",
    "specHash",
    "status",
    "ownedResources",
    "operation",
    "dependencies",
    "name",
    "namespace",
    "uid",
    "generation",
    "deletionRequested",
    "finalizers",
    "labels",
    "annotations",
    "template",
    "parameters",
    "providerConfig",
    "phase",
    "message",
    "observedGeneration",
    "statusHash",
    "outputResources",
    "conditions",
    "type",
    "reason",
    "radiusId",
    "exists",
    "kind",
    "subject",
    "result",
    "inProgress",
    "retryAfterMs",
    "succeeded",
    "failed",
    "canceled",
    "notFound",
    "pollError",
    "code",
    "owner",
    "referenceUid",
    "foundUid",
    "actions",
    "addFinalizer",
    "removeFinalizer",
    "ensureResourceGroup",
    "startDeployment",
    "scope",
    "deploymentName",
    "createResource",
    "deleteResource",
    "setStatus",
    "emitEvent",
    "requeueAfter",
    "clearOperation",
    "startRadiusDelete",
    "Ready",
    "Updating",
    "Held",
    "True",
    "Normal",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        prop::sample::select(FIELD_NAMES).prop_map(|name| Value::String(name.to_string())),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 96, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..6).prop_map(Value::Array),
            btree_map(
                prop_oneof![3 => prop::sample::select(FIELD_NAMES).prop_map(str::to_string), 1 => text()],
                inner,
                0..6,
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Valid documents with one random change: a key dropped, renamed, or a
/// value replaced by random JSON.
fn mutated(
    document: Value,
    path_choice: Vec<prop::sample::Index>,
    replacement: Value,
    how: u8,
) -> Value {
    fn walk(value: &mut Value, choices: &[prop::sample::Index], replacement: Value, how: u8) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                let key = map
                    .keys()
                    .nth(choices.first().map_or(0, |c| c.index(map.len())))
                    .cloned();
                let Some(key) = key else { return };
                if choices.len() > 1 && map.get(&key).is_some_and(|v| v.is_object() || v.is_array())
                {
                    if let Some(inner) = map.get_mut(&key) {
                        walk(inner, &choices[1..], replacement, how);
                    }
                    return;
                }
                match how % 3 {
                    0 => {
                        map.remove(&key);
                    }
                    1 => {
                        if let Some(old) = map.remove(&key) {
                            map.insert(format!("{key}x"), old);
                        }
                    }
                    _ => {
                        map.insert(key, replacement);
                    }
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let at = choices.first().map_or(0, |c| c.index(items.len()));
                if choices.len() > 1 {
                    walk(&mut items[at], &choices[1..], replacement, how);
                } else {
                    items[at] = replacement;
                }
            }
            other => *other = replacement,
        }
    }
    let mut document = document;
    walk(&mut document, &path_choice, replacement, how);
    document
}

fn round_trips<T>(value: &T) -> Result<(), TestCaseError>
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let text = serde_json::to_string(value).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let again: T =
        serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
    prop_assert_eq!(&again, value);
    Ok(())
}

/// Deserialize `value` as each model type: never a panic, and whatever is
/// accepted serialises back to the same value.
fn accepts_consistently(value: &Value) -> Result<(), TestCaseError> {
    fn one<T>(value: &Value) -> Result<(), TestCaseError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        if let Ok(parsed) = serde_json::from_value::<T>(value.clone()) {
            round_trips(&parsed)?;
        }
        Ok(())
    }
    one::<Observation>(value)?;
    one::<Plan>(value)?;
    one::<TemplateObservation>(value)?;
    one::<ResourceObservation>(value)?;
    one::<TemplatePlan>(value)?;
    one::<ResourcePlan>(value)
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn template_observations_round_trip(observation in template_observation()) {
        round_trips(&observation)?;
        round_trips(&Observation::DeploymentTemplate(observation))?;
    }

    #[test]
    fn resource_observations_round_trip(observation in resource_observation()) {
        round_trips(&observation)?;
        round_trips(&Observation::DeploymentResource(observation))?;
    }

    #[test]
    fn template_plans_round_trip(plan in template_plan()) {
        round_trips(&plan)?;
        round_trips(&Plan::DeploymentTemplate(plan))?;
    }

    #[test]
    fn resource_plans_round_trip(plan in resource_plan()) {
        round_trips(&plan)?;
        round_trips(&Plan::DeploymentResource(plan))?;
    }

    /// Spec fields may be written inline as JSON: they come back as its text.
    #[test]
    fn inline_spec_json_becomes_its_text(value in json_value()) {
        let document = serde_json::json!({"spec": {"template": value, "parameters": "{}"}});
        let observation: TemplateObservation = serde_json::from_value(document).expect("any JSON is a template");
        match &value {
            Value::String(text) => prop_assert_eq!(&observation.spec.template, text),
            other => prop_assert_eq!(&observation.spec.template, &other.to_string()),
        }
    }

    /// Random JSON: no panic, and anything accepted round-trips.
    #[test]
    fn random_json_never_panics_the_deserializers(value in json_value()) {
        accepts_consistently(&value)?;
        accepts_consistently(&serde_json::json!({"deploymentTemplate": value.clone()}))?;
        accepts_consistently(&serde_json::json!({"deploymentResource": value}))?;
    }

}

proptest! {
    #![proptest_config(config(48))]

    /// Valid documents with one random change: no panic, consistent.
    #[test]
    fn mutated_documents_never_panic_the_deserializers(
        observation in template_observation(),
        resource in resource_observation(),
        plan in template_plan(),
        path in vec(any::<prop::sample::Index>(), 1..5),
        replacement in json_value(),
        how in any::<u8>(),
    ) {
        for document in [
            serde_json::to_value(Observation::DeploymentTemplate(observation)).expect("serialises"),
            serde_json::to_value(Observation::DeploymentResource(resource)).expect("serialises"),
            serde_json::to_value(Plan::DeploymentTemplate(plan)).expect("serialises"),
        ] {
            accepts_consistently(&mutated(document, path.clone(), replacement.clone(), how))?;
        }
    }

}

proptest! {
    #![proptest_config(config(256))]

    /// Random text, including deep nesting: no panic.
    #[test]
    fn random_text_never_panics_the_deserializers(
        text in prop_oneof![
            any::<String>(),
            "[\\[\\]{}\":,0-9a-z ]{0,64}",
            (1usize..5000, prop::sample::select(vec!["[", "{\"meta\":", "{\"deploymentTemplate\":"]))
                .prop_map(|(depth, open)| open.repeat(depth)),
        ],
    ) {
        let _ = serde_json::from_str::<Observation>(&text);
        let _ = serde_json::from_str::<Plan>(&text);
        let _ = serde_json::from_slice::<TemplateObservation>(text.as_bytes());
        let _ = serde_json::from_str::<ResourcePlan>(&text);
    }
}

// ----- regressions: inputs the properties found -------------------------------

/// A resource group named `providers` is a valid scope; the id parser took
/// its name for the `/providers/` segment.
#[test]
fn regression_group_named_providers() {
    let id =
        "/planes/radius/local/resourceGroups/providers/providers/Applications.Core/containers/a";
    let parsed = parse_resource_id(id).expect("valid id");
    assert_eq!(
        parsed.scope,
        "/planes/radius/local/resourceGroups/providers"
    );
    assert_eq!(parsed.resource_type, "Applications.Core/containers");
    assert_eq!(parsed.name, "a");
}

/// Dot segments: a URL client resolves them, so the request would leave the
/// scope that the guard rails checked.
#[test]
fn regression_dot_segments_leave_the_scope() {
    let scope = "/planes/radius/local/resourceGroups/app";
    let escaping = format!(
        "{scope}/providers/Applications.Core/containers/x/../../../../../other/providers/Applications.Core/containers/victim"
    );
    assert!(
        scope_contains(scope, &escaping),
        "a plain prefix check passes"
    );
    assert!(parse_resource_id(&escaping).is_err(), "{escaping}");
    assert!(Scope::parse("/planes/radius/local/resourceGroups/..").is_err());
    assert!(parse_resource_id(&format!("{scope}/providers/A.B/t/%2e%2e")).is_err());
}

/// `?` and `#` in a segment end the URL path: what is deleted is not what was
/// checked.
#[test]
fn regression_query_and_fragment_characters() {
    let scope = "/planes/radius/local/resourceGroups/app";
    for name in [
        "a?api-version=2023-10-01-preview&x=",
        "a#b",
        "a\\..\\..",
        "a b",
        "a\tb",
        "a%2Fb",
    ] {
        let id = format!("{scope}/providers/Applications.Core/containers/{name}");
        assert!(parse_resource_id(&id).is_err(), "{id}");
    }
    assert!(Scope::parse("/planes/radius/local/resourceGroups/app?x").is_err());
    assert!(Scope::parse("/planes/radius/local/resourceGroups/app#x").is_err());
}
