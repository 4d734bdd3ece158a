//! The watches of both kinds, wired to the runner: what each watch event
//! does to the caches and the indexes, and which events start a reconcile.
//! An object's own status writes do not wake it (only what a user or
//! another object changes does), so the policy's requested delay is what
//! paces it.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::reflector;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::crd::{DeploymentResource, DeploymentTemplate};
use crate::metrics::Readiness;
use crate::runner::{self, objects};

use super::memory::ObjectMemory;
use super::{Caches, Context, Options, driver, object};

fn api<K>(client: &Client, namespace: &Option<String>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

/// Whether the deletion of an object was requested (hashed for a predicate).
fn deletion<K: Resource>(object: &K) -> Option<u64> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.meta().deletion_timestamp.is_some().hash(&mut hasher);
    Some(hasher.finish())
}

/// What wakes an object of its own kind: anything but a status write.
/// Generation (spec), labels, annotations, finalizers and the deletion
/// request; the controller's own status writes move none of these, so they
/// never start a reconcile ahead of the delay the policy asked for.
fn user_changes<K: Resource + 'static>() -> impl Predicate<K> + Send + 'static {
    (predicates::generation::<K>)
        .combine(predicates::labels::<K>)
        .combine(predicates::annotations::<K>)
        .combine(predicates::finalizers::<K>)
        .combine(deletion::<K>)
}

/// The controller's own metadata writes (the finalizer a plan adds) pass
/// the predicate as a user's change would. The plan that made such a write
/// decided with it in mind and asked when to look again, so the watch event
/// showing the version it left starts no reconcile; what a user changes
/// after it is a newer version, and does. A version that a write left on
/// top of a user's change its decision did not see is not the
/// controller's own (`unseen.rs`): after a re-list it may be the only
/// event that shows that change.
fn written_by_controller<K: object::Reconciled>(memory: &ObjectMemory, object: &K) -> bool {
    memory.versions.written_by_controller(
        &object::key(object),
        object.meta().resource_version.as_deref(),
    )
}

/// The objects a watch brings that start a reconcile: those applied, each
/// once the cache holds it ([`applied_when_cached`]), that a user (or
/// another object's plan) changed ([`user_changes`]), less the versions
/// only the controller's own writes made (`own`).
fn wake_ups<K>(
    events: impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    cache: reflector::Store<K>,
    own: impl Fn(&K) -> bool + Send + 'static,
) -> impl futures::Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    events
        .flat_map(applied_when_cached(cache))
        .predicate_filter(user_changes(), Default::default())
        .try_filter(move |object| std::future::ready(!own(object)))
}

/// What is remembered of an object (error backoff, pacing, its last status
/// write) goes as soon as its watch says it was deleted, rather than when it
/// idles out. (An object deleted while the watch was re-listing is not
/// announced; the idle time-out and the cap in `memory` cover it.)
fn forget_deleted<K: object::Reconciled>(
    ctx: Arc<Context>,
) -> impl Fn(&watcher::Event<K>) + Send + 'static {
    move |event| {
        if let watcher::Event::Delete(object) = event {
            ctx.memory.forget(&object::key(object));
            ctx.metrics.set_remembered_objects(ctx.memory.len());
        }
    }
}

/// A `DeploymentResource` the watch shows (created, changed or deleted)
/// satisfies its owner template's expectation of it
/// ([`ObjectMemory::expect_created`]), and wakes the templates it names as
/// owners: any change to it (its status included) or its deletion may
/// change what they decide. Except the creation a template's own plan made:
/// that plan created it knowingly, so its watch event (the one that meets
/// the expectation) wakes no one, just as the controller's own writes to
/// the template do not; the resource's first status write does.
fn resource_seen(
    ctx: Arc<Context>,
    owners: tokio::sync::mpsc::UnboundedSender<ObjectRef<DeploymentTemplate>>,
) -> impl Fn(&watcher::Event<DeploymentResource>) + Send + 'static {
    move |event| {
        let (resource, created) = match event {
            watcher::Event::Apply(r) | watcher::Event::InitApply(r) => (r, true),
            watcher::Event::Delete(r) => (r, false),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        let namespace = resource.namespace().unwrap_or_default();
        for owner in resource.owner_references() {
            if owner.kind != DeploymentTemplate::kind(&()) {
                continue;
            }
            let expected = owner.controller == Some(true) && {
                let key = format!(
                    "{}:{namespace}/{}",
                    <DeploymentTemplate as object::Reconciled>::KIND,
                    owner.name
                );
                ctx.memory
                    .expectations
                    .created_seen(&key, &resource.name_any())
            };
            if !(expected && created) {
                let _ = owners.send(ObjectRef::new(&owner.name).within(&namespace));
            }
        }
    }
}

