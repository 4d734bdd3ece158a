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
    let at = |version: String| {
        Reference::with_tag(
            parsed.registry().to_string(),
            parsed.repository().to_string(),
            version,
        )
    };
    let tag = referrers_tag(digest);
    let bad = |detail: String| OciError::BadSignatures {
        reference: reference.to_string(),
        tag: format!("the OCI referrers of {digest}"),
        detail,
    };
    let too_large = |what: &str, size: Option<u64>| {
        bad(format!(
            "{what} is {}larger than {} MiB",
            size.map(|s| format!("{s} bytes, ")).unwrap_or_default(),
            MAX_MANIFEST_BYTES >> 20
        ))
    };
    // The API first; a registry without it answers 404, and then the tag.
    let index = match reader.referrers(&at(tag.clone()), digest).await {
        Ok(body) => body,
        Err(OciError::NotFound { .. }) => {
            match reader
                .manifest(&at(tag.clone()), &[OCI_IMAGE_INDEX_MEDIA_TYPE])
                .await
            {
                Ok(body) => body,
                Err(OciError::NotFound { .. }) => return Ok(Vec::new()),
                Err(OciError::ManifestTooLarge { size, .. }) => {
                    return Err(too_large(
                        &format!("the referrers index at tag {tag}"),
                        size,
                    ));
                }
                Err(other) => return Err(other),
            }
        }
        Err(OciError::ManifestTooLarge { size, .. }) => {
            return Err(too_large("the referrers API's index", size));
        }
        Err(other) => return Err(other),
    };
    let index: Index = serde_json::from_slice(&index)
        .map_err(|error| bad(format!("the referrers index cannot be read: {error}")))?;
    let listed: Vec<&Listed> = index
        .manifests
        .iter()
        .filter(|m| m.artifact_type.as_deref().is_some_and(is_bundle_media_type))
        .collect();
    if listed.len() > MAX_REFERRERS {
        return Err(bad(format!(
            "{} sigstore bundles; at most {MAX_REFERRERS} are read",
            listed.len()
        )));
    }
    let mut bundles = Vec::new();
    for entry in listed {
        let target = Reference::with_digest(
            parsed.registry().to_string(),
            parsed.repository().to_string(),
            entry.digest.clone(),
        );
        let body = match reader.manifest(&target, &[OCI_MANIFEST_MEDIA_TYPE]).await {
            Ok(body) => body,
            Err(OciError::ManifestTooLarge { size, .. }) => {
                return Err(too_large(&format!("the manifest {}", entry.digest), size));
            }
            Err(other) => return Err(other),
        };
        let actual = sha256_digest(&body);
        if actual != entry.digest {
            return Err(OciError::DigestMismatch {
                expected: entry.digest.clone(),
                actual,
            });
        }
        let manifest: OciImageManifest = serde_json::from_slice(&body).map_err(|error| {
            bad(format!(
                "the bundle manifest {} cannot be read: {error}",
                entry.digest
            ))
        })?;
        let Some(layer) = bundle_layer(&manifest) else {
            return Err(bad(format!(
                "the bundle manifest {} has no single sigstore bundle layer",
                entry.digest
            )));
        };
        if u64::try_from(layer.size).map_or(true, |size| size > MAX_BUNDLE_BYTES) {
            return Err(bad(format!(
                "the bundle {} declares {} bytes; a bundle is at most {MAX_BUNDLE_BYTES}",
                layer.digest, layer.size
            )));
        }
        let bundle = reader
            .blob(&target, layer, MAX_BUNDLE_BYTES)
            .await
            .map_err(|error| match error {
                error @ OciError::LayerTooLong { .. } => bad(error.to_string()),
                other => other,
            })?;
        let actual = sha256_digest(&bundle);
        if actual != layer.digest {
            return Err(OciError::DigestMismatch {
                expected: layer.digest.clone(),
                actual,
            });
        }
        bundles.push(BundleLayer {
            referrer: entry.digest.clone(),
            bundle,
        });
    }
    Ok(bundles)
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
