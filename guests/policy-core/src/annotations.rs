//! The annotation knobs of the default policy, parsed from an object's
//! annotations.
//!
//! One rule reads every knob (docs/default-policy.md, *Annotations*): the
//! value is trimmed and compared ignoring ASCII case, and absent or empty
//! means the knob's default. A value not understood is taken as that default
//! and comes with a warning naming the annotation and the value (quoted, cut
//! short), which the decision emits as one `InvalidAnnotation` Warning event
//! ([`Knob`]). `reconcile-policy` is the exception: its default, `manage`,
//! is the one that changes and deletes Radius resources, so a value not
//! understood there fails the object instead ([`reconcile_mode`]).

use std::collections::BTreeMap;

use radwasm_policy_model::annotations::{DEPLOYMENT_RETRY, DRIFT, HOLD, RECONCILE_POLICY};

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

/// A knob as read: the value in effect, and a warning if the annotation
/// holds a value not understood (`value` is then the knob's default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob<T> {
    pub value: T,
    pub warning: Option<String>,
}

/// Reason of the Warning event for an annotation value not understood (and
/// of the `Failed` status for a `reconcile-policy` value not understood).
pub const INVALID_ANNOTATION: &str = "InvalidAnnotation";

/// The annotation's value as every knob reads it: trimmed and in ASCII lower
/// case; `None` if absent or empty (the knob's default). Also returns the
/// value as written, for messages.
fn normalized<'a>(
    annotations: &'a BTreeMap<String, String>,
    name: &str,
) -> Option<(String, &'a str)> {
    let raw = annotations.get(name)?;
    let value = raw.trim();
    (!value.is_empty()).then(|| (value.to_ascii_lowercase(), raw.as_str()))
}

