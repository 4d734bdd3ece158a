//! cosign 3's signatures in the registry (the format is in
//! `policy/trust/bundle.rs`): the sigstore bundles stored as OCI referrers
//! of a manifest digest.
//!
//! The referrers are listed by the OCI 1.1 referrers API (`GET
//! /v2/<repository>/referrers/<digest>`) where the registry serves it, else
//! by the referrers tag schema: the image index tagged `sha256-<hex>`
//! (which cosign writes where the API is missing, as with CNCF distribution
//! 2.8). Of the listed manifests, those whose `artifactType` is a sigstore
//! bundle are read: each is an image manifest with the bundle as its one
//! layer. Every read is bounded (`bounded.rs`): the index and each manifest
//! at most [`MAX_MANIFEST_BYTES`], at most [`MAX_REFERRERS`] bundles, each
//! at most [`MAX_BUNDLE_BYTES`].

use oci_client::Reference;
use oci_client::manifest::{OCI_IMAGE_INDEX_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use serde::Deserialize;

use super::bounded::{MAX_MANIFEST_BYTES, Reader};
use super::{
    OCI_MANIFEST_MEDIA_TYPE, OciError, OciOptions, client, parse_reference, sha256_digest,
};
use crate::trust::bundle::{BundleLayer, is_bundle_media_type};

/// A bundle is a few KiB (a certificate chain included); a larger one is
/// not read.
pub const MAX_BUNDLE_BYTES: u64 = 64 << 10;
/// More sigstore bundles than this among a digest's referrers are refused,
/// not read.
pub const MAX_REFERRERS: usize = 64;

/// The referrers tag of manifest `digest` (`sha256:<hex>`): `sha256-<hex>`.
pub fn referrers_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

#[derive(Debug, Deserialize)]
struct Index {
    #[serde(default)]
    manifests: Vec<Listed>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed {
    digest: String,
    #[serde(default)]
    artifact_type: Option<String>,
}

/// The sigstore bundles stored as referrers of manifest `digest` of
/// `reference`'s repository; none if it has no referrers. Each bundle is
/// checked against its layer digest, each manifest against its digest.
pub async fn bundles(
    reference: &str,
    digest: &str,
    options: &OciOptions,
) -> Result<Vec<BundleLayer>, OciError> {
    let parsed = parse_reference(reference)?;
    let client = client(reference, options)?;
    let reader = Reader {
        client: &client,
        parsed: &parsed,
        reference,
        options,
    };
    let refusal = Refusal { reference, digest };
    let Some(index) = referrers_index(&reader, digest, &refusal).await? else {
        return Ok(Vec::new());
    };
    let listed = bundle_entries(&index, &refusal)?;
    let mut bundles = Vec::new();
    for entry in listed {
        bundles.push(read_bundle(&reader, entry, &refusal).await?);
    }
    Ok(bundles)
}

/// How the referrers of one digest are refused as unusable signatures.
struct Refusal<'a> {
    reference: &'a str,
    digest: &'a str,
}

impl Refusal<'_> {
    /// The referrers cannot be used, for the reason `detail`.
    fn bad(&self, detail: String) -> OciError {
        OciError::BadSignatures {
            reference: self.reference.to_string(),
            tag: format!("the OCI referrers of {}", self.digest),
            detail,
        }
    }

    /// `what` (of `size` bytes, if known) is larger than a manifest may be.
    fn too_large(&self, what: &str, size: Option<u64>) -> OciError {
        self.bad(format!(
            "{what} is {}larger than {} MiB",
            size.map(|s| format!("{s} bytes, ")).unwrap_or_default(),
            MAX_MANIFEST_BYTES >> 20
        ))
    }
}

