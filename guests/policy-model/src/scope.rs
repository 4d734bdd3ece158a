//! Radius scopes and resource ids: parsing, case-insensitive comparison and
//! containment. The one grammar of scopes and ids that the host (guard rails,
//! Radius client) and policies (what a template may delete) share.
//!
//! A deployment scope is a resource group in a Radius plane,
//! `/planes/radius/{plane}/resourceGroups/{group}`. A resource id is a scope
//! followed by `/providers/{Namespace.Provider}/{type}/{name}` (and nested
//! `/{type}/{name}` pairs). UCP compares both case-insensitively.

use std::fmt;

/// Why a scope or id was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeError {
    pub what: &'static str,
    pub text: String,
    pub reason: String,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a valid {}: {}",
            self.text, self.what, self.reason
        )
    }
}

impl std::error::Error for ScopeError {}

fn error(what: &'static str, text: &str, reason: impl Into<String>) -> ScopeError {
    ScopeError {
        what,
        text: text.to_string(),
        reason: reason.into(),
    }
}

/// A Radius resource-group scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    text: String,
    plane: String,
    group: String,
}

impl Scope {
    /// Parse `/planes/radius/{plane}/resourceGroups/{group}`.
    pub fn parse(text: &str) -> Result<Self, ScopeError> {
        const WHAT: &str = "Radius scope";
        let segments: Vec<&str> = text.strip_prefix('/').unwrap_or("").split('/').collect();
        match segments.as_slice() {
            [planes, radius, plane, groups, group]
                if planes.eq_ignore_ascii_case("planes")
                    && groups.eq_ignore_ascii_case("resourceGroups") =>
            {
                if !radius.eq_ignore_ascii_case("radius") {
                    return Err(error(
                        WHAT,
                        text,
                        format!("plane type {radius:?} is not the Radius plane"),
                    ));
                }
                if let Some(bad) = [plane, group]
                    .into_iter()
                    .find(|name| !is_plain_segment(name))
                {
                    return Err(error(WHAT, text, not_plain(bad)));
                }
                Ok(Self {
                    text: text.to_string(),
                    plane: plane.to_string(),
                    group: group.to_string(),
                })
            }
            _ => Err(error(
                WHAT,
                text,
                "expected /planes/radius/{plane}/resourceGroups/{group}",
            )),
        }
    }

    /// The scope as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The resource group name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// The plane name (`local` in a default Radius install).
    pub fn plane(&self) -> &str {
        &self.plane
    }

    /// Same scope, ignoring case.
    pub fn same_as(&self, other: &Scope) -> bool {
        self.text.eq_ignore_ascii_case(&other.text)
    }

    /// True if `id` names something inside this scope (ignoring case, on a
    /// path boundary: `.../groups/default` does not contain `.../groups/defaultx/...`).
    pub fn contains(&self, id: &str) -> bool {
        scope_contains(&self.text, id)
    }
}

/// True if `id` lies inside the scope written `scope`, ignoring case, on a
/// path boundary.
pub fn scope_contains(scope: &str, id: &str) -> bool {
    id.len() > scope.len()
        && id.is_char_boundary(scope.len())
        && id[..scope.len()].eq_ignore_ascii_case(scope)
        && id[scope.len()..].starts_with('/')
}

/// True if `text` is a Radius resource-group scope.
pub fn is_radius_group_scope(text: &str) -> bool {
    Scope::parse(text).is_ok()
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A parsed Radius resource id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceId {
    /// Everything before `/providers/`.
    pub scope: String,
    /// Full type, for example `Applications.Core/containers`.
    pub resource_type: String,
    /// The last name segment.
    pub name: String,
}

/// Parse a Radius resource id.
///
/// Every segment must be a plain path segment (see [`is_plain_segment`]):
/// the host puts ids into request URLs as they are, and a URL client would
/// resolve `..`, or end the path at `?` or `#`, so a request would reach
/// something other than the id that was checked.
pub fn parse_resource_id(id: &str) -> Result<ResourceId, ScopeError> {
    const WHAT: &str = "Radius resource id";
    let segments: Vec<&str> = id.strip_prefix('/').unwrap_or("").split('/').collect();
    if !id.starts_with('/') || !segments[0].eq_ignore_ascii_case("planes") {
        return Err(error(WHAT, id, "must start with /planes/"));
    }
    if let Some(bad) = segments.iter().find(|segment| !is_plain_segment(segment)) {
        return Err(error(WHAT, id, not_plain(bad)));
    }
    // The scope is `planes/{type}/{name}` and then `{type}/{name}` pairs, so
    // `providers` stands at an odd position; a plane or group may itself be
    // named `providers`.
    let Some(at) = (3..segments.len())
        .step_by(2)
        .find(|&at| segments[at].eq_ignore_ascii_case("providers"))
    else {
        return Err(error(WHAT, id, "has no /providers/ segment"));
    };
    let scope = &id[..segments[..at].iter().map(|s| s.len() + 1).sum::<usize>()];
    let Some((namespace, pairs)) = segments[at + 1..].split_first() else {
        return Err(error(WHAT, id, "has no provider namespace"));
    };
    if !namespace.contains('.') {
        return Err(error(
            WHAT,
            id,
            format!("provider namespace {namespace:?} has no '.'"),
        ));
    }
    if pairs.is_empty() || pairs.len() % 2 != 0 {
        return Err(error(
            WHAT,
            id,
            "expected /{type}/{name} pairs after the provider namespace",
        ));
    }
    let types: Vec<&str> = pairs.iter().step_by(2).copied().collect();
    Ok(ResourceId {
        scope: scope.to_string(),
        resource_type: format!("{namespace}/{}", types.join("/")),
        name: pairs[pairs.len() - 1].to_string(),
    })
}

/// True if `segment` stays one and the same segment in a request URL: not
/// empty, not `.` or `..`, and free of `/`, `?`, `#`, `%`, `\`, whitespace
/// and control characters (a URL client splits at, resolves, decodes or
/// drops these).
pub fn is_plain_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && !segment.chars().any(|c| {
            matches!(c, '/' | '?' | '#' | '%' | '\\') || c.is_whitespace() || c.is_control()
        })
}

