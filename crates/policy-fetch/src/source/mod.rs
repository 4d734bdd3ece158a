//! Where policy components come from: a [`Source`] supplies a component's
//! bytes from the binary itself (built-in), a file, a ConfigMap key, an
//! `https` URL or an OCI registry ([`oci`]), all through [`Source::fetch`].
//! No source supplies more than [`MAX_COMPONENT_BYTES`] (32 MiB); a ConfigMap
//! no more than [`MAX_CONFIG_MAP_COMPONENT_BYTES`] (1 MiB).

mod cluster;
pub mod oci;
mod verify;
mod verify_certificate;

pub use cluster::{ClusterReader, ConfigMapData, SecretData};
pub use verify::{VerifyFailure, signatures_verify};

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

use crate::trust::blob;

/// The largest component any source supplies; refused before it is
/// downloaded wherever the size is known first.
// 32 MiB, the limit ReconcilePolicy documented: ample for policies of a few hundred KiB.
pub const MAX_COMPONENT_BYTES: u64 = 32 << 20;
/// The largest component a ConfigMap supplies: the API server keeps a whole
/// ConfigMap under 1 MiB anyway.
pub const MAX_CONFIG_MAP_COMPONENT_BYTES: u64 = 1 << 20;
/// The most bytes of a blob signature read (cosign's is under 100).
const MAX_SIGNATURE_BYTES: u64 = 4096;

/// Timeout of a whole URL fetch.
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);
/// First retry after a fetch failed; doubles to [`RETRY_MAX`].
const RETRY_MIN: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(300);
/// Doublings from [`RETRY_MIN`] past [`RETRY_MAX`].
const RETRY_STEPS_TO_MAX: u32 = 6;

/// Where a component comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A component built into the embedding program (radwasm's default
    /// policy).
    BuiltIn(BuiltIn),
    /// A component file.
    File(PathBuf),
    /// `binaryData[key]` of a ConfigMap.
    ConfigMap {
        namespace: String,
        name: String,
        key: String,
    },
    /// The bytes at a URL (whether its scheme is acceptable is the caller's
    /// rule).
    Url(String),
    /// A Wasm OCI artifact (`registry/repository@sha256:…`), with the
    /// registry's credentials in a `kubernetes.io/dockerconfigjson` Secret
    /// if one is named.
    Oci {
        reference: String,
        pull_secret: Option<SecretRef>,
    },
}

/// A component built into the embedding program: its name in messages and
/// its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    pub name: &'static str,
    pub bytes: &'static [u8],
}

impl fmt::Debug for BuiltIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuiltIn")
            .field("name", &self.name)
            .field("bytes", &format_args!("<{} bytes>", self.bytes.len()))
            .finish()
    }
}

/// A Secret by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// A component's bytes, as a source supplied them.
#[derive(Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    /// Hex SHA-256 of `bytes`, as [`LoadedPolicy::digest`](super::LoadedPolicy::digest).
    pub digest: String,
    /// The source as load errors and the loaded policy name it.
    pub source_name: String,
    /// For an OCI source: the artifact the bytes came from, pinned.
    pub artifact: Option<Artifact>,
    /// For a ConfigMap or file source: its blob signature
    /// (`policy/trust/blob.rs`), read from beside the module, if there is
    /// one.
    pub signature: Option<BlobSignature>,
}

/// The blob signature found beside a module: the key `<key>.sig` of its
/// ConfigMap, or the file `<path>.sig`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobSignature {
    /// Where it was looked for: `ConfigMap NS/NAME key K.sig`, or a path.
    pub name: String,
    /// Its bytes; `None` when there is no such key or file.
    pub bytes: Option<Vec<u8>>,
}

/// The OCI artifact a component was pulled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// `registry/repository@sha256:…`.
    pub reference: String,
    /// The manifest digest, `sha256:…` (a tag resolved to it).
    pub digest: String,
}

impl Fetched {
    fn new(source_name: String, bytes: Vec<u8>) -> Self {
        Self {
            digest: crate::digest(&bytes),
            bytes,
            source_name,
            artifact: None,
            signature: None,
        }
    }

    /// Check the blob signature read beside this module (a file or
    /// ConfigMap module) with the keys in `keys`.
    pub fn verify_blob_signature(
        &self,
        keys: &blob::KeyFiles,
    ) -> Result<crate::trust::Verified, crate::trust::TrustError> {
        let keys = keys.read()?;
        let (name, bytes) = match &self.signature {
            Some(signature) => (signature.name.clone(), signature.bytes.as_deref()),
            None => (blob::signature_name(&self.source_name), None),
        };
        blob::verify_blob(&self.source_name, &self.bytes, &name, bytes, &keys)
    }
}

