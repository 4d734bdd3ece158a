//! Which `DeploymentResource`s are a template's own, and the order they go
//! in. A template deletes (in Kubernetes, and so in Radius) only the objects
//! that stand for Radius resources one of its own deployments produced, as
//! Radius's controller removes only what drops out of a template's
//! `outputResources`. Any other object that names the template as its
//! controller owner (applied by hand, say) is tracked by its own reconcile
//! and never deleted by the template. And whoever started the deletions, an
//! application or environment is deleted in Radius only once the template's
//! other resources are gone.

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use radwasm_policy_model::scope::deletion_wave;

use super::index::Index;
use super::{Caches, Context, OWNER_UID_LABEL};
use crate::crd::{DeploymentResource, DeploymentTemplate};

/// Reason of the Warning event on a `DeploymentResource` that names a
/// template as its controller owner but is not one of its outputs.
pub const NOT_A_TEMPLATE_OUTPUT: &str = "NotATemplateOutput";

/// True if `resource` is `template`'s own: one of its deployments produced
/// the Radius resource it stands for. That is, the template's plan created it
/// (every `DeploymentResource` radwasm creates carries the template's uid in
/// the `radapp.io/template-uid` label), or its id is in the template's
/// `status.outputResources` (which is how the objects Radius's own controller
/// created are known), or in `outputs`, the output of the deployment that
/// just finished. Ids compare case-insensitively, as Radius compares them.
pub fn produced_by(
    template: &DeploymentTemplate,
    resource: &DeploymentResource,
    outputs: &[String],
) -> bool {
    let Some(uid) = template.metadata.uid.as_deref() else {
        return false;
    };
    let controlled = resource
        .owner_references()
        .iter()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid);
    if !controlled {
        return false;
    }
    if resource.labels().get(OWNER_UID_LABEL).map(String::as_str) == Some(uid) {
        return true;
    }
    let id = resource.spec.id.as_str();
    let listed = template
        .status
        .as_ref()
        .map(|status| status.output_resources.as_slice())
        .unwrap_or_default();
    listed
        .iter()
        .chain(outputs)
        .any(|output| output.eq_ignore_ascii_case(id))
}

/// The template that controls `resource`, if it is in the cache with the
/// uid the owner reference names.
pub fn owner_of(
    caches: &Caches,
    resource: &DeploymentResource,
) -> Option<std::sync::Arc<DeploymentTemplate>> {
    let namespace = resource.namespace().unwrap_or_default();
    let reference = resource
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "DeploymentTemplate")?;
    caches
        .templates
        .get(&ObjectRef::new(&reference.name).within(&namespace))
        .filter(|template| template.metadata.uid.as_deref() == Some(reference.uid.as_str()))
}

/// Why the Radius DELETE of `resource` must wait, if it must: it stands for
/// an application or environment, and another `DeploymentResource` of the
/// same controller owner, of an earlier deletion wave (other resources, then
/// applications, then environments), is still there and going away: being
/// deleted, or one of the owner's own while the owner is being deleted
/// (which deletes its own first). An object that is not going away does
/// not hold it, or it would wait for ever: one that is not the owner's
/// stays when the template goes, and while the template lives its own
/// current outputs stay (a new deployment's container does not hold the
/// deletion of the application an earlier one made).
/// `owners` is the index of each template's `DeploymentResource`s, kept
/// from the same watch as `caches.resources`.
pub fn deletion_held_by(
    caches: &Caches,
    owners: &Index<DeploymentResource>,
    resource: &DeploymentResource,
) -> Option<String> {
    let wave = deletion_wave(&resource.spec.id);
    if wave == 0 {
        return None;
    }
    let owner_uid = resource
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true))?
        .uid
        .clone();
    let owner_going = owner_of(caches, resource)
        .filter(|template| template.metadata.deletion_timestamp.is_some());
    let name = resource.name_any();
    owners
        .get(&owner_uid)
        .iter()
        .filter(|sibling| sibling.name != name)
        .filter_map(|sibling| caches.resources.get(sibling))
        .find(|sibling| {
            deletion_wave(&sibling.spec.id) < wave
                && (sibling.metadata.deletion_timestamp.is_some()
                    || owner_going
                        .as_deref()
                        .is_some_and(|template| produced_by(template, sibling, &[])))
        })
        .map(|sibling| {
            format!(
                "{} waits for {} ({}) to be deleted first",
                resource.spec.id,
                sibling.name_any(),
                sibling.spec.id
            )
        })
}

/// Objects already warned about, by uid, so a Warning event is said once
/// per object and run of the controller. Bounded: past
/// [`WarnedOnce::LIMIT`] objects it starts afresh (a warning may then be
/// said again).
#[derive(Default)]
pub struct WarnedOnce(std::sync::Mutex<std::collections::HashSet<String>>);

impl WarnedOnce {
    pub const LIMIT: usize = 10_000;

