//! Reads from a registry that the registry cannot make unbounded, so a
//! hostile registry cannot push the controller past its memory limit:
//! a manifest is at most [`MAX_MANIFEST_BYTES`], a blob at most the size
//! its manifest declares (and never more than the caller's limit).
//!
//! Not oci-client's `pull_manifest_raw`: it reads the body whole, whatever
//! its length (and `pull_blob` writes out whatever the registry streams).
//! oci-client still does the login (`Client::auth`: the `/v2/` ping and the
//! token exchange) and this module sends the manifest GET with the token
//! it got. What oci-client reads whole is then only the token server's
//! answer and the error bodies of blob requests.

use futures::StreamExt;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciDescriptor;
use oci_client::{Client, Reference, RegistryOperation};

use super::errors::map_error;
use super::{CONNECT_TIMEOUT, OciError, OciOptions, READ_TIMEOUT, registry_auth, sha256_digest};

/// The most a manifest may be: the limit of the CNCF distribution registry
/// (and of containers/image) for the manifests it accepts. A Wasm artifact's
/// manifest is under 1 KiB, a signature manifest a few KiB.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most of an error body that is read (it is shown in one line).
const MAX_ERROR_BYTES: u64 = 64 << 10;

/// One registry conversation about `reference`.
pub(super) struct Reader<'a> {
    pub client: &'a Client,
    pub parsed: &'a Reference,
    pub reference: &'a str,
    pub options: &'a OciOptions,
}

