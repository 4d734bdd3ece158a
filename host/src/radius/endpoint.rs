//! Where Radius is and how to authenticate: a direct base URL, or the
//! Kubernetes API server's aggregated path with the Kubernetes credentials
//! (bearer token, client certificate, CA) from kubeconfig or in-cluster config.

use base64::Engine;
use secrecy::ExposeSecret;

use super::RadiusError;
use super::error::{arm_error, one_line};

/// The aggregated API path under which the API server proxies UCP.
pub const AGGREGATED_PATH: &str = "/apis/api.ucp.dev/v1alpha3";

/// A configured way to reach Radius.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Base URL without a trailing slash; resource ids are appended to it.
    pub base: String,
    /// Bearer token sent on every request, if any.
    pub(crate) bearer: Option<String>,
    pub(crate) root_certs: Vec<Vec<u8>>,
    /// Client certificate and key, PEM, for mutual TLS.
    pub(crate) identity_pem: Option<Vec<u8>>,
    pub(crate) accept_invalid_certs: bool,
    /// True for the API server's aggregated path (no `--radius-url`).
    pub(crate) aggregated: bool,
}

impl Endpoint {
    /// Radius at a direct base URL (for example the simulator's).
    pub fn direct(base: &str) -> Result<Self, RadiusError> {
        let parsed = url::Url::parse(base).map_err(|error| {
            RadiusError::invalid("radius base URL", format!("{base:?} is not a URL: {error}"))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(RadiusError::invalid(
                "radius base URL",
                format!("{base:?} must be http or https"),
            ));
        }
        Ok(Self {
            base: base.trim_end_matches('/').to_string(),
            bearer: None,
            root_certs: Vec::new(),
            identity_pem: None,
            accept_invalid_certs: false,
            aggregated: false,
        })
    }

    /// Radius through the API server's aggregated path, authenticated like
    /// the Kubernetes client built from the same `config`.
    pub fn aggregated(config: &kube::Config) -> Result<Self, RadiusError> {
        let cluster = config.cluster_url.to_string();
        let auth = &config.auth_info;
        let bearer = match (&auth.token, &auth.token_file) {
            (Some(token), _) => Some(token.expose_secret().to_string()),
            (None, Some(file)) => Some(
                std::fs::read_to_string(file)
                    .map_err(|e| RadiusError::Config(format!("cannot read tokenFile {file}: {e}")))?
                    .trim()
                    .to_string(),
            ),
            (None, None) => None,
        };
        let certificate = pem_from(
            &auth.client_certificate_data,
            &auth.client_certificate,
            "client-certificate",
        )?;
        let key = match &auth.client_key_data {
            Some(data) => Some(decode_base64(data.expose_secret(), "client-key-data")?),
            None => read_optional(&auth.client_key, "client-key")?,
        };
        let identity_pem = match (certificate, key) {
            (Some(mut certificate), Some(key)) => {
                certificate.push(b'\n');
                certificate.extend_from_slice(&key);
                Some(certificate)
            }
            (None, None) => None,
            _ => {
                return Err(RadiusError::Config(
                    "a client certificate needs both certificate and key".into(),
                ));
            }
        };
        Ok(Self {
            base: format!("{}{AGGREGATED_PATH}", cluster.trim_end_matches('/')),
            bearer,
            root_certs: config.root_cert.clone().unwrap_or_default(),
            identity_pem,
            accept_invalid_certs: config.accept_invalid_certs,
            aggregated: true,
        })
    }

    /// The reqwest client for this endpoint, with `timeout` per request.
    pub(crate) fn http_client(
        &self,
        timeout: std::time::Duration,
    ) -> Result<reqwest::Client, RadiusError> {
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(std::time::Duration::from_secs(5)))
            .danger_accept_invalid_certs(self.accept_invalid_certs)
            .user_agent(crate::USER_AGENT);
        for der in &self.root_certs {
            let certificate = reqwest::Certificate::from_der(der)
                .map_err(|e| RadiusError::Config(format!("cluster CA certificate: {e}")))?;
            builder = builder.add_root_certificate(certificate);
        }
        if let Some(pem) = &self.identity_pem {
            let identity = reqwest::Identity::from_pem(pem)
                .map_err(|e| RadiusError::Config(format!("client certificate: {e}")))?;
            builder = builder.identity(identity);
        }
        builder
            .build()
            .map_err(|e| RadiusError::Config(e.to_string()))
    }
}

fn decode_base64(data: &str, field: &str) -> Result<Vec<u8>, RadiusError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| RadiusError::Config(format!("{field} is not base64: {e}")))
}