    /// True the first time `uid` is given.
    pub fn first(&self, uid: &str) -> bool {
        let Ok(mut warned) = self.0.lock() else {
            return false;
        };
        if warned.len() >= Self::LIMIT {
            warned.clear();
        }
        warned.insert(uid.to_string())
    }
}

/// Say once, with a Warning event on `resource`, that it names a live
/// template as its controller owner but is not one of its outputs: it is
/// tracked, and the template will not delete it.
pub async fn warn_if_not_an_output(ctx: &Context, resource: &DeploymentResource) {
    if resource.metadata.deletion_timestamp.is_some() {
        return;
    }
    let Ok(caches) = ctx.caches() else {
        return;
    };
    let Some(template) = owner_of(caches, resource) else {
        return;
    };
    if produced_by(&template, resource, &[])
        || !ctx
            .not_outputs_warned
            .first(resource.metadata.uid.as_deref().unwrap_or_default())
    {
        return;
    }
    let message = format!(
        "{} is not one of the outputs of template {}: it is tracked, and deleting the template will not delete it (delete this object to delete it in Radius)",
        resource.spec.id,
        template.name_any()
    );
    let event = radwasm_policy_model::Event {
        event_type: radwasm_policy_model::EventType::Warning,
        reason: NOT_A_TEMPLATE_OUTPUT.to_string(),
        message,
    };
    super::events::emit(ctx, resource, &event).await;
}

