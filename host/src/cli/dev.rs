//! `radwasm dev`: the local sandbox. Starts the embedded Kubernetes API
//! server, the Radius simulator and the controllers (default policy or
//! `--policy`), applies manifests, shows live progress and ends with a
//! summary: exit 0 once every applied template is Ready, non-zero naming the
//! template when one fails or the timeout passes. `--stay` keeps it running
//! for kubectl.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use super::run::{ControllerArgs, ControllerHost, cancel_on_signals, parse_duration};
use crate::crd::{DeploymentResource, DeploymentTemplate};
use crate::radius::Endpoint;

/// The example applied when no manifests are given.
pub const EXAMPLE_APP: &str = include_str!("../../../deploy/examples/app.yaml");

/// `radwasm dev`.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Manifests to apply (YAML, multi-document); the bundled example
    /// application when none are given. `ReconcilePolicy` objects (and
    /// everything else that is not a `DeploymentTemplate`) are applied
    /// first, and the templates once every policy has loaded or been
    /// refused.
    pub manifests: Vec<PathBuf>,
    /// Start with nothing applied instead of the bundled example (with
    /// `--stay`: an empty sandbox to apply manifests to with kubectl).
    #[arg(long, conflicts_with = "manifests")]
    pub no_example: bool,
    #[command(flatten)]
    pub controller: ControllerArgs,
    /// Keep running after the templates settle, for kubectl; stop with Ctrl-C.
    #[arg(long)]
    pub stay: bool,
    /// Give up (exit 1) if the templates are not all Ready by then.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Where to write the kubeconfig of the embedded API server (removed
    /// again when the sandbox stops).
    #[arg(long, default_value = "radwasm-dev.kubeconfig")]
    pub kubeconfig: PathBuf,
    /// How long the simulated Radius takes to finish a deployment.
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub radius_deploy_time: Duration,
    /// How long the simulated Radius takes to finish a deletion.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    pub radius_delete_time: Duration,
    /// Port of the embedded API server (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub api_port: u16,
    /// Port of the Radius simulator (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub radius_port: u16,
}

pub fn run(args: DevArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(dev(args))
}

async fn dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    // Read the manifests first: a typo should fail before anything starts.
    let documents = read_manifests(&args)?;

    let shutdown = CancellationToken::new();
    cancel_on_signals(shutdown.clone());

    let (apiserver, radius) = start_simulators(&args).await?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&apiserver.kubeconfig_yaml())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let client = Client::try_from(config.clone())?;
    install_crds(&client).await?;

    let (metrics, records) = super::run::metrics_and_records(&args.controller)?;
    let host = ControllerHost::new(
        &args.controller,
        config,
        Endpoint::direct(&radius.base_url())?,
        metrics,
        records,
    )?;
    println!(
        "policy          {} ({})",
        host.policy.current().display_name(),
        host.policy.current().digest()
    );
    let controllers = tokio::spawn(host.run_until_shutdown(
        shutdown.clone(),
        crate::metrics::Readiness::default(),
        std::future::ready(true),
    ));

    let applied = apply(&client, &documents).await?;
    let outcome = follow(&client, &applied, &args, &shutdown, &radius).await;
    summary(&client, &applied, &radius).await;
    let code = report(outcome, applied.len(), args.timeout);

    if args.stay && !shutdown.is_cancelled() {
        println!(
            "staying up; try: kubectl --kubeconfig {} get deploymenttemplates,deploymentresources",
            args.kubeconfig.display()
        );
        println!("press Ctrl-C to stop");
        shutdown.cancelled().await;
    }
    shutdown.cancel();
    let _ = controllers.await;
    radius.shutdown().await;
    apiserver.shutdown().await;
    // The server it points to is gone; a stale kubeconfig would only confuse.
    if let Err(error) = std::fs::remove_file(&args.kubeconfig) {
        tracing::debug!(%error, path = %args.kubeconfig.display(), "removing the sandbox kubeconfig");
    }
    Ok(code)
}