/// Readiness follows the watches: once both kinds' first lists have
/// reached their caches and indexes (whichever ends last marks it), the
/// process is ready. Later re-lists change nothing: a cache that was
/// synced once is served while its watch recovers.
fn ready_when_listed<K>(
    ctx: Arc<Context>,
    readiness: Readiness,
) -> impl Fn(&watcher::Event<K>) + Send + 'static {
    move |event| {
        if matches!(event, watcher::Event::InitDone)
            && ctx.owners.is_listed()
            && ctx.dependents.is_listed()
            && readiness.set_ready()
        {
            tracing::info!("caches synced");
        }
    }
}

/// When this process may reconcile: at once ([`Leading::now`]), or once it
/// leads ([`Leading::later`]). The watches and caches run either way.
#[derive(Clone)]
pub struct Leading(tokio::sync::watch::Receiver<bool>);

impl Leading {
    /// Reconcile from the start (no leader election).
    pub fn now() -> Self {
        Self(tokio::sync::watch::channel(true).1)
    }

    /// Reconcile once `true` is sent (this process leads); never if the
    /// sender goes without sending it.
    pub fn later() -> (tokio::sync::watch::Sender<bool>, Self) {
        let (sender, receiver) = tokio::sync::watch::channel(false);
        (sender, Self(receiver))
    }

