//! Following a started operation: its `Azure-AsyncOperation` status, its
//! `Location` result, or the resource itself when Radius gave neither or
//! forgot the operation.

use serde_json::{Value, json};

use super::RadiusClient;
use crate::radius::error::RadiusError;
use crate::radius::operation::{self, OperationKind, PollOutcome, ResumeToken};

impl RadiusClient {
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
            status => Err(self.unexpected(status, &what, &answer.body)),
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
            status => Err(self.unexpected(status, &what, &answer.body)),
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
}

pub(super) fn deployment_outcome(body: &Value) -> PollOutcome {
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
