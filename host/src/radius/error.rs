//! Errors of the Radius client, typed so that a controller can tell "fix your
//! input" from "Radius said no" from "try again later", and worded so a user
//! can act on them.

use std::time::Duration;

/// What went wrong talking to Radius.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RadiusError {
    /// Refused before sending anything: `field` is what is wrong.
    #[error("{field}: {problem}")]
    InvalidInput {
        field: &'static str,
        problem: String,
    },
    /// Radius answered with an ARM error body.
    #[error("Radius answered {status} {code}: {message}")]
    Arm {
        status: u16,
        code: String,
        message: String,
    },
    /// Radius answered with a status this client does not expect and no ARM error.
    #[error("Radius answered {status} to {what}: {body}")]
    UnexpectedStatus {
        status: u16,
        what: String,
        body: String,
    },
    /// No answer in time, or the connection failed, after all retries.
    #[error("cannot reach Radius for {what} after {attempts} attempts: {reason}")]
    Unreachable {
        what: String,
        attempts: u32,
        reason: String,
    },
    /// Radius kept answering 429/5xx until the retry budget was spent.
    #[error(
        "Radius is busy ({status}) for {what} after {attempts} attempts; retry after {retry_after:?}"
    )]
    Throttled {
        what: String,
        status: u16,
        attempts: u32,
        retry_after: Option<Duration>,
    },
    /// The answer could not be understood.
    #[error("cannot understand Radius' answer to {what}: {reason}")]
    BadResponse { what: String, reason: String },
    /// The client could not be configured (credentials, certificates, URL).
    #[error("Radius client configuration: {0}")]
    Config(String),
}

impl RadiusError {
    /// A short stable name for metrics labels and Kubernetes event reasons.
    pub fn reason(&self) -> &'static str {
        match self {
            RadiusError::InvalidInput { .. } => "InvalidInput",
            RadiusError::Arm { .. } => "RadiusError",
            RadiusError::UnexpectedStatus { .. } => "UnexpectedStatus",
            RadiusError::Unreachable { .. } => "Unreachable",
            RadiusError::Throttled { .. } => "Throttled",
            RadiusError::BadResponse { .. } => "BadResponse",
            RadiusError::Config(_) => "Config",
        }
    }

    /// True for errors that may go away by themselves (worth a retry later).
    pub fn is_transient(&self) -> bool {
        match self {
            RadiusError::Unreachable { .. } | RadiusError::Throttled { .. } => true,
            RadiusError::Arm { status, .. } | RadiusError::UnexpectedStatus { status, .. } => {
                *status == 429 || *status >= 500
            }
            _ => false,
        }
    }

    pub(crate) fn invalid(field: &'static str, problem: impl Into<String>) -> Self {
        RadiusError::InvalidInput {
            field,
            problem: problem.into(),
        }
    }
}

/// Parse an ARM error body `{"error": {"code", "message"}}`.
pub(crate) fn arm_error(status: u16, body: &str) -> Option<RadiusError> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let error = value.get("error")?;
    let code = error.get("code")?.as_str()?.to_string();
    let mut message = error
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("")
        .to_string();
    // ARM nests the useful part in details for deployment errors.
    if let Some(details) = error.get("details").and_then(|d| d.as_array()) {
        for detail in details {
            if let (Some(c), Some(m)) = (
                detail.get("code").and_then(|c| c.as_str()),
                detail.get("message").and_then(|m| m.as_str()),
            ) {
                message.push_str(&format!("; {c}: {m}"));
            }
        }
    }
    Some(RadiusError::Arm {
        status,
        code,
        message,
    })
}

/// An error for a non-success answer: the ARM error if the body is one.
pub(crate) fn from_status(status: u16, what: &str, body: &str) -> RadiusError {
    arm_error(status, body).unwrap_or_else(|| RadiusError::UnexpectedStatus {
        status,
        what: what.to_string(),
        body: body.chars().take(512).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arm_error_bodies_become_typed_errors_with_details() {
        let body = r#"{"error":{"code":"DeploymentFailed","message":"At least one resource deployment operation failed.",
            "details":[{"code":"BadRequest","message":"container image is required"}]}}"#;
        let error = arm_error(400, body).expect("an ARM error");
        assert_eq!(
            error.to_string(),
            "Radius answered 400 DeploymentFailed: At least one resource deployment operation failed.; BadRequest: container image is required"
        );
        assert!(!error.is_transient());
        assert!(from_status(503, "GET x", "<html>").is_transient());
        assert!(matches!(
            from_status(502, "GET x", "oops"),
            RadiusError::UnexpectedStatus { status: 502, .. }
        ));
    }
}