    /// Done once reconciling may start.
    pub async fn wait(mut self) {
        if self.0.wait_for(|leading| *leading).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Run both controllers until `shutdown` is cancelled; in-flight reconciles
/// finish first. The watches start at once and `readiness` turns ready once
/// both caches have synced; reconciles start once `leading` says so (a
/// standby's caches are warm when it takes over).
pub async fn run_controllers(
    ctx: Arc<Context>,
    options: Options,
    shutdown: CancellationToken,
    readiness: Readiness,
    leading: Leading,
) {
    let templates: Api<DeploymentTemplate> = api(&ctx.client, &options.namespace);
    let resources: Api<DeploymentResource> = api(&ctx.client, &options.namespace);
    // Every watch sees one shard only: its templates, and the resources
    // they created (created with the template's labels).
    let watched = match &options.label_selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    };

    // Each kind is watched once. The template controller is also woken by
    // its resources' changes (status included) and by the changes of the
    // templates it depends on: those wake-ups are taken from the same two
    // watches, not from watches of their own (which would decode every
    // event a second time).
    let (owners_tx, owners_rx) = tokio::sync::mpsc::unbounded_channel();
    let (dependents_tx, dependents_rx) = tokio::sync::mpsc::unbounded_channel();
    // Children a waiting template wakes (`nudge.rs`).
    let (children_tx, children_rx) = tokio::sync::mpsc::unbounded_channel();
    ctx.set_resource_wakes(children_tx);

    let (template_store, template_trigger) =
        watch_templates(&ctx, templates, watched.clone(), &readiness, dependents_tx);
    let (resource_store, resource_trigger) =
        watch_resources(&ctx, resources, watched, &readiness, owners_tx);

    let _ = ctx.caches.set(Caches {
        templates: template_store.clone(),
        resources: resource_store.clone(),
    });

    // A namespace's labels or annotations changed: the objects in it (the
    // resources through their wake-ups, the templates from this stream).
    let namespace_changes =
        super::namespaces::watch(ctx.clone(), template_store.clone(), resource_store.clone());

    // A policy swapped in, added, removed or re-selected: the objects whose
    // deciding policy moved are reconciled again.
    let templates_moved = policy_moves(ctx.clone(), template_store.clone());
    let resources_moved = policy_moves(ctx.clone(), resource_store.clone());

    let template_controller = reconciles(
        [
            objects(template_trigger, "template watch").boxed(),
            received(owners_rx).boxed(),
            received(dependents_rx).boxed(),
            templates_moved.boxed(),
            namespace_changes.boxed(),
        ],
        template_store,
        &options,
        &shutdown,
        &leading,
        &ctx,
    );
    let resource_controller = reconciles(
        [
            objects(resource_trigger, "resource watch").boxed(),
            received(children_rx).boxed(),
            resources_moved.boxed(),
        ],
        resource_store,
        &options,
        &shutdown,
        &leading,
        &ctx,
    );

    tokio::join!(template_controller, resource_controller);
}

/// The templates' watch, into their cache (given back) and the index of
/// dependents. Gives back too the templates it wakes; and a template that
/// others depend on wakes them (`dependents`) when it changes (its status
/// included: that is what they wait for), or goes.
fn watch_templates(
    ctx: &Arc<Context>,
    templates: Api<DeploymentTemplate>,
    watched: watcher::Config,
    readiness: &Readiness,
    dependents: UnboundedSender<ObjectRef<DeploymentTemplate>>,
) -> (
    reflector::Store<DeploymentTemplate>,
    impl futures::Stream<Item = Result<DeploymentTemplate, watcher::Error>> + Send + 'static,
) {
    let (template_store, template_writer) = reflector::store();
    let template_trigger = watcher(templates, watched)
        .default_backoff()
        .modify(super::cached::slim)
        .inspect_ok(forget_deleted::<DeploymentTemplate>(ctx.clone()))
        .reflect(template_writer)
        .inspect_ok({
            let ctx = ctx.clone();
            move |event| ctx.dependents.observe(event)
        })
        .inspect_ok(ready_when_listed(ctx.clone(), readiness.clone()))
        .inspect_ok({
            let ctx = ctx.clone();
            move |event| {
                if let Some(changed) = touched(event) {
                    let key = format!(
                        "{}/{}",
                        changed.namespace().unwrap_or_default(),
                        changed.name_any()
                    );
                    for dependent in ctx.dependents.get(&key) {
                        let _ = dependents.send(dependent);
                    }
                }
            }
        });
    let template_trigger = wake_ups(template_trigger, template_store.clone(), {
        let ctx = ctx.clone();
        move |object| written_by_controller(&ctx.memory, object)
    });
    (template_store, template_trigger)
}

/// The resources' watch, into their cache (given back) and the index of
/// owners. Gives back too the resources it wakes; and a resource wakes its
/// owner templates (`owners`, see [`resource_seen`]).
fn watch_resources(
    ctx: &Arc<Context>,
    resources: Api<DeploymentResource>,
    watched: watcher::Config,
    readiness: &Readiness,
    owners: UnboundedSender<ObjectRef<DeploymentTemplate>>,
) -> (
    reflector::Store<DeploymentResource>,
    impl futures::Stream<Item = Result<DeploymentResource, watcher::Error>> + Send + 'static,
) {
    let (resource_store, resource_writer) = reflector::store();
    let resource_trigger = watcher(resources, watched)
        .default_backoff()
        .modify(super::cached::slim)
        .inspect_ok(forget_deleted::<DeploymentResource>(ctx.clone()))
        .reflect(resource_writer)
        // After the cache, so a child the index names is in the cache; and
        // an expectation is met only once both show the child.
        .inspect_ok({
            let ctx = ctx.clone();
            move |event| ctx.owners.observe(event)
        })
        .inspect_ok(ready_when_listed(ctx.clone(), readiness.clone()))
        .inspect_ok(resource_seen(ctx.clone(), owners));
    let resource_trigger = wake_ups(resource_trigger, resource_store.clone(), {
        let ctx = ctx.clone();
        move |object| written_by_controller(&ctx.memory, object)
    });
    (resource_store, resource_trigger)
}

/// One kind's reconciles: woken by any of `triggers`, run by `crate::runner`
/// through the shared reconcile path.
fn reconciles<K: object::Reconciled>(
    triggers: impl IntoIterator<Item = futures::stream::BoxStream<'static, ObjectRef<K>>>,
    store: reflector::Store<K>,
    options: &Options,
    shutdown: &CancellationToken,
    leading: &Leading,
    ctx: &Arc<Context>,
) -> impl std::future::Future<Output = ()> {
    let ctx = ctx.clone();
    runner::run_queue(
        futures::stream::select_all(triggers),
        store,
        options.concurrency,
        shutdown.clone(),
        leading.clone().wait(),
        move |object, waited| driver::reconcile(object, waited, ctx.clone()),
    )
}

/// The objects a watch applied, as `applied_objects` gives them, but each
/// only once the cache holds that version. The objects of a list (at the
/// start, or again after the watch was lost, a `410 Gone` say) reach the
/// cache all at once, when the list ends; passed on as they came, a re-listed
/// object could be reconciled on the version the cache held before, and its
/// wake-up spent on it: a template deleted while the watch was down waited
/// for the next resync. So a list's objects are passed on when it ends, read
/// back from the cache one at a time (only their names are kept meanwhile).
fn applied_when_cached<K>(
    cache: reflector::Store<K>,
) -> impl FnMut(
    Result<watcher::Event<K>, watcher::Error>,
) -> futures::stream::BoxStream<'static, Result<K, watcher::Error>>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let mut listed: Vec<ObjectRef<K>> = Vec::new();
    move |event| match event {
        Ok(watcher::Event::Apply(object)) => futures::stream::iter([Ok(object)]).boxed(),
        Ok(watcher::Event::Init) => {
            listed.clear();
            futures::stream::empty().boxed()
        }
        Ok(watcher::Event::InitApply(object)) => {
            listed.push(ObjectRef::from_obj(&object));
            futures::stream::empty().boxed()
        }
        Ok(watcher::Event::InitDone) => {
            let cache = cache.clone();
            futures::stream::iter(std::mem::take(&mut listed))
                .filter_map(move |name| {
                    futures::future::ready(cache.get(&name).map(|object| Ok(K::clone(&object))))
                })
                .boxed()
        }
        Ok(watcher::Event::Delete(_)) => futures::stream::empty().boxed(),
        Err(error) => futures::stream::iter([Err(error)]).boxed(),
    }
}

