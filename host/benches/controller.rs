//! Controller benchmarks, measured on the real `radwasm run`
//! process against the local stand-ins over loopback HTTP:
//!
//! * `time-to-ready`: from applying a `DeploymentTemplate` until its `Ready`
//!   condition is observed through a watch, for Radius deployments taking
//!   T = 0.2 s, 1 s and 5 s; once with the default policy's polling and once
//!   with polling on a fixed 5-second interval (the shipped Radius controller).
//! * `scale`: 1,000 templates of 3 resources each (`--resources 1-3`: 1, 2
//!   and 3 in turn), applied at once, until all
//!   are Ready; wall time and the controller's peak RSS (`VmHWM`); then its
//!   CPU and Radius requests while idle, and after a SIGKILL and restart the
//!   time until it is idle again and what it sent to Radius meanwhile; last,
//!   every template is deleted (one DELETE each, as `kubectl delete
//!   deploymenttemplates --all` sends them), until the templates, their
//!   `DeploymentResource`s and their Radius resources are all gone: that
//!   time beside the time to all Ready, and what the controller and the API
//!   server spent (and the controller sent) in each phase.
//! * `resync`: the steady cost of drift checks: 1,000 templates of 3
//!   resources brought to Ready, then for each `--drift-resync` setting in
//!   `--resync-settings` (default `0,60s,15s`) a fresh controller idles over
//!   at least one full interval: Radius requests per second (and per 1,000
//!   `DeploymentResource`s), controller CPU, and CPU per check.
//! * `swap`, `shadow`, `selection`: `ReconcilePolicy` objects
//!   (`controller/policies.rs`): the latency of a hot swap, the cost of a
//!   `Shadow` policy, and the cost of selecting among 100 policies.
//!
//! ```sh
//! cargo bench -p radwasm --bench controller -- time-to-ready [--reps 5] [--apiserver both]
//! cargo bench -p radwasm --bench controller -- scale [--templates 1000] [--deploy-ms 1000] [--retry-after-secs 0] [--idle-secs 30] [--resources 3|1-3] [--apiserver both] [--apiserver-profile DIR] [--delete-rate N]
//! cargo bench -p radwasm --bench controller -- resync [--templates 1000] [--resync-settings 0,60s,15s] [--idle-secs 30]
//! cargo bench -p radwasm --bench controller -- swap [--swaps 20] [--module-kib 2048] [--swap-templates 10] [--module-file F.wasm]
//! cargo bench -p radwasm --bench controller -- shadow selection [--templates 1000] [--rounds 3] [--policies 100]
//! ```
//!
//! `RADWASM_BENCH_BINARY=<path>` measures another build of `radwasm` (an
//! older commit's, say) with the same stand-ins, to compare two builds in
//! one session.
//!
//! `--apiserver` picks the Kubernetes API server: `embedded` (the default,
//! `sim/kube-apiserver` in this process), `real` (etcd, kube-apiserver and
//! kube-controller-manager built from their Go modules and started on
//! loopback by the `realkube` harness the e2e tests use too, from
//! `radwasm-test-support`; `--real-apiserver` says
//! the same) or `both`, one after the other in the same run. On the real
//! server `scale` also prints kube-apiserver's own counters for each phase
//! and each control-plane process's peak RSS, and with
//! kube-apiserver's memory (its RSS at the peak of each phase, with the Go
//! runtime's view then), and with `--apiserver-profile DIR` writes
//! kube-apiserver CPU profiles of each phase and heap profiles at each
//! phase's peak and end there (`controller/server_side.rs`).
//! `--delete-rate N` paces `scale`'s DELETEs to N templates a second (to
//! compare with a controller that deletes at that pace). `--controller
//! radius` runs `scale` with Radius's own controller (built from Radius's
//! source, `tests/radius/build.sh`) in radwasm's place, against the same
//! simulator on the real API server, with the templates in the shape
//! Radius's CLI writes; `--radius-shape` writes them so for radwasm too,
//! so that both meet the same load. Radius's controller is not restarted.
//! `--phase-bound-secs N`: how long each `scale` phase may take before the
//! run fails (default 600 s to all Ready, 1,200 s to all gone). `--drift-resync D` is passed to every controller
//! started (except `resync`'s own settings); without it each runs with
//! `radwasm run`'s default. The Radius simulator runs in this process on
//! 127.0.0.1 and stops with it; the controller is a separate process so its
//! memory is its own. See `docs/benchmarks-scale.md` for figures and how
//! the baseline is measured.
#![allow(
    clippy::too_many_lines,
    reason = "a test or benchmark scenario reads top to bottom as one story"
)]

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, CustomResourceExt, ResourceExt};
use radwasm::crd::{
    DeploymentResource, DeploymentTemplate, DeploymentTemplateSpec, ProviderConfig,
};
use tokio::sync::watch;

/// The `ReconcilePolicy` scenarios (`swap`, `shadow`, `selection`).
#[path = "controller/policies.rs"]
mod policies;
/// The controller measured, as a process of its own.
#[path = "controller/process.rs"]
mod process;
/// The real API server's own counters, peak memory and CPU profiles.
#[path = "controller/server_side.rs"]
mod server_side;
use process::ControllerProcess;

/// The real control plane, shared with the e2e tests.
use radwasm_test_support::realkube;
/// Radius's own controller, built from Radius's source.
use radwasm_test_support::realradius::RadiusController;

const TEMPLATE: &str = include_str!("fixtures/three-resources.json");
const SCOPE: &str = "/planes/radius/local/resourceGroups/bench";
const NAMESPACE: &str = "default";

/// Which Kubernetes API server a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Embedded,
    Real,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Embedded => "embedded",
            Server::Real => "real",
        }
    }
}

struct Options {
    benches: Vec<String>,
    servers: Vec<Server>,
    reps: usize,
    templates: usize,
    deploy_ms: u64,
    /// `scale`: the `Retry-After` seconds the simulator sends with running
    /// operations (0: none, the default policy polls at its 100 ms floor).
    retry_after_secs: u64,
    apply_concurrency: usize,
    /// How long `scale` watches the controller idle after all is Ready.
    idle_secs: u64,
    /// `swap`: swaps per module source.
    swaps: usize,
    /// `swap`: size of the large component (served from a URL), in KiB.
    module_kib: usize,
    /// `swap`: templates the swapped policy decides for.
    swap_templates: usize,
    /// `swap`: the component to pad (default: the embedded default policy).
    module_file: Option<PathBuf>,
    /// `shadow`, `selection`: rounds of each variant, alternating.
    rounds: usize,
    /// `selection`: how many `ReconcilePolicy` objects.
    policies: usize,
    /// `--drift-resync` for the controllers started; `None`: their default.
    drift_resync: Option<String>,
    /// `scale`: how many resources each template deploys.
    resources: Spread,
    /// `resync`: the `--drift-resync` settings measured, in order.
    resync_settings: Vec<String>,
    /// `scale` on the real API server: write kube-apiserver CPU profiles
    /// of each phase here.
    apiserver_profile: Option<PathBuf>,
    /// `scale`: templates deleted per second (the DELETEs paced evenly);
    /// `None`: as fast as `apply_concurrency` allows.
    delete_rate: Option<f64>,
    /// `scale`: which controller is measured.
    controller: Controller,
    /// `scale`: how long each phase may take (to all Ready, to all gone)
    /// before the run fails; `None`: 600 s and 1,200 s.
    phase_bound: Option<Duration>,
    /// `scale`: write the templates as Radius's CLI writes them (parameters
    /// as a map of text, `providerConfig` as JSON text, with a
    /// `deployments` scope); always so for Radius's controller.
    radius_shape: bool,
}

