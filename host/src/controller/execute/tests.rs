//! What carrying out a plan does, seen from outside: hand-built plans run
//! against the embedded Kubernetes API server and the Radius simulator, both
//! serving on loopback in the test's own runtime. What reaches Radius is
//! counted by the simulator; what is written, by reading the object back or
//! watching it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::reflector;
use kube::{Client, CustomResourceExt, ResourceExt};
use radwasm_policy_model::{
    self as model, RESOURCE_FINALIZER, ResourceAction, TEMPLATE_FINALIZER, TemplateAction,
};
use radwasm_sim_apiserver::ApiServer;
use radwasm_sim_radius::RadiusSim;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::deployment::deployment_id;
use super::{policy_ref, resource_plan, template_plan};
use crate::controller::deployment_records;
use crate::controller::object::Executed;
use crate::controller::writes::{Finalizer, set_finalizer};
use crate::controller::{Caches, Context, Error, observe};
use crate::crd::{
    DeploymentResource, DeploymentResourceSpec, DeploymentTemplate, DeploymentTemplateSpec,
    PolicyRef, ProviderConfig,
};
use crate::metrics::Metrics;
use crate::policy::records::Recorder;
use crate::policy::{Limits, PolicySlot, Source};
use crate::radius::{DeploymentRequest, Endpoint, RadiusClient, ResumeToken, RetryPolicy};
use crate::reconcile_policy::PolicyRegistry;

const NAMESPACE: &str = "default";
/// The resource group every deployment goes to; the simulator has it.
const SCOPE: &str = "/planes/radius/local/resourceGroups/default";
/// A resource group the simulator does not have.
const MISSING_SCOPE: &str = "/planes/radius/local/resourceGroups/missing";
/// A compiled ARM template that deploys nothing: what a deployment makes is
/// not under test here, only whether and when it is sent.
const EMPTY_TEMPLATE: &str = r#"{"$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#", "contentVersion": "1.0.0.0", "resources": {}}"#;

/// The API server and Radius, and a `Context` whose clients talk to them.
struct Fixture {
    ctx: Context,
    radius: RadiusSim,
    /// Kept for as long as the test runs (the runtime stops it at the end).
    _apiserver: ApiServer,
    /// The policy the plans are carried out for (named in status).
    policy: PolicyRef,
}

impl Fixture {
    async fn start() -> Self {
        let apiserver = radwasm_sim_apiserver::start(Default::default())
            .await
            .expect("the embedded API server starts");
        let radius = radwasm_sim_radius::start(Default::default())
            .await
            .expect("the Radius simulator starts");
        radius.ensure_resource_group("default");
        let config = kube::Config::new(apiserver.base_url().parse().expect("a URL"));
        let client = Client::try_from(config).expect("a Kubernetes client");
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in [DeploymentTemplate::crd(), DeploymentResource::crd()] {
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("the CRD is installed");
        }
        let endpoint = Endpoint::direct(&radius.base_url()).expect("a Radius endpoint");
        let radius_client =
            RadiusClient::new(endpoint, RetryPolicy::default()).expect("a Radius client");
        let slot = default_policy();
        let policy = policy_ref(&slot.current(), None);
        let ctx = Context::new(
            client,
            radius_client,
            Arc::new(PolicyRegistry::fallback_only(slot)),
            Arc::new(Metrics::default()),
            Recorder::disabled(),
        );
        // Observing reads what an object owns from the watch caches: empty
        // here, as no watch runs.
        let _ = ctx.caches.set(Caches {
            templates: reflector::store().0,
            resources: reflector::store().0,
        });
        Fixture {
            ctx,
            radius,
            _apiserver: apiserver,
            policy,
        }
    }

    fn templates(&self) -> Api<DeploymentTemplate> {
        Api::namespaced(self.ctx.client.clone(), NAMESPACE)
    }

    fn resources(&self) -> Api<DeploymentResource> {
        Api::namespaced(self.ctx.client.clone(), NAMESPACE)
    }

    /// Create a template as the user would, with the controller's finalizer
    /// already on it; the object as the server keeps it.
    async fn create_template(&self, template: DeploymentTemplate) -> DeploymentTemplate {
        self.templates()
            .create(&PostParams::default(), &template)
            .await
            .expect("the template is created")
    }