/// The documents of every manifest given, or of the bundled example when
/// none is (unless `--no-example`).
fn read_manifests(args: &DevArgs) -> anyhow::Result<Vec<serde_json::Value>> {
    let mut documents = Vec::new();
    if args.manifests.is_empty() && !args.no_example {
        documents.extend(parse_manifests(
            "deploy/examples/app.yaml (bundled)",
            EXAMPLE_APP,
        )?);
    }
    for path in &args.manifests {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        documents.extend(parse_manifests(&path.display().to_string(), &text)?);
    }
    Ok(documents)
}

/// Start the embedded Kubernetes API server (writing its kubeconfig) and
/// the Radius simulator, and say where they listen.
async fn start_simulators(
    args: &DevArgs,
) -> anyhow::Result<(
    radwasm_sim_apiserver::ApiServer,
    radwasm_sim_radius::RadiusSim,
)> {
    let apiserver = radwasm_sim_apiserver::start(radwasm_sim_apiserver::ApiServerConfig {
        bind: ([127, 0, 0, 1], args.api_port).into(),
        ..Default::default()
    })
    .await
    .context("starting the embedded Kubernetes API server")?;
    apiserver.write_kubeconfig(&args.kubeconfig)?;
    let radius = radwasm_sim_radius::start(radwasm_sim_radius::SimConfig {
        bind: ([127, 0, 0, 1], args.radius_port).into(),
        deploy_duration: args.radius_deploy_time,
        delete_duration: args.radius_delete_time,
        // Ask clients to poll again at once; the policy's own floor (100 ms)
        // then sets the pace.
        retry_after_secs: 0,
        ..Default::default()
    })
    .await
    .context("starting the Radius simulator")?;
    println!(
        "kubernetes API  {}  (kubeconfig {})",
        apiserver.base_url(),
        args.kubeconfig.display()
    );
    println!("radius (UCP)    {}", radius.base_url());
    Ok((apiserver, radius))
}

/// Say how following the `templates` applied ended, and the exit code
/// that tells it.
fn report(outcome: Outcome, templates: usize, timeout: Duration) -> ExitCode {
    match outcome {
        Outcome::AllReady => {
            println!("all {templates} templates Ready");
            ExitCode::SUCCESS
        }
        Outcome::Failed { name, message } => {
            println!("template {name} Failed: {message}");
            ExitCode::from(1)
        }
        Outcome::TimedOut { waiting } => {
            println!(
                "timed out after {timeout:?}; not Ready: {}",
                waiting.join(", ")
            );
            ExitCode::from(1)
        }
        Outcome::Interrupted => ExitCode::from(130),
    }
}

/// Split multi-document YAML into objects; the error names the file.
fn parse_manifests(source: &str, text: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    use serde::Deserialize;
    let mut out = Vec::new();
    for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = serde_json::Value::deserialize(document)
            .with_context(|| format!("{source}: document {} is not valid YAML", index + 1))?;
        if value.is_null() {
            continue;
        }
        if value.get("kind").and_then(|k| k.as_str()).is_none() || value.get("apiVersion").is_none()
        {
            bail!("{source}: document {} has no kind or apiVersion", index + 1);
        }
        out.push(value);
    }
    Ok(out)
}

async fn install_crds(client: &Client) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        DeploymentTemplate::crd(),
        DeploymentResource::crd(),
        crate::reconcile_policy::ReconcilePolicy::crd(),
    ] {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(response)) if response.code == 409 => {}
            Err(error) => return Err(error).context("installing the CRDs"),
        }
    }
    Ok(())
}

