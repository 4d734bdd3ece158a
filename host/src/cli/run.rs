//! `radwasm run`: the controller as it runs in a cluster (or against any
//! kubeconfig), with Radius through the API server's aggregated path or a
//! direct URL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokio_util::sync::CancellationToken;

use super::record_args::RecordArgs;
use crate::controller::{self, Context, Options};
use crate::leader::{LeaderElector, LeaseSettings, TermEnd};
use crate::metrics::{self, Metrics, Readiness};
use crate::policy::records::Recorder;
use crate::policy::{Limits, PolicyEngine, PolicySlot, embedded};
use crate::radius::{Endpoint, RadiusClient, RetryPolicy};
use crate::reconcile_policy::PolicyRegistry;
use crate::reconcile_policy::loader::{self, Loader};

/// Options shared by `run` and `dev`: the policy and how the controllers run.
#[derive(Debug, Clone, Args)]
pub struct ControllerArgs {
    /// Policy component (`.wasm`) to decide with, or `default` for the
    /// built-in one. A file is re-read when it changes; a broken (or, with
    /// `--policy-verify-keys`, unsigned) replacement is refused and the
    /// running policy kept.
    #[arg(long, default_value = "default")]
    pub policy: String,
    /// How often to check the policy file for changes.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub policy_reload_interval: Duration,
    /// Fuel one decision may use.
    #[arg(long, default_value_t = Limits::default().fuel)]
    pub fuel: u64,
    /// Linear-memory cap per guest instance, in MiB.
    #[arg(long, default_value_t = (Limits::default().memory_bytes >> 20) as u64)]
    pub memory_mib: u64,
    /// Watch only this namespace (all namespaces when absent).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Reconciles in flight at once, per object kind (0: no limit). Those
    /// that come due while every slot is busy start in the order they came
    /// due.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Requests a second to the Kubernetes API server, on average, as
    /// client-go's QPS (0, the default: no limit). A limit slows the
    /// controller to that pace, and with it what the API server holds for
    /// its writes (docs/benchmarks-apiserver.md).
    #[arg(long, default_value_t = 0.0, value_name = "QPS", value_parser = parse_qps)]
    pub kube_api_qps: f64,
    /// Requests sent at once before `--kube-api-qps` paces them (0, the
    /// default: the QPS rounded up).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub kube_api_burst: u32,
    /// Reconcile only the DeploymentTemplates whose labels match this
    /// Kubernetes label selector (`radapp.io/shard=a`), and the
    /// DeploymentResources they create, which carry their labels: one
    /// controller per shard, each with its own Lease (docs/scaling.md).
    #[arg(long, value_name = "SELECTOR")]
    pub watch_label_selector: Option<String>,
    /// Load only the `ReconcilePolicy` objects whose labels match this
    /// Kubernetes label selector (all when absent). Every controller that
    /// loads a policy writes its status, so controllers in one cluster that
    /// load policies differently (another version during a canary, other
    /// registries, `--require-signatures` on one only) each take their own
    /// (docs/reconcile-policies.md, "Several controllers").
    #[arg(long, value_name = "SELECTOR")]
    pub policy_label_selector: Option<String>,
    /// An OCI registry (`host:port`) that `ReconcilePolicy` modules are
    /// pulled from over plain HTTP instead of HTTPS (a registry on
    /// loopback, say); repeatable.
    #[arg(long, value_name = "HOST:PORT")]
    pub policy_insecure_registry: Vec<String>,
    #[command(flatten)]
    pub trust: super::trust_args::TrustArgs,
    /// How often a `ReconcilePolicy` that follows an OCI tag (with
    /// `spec.verify` and no digest) resolves the tag again; a new digest is
    /// verified before it replaces the running one.
    #[arg(long, default_value = "1m", value_parser = parse_duration)]
    pub policy_tag_interval: Duration,
    /// The namespace whose ConfigMaps hold `ReconcilePolicy` modules and
    /// fixture cases (default: $POD_NAMESPACE, the controller's own); the
    /// controller reads ConfigMaps there only.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub policy_namespace: String,
    /// How often each DeploymentResource re-reads its Radius resource to
    /// find drift (a resource deleted behind the controller's back); the
    /// checks of a fleet are spread over the interval. `0` turns them off.
    /// The default keeps a controller of 10,000 resources idle under 1 % of
    /// a core (docs/benchmarks-scale.md).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub drift_resync: Duration,
    #[command(flatten)]
    pub records: RecordArgs,
    #[command(flatten)]
    pub runtime: super::runtime_args::RuntimeArgs,
}

