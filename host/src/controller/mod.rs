//! The two controllers and what they share. Every reconcile of either kind
//! takes the one path in [`driver`]: observe (read the object, what it owns,
//! poll its recorded Radius operation once), ask the loaded policy guest for a
//! plan, check the plan against the guard rails, carry it out, requeue as the
//! plan says. This module holds what every stage shares (the [`Context`], the
//! [`Error`], the [`Options`]); [`watches`] wires the watches to the runner.

pub mod cached;
pub mod deployment_records;
pub mod drift;
pub mod driver;
pub mod events;
pub mod execute;
pub mod guard;
pub mod index;
pub mod memory;
pub mod namespaces;
pub mod nudge;
pub mod object;
pub mod observe;
pub mod ownership;
pub mod produced;
pub mod radius_hash;
mod resource;
pub mod schema_check;
pub mod status;
mod template;
pub mod unseen;
pub mod watches;
pub mod worker_fuel;
pub mod writes;

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::events::Reporter;
use kube::runtime::reflector;

use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::ObjectRef;

use crate::crd::{DeploymentResource, DeploymentTemplate};
use crate::kube_client::describe_kube_error;
use crate::metrics::Metrics;
use crate::radius::RadiusClient;
use crate::reconcile_policy::PolicyRegistry;
use memory::ObjectMemory;

pub use watches::{Leading, run_controllers};

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
    /// Every namespace's metadata (labels for `namespaceSelector`, labels
    /// and annotations for observations), once watched (`namespaces`).
    namespaces: std::sync::OnceLock<reflector::Store<PartialObjectMeta<Namespace>>>,
    pub metrics: Arc<Metrics>,
    /// Events.
    pub recorders: crate::kube_client::events::EventRecorders,
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
    /// Wakes a `DeploymentResource`'s reconcile (`nudge.rs`), set when the
    /// controllers start.
    resource_wakes:
        std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<ObjectRef<DeploymentResource>>>,
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
            recorders: crate::kube_client::events::EventRecorders::new(&client, &reporter),
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
            resource_wakes: std::sync::OnceLock::new(),
        }
    }

    /// Check each `DeploymentResource`'s Radius resource this often
    /// (`drift.rs`); zero turns the checks off.
    pub fn with_drift_resync(mut self, every: Duration) -> Self {
        self.drift_resync = (!every.is_zero()).then_some(every);
        self
    }

    /// Use this store of namespaces for `namespaceSelector`s and
    /// observations; the first one set stays.
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

    /// The labels and annotations of a namespace a policy is shown: empty
    /// for no namespace, one not cached, or before the watch is set.
    pub fn namespace_meta(&self, namespace: &str) -> radwasm_policy_model::NamespaceMeta {
        namespaces::meta(self.namespaces.get(), namespace)
    }

    /// Send `DeploymentResource` wake-ups here (the resource controller's
    /// queue); set once, when the controllers start.
    pub fn set_resource_wakes(
        &self,
        sender: tokio::sync::mpsc::UnboundedSender<ObjectRef<DeploymentResource>>,
    ) {
        let _ = self.resource_wakes.set(sender);
    }

    /// Wake a `DeploymentResource`'s reconcile; nothing before the
    /// controllers run.
    pub fn wake_resource(&self, resource: ObjectRef<DeploymentResource>) {
        if let Some(wakes) = self.resource_wakes.get() {
            let _ = wakes.send(resource);
        }
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