impl fmt::Debug for Fetched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetched")
            .field("bytes", &format_args!("<{} bytes>", self.bytes.len()))
            .field("digest", &self.digest)
            .field("source_name", &self.source_name)
            .finish()
    }
}

/// Why a source supplied no component.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct SourceError {
    pub kind: SourceErrorKind,
    /// What was read: a path, `ConfigMap NS/NAME key KEY`, `GET URL`, an
    /// OCI reference, `pull secret NS/NAME`.
    pub what: String,
    pub detail: String,
}

/// The kinds of [`SourceError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceErrorKind {
    /// Missing, unreachable, refused, or not where the source says.
    Unavailable,
    /// More bytes than the source may supply.
    TooLarge,
    /// A registry served bytes other than its digests name; none were used.
    DigestMismatch,
}

fn unavailable(what: &str, detail: impl Into<String>) -> SourceError {
    SourceError {
        kind: SourceErrorKind::Unavailable,
        what: what.to_string(),
        detail: detail.into(),
    }
}

/// `the component is N bytes, more than the L MiB limit`.
pub(crate) fn too_large(size: Option<u64>, limit: u64) -> String {
    let limit = limit >> 20;
    match size {
        Some(size) => format!("the component is {size} bytes, more than the {limit} MiB limit"),
        None => format!("the component is more than the {limit} MiB limit"),
    }
}

/// How long to wait before fetching a source again after `failures` fetches
/// of it failed in a row: 5 s, doubling up to 5 min.
pub fn retry_delay(failures: u32) -> Duration {
    // The cap is reached by the 7th failure; no need to step further.
    let steps = failures.saturating_sub(1).min(RETRY_STEPS_TO_MAX);
    ExponentialBuilder::new()
        .with_min_delay(RETRY_MIN)
        .with_factor(2.0)
        .with_max_delay(RETRY_MAX)
        .without_max_times()
        .build()
        .nth(steps as usize)
        .unwrap_or(RETRY_MAX)
}

/// What the remote sources are reached with.
#[derive(Clone)]
pub struct Fetcher {
    cluster: Option<Arc<dyn ClusterReader>>,
    http: Option<reqwest::Client>,
    insecure_registries: Vec<String>,
    user_agent: &'static str,
}

impl Default for Fetcher {
    fn default() -> Self {
        Self {
            cluster: None,
            http: None,
            insecure_registries: Vec::new(),
            user_agent: crate::USER_AGENT,
        }
    }
}

impl Fetcher {
    /// For the built-in and file sources only.
    pub fn local() -> Self {
        Self::default()
    }

    /// For every source: ConfigMaps and pull secrets are read through
    /// `cluster` (without one, those sources fail saying so), registries
    /// in `insecure_registries` (`host:port`) are reached over plain HTTP,
    /// and every request names `user_agent`.
    pub fn new(
        cluster: Option<Arc<dyn ClusterReader>>,
        insecure_registries: Vec<String>,
        user_agent: &'static str,
    ) -> Result<Self, reqwest::Error> {
        Ok(Self {
            cluster,
            http: Some(
                reqwest::Client::builder()
                    .timeout(HTTP_TIMEOUT)
                    .user_agent(user_agent)
                    .build()?,
            ),
            insecure_registries,
            user_agent,
        })
    }

    /// One ConfigMap; `what` names it in the error.
    pub async fn config_map(
        &self,
        namespace: &str,
        name: &str,
        what: &str,
    ) -> Result<ConfigMapData, SourceError> {
        self.cluster(what)?
            .config_map(namespace, name)
            .await
            .map_err(|error| unavailable(what, error))?
            .ok_or_else(|| unavailable(what, "the ConfigMap does not exist"))
    }

    fn oci_options(&self, auth: Option<oci::Credentials>) -> oci::OciOptions {
        oci::OciOptions {
            insecure_registries: self.insecure_registries.clone(),
            auth,
            user_agent: self.user_agent,
        }
    }

    pub(super) fn cluster(&self, what: &str) -> Result<&dyn ClusterReader, SourceError> {
        self.cluster
            .as_deref()
            .ok_or_else(|| unavailable(what, "no Kubernetes client to read it with"))
    }