fn not_plain(segment: &str) -> String {
    format!(
        "segment {segment:?} is empty, a dot segment, or has '?', '#', '%', '\\', whitespace or a control character"
    )
}

/// The deployment scope named by a `providerConfig` JSON text
/// (`radius.value.scope`).
pub fn deployment_scope(provider_config: &str) -> Result<Scope, ScopeError> {
    const WHAT: &str = "providerConfig";
    let value: serde_json::Value = serde_json::from_str(provider_config)
        .map_err(|e| error(WHAT, provider_config, format!("not valid JSON: {e}")))?;
    let scope = value
        .pointer("/radius/value/scope")
        .ok_or_else(|| error(WHAT, provider_config, "has no radius.value.scope"))?
        .as_str()
        .ok_or_else(|| error(WHAT, provider_config, "radius.value.scope is not a string"))?;
    Scope::parse(scope)
}

/// Deletion wave of a resource type: other resources first, then
/// applications, then environments (which applications reference). A
/// resource of a later wave is deleted only once the earlier waves of the
/// same template are gone.
pub fn deletion_wave(radius_id: &str) -> u8 {
    let lower = radius_id.to_ascii_lowercase();
    let Some((_, after)) = lower.rsplit_once("/providers/") else {
        return 0;
    };
    let segments: Vec<&str> = after.split('/').collect();
    let kind = segments
        .len()
        .checked_sub(2)
        .and_then(|i| segments.get(i))
        .copied()
        .unwrap_or("");
    match kind {
        "applications" => 1,
        "environments" => 2,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_and_compare_ignoring_case() {
        let scope = Scope::parse("/planes/radius/local/resourceGroups/default").expect("valid");
        assert_eq!(scope.group(), "default");
        let shouting = Scope::parse("/Planes/Radius/local/RESOURCEGROUPS/Default").expect("valid");
        assert!(scope.same_as(&shouting));
        assert!(Scope::parse("/planes/aws/aws/accounts/1").is_err());
        assert!(Scope::parse("/planes/radius/local").is_err());
        let error = Scope::parse("default").expect_err("not a scope");
        assert!(error.to_string().contains("\"default\""), "{error}");
    }

    #[test]
    fn containment_respects_path_boundaries() {
        let scope = Scope::parse("/planes/radius/local/resourceGroups/default").expect("valid");
        assert!(scope.contains(
            "/planes/radius/local/resourcegroups/DEFAULT/providers/Applications.Core/containers/a"
        ));
        assert!(!scope.contains(
            "/planes/radius/local/resourceGroups/defaultx/providers/Applications.Core/containers/a"
        ));
        assert!(!scope.contains("/planes/radius/local/resourceGroups/default"));
    }

    #[test]
    fn resource_ids_give_their_type_and_name() {
        let id = parse_resource_id(
            "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers/frontend",
        )
        .expect("valid");
        assert_eq!(id.resource_type, "Applications.Core/containers");
        assert_eq!(id.name, "frontend");
        assert_eq!(id.scope, "/planes/radius/local/resourceGroups/default");
        assert!(
            parse_resource_id(
                "/planes/radius/local/resourceGroups/default/providers/Applications.Core/containers"
            )
            .is_err()
        );
        assert!(parse_resource_id("frontend").is_err());
    }

    #[test]
    fn provider_config_yields_the_radius_scope() {
        let scope = deployment_scope(r#"{"radius":{"type":"Radius","value":{"scope":"/planes/radius/local/resourceGroups/app"}}}"#)
            .expect("valid");
        assert_eq!(scope.group(), "app");
        let error = deployment_scope(r#"{"deployments":{}}"#).expect_err("missing");
        assert!(error.reason.contains("radius.value.scope"), "{error}");
        assert!(deployment_scope("{not json").is_err());
    }
}