/// The body of the referrers index of `digest`: from the referrers API
/// first; a registry without it answers 404, and then from the referrers
/// tag. `None` if neither exists.
async fn referrers_index(
    reader: &Reader<'_>,
    digest: &str,
    refusal: &Refusal<'_>,
) -> Result<Option<Vec<u8>>, OciError> {
    let tag = referrers_tag(digest);
    let at = Reference::with_tag(
        reader.parsed.registry().to_string(),
        reader.parsed.repository().to_string(),
        tag.clone(),
    );
    match reader.referrers(&at, digest).await {
        Ok(body) => Ok(Some(body)),
        Err(OciError::NotFound { .. }) => {
            match reader.manifest(&at, &[OCI_IMAGE_INDEX_MEDIA_TYPE]).await {
                Ok(body) => Ok(Some(body)),
                Err(OciError::NotFound { .. }) => Ok(None),
                Err(OciError::ManifestTooLarge { size, .. }) => {
                    Err(refusal.too_large(&format!("the referrers index at tag {tag}"), size))
                }
                Err(other) => Err(other),
            }
        }
        Err(OciError::ManifestTooLarge { size, .. }) => {
            Err(refusal.too_large("the referrers API's index", size))
        }
        Err(other) => Err(other),
    }
}

/// The entries of referrers index `index` whose artifact type is a
/// sigstore bundle; refused if there are more than [`MAX_REFERRERS`].
fn bundle_entries(index: &[u8], refusal: &Refusal<'_>) -> Result<Vec<Listed>, OciError> {
    let index: Index = serde_json::from_slice(index)
        .map_err(|error| refusal.bad(format!("the referrers index cannot be read: {error}")))?;
    let listed: Vec<Listed> = index
        .manifests
        .into_iter()
        .filter(|m| m.artifact_type.as_deref().is_some_and(is_bundle_media_type))
        .collect();
    if listed.len() > MAX_REFERRERS {
        return Err(refusal.bad(format!(
            "{} sigstore bundles; at most {MAX_REFERRERS} are read",
            listed.len()
        )));
    }
    Ok(listed)
}

/// The bundle of listed referrer `entry`: its manifest, checked against
/// the entry's digest, and the manifest's one bundle layer, checked against
/// the layer's digest.
async fn read_bundle(
    reader: &Reader<'_>,
    entry: Listed,
    refusal: &Refusal<'_>,
) -> Result<BundleLayer, OciError> {
    let target = Reference::with_digest(
        reader.parsed.registry().to_string(),
        reader.parsed.repository().to_string(),
        entry.digest.clone(),
    );
    let body = match reader.manifest(&target, &[OCI_MANIFEST_MEDIA_TYPE]).await {
        Ok(body) => body,
        Err(OciError::ManifestTooLarge { size, .. }) => {
            return Err(refusal.too_large(&format!("the manifest {}", entry.digest), size));
        }
        Err(other) => return Err(other),
    };
    check_digest(&entry.digest, &body)?;
    let manifest: OciImageManifest = serde_json::from_slice(&body).map_err(|error| {
        refusal.bad(format!(
            "the bundle manifest {} cannot be read: {error}",
            entry.digest
        ))
    })?;
    let Some(layer) = bundle_layer(&manifest) else {
        return Err(refusal.bad(format!(
            "the bundle manifest {} has no single sigstore bundle layer",
            entry.digest
        )));
    };
    if u64::try_from(layer.size).map_or(true, |size| size > MAX_BUNDLE_BYTES) {
        return Err(refusal.bad(format!(
            "the bundle {} declares {} bytes; a bundle is at most {MAX_BUNDLE_BYTES}",
            layer.digest, layer.size
        )));
    }
    let bundle = reader
        .blob(&target, layer, MAX_BUNDLE_BYTES)
        .await
        .map_err(|error| match error {
            error @ OciError::LayerTooLong { .. } => refusal.bad(error.to_string()),
            other => other,
        })?;
    check_digest(&layer.digest, &bundle)?;
    Ok(BundleLayer {
        referrer: entry.digest,
        bundle,
    })
}

/// Whether `content` has digest `expected`; a mismatch refuses it.
fn check_digest(expected: &str, content: &[u8]) -> Result<(), OciError> {
    let actual = sha256_digest(content);
    if actual == expected {
        Ok(())
    } else {
        Err(OciError::DigestMismatch {
            expected: expected.to_string(),
            actual,
        })
    }
}

/// The one layer of a bundle manifest, if it is a sigstore bundle (as
/// cosign reads it: exactly one layer).
fn bundle_layer(manifest: &OciImageManifest) -> Option<&OciDescriptor> {
    match &manifest.layers[..] {
        [layer]
            if layer
                .media_type
                .starts_with("application/vnd.dev.sigstore.bundle") =>
        {
            Some(layer)
        }
        _ => None,
    }
}
