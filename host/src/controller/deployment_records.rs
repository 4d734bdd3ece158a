//! Where a template's Radius deployment records are remembered, so that the
//! template deletes them when it goes, whoever wrote its status in between.
//!
//! `status.deployments` lists them, but status is not ours alone: Radius's
//! own controller rewrites the whole status (dropping the fields it does not
//! know), and an API server running Radius's CRDs prunes the field. So each
//! list is also kept in the template's `radwasm.io/deployments` annotation,
//! which neither touches: written ahead of every deployment (with the
//! finalizer, for a template's first), and again when a record is deleted
//! (`writes::write_deployment_records`).
//! The policy is shown both lists, merged.

use kube::ResourceExt;

use crate::crd::DeploymentTemplate;

/// The annotation that keeps a template's deployment records: a JSON array
/// of deployment ids, oldest first.
pub const ANNOTATION: &str = "radwasm.io/deployments";

/// Most deployment records kept; past this the oldest are forgotten (a
/// policy deletes older ones long before: the default keeps two).
pub const MAX_RECORDS: usize = 32;

/// The records the annotation holds (none if it is absent or unreadable).
fn annotated(template: &DeploymentTemplate) -> Vec<String> {
    template
        .annotations()
        .get(ANNOTATION)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// Every deployment record the template is known to have: the annotation's
/// (the durable list, in order), then any that only status lists (written
/// by a radwasm that kept no annotation). Ids compare case-insensitively.
pub fn recorded(template: &DeploymentTemplate) -> Vec<String> {
    let mut ids = annotated(template);
    let in_status = template
        .status
        .as_ref()
        .map(|status| status.deployments.as_slice())
        .unwrap_or_default();
    for id in in_status {
        if !ids.iter().any(|known| known.eq_ignore_ascii_case(id)) {
            ids.push(id.clone());
        }
    }
    ids
}

/// True if the annotation already holds exactly `ids`.
pub fn annotation_holds(template: &DeploymentTemplate, ids: &[String]) -> bool {
    annotated(template) == ids
}

/// `ids` with `id` added last (unless listed), at most [`MAX_RECORDS`].
pub fn with(ids: &[String], id: &str) -> Vec<String> {
    let mut ids = ids.to_vec();
    if !ids.iter().any(|known| known.eq_ignore_ascii_case(id)) {
        ids.push(id.to_string());
        let surplus = ids.len().saturating_sub(MAX_RECORDS);
        ids.drain(..surplus);
    }
    ids
}

/// The annotation's value for `ids`.
pub fn annotation_value(ids: &[String]) -> String {
    serde_json::Value::from(ids.to_vec()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(annotation: Option<&str>, status: &[&str]) -> DeploymentTemplate {
        let mut template: DeploymentTemplate = serde_json::from_value(json!({
            "apiVersion": "radapp.io/v1alpha3",
            "kind": "DeploymentTemplate",
            "metadata": {"name": "app", "namespace": "default"},
            "spec": {"template": "{}"},
        }))
        .expect("template");
        if let Some(annotation) = annotation {
            template.metadata.annotations =
                Some([(ANNOTATION.to_string(), annotation.to_string())].into());
        }
        template.status = Some(crate::crd::DeploymentTemplateStatus {
            deployments: status.iter().map(|id| id.to_string()).collect(),
            ..Default::default()
        });
        template
    }

    #[test]
    fn records_survive_a_status_written_by_another_controller() {
        // Radius's controller rewrote status: only the annotation is left.
        let ids = recorded(&template(Some(r#"["/d/a","/d/b"]"#), &[]));
        assert_eq!(ids, vec!["/d/a", "/d/b"]);
        // Written by a radwasm that kept no annotation: status alone.
        assert_eq!(recorded(&template(None, &["/d/a"])), vec!["/d/a"]);
        // Both: the annotation's order, then what only status lists.
        assert_eq!(
            recorded(&template(Some(r#"["/d/a","/d/b"]"#), &["/D/B", "/d/c"])),
            vec!["/d/a", "/d/b", "/d/c"]
        );
        // An unreadable annotation counts as none.
        assert_eq!(
            recorded(&template(Some("not json"), &["/d/c"])),
            vec!["/d/c"]
        );
    }

    #[test]
    fn the_list_is_bounded_and_keeps_its_order() {
        let mut ids = Vec::new();
        for n in 0..40 {
            ids = with(&ids, &format!("/d/{n}"));
        }
        assert_eq!(ids.len(), MAX_RECORDS);
        assert_eq!(ids[0], "/d/8");
        assert_eq!(with(&ids, "/D/39"), ids, "listed already");
        let text = annotation_value(&ids[..2]);
        assert!(annotation_holds(&template(Some(&text), &[]), &ids[..2]));
    }
}