impl Reader<'_> {
    fn failed(&self, error: OciDistributionError) -> OciError {
        map_error(self.reference, self.parsed, self.options, error)
    }

    /// The manifest `target` names (a tag or a digest in `parsed`'s
    /// repository), asking for `accepted` media types: at most
    /// [`MAX_MANIFEST_BYTES`], and equal to the digest the registry names it
    /// by (`Docker-Content-Digest`) if it names one.
    pub async fn manifest(
        &self,
        target: &Reference,
        accepted: &[&str],
    ) -> Result<Vec<u8>, OciError> {
        let version = target
            .digest()
            .or(target.tag())
            .unwrap_or("latest")
            .to_string();
        self.get(target, &format!("manifests/{version}"), accepted)
            .await
    }

    /// The OCI referrers API's image index of the manifests whose subject
    /// is `digest` (`GET /v2/<repository>/referrers/<digest>`), at most
    /// [`MAX_MANIFEST_BYTES`]; a registry without the API answers 404
    /// ([`OciError::NotFound`]).
    pub async fn referrers(&self, target: &Reference, digest: &str) -> Result<Vec<u8>, OciError> {
        self.get(
            target,
            &format!("referrers/{digest}"),
            &[oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE],
        )
        .await
    }

    /// `GET /v2/<repository>/<path>` of `target`'s repository, at most
    /// [`MAX_MANIFEST_BYTES`].
    async fn get(
        &self,
        target: &Reference,
        path: &str,
        accepted: &[&str],
    ) -> Result<Vec<u8>, OciError> {
        let auth = registry_auth(self.options);
        let token = self
            .client
            .auth(target, &auth, RegistryOperation::Pull)
            .await
            .map_err(|error| self.failed(error))?;
        let registry = target.resolve_registry();
        let scheme = match self
            .options
            .insecure_registries
            .iter()
            .any(|r| r == registry)
        {
            true => "http",
            false => "https",
        };
        let url = format!("{scheme}://{registry}/v2/{}/{path}", target.repository());
        let mut request = http_client(self.reference, self.options.user_agent)?
            .get(&url)
            .header(http::header::ACCEPT, accepted.join(", "));
        request = match (token, &self.options.auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, Some(credentials)) => {
                request.basic_auth(&credentials.username, Some(&credentials.password))
            }
            (None, None) => request,
        };
        let transfer = |error: reqwest::Error| {
            self.failed(OciDistributionError::IoError(std::io::Error::other(
                crate::error_chain::joined(&error),
            )))
        };
        let response = request.send().await.map_err(transfer)?;
        let status = response.status();
        let header_digest = response
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        if !status.is_success() {
            let body = read_capped(response, MAX_ERROR_BYTES)
                .await
                .unwrap_or_default();
            let error = match status.as_u16() {
                401 => OciDistributionError::UnauthorizedError { url },
                code => OciDistributionError::ServerError {
                    code,
                    url,
                    message: String::from_utf8_lossy(&body).into_owned(),
                },
            };
            return Err(self.failed(error));
        }
        let too_large = |size: Option<u64>| OciError::ManifestTooLarge {
            reference: self.reference.to_string(),
            size,
        };
        if let Some(size) = response.content_length()
            && size > MAX_MANIFEST_BYTES
        {
            return Err(too_large(Some(size)));
        }
        let body =
            read_capped(response, MAX_MANIFEST_BYTES)
                .await
                .map_err(|error| match error {
                    Capped::Over => too_large(None),
                    Capped::Transfer(error) => transfer(error),
                })?;
        if let Some(expected) = header_digest
            && expected.starts_with("sha256:")
        {
            let actual = sha256_digest(&body);
            if actual != expected {
                return Err(OciError::DigestMismatch { expected, actual });
            }
        }
        Ok(body)
    }

    /// The blob `layer` names in `target`'s repository (only there: never
    /// from the other `urls` a manifest may list), at most `limit` bytes and
    /// exactly the size the descriptor declares. The digest is the caller's
    /// to check.
    pub async fn blob(
        &self,
        target: &Reference,
        layer: &OciDescriptor,
        limit: u64,
    ) -> Result<Vec<u8>, OciError> {
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        let limit = limit.min(declared);
        let over = || OciError::LayerTooLong {
            reference: self.reference.to_string(),
            digest: layer.digest.clone(),
            limit,
        };
        // Without its `urls`: a manifest may name other places to fetch a
        // layer from, which the registry client would try (without
        // credentials) when the registry does not serve it; a registry
        // must not send the controller to any address it names.
        let layer = OciDescriptor {
            urls: None,
            ..layer.clone()
        };
        let mut stream = self
            .client
            .pull_blob_stream(target, &layer)
            .await
            .map_err(|error| self.failed(error))?;
        let mut bytes = Vec::with_capacity(usize::try_from(limit.min(1 << 20)).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(chunk) => {
                    if (bytes.len() + chunk.len()) as u64 > limit {
                        return Err(over());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                // The stream ends in an error when its own digest check
                // fails; the caller's check names both digests.
                Err(error) if is_digest_error(&error) => break,
                Err(error) => return Err(self.failed(OciDistributionError::IoError(error))),
            }
        }
        Ok(bytes)
    }
}

fn is_digest_error(error: &std::io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<oci_client::errors::DigestError>())
}

enum Capped {
    Over,
    Transfer(reqwest::Error),
}

/// The body of `response`, or [`Capped::Over`] as soon as it passes `limit`.
async fn read_capped(mut response: reqwest::Response, limit: u64) -> Result<Vec<u8>, Capped> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Capped::Transfer)? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(Capped::Over);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The HTTP client of manifest reads, built once per user agent (a
/// process has one): the timeouts and user agent of the registry client.
fn http_client(reference: &str, user_agent: &'static str) -> Result<reqwest::Client, OciError> {
    static CLIENTS: std::sync::Mutex<Vec<(&'static str, reqwest::Client)>> =
        std::sync::Mutex::new(Vec::new());
    let mut clients = CLIENTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, client)) = clients.iter().find(|(agent, _)| *agent == user_agent) {
        return Ok(client.clone());
    }
    super::install_crypto_provider();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .user_agent(user_agent)
        .build()
        .map_err(|error| OciError::Registry {
            reference: reference.to_string(),
            detail: format!("cannot set up the HTTP client: {error}"),
        })?;
    clients.push((user_agent, client.clone()));
    Ok(client)
}
