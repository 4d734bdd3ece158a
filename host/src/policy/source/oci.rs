//! The OCI source: policy components in registries, pushed and pulled in the
//! Wasm OCI artifact layout that wasm tooling (`wkg`, wasm-pkg-tools) uses,
//! with every byte checked against the digests that name it.
//!
//! The layout (CNCF TAG Runtime "Wasm OCI Artifact layout"): an OCI image
//! manifest whose config has the media type `application/vnd.wasm.config.v0+json`
//! and whose only layer is the component, media type `application/wasm`. The
//! config JSON says `architecture: "wasm"`, `os: "wasip2"`, lists the layer
//! digests in manifest order (`layerDigests`) and the component's top-level
//! imports and exports (`component`).
//!
//! Digest rules:
//! * a reference with `@sha256:…` must resolve to exactly that manifest (a
//!   push computes the manifest first and refuses a reference whose digest
//!   differs; a pull refuses a manifest whose bytes hash to anything else);
//! * the manifest a registry serves must hash to the digest the registry
//!   names it by, and the layer's bytes must hash to the layer digest in the
//!   manifest and be exactly the size it declares.
//!
//! A mismatch is [`OciError::DigestMismatch`] and no bytes are returned. The
//! manifest a push writes is deterministic (the config's `created` is the Unix
//! epoch, as reproducible image builders write it), so pushing the same
//! component twice gives the same digest.

use std::fmt;
use std::sync::Once;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{OciDistributionError, OciEnvelope, OciErrorCode};
use oci_client::manifest::{self, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{MAX_COMPONENT_BYTES, too_large};

// Not oci-client's `WASM_*` constants: those are the older wasm-to-oci types.
/// Media type of the manifest's config blob.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// Media type of the component layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// Media type of the manifest itself.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = manifest::OCI_IMAGE_MEDIA_TYPE;

/// The config's `created`: the Unix epoch, so that a push is reproducible.
const CREATED: &str = "1970-01-01T00:00:00Z";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const USER_AGENT: &str = concat!("radwasm/", env!("CARGO_PKG_VERSION"));

/// Manifest media types a pull asks for: an OCI image manifest is the
/// layout; the others are accepted only to say precisely what was found.
const ACCEPTED_MANIFESTS: &[&str] = &[
    OCI_MANIFEST_MEDIA_TYPE,
    manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
    manifest::IMAGE_MANIFEST_MEDIA_TYPE,
    manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

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

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// Registries (`host:port`, as written in references) reached over plain
    /// HTTP instead of HTTPS, for example a test registry on loopback.
    pub insecure_registries: Vec<String>,
    /// Basic credentials for the registry; anonymous access without them.
    pub auth: Option<Credentials>,
}

/// What a push stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest digest, `sha256:…`.
    pub digest: String,
    /// `registry/repository@sha256:…`: the pushed artifact, pinned.
    pub reference: String,
}

/// What a pull fetched and verified.
#[derive(Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The component's bytes (the artifact's only layer).
    pub component: Vec<u8>,
    /// The manifest digest, `sha256:…`.
    pub digest: String,
    /// `registry/repository@sha256:…`: the pulled artifact, pinned.
    pub reference: String,
}

impl fmt::Debug for Pulled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pulled")
            .field(
                "component",
                &format_args!("<{} bytes>", self.component.len()),
            )
            .field("digest", &self.digest)
            .field("reference", &self.reference)
            .finish()
    }
}

/// Why a push, a pull or reading credentials failed. Each message names the
/// reference (or the input) and what went wrong.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(
        "{reference}: not a valid OCI reference ({detail}); expected \
         REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]"
    )]
    InvalidReference { reference: String, detail: String },
    #[error("not a WebAssembly component: {detail}")]
    NotAComponent { detail: String },
    #[error("{reference}: the registry {registry} is unreachable: {detail}")]
    Unreachable {
        reference: String,
        registry: String,
        detail: String,
    },
    #[error("{reference}: the registry {registry} refused access: {detail}")]
    Unauthorized {
        reference: String,
        registry: String,
        detail: String,
    },
    #[error("{reference}: not found in the registry: {detail}")]
    NotFound { reference: String, detail: String },
    #[error("digest mismatch: expected {expected}, got {actual}; the content was refused")]
    DigestMismatch { expected: String, actual: String },
    #[error("{reference}: not a Wasm component artifact: {detail}")]
    NotAWasmArtifact { reference: String, detail: String },
    #[error("{reference}: {}; it was not downloaded", too_large(Some(*size), MAX_COMPONENT_BYTES))]
    TooLarge { reference: String, size: u64 },
    #[error("{reference}: the registry failed: {detail}")]
    Registry { reference: String, detail: String },
    #[error("docker config JSON: {detail}")]
    DockerConfig { detail: String },
}

