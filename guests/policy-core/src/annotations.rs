//! The annotation knobs of the default policy, parsed from an object's
//! annotations.

use std::collections::BTreeMap;

use radwasm_policy_model::annotations::{HOLD, RECONCILE_POLICY};

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

/// The reconcile mode named by the annotations; an unknown value is an error
/// message naming the annotation and the allowed values.
pub fn reconcile_mode(annotations: &BTreeMap<String, String>) -> Result<ReconcileMode, String> {
    match annotations.get(RECONCILE_POLICY).map(|value| value.trim()) {
        None | Some("") | Some("manage") => Ok(ReconcileMode::Manage),
        Some("skip") => Ok(ReconcileMode::Skip),
        Some("detach-on-delete") => Ok(ReconcileMode::DetachOnDelete),
        Some(other) => Err(format!(
            "annotation {RECONCILE_POLICY}: unknown value {other:?} (expected manage, skip or detach-on-delete)"
        )),
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
    fn hold_and_depends_on_parse_leniently() {
        assert!(is_held(&map(&[(HOLD, "True")])));
        assert!(!is_held(&map(&[(HOLD, "false")])));
        assert_eq!(
            depends_on(&map(&[(DEPENDS_ON, " a, b,,a ")])),
            vec!["a", "b"]
        );
    }
}