/// `radwasm run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// Kubeconfig to use; otherwise $KUBECONFIG, ~/.kube/config, or the
    /// in-cluster service account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Reach Radius at this base URL instead of the API server's aggregated
    /// path /apis/api.ucp.dev/v1alpha3 (where Radius installs UCP); empty
    /// means that default. An https URL's certificate must chain to a public
    /// root (the Mozilla roots built into the binary); no credentials are sent.
    #[arg(long, value_name = "URL")]
    pub radius_url: Option<String>,
    /// Serve /metrics, /healthz and /readyz here.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub metrics_address: SocketAddr,
    /// Reconcile only while holding a Lease, so several replicas can run:
    /// one leads, the others stand by (docs/crds.md).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: $POD_NAMESPACE, else `default`).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub leader_election_namespace: String,
    /// Name of the leader Lease.
    #[arg(long, default_value = "radwasm-controller")]
    pub leader_election_lease: String,
    /// How long a leader that stopped renewing keeps the Lease.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_election_lease_duration: Duration,
}

/// This process's identity for leader election: the pod name in a cluster.
fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("radwasm-{}", std::process::id()))
}

/// A duration on the command line: `500ms`, `2s`, `10m`, `1h 30m`, or `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|error| format!("{text:?} is not a duration like 500ms, 2s or 10m: {error}"))
}

/// A request rate on the command line: a finite number, 0 or more.
fn parse_qps(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        _ => Err(format!(
            "{text:?} is not a request rate: a number of requests a second, 0 or more (0: no limit)"
        )),
    }
}

/// Load kube config from a path, or infer it.
pub async fn kube_config(path: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))
        }
        None => kube::Config::infer()
            .await
            .context("finding Kubernetes credentials (kubeconfig or in-cluster)"),
    }
}

/// The metrics registry, with the decision recorder `args` ask for
/// registered in it (and its ring served on `/debug/decisions`).
pub fn metrics_and_records(args: &ControllerArgs) -> anyhow::Result<(Arc<Metrics>, Recorder)> {
    let records = Recorder::start(args.records.settings())?;
    let metrics = Arc::new(Metrics::default().with_decision_records(&records));
    Ok((metrics, records))
}

/// The controller host, its policy loaded and its clients built by
/// [`ControllerHost::new`]: [`ControllerHost::run_until_shutdown`] runs it until shutdown.
pub struct ControllerHost {
    pub policy: PolicySlot,
    engine: PolicyEngine,
    ctx: Arc<Context>,
    /// The client leader election renews its Lease with: not held to
    /// `--kube-api-qps`, so a renewal never waits behind the controller's
    /// own writes and the Lease is not lost to the limit.
    lease_client: kube::Client,
    options: Options,
    reload_interval: Duration,
    insecure_registries: Vec<String>,
    policy_namespace: String,
    require_signatures: bool,
    policy_tag_interval: Duration,
    policy_label_selector: Option<String>,
}

