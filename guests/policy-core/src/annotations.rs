//! The annotation knobs of the default policy, parsed from an object's
//! annotations.

use std::collections::BTreeMap;

use radwasm_policy_model::annotations::{DEPLOYMENT_RETRY, HOLD, RECONCILE_POLICY};

/// What `radapp.io/reconcile-policy` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReconcileMode {
    /// Deploy, repair and delete (the default).
    #[default]
    Manage,
    /// Observe and report only: never change anything in Radius.
    Skip,
    /// Manage, but on deletion leave the Radius resources in place.
    DetachOnDelete,
}

impl ReconcileMode {
    /// True if this mode allows deleting Radius resources.
    pub fn deletes_in_radius(self) -> bool {
        self == ReconcileMode::Manage
    }
}

/// The reconcile mode named by the annotations (trimmed, ignoring case, like
/// the other annotations); an unknown value is an error message naming the
/// annotation and the allowed values.
pub fn reconcile_mode(annotations: &BTreeMap<String, String>) -> Result<ReconcileMode, String> {
    let value = annotations.get(RECONCILE_POLICY).map(|value| value.trim());
    match value.map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("manage") => Ok(ReconcileMode::Manage),
        Some("skip") => Ok(ReconcileMode::Skip),
        Some("detach-on-delete") => Ok(ReconcileMode::DetachOnDelete),
        Some(_) => Err(format!(
            "annotation {RECONCILE_POLICY}: unknown value {} (expected manage, skip or detach-on-delete)",
            quoted(value.unwrap_or_default())
        )),
    }
}

/// Longest part of an annotation value that an error message quotes.
pub const QUOTED_VALUE_CHARS: usize = 64;

/// `value` quoted for an error message, cut after [`QUOTED_VALUE_CHARS`]
/// characters: messages go into status and events, which the host bounds
/// (32 KiB), and an annotation value may be far longer.
pub fn quoted(value: &str) -> String {
    match value.char_indices().nth(QUOTED_VALUE_CHARS) {
        None => format!("{value:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes in all)", &value[..cut], value.len()),
    }
}

/// True if `radapp.io/hold` is `"true"` (any case). Any other value, or none,
/// means not held.
pub fn is_held(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(HOLD)
        .is_some_and(|value| value.trim().eq_ignore_ascii_case("true"))
}

pub use radwasm_policy_model::annotations::depends_on;

/// First retry delay of a failed deployment when the annotation does not say.
pub const DEFAULT_RETRY_BASE_MS: u64 = 30_000;
/// The retry delay doubles up to this.
pub const MAX_RETRY_MS: u64 = 600_000;

/// How `radapp.io/deployment-retry` says to retry a failed deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeploymentRetry {
    /// Wait for a change to the spec (the behaviour before retries existed).
    Never,
    /// Retry after `base_ms`, doubling per failure up to [`MAX_RETRY_MS`].
    Backoff { base_ms: u64 },
}

impl DeploymentRetry {
    /// The delay before attempt `failures + 1`, after `failures` failures.
    pub fn delay_ms(self, failures: u32) -> Option<u64> {
        match self {
            DeploymentRetry::Never => None,
            DeploymentRetry::Backoff { base_ms } => {
                let doublings = failures.saturating_sub(1).min(20);
                Some(
                    base_ms
                        .saturating_mul(1u64 << doublings)
                        .min(MAX_RETRY_MS.max(base_ms)),
                )
            }
        }
    }
}

/// The retry the annotations ask for: `never`, or a first delay written as
/// a whole number of `s` or `m` (`30s`, `2m`); absent means `30s`. Values
/// are read trimmed and ignoring case, like every annotation here.
pub fn deployment_retry(annotations: &BTreeMap<String, String>) -> Result<DeploymentRetry, String> {
    let Some(raw) = annotations.get(DEPLOYMENT_RETRY) else {
        return Ok(DeploymentRetry::Backoff {
            base_ms: DEFAULT_RETRY_BASE_MS,
        });
    };
    let value = raw.trim().to_ascii_lowercase();
    if value == "never" {
        return Ok(DeploymentRetry::Never);
    }
    let (number, unit_ms) = if let Some(number) = value.strip_suffix('s') {
        (number, 1_000)
    } else if let Some(number) = value.strip_suffix('m') {
        (number, 60_000)
    } else {
        ("", 0)
    };
    match number.trim().parse::<u64>() {
        Ok(n) if n > 0 && unit_ms > 0 => Ok(DeploymentRetry::Backoff {
            base_ms: n.saturating_mul(unit_ms).min(MAX_RETRY_MS),
        }),
        _ => Err(format!(
            "annotation {DEPLOYMENT_RETRY}: unknown value {} (expected never, or a first delay such as 30s or 2m)",
            quoted(raw)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use radwasm_policy_model::annotations::DEPENDS_ON;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reconcile_mode_defaults_to_manage_and_names_bad_values() {
        assert_eq!(reconcile_mode(&map(&[])), Ok(ReconcileMode::Manage));
        assert_eq!(
            reconcile_mode(&map(&[(RECONCILE_POLICY, "skip")])),
            Ok(ReconcileMode::Skip)
        );
        let error = reconcile_mode(&map(&[(RECONCILE_POLICY, "yolo")])).expect_err("unknown");
        assert!(
            error.contains(RECONCILE_POLICY) && error.contains("yolo"),
            "{error}"
        );
    }

    #[test]
    fn deployment_retry_backs_off_from_its_base_to_a_cap() {
        let default = deployment_retry(&map(&[])).expect("default");
        assert_eq!(default.delay_ms(1), Some(30_000));
        assert_eq!(default.delay_ms(2), Some(60_000));
        assert_eq!(default.delay_ms(6), Some(600_000));
        assert_eq!(default.delay_ms(60), Some(600_000));
        assert_eq!(
            deployment_retry(&map(&[(DEPLOYMENT_RETRY, " Never ")])),
            Ok(DeploymentRetry::Never)
        );
        assert_eq!(
            deployment_retry(&map(&[(DEPLOYMENT_RETRY, "2s")])),
            Ok(DeploymentRetry::Backoff { base_ms: 2_000 })
        );
        assert_eq!(
            deployment_retry(&map(&[(DEPLOYMENT_RETRY, "2M")])),
            Ok(DeploymentRetry::Backoff { base_ms: 120_000 })
        );
        for bad in ["soon", "0s", "-1s", "10", "1h"] {
            let error = deployment_retry(&map(&[(DEPLOYMENT_RETRY, bad)])).expect_err(bad);
            assert!(error.contains(DEPLOYMENT_RETRY), "{error}");
        }
    }

    #[test]
    fn hold_and_depends_on_parse_leniently() {
        assert!(is_held(&map(&[(HOLD, "True")])));
        assert!(!is_held(&map(&[(HOLD, "false")])));
        assert_eq!(
            depends_on(&map(&[(DEPENDS_ON, " a, b,,a ")])),
            vec!["a", "b"]
        );
    }
}
