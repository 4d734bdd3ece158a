//! UCP resource ids, scopes and request paths.
//!
//! Ids look like `/planes/radius/local/resourceGroups/{rg}/providers/{Namespace}/{type}/{name}`
//! (with more `type/name` pairs for child resources). They are compared
//! case-insensitively: the store keys them by [`key`] and keeps the original
//! casing for output.

/// The case-insensitive key of an id or scope.
pub fn key(id: &str) -> String {
    id.trim_end_matches('/').to_ascii_lowercase()
}

/// Check a scope (`/planes/radius/local/resourceGroups/rg`) and drop a
/// trailing slash.
pub fn normalize_scope(scope: &str) -> Result<String, String> {
    let trimmed = scope.trim_end_matches('/');
    if !trimmed.starts_with('/') {
        return Err(format!("the scope '{scope}' must start with '/'"));
    }
    if trimmed[1..].split('/').any(str::is_empty) {
        return Err(format!("the scope '{scope}' has an empty segment"));
    }
    Ok(trimmed.to_string())
}

/// `{scope}/providers/{Namespace}/{type1}/{name1}/{type2}/{name2}...` for a
/// type `Namespace/type1/type2` and the names of each level.
pub fn resource_id(scope: &str, resource_type: &str, names: &[String]) -> Result<String, String> {
    let types: Vec<&str> = resource_type.split('/').collect();
    if types.len() < 2 || types.iter().any(|t| t.is_empty()) {
        return Err(format!(
            "the resource type '{resource_type}' must look like 'Namespace/type'"
        ));
    }
    if names.len() != types.len() - 1 {
        return Err(format!(
            "the resource type '{resource_type}' has {} type segment(s) but {} name segment(s) were given ({})",
            types.len() - 1,
            names.len(),
            names.join("/")
        ));
    }
    if let Some(bad) = names.iter().find(|n| n.is_empty() || n.contains('/')) {
        return Err(format!(
            "the resource name segment '{bad}' of type '{resource_type}' is empty or contains '/'"
        ));
    }
    let mut id = format!("{}/providers/{}", scope.trim_end_matches('/'), types[0]);
    for (segment_type, name) in types[1..].iter().zip(names) {
        id.push('/');
        id.push_str(segment_type);
        id.push('/');
        id.push_str(name);
    }
    Ok(id)
}

/// The resource group a scope or id is in: (`/planes/radius/local`, `rg`).
pub fn resource_group_of(scope: &str) -> Option<(String, String)> {
    let segments: Vec<&str> = scope.trim_matches('/').split('/').collect();
    let at = segments
        .iter()
        .position(|s| s.eq_ignore_ascii_case("resourceGroups"))?;
    let name = segments.get(at + 1)?;
    if name.is_empty() {
        return None;
    }
    Some((
        format!("/{}", segments[..at].join("/")),
        (*name).to_string(),
    ))
}

/// The id of a resource group.
pub fn resource_group_id(plane: &str, name: &str) -> String {
    format!("{}/resourceGroups/{name}", plane.trim_end_matches('/'))
}

/// `/planes/{type}/{name}` of an id (empty if the id is not under a plane).
pub fn plane_scope(id: &str) -> String {
    let segments: Vec<&str> = id.trim_matches('/').split('/').collect();
    if segments.len() >= 3 && segments[0].eq_ignore_ascii_case("planes") {
        format!("/{}/{}/{}", segments[0], segments[1], segments[2])
    } else {
        String::new()
    }
}

/// The provider namespace and full type of a resource id
/// (`Applications.Core`, `Applications.Core/containers`).
pub fn type_of(id: &str) -> Option<(String, String)> {
    let segments: Vec<&str> = id.trim_matches('/').split('/').collect();
    let at = segments
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"))?;
    let rest = &segments[at + 1..];
    if rest.len() < 3 || rest.len().is_multiple_of(2) {
        return None;
    }
    let mut full = rest[0].to_string();
    for pair in rest[1..].chunks(2) {
        full.push('/');
        full.push_str(pair[0]);
    }
    Some((rest[0].to_string(), full))
}

/// Which of an operation's two URLs was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationUrl {
    /// `operationStatuses/{id}`, named by the `Azure-AsyncOperation` header.
    Status,
    /// `operationResults/{id}`, named by the `Location` header.
    Result,
}

/// What a request path (without the base URL) addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `/planes/radius/local/resourceGroups`
    ResourceGroups { plane: String },
    /// `/planes/radius/local/resourceGroups/{name}`
    ResourceGroup { plane: String, name: String },
    /// `{scope}/providers/Microsoft.Resources/deployments/{name}`
    Deployment { scope: String, name: String },
    /// `{scope}/providers/Microsoft.Resources/deployments/{name}/cancel`
    DeploymentCancel { scope: String, name: String },
    /// `{planeScope}/providers/{ns}/locations/{location}/operationStatuses/{id}`
    Operation { url: OperationUrl, id: String },
    /// `{scope}/providers/{ns}/{type}`: a list of resources.
    ResourceCollection {
        scope: String,
        resource_type: String,
    },
    /// `{scope}/providers/{ns}/{type}/{name}...`
    Resource { id: String },
}