/// What a channel receives, as a stream (until every sender is gone).
fn received<T: Send + 'static>(
    receiver: tokio::sync::mpsc::UnboundedReceiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|item| (item, receiver))
    })
}

/// The object a watch event is about: one applied or deleted, or none (the
/// markers of a re-list).
fn touched<K>(event: &watcher::Event<K>) -> Option<&K> {
    match event {
        watcher::Event::Apply(object)
        | watcher::Event::InitApply(object)
        | watcher::Event::Delete(object) => Some(object),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

/// Each time selection may answer differently (`PolicyRegistry::subscribe`),
/// the objects of one kind whose deciding policy moved.
fn policy_moves<K: object::Reconciled>(
    ctx: Arc<Context>,
    store: reflector::Store<K>,
) -> impl futures::Stream<Item = ObjectRef<K>> + Send + 'static {
    let changes = ctx.policies.subscribe();
    futures::stream::unfold(changes, |mut changes| async move {
        changes.changed().await.ok()?;
        Some(((), changes))
    })
    .flat_map(move |()| {
        let moved: Vec<ObjectRef<K>> = match ctx.synced_caches() {
            Ok(Some(caches)) => store
                .state()
                .iter()
                .filter(|object| driver::policy_moved(&***object, &ctx, caches))
                .map(|object| ObjectRef::from_obj(&**object))
                .collect(),
            _ => Vec::new(),
        };
        if !moved.is_empty() {
            tracing::info!(
                kind = K::KIND,
                objects = moved.len(),
                "policy selection changed; reconciling again"
            );
        }
        futures::stream::iter(moved)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use futures::executor::block_on;

    fn template(name: &str, version: &str) -> DeploymentTemplate {
        let mut template = DeploymentTemplate::new(name, Default::default());
        template.metadata.namespace = Some("default".into());
        template.metadata.resource_version = Some(version.into());
        template
    }

    /// Feed one event through the cache, then through `applied_when_cached`,
    /// in the order the watch pipeline does; the versions passed on.
    fn versions(
        writer: &mut reflector::store::Writer<DeploymentTemplate>,
        applied: &mut impl FnMut(
            Result<watcher::Event<DeploymentTemplate>, watcher::Error>,
        ) -> futures::stream::BoxStream<
            'static,
            Result<DeploymentTemplate, watcher::Error>,
        >,
        event: watcher::Event<DeploymentTemplate>,
    ) -> Vec<String> {
        writer.apply_watcher_event(&event);
        block_on(applied(Ok(event)).collect::<Vec<_>>())
            .into_iter()
            .map(|object| object.unwrap().metadata.resource_version.unwrap())
            .collect()
    }

    #[test]
    fn a_relisted_object_is_passed_on_once_the_cache_holds_it() {
        let (store, mut writer) = reflector::store();
        let mut applied = applied_when_cached(store.clone());
        let mut feed = |event| versions(&mut writer, &mut applied, event);
        assert!(feed(watcher::Event::Init).is_empty());
        assert!(feed(watcher::Event::InitApply(template("a", "1"))).is_empty());
        assert_eq!(feed(watcher::Event::InitDone), ["1"]);
        assert_eq!(feed(watcher::Event::Apply(template("a", "2"))), ["2"]);
        // The watch was lost and the template deleted meanwhile: the
        // re-list's version reaches the cache only when the list ends, and
        // is passed on then, not before with the cache still at "2".
        assert!(feed(watcher::Event::Init).is_empty());
        assert!(feed(watcher::Event::InitApply(template("a", "3"))).is_empty());
        assert!(feed(watcher::Event::InitApply(template("b", "4"))).is_empty());
        assert_eq!(
            store
                .get(&ObjectRef::new("a").within("default"))
                .and_then(|a| a.metadata.resource_version.clone()),
            Some("2".to_string())
        );
        assert_eq!(feed(watcher::Event::InitDone), ["3", "4"]);
        assert!(feed(watcher::Event::Delete(template("b", "5"))).is_empty());
    }

    fn child(version: &str, finalizer: bool, deleting: bool) -> DeploymentResource {
        let mut child = DeploymentResource::new(
            "child",
            crate::crd::DeploymentResourceSpec {
                id: "/planes/radius/local/resourceGroups/g/providers/A.B/c/child".into(),
                provider_config: None,
            },
        );
        child.metadata.namespace = Some("default".into());
        child.metadata.resource_version = Some(version.into());
        if finalizer {
            child.metadata.finalizers = Some(vec![radwasm_policy_model::RESOURCE_FINALIZER.into()]);
        }
        if deleting {
            child.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
        }
        child
    }

    #[test]
    fn a_deletion_a_status_write_landed_on_wakes_the_object_after_a_relist() {
        let memory = Arc::new(ObjectMemory::default());
        let (store, writer) = reflector::store();
        let (events, incoming) = futures::channel::mpsc::unbounded();
        let own = {
            let memory = memory.clone();
            move |object: &DeploymentResource| written_by_controller(&memory, object)
        };
        let mut woken = Box::pin(wake_ups(incoming.map(Ok).reflect(writer), store, own));
        let mut feed = |event: watcher::Event<DeploymentResource>| {
            events.unbounded_send(event).expect("send");
            std::iter::from_fn(|| woken.next().now_or_never().flatten())
                .map(|object| object.unwrap().metadata.resource_version.unwrap())
                .collect::<Vec<_>>()
        };
        let key = object::key(&child("1", false, false));
        assert!(feed(watcher::Event::Init).is_empty());
        assert!(feed(watcher::Event::InitApply(child("1", false, false))).is_empty());
        assert_eq!(feed(watcher::Event::InitDone), ["1"]);
        // Its reconcile adds the finalizer (decided on 1, with 1 as the
        // precondition): the controller's own write wakes no one.
        let (decided, written) = (child("1", false, false), child("2", true, false));
        super::super::writes::remember(
            &memory,
            &key,
            &decided.metadata,
            Some("1"),
            &written.metadata,
        );
        assert!(feed(watcher::Event::Apply(written)).is_empty());
        // The next reconcile, decided on 2, writes status; a user deleted
        // the child meanwhile (3), and the write, without a precondition,
        // lands on that: 4, deleting.
        let (decided, written) = (child("2", true, false), child("4", true, true));
        super::super::writes::remember(
            &memory,
            &key,
            &decided.metadata,
            Some("2"),
            &written.metadata,
        );
        // The watch was lost before it showed 3; the re-list shows only 4.
        assert!(feed(watcher::Event::Init).is_empty());
        assert!(feed(watcher::Event::InitApply(written)).is_empty());
        assert_eq!(
            feed(watcher::Event::InitDone),
            ["4"],
            "the deletion no decision has seen must reach a reconcile"
        );
    }
}
