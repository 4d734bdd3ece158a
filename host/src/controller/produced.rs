//! Keeping the record of what a template's deployments produced across
//! deployments, so that every resource any of them produced stays the
//! template's own (`ownership::produced_by`) until it is deleted in Radius.
//!
//! Two records say a `DeploymentResource` stands for something the template
//! produced: the `radapp.io/template-uid` label on the object (radwasm puts
//! it on every one it creates) and the template's `status.outputResources`
//! (the only record for the objects Radius's own controller created, which
//! carry no label). The second is replaced by each successful deployment:
//! an unlabelled object whose id the new list drops would stop being the
//! template's own while its deletion runs, and be released (left in Radius)
//! instead of deleted. So before a status write replaces the list, every
//! unlabelled object of the template that only the old list vouches for
//! and the new one drops gets the label: the produced set is merged, never
//! replaced, and each object carries its own record until it is gone.

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::writes::{api, send_write};
use super::{Context, Error, OWNER_NAME_LABEL, OWNER_UID_LABEL};
use crate::crd::{DeploymentResource, DeploymentTemplate};

/// The `DeploymentResource`s among `children` that must carry the
/// template's label before its `status.outputResources` becomes `next`:
/// controlled by `template`, not labelled with its uid, listed in its
/// current `status.outputResources` and not in `next` (ids compare
/// case-insensitively). Objects the template never produced (not listed,
/// not labelled) are never marked: they stay tracked, never deleted.
pub fn to_mark<'a>(
    template: &DeploymentTemplate,
    children: impl IntoIterator<Item = &'a DeploymentResource>,
    next: &[String],
) -> Vec<&'a DeploymentResource> {
    let Some(uid) = template.metadata.uid.as_deref() else {
        return Vec::new();
    };
    let listed = template
        .status
        .as_ref()
        .map(|status| status.output_resources.as_slice())
        .unwrap_or_default();
    let lists = |ids: &[String], id: &str| ids.iter().any(|known| known.eq_ignore_ascii_case(id));
    children
        .into_iter()
        .filter(|child| {
            child
                .owner_references()
                .iter()
                .any(|owner| owner.controller == Some(true) && owner.uid == uid)
                && child.labels().get(OWNER_UID_LABEL).map(String::as_str) != Some(uid)
                && lists(listed, &child.spec.id)
                && !lists(next, &child.spec.id)
        })
        .collect()
}

