//! The refusals a candidate meets, as the [`Problem`] the loader stores and
//! shows in the policy's status: one constructor, and the refusal of a fetch.

use crate::policy::source::{SourceError, SourceErrorKind};
use crate::reconcile_policy::registry::Problem;

/// A refusal: its reason (the status condition's) and what to tell the user.
pub(super) fn problem(reason: &'static str, message: impl Into<String>) -> Problem {
    Problem {
        reason,
        message: message.into(),
    }
}

/// A refused fetch: `DigestMismatch` if a registry's bytes are not the ones
/// its digests name, else `FetchFailed` (retried with backoff).
pub(super) fn fetch_problem(error: SourceError) -> Problem {
    match error.kind {
        SourceErrorKind::DigestMismatch => {
            problem("DigestMismatch", format!("{error}; not loaded"))
        }
        SourceErrorKind::Unavailable | SourceErrorKind::TooLarge => {
            problem("FetchFailed", error.to_string())
        }
    }
}