fn read_optional(path: &Option<String>, field: &str) -> Result<Option<Vec<u8>>, RadiusError> {
    path.as_ref()
        .map(|path| {
            std::fs::read(path)
                .map_err(|e| RadiusError::Config(format!("cannot read {field} {path}: {e}")))
        })
        .transpose()
}

fn pem_from(
    data: &Option<String>,
    path: &Option<String>,
    field: &str,
) -> Result<Option<Vec<u8>>, RadiusError> {
    match data {
        Some(data) => Ok(Some(decode_base64(data, &format!("{field}-data"))?)),
        None => read_optional(path, field),
    }
}

/// Longest part of an unexpected answer's body kept in a message.
const BODY_CHARS: usize = 300;

/// An error for a non-success answer from `endpoint`: the ARM error if the
/// body is one, else one naming the endpoint, with the body on one line.
pub(crate) fn from_status(status: u16, what: &str, body: &str, endpoint: &Endpoint) -> RadiusError {
    arm_error(status, body).unwrap_or_else(|| {
        // The API server answers a path no APIService serves with a plain
        // "404 page not found": Radius is not installed (or not registered)
        // behind the aggregated path.
        let hint = if status == 404 && endpoint.aggregated {
            format!(
                ". No Radius API is registered at {} (the API server's aggregated path, where \
                 Radius installs UCP): install Radius, or point the controller at Radius with \
                 --radius-url (chart value radius.url)",
                endpoint.base
            )
        } else {
            String::new()
        };
        RadiusError::UnexpectedStatus {
            status,
            what: what.to_string(),
            endpoint: endpoint.base.clone(),
            body: one_line(body, BODY_CHARS),
            hint,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_urls_are_checked_and_normalised() {
        assert_eq!(
            Endpoint::direct("http://127.0.0.1:7443/")
                .expect("valid")
                .base,
            "http://127.0.0.1:7443"
        );
        let error = Endpoint::direct("127.0.0.1:7443").expect_err("no scheme");
        assert!(error.to_string().contains("radius base URL"), "{error}");
    }

    #[test]
    fn the_aggregated_path_uses_the_kubernetes_credentials() {
        let mut config = kube::Config::new("https://10.0.0.1:6443".parse().expect("uri"));
        config.auth_info.token = Some("s3cret".to_string().into());
        let endpoint = Endpoint::aggregated(&config).expect("aggregated");
        assert_eq!(
            endpoint.base,
            "https://10.0.0.1:6443/apis/api.ucp.dev/v1alpha3"
        );
        assert_eq!(endpoint.bearer.as_deref(), Some("s3cret"));
    }

    #[test]
    fn an_answer_that_is_no_arm_error_is_unexpected_and_transient_if_5xx() {
        let direct = Endpoint::direct("http://127.0.0.1:7443").expect("endpoint");
        assert!(from_status(503, "GET x", "<html>", &direct).is_transient());
        assert!(matches!(
            from_status(502, "GET x", "oops", &direct),
            RadiusError::UnexpectedStatus { status: 502, .. }
        ));
    }

    #[test]
    fn a_404_from_the_aggregated_path_names_the_endpoint_and_how_to_change_it() {
        let mut config = kube::Config::new("https://10.0.0.1:6443".parse().expect("uri"));
        config.auth_info.token = Some("t".to_string().into());
        let aggregated = Endpoint::aggregated(&config).expect("aggregated");
        let error = from_status(
            404,
            "PUT resource group /planes/radius/local/resourceGroups/default",
            "404 page not found\n",
            &aggregated,
        );
        assert_eq!(
            error.to_string(),
            "Radius at https://10.0.0.1:6443/apis/api.ucp.dev/v1alpha3 answered 404 to PUT resource group \
             /planes/radius/local/resourceGroups/default: 404 page not found. No Radius API is \
             registered at https://10.0.0.1:6443/apis/api.ucp.dev/v1alpha3 (the API server's \
             aggregated path, where Radius installs UCP): install Radius, or point the controller \
             at Radius with --radius-url (chart value radius.url)"
        );
        // A direct URL gets no such hint: the 404 is that server's own.
        let direct = Endpoint::direct("http://radius.example:7443/").expect("endpoint");
        let error = from_status(404, "PUT resource group g", "nothing\r\nhere\n", &direct);
        assert_eq!(
            error.to_string(),
            "Radius at http://radius.example:7443 answered 404 to PUT resource group g: nothing here"
        );
    }
}
