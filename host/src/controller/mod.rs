//! The two controllers and what they share. Every reconcile of either kind
//! takes the one path in [`driver`]: observe (read the object, what it owns,
//! poll its recorded Radius operation once), ask the loaded policy guest for a
//! plan, check the plan against the guard rails, carry it out, requeue as the
//! plan says. This module wires the watches: an object's own status writes do
//! not wake it (only what a user or another object changes does), so the
//! policy's requested delay is what paces it.

pub mod deployment_records;
pub mod drift;
pub mod driver;
pub mod events;
pub mod execute;
pub mod guard;
pub mod index;
pub mod memory;
pub mod object;
pub mod observe;
pub mod ownership;
pub mod radius_hash;
mod resource;
pub mod schema_check;
pub mod status;
mod template;
pub mod worker_fuel;
pub mod writes;

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::events::Reporter;
use kube::runtime::reflector;
use kube::runtime::{Predicate, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio_util::sync::CancellationToken;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;

use crate::crd::{DeploymentResource, DeploymentTemplate};
use crate::metrics::{Metrics, Readiness};
use crate::radius::RadiusClient;
use crate::reconcile_policy::PolicyRegistry;
use crate::runner::{self, objects};
use memory::ObjectMemory;

/// Label on every `DeploymentResource`: the uid of its owner template, so a
/// template lists what it owns with one selector.
pub const OWNER_UID_LABEL: &str = "radapp.io/template-uid";
/// Label on every `DeploymentResource`: the name of its owner template.
pub const OWNER_NAME_LABEL: &str = "radapp.io/template";
/// Requeue after this when the plan names no time: a periodic drift check.
pub const RESYNC: Duration = Duration::from_secs(300);
/// Requeue after this when a plan was rejected or a decision failed: the same
/// observation gives the same answer, so retrying sooner is pointless.
pub const REJECTED_RETRY: Duration = Duration::from_secs(60);

/// What every reconcile needs; nothing global.
pub struct Context {
    pub client: Client,
    pub radius: RadiusClient,
    /// The policy for each object: `ReconcilePolicy` objects and `--policy`.
    pub policies: Arc<PolicyRegistry>,
    /// Every namespace's labels (for `namespaceSelector`), once watched.
    namespaces: std::sync::OnceLock<reflector::Store<PartialObjectMeta<Namespace>>>,
    pub metrics: Arc<Metrics>,
    /// Events.
    pub recorders: events::EventRecorders,
    /// Decision records (`docs/decision-records.md`); off unless asked for.
    pub decision_records: crate::policy::records::Recorder,
    /// Bounded per-object memory: error backoff, pacing, our last writes.
    pub memory: ObjectMemory,
    /// The watch caches of both kinds, set when the controllers start.
    caches: std::sync::OnceLock<Caches>,
    /// Each template's `DeploymentResource`s, from the resources' watch.
    pub owners: index::Index<DeploymentResource>,
    /// The templates naming each template in `depends-on`, from the
    /// templates' watch.
    pub dependents: index::Index<DeploymentTemplate>,
    /// How often a `DeploymentResource` re-reads its Radius resource
    /// (`--drift-resync`); `None`: never.
    pub drift_resync: Option<Duration>,
    /// The `DeploymentResource`s already warned about as not their
    /// template's outputs (`ownership`).
    pub not_outputs_warned: ownership::WarnedOnce,
    /// The fuel each policy's decisions may use on an async worker,
    /// learned from what they used (`worker_fuel.rs`).
    pub worker_fuel: worker_fuel::WorkerFuel,
}

/// The reflector stores the controllers' watches keep.
#[derive(Clone)]
pub struct Caches {
    pub templates: reflector::Store<DeploymentTemplate>,
    pub resources: reflector::Store<DeploymentResource>,
}

impl Context {
    pub fn new(
        client: Client,
        radius: RadiusClient,
        policies: Arc<PolicyRegistry>,
        metrics: Arc<Metrics>,
        decision_records: crate::policy::records::Recorder,
    ) -> Self {
        let reporter = Reporter {
            controller: "radwasm".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorders: events::EventRecorders::new(&client, &reporter),
            client,
            radius,
            policies,
            namespaces: std::sync::OnceLock::new(),
            metrics,
            decision_records,
            memory: ObjectMemory::default(),
            caches: std::sync::OnceLock::new(),
            owners: index::owners(),
            dependents: index::dependents(),
            drift_resync: None,
            not_outputs_warned: ownership::WarnedOnce::default(),
            worker_fuel: worker_fuel::WorkerFuel::default(),
        }
    }

    /// Check each `DeploymentResource`'s Radius resource this often
    /// (`drift.rs`); zero turns the checks off.
    pub fn with_drift_resync(mut self, every: Duration) -> Self {
        self.drift_resync = (!every.is_zero()).then_some(every);
        self
    }

    /// Use this store of namespaces for `namespaceSelector`s.
    pub fn set_namespaces(&self, store: reflector::Store<PartialObjectMeta<Namespace>>) {
        let _ = self.namespaces.set(store);
    }

    /// The labels of a namespace: `None` while the namespaces are not
    /// listed yet (selection waits), `Some(None)` when they are not watched
    /// or the namespace is unknown.
    pub fn namespace_labels(
        &self,
        namespace: &str,
    ) -> Option<Option<std::collections::BTreeMap<String, String>>> {
        use futures::FutureExt;
        let Some(store) = self.namespaces.get() else {
            return Some(None);
        };
        if !matches!(store.wait_until_ready().now_or_never(), Some(Ok(()))) {
            return None;
        }
        Some(
            store
                .get(&ObjectRef::new(namespace))
                .map(|ns| ns.metadata.labels.clone().unwrap_or_default()),
        )
    }

    /// The watch caches; an error (retried) before the controllers run.
    pub fn caches(&self) -> Result<&Caches, Error> {
        self.caches.get().ok_or(Error::NotStarted)
    }

    /// The watch caches if both have been filled by their first list, else
    /// `None` (decide later; never wait here: the lists advance only while
    /// the controllers run). A decision on a cache that is still empty
    /// would see a template without its `DeploymentResource`s (and,
    /// deleting, let it go while they still hold Radius resources), as
    /// after every controller restart.
    ///
    /// Judged by the two indexes, which take in each watch's first list
    /// right after its cache does, rather than by polling the caches' own
    /// `wait_until_ready`: that future keeps the waker of its last poller
    /// only, so a poll from here (with a no-op waker) would take the wake-up
    /// from whoever else awaits the same cache.
    pub fn synced_caches(&self) -> Result<Option<&Caches>, Error> {
        let caches = self.caches()?;
        Ok((self.owners.is_listed() && self.dependents.is_listed()).then_some(caches))
    }
}

/// Why a reconcile could not finish; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {what}: {source}")]
    Kube {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("Radius: {0}")]
    Radius(#[from] crate::radius::RadiusError),
    #[error("the controllers' watch caches are not running yet")]
    NotStarted,
    /// Carrying out the plan would take over what another object owns.
    #[error("{0}")]
    Conflict(String),
}

impl Error {
    pub(crate) fn kube(what: &'static str) -> impl FnOnce(kube::Error) -> Error {
        move |source| Error::Kube { what, source }
    }

    /// Short name for metrics labels.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "KubeError",
            Error::Radius(error) => error.reason(),
            Error::NotStarted => "NotStarted",
            Error::Conflict(_) => "ResourceConflict",
        }
    }

    /// True if retrying the same thing may well work (a 5xx, a conflict,
    /// Radius unreachable): such failures are logged below `WARN`.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kube {
                source: kube::Error::Api(status),
                ..
            } => status.code >= 500 || status.code == 409 || status.code == 429,
            Error::Kube { .. } | Error::NotStarted => true,
            Error::Radius(error) => error.is_transient(),
            Error::Conflict(_) => false,
        }
    }

    /// One line for a log: the API server's message and causes, not a dump.
    pub fn display(&self) -> String {
        match self {
            Error::Kube { what, source } => format!("{what}: {}", describe_kube_error(source)),
            Error::Radius(error) => format!("Radius: {error}"),
            Error::NotStarted | Error::Conflict(_) => self.to_string(),
        }
    }
}

