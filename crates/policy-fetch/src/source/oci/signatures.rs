//! Cosign signatures in the registry (the format is in
//! `policy/trust/mod.rs`): fetching the signature layers stored for a
//! manifest digest, and appending one, as `cosign sign` does.

use std::collections::BTreeMap;

use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::bounded::{MAX_MANIFEST_BYTES, Reader};
use super::errors::map_error;
use super::{
    OCI_MANIFEST_MEDIA_TYPE, OciError, OciOptions, client, parse_reference, registry_auth,
    sha256_digest,
};
use crate::trust::certificate::{CERTIFICATE_ANNOTATION, CHAIN_ANNOTATION, CertifiedLayer};
use crate::trust::{
    SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, SignatureLayer, signature_tag,
};

/// Media type of the (empty image) config of a signature manifest.
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// A payload is a few hundred bytes; a larger layer is not read.
const MAX_PAYLOAD_BYTES: i64 = 64 << 10;
/// More signatures than this under one digest are refused, not read.
const MAX_SIGNATURES: usize = 64;

/// The signature manifest's reference for `digest` in `reference`'s repository.
fn signature_reference(parsed: &Reference, digest: &str) -> Reference {
    Reference::with_tag(
        parsed.registry().to_string(),
        parsed.repository().to_string(),
        signature_tag(digest),
    )
}

/// The signature layers stored for manifest `digest` of `reference`'s
/// repository; none if there is no signature manifest. Each payload is
/// checked against its layer digest.
pub async fn signatures(
    reference: &str,
    digest: &str,
    options: &OciOptions,
) -> Result<Vec<SignatureLayer>, OciError> {
    let layers = certified_signatures(reference, digest, options).await?;
    Ok(layers
        .into_iter()
        .map(|certified| certified.layer)
        .collect())
}

/// [`signatures`], each with the certificate and chain stored beside it
/// (`cosign sign --certificate --certificate-chain`), if any.
pub async fn certified_signatures(
    reference: &str,
    digest: &str,
    options: &OciOptions,
) -> Result<Vec<CertifiedLayer>, OciError> {
    let parsed = parse_reference(reference)?;
    let target = signature_reference(&parsed, digest);
    let client = client(reference, options)?;
    let reader = Reader {
        client: &client,
        parsed: &parsed,
        reference,
        options,
    };
    let bad = |detail: String| OciError::BadSignatures {
        reference: reference.to_string(),
        tag: signature_tag(digest),
        detail,
    };
    // An index is asked for too, only to refuse it as what it is: a
    // registry answers 404 for a manifest whose type is not accepted,
    // which would read as "not signed".
    let body = match reader
        .manifest(
            &target,
            &[
                OCI_MANIFEST_MEDIA_TYPE,
                DOCKER_MANIFEST,
                OCI_INDEX_MEDIA_TYPE,
            ],
        )
        .await
    {
        Ok(body) => body,
        Err(OciError::NotFound { .. }) => return Ok(Vec::new()),
        Err(OciError::ManifestTooLarge { size, .. }) => {
            return Err(bad(format!(
                "the signature manifest is {}larger than {} MiB",
                size.map(|s| format!("{s} bytes, ")).unwrap_or_default(),
                MAX_MANIFEST_BYTES >> 20
            )));
        }
        Err(other) => return Err(other),
    };
    let manifest = read_manifest(&body).map_err(bad)?;
    if manifest.layers.len() > MAX_SIGNATURES {
        return Err(bad(format!(
            "{} signature layers; at most {MAX_SIGNATURES} are read",
            manifest.layers.len()
        )));
    }
    let mut layers = Vec::new();
    for layer in &manifest.layers {
        if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        layers.push(read_signature_layer(&reader, &target, layer, &bad).await?);
    }
    Ok(layers)
}

/// The signature layer `layer` of the signature manifest at `target`: its
/// payload, checked against the layer digest, with the signature,
/// certificate and chain annotated on it. `bad` refuses the signatures.
async fn read_signature_layer(
    reader: &Reader<'_>,
    target: &Reference,
    layer: &OciDescriptor,
    bad: &impl Fn(String) -> OciError,
) -> Result<CertifiedLayer, OciError> {
    if layer.size > MAX_PAYLOAD_BYTES || layer.size < 0 {
        return Err(bad(format!(
            "signature layer {} declares {} bytes; a payload is at most {MAX_PAYLOAD_BYTES}",
            layer.digest, layer.size
        )));
    }
    let payload = reader
        .blob(target, layer, MAX_PAYLOAD_BYTES as u64)
        .await
        .map_err(|error| match error {
            error @ OciError::LayerTooLong { .. } => bad(error.to_string()),
            other => other,
        })?;
    let actual = sha256_digest(&payload);
    if actual != layer.digest {
        return Err(OciError::DigestMismatch {
            expected: layer.digest.clone(),
            actual,
        });
    }
    let annotation = |name: &str| layer.annotations.as_ref()?.get(name).cloned();
    Ok(CertifiedLayer {
        layer: SignatureLayer {
            payload,
            signature: annotation(SIGNATURE_ANNOTATION),
        },
        certificate: annotation(CERTIFICATE_ANNOTATION),
        chain: annotation(CHAIN_ANNOTATION),
    })
}

