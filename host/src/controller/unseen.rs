//! Whether a write's answer carries a change its decision did not see.
//!
//! Status writes carry no precondition: a write decided on version N of an
//! object can land after a user's change N+1 (a deletion, an edit, a
//! label), and the version it leaves then holds both. Such a version is
//! not the controller's own (`memory/versions.rs`): the watch must pass it
//! on, since after a re-list it may be the only event that shows the
//! change. What counts is what wakes an object through its watch
//! (`watches.rs`): generation, deletion, labels, annotations, finalizers;
//! less what the controller's own writes to the object change (its
//! finalizers, its deployment records and deletion tally annotations),
//! which the plan that wrote them knew of.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use radwasm_policy_model::annotations::DELETION_TALLY;
use radwasm_policy_model::{RESOURCE_FINALIZER, TEMPLATE_FINALIZER};

use super::deployment_records;

/// True if `written`, the metadata a write answered with, differs from
/// `decided`, the metadata of the version its plan was decided on, in
/// anything a user changes: the write landed on a change the decision did
/// not see. An answer without metadata (a server that returned none)
/// counts as such a change, so nothing is swallowed on a guess.
pub fn unseen_changes(decided: &ObjectMeta, written: &ObjectMeta) -> bool {
    if written.resource_version.is_none() {
        return true;
    }
    UserView::of(decided) != UserView::of(written)
}

/// What a user changes about an object, as the watch's predicate sees it,
/// without the controller's own metadata.
#[derive(PartialEq, Eq)]
struct UserView<'a> {
    generation: Option<i64>,
    deleting: bool,
    labels: Option<&'a BTreeMap<String, String>>,
    annotations: Vec<(&'a String, &'a String)>,
    finalizers: Vec<&'a String>,
}

impl<'a> UserView<'a> {
    fn of(meta: &'a ObjectMeta) -> Self {
        let own_annotation =
            |name: &str| name == deployment_records::ANNOTATION || name == DELETION_TALLY;
        let own_finalizer = |name: &str| name == TEMPLATE_FINALIZER || name == RESOURCE_FINALIZER;
        UserView {
            generation: meta.generation,
            deleting: meta.deletion_timestamp.is_some(),
            labels: meta.labels.as_ref().filter(|labels| !labels.is_empty()),
            annotations: meta
                .annotations
                .iter()
                .flatten()
                .filter(|(name, _)| !own_annotation(name))
                .collect(),
            finalizers: meta
                .finalizers
                .iter()
                .flatten()
                .filter(|name| !own_finalizer(name))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn meta(version: &str) -> ObjectMeta {
        ObjectMeta {
            resource_version: Some(version.into()),
            generation: Some(1),
            labels: Some([("team".to_string(), "a".to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn what_the_controller_writes_itself_is_no_unseen_change() {
        let decided = meta("10");
        let mut written = meta("12");
        written.finalizers = Some(vec![TEMPLATE_FINALIZER.to_string()]);
        written.annotations = Some(
            [
                (deployment_records::ANNOTATION.to_string(), "[]".to_string()),
                (DELETION_TALLY.to_string(), "{}".to_string()),
            ]
            .into(),
        );
        assert!(!unseen_changes(&decided, &written));
        assert!(!unseen_changes(&decided, &meta("11")), "a status write");
    }

    #[test]
    fn a_users_change_under_the_write_is_unseen() {
        let decided = meta("10");
        let changes: [fn(&mut ObjectMeta); 5] = [
            |m| m.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now())),
            |m| m.generation = Some(2),
            |m| m.labels = None,
            |m| m.annotations = Some([("note".to_string(), "x".to_string())].into()),
            |m| m.finalizers = Some(vec!["example.com/keep".to_string()]),
        ];
        for (index, change) in changes.iter().enumerate() {
            let mut written = meta("12");
            change(&mut written);
            assert!(unseen_changes(&decided, &written), "change {index}");
        }
        let mut written = meta("12");
        written.resource_version = None;
        assert!(unseen_changes(&decided, &written), "no metadata answered");
    }
}
