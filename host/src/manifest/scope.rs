//! The Radius scope (`--group`, `--scope`, `--environment`), the manifest's
//! name, namespace and output file, and `spec.providerConfig`.

use std::ffi::OsStr;
use std::path::Path;

use serde::Serialize;

use crate::go_text;

/// The Radius scope from `--group`, `--scope` or a full `--environment` id.
pub fn radius_scope(
    group: Option<&str>,
    scope: Option<&str>,
    environment: Option<&str>,
) -> anyhow::Result<String> {
    if let Some(group) = group {
        anyhow::ensure!(
            !group.is_empty() && !group.contains('/'),
            "--group {group:?}: expected the name of a Radius resource group"
        );
        return Ok(format!("/planes/radius/local/resourceGroups/{group}"));
    }
    if let Some(scope) = scope {
        return match scope_prefix(scope) {
            Some(prefix) if prefix.len() == scope.trim_end_matches('/').len() => {
                Ok(prefix.to_string())
            }
            _ => anyhow::bail!(
                "--scope {scope:?}: expected /planes/radius/PLANE/resourceGroups/GROUP"
            ),
        };
    }
    if let Some(prefix) = environment.and_then(scope_prefix) {
        return Ok(prefix.to_string());
    }
    anyhow::bail!(
        "a Radius resource group is required: pass --group (-g) GROUP, --scope \
         /planes/radius/PLANE/resourceGroups/GROUP, or --environment with a full environment id"
    )
}

/// `/planes/radius/{plane}/resourceGroups/{group}` at the start of `id`.
fn scope_prefix(id: &str) -> Option<&str> {
    let segments: Vec<&str> = id.split('/').collect();
    // ["", "planes", "radius", plane, "resourceGroups", group, ...]
    let fits = segments.len() >= 6
        && segments[0].is_empty()
        && segments[1].eq_ignore_ascii_case("planes")
        && segments[2].eq_ignore_ascii_case("radius")
        && !segments[3].is_empty()
        && segments[4].eq_ignore_ascii_case("resourceGroups")
        && !segments[5].is_empty();
    if !fits {
        return None;
    }
    let length = segments[..6].iter().map(|s| s.len()).sum::<usize>() + 5;
    Some(&id[..length])
}

/// The environment id for `--environment`: a full id as it is, a name as an
/// `Applications.Core/environments` resource in the scope.
pub fn environment_id(scope: &str, environment: &str) -> String {
    if environment.starts_with('/') {
        environment.to_string()
    } else {
        format!("{scope}/providers/Applications.Core/environments/{environment}")
    }
}

/// The default `metadata.name`: the input file's name, as Radius's CLI does.
pub fn default_name(file: &Path) -> String {
    file.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A Kubernetes object name: an RFC 1123 subdomain (lower-case letters,
/// digits, `-` and `.`, at most 253 characters, starting and ending with a
/// letter or digit).
pub fn check_object_name(name: &str, derived: bool) -> anyhow::Result<()> {
    let valid = !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        return Ok(());
    }
    let hint = if derived {
        " (taken from the file name); choose one with --name"
    } else {
        ""
    };
    anyhow::bail!(
        "name {name:?} is not a valid Kubernetes object name{hint}: use lower-case letters, \
         digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters"
    )
}

/// A Kubernetes namespace: an RFC 1123 label.
pub fn check_namespace(namespace: &str) -> anyhow::Result<()> {
    let valid = !namespace.is_empty()
        && namespace.len() <= 63
        && namespace
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        && namespace.starts_with(|c: char| c.is_ascii_alphanumeric())
        && namespace.ends_with(|c: char| c.is_ascii_alphanumeric());
    anyhow::ensure!(
        valid,
        "--namespace {namespace:?} is not a valid namespace: use lower-case letters, digits \
         and '-', starting and ending with a letter or digit, at most 63 characters"
    );
    Ok(())
}

/// The output file must be YAML by its name, as Radius's CLI requires.
pub(super) fn check_outfile(outfile: &Path) -> anyhow::Result<()> {
    let extension = outfile.extension().and_then(OsStr::to_str).unwrap_or("");
    anyhow::ensure!(
        extension == "yaml" || extension == "yml",
        "--outfile {}: the manifest file must end in .yaml or .yml",
        outfile.display()
    );
    Ok(())
}

/// `spec.providerConfig` as Radius's CLI builds it: a struct whose fields
/// are written in this order, `az` and `aws` only when given.
#[derive(Serialize)]
struct ProviderConfig<'a> {
    radius: Provider<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    az: Option<Provider<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    aws: Option<Provider<'a>>,
    deployments: Provider<'a>,
}