/// Create every document (namespaced ones in their namespace or `default`);
/// returns the (namespace, name) of each DeploymentTemplate applied.
async fn apply(
    client: &Client,
    documents: &[serde_json::Value],
) -> anyhow::Result<Vec<(String, String)>> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("API discovery")?;
    let mut templates = Vec::new();
    // Templates last, once the policies that may decide for them are loaded.
    let is_template = |document: &&serde_json::Value| {
        document.get("kind").and_then(|k| k.as_str()) == Some("DeploymentTemplate")
    };
    let (later, first): (Vec<&serde_json::Value>, Vec<&serde_json::Value>) =
        documents.iter().partition(is_template);
    let mut policies = Vec::new();
    for document in first.into_iter().chain(later) {
        if is_template(&document) && !policies.is_empty() {
            wait_for_policies(client, &std::mem::take(&mut policies)).await?;
        }
        let object: DynamicObject =
            serde_json::from_value(document.clone()).context("reading a manifest")?;
        let types = object.types.clone().unwrap_or_default();
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", &types.api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, &types.kind);
        let Some((resource, capabilities)) = discovery.resolve_gvk(&gvk) else {
            bail!(
                "the API server does not serve {}/{}",
                types.api_version,
                types.kind
            );
        };
        let namespace = object.namespace().unwrap_or_else(|| "default".to_string());
        let name = object.name_any();
        // A cluster-scoped object is named without a namespace.
        let (api, shown): (Api<DynamicObject>, String) = match capabilities.scope {
            Scope::Namespaced => (
                Api::namespaced_with(client.clone(), &namespace, &resource),
                format!("{namespace}/{name}"),
            ),
            Scope::Cluster => (Api::all_with(client.clone(), &resource), name.clone()),
        };
        api.create(&PostParams::default(), &object)
            .await
            .map_err(|error| {
                // The API server's message and field causes, one per line;
                // not the client's debug form of the error.
                anyhow::anyhow!(
                    "creating {} {shown}: {}",
                    types.kind,
                    crate::kube_client::describe_kube_error(&error)
                )
            })?;
        println!("applied         {} {shown}", types.kind);
        if types.kind == "DeploymentTemplate" {
            templates.push((namespace, name));
        } else if types.kind == "ReconcilePolicy" {
            policies.push(name);
        }
    }
    Ok(templates)
}

