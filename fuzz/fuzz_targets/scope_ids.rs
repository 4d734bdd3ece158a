//! Scopes and resource ids (`radwasm_policy_model::scope`): any text as a
//! scope, an id and a `providerConfig`, checked against the grammar written
//! out plainly.
//!
//! Input: `scope NUL id NUL providerConfig`; a leading `/planes/radius/`
//! or a valid scope is put in front now and then (the first byte says), so
//! the fuzzer reaches the deeper rules quickly.

#![no_main]

use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::split_nul;
use radwasm_policy_model::scope::{
    Scope, deployment_scope, is_plain_segment, is_radius_group_scope, parse_resource_id,
    scope_contains,
};

/// The scope grammar: five segments, the three keywords in any ASCII case,
/// plane and group names that stay one URL path segment.
fn reference_scope(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('/')?;
    let segments: Vec<&str> = rest.split('/').collect();
    let [planes, radius, plane, groups, group] = segments.as_slice() else {
        return None;
    };
    (planes.eq_ignore_ascii_case("planes")
        && radius.eq_ignore_ascii_case("radius")
        && groups.eq_ignore_ascii_case("resourceGroups")
        && plain(plane)
        && plain(group))
    .then_some((plane, group))
}

/// A segment a URL keeps as it is.
fn plain(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && !segment.chars().any(|c| {
            matches!(c, '/' | '?' | '#' | '%' | '\\') || c.is_whitespace() || c.is_control()
        })
}

fn check_scope(text: &str) {
    let parsed = Scope::parse(text);
    assert_eq!(is_radius_group_scope(text), parsed.is_ok());
    match (&parsed, reference_scope(text)) {
        (Ok(scope), Some((plane, group))) => {
            assert_eq!(scope.plane(), plane);
            assert_eq!(scope.group(), group);
            assert_eq!(scope.as_str(), text);
            let again = Scope::parse(&scope.to_string()).expect("display parses");
            assert_eq!(&again, scope);
            assert!(again.same_as(scope));
            let shouting = Scope::parse(&text.to_ascii_uppercase()).expect("any case");
            assert!(shouting.same_as(scope));
        }
        (Err(error), None) => {
            assert_eq!(error.text, text);
            assert!(!error.to_string().is_empty());
        }
        (parsed, expected) => {
            panic!("{text:?}: parse {parsed:?} but the grammar says {expected:?}")
        }
    }
}

fn check_id(id: &str) {
    let Ok(parsed) = parse_resource_id(id) else {
        return;
    };
    assert!(id.starts_with(&parsed.scope), "{id:?}: {parsed:?}");
    assert!(
        id.ends_with(&format!("/{}", parsed.name)),
        "{id:?}: {parsed:?}"
    );
    assert!(scope_contains(&parsed.scope, id), "{id:?}: {parsed:?}");
    let mut types = parsed.resource_type.split('/');
    assert!(types.next().is_some_and(|ns| ns.contains('.')));
    assert!(types.next().is_some(), "{id:?}: {parsed:?}");
    // Every segment stays one URL path segment.
    for segment in id[1..].split('/') {
        assert!(
            is_plain_segment(segment) && plain(segment),
            "{id:?}: {segment:?}"
        );
    }
    // The provider segment follows the scope's type/name pairs.
    let scope_segments = parsed.scope[1..].split('/').count();
    assert!(
        scope_segments >= 3 && scope_segments % 2 == 1,
        "{id:?}: {parsed:?}"
    );
    assert!(
        id[parsed.scope.len()..]
            .to_ascii_lowercase()
            .starts_with("/providers/"),
        "{id:?}: {parsed:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let parts = split_nul(data, 3);
    let text = |at: usize| String::from_utf8_lossy(parts[at]).into_owned();
    let prefix = match mode % 4 {
        0 => "",
        1 => "/planes/radius/",
        2 => "/planes/radius/local/resourceGroups/",
        _ => "/planes/radius/local/resourceGroups/default/providers/",
    };
    let scope = if mode & 4 == 0 {
        text(0)
    } else {
        format!("{prefix}{}", text(0))
    };
    let id = if mode & 8 == 0 {
        text(1)
    } else {
        format!("{prefix}{}", text(1))
    };

    check_scope(&scope);
    check_id(&id);
    check_id(&scope);

    // Containment is "starts with the scope and then '/'", ignoring ASCII case.
    let expected = id
        .to_ascii_lowercase()
        .starts_with(&format!("{}/", scope.to_ascii_lowercase()));
    assert_eq!(scope_contains(&scope, &id), expected, "{scope:?} {id:?}");
    if let Ok(parsed) = Scope::parse(&scope) {
        assert_eq!(parsed.contains(&id), expected);
    }

    // `radius.value.scope` of any text, and of a document naming the scope.
    for config in [
        text(2),
        serde_json::json!({"radius": {"type": "Radius", "value": {"scope": scope}}}).to_string(),
    ] {
        if let Ok(parsed) = deployment_scope(&config) {
            assert!(is_radius_group_scope(parsed.as_str()), "{config:?}");
        }
    }
    let named = serde_json::json!({"radius": {"value": {"scope": scope}}}).to_string();
    assert_eq!(
        deployment_scope(&named).is_ok(),
        Scope::parse(&scope).is_ok()
    );
});