/// Label, from the watch cache's view of `template`'s children, every one
/// [`to_mark`] names, before a status write makes `next` its output list.
/// An object already gone needs no label. Any other failure stops the
/// plan before its status write, so the list is never replaced while an
/// object it drops is unmarked; the next decision marks it again.
pub async fn mark_before_replacing(
    ctx: &Context,
    template: &DeploymentTemplate,
    next: &[String],
) -> Result<(), Error> {
    let caches = ctx.caches()?;
    let namespace = template.namespace().unwrap_or_default();
    let uid = template.uid().unwrap_or_default();
    let children: Vec<_> = ctx
        .owners
        .get(&uid)
        .iter()
        .filter_map(|child| caches.resources.get(child))
        .filter(|child| child.namespace().as_deref() == Some(namespace.as_str()))
        .collect();
    let marked = to_mark(template, children.iter().map(AsRef::as_ref), next);
    if marked.is_empty() {
        return Ok(());
    }
    let name = super::ownership::truncate_label(&template.name_any());
    let patch = json!({"metadata": {"labels": {
        OWNER_UID_LABEL: uid,
        OWNER_NAME_LABEL: name,
    }}});
    for child in marked {
        let child_name = child.name_any();
        tracing::info!(
            resource = %child_name,
            id = %child.spec.id,
            "labelling a DeploymentResource as the template's own before its output list drops it"
        );
        match send_write(ctx, &api(ctx, child), |request| {
            request.patch(&child_name, &PatchParams::default(), &Patch::Merge(&patch))
        })
        .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(response)) if response.code == 404 => {}
            Err(source) => {
                return Err(Error::Kube {
                    what: "label a DeploymentResource as its template's own",
                    source,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::ownership::produced_by;
    use crate::controller::ownership::tests::child;
    use proptest::prelude::*;

    const SCOPE: &str = "/planes/radius/local/resourceGroups/default";

    fn template(outputs: &[String]) -> DeploymentTemplate {
        let mut template: DeploymentTemplate = serde_json::from_value(json!({
            "apiVersion": "radapp.io/v1alpha3",
            "kind": "DeploymentTemplate",
            "metadata": {"name": "app", "namespace": "default", "uid": "uid-app"},
            "spec": {"template": "{}"},
        }))
        .expect("template");
        template.status = Some(crate::crd::DeploymentTemplateStatus {
            output_resources: outputs.to_vec(),
            ..Default::default()
        });
        template
    }

    fn label(resource: &mut DeploymentResource) {
        resource
            .labels_mut()
            .insert(OWNER_UID_LABEL.to_string(), "uid-app".to_string());
    }

    fn id(kind: &str, name: &str) -> String {
        format!("{SCOPE}/providers/Applications.Core/{kind}/{name}")
    }

    #[test]
    fn only_unlabelled_outputs_the_next_list_drops_are_marked() {
        let environment = id("environments", "env");
        let application = id("applications", "app");
        let container = id("containers", "web");
        let by_hand = id("containers", "by-hand");
        let template = template(&[environment.clone(), application.clone(), container.clone()]);
        let children = [
            // Radius's: kept by the next list (another case), dropped by it.
            child(&environment.to_uppercase(), "uid-app", false),
            child(&application, "uid-app", false),
            // radwasm's: labelled already.
            child(&container, "uid-app", true),
            // Applied by hand: never produced, never marked.
            child(&by_hand, "uid-app", false),
            // Another template's object for a listed id.
            child(&application, "uid-other", false),
        ];
        let next = [environment.clone(), id("applications", "app-2")];
        let marked: Vec<&str> = to_mark(&template, &children, &next)
            .into_iter()
            .map(|r| r.spec.id.as_str())
            .collect();
        assert_eq!(marked, vec![application.as_str()]);
        // No template uid: nothing is known to be its own.
        let mut anonymous = template.clone();
        anonymous.metadata.uid = None;
        assert!(to_mark(&anonymous, &children, &[]).is_empty());
    }

    /// One step of a template's life the property test plays.
    #[derive(Debug, Clone)]
    enum Step {
        /// A deployment succeeded with these outputs (indices into the ids):
        /// the default policy creates objects for new ones and deletes the
        /// ones no longer output; status lists the new outputs.
        Deployed(Vec<usize>),
        /// The deletion of the `n`th object being deleted finished.
        DeletionDone(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            proptest::collection::vec(0..6usize, 0..4).prop_map(Step::Deployed),
            (0..8usize).prop_map(Step::DeletionDone),
        ]
    }

    proptest! {
        /// Whatever deployments follow a takeover (Radius's unlabelled
        /// objects, listed only in `outputResources`), every object any
        /// deployment produced is the template's own until its deletion
        /// finishes, when marking runs before each status write replaces
        /// the list; and no object the template never produced is ever
        /// marked or its own.
        #[test]
        fn what_any_deployment_produced_stays_the_templates_own_until_deleted(
            taken_over in proptest::collection::vec(0..6usize, 0..4),
            steps in proptest::collection::vec(step(), 0..12),
        ) {
            let ids: Vec<String> = (0..6).map(|n| id("containers", &format!("c{n}"))).collect();
            let pick = |picked: &[usize]| -> Vec<String> {
                let mut out: Vec<String> = Vec::new();
                for &n in picked {
                    if !out.contains(&ids[n]) {
                        out.push(ids[n].clone());
                    }
                }
                out
            };
            let mut outputs = pick(&taken_over);
            // (object, being deleted)
            let mut children: Vec<(DeploymentResource, bool)> = outputs
                .iter()
                .map(|id| (child(id, "uid-app", false), false))
                .collect();
            let by_hand = child(&id("containers", "by-hand"), "uid-app", false);
            for step in steps {
                match step {
                    Step::Deployed(picked) => {
                        let next = pick(&picked);
                        let template = template(&outputs);
                        let objects: Vec<DeploymentResource> = children
                            .iter()
                            .map(|(object, _)| object.clone())
                            .chain([by_hand.clone()])
                            .collect();
                        let marked: Vec<String> = to_mark(&template, &objects, &next)
                            .into_iter()
                            .map(|r| r.spec.id.clone())
                            .collect();
                        prop_assert!(!marked.contains(&by_hand.spec.id));
                        for (object, deleting) in &mut children {
                            if marked.contains(&object.spec.id) {
                                label(object);
                            }
                            // Not output any more: asked to go.
                            if !next.contains(&object.spec.id) {
                                *deleting = true;
                            }
                        }
                        for id in &next {
                            if !children.iter().any(|(o, d)| &o.spec.id == id && !d) {
                                children.push((child(id, "uid-app", true), false));
                            }
                        }
                        outputs = next;
                    }
                    Step::DeletionDone(n) => {
                        let deleting: Vec<usize> = children
                            .iter()
                            .enumerate()
                            .filter(|(_, (_, d))| *d)
                            .map(|(i, _)| i)
                            .collect();
                        if !deleting.is_empty() {
                            children.remove(deleting[n % deleting.len()]);
                        }
                    }
                }
                let template = template(&outputs);
                for (object, _) in &children {
                    prop_assert!(
                        produced_by(&template, object, &[]),
                        "{} is no longer the template's own while it lives",
                        object.spec.id
                    );
                }
                prop_assert!(!produced_by(&template, &by_hand, &[]));
            }
        }
    }

    #[test]
    fn without_marking_a_takeover_loses_what_the_next_list_drops() {
        // The failure the marking prevents, stated: Radius's object, listed
        // only by the output list a new deployment replaces.
        let old = id("applications", "app");
        let object = child(&old, "uid-app", false);
        assert!(produced_by(
            &template(std::slice::from_ref(&old)),
            &object,
            &[]
        ));
        let next = [id("applications", "app-2")];
        assert!(!produced_by(&template(&next), &object, &[]));
        let mut marked = object.clone();
        label(&mut marked);
        assert!(produced_by(&template(&next), &marked, &[]));
    }
}