/// A Kubernetes client error as a person reads it: the API server's message
/// (and the field causes it lists, one per line), not a debug dump.
pub fn describe_kube_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => {
            let mut text = format!("{} ({})", status.message, status.code);
            if let Some(details) = &status.details {
                for cause in &details.causes {
                    text.push_str(&format!(
                        "\n  {}: {}",
                        if cause.field.is_empty() {
                            "-"
                        } else {
                            &cause.field
                        },
                        cause.message
                    ));
                }
            }
            text
        }
        other => other.to_string(),
    }
}

/// Which objects to watch and how many to reconcile at once.
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch one namespace only; all namespaces if `None`.
    pub namespace: Option<String>,
    /// Reconciles running at once per object kind (0 = unbounded), started
    /// in the order they came due (`crate::runner`).
    pub concurrency: u16,
    /// Watch only the templates (and the resources they created, which
    /// carry their labels) that this label selector matches: one shard.
    pub label_selector: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: None,
            concurrency: 16,
            label_selector: None,
        }
    }
}

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
/// after it is a newer version, and does.
fn not_written_by_controller<K: object::Reconciled>(
    ctx: Arc<Context>,
) -> impl FnMut(&K) -> std::future::Ready<bool> + Send + 'static {
    move |object| {
        let version = object.meta().resource_version.as_deref();
        std::future::ready(
            !ctx.memory
                .versions
                .written_by_controller(&object::key(object), version),
        )
    }
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
pub async fn run(
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

    let (template_store, template_writer) = reflector::store();
    let template_trigger = watcher(templates, watched.clone())
        .default_backoff()
        .modify(drop_managed_fields)
        .inspect_ok(forget_deleted::<DeploymentTemplate>(ctx.clone()))
        .reflect(template_writer)
        .inspect_ok({
            let ctx = ctx.clone();
            move |event| ctx.dependents.observe(event)
        })
        .inspect_ok(ready_when_listed(ctx.clone(), readiness.clone()))
        // A template that others depend on wakes them when it changes (its
        // status included: that is what they wait for), or goes.
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
                        let _ = dependents_tx.send(dependent);
                    }
                }
            }
        })
        .flat_map(applied_when_cached(template_store.clone()))
        .predicate_filter(user_changes(), Default::default())
        .try_filter(not_written_by_controller(ctx.clone()));
    let (resource_store, resource_writer) = reflector::store();
    let resource_trigger = watcher(resources, watched)
        .default_backoff()
        .modify(drop_managed_fields)
        .inspect_ok(forget_deleted::<DeploymentResource>(ctx.clone()))
        .reflect(resource_writer)
        // After the cache, so a child the index names is in the cache; and
        // an expectation is met only once both show the child.
        .inspect_ok({
            let ctx = ctx.clone();
            move |event| ctx.owners.observe(event)
        })
        .inspect_ok(ready_when_listed(ctx.clone(), readiness.clone()))
        .inspect_ok(resource_seen(ctx.clone(), owners_tx))
        .flat_map(applied_when_cached(resource_store.clone()))
        .predicate_filter(user_changes(), Default::default())
        .try_filter(not_written_by_controller(ctx.clone()));

    let _ = ctx.caches.set(Caches {
        templates: template_store.clone(),
        resources: resource_store.clone(),
    });

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
    runner::run(
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

/// The cached copies keep no `managedFields`: nothing here reads them
/// (every write is a merge patch), and at some hundreds of bytes an object
/// they are a large share of the cache.
fn drop_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
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
}
