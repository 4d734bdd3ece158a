//! What a signature's payload must claim besides the digest: the repository
//! the module was fetched from (`critical.identity.docker-reference`), so a
//! manifest and its signature copied into another repository are refused,
//! and the annotations a policy requires (`optional`, written by `cosign
//! sign -a key=value`), so a platform can tell releases apart.
//!
//! cosign 2.6 writes `docker-reference` as go-containerregistry names a
//! repository (`Repository.Name()`): the registry, `docker.io` rewritten to
//! `index.docker.io`, and `library/` before a one-part Docker Hub
//! repository; `cosign sign --sign-container-identity` may write any
//! reference, a tag or a digest included. cosign 2.6's own `verify` never
//! compares the field (its `SimpleClaimVerifier` checks the digest and the
//! annotations only); sigstore's payload package says consumers must. It
//! is compared here by registry and repository, a tag or digest in it
//! ignored, with the same Docker Hub rewriting on both sides and the
//! default HTTPS port (`:443`) the same as none.
//!
//! Annotations match as `cosign verify -a key=value` matches them: each
//! required key must be in `optional` with exactly that string value.

use std::collections::BTreeMap;

/// The registry go-containerregistry names Docker Hub by.
const DOCKER_HUB: &str = "index.docker.io";

/// A repository as signatures name it: registry host (and port) and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    pub registry: String,
    pub path: String,
}

impl std::fmt::Display for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.registry, self.path)
    }
}

/// The repository `reference` names (`[registry/]path[:tag][@digest]`),
/// normalised so that two names of one repository compare equal; `None`
/// if it names none.
pub fn repository(reference: &str) -> Option<Repository> {
    let name = reference.trim();
    let name = name.split_once('@').map_or(name, |(name, _)| name);
    // A tag is after the last '/'; a ':' before it is a registry's port.
    let name = match name.rsplit_once(':') {
        Some((before, tag)) if !tag.contains('/') => before,
        _ => name,
    };
    // As Docker and go-containerregistry split a name: the first part is a
    // registry if it looks like a host (a dot, a port, or localhost).
    let (registry, path) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => (first, rest),
        _ => ("", name),
    };
    if path.is_empty() || path.split('/').any(str::is_empty) {
        return None;
    }
    let registry = registry.to_ascii_lowercase();
    let registry = registry.strip_suffix(":443").unwrap_or(&registry);
    let registry = match registry {
        "" | "docker.io" | "registry-1.docker.io" | DOCKER_HUB => DOCKER_HUB,
        other => other,
    };
    let path = match (registry, path.contains('/')) {
        (DOCKER_HUB, false) => format!("library/{path}"),
        _ => path.to_string(),
    };
    Some(Repository {
        registry: registry.to_string(),
        path,
    })
}

/// Whether a payload's `docker-reference` (`signed`) names the repository
/// the module was fetched from (`fetched`, `registry/repository[@digest]`).
pub fn same_repository(signed: &str, fetched: &str) -> bool {
    match (repository(signed), repository(fetched)) {
        (Some(signed), Some(fetched)) => signed == fetched,
        _ => false,
    }
}

/// The required annotations a payload's `optional` does not carry with
/// the same string value, as `key=value` (empty: all are there).
pub fn missing_annotations(
    required: &BTreeMap<String, String>,
    optional: Option<&serde_json::Value>,
) -> Vec<String> {
    required
        .iter()
        .filter(|(key, value)| {
            optional
                .and_then(|o| o.get(key.as_str()))
                .and_then(serde_json::Value::as_str)
                != Some(value.as_str())
        })
        .map(|(key, value)| format!("{key}={value}"))
        .collect()
}