    /// The credentials for `reference`'s registry in a dockerconfigjson Secret.
    async fn credentials(
        &self,
        secret: &SecretRef,
        reference: &str,
    ) -> Result<Option<oci::Credentials>, SourceError> {
        let what = format!("pull secret {}/{}", secret.namespace, secret.name);
        let data = self
            .cluster(&what)?
            .secret_data(&secret.namespace, &secret.name)
            .await
            .map_err(|error| unavailable(&what, error))?
            .ok_or_else(|| unavailable(&what, "the Secret does not exist"))?;
        let json = data.get(".dockerconfigjson").ok_or_else(|| {
            unavailable(
                &what,
                "no .dockerconfigjson key (type kubernetes.io/dockerconfigjson)",
            )
        })?;
        let registry = reference.split('/').next().unwrap_or_default();
        oci::credentials_from_dockerconfigjson(json, registry)
            .map_err(|error| unavailable(&what, error.to_string()))
    }
}

impl Source {
    /// A policy named on the command line: `default` is `built_in`,
    /// anything else a path.
    pub fn parse(text: &str, built_in: BuiltIn) -> Self {
        if text == "default" {
            Source::BuiltIn(built_in)
        } else {
            Source::File(PathBuf::from(text))
        }
    }

    /// The component's bytes.
    pub async fn fetch(&self, fetcher: &Fetcher) -> Result<Fetched, SourceError> {
        match self {
            Source::BuiltIn(built_in) => Ok(read_built_in(*built_in)),
            Source::File(path) => {
                let path = path.clone();
                tokio::task::spawn_blocking(move || read_file(&path))
                    .await
                    .map_err(|error| unavailable(&self.to_string(), error.to_string()))?
            }
            Source::ConfigMap {
                namespace,
                name,
                key,
            } => {
                let what = self.to_string();
                let config_map = fetcher.config_map(namespace, name, &what).await?;
                let signature = cluster::config_map_signature(&config_map, namespace, name, key);
                let component = cluster::config_map_component(config_map, key, &what)?;
                let mut fetched = Fetched::new(what.clone(), component);
                fetched.signature = Some(signature);
                Ok(fetched)
            }
            Source::Url(url) => fetch_url(fetcher, url).await,
            Source::Oci {
                reference,
                pull_secret,
            } => {
                let auth = match pull_secret {
                    Some(secret) => fetcher.credentials(secret, reference).await?,
                    None => None,
                };
                let options = fetcher.oci_options(auth);
                let pulled = oci::pull(reference, &options).await.map_err(|error| {
                    let kind = match error {
                        oci::OciError::DigestMismatch { .. } => SourceErrorKind::DigestMismatch,
                        oci::OciError::TooLarge { .. } | oci::OciError::ManifestTooLarge { .. } => {
                            SourceErrorKind::TooLarge
                        }
                        _ => SourceErrorKind::Unavailable,
                    };
                    SourceError {
                        kind,
                        what: reference.clone(),
                        detail: error.to_string(),
                    }
                })?;
                let mut fetched = Fetched::new(reference.clone(), pulled.component);
                fetched.artifact = Some(Artifact {
                    reference: pulled.reference,
                    digest: pulled.digest,
                });
                Ok(fetched)
            }
        }
    }

    /// The built-in and file sources, without an async runtime (a policy
    /// slot reloads on a blocking thread); the others need [`Source::fetch`].
    pub fn fetch_local(&self) -> Result<Fetched, SourceError> {
        match self {
            Source::BuiltIn(built_in) => Ok(read_built_in(*built_in)),
            Source::File(path) => read_file(path),
            remote => Err(unavailable(
                &remote.to_string(),
                "a remote source, fetched only by the policy controller",
            )),
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::BuiltIn(built_in) => f.write_str(built_in.name),
            Source::File(path) => write!(f, "{}", path.display()),
            Source::ConfigMap {
                namespace,
                name,
                key,
            } => write!(f, "ConfigMap {namespace}/{name} key {key}"),
            Source::Url(url) => f.write_str(url),
            Source::Oci { reference, .. } => f.write_str(reference),
        }
    }
}

fn read_built_in(built_in: BuiltIn) -> Fetched {
    Fetched::new(built_in.name.to_string(), built_in.bytes.to_vec())
}

