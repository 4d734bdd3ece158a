//! Long-running operations: the resume token kept in `status.operation` and
//! what one poll of it says.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which kind of operation a token follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OperationKind {
    Deployment,
    Deletion,
}

/// Everything needed to continue polling an operation, in any process.
///
/// URLs are stored as paths relative to the Radius base (`/planes/...`), so a
/// token recorded through the aggregated API path still works after the
/// controller is pointed at Radius directly, and the token stays small.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResumeToken {
    pub kind: OperationKind,
    /// The resource the operation acts on: the deployment's id for a
    /// deployment (its final GET lists the output resources), the deleted
    /// resource's id for a deletion.
    pub resource_id: String,
    /// The `Azure-AsyncOperation` status URL, relative to the base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub async_operation: Option<String>,
    /// The `Location` result URL, relative to the base.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Caller's subject (for deployments, the spec hash deployed). Opaque here.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    /// Radius refused the request outright (a 4xx with an ARM error): the
    /// operation is over before it began, and polling reports this failure
    /// without asking Radius again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejection>,
}

/// An ARM error that ended an operation before it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rejection {
    pub code: String,
    pub message: String,
}

impl ResumeToken {
    /// The token as the compact JSON kept in status.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parse a token from status; the error names what is wrong.
    pub fn decode(text: &str) -> Result<Self, String> {
        serde_json::from_str(text)
            .map_err(|error| format!("status.operation is not a resume token: {error}"))
    }
}

/// What one poll of an operation says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollOutcome {
    /// Still running; poll again after `retry_after` if Radius said so.
    InProgress {
        retry_after: Option<Duration>,
    },
    /// Done. For a deployment, the ids in `properties.outputResources` of the
    /// final body (empty if it lists none).
    Succeeded {
        output_resources: Vec<String>,
    },
    /// Radius reports the operation failed with this ARM error.
    Failed {
        code: String,
        message: String,
    },
    Canceled,
    /// Radius does not know the operation (404 on its URL).
    NotFound,
}

/// The `outputResources[].id` of a deployment body; none listed means empty.
pub(crate) fn output_resources(body: &serde_json::Value) -> Vec<String> {
    body.pointer("/properties/outputResources")
        .and_then(|list| list.as_array())
        .map(|list| {
            list.iter()
                .filter_map(|entry| {
                    entry
                        .get("id")
                        .and_then(|id| id.as_str())
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// An ARM status text as a terminal outcome, or `None` while running.
pub(crate) fn terminal(status: &str, body: &serde_json::Value) -> Option<PollOutcome> {
    match status.to_ascii_lowercase().as_str() {
        "succeeded" => Some(PollOutcome::Succeeded {
            output_resources: Vec::new(),
        }),
        "failed" => {
            let (code, message) = body
                .get("error")
                .and_then(crate::radius::error::arm_error_parts)
                .unwrap_or_else(|| {
                    (
                        "Failed".to_string(),
                        "the operation failed without an error message".to_string(),
                    )
                });
            Some(PollOutcome::Failed { code, message })
        }
        "canceled" | "cancelled" => Some(PollOutcome::Canceled),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_operation_names_what_the_resource_provider_said() {
        // As a deployment engine reports a resource a provider refused: the
        // cause is two levels down.
        let body = serde_json::json!({"status": "Failed", "error": {
            "code": "DeploymentFailed",
            "message": "At least one resource deployment operation failed.",
            "details": [{"code": "ResourceDeploymentFailure", "message": "env failed",
                "details": [{"code": "HttpRequestPayloadAPISpecValidationFailed",
                    "message": "$.properties.compute is required"}]}]}});
        let Some(PollOutcome::Failed { code, message }) = terminal("Failed", &body) else {
            panic!("a failure");
        };
        assert_eq!(code, "DeploymentFailed");
        assert_eq!(
            message,
            "At least one resource deployment operation failed.; ResourceDeploymentFailure: env failed; HttpRequestPayloadAPISpecValidationFailed: $.properties.compute is required"
        );
    }

    #[test]
    fn tokens_round_trip_and_stay_small() {
        let token = ResumeToken {
            kind: OperationKind::Deployment,
            resource_id: "/planes/radius/local/resourceGroups/default/providers/Microsoft.Resources/deployments/app-abc".into(),
            async_operation: Some("/planes/radius/local/providers/System.Resources/locations/global/operationStatuses/0f1e?api-version=2020-10-01".into()),
            location: None,
            subject: "abc".into(),
            rejected: None,
        };
        let text = token.encode();
        assert!(text.len() < 512, "{text}");
        assert_eq!(ResumeToken::decode(&text), Ok(token));
        assert!(
            ResumeToken::decode("{\"kind\":\"deployment\"}")
                .unwrap_err()
                .contains("resourceId")
        );
    }

    #[test]
    fn missing_output_resources_are_an_empty_set() {
        assert!(output_resources(&serde_json::json!({"properties": {}})).is_empty());
        let body =
            serde_json::json!({"properties": {"outputResources": [{"id": "/a"}, {"id": "/b"}]}});
        assert_eq!(output_resources(&body), vec!["/a", "/b"]);
    }
}