/// A label value of at most 63 characters that ends as labels must.
pub(crate) fn truncate_label(value: &str) -> String {
    value
        .chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches(['-', '.', '_'])
        .to_string()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::runtime::watcher;

    const SCOPE: &str = "/planes/radius/local/resourceGroups/default";

    fn template(outputs: &[&str]) -> DeploymentTemplate {
        let mut template: DeploymentTemplate = serde_json::from_value(serde_json::json!({
            "apiVersion": "radapp.io/v1alpha3",
            "kind": "DeploymentTemplate",
            "metadata": {"name": "app", "namespace": "default", "uid": "uid-app"},
            "spec": {"template": "{}", "parameters": {}, "providerConfig": "{}"},
        }))
        .expect("template");
        template.status = Some(crate::crd::DeploymentTemplateStatus {
            output_resources: outputs.iter().map(|id| id.to_string()).collect(),
            ..Default::default()
        });
        template
    }

    fn resource(id: &str, owner_uid: &str, labelled: bool) -> DeploymentResource {
        let mut resource = child(id, owner_uid, labelled);
        resource.metadata.name = Some("r".into());
        resource.metadata.uid = Some("uid-r".into());
        resource
    }

    /// A `DeploymentResource` for `id` (named after its last segment), the
    /// controller child of template `app` with uid `owner_uid`, labelled
    /// with that uid if `labelled` (radwasm created it) or not (Radius's
    /// controller, or a hand).
    pub(crate) fn child(id: &str, owner_uid: &str, labelled: bool) -> DeploymentResource {
        let mut resource: DeploymentResource = serde_json::from_value(serde_json::json!({
            "apiVersion": "radapp.io/v1alpha3",
            "kind": "DeploymentResource",
            "metadata": {"name": id.rsplit('/').next(), "namespace": "default"},
            "spec": {"id": id},
        }))
        .expect("resource");
        resource.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "radapp.io/v1alpha3".into(),
            kind: "DeploymentTemplate".into(),
            name: "app".into(),
            uid: owner_uid.into(),
            controller: Some(true),
            ..Default::default()
        }]);
        if labelled {
            resource.metadata.labels =
                Some([(OWNER_UID_LABEL.to_string(), owner_uid.to_string())].into());
        }
        resource
    }

    /// The template's caches and owners index, fed the events a watch
    /// would bring.
    struct View {
        caches: Caches,
        templates: kube::runtime::reflector::store::Writer<DeploymentTemplate>,
        resources: kube::runtime::reflector::store::Writer<DeploymentResource>,
        owners: Index<DeploymentResource>,
    }

    impl View {
        fn new() -> Self {
            let (templates_store, templates) = kube::runtime::reflector::store();
            let (resources_store, resources) = kube::runtime::reflector::store();
            let view = View {
                caches: Caches {
                    templates: templates_store,
                    resources: resources_store,
                },
                templates,
                resources,
                owners: super::super::index::owners(),
            };
            view.owners.observe(&watcher::Event::Init);
            view.owners.observe(&watcher::Event::InitDone);
            view
        }

        fn apply_template(&mut self, template: DeploymentTemplate) {
            self.templates
                .apply_watcher_event(&watcher::Event::Apply(template));
        }

        /// A watch event for `resource`, through the cache then the index.
        fn resource(&mut self, event: watcher::Event<DeploymentResource>) {
            self.resources.apply_watcher_event(&event);
            self.owners.observe(&event);
        }

        fn held(&self, resource: &DeploymentResource) -> Option<String> {
            deletion_held_by(&self.caches, &self.owners, resource)
        }
    }

    /// `resource(id, …)` named `name`, and being deleted if `deleting`.
    fn sibling(name: &str, id: &str, labelled: bool, deleting: bool) -> DeploymentResource {
        let mut object = resource(id, "uid-app", labelled);
        object.metadata.name = Some(name.into());
        object.metadata.uid = Some(format!("uid-{name}"));
        if deleting {
            object.metadata.deletion_timestamp = Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
            );
        }
        object
    }

    #[test]
    fn applications_then_environments_go_after_the_templates_other_resources() {
        let container = format!("{SCOPE}/providers/Applications.Core/containers/web");
        let application = format!("{SCOPE}/providers/Applications.Core/applications/app");
        let environment = format!("{SCOPE}/providers/Applications.Core/environments/env");
        let mut view = View::new();
        view.apply_template(template(&[&container, &application, &environment]));
        let web = sibling("web", &container, true, true);
        let app = sibling("app", &application, true, true);
        let env = sibling("env", &environment, true, true);
        for object in [&web, &app, &env] {
            view.resource(watcher::Event::Apply(object.clone()));
        }

        // Other resources never wait; an application waits for them, an
        // environment for both.
        assert_eq!(view.held(&web), None);
        let held = view.held(&app).expect("the application waits");
        assert!(held.contains("waits for web"), "{held}");
        assert!(view.held(&env).is_some());

        // The container is gone: the application goes; the environment
        // still waits for it.
        view.resource(watcher::Event::Delete(web));
        assert_eq!(view.held(&app), None);
        let held = view.held(&env).expect("the environment waits");
        assert!(held.contains("waits for app"), "{held}");
        view.resource(watcher::Event::Delete(app));
        assert_eq!(view.held(&env), None);
    }

    #[test]
    fn only_what_goes_away_holds_a_deletion() {
        let container = format!("{SCOPE}/providers/Applications.Core/containers/web");
        let by_hand = format!("{SCOPE}/providers/Applications.Core/containers/by-hand");
        let application = format!("{SCOPE}/providers/Applications.Core/applications/app");
        let mut view = View::new();
        view.apply_template(template(&[&container, &application]));
        let app = sibling("app", &application, true, true);
        view.resource(watcher::Event::Apply(app.clone()));

        // Applied by hand under the template, not being deleted: it stays
        // when the template goes, so it holds nothing.
        view.resource(watcher::Event::Apply(sibling(
            "by-hand", &by_hand, false, false,
        )));
        assert_eq!(view.held(&app), None);

        // One of the template's own, not being deleted, while the template
        // lives: a current output, which stays (the application is one an
        // earlier deployment made), so it holds nothing.
        view.resource(watcher::Event::Apply(sibling(
            "web", &container, true, false,
        )));
        assert_eq!(view.held(&app), None);
        // Unlabelled but listed by the template (Radius's controller made
        // it): the same.
        let listed = sibling("listed", &container, false, false);
        view.resource(watcher::Event::Apply(listed.clone()));
        assert_eq!(view.held(&app), None);
        view.resource(watcher::Event::Delete(listed));

        // The template being deleted: it deletes its own first, so the
        // application waits for them.
        let mut going = template(&[&container, &application]);
        going.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
        );
        view.apply_template(going);
        let held = view.held(&app).expect("waits for the template's own");
        assert!(held.contains("waits for web"), "{held}");

        // Another template's container holds nothing.
        let mut other = sibling("other", &container, true, true);
        other.metadata.owner_references.as_mut().expect("owner")[0].uid = "uid-other".into();
        view.resource(watcher::Event::Delete(sibling(
            "web", &container, true, false,
        )));
        view.resource(watcher::Event::Apply(other));
        assert_eq!(view.held(&app), None);
    }

    #[test]
    fn a_template_owns_what_it_created_or_lists_and_nothing_else() {
        let container = format!("{SCOPE}/providers/Applications.Core/containers/web");
        let other = format!("{SCOPE}/providers/Applications.Core/containers/by-hand");
        let template = template(&[&container]);
        // Created by radwasm's plan: labelled with the template's uid.
        assert!(produced_by(
            &template,
            &resource(&other, "uid-app", true),
            &[]
        ));
        // Created by Radius's controller: unlabelled, listed (any case).
        assert!(produced_by(
            &template,
            &resource(&container.to_uppercase(), "uid-app", false),
            &[]
        ));
        // Produced by the deployment that just finished.
        assert!(produced_by(
            &template,
            &resource(&other, "uid-app", false),
            std::slice::from_ref(&other)
        ));
        // Applied by hand with a controller reference: not the template's.
        assert!(!produced_by(
            &template,
            &resource(&other, "uid-app", false),
            &[]
        ));
        // Controlled by another object of the same name.
        assert!(!produced_by(
            &template,
            &resource(&container, "uid-old", true),
            &[]
        ));
    }
}