fn read_file(path: &Path) -> Result<Fetched, SourceError> {
    let what = path.display().to_string();
    let cannot =
        |error: std::io::Error| unavailable(&what, format!("cannot read the file: {error}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let size = file.metadata().ok().map(|metadata| metadata.len());
    let mut bytes = Vec::new();
    file.take(MAX_COMPONENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_COMPONENT_BYTES {
        return Err(SourceError {
            kind: SourceErrorKind::TooLarge,
            detail: too_large(size, MAX_COMPONENT_BYTES),
            what,
        });
    }
    let mut fetched = Fetched::new(what, bytes);
    fetched.signature = Some(file_signature(path));
    Ok(fetched)
}

/// The file `<path>.sig`, if it exists. One that cannot be read is taken
/// as absent (the refusal then says no signature was found there).
fn file_signature(path: &Path) -> BlobSignature {
    let mut name = path.as_os_str().to_owned();
    name.push(blob::SIGNATURE_SUFFIX);
    let signature = PathBuf::from(name);
    let bytes = std::fs::File::open(&signature).ok().and_then(|file| {
        // A signature is under 100 bytes; more is not one.
        let mut bytes = Vec::new();
        file.take(MAX_SIGNATURE_BYTES)
            .read_to_end(&mut bytes)
            .ok()
            .map(|_| bytes)
    });
    BlobSignature {
        name: signature.display().to_string(),
        bytes,
    }
}

async fn fetch_url(fetcher: &Fetcher, url: &str) -> Result<Fetched, SourceError> {
    let what = format!("GET {url}");
    let failed = |error: reqwest::Error| unavailable(&what, crate::error_chain::joined(&error));
    let http = fetcher
        .http
        .as_ref()
        .ok_or_else(|| unavailable(&what, "no HTTP client to fetch it with"))?;
    let mut response = http.get(url).send().await.map_err(failed)?;
    if !response.status().is_success() {
        return Err(unavailable(&what, format!("HTTP {}", response.status())));
    }
    let refused = |size| SourceError {
        kind: SourceErrorKind::TooLarge,
        what: what.clone(),
        detail: too_large(size, MAX_COMPONENT_BYTES),
    };
    let declared = response.content_length();
    if let Some(size) = declared
        && size > MAX_COMPONENT_BYTES
    {
        return Err(refused(Some(size)));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(declared.unwrap_or(0)).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > MAX_COMPONENT_BYTES {
            return Err(refused(None));
        }
    }
    Ok(Fetched::new(url.to_string(), bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_and_files_are_read_locally_and_a_file_over_the_limit_is_refused() {
        let component = BuiltIn {
            name: "<built in>",
            bytes: b"\0asm built in",
        };
        let built_in = Source::parse("default", component)
            .fetch_local()
            .expect("built in");
        assert_eq!(built_in.bytes, component.bytes);
        assert_eq!(built_in.source_name, "<built in>");
        assert_eq!(built_in.digest, crate::digest(component.bytes));

        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("policy.wasm");
        std::fs::write(&path, b"\0asm").expect("write");
        let file = Source::parse(&path.display().to_string(), component);
        assert_eq!(file, Source::File(path.clone()));
        assert_eq!(file.fetch_local().expect("read").bytes, b"\0asm");

        // A sparse file: the limit is checked without writing 32 MiB.
        std::fs::File::create(&path)
            .and_then(|f| f.set_len(MAX_COMPONENT_BYTES + 1))
            .expect("grow");
        let error = file.fetch_local().unwrap_err();
        assert_eq!(error.kind, SourceErrorKind::TooLarge);
        assert!(
            error.to_string().ends_with(
                "policy.wasm: the component is 33554433 bytes, more than the 32 MiB limit"
            ),
            "{error}"
        );

        let missing = Source::File(dir.path().join("missing.wasm")).fetch_local();
        let error = missing.unwrap_err();
        assert!(
            error
                .to_string()
                .contains("missing.wasm: cannot read the file: "),
            "{error}"
        );
    }

    #[test]
    fn remote_sources_are_not_read_locally() {
        let source = Source::Url("https://example.com/p.wasm".to_string());
        let error = source.fetch_local().unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("https://example.com/p.wasm: "),
            "{error}"
        );
    }

    #[test]
    fn fetches_are_retried_after_5_s_doubling_to_5_min() {
        let delays: Vec<Duration> = (1..=9).map(retry_delay).collect();
        let secs = [5, 10, 20, 40, 80, 160, 300, 300, 300].map(Duration::from_secs);
        assert_eq!(delays, secs);
        assert_eq!(retry_delay(0), RETRY_MIN, "as after one failure");
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }
}