/// Parse a request path into what it addresses.
pub fn parse_path(path: &str) -> Result<Target, String> {
    let trimmed = path.trim_end_matches('/');
    let segments: Vec<&str> = trimmed.trim_start_matches('/').split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(format!("the path '{path}' has an empty segment"));
    }
    if segments.len() < 3 || !segments[0].eq_ignore_ascii_case("planes") {
        return Err(format!(
            "the path '{path}' is not a UCP path (it must start with /planes/{{type}}/{{name}})"
        ));
    }
    let plane = format!("/{}/{}/{}", segments[0], segments[1], segments[2]);
    let Some(providers) = segments
        .iter()
        .rposition(|s| s.eq_ignore_ascii_case("providers"))
    else {
        return match &segments[3..] {
            [rg] if rg.eq_ignore_ascii_case("resourceGroups") => {
                Ok(Target::ResourceGroups { plane })
            }
            [rg, name] if rg.eq_ignore_ascii_case("resourceGroups") => Ok(Target::ResourceGroup {
                plane,
                name: (*name).to_string(),
            }),
            _ => Err(format!("the path '{path}' does not address a resource")),
        };
    };
    let scope = format!("/{}", segments[..providers].join("/"));
    let rest = &segments[providers + 1..];
    let is = |at: usize, name: &str| rest.get(at).is_some_and(|s| s.eq_ignore_ascii_case(name));
    if is(0, "Microsoft.Resources") && is(1, "deployments") {
        match rest.len() {
            3 => {
                return Ok(Target::Deployment {
                    scope,
                    name: rest[2].to_string(),
                });
            }
            4 if is(3, "cancel") => {
                return Ok(Target::DeploymentCancel {
                    scope,
                    name: rest[2].to_string(),
                });
            }
            _ => {}
        }
    }
    if rest.len() == 5 && is(1, "locations") {
        if is(3, "operationStatuses") {
            return Ok(Target::Operation {
                url: OperationUrl::Status,
                id: rest[4].to_string(),
            });
        }
        if is(3, "operationResults") {
            return Ok(Target::Operation {
                url: OperationUrl::Result,
                id: rest[4].to_string(),
            });
        }
    }
    match rest.len() {
        0 | 1 => Err(format!("the path '{path}' names no resource type")),
        n if n.is_multiple_of(2) => Ok(Target::ResourceCollection {
            scope,
            resource_type: std::iter::once(rest[0])
                .chain(rest[1..].iter().step_by(2).copied())
                .collect::<Vec<_>>()
                .join("/"),
        }),
        _ => Ok(Target::Resource {
            id: format!("/{}", segments.join("/")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_ids_like_radius() {
        assert_eq!(
            resource_id(
                "/planes/radius/local/resourceGroups/rg",
                "Applications.Core/containers",
                &["c".into()]
            )
            .unwrap(),
            "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/containers/c"
        );
        assert_eq!(
            resource_id("/s/", "A.B/x/y", &["p".into(), "q".into()]).unwrap(),
            "/s/providers/A.B/x/p/y/q"
        );
        assert!(resource_id("/s", "A.B/x", &[]).is_err());
        assert!(resource_id("/s", "nonamespace", &["a".into()]).is_err());
    }

    #[test]
    fn parses_request_paths() {
        assert_eq!(
            parse_path("/planes/radius/local/resourceGroups/rg").unwrap(),
            Target::ResourceGroup {
                plane: "/planes/radius/local".into(),
                name: "rg".into()
            }
        );
        assert_eq!(
            parse_path(
                "/planes/radius/local/resourcegroups/rg/providers/Microsoft.Resources/deployments/d"
            )
            .unwrap(),
            Target::Deployment {
                scope: "/planes/radius/local/resourcegroups/rg".into(),
                name: "d".into()
            }
        );
        assert_eq!(
            parse_path("/planes/radius/local/providers/System.Resources/locations/global/operationStatuses/abc")
                .unwrap(),
            Target::Operation {
                url: OperationUrl::Status,
                id: "abc".into()
            }
        );
        assert_eq!(
            parse_path("/planes/radius/local/resourceGroups/rg/providers/Applications.Core/containers/c")
                .unwrap(),
            Target::Resource {
                id: "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/containers/c"
                    .into()
            }
        );
        assert_eq!(
            parse_path(
                "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/containers"
            )
            .unwrap(),
            Target::ResourceCollection {
                scope: "/planes/radius/local/resourceGroups/rg".into(),
                resource_type: "Applications.Core/containers".into()
            }
        );
        assert!(parse_path("/nope").is_err());
        assert!(parse_path("/planes/radius//x").is_err());
    }

    #[test]
    fn finds_groups_planes_and_types() {
        assert_eq!(
            resource_group_of("/planes/radius/local/resourceGroups/rg/providers/A.B/c/d"),
            Some(("/planes/radius/local".into(), "rg".into()))
        );
        assert_eq!(resource_group_of("/planes/radius/local"), None);
        assert_eq!(
            plane_scope("/planes/radius/local/resourceGroups/rg"),
            "/planes/radius/local"
        );
        assert_eq!(
            type_of("/planes/radius/local/resourceGroups/rg/providers/A.B/c/d/e/f"),
            Some(("A.B".into(), "A.B/c/e".into()))
        );
        assert_eq!(key("/A/B/"), "/a/b");
    }
}