impl ControllerHost {
    /// Load the policy and build the clients; fails early on bad input.
    pub fn new(
        args: &ControllerArgs,
        config: kube::Config,
        radius: Endpoint,
        metrics: Arc<Metrics>,
        records: Recorder,
    ) -> anyhow::Result<Self> {
        let limits = Limits {
            fuel: args.fuel,
            memory_bytes: usize::try_from(args.memory_mib.saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            ..Limits::default()
        };
        let mut options = args.runtime.engine_options(metrics.policy_loads())?;
        // Native code read from disk is run unchecked: a file planted in the
        // cache directory would decide (and run outside the sandbox) under
        // a verified digest's name. When every module must be verified,
        // every module is compiled from its verified bytes instead.
        if args.trust.require_signatures
            && let Some(cache) = options.compile_cache.take()
        {
            tracing::info!(
                dir = %cache.dir.display(),
                "--require-signatures: the compile cache on disk is not used; every module is compiled from its verified bytes"
            );
        }
        let engine = crate::policy::engine_with_options(limits, options)?;
        let gate = args.trust.policy_gate(&args.policy, metrics.clone())?;
        let policy = PolicySlot::load_gated(engine.clone(), embedded::source(&args.policy), gate)
            .with_context(|| format!("loading policy {}", args.policy))?;
        tracing::info!(policy = %policy.current().display_name(), digest = %policy.current().digest(), "policy loaded");
        let throttle = crate::kube_client::Throttle::new(args.kube_api_qps, args.kube_api_burst);
        let lease_client =
            crate::kube_client::counted_client(config.clone(), metrics.clone(), None)
                .context("building the Kubernetes client")?;
        let client = crate::kube_client::counted_client(config, metrics.clone(), throttle)
            .context("building the Kubernetes client")?;
        let radius =
            RadiusClient::new(radius, RetryPolicy::default())?.with_metrics(metrics.clone());
        let policies = Arc::new(PolicyRegistry::new(policy.clone()));
        let ctx = Arc::new(
            Context::new(client, radius, policies, metrics, records)
                .with_drift_resync(args.drift_resync),
        );
        for warning in
            crate::policy::source::oci::insecure_registry_warnings(&args.policy_insecure_registry)
        {
            tracing::warn!("--policy-insecure-registry: {warning}");
        }
        Ok(Self {
            policy,
            engine,
            insecure_registries: args.policy_insecure_registry.clone(),
            policy_namespace: args.policy_namespace.clone(),
            require_signatures: args.trust.require_signatures,
            policy_tag_interval: args.policy_tag_interval,
            policy_label_selector: args.policy_label_selector.clone(),
            ctx,
            lease_client,
            options: Options {
                namespace: args.namespace.clone(),
                concurrency: args.concurrency,
                label_selector: args.watch_label_selector.clone(),
            },
            reload_interval: args.policy_reload_interval,
        })
    }

    /// The Kubernetes client the controllers use.
    pub fn client(&self) -> kube::Client {
        self.ctx.client.clone()
    }

    /// The Kubernetes client for the leader election Lease (never throttled).
    pub fn lease_client(&self) -> kube::Client {
        self.lease_client.clone()
    }

    /// Through the API server's aggregated path (no `--radius-url`), ask
    /// once, in the background, whether a Radius API answers there, and log
    /// the outcome: a cluster without Radius (or with it elsewhere) is named
    /// at startup rather than only in each template's status. Readiness does
    /// not depend on it (Radius may be installed after the controller, and
    /// every request reports its own failure). A direct `--radius-url` was
    /// chosen by hand and is not asked.
    pub fn check_radius(&self, shutdown: &CancellationToken) {
        let radius = self.ctx.radius.clone();
        if !radius.is_aggregated() {
            return;
        }
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let checked = tokio::select! {
                () = shutdown.cancelled() => return,
                checked = radius.check_reachable() => checked,
            };
            match checked {
                Ok(()) => tracing::info!(radius = radius.base(), "Radius answers"),
                Err(error) => tracing::warn!(
                    radius = radius.base(),
                    %error,
                    "Radius does not answer as expected; every deployment will fail until it does"
                ),
            }
        });
    }

    /// Fail with a clear message if `--watch-label-selector` or
    /// `--policy-label-selector` is not a label selector the API server
    /// understands (asked once, for one object), rather than let the
    /// watches retry it forever.
    pub async fn check_label_selectors(&self) -> anyhow::Result<()> {
        if let Some(selector) = &self.options.label_selector {
            let templates: kube::Api<crate::crd::DeploymentTemplate> = match &self.options.namespace
            {
                Some(namespace) => kube::Api::namespaced(self.ctx.client.clone(), namespace),
                None => kube::Api::all(self.ctx.client.clone()),
            };
            check_label_selector(&templates, "--watch-label-selector", selector).await?;
        }
        if let Some(selector) = &self.policy_label_selector {
            let policies: kube::Api<crate::reconcile_policy::crd::ReconcilePolicy> =
                kube::Api::all(self.ctx.client.clone());
            check_label_selector(&policies, "--policy-label-selector", selector).await?;
        }
        Ok(())
    }

    /// Run the controllers (and the policy file watch) until `shutdown`;
    /// `readiness` turns ready once their caches have synced. The watches
    /// start at once; everything that acts (the reconciles, the
    /// `ReconcilePolicy` loader, the policy file watch) waits for `leading`
    /// to answer true (with leader election: this process leads), and
    /// never starts if it answers false.
    pub async fn run_until_shutdown(
        self,
        shutdown: CancellationToken,
        readiness: Readiness,
        leading: impl std::future::Future<Output = bool>,
    ) {
        let records = self.ctx.decision_records.clone();
        // Leader or not: a CRD that would drop what the controller writes
        // makes the process unready.
        controller::schema_check::spawn(
            self.ctx.client.clone(),
            self.ctx.metrics.clone(),
            readiness.clone(),
            self.ctx.recorders.clone(),
            shutdown.clone(),
        );
        let (lead, gate) = controller::Leading::later();
        // On a worker of the runtime rather than on the thread that blocks
        // on it (`radwasm run`'s main thread): each reconcile the controllers
        // spawn then starts on the worker that spawned it, instead of waking
        // a worker from another thread. About a tenth less CPU when it was
        // measured (in the history of docs/benchmarks.md).
        let controllers = tokio::spawn(controller::run_controllers(
            self.ctx.clone(),
            self.options.clone(),
            shutdown.clone(),
            readiness,
            gate,
        ));
        let leads = tokio::select! {
            leads = leading => leads,
            () = shutdown.cancelled() => false,
        };
        if leads {
            tokio::spawn(
                self.policy
                    .clone()
                    .watch(self.reload_interval, shutdown.clone()),
            );
            // Before the first reconcile: selection needs the namespaces'
            // store and the policies' watch in place.
            self.start_reconcile_policies(&shutdown).await;
            let _ = lead.send(true);
        }
        if let Err(error) = controllers.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
        // What was recorded before the stop reaches its files.
        records.flush(Duration::from_secs(5));
    }

    /// Watch `ReconcilePolicy` objects, if the CRD is installed; without it
    /// every object is decided by `--policy`.
    async fn start_reconcile_policies(&self, shutdown: &CancellationToken) {
        let ctx = &self.ctx;
        match loader::crd_installed(&ctx.client).await {
            Ok(false) => {
                tracing::warn!(
                    "the ReconcilePolicy CRD (reconcilepolicies.radwasm.io) is not installed: every object is decided by --policy"
                );
                ctx.policies.set_listed();
                return;
            }
            Ok(true) => {}
            // Unreachable for now: the watches retry, and selection waits
            // until the policies are listed.
            Err(error) => {
                tracing::info!(%error, "could not ask whether the ReconcilePolicy CRD is installed; watching it anyway")
            }
        }
        // The namespaces' labels are watched by the controllers
        // (`controller::namespaces`), which poke selection when they change.
        match Loader::new(
            ctx.client.clone(),
            ctx.policies.clone(),
            self.engine.clone(),
            ctx.recorders.clone(),
            self.insecure_registries.clone(),
            self.policy_namespace.clone(),
        ) {
            Ok(loader) => {
                let loader = loader
                    .with_trust(
                        self.require_signatures,
                        self.policy_tag_interval,
                        ctx.metrics.clone(),
                    )
                    .with_label_selector(self.policy_label_selector.clone());
                tokio::spawn(loader::run_policy_loader(
                    Arc::new(loader),
                    shutdown.clone(),
                ));
            }
            Err(error) => tracing::error!(%error, "the ReconcilePolicy controller could not start"),
        }
    }
}