/// The controller `scale` measures (`--controller`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    /// `radwasm run` (or `RADWASM_BENCH_BINARY`).
    Radwasm,
    /// Radius's own controller, built from Radius's source
    /// (`tests/radius/build.sh`), against the same simulator; real API
    /// server only.
    Radius,
}

fn options() -> anyhow::Result<Options> {
    let mut options = Options {
        benches: Vec::new(),
        servers: vec![Server::Embedded],
        reps: 5,
        templates: 1000,
        deploy_ms: 1000,
        retry_after_secs: 0,
        apply_concurrency: 16,
        idle_secs: 30,
        swaps: 20,
        module_kib: 2048,
        swap_templates: 10,
        module_file: None,
        rounds: 3,
        policies: 100,
        drift_resync: None,
        resources: Spread::EVERY_THREE,
        resync_settings: vec!["0".into(), "60s".into(), "15s".into()],
        apiserver_profile: None,
        delete_rate: None,
        controller: Controller::Radwasm,
        radius_shape: false,
        phase_bound: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> anyhow::Result<u64> {
            args.next()
                .with_context(|| format!("{name} needs a value"))?
                .parse()
                .with_context(|| format!("{name} takes a whole number"))
        };
        match arg.as_str() {
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            "--reps" => options.reps = number("--reps")? as usize,
            "--templates" => options.templates = number("--templates")? as usize,
            "--deploy-ms" => options.deploy_ms = number("--deploy-ms")?,
            "--retry-after-secs" => options.retry_after_secs = number("--retry-after-secs")?,
            "--idle-secs" => options.idle_secs = number("--idle-secs")?,
            "--swaps" => options.swaps = number("--swaps")?.max(1) as usize,
            "--module-kib" => options.module_kib = number("--module-kib")? as usize,
            "--swap-templates" => {
                options.swap_templates = number("--swap-templates")?.max(1) as usize
            }
            "--module-file" => {
                options.module_file =
                    Some(args.next().context("--module-file needs a path")?.into())
            }
            "--resources" => {
                options.resources =
                    Spread::parse(&args.next().context("--resources needs N or A-B")?)?
            }
            "--apiserver-profile" => {
                options.apiserver_profile = Some(
                    args.next()
                        .context("--apiserver-profile needs a directory")?
                        .into(),
                )
            }
            "--delete-rate" => {
                let rate = number("--delete-rate")?;
                options.delete_rate = (rate > 0).then_some(rate as f64);
            }
            "--rounds" => options.rounds = number("--rounds")?.max(1) as usize,
            "--policies" => options.policies = number("--policies")?.max(1) as usize,
            "--drift-resync" => {
                let value = args.next().context("--drift-resync needs a duration")?;
                drift_interval(&value)?;
                options.drift_resync = Some(value);
            }
            "--resync-settings" => {
                let list = args.next().context("--resync-settings needs a list")?;
                options.resync_settings = list.split(',').map(|s| s.trim().to_string()).collect();
                for setting in &options.resync_settings {
                    drift_interval(setting)?;
                }
            }
            "--apply-concurrency" => {
                options.apply_concurrency = number("--apply-concurrency")?.max(1) as usize
            }
            "--real-apiserver" => options.servers = vec![Server::Real],
            "--controller" => {
                options.controller = match args.next().as_deref() {
                    Some("radwasm") => Controller::Radwasm,
                    Some("radius") => Controller::Radius,
                    other => bail!("--controller takes radwasm or radius, not {other:?}"),
                }
            }
            "--radius-shape" => options.radius_shape = true,
            "--phase-bound-secs" => {
                options.phase_bound = Some(Duration::from_secs(number("--phase-bound-secs")?))
            }
            "--apiserver" => {
                options.servers = match args.next().as_deref() {
                    Some("embedded") => vec![Server::Embedded],
                    Some("real") => vec![Server::Real],
                    Some("both") => vec![Server::Embedded, Server::Real],
                    other => bail!("--apiserver takes embedded, real or both, not {other:?}"),
                }
            }
            "time-to-ready" | "scale" | "resync" | "swap" | "shadow" | "selection" => {
                options.benches.push(arg)
            }
            other => bail!(
                "unknown argument {other:?}; use time-to-ready, scale, resync, swap, shadow, selection, --reps N, --templates N, --deploy-ms N, --retry-after-secs N, --apply-concurrency N, --idle-secs N, --swaps N, --module-kib N, --swap-templates N, --module-file F.wasm, --rounds N, --policies N, --drift-resync D, --resync-settings D,D,..., --apiserver embedded|real|both, --real-apiserver, --apiserver-profile DIR, --delete-rate N, --resources N|A-B, --controller radwasm|radius, --radius-shape, --phase-bound-secs N"
            ),
        }
    }
    if options.benches.is_empty() {
        options.benches = vec!["time-to-ready".into(), "scale".into()];
    }
    if options.controller == Controller::Radius {
        if options.benches != ["scale"] || options.servers != [Server::Real] {
            bail!(
                "--controller radius measures scale on the real API server only: add scale --apiserver real"
            );
        }
        options.radius_shape = true;
    }
    Ok(options)
}