/// An OCI image index's media type.
const OCI_INDEX_MEDIA_TYPE: &str = oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE;
/// Docker's manifest media type: older cosign releases wrote it.
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// The image manifest stored at a signature tag: an index, or anything but
/// an image manifest, is refused naming what it is.
fn read_manifest(body: &[u8]) -> Result<OciImageManifest, String> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|error| format!("the signature manifest is not JSON: {error}"))?;
    if value.get("manifests").is_some() {
        return Err(
            "it is an image index, not the image manifest of cosign signatures".to_string(),
        );
    }
    serde_json::from_value(value)
        .map_err(|error| format!("the signature manifest cannot be read: {error}"))
}

/// Append a signature layer (`payload` with base64 `signature`) to the
/// signatures of `digest` in `reference`'s repository, keeping those there
/// (as `cosign sign` does). Returns the signature manifest's reference.
pub async fn push_signature(
    reference: &str,
    digest: &str,
    payload: Vec<u8>,
    signature: String,
    options: &OciOptions,
) -> Result<String, OciError> {
    let annotations = BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), signature)]);
    push_signature_layer(reference, digest, payload, annotations, options).await
}

/// [`push_signature`] made with a certificate: the signer's PEM
/// `certificate` and the PEM `chain` above it stored beside the signature,
/// as `cosign sign --certificate --certificate-chain` stores them.
pub async fn push_certified_signature(
    reference: &str,
    digest: &str,
    payload: Vec<u8>,
    signature: String,
    certificate: String,
    chain: Option<String>,
    options: &OciOptions,
) -> Result<String, OciError> {
    let mut annotations = BTreeMap::from([
        (SIGNATURE_ANNOTATION.to_string(), signature),
        (CERTIFICATE_ANNOTATION.to_string(), certificate),
    ]);
    if let Some(chain) = chain {
        annotations.insert(CHAIN_ANNOTATION.to_string(), chain);
    }
    push_signature_layer(reference, digest, payload, annotations, options).await
}

/// Append a signature layer of `payload` with `annotations`.
async fn push_signature_layer(
    reference: &str,
    digest: &str,
    payload: Vec<u8>,
    annotations: BTreeMap<String, String>,
    options: &OciOptions,
) -> Result<String, OciError> {
    let parsed = parse_reference(reference)?;
    let target = signature_reference(&parsed, digest);
    let client = client(reference, options)?;
    let auth = registry_auth(options);
    let failed = |error| map_error(reference, &parsed, options, error);
    client
        .auth(&parsed, &auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(failed)?;
    let mut layers: Vec<OciDescriptor> = match client
        .pull_manifest_raw(&target, &auth, &[OCI_MANIFEST_MEDIA_TYPE, DOCKER_MANIFEST])
        .await
    {
        Ok((body, _)) => {
            read_manifest(&body)
                .map_err(|detail| OciError::Registry {
                    reference: reference.to_string(),
                    detail,
                })?
                .layers
        }
        Err(error) => match failed(error) {
            OciError::NotFound { .. } => Vec::new(),
            other => return Err(other),
        },
    };
    let payload_digest = sha256_digest(&payload);
    let already = layers
        .iter()
        .any(|l| l.digest == payload_digest && l.annotations.as_ref() == Some(&annotations));
    if !already {
        layers.push(OciDescriptor {
            media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_string(),
            digest: payload_digest.clone(),
            size: payload.len() as i64,
            urls: None,
            annotations: Some(annotations),
            artifact_type: None,
        });
    }
    let config_bytes = signature_image_config(&layers);
    let config_digest = sha256_digest(&config_bytes);
    for (data, blob) in [
        (payload, payload_digest.as_str()),
        (config_bytes.clone(), config_digest.as_str()),
    ] {
        if !client.blob_exists(&target, blob).await.map_err(failed)? {
            client
                .push_blob(&target, data, blob)
                .await
                .map_err(failed)?;
        }
    }
    let manifest = signature_manifest(layers, config_digest, config_bytes.len());
    let body = serde_json::to_vec(&manifest).map_err(|error| OciError::Registry {
        reference: reference.to_string(),
        detail: format!("encoding the signature manifest: {error}"),
    })?;
    client
        .push_manifest_raw(
            &target,
            body,
            http::HeaderValue::from_static(OCI_MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(failed)?;
    Ok(target.whole())
}

/// The config of an image with signature layers `layers`, as cosign writes
/// it.
fn signature_image_config(layers: &[OciDescriptor]) -> Vec<u8> {
    let config = serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>()},
        "config": {},
    });
    serde_json::to_vec(&config).unwrap_or_default()
}

/// The signature manifest of signature layers `layers`, with the config of
/// `config_size` bytes at `config_digest`.
fn signature_manifest(
    layers: Vec<OciDescriptor>,
    config_digest: String,
    config_size: usize,
) -> OciImageManifest {
    OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST_MEDIA_TYPE.to_string()),
        config: OciDescriptor {
            media_type: SIGNATURE_CONFIG_MEDIA_TYPE.to_string(),
            digest: config_digest,
            size: config_size as i64,
            urls: None,
            annotations: None,
            artifact_type: None,
        },
        layers,
        subject: None,
        artifact_type: None,
        annotations: None,
    }
}
