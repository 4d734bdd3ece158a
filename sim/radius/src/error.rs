//! The ARM error body (`{"error": {"code", "message", "details"}}`) that
//! Radius answers with, and the codes the simulator uses.

use serde::{Deserialize, Serialize};

/// One ARM error: a machine-readable code, a message for people, and
/// optionally the errors that caused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ArmError {
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<ArmError>,
}

impl ArmError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            message: message.into(),
            target: None,
            details: Vec::new(),
        }
    }

    /// The template (or an expression in it) cannot be evaluated.
    pub fn invalid_template(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_TEMPLATE, message)
    }

    /// The request body is not what the API accepts.
    pub fn invalid_request_content(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_REQUEST_CONTENT, message)
    }

    /// Add where in the template the error happened to the message.
    pub fn at(mut self, location: &str) -> Self {
        if !location.is_empty() && !self.message.contains(" (at ") {
            self.message = format!("{} (at {location})", self.message);
        }
        self
    }

    /// The body Radius sends: `{"error": {...}}`.
    pub fn to_body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self })
    }
}

/// ARM error codes used by the simulator.
pub mod codes {
    pub const INVALID_TEMPLATE: &str = "InvalidTemplate";
    pub const INVALID_REQUEST_CONTENT: &str = "InvalidRequestContent";
    pub const INVALID_PARAMETERS: &str = "InvalidParameters";
    pub const NOT_FOUND: &str = "NotFound";
    pub const RESOURCE_GROUP_NOT_FOUND: &str = "ResourceGroupNotFound";
    pub const DEPLOYMENT_NOT_FOUND: &str = "DeploymentNotFound";
    pub const DEPLOYMENT_ACTIVE: &str = "DeploymentActive";
    pub const DEPLOYMENT_FAILED: &str = "DeploymentFailed";
    pub const INVALID_DEPLOYMENT_NAME: &str = "InvalidDeploymentName";
    pub const MISSING_API_VERSION: &str = "MissingApiVersionParameter";
    pub const INVALID_RESOURCE_ID: &str = "InvalidResourceId";
    pub const METHOD_NOT_ALLOWED: &str = "MethodNotAllowed";
    pub const CONFLICT: &str = "Conflict";
    pub const TOO_MANY_REQUESTS: &str = "TooManyRequests";
    pub const INTERNAL_SERVER_ERROR: &str = "InternalServerError";
    pub const SERVICE_UNAVAILABLE: &str = "ServiceUnavailable";
}
