//! What the watch caches keep of an object. Every object the controller
//! watches is held decoded in memory for as long as it exists, so fields
//! nothing reads are dropped as each version arrives.

use kube::Resource;

/// The annotation `kubectl apply` (client-side) keeps a copy of the whole
/// applied object in: for a template, its ARM template a second time.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drop from a cached copy what nothing here reads: `managedFields` (every
/// write is a merge patch, which needs none) and kubectl's
/// [`LAST_APPLIED`] copy (so a policy is not shown it either). Writes only
/// ever name the fields they set, so the dropped fields are kept on the
/// server.
pub fn slim<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;
    use crate::crd::DeploymentTemplate;

    #[test]
    fn a_cached_copy_keeps_every_annotation_but_kubectls_copy_and_no_managed_fields() {
        let mut template: DeploymentTemplate = serde_json::from_value(serde_json::json!({
            "apiVersion": "radapp.io/v1alpha3",
            "kind": "DeploymentTemplate",
            "metadata": {
                "name": "app",
                "annotations": {
                    LAST_APPLIED: "{\"spec\":{\"template\":\"...\"}}",
                    "radwasm.io/deployments": "[]",
                },
            },
            "spec": {"template": "{}"},
        }))
        .expect("template");
        template.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);

        slim(&mut template);

        assert_eq!(template.metadata.managed_fields, None);
        let annotations = template.metadata.annotations.expect("annotations");
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["radwasm.io/deployments"]
        );
    }
}