    /// Create a `DeploymentResource` for the Radius resource `id`.
    async fn create_resource(&self, name: &str, id: &str, finalizer: bool) -> DeploymentResource {
        let mut resource = DeploymentResource::new(
            name,
            DeploymentResourceSpec {
                id: id.to_string(),
                provider_config: None,
            },
        );
        resource.metadata.namespace = Some(NAMESPACE.to_string());
        if finalizer {
            resource.metadata.finalizers = Some(vec![RESOURCE_FINALIZER.to_string()]);
        }
        self.resources()
            .create(&PostParams::default(), &resource)
            .await
            .expect("the resource is created")
    }

    /// PUT a resource into Radius directly, as a deployment would leave it.
    async fn put_radius_resource(&self, id: &str) {
        let url = format!(
            "{}{id}?api-version=2023-10-01-preview",
            self.radius.base_url()
        );
        let answer = reqwest::Client::new()
            .put(url)
            .json(&json!({"properties": {}}))
            .send()
            .await
            .expect("Radius answers");
        assert!(answer.status().is_success(), "{answer:?}");
    }

    async fn template(&self, name: &str) -> DeploymentTemplate {
        self.templates().get(name).await.expect("the template")
    }

    async fn resource(&self, name: &str) -> DeploymentResource {
        self.resources().get(name).await.expect("the resource")
    }

    /// Observe the template as a reconcile does, then carry out `actions`.
    async fn run_template_plan(
        &self,
        object: &DeploymentTemplate,
        actions: &[TemplateAction],
    ) -> Result<Executed, Error> {
        let observation = observe::template(object, &self.ctx)
            .await
            .expect("observed");
        template_plan(&self.ctx, object, &self.policy, &observation, actions).await
    }

    /// Observe the resource as a reconcile does, then carry out `actions`.
    async fn run_resource_plan(
        &self,
        object: &DeploymentResource,
        actions: &[ResourceAction],
    ) -> Result<Executed, Error> {
        let observation = observe::resource(object, &self.ctx)
            .await
            .expect("observed");
        resource_plan(&self.ctx, object, &self.policy, &observation, actions).await
    }

    /// Deployment PUTs Radius received under this name (refused ones too).
    fn deployment_puts(&self, name: &str) -> u64 {
        self.radius.stats().deployment_puts_for(name)
    }
}

/// The default policy, loaded once for all the tests: the plans here are
/// hand-built, so it only fills the `Context` and is named in status.
fn default_policy() -> PolicySlot {
    static SLOT: OnceLock<PolicySlot> = OnceLock::new();
    SLOT.get_or_init(|| {
        let limits = Limits {
            concurrent_decisions: 1,
            ..Limits::default()
        };
        let engine = crate::policy::engine(limits).expect("a policy engine");
        PolicySlot::load(engine, Source::BuiltIn(crate::policy::embedded::DEFAULT))
            .expect("the default policy")
    })
    .clone()
}

/// A template deploying [`EMPTY_TEMPLATE`] into `scope`, with the
/// controller's finalizer.
fn template_into(name: &str, scope: &str) -> DeploymentTemplate {
    let mut template = DeploymentTemplate::new(
        name,
        DeploymentTemplateSpec {
            template: EMPTY_TEMPLATE.to_string(),
            parameters: serde_json::Value::Null,
            provider_config: ProviderConfig::radius(scope).into(),
            repository: None,
        },
    );
    template.metadata.namespace = Some(NAMESPACE.to_string());
    template.metadata.finalizers = Some(vec![TEMPLATE_FINALIZER.to_string()]);
    template
}

fn template(name: &str) -> DeploymentTemplate {
    template_into(name, SCOPE)
}

/// The same template with its deployment records annotation already
/// holding `ids`, as a controller stopped after writing them leaves it.
fn with_records(mut template: DeploymentTemplate, ids: &[String]) -> DeploymentTemplate {
    template.annotations_mut().insert(
        deployment_records::ANNOTATION.to_string(),
        deployment_records::annotation_value(ids),
    );
    template
}