fn main() -> ExitCode {
    let result = options().and_then(|options| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        println!(
            "controllers run with --drift-resync {}",
            match &options.drift_resync {
                Some(value) => value.clone(),
                None => format!("{} (radwasm run's default)", default_drift_resync()),
            }
        );
        runtime.block_on(async {
            for bench in &options.benches {
                for &server in &options.servers {
                    println!("\n## {bench} on the {} API server", server.name());
                    match bench.as_str() {
                        "time-to-ready" => time_to_ready(&options, server).await?,
                        "swap" => policies::swap(&options, server).await?,
                        "shadow" => policies::shadow(&options, server).await?,
                        "selection" => policies::selection(&options, server).await?,
                        "resync" => resync(&options, server).await?,
                        _ => scale(&options, server).await?,
                    }
                }
            }
            anyhow::Ok(())
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("benchmark failed: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// A `--drift-resync` value as `radwasm run` parses it; `None` for `0`
/// (checks off).
fn drift_interval(value: &str) -> anyhow::Result<Option<Duration>> {
    let every = radwasm::cli::run::parse_duration(value)
        .map_err(|error| anyhow::anyhow!("--drift-resync: {error}"))?;
    Ok((!every.is_zero()).then_some(every))
}

/// `radwasm run`'s own default `--drift-resync`, from its argument parser.
fn default_drift_resync() -> String {
    use clap::CommandFactory;
    radwasm::cli::Cli::command()
        .find_subcommand("run")
        .and_then(|run| {
            run.get_arguments()
                .find(|arg| arg.get_long() == Some("drift-resync"))
                .and_then(|arg| arg.get_default_values().first())
                .map(|value| value.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "?".into())
}

/// The Kubernetes API server a stage runs on. The embedded one runs on a
/// runtime of its own, whose threads are named [`EMBEDDED_THREADS`], so that
/// its CPU can be told apart from the simulator's and the watches'.
enum ApiServer {
    Embedded(radwasm_sim_apiserver::ApiServer, tokio::runtime::Runtime),
    Real(realkube::RealCluster),
}

/// The name of the embedded API server's runtime threads.
const EMBEDDED_THREADS: &str = "apiserver";

/// The stand-ins, a client, and what a watch has seen become Ready.
struct Stage {
    apiserver: ApiServer,
    radius: radwasm_sim_radius::RadiusSim,
    client: Client,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    seen: Arc<Mutex<Seen>>,
    changes: watch::Receiver<u64>,
    watches: Vec<tokio::task::JoinHandle<()>>,
    /// `--drift-resync` for the controllers this stage starts; `None`:
    /// `radwasm run`'s default.
    drift_resync: Option<String>,
    /// How many resources the `scale-N` templates it applies deploy.
    resources: Spread,
    /// Templates written as Radius's CLI writes them.
    radius_shape: bool,
}

#[derive(Default)]
struct Seen {
    /// Template name → when its Ready condition (for its generation) was seen.
    templates_ready: HashMap<String, Instant>,
    /// DeploymentResources seen in phase Ready.
    resources_ready: HashSet<String>,
    /// Every applied event the watches saw (a create or any write, status
    /// writes included), per kind.
    template_events: u64,
    resource_events: u64,
    /// Templates stored now, as the watch last saw them.
    templates_live: HashSet<String>,
    /// DeploymentResources stored now: name → the template that owns it.
    resources_live: HashMap<String, String>,
}

impl Stage {
    async fn start(
        server: Server,
        deploy: Duration,
        retry_after_secs: u64,
    ) -> anyhow::Result<Stage> {
        Self::start_with(server, deploy, retry_after_secs, false).await
    }

    /// [`Stage::start`], with the `ReconcilePolicy` CRD installed too when
    /// `reconcile_policies` (without it the controller decides everything
    /// with `--policy` and watches neither policies nor namespaces).
    async fn start_with(
        server: Server,
        deploy: Duration,
        retry_after_secs: u64,
        reconcile_policies: bool,
    ) -> anyhow::Result<Stage> {
        let radius = radwasm_sim_radius::start(radwasm_sim_radius::SimConfig {
            deploy_duration: deploy,
            delete_duration: Duration::from_millis(100),
            retry_after_secs,
            ..Default::default()
        })
        .await?;
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        let (apiserver, client) = match server {
            Server::Embedded => {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name(EMBEDDED_THREADS)
                    .enable_all()
                    .build()?;
                let apiserver = runtime
                    .spawn(radwasm_sim_apiserver::start(
                        radwasm_sim_apiserver::ApiServerConfig::default(),
                    ))
                    .await??;
                apiserver.write_kubeconfig(&kubeconfig)?;
                let config = kube::Config::from_custom_kubeconfig(
                    kube::config::Kubeconfig::from_yaml(&apiserver.kubeconfig_yaml())?,
                    &Default::default(),
                )
                .await?;
                (
                    ApiServer::Embedded(apiserver, runtime),
                    Client::try_from(config)?,
                )
            }
            Server::Real => {
                // The controller runs as the cluster's admin here: what is
                // measured is the API server, not RBAC.
                let cluster = realkube::RealCluster::start().await?;
                std::fs::copy(cluster.kubeconfig_path(), &kubeconfig)?;
                let client = cluster.client();
                (ApiServer::Real(cluster), client)
            }
        };
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut install = vec![DeploymentTemplate::crd(), DeploymentResource::crd()];
        if reconcile_policies {
            install.push(radwasm::reconcile_policy::ReconcilePolicy::crd());
        }
        for crd in install {
            let name = crd.name_any();
            crds.create(&PostParams::default(), &crd)
                .await
                .context("installing the CRDs")?;
            tokio::time::timeout(
                Duration::from_secs(60),
                kube::runtime::wait::await_condition(
                    crds.clone(),
                    &name,
                    kube::runtime::wait::conditions::is_crd_established(),
                ),
            )
            .await
            .with_context(|| format!("{name} not Established within 60 s"))??;
        }

        let seen = Arc::new(Mutex::new(Seen::default()));
        let (notify, changes) = watch::channel(0u64);
        let notify = Arc::new(notify);
        let templates: Api<DeploymentTemplate> = Api::all(client.clone());
        let resources: Api<DeploymentResource> = Api::all(client.clone());
        let template_watch = {
            let (seen, notify) = (seen.clone(), notify.clone());
            tokio::spawn(async move {
                let mut stream = watcher(templates, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                // The names a relist brings, until it ends.
                let mut relisted: HashSet<String> = HashSet::new();
                while let Some(event) = stream.next().await {
                    let Ok(event) = event else { continue };
                    let (template, init) = match event {
                        watcher::Event::Init => {
                            relisted.clear();
                            continue;
                        }
                        watcher::Event::InitDone => {
                            if let Ok(mut seen) = seen.lock() {
                                seen.templates_live = std::mem::take(&mut relisted);
                            }
                            notify.send_modify(|n| *n += 1);
                            continue;
                        }
                        watcher::Event::Delete(template) => {
                            if let Ok(mut seen) = seen.lock() {
                                seen.templates_live.remove(&template.name_any());
                            }
                            notify.send_modify(|n| *n += 1);
                            continue;
                        }
                        watcher::Event::InitApply(template) => (template, true),
                        watcher::Event::Apply(template) => (template, false),
                    };
                    if let Ok(mut seen) = seen.lock() {
                        seen.template_events += 1;
                        if init {
                            relisted.insert(template.name_any());
                        } else {
                            seen.templates_live.insert(template.name_any());
                        }
                    }
                    if is_ready(&template) {
                        let now = Instant::now();
                        if let Ok(mut seen) = seen.lock() {
                            seen.templates_ready
                                .entry(template.name_any())
                                .or_insert(now);
                        }
                        notify.send_modify(|n| *n += 1);
                    }
                }
            })
        };
        let resource_watch = {
            let (seen, notify) = (seen.clone(), notify.clone());
            tokio::spawn(async move {
                let mut stream = watcher(resources, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                let mut relisted: HashMap<String, String> = HashMap::new();
                let owner = |resource: &DeploymentResource| {
                    resource
                        .owner_references()
                        .iter()
                        .find(|r| r.controller == Some(true))
                        .map(|r| r.name.clone())
                        .unwrap_or_default()
                };
                while let Some(event) = stream.next().await {
                    let Ok(event) = event else { continue };
                    let (resource, init) = match event {
                        watcher::Event::Init => {
                            relisted.clear();
                            continue;
                        }
                        watcher::Event::InitDone => {
                            if let Ok(mut seen) = seen.lock() {
                                seen.resources_live = std::mem::take(&mut relisted);
                            }
                            notify.send_modify(|n| *n += 1);
                            continue;
                        }
                        watcher::Event::Delete(resource) => {
                            if let Ok(mut seen) = seen.lock() {
                                seen.resources_live.remove(&resource.name_any());
                            }
                            notify.send_modify(|n| *n += 1);
                            continue;
                        }
                        watcher::Event::InitApply(resource) => (resource, true),
                        watcher::Event::Apply(resource) => (resource, false),
                    };
                    if let Ok(mut seen) = seen.lock() {
                        seen.resource_events += 1;
                        if init {
                            relisted.insert(resource.name_any(), owner(&resource));
                        } else {
                            seen.resources_live
                                .insert(resource.name_any(), owner(&resource));
                        }
                    }
                    let ready =
                        resource.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready");
                    if ready {
                        if let Ok(mut seen) = seen.lock() {
                            seen.resources_ready.insert(resource.name_any());
                        }
                        notify.send_modify(|n| *n += 1);
                    }
                }
            })
        };
        Ok(Stage {
            apiserver,
            radius,
            client,
            dir,
            kubeconfig,
            seen,
            changes,
            watches: vec![template_watch, resource_watch],
            drift_resync: None,
            resources: Spread::EVERY_THREE,
            radius_shape: false,
        })
    }

    fn controller(&self) -> anyhow::Result<ControllerProcess> {
        self.controller_logging("warn")
    }

    /// The controller `options.controller` names: radwasm, or Radius's own
    /// (with its `Recipe` CRD installed first).
    async fn controller_of(&self, options: &Options) -> anyhow::Result<ControllerProcess> {
        match (options.controller, &self.apiserver) {
            (Controller::Radwasm, _) => self.controller(),
            (Controller::Radius, ApiServer::Real(cluster)) => {
                RadiusController::install_crds(&cluster.handle()).await?;
                ControllerProcess::start_radius(cluster, &self.radius.base_url()).await
            }
            (Controller::Radius, ApiServer::Embedded(..)) => {
                bail!("Radius's controller is measured on the real API server only")
            }
        }
    }

    /// A controller logging with this `RUST_LOG` filter.
    fn controller_logging(&self, rust_log: &str) -> anyhow::Result<ControllerProcess> {
        ControllerProcess::start(
            &self.kubeconfig,
            &self.radius.base_url(),
            self.dir.path(),
            rust_log,
            self.drift_resync.as_deref(),
        )
    }

    /// A controller with this `--drift-resync`, whatever the stage's.
    fn controller_resync(&self, drift_resync: &str) -> anyhow::Result<ControllerProcess> {
        ControllerProcess::start(
            &self.kubeconfig,
            &self.radius.base_url(),
            self.dir.path(),
            "warn",
            Some(drift_resync),
        )
    }

    /// Applied watch events seen so far: (templates, DeploymentResources).
    fn events(&self) -> (u64, u64) {
        self.seen
            .lock()
            .map(|seen| (seen.template_events, seen.resource_events))
            .unwrap_or_default()
    }

    async fn apply(&self, name: &str) -> anyhow::Result<()> {
        let templates: Api<DeploymentTemplate> = Api::namespaced(self.client.clone(), NAMESPACE);
        templates
            .create(
                &PostParams::default(),
                &template_of(name, self.resources.of_name(name), self.radius_shape),
            )
            .await
            .with_context(|| format!("creating template {name}"))?;
        Ok(())
    }

    /// Wait until `done` holds for what the watches have seen.
    async fn wait(
        &self,
        what: &str,
        timeout: Duration,
        done: impl FnMut(&Seen) -> bool,
    ) -> anyhow::Result<()> {
        wait_until(&self.seen, &self.changes, what, timeout, done).await
    }

    fn ready_at(&self, name: &str) -> Option<Instant> {
        self.seen
            .lock()
            .ok()
            .and_then(|seen| seen.templates_ready.get(name).copied())
    }

    async fn stop(self) {
        for task in &self.watches {
            task.abort();
        }
        self.radius.shutdown().await;
        match self.apiserver {
            ApiServer::Embedded(apiserver, runtime) => {
                apiserver.shutdown().await;
                runtime.shutdown_background();
            }
            ApiServer::Real(cluster) => drop(cluster),
        }
    }

    /// The real API server's side of a phase, from now on (`None` on the
    /// embedded one).
    async fn server_phase(
        &self,
        options: &Options,
        name: &str,
    ) -> anyhow::Result<Option<server_side::Phase>> {
        match &self.apiserver {
            ApiServer::Embedded(..) => Ok(None),
            ApiServer::Real(cluster) => {
                let apiserver = cluster
                    .pids()
                    .into_iter()
                    .find(|pid| {
                        std::fs::read_to_string(format!("/proc/{pid}/comm"))
                            .is_ok_and(|comm| comm.trim() == "kube-apiserver")
                    })
                    .context("no kube-apiserver process in the cluster")?;
                Ok(Some(
                    server_side::Phase::start(
                        &self.client,
                        apiserver,
                        options.apiserver_profile.as_deref(),
                        name,
                    )
                    .await?,
                ))
            }
        }
    }

    /// The peak RSS of each control-plane process so far (none on the
    /// embedded API server, which shares this process).
    fn server_peak_rss(&self) -> Vec<(String, f64)> {
        match &self.apiserver {
            ApiServer::Embedded(..) => Vec::new(),
            ApiServer::Real(cluster) => server_side::peak_rss(&cluster.pids()),
        }
    }

    /// CPU seconds so far of the stand-ins and this process's watches: this
    /// process (the simulator, the embedded API server) and, on the real
    /// server, etcd, kube-apiserver and kube-controller-manager.
    fn stand_ins_cpu(&self) -> f64 {
        let children = match &self.apiserver {
            ApiServer::Embedded(..) => Vec::new(),
            ApiServer::Real(cluster) => cluster.pids(),
        };
        cpu_seconds("self").unwrap_or(0.0)
            + children
                .iter()
                .filter_map(|pid| cpu_seconds(&pid.to_string()))
                .sum::<f64>()
    }

    /// Resident memory of the API server's processes now, in MiB (the
    /// embedded one shares this process with the simulator).
    fn apiserver_rss_mib(&self) -> f64 {
        let pids = match &self.apiserver {
            ApiServer::Embedded(..) => vec![std::process::id()],
            ApiServer::Real(cluster) => cluster.pids(),
        };
        pids.iter()
            .filter_map(|pid| proc_status_kib(*pid, "VmRSS:"))
            .sum::<u64>() as f64
            / 1024.0
    }

    /// CPU seconds so far of each part of the API server: the embedded
    /// server's runtime threads, or etcd, kube-apiserver and
    /// kube-controller-manager (the garbage collector there).
    fn server_cpu(&self) -> Vec<(String, f64)> {
        match &self.apiserver {
            ApiServer::Embedded(..) => {
                let threads = std::fs::read_dir("/proc/self/task")
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|task| {
                        let tid = task.file_name().to_string_lossy().into_owned();
                        let comm =
                            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm")).ok()?;
                        (comm.trim() == EMBEDDED_THREADS)
                            .then(|| cpu_seconds(&format!("self/task/{tid}")))
                            .flatten()
                    })
                    .sum();
                vec![("embedded API server".to_string(), threads)]
            }
            ApiServer::Real(cluster) => cluster
                .pids()
                .into_iter()
                .map(|pid| {
                    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                        .map(|comm| comm.trim().to_string())
                        .unwrap_or_else(|_| pid.to_string());
                    (name, cpu_seconds(&pid.to_string()).unwrap_or(0.0))
                })
                .collect(),
        }
    }
}

/// CPU seconds spent by each part between two [`Stage::server_cpu`] readings.
fn cpu_between(before: &[(String, f64)], after: &[(String, f64)]) -> Vec<(String, f64)> {
    after
        .iter()
        .map(|(name, now)| {
            let then = before
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, cpu)| *cpu);
            (name.clone(), now - then)
        })
        .collect()
}

fn format_cpu(parts: &[(String, f64)]) -> String {
    parts
        .iter()
        .map(|(name, cpu)| format!("{name} {cpu:.1} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Ready condition True for the current generation; for a controller that
/// writes no conditions (Radius's own), phase `Ready` for it.
fn is_ready(template: &DeploymentTemplate) -> bool {
    let generation = template.metadata.generation;
    template.status.as_ref().is_some_and(|status| {
        let ready = if status.conditions.is_empty() {
            status.phrase.as_deref() == Some("Ready")
        } else {
            status
                .conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        };
        status.observed_generation == generation && ready
    })
}

/// How many resources each `scale` template deploys: `N`, or `A-B` spread
/// evenly (template `scale-i` deploys `A + i mod (B - A + 1)`); the
/// warm-up template always deploys 3.
#[derive(Clone, Copy, Debug)]
struct Spread {
    low: usize,
    high: usize,
}

impl Spread {
    const EVERY_THREE: Spread = Spread { low: 3, high: 3 };

    fn parse(text: &str) -> anyhow::Result<Self> {
        let number = |part: &str| -> anyhow::Result<usize> {
            let n: usize = part
                .trim()
                .parse()
                .with_context(|| format!("--resources takes N or A-B, not {text:?}"))?;
            if !(1..=3).contains(&n) {
                bail!("--resources: a template here deploys 1 to 3 resources, not {n}");
            }
            Ok(n)
        };
        let (low, high) = match text.split_once('-') {
            Some((low, high)) => (number(low)?, number(high)?),
            None => (number(text)?, number(text)?),
        };
        if low > high {
            bail!("--resources {text}: the first number is the smaller");
        }
        Ok(Spread { low, high })
    }

    fn of(self, index: usize) -> usize {
        self.low + index % (self.high - self.low + 1)
    }

    /// For a template the benchmark names `scale-<index>`; 3 otherwise.
    fn of_name(self, name: &str) -> usize {
        name.strip_prefix("scale-")
            .and_then(|index| index.parse().ok())
            .map_or(3, |index| self.of(index))
    }

    /// The resources of `count` scale templates.
    fn total(self, count: usize) -> usize {
        (0..count).map(|i| self.of(i)).sum()
    }

    fn label(self) -> String {
        if self.low == self.high {
            self.low.to_string()
        } else {
            format!("{}-{}", self.low, self.high)
        }
    }
}

/// The fixture's first `resources` resources (each depends on the one
/// before it): the environment, the application, the container.
fn template_text(resources: usize) -> String {
    let mut template: serde_json::Value =
        serde_json::from_str(TEMPLATE).expect("the fixture is JSON");
    if let Some(all) = template["resources"].as_object_mut() {
        let kept = ["env", "app", "frontend"];
        all.retain(|name, _| kept[..resources].contains(&name.as_str()));
    }
    template.to_string()
}

fn template(name: &str) -> DeploymentTemplate {
    template_of(name, 3, false)
}

/// Template `name` deploying the fixture's first `resources` resources; in
/// the shape Radius's CLI writes if `radius_shape` (what Radius's own
/// controller reads), in radwasm's otherwise.
fn template_of(name: &str, resources: usize, radius_shape: bool) -> DeploymentTemplate {
    let (parameters, provider_config) = if radius_shape {
        (
            serde_json::json!({ "name": name }),
            serde_json::json!({
                "radius": {"type": "Radius", "value": {"scope": SCOPE}},
                "deployments": {"type": "Microsoft.Resources", "value": {"scope": SCOPE}},
            })
            .to_string()
            .into(),
        )
    } else {
        (
            serde_json::json!({"name": {"value": name}})
                .to_string()
                .into(),
            ProviderConfig::radius(SCOPE).into(),
        )
    };
    let mut object = DeploymentTemplate::new(
        name,
        DeploymentTemplateSpec {
            template: if resources == 3 {
                TEMPLATE.to_string()
            } else {
                template_text(resources)
            },
            parameters,
            provider_config,
            repository: None,
        },
    );
    object.metadata.namespace = Some(NAMESPACE.to_string());
    object
}

/// Wait until `done` holds for `state`, which watch tasks fill in and
/// announce on `changes`; at most `timeout`.
async fn wait_until<T>(
    state: &Mutex<T>,
    changes: &watch::Receiver<u64>,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(&T) -> bool,
) -> anyhow::Result<()> {
    let mut changes = changes.clone();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        changes.borrow_and_update();
        let finished = match state.lock() {
            Ok(state) => done(&state),
            Err(_) => bail!("a watch task panicked"),
        };
        if finished {
            return Ok(());
        }
        match tokio::time::timeout_at(deadline, changes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => bail!("the watches stopped while waiting for {what}"),
            Err(_) => bail!("timed out after {timeout:?} waiting for {what}"),
        }
    }
}

/// A `kB` field of `/proc/<pid>/status`.
fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// User + system CPU seconds of a process so far.
fn cpu_seconds(pid: &str) -> Option<f64> {
    radwasm_test_support::cpu_seconds(pid.parse().ok()?)
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// From apply to Ready, per Radius operation duration, for both polling modes.
async fn time_to_ready(options: &Options, server: Server) -> anyhow::Result<()> {
    let mut stage = Stage::start(server, Duration::from_millis(200), 0).await?;
    stage.drift_resync = options.drift_resync.clone();
    let controller = stage.controller()?;
    // Warm-up: the controller's first watches, the resource group, the first decisions.
    stage.apply("warm-up").await?;
    stage
        .wait("warm-up Ready", Duration::from_secs(60), |seen| {
            seen.templates_ready.contains_key("warm-up")
        })
        .await
        .with_context(|| controller.log_tail())?;

    println!(
        "time to Ready: apply until the Ready condition is observed (ms), {} runs each",
        options.reps
    );
    println!("| polling | T | min | median | max | median − T |");
    println!("| --- | --- | --- | --- | --- | --- |");
    // Radius' Retry-After is the only difference between the two modes: 0
    // leaves the pace to the default policy (its 100 ms floor); 5 makes the
    // same policy poll every 5 s, the fixed interval of the shipped Radius
    // controller.
    for (mode, tag, retry_after_secs) in [
        ("radwasm default policy", "adaptive", 0),
        ("fixed 5 s (baseline)", "fixed5s", 5),
    ] {
        stage.radius.faults().set_retry_after_secs(retry_after_secs);
        for deploy_ms in [200u64, 1000, 5000] {
            let deploy = Duration::from_millis(deploy_ms);
            stage.radius.faults().set_deploy_duration(deploy);
            let mut samples = Vec::new();
            for rep in 0..options.reps {
                let name = format!("ttr-{tag}-{deploy_ms}-{rep}");
                let started = Instant::now();
                stage.apply(&name).await?;
                stage
                    .wait(&format!("{name} Ready"), Duration::from_secs(60), |seen| {
                        seen.templates_ready.contains_key(&name)
                    })
                    .await
                    .with_context(|| controller.log_tail())?;
                let ready = stage.ready_at(&name).context("ready time recorded")?;
                samples.push(ready.duration_since(started));
            }
            samples.sort();
            let median = samples[samples.len() / 2];
            println!(
                "| {mode} | {:.1} s | {:.0} | {:.0} | {:.0} | {:+.0} |",
                deploy.as_secs_f64(),
                ms(samples[0]),
                ms(median),
                ms(samples[samples.len() - 1]),
                ms(median) - ms(deploy),
            );
        }
    }
    let stats = stage.radius.stats();
    println!(
        "radius: {} deployment PUTs for {} templates",
        stats.deployment_puts,
        1 + 6 * options.reps
    );
    controller.stop()?;
    stage.stop().await;
    Ok(())
}

/// Many templates at once: wall time to all Ready, and the controller's peak RSS.
async fn scale(options: &Options, server: Server) -> anyhow::Result<()> {
    let count = options.templates;
    let deploy = Duration::from_millis(options.deploy_ms);
    let mut stage = Stage::start(server, deploy, options.retry_after_secs).await?;
    stage.drift_resync = options.drift_resync.clone();
    stage.resources = options.resources;
    stage.radius_shape = options.radius_shape;
    let resync = options
        .drift_resync
        .clone()
        .unwrap_or_else(default_drift_resync);
    let every = drift_interval(&resync)?;
    let resources = options.resources.total(count) + 3;
    // Radius GETs the drift checks make in `window`, at their configured rate.
    let drift_gets = |window: Duration| {
        every.map_or(0.0, |every| {
            resources as f64 * window.as_secs_f64() / every.as_secs_f64()
        })
    };
    let controller = stage.controller_of(options).await?;
    println!(
        "controller: {:?}; templates in {} shape",
        options.controller,
        if options.radius_shape {
            "Radius's CLI's"
        } else {
            "radwasm's"
        }
    );
    let run = scale_run(options, &stage, &controller, true).await?;
    let stats = stage.radius.stats();
    println!(
        "| API server | templates | resources | all templates Ready | all DeploymentResources Ready | controller peak RSS | controller CPU (per template) | stand-ins + watches CPU | API server RSS | Radius PUTs |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    println!(
        "| {} | {count} | {} | {:.1} s | {:.1} s | {:.1} MiB (after warm-up {:.1} MiB) | {:.2} s ({:.2} ms) | {:.1} s | {:.0} MiB | {} |",
        server.name(),
        options.resources.total(count),
        run.templates_ready.as_secs_f64(),
        run.resources_ready.as_secs_f64(),
        run.peak_rss_kib as f64 / 1024.0,
        run.rss_before_kib as f64 / 1024.0,
        run.controller_cpu,
        1000.0 * run.controller_cpu / count as f64,
        run.stand_ins_cpu,
        run.apiserver_rss_mib,
        stats.deployment_puts,
    );
    run.requests.print_per(count);
    if let Some(load) = &run.server_load {
        load.print_per("create", count);
        println!(
            "  peak RSS at all Ready: {}",
            server_side::format_mib(&run.server_peak_rss)
        );
    }

    // Idle: nothing changes. What the controller spends and sends: with
    // drift checks on, one GET per DeploymentResource per interval (the
    // checks were spread over the interval as the resources were created).
    let idle = Duration::from_secs(options.idle_secs);
    let cpu_start = controller.cpu_seconds().unwrap_or(0.0);
    let stats_start = stage.radius.stats();
    tokio::time::sleep(idle).await;
    let idle_cpu = controller.cpu_seconds().unwrap_or(0.0) - cpu_start;
    let stats_end = stage.radius.stats();
    let idle_requests = stats_end.requests - stats_start.requests;
    let idle_share = idle_cpu / idle.as_secs_f64();
    println!(
        "  idle for {:.0} s (--drift-resync {resync}): controller CPU {:.2} % of a core, {idle_requests} Radius requests ({:.0} expected from drift checks: {resources} resources / interval), {} deployment PUTs, {} DELETEs",
        idle.as_secs_f64(),
        100.0 * idle_share,
        drift_gets(idle),
        stats_end.deployment_puts - stats_start.deployment_puts,
        stats_end.deletes - stats_start.deletes,
    );

    // Radius's controller is not restarted: its idle cost is not what is
    // compared.
    let controller = if options.controller == Controller::Radwasm {
        // Restart: SIGKILL (dropping the process kills it), a new process, and
        // the time until it is idle again: for 3 s running, under 1 % of a core
        // above what it spent idle before the kill (with drift checks on, their
        // steady cost; with them off, plain "under 1 %").
        let threshold = 0.01 + idle_share;
        drop(controller);
        let before = stage.radius.stats();
        let restarted = Instant::now();
        let controller = stage.controller()?;
        let mut last = controller.cpu_seconds().unwrap_or(0.0);
        let mut quiet = 0;
        while quiet < 3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = controller.cpu_seconds().unwrap_or(0.0);
            quiet = if now - last < threshold { quiet + 1 } else { 0 };
            last = now;
            if restarted.elapsed() > Duration::from_secs(300) {
                bail!(
                    "the restarted controller never went idle:\n{}",
                    controller.log_tail()
                );
            }
        }
        let after = stage.radius.stats();
        let elapsed = restarted.elapsed();
        println!(
            "  restart after SIGKILL: idle again (under {:.2} % of a core for 3 s) {:.1} s after the start, controller CPU {:.1} s, {} deployment PUTs, {} Radius requests ({:.0} expected from drift checks)",
            100.0 * threshold,
            (elapsed - Duration::from_secs(3)).as_secs_f64(),
            last,
            after.deployment_puts - before.deployment_puts,
            after.requests - before.requests,
            drift_gets(elapsed),
        );
        controller
    } else {
        controller
    };

    delete_all(options, server, &stage, &controller, &run).await?;
    controller.stop()?;
    stage.stop().await;
    Ok(())
}

/// Delete the `scale-*` templates of a [`scale_run`], one DELETE each,
/// `options.apply_concurrency` at a time and with background propagation
/// (what `kubectl delete deploymenttemplates --all` sends), until the
/// watches have seen every one of them and every `DeploymentResource` they
/// owned go, and the simulator holds none of their Radius resources. Prints
/// the time to all gone beside the run's time to all Ready, and what the
/// controller and the API server spent and sent in each phase.
async fn delete_all(
    options: &Options,
    server: Server,
    stage: &Stage,
    controller: &ControllerProcess,
    run: &ScaleRun,
) -> anyhow::Result<()> {
    let count = options.templates;
    let names: Vec<String> = (0..count).map(|i| format!("scale-{i:05}")).collect();
    // The warm-up template's resources stay.
    let radius_kept = stage
        .radius
        .stats()
        .resources
        .saturating_sub(stage.resources.total(count));
    let cpu_before = controller.cpu_seconds().unwrap_or(0.0);
    let stand_ins_before = stage.stand_ins_cpu();
    let server_before = stage.server_cpu();
    let requests_before = controller.metrics().await?;
    let server_phase = stage.server_phase(options, "delete").await?;
    println!(
        "delete: the {count} templates, one DELETE each, {} at a time (background propagation){}",
        options.apply_concurrency,
        options
            .delete_rate
            .map(|rate| format!(", paced to {rate:.0} per second"))
            .unwrap_or_default()
    );
    let templates: Api<DeploymentTemplate> = Api::namespaced(stage.client.clone(), NAMESPACE);
    let started = Instant::now();
    let start = tokio::time::Instant::now();
    let mut latencies: Vec<Duration> =
        futures::stream::iter(names.iter().enumerate().map(|(i, name)| {
            let templates = templates.clone();
            async move {
                if let Some(rate) = options.delete_rate {
                    tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate))
                        .await;
                }
                let sent = Instant::now();
                templates
                    .delete(name, &kube::api::DeleteParams::background())
                    .await
                    .with_context(|| format!("deleting template {name}"))?;
                anyhow::Ok(sent.elapsed())
            }
        }))
        .buffer_unordered(options.apply_concurrency)
        .try_collect()
        .await?;
    let requested = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    println!(
        "  DELETEs answered in {:.2} s; per request: median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        requested.as_secs_f64(),
        ms(at(0.5)),
        ms(at(0.99)),
        ms(at(1.0)),
    );

    // Until the watches have seen everything go and the simulator holds
    // only the warm-up's resources; the simulator is read every 100 ms.
    let left = || {
        let (templates, resources) = stage
            .seen
            .lock()
            .map(|seen| {
                (
                    seen.templates_live
                        .iter()
                        .filter(|n| n.starts_with("scale-"))
                        .count(),
                    seen.resources_live
                        .values()
                        .filter(|owner| owner.starts_with("scale-"))
                        .count(),
                )
            })
            .unwrap_or((usize::MAX, usize::MAX));
        let radius = stage.radius.stats().resources.saturating_sub(radius_kept);
        (templates, resources, radius)
    };
    let mut changes = stage.changes.clone();
    let (mut templates_gone, mut resources_gone, mut radius_gone) = (None, None, None);
    let mut report = Instant::now();
    let timeout = options.phase_bound.unwrap_or(Duration::from_secs(1200));
    loop {
        changes.borrow_and_update();
        let (templates, resources, radius) = left();
        let now = started.elapsed();
        if templates == 0 {
            templates_gone.get_or_insert(now);
        }
        if resources == 0 {
            resources_gone.get_or_insert(now);
        }
        if radius == 0 {
            radius_gone.get_or_insert(now);
        }
        if templates == 0 && resources == 0 && radius == 0 {
            break;
        }
        if report.elapsed() >= Duration::from_secs(5) {
            report = Instant::now();
            println!(
                "  {:>5.1} s: {templates} templates, {resources} DeploymentResources, {radius} Radius resources left",
                now.as_secs_f64()
            );
        }
        if now > timeout {
            bail!(
                "after {timeout:?}: {templates} templates, {resources} DeploymentResources and {radius} Radius resources left\n{}",
                controller.log_tail()
            );
        }
        let _ = tokio::time::timeout(Duration::from_millis(100), changes.changed()).await;
    }
    let gone = started.elapsed();
    let controller_cpu = controller.cpu_seconds().unwrap_or(0.0) - cpu_before;
    let stand_ins = stage.stand_ins_cpu() - stand_ins_before;
    let server_cpu = cpu_between(&server_before, &stage.server_cpu());
    let requests = RequestCounts::between(&requests_before, &controller.metrics().await?);
    let server_load = match server_phase {
        Some(phase) => Some(phase.finish().await?),
        None => None,
    };
    let secs = |d: Option<Duration>| d.unwrap_or_default().as_secs_f64();

    let ready = run.resources_ready;
    println!(
        "| API server | templates | all Ready (templates and DeploymentResources) | all templates gone | all DeploymentResources gone | all Radius resources gone | all gone | gone / Ready |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    println!(
        "| {} | {count} | {:.1} s | {:.1} s | {:.1} s | {:.1} s | {:.1} s | {:.2} |",
        server.name(),
        ready.as_secs_f64(),
        secs(templates_gone),
        secs(resources_gone),
        secs(radius_gone),
        gone.as_secs_f64(),
        gone.as_secs_f64() / ready.as_secs_f64(),
    );
    println!(
        "| phase | wall | controller CPU (per template) | stand-ins + watches CPU | API server CPU |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for (phase, wall, cpu, stand_ins, parts) in [
        (
            "create",
            ready,
            run.controller_cpu,
            run.stand_ins_cpu,
            &run.server_cpu,
        ),
        ("delete", gone, controller_cpu, stand_ins, &server_cpu),
    ] {
        println!(
            "| {phase} | {:.1} s | {cpu:.2} s ({:.2} ms) | {stand_ins:.1} s | {} |",
            wall.as_secs_f64(),
            1000.0 * cpu / count as f64,
            format_cpu(parts),
        );
    }
    println!("delete phase:");
    requests.print_per(count);
    if let Some(load) = &server_load {
        load.print_per("delete", count);
        println!(
            "  peak RSS at all gone: {}",
            server_side::format_mib(&stage.server_peak_rss())
        );
    }
    Ok(())
}

/// What one run of the `scale` scenario measured.
struct ScaleRun {
    /// From the first create until every template was seen Ready.
    templates_ready: Duration,
    /// … and every `DeploymentResource`.
    resources_ready: Duration,
    /// Controller `VmHWM` after the warm-up and at the end, in KiB.
    rss_before_kib: u64,
    peak_rss_kib: u64,
    /// CPU seconds from the first create until all was Ready.
    controller_cpu: f64,
    stand_ins_cpu: f64,
    apiserver_rss_mib: f64,
    /// The API server's parts' CPU seconds in the same time.
    server_cpu: Vec<(String, f64)>,
    /// What the controller sent from the first create until all was Ready.
    requests: RequestCounts,
    /// What the real API server served meanwhile.
    server_load: Option<server_side::ServerLoad>,
    /// Each control-plane process's peak RSS at the end.
    server_peak_rss: Vec<(String, f64)>,
}

/// One warm-up template, then `options.templates` templates of
/// `stage.resources` resources
/// created at once (`options.apply_concurrency` at a time), until all of
/// them and their `DeploymentResource`s are seen Ready.
async fn scale_run(
    options: &Options,
    stage: &Stage,
    controller: &ControllerProcess,
    verbose: bool,
) -> anyhow::Result<ScaleRun> {
    let count = options.templates;
    stage.apply("warm-up").await?;
    stage
        .wait("warm-up Ready", Duration::from_secs(60), |seen| {
            seen.templates_ready.contains_key("warm-up")
        })
        .await
        .with_context(|| controller.log_tail())?;
    let rss_before = controller.peak_rss_kib().unwrap_or(0);
    let cpu_before = controller.cpu_seconds().unwrap_or(0.0);
    let stand_ins_before = stage.stand_ins_cpu();
    let server_before = stage.server_cpu();
    let requests_before = controller.metrics().await?;
    let server_phase = stage.server_phase(options, "create").await?;

    if verbose {
        println!(
            "scale: {count} templates x {} resources, Radius deployment {} ms, applied {} at a time",
            stage.resources.label(),
            options.deploy_ms,
            options.apply_concurrency
        );
    }
    let started = Instant::now();
    let names: Vec<String> = (0..count).map(|i| format!("scale-{i:05}")).collect();
    futures::stream::iter(names.iter().map(|name| stage.apply(name)))
        .buffer_unordered(options.apply_concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let applied = started.elapsed();
    if verbose {
        println!("  applied in {:.2} s", applied.as_secs_f64());
    }

    let progress = {
        let seen = stage.seen.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(5));
            tick.tick().await;
            loop {
                tick.tick().await;
                let (templates, resources) = seen
                    .lock()
                    .map(|s| {
                        (
                            s.templates_ready
                                .keys()
                                .filter(|n| n.starts_with("scale-"))
                                .count(),
                            s.resources_ready.len(),
                        )
                    })
                    .unwrap_or_default();
                if verbose {
                    println!(
                        "  {:>5.1} s: {templates} templates Ready, {resources} DeploymentResources Ready",
                        started.elapsed().as_secs_f64()
                    );
                }
            }
        })
    };
    let timeout = options.phase_bound.unwrap_or(Duration::from_secs(600));
    let waited = stage
        .wait("every template Ready", timeout, |seen| {
            seen.templates_ready
                .keys()
                .filter(|n| n.starts_with("scale-"))
                .count()
                == count
        })
        .await;
    let templates_ready = started.elapsed();
    let waited = match waited {
        Ok(()) => {
            stage
                .wait("every DeploymentResource Ready", timeout, |seen| {
                    seen.resources_ready.len() >= stage.resources.total(count) + 3
                })
                .await
        }
        Err(error) => Err(error),
    };
    let resources_ready = started.elapsed();
    progress.abort();
    let peak = controller.peak_rss_kib();
    let cpu = controller.cpu_seconds();
    let stand_ins = stage.stand_ins_cpu() - stand_ins_before;
    let server_cpu = cpu_between(&server_before, &stage.server_cpu());
    let apiserver_rss = stage.apiserver_rss_mib();
    if let Err(error) = waited {
        return Err(error.context(controller.log_tail()));
    }
    let requests = RequestCounts::between(&requests_before, &controller.metrics().await?);
    let server_load = match server_phase {
        Some(phase) => Some(phase.finish().await?),
        None => None,
    };
    Ok(ScaleRun {
        templates_ready,
        resources_ready,
        rss_before_kib: rss_before,
        peak_rss_kib: peak.unwrap_or(0),
        controller_cpu: cpu.unwrap_or(0.0) - cpu_before,
        stand_ins_cpu: stand_ins,
        apiserver_rss_mib: apiserver_rss,
        server_cpu,
        requests,
        server_load,
        server_peak_rss: stage.server_peak_rss(),
    })
}

/// What the controller sent during a run, from its counters: each series of
/// `radwasm_kube_requests_total` (by verb, resource and code),
/// `radwasm_radius_requests_total` (by method and code) and
/// `radwasm_reconciles_total` (by kind), as the increase between two
/// scrapes.
struct RequestCounts(Vec<(String, f64)>);

impl RequestCounts {
    const FAMILIES: [&str; 3] = [
        "radwasm_kube_requests_total",
        "radwasm_radius_requests_total",
        "radwasm_reconciles_total",
    ];

    fn between(before: &str, after: &str) -> Self {
        let samples = |text: &str| -> std::collections::BTreeMap<String, f64> {
            text.lines()
                .filter(|line| {
                    Self::FAMILIES
                        .iter()
                        .any(|f| line.starts_with(&format!("{f}{{")))
                })
                .filter_map(|line| {
                    let (series, value) = line.rsplit_once(' ')?;
                    Some((series.to_string(), value.parse().ok()?))
                })
                .collect()
        };
        let before = samples(before);
        let increases = samples(after)
            .into_iter()
            .map(|(series, value)| {
                let increase = value - before.get(&series).copied().unwrap_or(0.0);
                (series, increase)
            })
            .filter(|(_, increase)| *increase > 0.0)
            .collect();
        Self(increases)
    }

    /// A table of each series per template.
    fn print_per(&self, templates: usize) {
        println!("| requests and reconciles (increase during the run) | total | per template |");
        println!("| --- | --- | --- |");
        for (series, increase) in &self.0 {
            println!(
                "| `{series}` | {increase:.0} | {:.2} |",
                increase / templates as f64
            );
        }
    }
}

/// The controller's and the simulator's counters at one moment (`resync`).
struct Counters {
    at: Instant,
    cpu: f64,
    radius: radwasm_sim_radius::Stats,
    /// `radwasm_drift_checks_total` by result: found, missing, error.
    checks: [f64; 3],
    /// Radius GETs the controller sent (`radwasm_radius_requests_total`).
    gets: f64,
    /// Reconciles of `DeploymentResource`s and of templates.
    resource_reconciles: f64,
    template_reconciles: f64,
    /// Applied watch events seen: templates, `DeploymentResource`s.
    events: (u64, u64),
}

impl Counters {
    async fn read(stage: &Stage, controller: &ControllerProcess) -> anyhow::Result<Self> {
        let text = controller.metrics().await?;
        let metric = |name: &str, filters: &[&str]| policies::metric(&text, name, filters);
        Ok(Self {
            at: Instant::now(),
            cpu: controller.cpu_seconds().unwrap_or(0.0),
            radius: stage.radius.stats(),
            checks: ["found", "missing", "error"].map(|result| {
                metric(
                    "radwasm_drift_checks_total",
                    &[&format!("result=\"{result}\"")],
                )
            }),
            gets: metric("radwasm_radius_requests_total", &["method=\"GET\""]),
            resource_reconciles: metric(
                "radwasm_reconciles_total",
                &["kind=\"DeploymentResource\""],
            ),
            template_reconciles: metric(
                "radwasm_reconciles_total",
                &["kind=\"DeploymentTemplate\""],
            ),
            events: stage.events(),
        })
    }
}

/// The steady cost of drift checks. `options.templates` templates of 3
/// resources are brought to Ready (checks off), then for each setting of
/// `options.resync_settings` a fresh controller with that `--drift-resync`
/// starts, and once it has reconciled every object once (its first checks
/// are then scheduled, spread over the interval: from there on they come at
/// the steady rate) it is watched idle for one full interval (at least
/// `--idle-secs`). Nothing changes meanwhile, so every Radius request is a
/// check's GET and no deployment may be started.
async fn resync(options: &Options, server: Server) -> anyhow::Result<()> {
    let count = options.templates;
    let resources = 3 * (count + 1);
    let stage = Stage::start(server, Duration::from_millis(options.deploy_ms), 0).await?;
    let controller = stage.controller_resync("0")?;
    println!(
        "resync: {count} templates x 3 resources (+1 warm-up template: {resources} DeploymentResources), brought to Ready with --drift-resync 0"
    );
    let run = scale_run(options, &stage, &controller, false).await?;
    println!(
        "  all Ready in {:.1} s; then per setting a fresh controller, until it has reconciled every object once, then one full interval (at least {} s) idle",
        run.resources_ready.as_secs_f64(),
        options.idle_secs
    );
    controller.stop()?;

    println!(
        "| --drift-resync | window | Radius requests | per s | expected (resources / interval) | per s per 1,000 DeploymentResources | checks: found / missing / error | DeploymentResource reconciles | controller CPU, % of a core | CPU per check | CPU per check above checks off | deployment PUTs, DELETEs | status writes (watch events) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut off_share: Option<f64> = None;
    let mut changed = 0;
    for setting in &options.resync_settings {
        let every = drift_interval(setting)?;
        let controller = stage.controller_resync(setting)?;
        let started = Instant::now();
        // Start-up: the new controller lists everything and reconciles every
        // object once; then a moment for what that set off.
        loop {
            if let Ok(now) = Counters::read(&stage, &controller).await
                && now.resource_reconciles >= resources as f64
                && now.template_reconciles >= (count + 1) as f64
            {
                break;
            }
            if started.elapsed() > Duration::from_secs(300) {
                bail!(
                    "--drift-resync {setting}: the controller did not reconcile every object within 300 s:\n{}",
                    controller.log_tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let window = every
            .unwrap_or_default()
            .max(Duration::from_secs(options.idle_secs));
        let start = Counters::read(&stage, &controller).await?;
        tokio::time::sleep(window).await;
        let end = Counters::read(&stage, &controller).await?;
        controller.stop()?;

        let secs = end.at.duration_since(start.at).as_secs_f64();
        let requests = end.radius.requests - start.radius.requests;
        let puts = end.radius.deployment_puts - start.radius.deployment_puts;
        let deletes = end.radius.deletes - start.radius.deletes;
        changed += puts + deletes;
        let checks: Vec<f64> = (0..3).map(|i| end.checks[i] - start.checks[i]).collect();
        let total_checks: f64 = checks.iter().sum();
        let cpu = end.cpu - start.cpu;
        let share = cpu / secs;
        let per_check = |cpu: f64| {
            if total_checks > 0.0 {
                format!("{:.0} µs", 1e6 * cpu / total_checks)
            } else {
                "—".into()
            }
        };
        let above_off = match off_share {
            Some(off) if total_checks > 0.0 => per_check(cpu - off * secs),
            _ => "—".into(),
        };
        if every.is_none() {
            off_share = Some(share);
        }
        println!(
            "| {setting} | {secs:.1} s | {requests} ({:.0} GETs by the controller) | {:.1} | {} | {:.1} | {:.0} / {:.0} / {:.0} | {:.0} | {:.2} % | {} | {above_off} | {puts}, {deletes} | {} |",
            end.gets - start.gets,
            requests as f64 / secs,
            every.map_or("0".into(), |every| format!(
                "{:.1}",
                resources as f64 / every.as_secs_f64()
            )),
            1000.0 * requests as f64 / secs / resources as f64,
            checks[0],
            checks[1],
            checks[2],
            end.resource_reconciles - start.resource_reconciles,
            100.0 * share,
            per_check(cpu),
            (end.events.0 - start.events.0) + (end.events.1 - start.events.1),
        );
    }
    stage.stop().await;
    if changed > 0 {
        bail!("{changed} deployment PUTs or DELETEs while nothing changed");
    }
    Ok(())
}