/// One `key=value` annotation, as `cosign sign -a` and `cosign verify -a`
/// take it: exactly one `=`, and a key.
pub fn parse_annotation(text: &str) -> Result<(String, String), String> {
    match text.split('=').collect::<Vec<_>>()[..] {
        [key, value] if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!(
            "annotation {text:?} is not key=value (one '=', a non-empty key; cosign reads the \
             same form)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(reference: &str) -> String {
        repository(reference).map_or("none".to_string(), |r| r.to_string())
    }

    #[test]
    fn a_repository_is_compared_by_registry_and_path_whatever_tag_or_digest() {
        let fetched = "127.0.0.1:5000/policies/guardrail@sha256:abcd";
        for signed in [
            "127.0.0.1:5000/policies/guardrail",
            "127.0.0.1:5000/policies/guardrail:stable",
            "127.0.0.1:5000/policies/guardrail@sha256:0000",
            "127.0.0.1:5000/policies/guardrail:v1@sha256:0000",
        ] {
            assert!(same_repository(signed, fetched), "{signed}");
        }
        for signed in [
            "127.0.0.1:5000/policies/other",
            "127.0.0.1:5001/policies/guardrail",
            "127.0.0.1:5000/guardrail",
            "127.0.0.1:5000/policies/guardrail/more",
            "localhost:5000/policies/guardrail",
            "",
            "not a reference/",
        ] {
            assert!(!same_repository(signed, fetched), "{signed:?}");
        }
    }

    #[test]
    fn docker_hub_and_the_default_port_are_named_as_go_containerregistry_names_them() {
        assert_eq!(named("alpine"), "index.docker.io/library/alpine");
        assert_eq!(
            named("docker.io/alpine:3"),
            "index.docker.io/library/alpine"
        );
        assert_eq!(
            named("index.docker.io/library/alpine"),
            "index.docker.io/library/alpine"
        );
        assert_eq!(
            named("registry-1.docker.io/team/p"),
            "index.docker.io/team/p"
        );
        assert_eq!(named("team/p"), "index.docker.io/team/p");
        assert!(same_repository(
            "index.docker.io/library/alpine",
            "docker.io/library/alpine@sha256:1"
        ));
        assert!(same_repository("index.docker.io/library/alpine", "alpine"));
        assert!(!same_repository("index.docker.io/team/alpine", "alpine"));
        // :443 is where https goes anyway; another port is another registry.
        assert!(same_repository(
            "Registry.Example.com:443/p/q",
            "registry.example.com/p/q@sha256:1"
        ));
        assert!(!same_repository(
            "registry.example.com:8443/p/q",
            "registry.example.com/p/q"
        ));
        // A first part without a dot or a port is a Docker Hub path, but
        // localhost is a registry.
        assert_eq!(
            named("policies/guardrail"),
            "index.docker.io/policies/guardrail"
        );
        assert_eq!(named("localhost/p"), "localhost/p");
        assert_eq!(named("localhost:5000/p:tag"), "localhost:5000/p");
    }

    #[test]
    fn annotations_must_be_there_with_the_same_string_value() {
        let required = BTreeMap::from([
            ("env".to_string(), "prod".to_string()),
            ("version".to_string(), "1.4".to_string()),
        ]);
        let optional = serde_json::json!({"env": "prod", "version": "1.4", "extra": "x"});
        assert!(missing_annotations(&required, Some(&optional)).is_empty());
        assert!(missing_annotations(&BTreeMap::new(), None).is_empty());
        let older = serde_json::json!({"env": "prod", "version": "1.3"});
        assert_eq!(
            missing_annotations(&required, Some(&older)),
            vec!["version=1.4"]
        );
        let number = serde_json::json!({"env": "prod", "version": 1.4});
        assert_eq!(
            missing_annotations(&required, Some(&number)),
            vec!["version=1.4"]
        );
        assert_eq!(
            missing_annotations(&required, None),
            vec!["env=prod", "version=1.4"]
        );
        assert_eq!(
            missing_annotations(&required, Some(&serde_json::Value::Null)).len(),
            2
        );
    }

    #[test]
    fn an_annotation_is_key_equals_value_as_cosign_reads_it() {
        assert_eq!(
            parse_annotation("version=1.4"),
            Ok(("version".to_string(), "1.4".to_string()))
        );
        assert_eq!(
            parse_annotation("empty="),
            Ok(("empty".to_string(), String::new()))
        );
        for bad in ["version", "a=b=c", "=v", ""] {
            let error = parse_annotation(bad).unwrap_err();
            assert!(error.contains("key=value"), "{error}");
        }
    }
}
