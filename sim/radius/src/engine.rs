//! Deployment-engine mode: the simulator as the deployment engine behind a
//! real UCP.
//!
//! In Radius, UCP proxies `Microsoft.Resources/deployments` to the deployment
//! engine (a C# service). The engine evaluates the template, then PUTs each
//! resource back through UCP in dependency order, follows each resource
//! provider's long-running operation, and reports the deployment's status,
//! outputs and `outputResources`. With [`EngineConfig`] the simulator does
//! the same: the deployment endpoints and their operations are answered as
//! in the default mode, but the resources are created by the real resource
//! providers behind `radius_url`, not kept here.
//!
//! Differences from the real engine, on purpose and documented in
//! `docs/radius-simulator.md`: the simulator's deploy duration passes
//! before the first resource is sent (the engine's own share of a
//! deployment; a test can make it long enough to act while a deployment
//! runs); resources are deployed one at a time (the
//! real engine runs independent ones in parallel); the first resource that
//! fails ends the deployment (what was created before it stays, as in the
//! engine); `outputs` are evaluated from the template, not from what the
//! providers computed.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::arm::EvaluatedResource;
use crate::error::{ArmError, codes};

/// The api-version resources are PUT with when the template names none.
const DEFAULT_RESOURCE_API_VERSION: &str = "2023-10-01-preview";
/// Attempts per request for an answer that may pass (429, 502, 503, 504, no
/// answer), and the pause between them.
const ATTEMPTS: u32 = 5;
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Where the resources of a deployment go.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// UCP's base URL, with its path base
    /// (`http://127.0.0.1:9000/apis/api.ucp.dev/v1alpha3`); the role of the
    /// engine's `RADIUSBACKENDURL`.
    pub radius_url: String,
    /// The longest pause between two polls of a resource's operation
    /// (a provider's `Retry-After` is honoured up to this). Default 1 s.
    pub max_poll_interval: Duration,
    /// How long one resource may take before the deployment fails with
    /// `DeploymentTimeout`. Default 10 minutes.
    pub resource_timeout: Duration,
}

impl EngineConfig {
    pub fn new(radius_url: impl Into<String>) -> Self {
        Self {
            radius_url: radius_url.into().trim_end_matches('/').to_string(),
            max_poll_interval: Duration::from_secs(1),
            resource_timeout: Duration::from_secs(600),
        }
    }
}

/// The engine's client of UCP.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    config: EngineConfig,
    http: reqwest::Client,
}

impl Backend {
    pub fn new(config: EngineConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            .build()?;
        Ok(Self { config, http })
    }

    /// Deploy `planned` in order; the ids deployed, or the first failure
    /// wrapped as ARM's `DeploymentFailed`. `canceled` is asked before each
    /// resource.
    async fn apply(
        &self,
        planned: &[EvaluatedResource],
        canceled: impl Fn() -> bool,
    ) -> Result<Vec<String>, ArmError> {
        let mut deployed: Vec<String> = Vec::new();
        for resource in planned {
            if canceled() {
                break;
            }
            let outcome = if resource.existing {
                self.check_exists(resource).await
            } else {
                self.put(resource).await
            };
            if let Err(problem) = outcome {
                let mut error = ArmError::new(
                    codes::DEPLOYMENT_FAILED,
                    "At least one resource deployment operation failed. Please list deployment operations for details.",
                );
                error.details = vec![problem];
                return Err(error);
            }
            if !resource.existing
                && !deployed
                    .iter()
                    .any(|id| id.eq_ignore_ascii_case(&resource.id))
            {
                deployed.push(resource.id.clone());
            }
        }
        Ok(deployed)
    }

    /// The resource's URL through UCP, with its api-version.
    fn url(&self, resource: &EvaluatedResource) -> String {
        let version = resource
            .api_version
            .as_deref()
            .unwrap_or(DEFAULT_RESOURCE_API_VERSION);
        format!(
            "{}{}?api-version={version}",
            self.config.radius_url, resource.id
        )
    }

    async fn get(&self, resource: &EvaluatedResource) -> Result<Answer, ArmError> {
        self.send(|| self.http.get(self.url(resource))).await
    }