/// The config blob of the Wasm OCI artifact layout. Not `oci-wasm`'s: it is
/// built on oci-client 0.17, pulls a layer whole with no size limit, and
/// stamps `created` with the time of the push (no reproducible digest).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WasmConfig {
    pub created: String,
    pub architecture: String,
    pub os: String,
    /// Digests of the manifest's layers, in the same order.
    pub layer_digests: Vec<String>,
    /// Present for a component (`os: "wasip2"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub component: Option<ComponentInfo>,
}

/// A component's top-level imports and exports, as named in its binary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ComponentInfo {
    pub exports: Vec<String>,
    pub imports: Vec<String>,
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Push `component` to `reference` (`registry/repository[:tag][@sha256:…]`;
/// the tag defaults to `latest`). The bytes must be a WebAssembly component;
/// that is checked before any request. A reference with a digest must name
/// the manifest this push writes. Returns the manifest digest.
pub async fn push(
    reference: &str,
    component: &[u8],
    options: &OciOptions,
) -> Result<Pushed, OciError> {
    let parsed = parse_reference(reference)?;
    let info = component_info(component)?;
    let layer_digest = sha256_digest(component);
    let config = WasmConfig {
        created: CREATED.to_string(),
        architecture: "wasm".to_string(),
        os: "wasip2".to_string(),
        layer_digests: vec![layer_digest.clone()],
        component: Some(info),
    };
    let config_bytes = serde_json::to_vec(&config).map_err(|error| OciError::Registry {
        reference: reference.to_string(),
        detail: format!("encoding the config: {error}"),
    })?;
    let layers = [ImageLayer::new(
        component.to_vec(),
        WASM_LAYER_MEDIA_TYPE.to_string(),
        None,
    )];
    let config_blob = Config::new(config_bytes, WASM_CONFIG_MEDIA_TYPE.to_string(), None);
    let mut manifest = OciImageManifest::build(&layers, &config_blob, None);
    manifest.media_type = Some(OCI_MANIFEST_MEDIA_TYPE.to_string());
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(|error| OciError::Registry {
        reference: reference.to_string(),
        detail: format!("encoding the manifest: {error}"),
    })?;
    let digest = sha256_digest(&manifest_bytes);
    if let Some(expected) = parsed.digest()
        && expected != digest
    {
        return Err(OciError::DigestMismatch {
            expected: expected.to_string(),
            actual: digest,
        });
    }

    let client = client(reference, options)?;
    let auth = registry_auth(options);
    let failed = |error| map_error(reference, &parsed, options, error);
    // Not `Client::push`: it uploads every blob again and serialises the
    // manifest itself, so the digest could not be checked before a request.
    // Log in first (a token exchange where the registry hands out bearer
    // tokens), so that refused credentials are reported as such.
    client
        .auth(&parsed, &auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(failed)?;
    for (data, digest) in [
        (layers[0].data.clone(), layer_digest.as_str()),
        (config_blob.data.clone(), manifest.config.digest.as_str()),
    ] {
        // Components are small, but re-pushing an unchanged policy should
        // not upload it again.
        if !client.blob_exists(&parsed, digest).await.map_err(failed)? {
            client
                .push_blob(&parsed, data, digest)
                .await
                .map_err(failed)?;
        }
    }
    // Under the tag if there is one, else under the digest itself.
    let target = match parsed.tag() {
        Some(tag) => Reference::with_tag(
            parsed.registry().to_string(),
            parsed.repository().to_string(),
            tag.to_string(),
        ),
        None => parsed.clone_with_digest(digest.clone()),
    };
    let content_type = http::HeaderValue::from_static(OCI_MANIFEST_MEDIA_TYPE);
    client
        .push_manifest_raw(&target, manifest_bytes, content_type)
        .await
        .map_err(failed)?;
    Ok(Pushed {
        reference: pinned(&parsed, &digest),
        digest,
    })
}

/// Pull the component `reference` names, verifying the manifest digest
/// (against the reference's digest if it has one, and against the digest the
/// registry names it by), the layout (exactly one `application/wasm` layer)
/// and the layer's digest and size. Returns the bytes only if all hold.
pub async fn pull(reference: &str, options: &OciOptions) -> Result<Pulled, OciError> {
    // Not `Client::pull`: it buffers every layer whatever its size, and
    // refuses another layout without naming the media types found.
    let parsed = parse_reference(reference)?;
    let client = client(reference, options)?;
    let auth = registry_auth(options);
    let failed = |error| map_error(reference, &parsed, options, error);

    // The client checks the body against the digest in the reference and
    // against the registry's Docker-Content-Digest header; hashing it here
    // again makes the rule independent of the registry sending that header.
    let (body, _) = client
        .pull_manifest_raw(&parsed, &auth, ACCEPTED_MANIFESTS)
        .await
        .map_err(failed)?;
    let digest = sha256_digest(&body);
    if let Some(expected) = parsed.digest()
        && expected != digest
    {
        return Err(OciError::DigestMismatch {
            expected: expected.to_string(),
            actual: digest,
        });
    }
    let layer = component_layer(reference, &body)?;

    let size = u64::try_from(layer.size).unwrap_or(0);
    let mut stream = client
        .pull_blob_stream(&parsed, &layer)
        .await
        .map_err(failed)?;
    let mut component = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => {
                component.extend_from_slice(&bytes);
                if component.len() as u64 > size {
                    return Err(OciError::Registry {
                        reference: reference.to_string(),
                        detail: format!(
                            "the registry sent more than the {size} bytes the manifest declares \
                             for layer {}",
                            layer.digest
                        ),
                    });
                }
            }
            // The stream ends in an error when its own digest check fails;
            // the check below names both digests.
            Err(error) if is_digest_error(&error) => break,
            Err(error) => {
                return Err(failed(OciDistributionError::IoError(error)));
            }
        }
    }
    let actual = sha256_digest(&component);
    if actual != layer.digest {
        return Err(OciError::DigestMismatch {
            expected: layer.digest,
            actual,
        });
    }
    if component.len() as u64 != size {
        return Err(OciError::Registry {
            reference: reference.to_string(),
            detail: format!(
                "layer {} is {} bytes, but the manifest declares {size}",
                layer.digest,
                component.len()
            ),
        });
    }
    Ok(Pulled {
        component,
        reference: pinned(&parsed, &digest),
        digest,
    })
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

fn parse_reference(reference: &str) -> Result<Reference, OciError> {
    let parsed: Reference =
        reference
            .parse()
            .map_err(|error: oci_client::ParseError| OciError::InvalidReference {
                reference: reference.to_string(),
                detail: error.to_string(),
            })?;
    if let Some(digest) = parsed.digest()
        && !digest.starts_with("sha256:")
    {
        return Err(OciError::InvalidReference {
            reference: reference.to_string(),
            detail: "only sha256 digests are supported".to_string(),
        });
    }
    Ok(parsed)
}

/// `registry/repository@digest`.
fn pinned(parsed: &Reference, digest: &str) -> String {
    format!("{}/{}@{digest}", parsed.registry(), parsed.repository())
}

fn client(reference: &str, options: &OciOptions) -> Result<Client, OciError> {
    install_crypto_provider();
    let config = ClientConfig {
        protocol: ClientProtocol::HttpsExcept(options.insecure_registries.clone()),
        // An artifact is one manifest; an index is refused, never resolved.
        platform_resolver: None,
        connect_timeout: Some(CONNECT_TIMEOUT),
        read_timeout: Some(READ_TIMEOUT),
        user_agent: USER_AGENT,
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|error| OciError::Registry {
        reference: reference.to_string(),
        detail: format!("cannot set up the HTTP client: {error}"),
    })
}

/// The HTTP client uses rustls without a built-in crypto provider (to avoid
/// aws-lc); make ring, which the rest of the host uses, the process default.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // An error means a provider is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

fn registry_auth(options: &OciOptions) -> RegistryAuth {
    match &options.auth {
        Some(credentials) => {
            RegistryAuth::Basic(credentials.username.clone(), credentials.password.clone())
        }
        None => RegistryAuth::Anonymous,
    }
}

/// The top-level imports and exports of a component binary; an error if the
/// bytes are not a component.
fn component_info(bytes: &[u8]) -> Result<ComponentInfo, OciError> {
    use wasmparser::{ComponentExternalKind, ComponentTypeRef, Encoding, Parser, Payload};

    let not_a_component = |detail: String| OciError::NotAComponent { detail };
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(not_a_component(
            "it does not start with the \\0asm magic bytes".to_string(),
        ));
    }
    let mut info = ComponentInfo {
        exports: Vec::new(),
        imports: Vec::new(),
    };
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|error| not_a_component(format!("{error}")))?;
        match payload {
            Payload::Version { encoding, .. } => {
                if depth == 0 && encoding != Encoding::Component {
                    return Err(not_a_component(
                        "it is a core WebAssembly module; build the guest for wasm32-wasip2"
                            .to_string(),
                    ));
                }
                depth += 1;
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 1 => {
                for import in section {
                    let import = import.map_err(|error| not_a_component(format!("{error}")))?;
                    if !matches!(import.ty, ComponentTypeRef::Type(_)) {
                        push_unique(&mut info.imports, import.name.name);
                    }
                }
            }
            Payload::ComponentExportSection(section) if depth == 1 => {
                for export in section {
                    let export = export.map_err(|error| not_a_component(format!("{error}")))?;
                    if export.kind != ComponentExternalKind::Type {
                        push_unique(&mut info.exports, export.name.name);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

fn push_unique(names: &mut Vec<String>, name: &str) {
    if !names.iter().any(|known| known == name) {
        names.push(name.to_string());
    }
}

/// The manifest's only layer, if the manifest has the Wasm artifact layout.
fn component_layer(reference: &str, body: &[u8]) -> Result<OciDescriptor, OciError> {
    let not_wasm = |detail: String| OciError::NotAWasmArtifact {
        reference: reference.to_string(),
        detail,
    };
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| not_wasm(format!("the manifest is not JSON: {error}")))?;
    let media_type = value.get("mediaType").and_then(|m| m.as_str());
    if let Some(media_type) = media_type
        && media_type != OCI_MANIFEST_MEDIA_TYPE
    {
        return Err(not_wasm(format!(
            "the manifest has media type {media_type}, not an OCI image manifest \
             ({OCI_MANIFEST_MEDIA_TYPE}) with one {WASM_LAYER_MEDIA_TYPE} layer"
        )));
    }
    if value.get("manifests").is_some() {
        return Err(not_wasm(
            "it is an image index (several manifests), not one Wasm artifact".to_string(),
        ));
    }
    let manifest: OciImageManifest = serde_json::from_value(value)
        .map_err(|error| not_wasm(format!("the manifest cannot be read: {error}")))?;
    let layer = match manifest.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => layer.clone(),
        [] => {
            return Err(not_wasm(format!(
                "the manifest has no layers; expected exactly one {WASM_LAYER_MEDIA_TYPE} layer"
            )));
        }
        layers => {
            let found: Vec<&str> = layers.iter().map(|l| l.media_type.as_str()).collect();
            return Err(not_wasm(format!(
                "expected exactly one {WASM_LAYER_MEDIA_TYPE} layer, found {} layer{}: {}",
                layers.len(),
                if layers.len() == 1 { "" } else { "s" },
                found.join(", ")
            )));
        }
    };
    if !layer.digest.starts_with("sha256:") {
        return Err(not_wasm(format!(
            "the layer digest {} is not sha256",
            layer.digest
        )));
    }
    let Ok(size) = u64::try_from(layer.size) else {
        return Err(not_wasm(format!(
            "the layer declares a negative size ({})",
            layer.size
        )));
    };
    if size > MAX_COMPONENT_BYTES {
        return Err(OciError::TooLarge {
            reference: reference.to_string(),
            size,
        });
    }
    Ok(layer)
}

fn is_digest_error(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>())
}

/// One error of the registry client, as an [`OciError`] naming the reference.
fn map_error(
    reference: &str,
    parsed: &Reference,
    options: &OciOptions,
    error: OciDistributionError,
) -> OciError {
    let registry = parsed.resolve_registry().to_string();
    let reference_owned = reference.to_string();
    let unauthorized = |detail: String| OciError::Unauthorized {
        reference: reference.to_string(),
        registry: registry.clone(),
        detail: match &options.auth {
            Some(credentials) => format!(
                "{detail} (with the credentials of user {:?})",
                credentials.username
            ),
            None => format!("{detail} (no credentials were given)"),
        },
    };
    let by_status = |status: u16, detail: String| match status {
        401 => unauthorized(format!("401 Unauthorized{}", prefixed(&detail))),
        403 => unauthorized(format!("403 Forbidden{}", prefixed(&detail))),
        404 => OciError::NotFound {
            reference: reference_owned.clone(),
            detail: if detail.is_empty() {
                "404 Not Found".to_string()
            } else {
                detail
            },
        },
        status => OciError::Registry {
            reference: reference_owned.clone(),
            detail: format!("HTTP {status}{}", prefixed(&detail)),
        },
    };
    match error {
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            expected,
            actual,
        }) => OciError::DigestMismatch { expected, actual },
        OciDistributionError::UnauthorizedError { .. } => {
            unauthorized("401 Unauthorized".to_string())
        }
        OciDistributionError::AuthenticationFailure(reason) => {
            unauthorized(format!("authentication failed{}", prefixed(reason.trim())))
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let detail = envelope_text(&envelope);
            let code =
                |wanted: &[OciErrorCode]| envelope.errors.iter().any(|e| wanted.contains(&e.code));
            if code(&[
                OciErrorCode::ManifestUnknown,
                OciErrorCode::NameUnknown,
                OciErrorCode::BlobUnknown,
                OciErrorCode::NotFound,
            ]) {
                OciError::NotFound {
                    reference: reference_owned,
                    detail,
                }
            } else if code(&[OciErrorCode::Unauthorized, OciErrorCode::Denied]) {
                unauthorized(detail)
            } else {
                OciError::Registry {
                    reference: reference_owned,
                    detail,
                }
            }
        }
        OciDistributionError::ServerError { code, message, .. } => {
            let detail = serde_json::from_str::<OciEnvelope>(&message)
                .map(|envelope| envelope_text(&envelope))
                .unwrap_or_else(|_| short(&message));
            by_status(code, detail)
        }
        OciDistributionError::RequestError(error) => {
            if let Some(status) = error.status() {
                return by_status(status.as_u16(), String::new());
            }
            let cause = root_cause(&error);
            let https = !options.insecure_registries.contains(&registry);
            // A plain-HTTP server answering a TLS handshake: say what to do.
            let plain_http = https
                && (cause.contains("InvalidContentType") || cause.contains("corrupt message"));
            let detail = if plain_http {
                format!(
                    "{cause} (the TLS handshake failed; if it serves plain HTTP, list it as an \
                     insecure registry)"
                )
            } else if error.is_connect() || error.is_timeout() {
                cause
            } else {
                format!("the connection failed: {cause}")
            };
            OciError::Unreachable {
                reference: reference_owned,
                registry,
                detail,
            }
        }
        OciDistributionError::IoError(error) => OciError::Unreachable {
            reference: reference_owned,
            registry,
            detail: format!("the transfer failed: {}", root_cause(&error)),
        },
        OciDistributionError::ImageIndexParsingNoPlatformResolverError => {
            OciError::NotAWasmArtifact {
                reference: reference_owned,
                detail: "it is an image index (several manifests), not one Wasm artifact"
                    .to_string(),
            }
        }
        other => OciError::Registry {
            reference: reference_owned,
            detail: short(&other.to_string()),
        },
    }
}