fn start_in(scope: &str, name: &str) -> model::StartDeployment {
    model::StartDeployment {
        scope: scope.to_string(),
        deployment_name: name.to_string(),
    }
}

/// The plan that starts deployment `name` in [`SCOPE`]: start it, and say so.
fn deploy(name: &str) -> Vec<TemplateAction> {
    deploy_into(SCOPE, name)
}

fn deploy_into(scope: &str, name: &str) -> Vec<TemplateAction> {
    vec![
        TemplateAction::StartDeployment(start_in(scope, name)),
        TemplateAction::SetStatus(model::TemplateStatusUpdate {
            phase: Some(model::TemplatePhase::Updating),
            ..Default::default()
        }),
    ]
}

/// The plan that deletes a resource in Radius: send the DELETE, and say so.
fn delete_in_radius() -> Vec<ResourceAction> {
    vec![
        ResourceAction::StartRadiusDelete,
        ResourceAction::SetStatus(model::ResourceStatusUpdate {
            phase: Some(model::ResourcePhase::Deleting),
            ..Default::default()
        }),
    ]
}

fn object_moved(executed: &Executed) -> bool {
    executed.requeue_ms == Executed::default().object_moved().requeue_ms
}

/// Someone else changes the object on the server (a label) after the
/// controller read it: the version the controller decides on is stale.
async fn change_behind_our_back<K>(api: &Api<K>, name: &str) -> String
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
    K: kube::Resource,
{
    let patch = json!({"metadata": {"labels": {"changed-by": "someone-else"}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("the object changes")
        .resource_version()
        .expect("a version")
}

/// Every version of the object written after `version`, in order, as a
/// watch from that version shows them (up to the version it has now).
async fn writes_since<K>(api: &Api<K>, name: &str, version: &str) -> Vec<K>
where
    K: Clone + DeserializeOwned + std::fmt::Debug + kube::Resource + Send + 'static,
{
    let now = api.get(name).await.expect("the object").resource_version();
    if now.as_deref() == Some(version) {
        return Vec::new();
    }
    let params = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut events = api
        .watch(&params, version)
        .await
        .expect("a watch from the version")
        .boxed();
    let mut written = Vec::new();
    let seen = async {
        while let Some(event) = events.try_next().await.expect("a watch event") {
            let object = match event {
                WatchEvent::Added(object)
                | WatchEvent::Modified(object)
                | WatchEvent::Deleted(object) => object,
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(error) => panic!("the watch failed: {error:?}"),
            };
            let last = object.resource_version() == now;
            written.push(object);
            if last {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), seen)
        .await
        .expect("the watch reaches the object's current version");
    written
}

/// The deployment a template's status records as its operation.
fn recorded_deployment(template: &DeploymentTemplate) -> Option<String> {
    let operation = template.status.as_ref()?.operation.as_ref()?;
    assert_eq!(operation.operation_kind, "PUT");
    let token = ResumeToken::decode(&operation.resume_token).expect("a resume token");
    Some(token.resource_id)
}

#[tokio::test]
async fn a_deployment_is_recorded_in_status_and_sent_once() {
    let f = Fixture::start().await;
    let object = f.create_template(template("app")).await;
    let start = start_in(SCOPE, "app-1");
    let id = deployment_id(&start);

    let executed = f
        .run_template_plan(&object, &deploy("app-1"))
        .await
        .expect("carried out");

    assert!(!object_moved(&executed) && !executed.mutation_failed);
    assert_eq!(f.deployment_puts("app-1"), 1);
    assert!(f.radius.deployment(&id).is_some(), "Radius has it");
    let written = f.template("app").await;
    assert_eq!(recorded_deployment(&written), Some(id.clone()));
    let status = written.status.as_ref().expect("a status");
    assert_eq!(status.deployments, std::slice::from_ref(&id));
    assert_eq!(status.phrase.as_deref(), Some("Updating"));
    assert_eq!(status.policy.as_ref(), Some(&f.policy));
    assert!(deployment_records::annotation_holds(&written, &[id]));
    // Two writes: the records annotation, then the status written ahead of
    // the PUT, which held the whole of the plan's status, so no status write
    // follows it. (That the record comes before the PUT is shown by the
    // tests where it cannot be written.)
    let writes = writes_since(&f.templates(), "app", &object.resource_version().unwrap()).await;
    assert_eq!(writes.len(), 2, "{writes:#?}");
    assert!(writes[0].status.is_none(), "the records annotation first");
}

#[tokio::test]
async fn a_deployment_whose_record_cannot_be_written_is_not_sent() {
    let f = Fixture::start().await;
    let id = deployment_id(&start_in(SCOPE, "app-1"));
    // The records annotation is there already, so the status written ahead
    // is the first write; the template is then gone from the server (the
    // watch cache has not shown it yet), so that write fails.
    let mut object = with_records(template("app"), std::slice::from_ref(&id));
    object.metadata.finalizers = None;
    let object = f.create_template(object).await;
    f.templates()
        .delete("app", &DeleteParams::default())
        .await
        .expect("deleted");

    let executed = f.run_template_plan(&object, &deploy("app-1")).await;

    assert!(matches!(executed, Err(Error::Kube { .. })), "{executed:?}");
    assert_eq!(f.radius.stats().requests, 0, "nothing reached Radius");
}

#[tokio::test]
async fn a_plan_decided_on_a_stale_version_sends_and_writes_nothing() {
    let f = Fixture::start().await;
    let id = deployment_id(&start_in(SCOPE, "app-1"));
    // Its first write ahead is the records annotation; or, with that
    // annotation already there, the status.
    let cases = [
        ("fresh", template("fresh")),
        ("recorded", with_records(template("recorded"), &[id])),
    ];
    for (name, object) in cases {
        let object = f.create_template(object).await;
        let moved_to = change_behind_our_back(&f.templates(), name).await;

        let executed = f
            .run_template_plan(&object, &deploy("app-1"))
            .await
            .expect("carried out");

        assert!(object_moved(&executed), "{name}: {executed:?}");
        let now = f.template(name).await;
        assert_eq!(now.resource_version(), Some(moved_to), "{name}: written");
        assert!(now.status.is_none(), "{name}: {:?}", now.status);
        assert_eq!(
            now.annotations().get(deployment_records::ANNOTATION),
            object.annotations().get(deployment_records::ANNOTATION),
            "{name}"
        );
    }
    assert_eq!(f.radius.stats().requests, 0, "nothing reached Radius");
}

#[tokio::test]
async fn a_recorded_deployment_still_running_is_followed_not_sent_again() {
    let f = Fixture::start().await;
    f.radius
        .faults()
        .set_deploy_duration(Duration::from_secs(600));
    let id = deployment_id(&start_in(SCOPE, "app-1"));
    let object = f.create_template(template("app")).await;
    f.run_template_plan(&object, &deploy("app-1"))
        .await
        .expect("sent");
    assert_eq!(f.deployment_puts("app-1"), 1);

    // Decided again on the template with the record (its status written
    // ahead, as after a lost status write or a restart mid-plan).
    let recorded = f.template("app").await;
    let executed = f
        .run_template_plan(&recorded, &deploy("app-1"))
        .await
        .expect("carried out");

    assert!(!object_moved(&executed) && !executed.mutation_failed);
    assert_eq!(f.deployment_puts("app-1"), 1, "followed, not sent again");
    let after = f.template("app").await;
    assert_eq!(recorded_deployment(&after), Some(id.clone()));
    assert_eq!(after.status.expect("a status").deployments, [id]);
}

#[tokio::test]
async fn a_recorded_deployment_radius_never_got_is_sent() {
    let f = Fixture::start().await;
    let id = deployment_id(&start_in(SCOPE, "app-1"));
    // Recorded, then the controller stopped before the PUT went out.
    let object = f
        .create_template(with_records(template("app"), std::slice::from_ref(&id)))
        .await;

    let executed = f
        .run_template_plan(&object, &deploy("app-1"))
        .await
        .expect("carried out");

    assert!(!object_moved(&executed) && !executed.mutation_failed);
    assert_eq!(f.deployment_puts("app-1"), 1);
    assert_eq!(recorded_deployment(&f.template("app").await), Some(id));
}

#[tokio::test]
async fn a_deployment_radius_says_is_active_is_followed() {
    let f = Fixture::start().await;
    f.radius
        .faults()
        .set_deploy_duration(Duration::from_secs(600));
    let id = deployment_id(&start_in(SCOPE, "app-1"));
    // Running in Radius under the plan's name, but recorded nowhere.
    let provider_config = template("app").spec.provider_config_text();
    f.ctx
        .radius
        .start_deployment(&DeploymentRequest {
            scope: SCOPE,
            name: "app-1",
            template: EMPTY_TEMPLATE,
            parameters: "",
            provider_config: &provider_config,
            subject: "",
        })
        .await
        .expect("started");
    let object = f.create_template(template("app")).await;

    let executed = f
        .run_template_plan(&object, &deploy("app-1"))
        .await
        .expect("carried out");

    assert!(!object_moved(&executed) && !executed.mutation_failed);
    assert_eq!(f.deployment_puts("app-1"), 2, "the first, and ours refused");
    let after = f.template("app").await;
    assert_eq!(recorded_deployment(&after), Some(id));
    assert_eq!(after.status.expect("a status").failed_request, None);
}

#[tokio::test]
async fn a_radius_delete_is_recorded_by_the_plans_one_status_write() {
    let f = Fixture::start().await;
    let id = format!("{SCOPE}/providers/Applications.Core/containers/web");
    f.put_radius_resource(&id).await;
    let object = f.create_resource("web", &id, true).await;

    let executed = f
        .run_resource_plan(&object, &delete_in_radius())
        .await
        .expect("carried out");

    assert!(!object_moved(&executed) && !executed.mutation_failed);
    assert_eq!(f.radius.stats().deletes_for(&id), 1);
    let writes = writes_since(&f.resources(), "web", &object.resource_version().unwrap()).await;
    assert_eq!(writes.len(), 1, "one status write: {writes:#?}");
    let status = writes[0].status.as_ref().expect("a status");
    let operation = status.operation.as_ref().expect("the DELETE recorded");
    assert_eq!(operation.operation_kind, "DELETE");
    let token = ResumeToken::decode(&operation.resume_token).expect("a resume token");
    assert_eq!(token.resource_id, id);
    assert_eq!(status.phrase.as_deref(), Some("Deleting"));
    assert_eq!(status.policy.as_ref(), Some(&f.policy));
}

#[tokio::test]
async fn a_delete_radius_refuses_is_recorded_as_a_failed_request() {
    let f = Fixture::start().await;
    let id = format!("{SCOPE}/providers/Applications.Core/containers/web");
    f.put_radius_resource(&id).await;
    f.radius.faults().refuse_next_deletes(1);
    let object = f.create_resource("web", &id, true).await;

    let executed = f
        .run_resource_plan(&object, &delete_in_radius())
        .await
        .expect("carried out");

    assert!(executed.mutation_failed);
    assert_eq!(f.radius.stats().deletes_for(&id), 1);
    let status = f.resource("web").await.status.expect("a status");
    let failed = status.failed_request.expect("the refusal recorded");
    assert_eq!(
        (failed.operation_kind.as_str(), failed.target.as_str()),
        ("DELETE", id.as_str())
    );
    assert_eq!(failed.code, "Conflict");
    assert_eq!(status.operation, None);
}

#[tokio::test]
async fn a_deployment_radius_refuses_is_recorded_as_a_failed_request() {
    let f = Fixture::start().await;
    let start = start_in(MISSING_SCOPE, "app-1");
    let id = deployment_id(&start);
    let object = f.create_template(template_into("app", MISSING_SCOPE)).await;

    let executed = f
        .run_template_plan(&object, &deploy_into(MISSING_SCOPE, "app-1"))
        .await
        .expect("carried out");

    assert!(executed.mutation_failed);
    assert_eq!(f.deployment_puts("app-1"), 1);
    let after = f.template("app").await;
    let status = after.status.expect("a status");
    let failed = status.failed_request.expect("the refusal recorded");
    assert_eq!(
        (failed.operation_kind.as_str(), failed.target.as_str()),
        ("PUT", id.as_str())
    );
    assert_eq!(failed.code, "ResourceGroupNotFound");
    assert_eq!(
        failed.subject,
        observe::spec_hash(&observe::spec_texts(&object))
    );
    // The operation recorded ahead is cleared (none began); the record of
    // the deployment stays, to be deleted.
    assert_eq!(status.operation, None);
    assert_eq!(status.deployments, [id]);
}

#[tokio::test]
async fn finalizers_are_written_only_on_the_version_decided_on() {
    let f = Fixture::start().await;
    let id = format!("{SCOPE}/providers/Applications.Core/containers/web");

    // Added to the object as read: written, at the version the server gives.
    let current = f.create_resource("current", &id, false).await;
    let written = set_finalizer(&f.ctx, &current, RESOURCE_FINALIZER, true, None)
        .await
        .expect("written");
    let now = f.resource("current").await;
    assert_eq!(written, Finalizer::Written(now.resource_version()));
    assert_eq!(now.finalizers(), [RESOURCE_FINALIZER]);

    // Added to an object that moved on since it was read: not written.
    let stale = f.create_resource("stale", &id, false).await;
    change_behind_our_back(&f.resources(), "stale").await;
    let moved = set_finalizer(&f.ctx, &stale, RESOURCE_FINALIZER, true, None)
        .await
        .expect("answered");
    assert_eq!(moved, Finalizer::ObjectMoved);
    assert!(f.resource("stale").await.finalizers().is_empty());

    // Removed from an object that is gone already: as asked.
    let gone = f.create_resource("gone", &id, true).await;
    f.resources()
        .delete("gone", &DeleteParams::default())
        .await
        .expect("deletion requested");
    let unblock = json!({"metadata": {"finalizers": null}});
    f.resources()
        .patch("gone", &PatchParams::default(), &Patch::Merge(&unblock))
        .await
        .expect("released by someone else");
    let removed = set_finalizer(&f.ctx, &gone, RESOURCE_FINALIZER, false, None)
        .await
        .expect("answered");
    assert_eq!(removed, Finalizer::AsAsked);
}

#[tokio::test]
async fn a_plan_adding_the_finalizer_to_a_moved_template_stops_there() {
    let f = Fixture::start().await;
    let mut object = template("app");
    object.metadata.finalizers = None;
    let object = f.create_template(object).await;
    let moved_to = change_behind_our_back(&f.templates(), "app").await;
    let mut actions = vec![TemplateAction::AddFinalizer];
    actions.extend(deploy("app-1"));

    let executed = f
        .run_template_plan(&object, &actions)
        .await
        .expect("carried out");

    assert!(object_moved(&executed), "{executed:?}");
    let now = f.template("app").await;
    assert_eq!(now.resource_version(), Some(moved_to));
    assert!(now.finalizers().is_empty());
    assert_eq!(f.radius.stats().requests, 0, "nothing reached Radius");
}

#[tokio::test]
async fn a_plans_events_are_recorded_about_its_object() {
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    let f = Fixture::start().await;
    let id = format!("{SCOPE}/providers/Applications.Core/containers/web");
    // One name the recorder can name an event after, and one too long for
    // it (events are then created under a shortened name).
    let long = format!("web-{}", "x".repeat(240));
    for name in ["web", long.as_str()] {
        let object = f.create_resource(name, &id, true).await;
        let event = ResourceAction::EmitEvent(model::Event {
            event_type: model::EventType::Warning,
            reason: "Testing".to_string(),
            message: format!("about {name}"),
        });
        f.run_resource_plan(&object, &[event])
            .await
            .expect("carried out");
    }

    let events: Api<K8sEvent> = Api::namespaced(f.ctx.client.clone(), NAMESPACE);
    let listed = events.list(&Default::default()).await.expect("events");
    for name in ["web", long.as_str()] {
        let about: Vec<_> = listed
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .collect();
        assert_eq!(about.len(), 1, "{name}: {listed:#?}");
        assert_eq!(about[0].reason.as_deref(), Some("Testing"));
        assert_eq!(about[0].type_.as_deref(), Some("Warning"));
        assert_eq!(
            about[0].note.as_deref(),
            Some(format!("about {name}").as_str())
        );
    }
}