    async fn check_exists(&self, resource: &EvaluatedResource) -> Result<(), ArmError> {
        let answer = self.get(resource).await?;
        match answer.status {
            status if status.is_success() => Ok(()),
            StatusCode::NOT_FOUND => Err(ArmError::new(
                codes::NOT_FOUND,
                format!(
                    "The existing resource '{}' referenced by '{}' was not found",
                    resource.id, resource.symbolic_name
                ),
            )),
            _ => Err(answer.error(&resource.id)),
        }
    }

    /// PUT one resource and follow its operation to the end.
    async fn put(&self, resource: &EvaluatedResource) -> Result<(), ArmError> {
        let body = request_body(resource);
        let answer = self
            .send(|| self.http.put(self.url(resource)).json(&body))
            .await?;
        if !answer.status.is_success() {
            return Err(answer.error(&resource.id));
        }
        let Some(operation) = answer.operation_url.clone() else {
            return terminal_state(&answer.body, &resource.id).unwrap_or(Ok(()));
        };
        let started = tokio::time::Instant::now();
        let mut pause = answer.retry_after;
        loop {
            if started.elapsed() > self.config.resource_timeout {
                return Err(ArmError::new(
                    "DeploymentTimeout",
                    format!(
                        "The resource '{}' did not finish within {} s",
                        resource.id,
                        self.config.resource_timeout.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(pause.min(self.config.max_poll_interval)).await;
            let status = self.send(|| self.http.get(&operation)).await?;
            pause = status.retry_after;
            match status.status {
                StatusCode::OK => {
                    if let Some(outcome) = terminal_status(&status.body, &resource.id) {
                        return outcome;
                    }
                }
                // The resource's own operation record went away; the
                // resource tells how it ended.
                StatusCode::NOT_FOUND => return self.settle_by_resource(resource).await,
                _ => return Err(status.error(&resource.id)),
            }
        }
    }

    async fn settle_by_resource(&self, resource: &EvaluatedResource) -> Result<(), ArmError> {
        let answer = self.get(resource).await?;
        if !answer.status.is_success() {
            return Err(answer.error(&resource.id));
        }
        terminal_state(&answer.body, &resource.id).unwrap_or(Ok(()))
    }

    /// One request, retried on answers that may pass.
    async fn send(
        &self,
        request: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<Answer, ArmError> {
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            if attempt > 1 {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            match request().send().await {
                Ok(response) => {
                    let answer = Answer::read(response).await;
                    let transient = matches!(
                        answer.status,
                        StatusCode::TOO_MANY_REQUESTS
                            | StatusCode::BAD_GATEWAY
                            | StatusCode::SERVICE_UNAVAILABLE
                            | StatusCode::GATEWAY_TIMEOUT
                    );
                    if !transient || attempt == ATTEMPTS {
                        return Ok(answer);
                    }
                    last = format!("{} {}", answer.status, answer.body);
                }
                Err(error) => last = error.to_string(),
            }
        }
        Err(ArmError::new(
            codes::SERVICE_UNAVAILABLE,
            format!(
                "Radius at {} did not answer after {ATTEMPTS} attempts: {last}",
                self.config.radius_url
            ),
        ))
    }
}

/// What a resource provider answered.
struct Answer {
    status: StatusCode,
    body: Value,
    operation_url: Option<String>,
    retry_after: Duration,
}

impl Answer {
    async fn read(response: reqwest::Response) -> Answer {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let operation_url = header("azure-asyncoperation").or_else(|| header("location"));
        let retry_after = header("retry-after")
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(Duration::from_secs(1), Duration::from_secs);
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Answer {
            status,
            body,
            operation_url,
            retry_after,
        }
    }

    /// The provider's ARM error, or one that quotes the answer.
    fn error(&self, id: &str) -> ArmError {
        let mut error = self
            .body
            .get("error")
            .and_then(|e| serde_json::from_value::<ArmError>(e.clone()).ok())
            .unwrap_or_else(|| {
                let body = match &self.body {
                    Value::String(text) if text.is_empty() => "no body".to_string(),
                    body => body.to_string(),
                };
                ArmError::new(
                    codes::INTERNAL_SERVER_ERROR,
                    format!("Radius answered {} for '{id}' with {body}", self.status),
                )
            });
        error.target.get_or_insert_with(|| id.to_string());
        error
    }
}

/// The body sent for one resource: ARM's PUT shape (`location`, `tags`,
/// `properties`); the id in the URL names it. Radius's providers require a
/// location, which Bicep leaves out for Radius resources: the engine sends
/// the Radius plane's one location, `global`, unless the template gives one.
fn request_body(resource: &EvaluatedResource) -> Value {
    let mut body = json!({ "location": "global", "properties": resource.properties() });
    for field in ["location", "tags"] {
        if let Some(value) = resource.body.get(field).filter(|v| !v.is_null()) {
            body[field] = value.clone();
        }
    }
    body
}

/// The end an operation status body reports, if it has ended.
fn terminal_status(body: &Value, id: &str) -> Option<Result<(), ArmError>> {
    let status = body.get("status").and_then(Value::as_str)?;
    ended(status, body, id)
}

/// The end a resource body's `provisioningState` reports, if it has ended.
fn terminal_state(body: &Value, id: &str) -> Option<Result<(), ArmError>> {
    let state = body
        .pointer("/properties/provisioningState")
        .and_then(Value::as_str)?;
    ended(state, body, id)
}

fn ended(state: &str, body: &Value, id: &str) -> Option<Result<(), ArmError>> {
    if state.eq_ignore_ascii_case("Succeeded") {
        return Some(Ok(()));
    }
    if state.eq_ignore_ascii_case("Failed") || state.eq_ignore_ascii_case("Canceled") {
        let mut error = body
            .get("error")
            .and_then(|e| serde_json::from_value::<ArmError>(e.clone()).ok())
            .unwrap_or_else(|| {
                ArmError::new(
                    state.to_string(),
                    format!("The operation on '{id}' ended {state}"),
                )
            });
        error.target.get_or_insert_with(|| id.to_string());
        return Some(Err(error));
    }
    None
}

/// Run one accepted deployment through `backend` and hand how it ended to
/// `finish`: after the simulator's deploy duration (`deploy`), each planned
/// resource in turn, unless `canceled` says the operation stopped running.
pub(crate) async fn run(
    backend: std::sync::Arc<Backend>,
    planned: Vec<EvaluatedResource>,
    failure: Option<ArmError>,
    deploy: Duration,
    canceled: impl Fn() -> bool,
    finish: impl FnOnce(Result<Vec<String>, ArmError>),
) {
    // The engine's own share of a deployment (the real one takes seconds
    // before its first resource PUT): the simulator's deploy duration.
    tokio::time::sleep(deploy).await;
    let outcome = match failure {
        Some(error) => Err(error),
        None => backend.apply(&planned, canceled).await,
    };
    finish(outcome);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_is_put_in_arms_shape() {
        let resource = EvaluatedResource {
            symbolic_name: "app".into(),
            id: "/planes/radius/local/resourceGroups/rg/providers/Applications.Core/applications/a"
                .into(),
            name: "a".into(),
            resource_type: "Applications.Core/applications".into(),
            api_version: Some("2023-10-01-preview".into()),
            existing: false,
            body: json!({"name": "a", "properties": {"environment": "e"}}),
            depends_on: vec![],
            module_path: vec![],
        };
        assert_eq!(
            request_body(&resource),
            json!({"location": "global", "properties": {"environment": "e"}})
        );
    }

    #[test]
    fn operation_ends_are_read_from_status_or_state() {
        assert_eq!(terminal_status(&json!({"status": "Updating"}), "x"), None);
        assert_eq!(
            terminal_status(&json!({"status": "Succeeded"}), "x"),
            Some(Ok(()))
        );
        let failed = terminal_status(
            &json!({"status": "Failed", "error": {"code": "Boom", "message": "no"}}),
            "x",
        );
        let error = failed.unwrap().unwrap_err();
        assert_eq!(
            (error.code.as_str(), error.target.as_deref()),
            ("Boom", Some("x"))
        );
        assert_eq!(
            terminal_state(
                &json!({"properties": {"provisioningState": "Succeeded"}}),
                "x"
            ),
            Some(Ok(()))
        );
    }
}
