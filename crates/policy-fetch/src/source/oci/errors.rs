//! Why a push, a pull or reading credentials failed, and how the registry
//! client's errors become one [`OciError`] that names the reference.

use oci_client::Reference;
use oci_client::errors::{OciDistributionError, OciEnvelope, OciErrorCode};

use super::super::{MAX_COMPONENT_BYTES, too_large};
use super::OciOptions;

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
    #[error(
        "{reference}: the manifest is {}larger than the {} MiB a manifest may be; it was not read",
        size.map(|s| format!("{s} bytes, ")).unwrap_or_default(),
        super::MAX_MANIFEST_BYTES >> 20
    )]
    ManifestTooLarge {
        reference: String,
        size: Option<u64>,
    },
    #[error(
        "{reference}: the registry sent more than the {limit} bytes declared for layer {digest}; \
         the rest was not read"
    )]
    LayerTooLong {
        reference: String,
        digest: String,
        limit: u64,
    },
    /// What is stored at a digest's signature tag is not a cosign signature
    /// manifest whose layers can be read: a refusal for trust, not a fetch
    /// failure.
    #[error("{reference}: the signatures stored at {tag} cannot be used: {detail}")]
    BadSignatures {
        reference: String,
        tag: String,
        detail: String,
    },
    #[error("{reference}: the registry failed: {detail}")]
    Registry { reference: String, detail: String },
    #[error("docker config JSON: {detail}")]
    DockerConfig { detail: String },
}

/// One error of the registry client, as an [`OciError`] naming the reference.
pub(super) fn map_error(
    reference: &str,
    parsed: &Reference,
    options: &OciOptions,
    error: OciDistributionError,
) -> OciError {
    let failure = Failure {
        reference,
        registry: parsed.resolve_registry().to_string(),
        options,
    };
    match error {
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            expected,
            actual,
        }) => OciError::DigestMismatch { expected, actual },
        OciDistributionError::UnauthorizedError { .. } => {
            failure.unauthorized("401 Unauthorized".to_string())
        }
        OciDistributionError::AuthenticationFailure(reason) => {
            failure.unauthorized(format!("authentication failed{}", prefixed(reason.trim())))
        }
        OciDistributionError::RegistryError { envelope, .. } => failure.by_envelope(&envelope),
        OciDistributionError::ServerError { code, message, .. } => {
            let detail = serde_json::from_str::<OciEnvelope>(&message)
                .map(|envelope| envelope_text(&envelope))
                .unwrap_or_else(|_| short(&message));
            failure.by_status(code, detail)
        }
        OciDistributionError::RequestError(error) => match error.status() {
            Some(status) => failure.by_status(status.as_u16(), String::new()),
            None => failure
                .connection_failed(root_cause(&error), error.is_connect() || error.is_timeout()),
        },
        OciDistributionError::IoError(error) => OciError::Unreachable {
            reference: reference.to_string(),
            registry: failure.registry,
            detail: format!("the transfer failed: {}", root_cause(&error)),
        },
        OciDistributionError::ImageIndexParsingNoPlatformResolverError => {
            OciError::NotAWasmArtifact {
                reference: reference.to_string(),
                detail: "it is an image index (several manifests), not one Wasm artifact"
                    .to_string(),
            }
        }
        other => OciError::Registry {
            reference: reference.to_string(),
            detail: short(&other.to_string()),
        },
    }
}

/// What a registry client error is mapped with: the reference asked for,
/// its registry, and the options it was asked with.
struct Failure<'a> {
    reference: &'a str,
    registry: String,
    options: &'a OciOptions,
}

impl Failure<'_> {
    /// The registry refused access, for the reason `detail`; the message
    /// says whose credentials were used, if any.
    fn unauthorized(&self, detail: String) -> OciError {
        OciError::Unauthorized {
            reference: self.reference.to_string(),
            registry: self.registry.clone(),
            detail: match &self.options.auth {
                Some(credentials) => format!(
                    "{detail} (with the credentials of user {:?})",
                    credentials.username
                ),
                None => format!("{detail} (no credentials were given)"),
            },
        }
    }

    /// The registry answered with HTTP `status` and `detail` (maybe empty).
    fn by_status(&self, status: u16, detail: String) -> OciError {
        match status {
            401 => self.unauthorized(format!("401 Unauthorized{}", prefixed(&detail))),
            403 => self.unauthorized(format!("403 Forbidden{}", prefixed(&detail))),
            404 => OciError::NotFound {
                reference: self.reference.to_string(),
                detail: if detail.is_empty() {
                    "404 Not Found".to_string()
                } else {
                    detail
                },
            },
            status => OciError::Registry {
                reference: self.reference.to_string(),
                detail: format!("HTTP {status}{}", prefixed(&detail)),
            },
        }
    }

    /// The registry answered with the OCI error envelope `envelope`: not
    /// found, refused access or another failure, by its error codes.
    fn by_envelope(&self, envelope: &OciEnvelope) -> OciError {
        let detail = envelope_text(envelope);
        let code =
            |wanted: &[OciErrorCode]| envelope.errors.iter().any(|e| wanted.contains(&e.code));
        if code(&[
            OciErrorCode::ManifestUnknown,
            OciErrorCode::NameUnknown,
            OciErrorCode::BlobUnknown,
            OciErrorCode::NotFound,
        ]) {
            OciError::NotFound {
                reference: self.reference.to_string(),
                detail,
            }
        } else if code(&[OciErrorCode::Unauthorized, OciErrorCode::Denied]) {
            self.unauthorized(detail)
        } else {
            OciError::Registry {
                reference: self.reference.to_string(),
                detail,
            }
        }
    }

    /// The HTTP request got no answer, for the reason `cause`: the registry
    /// is unreachable (with advice if a plain-HTTP registry was spoken to
    /// with TLS); `connect_or_timeout` if connecting failed or timed out.
    fn connection_failed(self, cause: String, connect_or_timeout: bool) -> OciError {
        let https = !self.options.insecure_registries.contains(&self.registry);
        // A plain-HTTP server answering a TLS handshake: say what to do.
        let plain_http =
            https && (cause.contains("InvalidContentType") || cause.contains("corrupt message"));
        let detail = if plain_http {
            format!(
                "{cause} (the TLS handshake failed; if it serves plain HTTP, list it as an \
                 insecure registry)"
            )
        } else if connect_or_timeout {
            cause
        } else {
            format!("the connection failed: {cause}")
        };
        OciError::Unreachable {
            reference: self.reference.to_string(),
            registry: self.registry,
            detail,
        }
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
    short(&crate::error_chain::innermost(error))
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
