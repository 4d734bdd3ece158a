//! The Radius HTTP client: one method per thing a controller does. Each
//! request goes through [`send`] (a timeout, retries with jittered backoff
//! on 429, 5xx and connection failures, `Retry-After` honoured); [`poll`]
//! follows a started operation to its outcome.

mod poll;
mod send;

use send::Answer;
pub use send::RetryPolicy;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::endpoint::{self, AGGREGATED_PATH};
use super::error::RadiusError;
use super::operation::{OperationKind, ResumeToken};
use super::{DEPLOYMENT_API_VERSION, Endpoint, RESOURCE_API_VERSION};
use radwasm_policy_model::scope::{Scope, parse_resource_id};
use std::sync::Arc;

use crate::metrics::Metrics;

/// A deployment to start: the spec of a `DeploymentTemplate` as JSON texts.
#[derive(Debug, Clone)]
pub struct DeploymentRequest<'a> {
    pub scope: &'a str,
    pub name: &'a str,
    pub template: &'a str,
    pub parameters: &'a str,
    pub provider_config: &'a str,
    /// Carried in the resume token (the spec hash being deployed).
    pub subject: &'a str,
}

/// The first answer to a DELETE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteStart {
    /// Deleted at once (200/204), or already gone (404).
    Done { already_gone: bool },
    /// Accepted (202); poll the token.
    Started(ResumeToken),
}

/// How long a resource group found or created is taken to exist without
/// asking Radius again: a fleet deploying into one group asks for it about
/// once in this time instead of once per deployment. A group deleted in the
/// meantime shows as a 404 to the deployment's PUT, which confirms the group
/// again and PUTs once more ([`RadiusClient::start_deployment`]).
pub const GROUP_CONFIRMED_FOR: Duration = Duration::from_secs(30);

/// Resource groups kept in [`KnownGroups`] before the expired ones are
/// dropped.
const KNOWN_GROUPS_PRUNED_PAST: usize = 1024;

/// The resource groups this client found or created lately, by scope, with
/// when.
#[derive(Debug, Default)]
struct KnownGroups(Mutex<HashMap<String, Instant>>);

impl KnownGroups {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn is_known(&self, scope: &str) -> bool {
        self.lock()
            .get(scope)
            .is_some_and(|at| at.elapsed() < GROUP_CONFIRMED_FOR)
    }

    fn confirmed(&self, scope: &str) {
        let mut known = self.lock();
        if known.len() >= KNOWN_GROUPS_PRUNED_PAST {
            known.retain(|_, at| at.elapsed() < GROUP_CONFIRMED_FOR);
        }
        known.insert(scope.to_string(), Instant::now());
    }

    fn forget(&self, scope: &str) {
        self.lock().remove(scope);
    }
}

/// Client for one Radius endpoint. Cheap to clone; clones share what they
/// know of resource groups.
#[derive(Clone)]
pub struct RadiusClient {
    endpoint: Endpoint,
    http: reqwest::Client,
    retry: RetryPolicy,
    metrics: Option<Arc<Metrics>>,
    groups: Arc<KnownGroups>,
}