/// Ask the API server for one object of `api` with `selector`: a 400 means
/// it cannot parse it, and names `flag`. Anything else (no connection yet,
/// RBAC, the CRD not installed) is for the watches to report and retry.
async fn check_label_selector<K>(
    api: &kube::Api<K>,
    flag: &str,
    selector: &str,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api
        .list_metadata(&kube::api::ListParams::default().labels(selector).limit(1))
        .await
    {
        Err(kube::Error::Api(status)) if status.code == 400 => Err(anyhow::anyhow!(
            "{flag} {selector:?} is not a valid label selector: {}",
            status.message
        )),
        _ => Ok(()),
    }
}

/// Cancel `token` on SIGINT or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let terminate = async {
            #[cfg(unix)]
            if let Ok(mut signal) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                signal.recv().await;
                return;
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate => {}
        }
        tracing::info!("shutting down");
        token.cancel();
    });
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let config = kube_config(args.kubeconfig.as_ref()).await?;
        let endpoint = match args.radius_url.as_deref().filter(|url| !url.is_empty()) {
            Some(url) => Endpoint::direct(url)?,
            None => Endpoint::aggregated(&config)?,
        };
        tracing::info!(radius = %endpoint.base, cluster = %config.cluster_url, "starting");
        let (metrics, records) = metrics_and_records(&args.controller)?;
        let shutdown = CancellationToken::new();
        cancel_on_signals(shutdown.clone());
        // The probes answer before the policy compiles (which takes from a
        // few hundred milliseconds to seconds for an interpreted guest):
        // /healthz at once, /readyz 503 until the caches have synced.
        let readiness = Readiness::default();
        let bound = metrics::serve(
            args.metrics_address,
            metrics.clone(),
            readiness.clone(),
            shutdown.clone(),
        )
        .await
        .with_context(|| format!("serving metrics on {}", args.metrics_address))?;
        tracing::info!(%bound, "metrics and probes");
        let host = ControllerHost::new(&args.controller, config, endpoint, metrics, records)?;
        host.check_label_selectors().await?;
        host.check_radius(&shutdown);
        if !args.leader_elect {
            // Ready once the controllers' caches have synced.
            host.run_until_shutdown(shutdown, readiness, std::future::ready(true))
                .await;
            return anyhow::Ok(ExitCode::SUCCESS);
        }
        let settings = LeaseSettings {
            namespace: args.leader_election_namespace.clone(),
            name: args.leader_election_lease.clone(),
            identity: identity(),
            lease_duration: args.leader_election_lease_duration,
            renew_every: (args.leader_election_lease_duration / 3).max(Duration::from_millis(100)),
        };
        // A standby watches and caches as the leader does, and is ready
        // once its caches have synced, leader or not (docs/crds.md,
        // "Leader election"): it takes over with a warm cache, and a
        // rolling update is not held up by a replica that waits to lead.
        let mut elector = LeaderElector::new(host.lease_client(), settings);
        // Reconciling stops on shutdown or the moment leadership is lost.
        let stop = shutdown.child_token();
        let (leads, leading) = tokio::sync::oneshot::channel::<()>();
        let controllers = tokio::spawn(host.run_until_shutdown(
            stop.clone(),
            readiness,
            async move { leading.await.is_ok() },
        ));
        if !elector.acquire(&shutdown).await {
            stop.cancel();
            let _ = controllers.await;
            return anyhow::Ok(ExitCode::SUCCESS);
        }
        let _ = leads.send(());
        let term = tokio::spawn(elector.hold(shutdown.clone(), stop.clone()));
        if let Err(error) = controllers.await
            && error.is_panic()
        {
            std::panic::resume_unwind(error.into_panic());
        }
        shutdown.cancel();
        match term.await {
            // Released only now that the controllers have stopped, so a
            // standby never reconciles alongside this process.
            // A release that fails is logged (with the reason) by
            // `release`; the stop itself was clean.
            Ok((TermEnd::Shutdown, mut elector)) => {
                let _ = elector.release().await;
                anyhow::Ok(ExitCode::SUCCESS)
            }
            // Exit non-zero so the pod restarts as a standby.
            Ok((TermEnd::Lost, _)) => anyhow::Ok(ExitCode::from(1)),
            Err(error) => Err(error).context("the leader election task failed"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_the_flags_documentation_writes_them() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration(" 2s "), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        let error = parse_duration("2 fortnights").unwrap_err();
        assert!(
            error.contains("\"2 fortnights\" is not a duration"),
            "{error}"
        );
    }
}
