//! The two controllers and what they share. One reconcile of one object is:
//! observe (read it, what it owns, poll its recorded Radius operation once),
//! ask the loaded policy guest for a plan, check the plan against the guard
//! rails, carry it out, requeue as the plan says.

pub mod execute;
pub mod guard;
pub mod observe;
mod resource;
mod template;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::crd::{DeploymentResource, DeploymentTemplate};
use crate::metrics::Metrics;
use crate::policy::{Decision, DecisionError, LoadedPolicy, PolicySlot};
use crate::radius::RadiusClient;

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
    pub policy: PolicySlot,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    pub fn new(
        client: Client,
        radius: RadiusClient,
        policy: PolicySlot,
        metrics: Arc<Metrics>,
    ) -> Self {
        let reporter = Reporter {
            controller: "radwasm".to_string(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            radius,
            policy,
            metrics,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn reset_failures(&self, key: &str) {
        if let Ok(mut failures) = self.failures.lock() {
            failures.remove(key);
        }
    }

    /// Backoff for an object's n-th consecutive error: 1 s doubling to 60 s.
    fn backoff(&self, key: &str) -> Duration {
        let Ok(mut failures) = self.failures.lock() else {
            return Duration::from_secs(5);
        };
        let count = failures.entry(key.to_string()).or_insert(0);
        *count = count.saturating_add(1);
        Duration::from_secs(1u64 << (*count - 1).min(6)).min(Duration::from_secs(60))
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
        }
    }
}

/// Which objects to watch and how many to reconcile at once.
#[derive(Debug, Clone)]
pub struct Options {
    /// Watch one namespace only; all namespaces if `None`.
    pub namespace: Option<String>,
    /// Reconciles running at once per controller (0 = unbounded).
    pub concurrency: u16,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            namespace: None,
            concurrency: 16,
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

/// Run both controllers until `shutdown` is cancelled; in-flight reconciles
/// finish first.
pub async fn run(ctx: Arc<Context>, options: Options, shutdown: CancellationToken) {
    let templates: Api<DeploymentTemplate> = api(&ctx.client, &options.namespace);
    let resources: Api<DeploymentResource> = api(&ctx.client, &options.namespace);
    let config = kube::runtime::controller::Config::default().concurrency(options.concurrency);

    let template_controller = Controller::new(templates.clone(), watcher::Config::default())
        .with_config(config.clone())
        .owns(resources.clone(), watcher::Config::default());
    // A template that others depend on wakes them when it changes.
    let store = template_controller.store();
    let template_controller = template_controller
        .watches(
            templates,
            watcher::Config::default(),
            move |changed: DeploymentTemplate| {
                let name = changed.name_any();
                let namespace = changed.namespace();
                store
                    .state()
                    .into_iter()
                    .filter(|t| {
                        t.namespace() == namespace
                            && radwasm_policy_core::annotations::depends_on(t.annotations())
                                .contains(&name)
                    })
                    .map(|t| ObjectRef::from_obj(&*t))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(template::reconcile, template::error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "template controller");
            }
        });

    let resource_controller = Controller::new(resources, watcher::Config::default())
        .with_config(config)
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(resource::reconcile, resource::error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "resource controller");
            }
        });

    tokio::join!(template_controller, resource_controller);
}

/// Ask the guest off the async workers, on tokio's blocking pool. A guest
/// may burn its whole fuel budget before it is stopped, which must not stall
/// the watches; and WASI's synchronous host calls (a trapping Rust guest
/// writes its panic message to stderr) block on the runtime, which tokio only
/// allows outside its worker threads. Gives back the observation for the
/// guard rails and how long the decision took; an error only if the decision
/// task itself panicked (a host bug), which fails this one object.
async fn decide<O, P>(
    policy: &LoadedPolicy,
    observation: O,
    ask: fn(&LoadedPolicy, &O) -> Result<Decision<P>, DecisionError>,
) -> Result<(Result<Decision<P>, DecisionError>, O, Duration), tokio::task::JoinError>
where
    O: Send + 'static,
    P: Send + 'static,
{
    let guest = policy.clone();
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let decision = ask(&guest, &observation);
        (decision, observation, started.elapsed())
    })
    .await
}

/// The requeue a plan asked for, or the periodic resync.
fn requeue(ms: Option<u32>) -> Action {
    match ms {
        Some(ms) => Action::requeue(Duration::from_millis(u64::from(ms))),
        None => Action::requeue(RESYNC),
    }
}