impl std::fmt::Debug for RadiusClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RadiusClient")
            .field("endpoint", &self.endpoint)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl RadiusClient {
    pub fn new(endpoint: Endpoint, retry: RetryPolicy) -> Result<Self, RadiusError> {
        let http = endpoint.http_client(retry.timeout)?;
        Ok(Self {
            endpoint,
            http,
            retry,
            metrics: None,
            groups: Arc::default(),
        })
    }

    /// Count every request attempt, by method, outcome and status code.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn observe(&self, method: &reqwest::Method, code: u16, started: std::time::Instant) {
        if let Some(metrics) = &self.metrics {
            metrics.observe_radius_request(method.as_str(), code, started.elapsed());
        }
    }

    /// The base URL requests go to.
    pub fn base(&self) -> &str {
        &self.endpoint.base
    }

    /// Create the resource group named by `scope` unless it exists. Returns
    /// true if it was created. A group this client found or created within
    /// [`GROUP_CONFIRMED_FOR`] is taken to exist without a request.
    pub async fn ensure_resource_group(&self, scope: &str) -> Result<bool, RadiusError> {
        let parsed =
            Scope::parse(scope).map_err(|e| RadiusError::invalid("scope", e.to_string()))?;
        if self.groups.is_known(scope) {
            return Ok(false);
        }
        let created = self.confirm_resource_group(&parsed).await?;
        self.groups.confirmed(scope);
        Ok(created)
    }

    /// Ask Radius for the group, and create it if it is missing.
    async fn confirm_resource_group(&self, scope: &Scope) -> Result<bool, RadiusError> {
        let path = format!(
            "/planes/radius/{}/resourceGroups/{}?api-version={RESOURCE_API_VERSION}",
            scope.plane(),
            scope.group()
        );
        let what = format!("GET resource group {scope}");
        let answer = self.send(reqwest::Method::GET, &path, None, &what).await?;
        match answer.status {
            200 => return Ok(false),
            404 => {}
            status => {
                return Err(self.unexpected(status, &what, &answer.body));
            }
        }
        let what = format!("PUT resource group {scope}");
        let body = json!({"location": "global", "properties": {}});
        let answer = self
            .send(reqwest::Method::PUT, &path, Some(&body), &what)
            .await?;
        match answer.status {
            200 | 201 => Ok(true),
            status => Err(self.unexpected(status, &what, &answer.body)),
        }
    }

    /// PUT a deployment (mode Incremental) and return the token to poll it.
    /// Inputs are checked before anything is sent; the error names the field.
    pub async fn start_deployment(
        &self,
        request: &DeploymentRequest<'_>,
    ) -> Result<ResumeToken, RadiusError> {
        let scope = Scope::parse(request.scope)
            .map_err(|e| RadiusError::invalid("scope", e.to_string()))?;
        check_deployment_name(request.name)?;
        let template: Value = serde_json::from_str(request.template)
            .map_err(|e| RadiusError::invalid("template", format!("not valid JSON ({e})")))?;
        if !template.is_object() {
            return Err(RadiusError::invalid(
                "template",
                "must be a JSON object (a compiled ARM template)",
            ));
        }
        let mut parameters: Value = if request.parameters.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(request.parameters)
                .map_err(|e| RadiusError::invalid("parameters", format!("not valid JSON ({e})")))?
        };
        let Some(entries) = parameters.as_object_mut() else {
            return Err(RadiusError::invalid(
                "parameters",
                "must be a JSON object of ARM parameters, {\"name\": {\"value\": ...}}",
            ));
        };
        // ARM's parameter form: each value wrapped as {"value": ...} (or a
        // {"reference": ...} to a secret store).
        if let Some((name, _)) = entries.iter().find(|(_, entry)| {
            !entry
                .as_object()
                .is_some_and(|e| e.contains_key("value") || e.contains_key("reference"))
        }) {
            return Err(RadiusError::invalid(
                "parameters",
                format!(
                    "parameter {name:?} must be an object {{\"value\": ...}} (ARM's parameter form)"
                ),
            ));
        }
        // Text values (Radius's manifest shape) as the declared types.
        super::parameters::convert_to_declared_types(&template, entries)
            .map_err(|message| RadiusError::invalid("parameters", message))?;
        let provider_config: Value = serde_json::from_str(request.provider_config)
            .map_err(|e| RadiusError::invalid("providerConfig", format!("not valid JSON ({e})")))?;
        if !provider_config.is_object() {
            return Err(RadiusError::invalid(
                "providerConfig",
                "must be a JSON object",
            ));
        }

        let resource_id = format!(
            "{scope}/providers/Microsoft.Resources/deployments/{}",
            request.name
        );
        let path = format!("{resource_id}?api-version={DEPLOYMENT_API_VERSION}");
        let body = json!({"properties": {
            "template": template,
            "parameters": parameters,
            "providerConfig": provider_config,
            "mode": "Incremental",
        }});
        let what = format!("PUT deployment {resource_id}");
        let group_trusted = self.groups.is_known(request.scope);
        let mut answer = self
            .send(reqwest::Method::PUT, &path, Some(&body), &what)
            .await?;
        // A 404 to the PUT: the scope is missing. If the group was only taken
        // to exist (found or created a while ago), it went since: confirm it
        // again (creating it) and PUT once more.
        if answer.status == 404 && group_trusted {
            tracing::info!(scope = %request.scope, "the resource group went since it was last seen; ensuring it again");
            self.groups.forget(request.scope);
            self.ensure_resource_group(request.scope).await?;
            answer = self
                .send(reqwest::Method::PUT, &path, Some(&body), &what)
                .await?;
        }
        match answer.status {
            200..=202 => Ok(self.token(
                OperationKind::Deployment,
                resource_id,
                request.subject,
                &answer,
            )),
            status => Err(self.unexpected(status, &what, &answer.body)),
        }
    }

    /// DELETE one Radius resource by id.
    pub async fn start_delete(&self, resource_id: &str) -> Result<DeleteStart, RadiusError> {
        parse_resource_id(resource_id)
            .map_err(|e| RadiusError::invalid("resource id", e.to_string()))?;
        let path = format!("{resource_id}?api-version={RESOURCE_API_VERSION}");
        let what = format!("DELETE {resource_id}");
        let answer = self
            .send(reqwest::Method::DELETE, &path, None, &what)
            .await?;
        match answer.status {
            200 | 204 => Ok(DeleteStart::Done {
                already_gone: false,
            }),
            404 => Ok(DeleteStart::Done { already_gone: true }),
            202 => Ok(DeleteStart::Started(self.token(
                OperationKind::Deletion,
                resource_id.to_string(),
                "",
                &answer,
            ))),
            status => Err(self.unexpected(status, &what, &answer.body)),
        }
    }

    /// DELETE a deployment record (not what it deployed). Gone already is
    /// done; a 409 means it is still running.
    pub async fn delete_deployment(&self, deployment_id: &str) -> Result<(), RadiusError> {
        parse_resource_id(deployment_id)
            .map_err(|e| RadiusError::invalid("deployment id", e.to_string()))?;
        if !deployment_id
            .to_ascii_lowercase()
            .contains("/providers/microsoft.resources/deployments/")
        {
            return Err(RadiusError::invalid(
                "deployment id",
                format!("{deployment_id} is not a Microsoft.Resources/deployments id"),
            ));
        }
        let path = format!("{deployment_id}?api-version={DEPLOYMENT_API_VERSION}");
        let what = format!("DELETE deployment {deployment_id}");
        let answer = self
            .send(reqwest::Method::DELETE, &path, None, &what)
            .await?;
        match answer.status {
            200..=204 | 404 => Ok(()),
            status => Err(self.unexpected(status, &what, &answer.body)),
        }
    }

    /// GET a resource; `None` if Radius does not have it.
    pub async fn get_resource(&self, resource_id: &str) -> Result<Option<Value>, RadiusError> {
        parse_resource_id(resource_id)
            .map_err(|e| RadiusError::invalid("resource id", e.to_string()))?;
        let version = api_version_for(resource_id);
        let what = format!("GET {resource_id}");
        let answer = self
            .send(
                reqwest::Method::GET,
                &format!("{resource_id}?api-version={version}"),
                None,
                &what,
            )
            .await?;
        match answer.status {
            200 => answer.json(&what).map(Some),
            404 => Ok(None),
            status => Err(self.unexpected(status, &what, &answer.body)),
        }
    }

    /// The error for an answer `status` that `what` did not expect: the ARM
    /// error if the body is one, else one naming this client's endpoint.
    fn unexpected(&self, status: u16, what: &str, body: &str) -> RadiusError {
        endpoint::from_status(status, what, body, &self.endpoint)
    }

    /// Ask Radius for the resource groups of the `local` plane, only to
    /// learn whether a Radius API answers at the endpoint: `Ok` for any
    /// answer that is Radius's (a list, or an ARM error), the error
    /// otherwise (a 404 from an API server with no Radius behind its
    /// aggregated path says so, and how to point the controller elsewhere).
    pub async fn check_reachable(&self) -> Result<(), RadiusError> {
        let what = "GET resource groups of plane radius/local".to_string();
        let path =
            format!("/planes/radius/local/resourceGroups?api-version={RESOURCE_API_VERSION}");
        let answer = self.send(reqwest::Method::GET, &path, None, &what).await?;
        if (200..300).contains(&answer.status) {
            return Ok(());
        }
        match self.unexpected(answer.status, &what, &answer.body) {
            RadiusError::Arm { .. } => Ok(()),
            other => Err(other),
        }
    }

    /// True when requests go through the API server's aggregated path.
    pub fn is_aggregated(&self) -> bool {
        self.endpoint.aggregated
    }

    fn token(
        &self,
        kind: OperationKind,
        resource_id: String,
        subject: &str,
        answer: &Answer,
    ) -> ResumeToken {
        ResumeToken {
            kind,
            resource_id,
            async_operation: answer
                .header("azure-asyncoperation")
                .map(|url| self.relative(&url)),
            location: answer.header("location").map(|url| self.relative(&url)),
            subject: subject.to_string(),
            rejected: None,
        }
    }

    /// An operation URL as a path relative to the Radius base.
    fn relative(&self, url: &str) -> String {
        if let Some(rest) = url.strip_prefix(&self.endpoint.base) {
            return rest.to_string();
        }
        let Ok(parsed) = url::Url::parse(url) else {
            return url.to_string(); // already relative
        };
        let mut path = parsed.path().to_string();
        if let Some(at) = path.find(AGGREGATED_PATH) {
            path = path[at + AGGREGATED_PATH.len()..].to_string();
        }
        match parsed.query() {
            Some(query) => format!("{path}?{query}"),
            None => path,
        }
    }
}

fn api_version_for(resource_id: &str) -> &'static str {
    if resource_id
        .to_ascii_lowercase()
        .contains("/providers/microsoft.resources/deployments/")
    {
        DEPLOYMENT_API_VERSION
    } else {
        RESOURCE_API_VERSION
    }
}

fn check_deployment_name(name: &str) -> Result<(), RadiusError> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')');
    if name.is_empty() || name.len() > 64 || !name.chars().all(ok_char) {
        return Err(RadiusError::invalid(
            "deployment name",
            format!(
                "{name:?} must be 1-64 characters of letters, digits, '-', '_', '.', '(' or ')'"
            ),
        ));
    }
    Ok(())
}