#[derive(Serialize)]
struct Provider<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    value: ProviderScope<'a>,
}

#[derive(Serialize)]
struct ProviderScope<'a> {
    scope: &'a str,
}

impl<'a> Provider<'a> {
    fn new(kind: &'a str, scope: &'a str) -> Self {
        Self {
            kind,
            value: ProviderScope { scope },
        }
    }
}

/// `spec.providerConfig`: the Radius scope for `radius` and `deployments`,
/// and `az`/`aws` when given, as Radius's CLI writes it (Go's
/// `json.MarshalIndent`).
pub fn provider_config_text(scope: &str, azure: Option<&str>, aws: Option<&str>) -> String {
    go_text::to_string_indent(&ProviderConfig {
        radius: Provider::new("Radius", scope),
        az: azure.map(|azure| Provider::new("AzureResourceManager", azure)),
        aws: aws.map(|aws| Provider::new("AWS", aws)),
        deployments: Provider::new("Microsoft.Resources", scope),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_from_group_scope_or_environment_id() {
        assert_eq!(
            radius_scope(Some("default"), None, None).expect("group"),
            "/planes/radius/local/resourceGroups/default"
        );
        assert_eq!(
            radius_scope(None, Some("/planes/radius/edge/resourceGroups/g1"), None).expect("scope"),
            "/planes/radius/edge/resourceGroups/g1"
        );
        let env =
            "/planes/radius/local/resourceGroups/prod/providers/Applications.Core/environments/e";
        assert_eq!(
            radius_scope(None, None, Some(env)).expect("from env"),
            "/planes/radius/local/resourceGroups/prod"
        );
        assert!(radius_scope(None, None, Some("e")).is_err());
        assert!(radius_scope(Some("a/b"), None, None).is_err());
        for bad in [
            "/planes/aws/x/resourceGroups/g",
            "/planes/radius/local",
            "/planes/radius/local/resourceGroups/g/providers/x",
        ] {
            let error = radius_scope(None, Some(bad), None)
                .expect_err(bad)
                .to_string();
            assert!(
                error.contains("/planes/radius/PLANE/resourceGroups/GROUP"),
                "{error}"
            );
        }
        assert_eq!(
            environment_id("/planes/radius/local/resourceGroups/g", "dev"),
            "/planes/radius/local/resourceGroups/g/providers/Applications.Core/environments/dev"
        );
    }

    #[test]
    fn names_and_namespaces_follow_kubernetes_rules() {
        assert_eq!(default_name(Path::new("dir/app.bicep")), "app.bicep");
        assert!(check_object_name("deploymenttemplate.bicep", true).is_ok());
        let error = check_object_name("My_App.bicep", true).expect_err("upper case");
        assert!(error.to_string().contains("--name"), "{error}");
        assert!(check_object_name("-a", false).is_err());
        assert!(check_namespace("team-a").is_ok());
        assert!(check_namespace("team.a").is_err());
    }

    #[test]
    fn provider_config_in_radius_order_and_layout() {
        let scope = "/planes/radius/local/resourceGroups/g";
        let text = provider_config_text(
            scope,
            Some("/subscriptions/s/resourceGroups/r"),
            Some("/planes/aws/aws/accounts/1/regions/us-west-2"),
        );
        let keys: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("  \"") && line.ends_with('{'))
            .collect();
        assert_eq!(
            keys,
            [
                "  \"radius\": {",
                "  \"az\": {",
                "  \"aws\": {",
                "  \"deployments\": {"
            ]
        );
        assert!(
            text.contains("\"type\": \"AzureResourceManager\""),
            "{text}"
        );
        assert!(text.contains("\"type\": \"AWS\""), "{text}");
        assert_eq!(
            provider_config_text(scope, None, None),
            "{\n  \"radius\": {\n    \"type\": \"Radius\",\n    \"value\": {\n      \"scope\": \"/planes/radius/local/resourceGroups/g\"\n    }\n  },\n  \"deployments\": {\n    \"type\": \"Microsoft.Resources\",\n    \"value\": {\n      \"scope\": \"/planes/radius/local/resourceGroups/g\"\n    }\n  }\n}"
        );
    }
}
