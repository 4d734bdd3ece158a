//! The Radius HTTP client: one method per thing a controller does, each
//! request bounded by a timeout and retried with jittered backoff on 429,
//! 5xx and connection failures, honouring `Retry-After`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::{Value, json};

use super::endpoint::AGGREGATED_PATH;
use super::error::{self, RadiusError};
use super::operation::{self, OperationKind, PollOutcome, ResumeToken};
use super::{DEPLOYMENT_API_VERSION, Endpoint, RESOURCE_API_VERSION};
use radwasm_policy_model::scope::{Scope, parse_resource_id};
use std::sync::Arc;

use crate::metrics::Metrics;

/// Timeouts and retries for every request.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts per request, the first included.
    pub attempts: u32,
    /// Backoff before the second attempt; doubles per attempt, jittered.
    pub base_delay: Duration,
    /// Backoff ceiling (a longer `Retry-After` is honoured up to `max_retry_after`).
    pub max_delay: Duration,
    /// Longest `Retry-After` waited for inside one call; longer ones are
    /// returned to the caller as [`RadiusError::Throttled`].
    pub max_retry_after: Duration,
    /// Timeout of one request, connect included.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(30),
            timeout: Duration::from_secs(15),
        }
    }
}

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

/// One HTTP answer.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Answer {
    fn json(&self, what: &str) -> Result<Value, RadiusError> {
        if self.body.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&self.body).map_err(|e| RadiusError::BadResponse {
            what: what.to_string(),
            reason: format!("body is not JSON: {e}"),
        })
    }

    fn retry_after(&self) -> Option<Duration> {
        retry_after(&self.headers)
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    text.parse::<u64>().ok().map(Duration::from_secs)
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
            status => return Err(error::from_status(status, &what, &answer.body)),
        }
        let what = format!("PUT resource group {scope}");
        let body = json!({"location": "global", "properties": {}});
        let answer = self
            .send(reqwest::Method::PUT, &path, Some(&body), &what)
            .await?;
        match answer.status {
            200 | 201 => Ok(true),
            status => Err(error::from_status(status, &what, &answer.body)),
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
            status => Err(error::from_status(status, &what, &answer.body)),
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
            status => Err(error::from_status(status, &what, &answer.body)),
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
            status => Err(error::from_status(status, &what, &answer.body)),
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
            status => Err(error::from_status(status, &what, &answer.body)),
        }
    }

    /// Poll an operation once.
    pub async fn poll(&self, token: &ResumeToken) -> Result<PollOutcome, RadiusError> {
        if let Some(rejection) = &token.rejected {
            return Ok(PollOutcome::Failed {
                code: rejection.code.clone(),
                message: rejection.message.clone(),
            });
        }
        let outcome = if let Some(url) = &token.async_operation {
            match (self.poll_status(url).await?, token.kind) {
                (PollOutcome::Succeeded { .. }, OperationKind::Deployment) => {
                    self.final_deployment(token).await?
                }
                (outcome, _) => outcome,
            }
        } else if let Some(url) = &token.location {
            self.poll_location(token, url).await?
        } else {
            return self.poll_resource(token).await;
        };
        match (outcome, token.kind) {
            // Radius forgot the operation, which says nothing about what it
            // was for: a deployment is followed through its own record (so
            // one that ran is never sent again), and a deletion through the
            // resource (over once it is gone).
            (PollOutcome::NotFound, _) => self.poll_resource(token).await,
            (outcome, _) => Ok(outcome),
        }
    }

    /// GET the `Azure-AsyncOperation` status resource.
    async fn poll_status(&self, url: &str) -> Result<PollOutcome, RadiusError> {
        let what = format!("GET operation {url}");
        let answer = self.send(reqwest::Method::GET, url, None, &what).await?;
        match answer.status {
            404 => Ok(PollOutcome::NotFound),
            202 => Ok(PollOutcome::InProgress {
                retry_after: answer.retry_after(),
            }),
            200 => {
                let body = answer.json(&what)?;
                let status = body.get("status").and_then(Value::as_str).ok_or_else(|| {
                    RadiusError::BadResponse {
                        what: what.clone(),
                        reason: "operation status has no \"status\"".to_string(),
                    }
                })?;
                Ok(
                    operation::terminal(status, &body).unwrap_or(PollOutcome::InProgress {
                        retry_after: answer.retry_after(),
                    }),
                )
            }
            status => Err(error::from_status(status, &what, &answer.body)),
        }
    }

    /// GET the `Location` result URL: 202 while running, the final body after.
    async fn poll_location(
        &self,
        token: &ResumeToken,
        url: &str,
    ) -> Result<PollOutcome, RadiusError> {
        let what = format!("GET operation result {url}");
        let answer = self.send(reqwest::Method::GET, url, None, &what).await?;
        match answer.status {
            202 => Ok(PollOutcome::InProgress {
                retry_after: answer.retry_after(),
            }),
            404 => Ok(PollOutcome::NotFound),
            204 => Ok(PollOutcome::Succeeded {
                output_resources: Vec::new(),
            }),
            200 | 201 => match token.kind {
                OperationKind::Deletion => Ok(PollOutcome::Succeeded {
                    output_resources: Vec::new(),
                }),
                OperationKind::Deployment => {
                    let body = answer.json(&what)?;
                    if body.get("properties").is_some() {
                        Ok(deployment_outcome(&body))
                    } else {
                        self.final_deployment(token).await
                    }
                }
            },
            status => Err(error::from_status(status, &what, &answer.body)),
        }
    }

    /// No operation URL was given, or Radius forgot the operation: look at
    /// the resource itself. A deletion is over when the resource is gone,
    /// and still running while the resource's `provisioningState` is not
    /// terminal (`Accepted`, `Deleting`). A resource in a terminal state
    /// has no deletion running: the DELETE failed, or the resource was made
    /// again after it (a deployment still running put it back). That is
    /// `NotFound`, an operation Radius does not have, so the policy sends
    /// the DELETE again instead of polling forever.
    async fn poll_resource(&self, token: &ResumeToken) -> Result<PollOutcome, RadiusError> {
        match (token.kind, self.get_resource(&token.resource_id).await?) {
            (OperationKind::Deletion, None) => Ok(PollOutcome::Succeeded {
                output_resources: Vec::new(),
            }),
            (OperationKind::Deletion, Some(body)) => {
                let state = body
                    .pointer("/properties/provisioningState")
                    .and_then(Value::as_str)
                    .unwrap_or("Succeeded");
                Ok(match operation::terminal(state, &body) {
                    Some(_) => PollOutcome::NotFound,
                    None => PollOutcome::InProgress { retry_after: None },
                })
            }
            (OperationKind::Deployment, None) => Ok(PollOutcome::NotFound),
            (OperationKind::Deployment, Some(body)) => Ok(deployment_outcome(&body)),
        }
    }

    /// The final GET of a deployment: its output resources.
    async fn final_deployment(&self, token: &ResumeToken) -> Result<PollOutcome, RadiusError> {
        match self.get_resource(&token.resource_id).await? {
            Some(body) => Ok(deployment_outcome(&body)),
            None => Ok(PollOutcome::NotFound),
        }
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

    /// Send one request with retries. Returns any answer that is not 429 or
    /// 5xx (those are retried), so callers interpret 2xx/4xx themselves.
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Answer, RadiusError> {
        let url = format!("{}{path}", self.endpoint.base);
        let policy = &self.retry;
        let mut delay = policy.base_delay;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = self.http.request(method.clone(), &url);
            if let Some(token) = &self.endpoint.bearer {
                request = request.bearer_auth(token);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let started = std::time::Instant::now();
            let sent = request.send().await;
            self.observe(
                &method,
                sent.as_ref().map_or(0, |r| r.status().as_u16()),
                started,
            );
            let wait = match sent {
                Ok(response) => {
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    let text = match response.text().await {
                        Ok(text) => text,
                        Err(error) if attempt < policy.attempts => {
                            tracing::debug!(%what, attempt, %error, "reading Radius' answer failed; retrying");
                            sleep_jittered(&mut delay, policy).await;
                            continue;
                        }
                        Err(error) => {
                            return Err(RadiusError::Unreachable {
                                what: what.to_string(),
                                attempts: attempt,
                                reason: error.to_string(),
                            });
                        }
                    };
                    if status != 429 && status < 500 {
                        return Ok(Answer {
                            status,
                            headers,
                            body: text,
                        });
                    }
                    let hint = retry_after(&headers);
                    if attempt >= policy.attempts
                        || hint.is_some_and(|h| h > policy.max_retry_after)
                    {
                        if let Some(arm) = error::arm_error(status, &text)
                            .filter(|_| status != 429 && status != 503)
                        {
                            return Err(arm);
                        }
                        return Err(RadiusError::Throttled {
                            what: what.to_string(),
                            status,
                            attempts: attempt,
                            retry_after: hint,
                        });
                    }
                    tracing::debug!(%what, attempt, status, ?hint, "Radius is busy; retrying");
                    hint
                }
                Err(error) => {
                    if attempt >= policy.attempts {
                        return Err(RadiusError::Unreachable {
                            what: what.to_string(),
                            attempts: attempt,
                            reason: describe(&error),
                        });
                    }
                    tracing::debug!(%what, attempt, error = %describe(&error), "request failed; retrying");
                    None
                }
            };
            match wait {
                Some(hint) => tokio::time::sleep(hint).await,
                None => sleep_jittered(&mut delay, policy).await,
            }
        }
    }
}

/// Sleep a random time in [delay/2, delay], then double `delay` up to the cap.
async fn sleep_jittered(delay: &mut Duration, policy: &RetryPolicy) {
    let factor: f64 = rand::random_range(0.5..=1.0);
    tokio::time::sleep(delay.mul_f64(factor)).await;
    *delay = (*delay * 2).min(policy.max_delay);
}

fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    if error.is_timeout() {
        text.push_str(" (timed out)");
    }
    text
}

fn deployment_outcome(body: &Value) -> PollOutcome {
    let state = body
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)
        .unwrap_or("Succeeded");
    match operation::terminal(
        state,
        &json!({"error": body.pointer("/properties/error").cloned().unwrap_or(Value::Null)}),
    ) {
        Some(PollOutcome::Succeeded { .. }) => PollOutcome::Succeeded {
            output_resources: operation::output_resources(body),
        },
        Some(other) => other,
        None => PollOutcome::InProgress { retry_after: None },
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