/// Read the knob `name` by [`normalized`] values: `parse` gives the value
/// for a value understood; any other is `default` with a warning.
fn read<T>(
    annotations: &BTreeMap<String, String>,
    name: &str,
    default: T,
    default_text: &str,
    expected: &str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Knob<T> {
    let Some((value, raw)) = normalized(annotations, name) else {
        return Knob {
            value: default,
            warning: None,
        };
    };
    match parse(&value) {
        Some(value) => Knob {
            value,
            warning: None,
        },
        None => Knob {
            value: default,
            warning: Some(format!(
                "annotation {name}: value {} not understood (expected {expected}); using the default, {default_text}",
                quoted(raw)
            )),
        },
    }
}

/// The reconcile mode named by the annotations (trimmed, ignoring case, like
/// the other annotations); a value not understood is an error message naming
/// the annotation and the allowed values. Unlike the other knobs it is not
/// taken as the default (`manage`): that would deploy over a misspelt `skip`
/// and delete in Radius under a misspelt `detach-on-delete`.
pub fn reconcile_mode(annotations: &BTreeMap<String, String>) -> Result<ReconcileMode, String> {
    let Some((value, raw)) = normalized(annotations, RECONCILE_POLICY) else {
        return Ok(ReconcileMode::Manage);
    };
    match value.as_str() {
        "manage" => Ok(ReconcileMode::Manage),
        "skip" => Ok(ReconcileMode::Skip),
        "detach-on-delete" => Ok(ReconcileMode::DetachOnDelete),
        _ => Err(format!(
            "annotation {RECONCILE_POLICY}: unknown value {} (expected manage, skip or detach-on-delete)",
            quoted(raw.trim())
        )),
    }
}

/// Longest part of an annotation value that a message quotes.
pub const QUOTED_VALUE_CHARS: usize = 64;

/// `value` quoted for a message, cut after [`QUOTED_VALUE_CHARS`]
/// characters ([`crate::plan::quote`]): an annotation value may be far
/// longer than a message may be.
pub fn quoted(value: &str) -> String {
    crate::plan::quote(value, QUOTED_VALUE_CHARS)
}

/// `radapp.io/hold`: `true` or `false` (the default); any other value is
/// taken as `false`, with a warning.
pub fn hold(annotations: &BTreeMap<String, String>) -> Knob<bool> {
    read(
        annotations,
        HOLD,
        false,
        "false (not held)",
        "true or false",
        |value| match value {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
    )
}

/// True if `radapp.io/hold` is `true` (trimmed, any case). Any other value,
/// or none, means not held ([`hold`] says whether the value was understood).
pub fn is_held(annotations: &BTreeMap<String, String>) -> bool {
    hold(annotations).value
}

pub use radwasm_policy_model::annotations::{depends_on, depends_on_checked};

/// What `radapp.io/drift` asks for when resources a template deployed are
/// found missing in Radius.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DriftMode {
    /// Deploy the template again (the default).
    #[default]
    Redeploy,
    /// Say so in status and an Event; change nothing in Radius.
    Report,
}

/// `radapp.io/drift`: `redeploy` (the default) or `report`; any other value
/// is `redeploy`, with a warning.
pub fn drift(annotations: &BTreeMap<String, String>) -> Knob<DriftMode> {
    read(
        annotations,
        DRIFT,
        DriftMode::Redeploy,
        "redeploy",
        "redeploy or report",
        |value| match value {
            "redeploy" => Some(DriftMode::Redeploy),
            "report" => Some(DriftMode::Report),
            _ => None,
        },
    )
}

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
/// a whole number of `s` or `m` (`30s`, `2m`); absent or empty means `30s`,
/// and so does a value not understood, with a warning.
pub fn deployment_retry(annotations: &BTreeMap<String, String>) -> Knob<DeploymentRetry> {
    read(
        annotations,
        DEPLOYMENT_RETRY,
        DeploymentRetry::Backoff {
            base_ms: DEFAULT_RETRY_BASE_MS,
        },
        "30s",
        "never, or a first delay such as 30s or 2m",
        parse_retry,
    )
}

/// A normalized `deployment-retry` value, if understood.
fn parse_retry(value: &str) -> Option<DeploymentRetry> {
    if value == "never" {
        return Some(DeploymentRetry::Never);
    }
    let (number, unit_ms) = if let Some(number) = value.strip_suffix('s') {
        (number, 1_000)
    } else if let Some(number) = value.strip_suffix('m') {
        (number, 60_000)
    } else {
        return None;
    };
    // A whole number in decimal digits only: `u64::from_str` would also
    // take `+5`, and the number was trimmed, so `2 m` passed.
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if number.bytes().all(|b| b == b'0') {
        return None;
    }
    // Past u64 the delay is still a delay, capped like any other.
    let base_ms = number.parse::<u64>().map_or(MAX_RETRY_MS, |n| {
        n.saturating_mul(unit_ms).min(MAX_RETRY_MS)
    });
    Some(DeploymentRetry::Backoff { base_ms })
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
        let retry = |value: &str| deployment_retry(&map(&[(DEPLOYMENT_RETRY, value)]));
        let default = deployment_retry(&map(&[]));
        assert_eq!(default.warning, None);
        let default = default.value;
        assert_eq!(default.delay_ms(1), Some(30_000));
        assert_eq!(default.delay_ms(2), Some(60_000));
        assert_eq!(default.delay_ms(6), Some(600_000));
        assert_eq!(default.delay_ms(60), Some(600_000));
        assert_eq!(retry(" Never ").value, DeploymentRetry::Never);
        assert_eq!(
            retry("2s").value,
            DeploymentRetry::Backoff { base_ms: 2_000 }
        );
        assert_eq!(
            retry("2M").value,
            DeploymentRetry::Backoff { base_ms: 120_000 }
        );
        assert_eq!(retry("  ").warning, None);
        for bad in ["soon", "0s", "-1s", "10", "1h"] {
            let read = retry(bad);
            assert_eq!(read.value, default, "{bad}");
            let warning = read.warning.expect(bad);
            assert!(
                warning.contains(DEPLOYMENT_RETRY) && warning.contains(&format!("{bad:?}")),
                "{warning}"
            );
        }
    }

    #[test]
    fn hold_is_true_or_false_and_warns_about_anything_else() {
        let hold_of = |value: &str| hold(&map(&[(HOLD, value)]));
        for (value, held) in [
            ("True", true),
            (" TRUE\t", true),
            ("false", false),
            (" False ", false),
            ("", false),
        ] {
            assert_eq!(
                hold_of(value),
                Knob {
                    value: held,
                    warning: None
                },
                "{value:?}"
            );
        }
        assert_eq!(
            hold(&map(&[])),
            Knob {
                value: false,
                warning: None
            }
        );
        for bad in ["-1", "yes", "1", "on", "truee"] {
            let read = hold_of(bad);
            assert!(!read.value, "{bad}");
            let warning = read.warning.expect(bad);
            assert!(
                warning.contains(HOLD) && warning.contains(&format!("{bad:?}")),
                "{warning}"
            );
        }
        let long = hold_of(&"y".repeat(40_000)).warning.expect("long");
        assert!(long.len() < 1024, "{long}");
        assert!(long.contains("40000 bytes in all"), "{long}");
    }

    #[test]
    fn depends_on_parses_leniently() {
        assert_eq!(
            depends_on(&map(&[(DEPENDS_ON, " a, b,,a ")])),
            vec!["a", "b"]
        );
    }

    #[test]
    fn depends_on_names_an_entry_that_is_not_an_object_name() {
        let annotations = map(&[(DEPENDS_ON, ",, ,-5,")]);
        assert_eq!(depends_on_checked(&annotations), Err("-5"));
        assert!(depends_on(&map(&[(DEPENDS_ON, ",, ,-5,")])).is_empty());
        assert_eq!(
            depends_on_checked(&map(&[(DEPENDS_ON, "db, cache.v2")])),
            Ok(vec!["db".to_string(), "cache.v2".to_string()])
        );
        for bad in ["Db", "a_b", "x-", "a..b", &"a".repeat(254)] {
            assert!(
                depends_on_checked(&map(&[(DEPENDS_ON, bad)])).is_err(),
                "{bad}"
            );
        }
    }
}