/// Wait (at most 60 s) until each policy's status says it loaded a version
/// or why not.
async fn wait_for_policies(client: &Client, names: &[String]) -> anyhow::Result<()> {
    use crate::reconcile_policy::ReconcilePolicy;
    let api: Api<ReconcilePolicy> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    for name in names {
        loop {
            let policy = api.get(name).await?;
            let ready = policy
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
            match ready {
                Some(c) if c.reason != "Loading" => {
                    println!("policy          {name}: {} ({})", c.reason, c.message);
                    break;
                }
                _ if Instant::now() > deadline => {
                    bail!("ReconcilePolicy {name} did not load within 60 s")
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    Ok(())
}

enum Outcome {
    AllReady,
    Failed { name: String, message: String },
    TimedOut { waiting: Vec<String> },
    Interrupted,
}

/// Print progress until every applied template is Ready, one fails, the
/// timeout passes or the user interrupts.
async fn follow(
    client: &Client,
    applied: &[(String, String)],
    args: &DevArgs,
    shutdown: &CancellationToken,
    radius: &radwasm_sim_radius::RadiusSim,
) -> Outcome {
    if applied.is_empty() {
        // Nothing to wait for (`--no-example`).
        return Outcome::AllReady;
    }
    let started = Instant::now();
    let templates: Api<DeploymentTemplate> = Api::all(client.clone());
    let resources: Api<DeploymentResource> = Api::all(client.clone());
    let mut template_events = watcher(templates, watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut resource_events = watcher(resources, watcher::Config::default())
        .touched_objects()
        .boxed();
    let mut phases: BTreeMap<String, String> = BTreeMap::new();
    let mut seen_resources: BTreeMap<String, bool> = BTreeMap::new();
    let mut outputs: BTreeMap<String, usize> = BTreeMap::new();
    let mut ready_since: Option<Instant> = None;
    let mut puts = 0;
    let mut deletes = 0;
    let deadline = tokio::time::sleep(args.timeout);
    tokio::pin!(deadline);
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Outcome::Interrupted,
            _ = &mut deadline => {
                let waiting = applied.iter()
                    .filter(|(ns, name)| phases.get(&format!("{ns}/{name}")).map(String::as_str) != Some("Ready"))
                    .map(|(ns, name)| format!("{ns}/{name} ({})", phases.get(&format!("{ns}/{name}")).cloned().unwrap_or_else(|| "no phase".into())))
                    .collect();
                return Outcome::TimedOut { waiting };
            }
            Some(event) = template_events.next() => {
                let Ok(template) = event else { continue };
                let key = format!("{}/{}", template.namespace().unwrap_or_default(), template.name_any());
                let status = template.status.clone().unwrap_or_default();
                let phase = status.phrase.clone().unwrap_or_default();
                if phases.get(&key) != Some(&phase) && !phase.is_empty() {
                    println!("{:>7.2}s  template {key}: {phase}  {}", started.elapsed().as_secs_f64(), status.message.clone().unwrap_or_default());
                    phases.insert(key.clone(), phase.clone());
                }
                let is_applied = applied.iter().any(|(ns, name)| format!("{ns}/{name}") == key);
                let current = template.metadata.generation == status.observed_generation;
                if is_applied && phase == "Failed" && current {
                    return Outcome::Failed { name: key, message: status.message.unwrap_or_default() };
                }
                outputs.insert(key.clone(), status.output_resources.len());
                let all_ready = applied.iter().all(|(ns, name)| phases.get(&format!("{ns}/{name}")).map(String::as_str) == Some("Ready"));
                if all_ready && ready_since.is_none() {
                    ready_since = Some(Instant::now());
                }
                if !all_ready {
                    ready_since = None;
                }
            }
            Some(event) = resource_events.next() => {
                let Ok(resource) = event else { continue };
                let key = format!("{}/{}", resource.namespace().unwrap_or_default(), resource.name_any());
                let deleting = resource.metadata.deletion_timestamp.is_some();
                match seen_resources.insert(key.clone(), deleting) {
                    None => println!("{:>7.2}s  + DeploymentResource {key} -> {}", started.elapsed().as_secs_f64(), resource.spec.id),
                    Some(false) if deleting => println!("{:>7.2}s  - DeploymentResource {key} (deleting)", started.elapsed().as_secs_f64()),
                    _ => {}
                }
            }
            _ = ticker.tick() => {
                // Every template Ready: once the watch has shown their
                // DeploymentResources too (or a second has passed), done.
                let shown = seen_resources.values().filter(|deleting| !**deleting).count();
                if ready_since.is_some_and(|since| shown >= outputs.values().sum::<usize>() || since.elapsed() > Duration::from_secs(1)) {
                    return Outcome::AllReady;
                }
                let stats = radius.stats();
                if stats.deployment_puts != puts || stats.deletes != deletes {
                    puts = stats.deployment_puts;
                    deletes = stats.deletes;
                    println!("{:>7.2}s  radius: {} deployment(s) started, {} delete(s), {} resource(s) in Radius", started.elapsed().as_secs_f64(), puts, deletes, stats.resources);
                }
            }
        }
    }
}

async fn summary(
    client: &Client,
    applied: &[(String, String)],
    radius: &radwasm_sim_radius::RadiusSim,
) {
    println!();
    println!(
        "{:<32} {:<20} {:>9}  MESSAGE",
        "TEMPLATE", "PHASE", "RESOURCES"
    );
    for (namespace, name) in applied {
        let api: Api<DeploymentTemplate> = Api::namespaced(client.clone(), namespace);
        let Ok(template) = api.get(name).await else {
            println!(
                "{:<32} {:<20} {:>9}  (gone)",
                format!("{namespace}/{name}"),
                "-",
                "-"
            );
            continue;
        };
        let status = template.status.unwrap_or_default();
        println!(
            "{:<32} {:<20} {:>9}  {}",
            format!("{namespace}/{name}"),
            status.phrase.unwrap_or_default(),
            status.output_resources.len(),
            status.message.unwrap_or_default()
        );
    }
    let stats = radius.stats();
    println!(
        "radius: {} deployment(s), {} resource(s) now in Radius",
        stats.deployment_puts, stats.resources
    );
}
