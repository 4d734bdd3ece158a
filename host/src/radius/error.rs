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
    /// Radius (or whatever answers at the endpoint) answered with a status
    /// this client does not expect and no ARM error. `endpoint` is the base
    /// URL the request went to; `hint` says what to do about it, if known.
    #[error("Radius at {endpoint} answered {status} to {what}: {body}{hint}")]
    UnexpectedStatus {
        status: u16,
        what: String,
        endpoint: String,
        body: String,
        hint: String,
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
        "Radius is busy ({status}) for {what} after {attempts} attempts{}",
        retry_after.map(|after| format!("; it asked to retry after {}s", after.as_secs())).unwrap_or_default()
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
    let (code, message) = arm_error_parts(value.get("error")?)?;
    Some(RadiusError::Arm {
        status,
        code,
        message,
    })
}

/// The code and message of an ARM error object (`{"code", "message",
/// "details"}`), the message followed by every detail's `code: message`,
/// depth first: a deployment's own error only says that "at least one
/// resource deployment operation failed", and what the resource provider
/// said is in its details (nested again when a module failed), each with
/// the resource it is about (`target`) when it names one. The same reader
/// serves a refused request and a failed operation.
pub(crate) fn arm_error_parts(error: &serde_json::Value) -> Option<(String, String)> {
    let code = error.get("code")?.as_str()?.to_string();
    let mut message = error
        .get("message")
        .and_then(|m| m.as_str())
        .unwrap_or("")
        .to_string();
    append_details(error, &mut message, 0);
    Some((code, message))
}

/// Details are nested at most this deep before the rest is left out.
const MAX_DETAIL_DEPTH: usize = 4;

fn append_details(error: &serde_json::Value, message: &mut String, depth: usize) {
    let Some(details) = error.get("details").and_then(|d| d.as_array()) else {
        return;
    };
    if depth >= MAX_DETAIL_DEPTH {
        return;
    }
    for detail in details {
        if let (Some(c), Some(m)) = (
            detail.get("code").and_then(|c| c.as_str()),
            detail.get("message").and_then(|m| m.as_str()),
        ) {
            // A detail's target is the resource it is about.
            match detail.get("target").and_then(|t| t.as_str()) {
                Some(target) if !m.contains(target) => {
                    message.push_str(&format!("; {c} ({target}): {m}"))
                }
                _ => message.push_str(&format!("; {c}: {m}")),
            }
        }
        append_details(detail, message, depth + 1);
    }
}

/// `text` fit for a one-line message: whitespace runs (line breaks
/// included) become one space, control characters are dropped, the ends
/// trimmed, and at most `max` characters kept (an ellipsis marks a cut).
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let joined: String = words
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if joined.is_empty() {
        return "(empty body)".to_string();
    }
    match joined.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
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
    }

    #[test]
    fn answer_bodies_are_put_on_one_bounded_line() {
        assert_eq!(one_line("  a\n\tb  \r\n c\u{7}d ", 100), "a b cd");
        assert_eq!(one_line("\n\n", 100), "(empty body)");
        assert_eq!(one_line("abcdef", 3), "abc…");
        assert_eq!(one_line("héllo", 5), "héllo");
    }

    #[test]
    fn a_throttled_error_says_when_radius_asked_to_be_retried_in_plain_words() {
        let error = RadiusError::Throttled {
            what: "GET x".into(),
            status: 429,
            attempts: 5,
            retry_after: Some(Duration::from_secs(40)),
        };
        assert_eq!(
            error.to_string(),
            "Radius is busy (429) for GET x after 5 attempts; it asked to retry after 40s"
        );
        let error = RadiusError::Throttled {
            what: "GET x".into(),
            status: 503,
            attempts: 5,
            retry_after: None,
        };
        assert_eq!(
            error.to_string(),
            "Radius is busy (503) for GET x after 5 attempts"
        );
    }
}
