//! The annotation knobs of the default policy (`radwasm_policy_core::
//! annotations`): `reconcile-policy`, `hold`, `deployment-retry`, `drift`
//! and `depends-on` with any values, checked against the rules in
//! docs/default-policy.md (*Annotations*): trimmed, ASCII case-insensitive,
//! absent or empty is the default, a value not understood is the default
//! with a short warning naming the annotation (`reconcile-policy`: an error).
//!
//! Input: five values separated by NUL; a first byte with bit `n` set leaves
//! annotation `n` out.

#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use radwasm_fuzz::split_nul;
use radwasm_policy_core::annotations::{
    DEFAULT_RETRY_BASE_MS, DeploymentRetry, DriftMode, MAX_RETRY_MS, ReconcileMode, depends_on,
    deployment_retry, drift, hold, is_held, reconcile_mode,
};
use radwasm_policy_model::annotations::{
    DEPENDS_ON, DEPLOYMENT_RETRY, DRIFT, HOLD, RECONCILE_POLICY,
};

const MAX_WARNING_BYTES: usize = 1024;

fn normalized(value: Option<&str>) -> String {
    value.unwrap_or("").trim().to_ascii_lowercase()
}

fn check_warning(name: &str, warning: &str) {
    assert!(warning.contains(name), "{warning}");
    assert!(
        warning.len() <= MAX_WARNING_BYTES,
        "a {}-byte warning",
        warning.len()
    );
}

/// `deployment-retry` as documented: `never`, or a whole number (decimal
/// digits) greater than 0 followed by `s` or `m`; the first delay is capped
/// at 10 minutes.
fn reference_retry(value: &str) -> Option<DeploymentRetry> {
    match value {
        "" => {
            return Some(DeploymentRetry::Backoff {
                base_ms: DEFAULT_RETRY_BASE_MS,
            });
        }
        "never" => return Some(DeploymentRetry::Never),
        _ => {}
    }
    let (digits, unit_ms) = match value.as_bytes().last()? {
        b's' => (&value[..value.len() - 1], 1_000u64),
        b'm' => (&value[..value.len() - 1], 60_000),
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.bytes().all(|b| b == b'0') {
        return None;
    }
    let base_ms = digits.parse::<u64>().map_or(MAX_RETRY_MS, |n| {
        n.saturating_mul(unit_ms).min(MAX_RETRY_MS)
    });
    Some(DeploymentRetry::Backoff { base_ms })
}

fn reference_depends_on(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in value.split(',') {
        let part = part.trim();
        if reference_object_name(part) && !out.iter().any(|seen| seen == part) {
            out.push(part.to_string());
        }
    }
    out
}

/// An RFC 1123 subdomain as Kubernetes' validation reads it: at most 253
/// characters, each dot-separated label `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn reference_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            match (label.chars().next(), label.chars().last()) {
                (Some(first), Some(last)) => {
                    alnum(first) && alnum(last) && label.chars().all(|c| alnum(c) || c == '-')
                }
                _ => false,
            }
        })
}

fuzz_target!(|data: &[u8]| {
    let Some((&absent, data)) = data.split_first() else {
        return;
    };
    let parts = split_nul(data, 5);
    let names = [RECONCILE_POLICY, HOLD, DEPLOYMENT_RETRY, DRIFT, DEPENDS_ON];
    let mut annotations = BTreeMap::new();
    for (n, name) in names.into_iter().enumerate() {
        if absent & (1 << n) == 0 {
            annotations.insert(
                name.to_string(),
                String::from_utf8_lossy(parts[n]).into_owned(),
            );
        }
    }
    let value = |name: &str| annotations.get(name).map(String::as_str);

    // reconcile-policy: exactly three values, otherwise an error.
    let expected = match normalized(value(RECONCILE_POLICY)).as_str() {
        "" | "manage" => Some(ReconcileMode::Manage),
        "skip" => Some(ReconcileMode::Skip),
        "detach-on-delete" => Some(ReconcileMode::DetachOnDelete),
        _ => None,
    };
    match (reconcile_mode(&annotations), expected) {
        (Ok(mode), Some(expected)) => assert_eq!(mode, expected),
        (Err(message), None) => check_warning(RECONCILE_POLICY, &message),
        (got, expected) => panic!("reconcile-policy: {got:?}, expected {expected:?}"),
    }

    // hold: true or false; anything else is false with a warning.
    let held = hold(&annotations);
    match normalized(value(HOLD)).as_str() {
        "true" => assert_eq!((held.value, held.warning.is_none()), (true, true)),
        "" | "false" => assert_eq!((held.value, held.warning.is_none()), (false, true)),
        _ => {
            assert!(!held.value);
            check_warning(HOLD, held.warning.as_deref().expect("a warning"));
        }
    }
    assert_eq!(is_held(&annotations), held.value);

    // deployment-retry.
    let retry = deployment_retry(&annotations);
    match (
        reference_retry(&normalized(value(DEPLOYMENT_RETRY))),
        &retry.warning,
    ) {
        (Some(expected), None) => {
            assert_eq!(retry.value, expected, "{:?}", value(DEPLOYMENT_RETRY))
        }
        (None, Some(warning)) => {
            assert_eq!(
                retry.value,
                DeploymentRetry::Backoff {
                    base_ms: DEFAULT_RETRY_BASE_MS
                }
            );
            check_warning(DEPLOYMENT_RETRY, warning);
        }
        (expected, warning) => panic!(
            "deployment-retry {:?}: {:?} with {warning:?}, expected {expected:?}",
            value(DEPLOYMENT_RETRY),
            retry.value
        ),
    }
    for failures in [0, 1, 2, 20, u32::MAX] {
        if let Some(delay) = retry.value.delay_ms(failures) {
            assert!(delay <= MAX_RETRY_MS, "{delay}");
        }
    }

    // drift: redeploy or report.
    let mode = drift(&annotations);
    match normalized(value(DRIFT)).as_str() {
        "" | "redeploy" => assert_eq!(
            (mode.value, mode.warning.is_none()),
            (DriftMode::Redeploy, true)
        ),
        "report" => assert_eq!(
            (mode.value, mode.warning.is_none()),
            (DriftMode::Report, true)
        ),
        _ => {
            assert_eq!(mode.value, DriftMode::Redeploy);
            check_warning(DRIFT, mode.warning.as_deref().expect("a warning"));
        }
    }

    // depends-on: split on commas, trimmed, no empties, first of duplicates.
    let names = depends_on(&annotations);
    assert_eq!(names, reference_depends_on(value(DEPENDS_ON).unwrap_or("")));
    let rejoined = [(DEPENDS_ON.to_string(), names.join(","))].into();
    assert_eq!(depends_on(&rejoined), names, "idempotent");
});