fn prefixed(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

/// The registry's error messages, `CODE: message; …`.
fn envelope_text(envelope: &OciEnvelope) -> String {
    let parts: Vec<String> = envelope
        .errors
        .iter()
        .map(|error| {
            let code = serde_json::to_value(&error.code)
                .ok()
                .and_then(|value| value.as_str().map(str::to_string))
                .unwrap_or_default();
            match (code.is_empty(), error.message.is_empty()) {
                (false, false) => format!("{code}: {}", error.message),
                (false, true) => code,
                _ => error.message.clone(),
            }
        })
        .collect();
    if parts.is_empty() {
        "the registry gave no reason".to_string()
    } else {
        parts.join("; ")
    }
}

/// The innermost cause of an error (for example "Connection refused (os
/// error 111)"), without the URL-laden wrappers around it.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    short(&cause.to_string())
}

/// At most a line of a registry's free-form text.
fn short(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("").trim();
    if line.chars().count() > 200 {
        let cut: String = line.chars().take(200).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(user: &str, password: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    }

    #[test]
    fn credentials_come_from_the_auth_field() {
        let json = format!(
            r#"{{"auths": {{"registry.example.com": {{"auth": "{}"}}}}}}"#,
            auth("robot", "pa:ss")
        );
        let credentials =
            credentials_from_dockerconfigjson(json.as_bytes(), "registry.example.com")
                .expect("valid")
                .expect("an entry");
        assert_eq!(credentials.username, "robot");
        // Only the first colon separates: passwords may contain colons.
        assert_eq!(credentials.password, "pa:ss");
    }

    #[test]
    fn credentials_come_from_username_and_password_fields() {
        let json =
            br#"{"auths": {"registry.example.com:5000": {"username": "u", "password": "p"}}}"#;
        let credentials = credentials_from_dockerconfigjson(json, "registry.example.com:5000")
            .expect("valid")
            .expect("an entry");
        assert_eq!(
            credentials,
            Credentials {
                username: "u".to_string(),
                password: "p".to_string()
            }
        );
    }

    #[test]
    fn the_auth_field_wins_over_username_and_password() {
        let json = format!(
            r#"{{"auths": {{"r.io": {{"username": "old", "password": "old", "auth": "{}"}}}}}}"#,
            auth("new", "secret")
        );
        let credentials = credentials_from_dockerconfigjson(json.as_bytes(), "r.io")
            .expect("valid")
            .expect("an entry");
        assert_eq!(credentials.username, "new");
        assert_eq!(credentials.password, "secret");
    }

    #[test]
    fn keys_with_a_scheme_or_path_and_docker_hub_aliases_match() {
        let json = format!(
            r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}},
                           "http://registry.local:5000/v2/": {{"auth": "{}"}}}}}}"#,
            auth("hub", "h"),
            auth("local", "l")
        );
        let hub = credentials_from_dockerconfigjson(json.as_bytes(), "docker.io")
            .expect("valid")
            .expect("hub entry");
        assert_eq!(hub.username, "hub");
        let local = credentials_from_dockerconfigjson(json.as_bytes(), "registry.local:5000")
            .expect("valid")
            .expect("local entry");
        assert_eq!(local.username, "local");
        // Another port is another registry.
        assert!(
            credentials_from_dockerconfigjson(json.as_bytes(), "registry.local")
                .expect("valid")
                .is_none()
        );
    }

    #[test]
    fn no_entry_for_the_registry_is_none() {
        let json = format!(
            r#"{{"auths": {{"other.io": {{"auth": "{}"}}}}}}"#,
            auth("u", "p")
        );
        assert!(
            credentials_from_dockerconfigjson(json.as_bytes(), "r.io")
                .expect("valid")
                .is_none()
        );
        assert!(
            credentials_from_dockerconfigjson(b"{}", "r.io")
                .expect("valid")
                .is_none()
        );
    }

    #[test]
    fn malformed_configs_and_entries_are_errors_that_say_why() {
        let not_json = credentials_from_dockerconfigjson(b"auths:", "r.io").unwrap_err();
        assert!(
            matches!(not_json, OciError::DockerConfig { .. }),
            "{not_json}"
        );

        let bad_base64 =
            credentials_from_dockerconfigjson(br#"{"auths": {"r.io": {"auth": "%%%"}}}"#, "r.io")
                .unwrap_err();
        assert!(
            bad_base64
                .to_string()
                .contains("auths.r.io.auth is not base64"),
            "{bad_base64}"
        );

        let no_colon = format!(
            r#"{{"auths": {{"r.io": {{"auth": "{}"}}}}}}"#,
            base64::engine::general_purpose::STANDARD.encode("justauser")
        );
        let no_colon = credentials_from_dockerconfigjson(no_colon.as_bytes(), "r.io").unwrap_err();
        assert!(
            no_colon.to_string().contains("USERNAME:PASSWORD"),
            "{no_colon}"
        );

        let empty = credentials_from_dockerconfigjson(
            br#"{"auths": {"r.io": {"identitytoken": "t"}}}"#,
            "r.io",
        )
        .unwrap_err();
        assert!(
            empty.to_string().contains("neither `auth` nor `username`"),
            "{empty}"
        );
    }

    #[test]
    fn credentials_never_show_the_password_in_debug_output() {
        let credentials = Credentials {
            username: "u".to_string(),
            password: "hunter2".to_string(),
        };
        let shown = format!(
            "{:?}",
            OciOptions {
                insecure_registries: Vec::new(),
                auth: Some(credentials),
            }
        );
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn only_components_are_accepted_for_push() {
        let not_wasm = component_info(b"hello world, not wasm").unwrap_err();
        assert!(not_wasm.to_string().contains("magic bytes"), "{not_wasm}");
        let module = wat::parse_str("(module)").expect("module");
        let module = component_info(&module).unwrap_err();
        assert!(
            module.to_string().contains("core WebAssembly module"),
            "{module}"
        );
    }

    #[test]
    fn the_default_policy_lists_its_imports_and_exports() {
        let info = component_info(crate::policy::embedded::DEFAULT_POLICY).expect("a component");
        assert!(
            info.exports
                .iter()
                .any(|name| name.starts_with("radapp:policy/metadata@")),
            "{info:?}"
        );
        assert!(
            info.exports
                .iter()
                .any(|name| name.starts_with("radapp:policy/template-policy@")),
            "{info:?}"
        );
        assert!(!info.imports.is_empty(), "{info:?}");
    }

    #[test]
    fn references_are_checked_before_any_request() {
        let invalid = parse_reference("Not A Reference").unwrap_err();
        assert!(
            matches!(invalid, OciError::InvalidReference { .. }),
            "{invalid}"
        );
        let parsed = parse_reference("127.0.0.1:5000/policies/default:v1").expect("valid");
        assert_eq!(parsed.registry(), "127.0.0.1:5000");
        assert_eq!(parsed.repository(), "policies/default");
        assert_eq!(parsed.tag(), Some("v1"));
        let sha512 = format!("r.io/p@sha512:{}", "a".repeat(128));
        let sha512 = parse_reference(&sha512).unwrap_err();
        assert!(sha512.to_string().contains("only sha256"), "{sha512}");
    }

    #[test]
    fn a_manifest_needs_exactly_one_wasm_layer() {
        let manifest = |layers: &str| {
            format!(
                r#"{{"schemaVersion": 2, "mediaType": "{OCI_MANIFEST_MEDIA_TYPE}",
                    "config": {{"mediaType": "{WASM_CONFIG_MEDIA_TYPE}", "digest": "sha256:{c}", "size": 2}},
                    "layers": [{layers}]}}"#,
                c = "c".repeat(64)
            )
        };
        let layer = |media_type: &str| {
            format!(
                r#"{{"mediaType": "{media_type}", "digest": "sha256:{}", "size": 10}}"#,
                "a".repeat(64)
            )
        };
        let one = manifest(&layer(WASM_LAYER_MEDIA_TYPE));
        assert_eq!(
            component_layer("r", one.as_bytes()).expect("valid").size,
            10
        );

        let two = manifest(&format!(
            "{}, {}",
            layer(WASM_LAYER_MEDIA_TYPE),
            layer("application/vnd.oci.image.layer.v1.tar+gzip")
        ));
        let error = component_layer("r", two.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "found 2 layers: application/wasm, application/vnd.oci.image.layer.v1.tar+gzip"
            ),
            "{error}"
        );
        let tar = manifest(&layer("application/vnd.oci.image.layer.v1.tar"));
        let error = component_layer("r", tar.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("found 1 layer: application/vnd.oci.image.layer.v1.tar"),
            "{error}"
        );
        let none = manifest("");
        let error = component_layer("r", none.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(error.contains("no layers"), "{error}");

        let index = r#"{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}"#;
        let error = component_layer("r", index.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("application/vnd.oci.image.index.v1+json"),
            "{error}"
        );

        let huge = manifest(&format!(
            r#"{{"mediaType": "{WASM_LAYER_MEDIA_TYPE}", "digest": "sha256:{}", "size": {}}}"#,
            "a".repeat(64),
            MAX_COMPONENT_BYTES + 1
        ));
        let error = component_layer("r", huge.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(error.contains("limit"), "{error}");
    }

    #[tokio::test]
    async fn a_push_to_a_reference_pinning_another_digest_is_refused_before_any_request() {
        // Nothing listens on this address; the refusal comes first.
        let reference = format!("127.0.0.1:9/policies/default@sha256:{}", "0".repeat(64));
        let options = OciOptions {
            insecure_registries: vec!["127.0.0.1:9".to_string()],
            auth: None,
        };
        let error = push(
            &reference,
            crate::policy::embedded::DEFAULT_POLICY,
            &options,
        )
        .await
        .unwrap_err();
        assert!(matches!(error, OciError::DigestMismatch { .. }), "{error}");
    }
}
