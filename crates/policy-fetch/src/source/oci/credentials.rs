//! Registry credentials: a user name and password, read from the
//! `.dockerconfigjson` of a `kubernetes.io/dockerconfigjson` Secret.

use std::fmt;

use base64::Engine as _;
use serde::Deserialize;

use super::OciError;

/// A registry user name and password (or token used as a password).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

// oci-client takes a user name and password (`RegistryAuth`), not a docker config.
/// Credentials for `registry` (`host[:port]`) from the `.dockerconfigjson` of
/// a `kubernetes.io/dockerconfigjson` Secret (the format of
/// `~/.docker/config.json`): `auths.<registry>.auth` (base64 of
/// `user:password`, which wins, as in the kubelet) or its `username` and
/// `password`. Keys may carry a scheme and a path
/// (`https://index.docker.io/v1/`); Docker Hub's names are one registry.
/// `Ok(None)` if there is no entry for the registry.
pub fn credentials_from_dockerconfigjson(
    json: &[u8],
    registry: &str,
) -> Result<Option<Credentials>, OciError> {
    #[derive(Deserialize)]
    struct DockerConfig {
        #[serde(default)]
        auths: std::collections::BTreeMap<String, Entry>,
    }
    #[derive(Deserialize)]
    struct Entry {
        #[serde(default)]
        auth: Option<String>,
        #[serde(default)]
        username: Option<String>,
        #[serde(default)]
        password: Option<String>,
    }
    let invalid = |detail: String| OciError::DockerConfig { detail };
    let config: DockerConfig = serde_json::from_slice(json)
        .map_err(|error| invalid(format!("not a docker config (`auths` map): {error}")))?;
    let wanted = normalize_registry(registry);
    // An exact key first, then any key naming the same registry.
    let entry = config
        .auths
        .get(registry)
        .map(|e| (registry, e))
        .or_else(|| {
            config
                .auths
                .iter()
                .find(|(key, _)| normalize_registry(key) == wanted)
                .map(|(key, entry)| (key.as_str(), entry))
        });
    let Some((key, entry)) = entry else {
        return Ok(None);
    };
    if let Some(auth) = entry.auth.as_deref().filter(|auth| !auth.is_empty()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|error| invalid(format!("auths.{key}.auth is not base64: {error}")))?;
        let decoded = String::from_utf8(decoded)
            .map_err(|_| invalid(format!("auths.{key}.auth is not UTF-8 once decoded")))?;
        let Some((username, password)) = decoded.split_once(':') else {
            return Err(invalid(format!(
                "auths.{key}.auth does not decode to USERNAME:PASSWORD"
            )));
        };
        return Ok(Some(Credentials {
            username: username.to_string(),
            password: password.to_string(),
        }));
    }
    match (&entry.username, &entry.password) {
        (Some(username), Some(password)) if !username.is_empty() => Ok(Some(Credentials {
            username: username.clone(),
            password: password.clone(),
        })),
        _ => Err(invalid(format!(
            "auths.{key} has neither `auth` nor `username` and `password`"
        ))),
    }
}

/// `host[:port]` of a docker config key or registry name, Docker Hub's
/// aliases folded into `docker.io`.
fn normalize_registry(name: &str) -> String {
    let name = name.trim();
    let name = name
        .strip_prefix("https://")
        .or_else(|| name.strip_prefix("http://"))
        .unwrap_or(name);
    let host = name.split('/').next().unwrap_or(name).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_string()
        }
        _ => host,
    }
}
