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

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{self, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::MAX_COMPONENT_BYTES;

mod bounded;
mod credentials;
mod errors;
mod referrers;
mod signatures;

pub use bounded::MAX_MANIFEST_BYTES;
pub use credentials::{Credentials, credentials_from_dockerconfigjson};
pub use errors::OciError;
use errors::map_error;
pub use referrers::{MAX_BUNDLE_BYTES, MAX_REFERRERS, bundles, referrers_tag};
pub use signatures::{certified_signatures, push_certified_signature, push_signature, signatures};

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

/// Manifest media types a pull asks for: an OCI image manifest is the
/// layout; the others are accepted only to say precisely what was found.
const ACCEPTED_MANIFESTS: &[&str] = &[
    OCI_MANIFEST_MEDIA_TYPE,
    manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
    manifest::IMAGE_MANIFEST_MEDIA_TYPE,
    manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
];

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct OciOptions {
    /// Registries (`host:port`, as written in references) reached over plain
    /// HTTP instead of HTTPS, for example a test registry on loopback.
    pub insecure_registries: Vec<String>,
    /// Basic credentials for the registry; anonymous access without them.
    pub auth: Option<Credentials>,
    /// The `User-Agent` of every registry request: the embedding program's
    /// name and version ([`crate::USER_AGENT`] by default).
    pub user_agent: &'static str,
}

impl Default for OciOptions {
    fn default() -> Self {
        Self {
            insecure_registries: Vec::new(),
            auth: None,
            user_agent: crate::USER_AGENT,
        }
    }
}

/// A warning for each registry of `registries` (`host:port`, as in
/// references) reached over plain HTTP that is not on loopback: there
/// anyone on the network path can read the credentials and change the
/// bytes (digests and signatures still refuse changed content).
pub fn insecure_registry_warnings(registries: &[String]) -> Vec<String> {
    registries
        .iter()
        .filter(|registry| !is_loopback(registry))
        .map(|registry| {
            format!(
                "registry {registry} is reached over plain HTTP and is not on loopback: anyone \
                 on the network path can read its credentials and serve other bytes (a pinned \
                 digest or spec.verify still refuses them)"
            )
        })
        .collect()
}

/// `localhost`, `127.x.y.z` or `[::1]`, with or without a port.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(host, _)| host),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
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

    let reader = bounded::Reader {
        client: &client,
        parsed: &parsed,
        reference,
        options,
    };
    // Hashed here (not only against the registry's Docker-Content-Digest
    // header), so the rule does not depend on the registry sending it.
    let body = reader.manifest(&parsed, ACCEPTED_MANIFESTS).await?;
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
    let component = reader.blob(&parsed, &layer, MAX_COMPONENT_BYTES).await?;
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
        user_agent: options.user_agent,
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

#[cfg(test)]
mod tests;
