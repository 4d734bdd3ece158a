//! This controller and Radius's own controller side by side, in one sitting,
//! against the same real Radius (UCP, applications-rp, dynamic-rp and
//! PostgreSQL built from Radius's source; the simulator as the deployment
//! engine) on the real Kubernetes control plane:
//!
//! ```sh
//! cargo bench -p radwasm --bench real_radius -- [--templates 200] [--rounds 1]
//! ```
//!
//! Each round runs both controllers in turn (radwasm first in odd rounds,
//! Radius's first in even ones) on `--templates` templates of an
//! environment and an application each, written in the shape Radius's CLI
//! writes: applied at once, then deleted at once. For each it prints time
//! to all Ready and to all gone, the CPU seconds of the controller, UCP,
//! applications-rp, dynamic-rp and PostgreSQL in each phase, the requests
//! the controller sent to UCP (through a recording proxy), and its
//! duplicate deployments (deployment PUTs beyond one per template).
//! Figures: `docs/benchmarks-real-radius.md`.
#![allow(clippy::too_many_lines, reason = "a test or benchmark scenario reads top to bottom as one story")]

use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::api::{Api, DeleteParams, ListParams};
use radwasm::crd::DeploymentTemplate;
use radwasm_test_support::realkube::{self, ClusterHandle, RealCluster};
use radwasm_test_support::realradius::{RadiusController, RadiusHandle, RealRadius, Recorder};
use radwasm_test_support::{cpu_seconds, output_text};
use serde_json::json;

const BOUND: Duration = Duration::from_secs(900);

struct Options {
    templates: usize,
    rounds: usize,
}

fn options() -> Result<Options> {
    let mut options = Options {
        templates: 200,
        rounds: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> Result<usize> {
            args.next()
                .with_context(|| format!("{name} needs a value"))?
                .parse()
                .with_context(|| format!("{name} takes a whole number"))
        };
        match arg.as_str() {
            "--templates" => options.templates = value("--templates")?,
            "--rounds" => options.rounds = value("--rounds")?,
            // What `cargo bench` passes to every bench target.
            "--bench" => {}
            other => bail!("unknown argument {other:?}: use --templates N, --rounds N"),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(async { run(&options()?).await }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("real_radius bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Which {
    Radwasm,
    Radius,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Radwasm => "radwasm",
            Which::Radius => "Radius's controller",
        }
    }
}

/// What one controller did on one load.
struct Figures {
    which: Which,
    ready: Duration,
    gone: Duration,
    /// CPU seconds per process, to Ready and from delete to gone.
    cpu_ready: Vec<(&'static str, f64)>,
    cpu_gone: Vec<(&'static str, f64)>,
    requests: usize,
    deployment_puts: usize,
    /// Radius resources left once every template was gone.
    left: usize,
}

async fn run(options: &Options) -> Result<()> {
    let cluster = RealCluster::start().await?;
    let kube = cluster.handle();
    install_crds(&kube).await?;
    RadiusController::install_crds(&kube).await?;
    let radius = RealRadius::start(&kube).await?;
    let handle = radius.handle();
    eprintln!(
        "real Radius up in {:.1} s; {} templates per controller, {} round(s)",
        radius.startup.as_secs_f64(),
        options.templates,
        options.rounds
    );
    for round in 0..options.rounds {
        let order = if round % 2 == 0 {
            [Which::Radwasm, Which::Radius]
        } else {
            [Which::Radius, Which::Radwasm]
        };
        for which in order {
            let namespace = format!(
                "bench-{round}-{}",
                if which == Which::Radwasm { "a" } else { "b" }
            );
            let figures = one(&kube, &handle, which, &namespace, options.templates).await?;
            print(&figures, options.templates);
        }
    }
    Ok(())
}

async fn install_crds(kube: &ClusterHandle) -> Result<()> {
    let root = realkube::repo_root();
    let out = kube
        .kubectl(&[
            "apply",
            "-f",
            &root
                .join("deploy/crds/radapp.io_v1alpha3.yaml")
                .display()
                .to_string(),
            "-f",
            &root
                .join("deploy/crds/radwasm.io_v1alpha1.yaml")
                .display()
                .to_string(),
        ])
        .await?;
    if !out.status.success() {
        bail!("installing the CRDs: {}", output_text(&out));
    }
    realkube::product_crds_established(&kube.client().await?).await
}

/// The templates, in the shape Radius's CLI writes, as one YAML stream.
fn manifests(namespace: &str, count: usize) -> String {
    let scope = format!("/planes/radius/local/resourceGroups/{namespace}");
    let mut out = String::new();
    for i in 0..count {
        let arm = json!({
            "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
            "languageVersion": "2.1-experimental",
            "contentVersion": "1.0.0.0",
            "imports": {"Radius": {"provider": "Radius", "version": "latest"}},
            "resources": {
                "env": {
                    "import": "Radius",
                    "type": "Applications.Core/environments@2023-10-01-preview",
                    "properties": {"name": format!("e{i}"), "properties": {
                        "compute": {"kind": "kubernetes", "namespace": format!("{namespace}-{i}")}}},
                },
                "app": {
                    "import": "Radius",
                    "type": "Applications.Core/applications@2023-10-01-preview",
                    "properties": {"name": format!("a{i}"), "properties": {
                        "environment": "[reference('env').id]"}},
                    "dependsOn": ["env"],
                },
            },
        });
        let template = json!({
            "apiVersion": "radapp.io/v1alpha3",
            "kind": "DeploymentTemplate",
            "metadata": {"name": format!("t{i:04}"), "namespace": namespace},
            "spec": {
                "template": arm.to_string(),
                "parameters": {},
                "providerConfig": json!({
                    "radius": {"type": "Radius", "value": {"scope": scope}},
                    "deployments": {"type": "Microsoft.Resources", "value": {"scope": scope}},
                }).to_string(),
            },
        });
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&template).unwrap_or_default());
    }
    out
}

/// `radwasm run` against `kube`, its Radius requests to `radius_url`.
fn start_radwasm(
    kube: &ClusterHandle,
    radius_url: &str,
    namespace: &str,
    log: &std::path::Path,
) -> Result<Child> {
    Command::new(env!("CARGO_BIN_EXE_radwasm"))
        .args(["run", "--kubeconfig"])
        .arg(&kube.kubeconfig)
        .args(["--radius-url", radius_url, "--namespace", namespace])
        .args(["--metrics-address", "127.0.0.1:0", "--drift-resync", "0"])
        .env("RUST_LOG", "info")
        .env_remove("HTTPS_PROXY")
        .env_remove("HTTP_PROXY")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?)
        .spawn()
        .context("start radwasm run")
}

/// CPU seconds of each measured process so far, with its children (each
/// PostgreSQL connection is a backend process of its own).
fn cpu(controller: u32, radius: &RadiusHandle) -> Vec<(&'static str, f64)> {
    // Spawned in this order by realradius.
    let names = ["PostgreSQL", "UCP", "applications-rp", "dynamic-rp"];
    let mut out = vec![("controller", tree_cpu_seconds(controller))];
    for (name, pid) in names.iter().zip(&radius.pids) {
        out.push((name, tree_cpu_seconds(*pid)));
    }
    out
}

/// A process's CPU seconds plus those of its live children and of the
/// children it has reaped (`cutime`, `cstime`).
fn tree_cpu_seconds(pid: u32) -> f64 {
    let own = cpu_seconds(pid).unwrap_or(0.0) + reaped_children_cpu(pid).unwrap_or(0.0);
    let children: f64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| parent_of(*child) == Some(pid))
        .map(|child| cpu_seconds(child).unwrap_or(0.0))
        .sum();
    own + children
}

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    Some(after_name.split_whitespace().map(str::to_string).collect())
}

/// Field 4 of stat(5).
fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// Fields 16 and 17 of stat(5), in seconds.
fn reaped_children_cpu(pid: u32) -> Option<f64> {
    let fields = stat_fields(pid)?;
    let cutime: f64 = fields.get(13)?.parse().ok()?;
    let cstime: f64 = fields.get(14)?.parse().ok()?;
    Some((cutime + cstime) / 100.0)
}

/// Applications and environments Radius still has in `namespace`'s group.
async fn left_in_radius(radius: &RadiusHandle, namespace: &str) -> Result<usize> {
    let http = reqwest::Client::new();
    let mut left = 0;
    for kind in ["applications", "environments"] {
        let path = format!(
            "/planes/radius/local/resourceGroups/{namespace}/providers/Applications.Core/{kind}"
        );
        let answer: serde_json::Value = http
            .get(radius.url(&path, "2023-10-01-preview"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        left += answer["value"].as_array().map_or(0, Vec::len);
    }
    Ok(left)
}

fn minus(
    after: &[(&'static str, f64)],
    before: &[(&'static str, f64)],
) -> Vec<(&'static str, f64)> {
    after
        .iter()
        .zip(before)
        .map(|((name, a), (_, b))| (*name, a - b))
        .collect()
}

async fn one(
    kube: &ClusterHandle,
    radius: &RadiusHandle,
    which: Which,
    namespace: &str,
    count: usize,
) -> Result<Figures> {
    let out = kube.kubectl(&["create", "namespace", namespace]).await?;
    if !out.status.success() {
        bail!("create namespace {namespace}: {}", output_text(&out));
    }
    let recorder = Recorder::start(&radius.ucp_url).await?;
    let dir = tempfile::tempdir()?;
    enum Running {
        Ours(Child),
        Theirs(RadiusController),
    }
    let running = match which {
        Which::Radwasm => Running::Ours(start_radwasm(
            kube,
            &recorder.url(),
            namespace,
            &dir.path().join("radwasm.log"),
        )?),
        Which::Radius => Running::Theirs(RadiusController::start(kube, &recorder.url()).await?),
    };
    let pid = match &running {
        Running::Ours(child) => child.id(),
        Running::Theirs(controller) => controller.pid(),
    };
    // Let the controller start its watches before the load arrives.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let client = kube.client().await?;
    let templates: Api<DeploymentTemplate> = Api::namespaced(client, namespace);
    let path = dir.path().join("templates.yaml");
    std::fs::write(&path, manifests(namespace, count))?;

    let before = cpu(pid, radius);
    let started = Instant::now();
    let out = kube
        .kubectl(&["apply", "-f", &path.display().to_string()])
        .await?;
    if !out.status.success() {
        bail!("kubectl apply: {}", output_text(&out));
    }
    wait(&templates, count, "Ready", |ready, _| ready == count).await?;
    let ready = started.elapsed();
    let at_ready = cpu(pid, radius);

    let deleting = Instant::now();
    templates
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait(&templates, count, "gone", |_, left| left == 0).await?;
    let gone = deleting.elapsed();
    let at_gone = cpu(pid, radius);
    let left = left_in_radius(radius, namespace).await?;
    let requests = recorder.requests().len();
    let deployment_puts = recorder.count("PUT", "/Microsoft.Resources/deployments/");
    match running {
        Running::Ours(mut child) => {
            let _ = child.kill();
            let _ = child.wait();
        }
        Running::Theirs(controller) => drop(controller),
    }
    Ok(Figures {
        which,
        ready,
        gone,
        cpu_ready: minus(&at_ready, &before),
        cpu_gone: minus(&at_gone, &at_ready),
        requests,
        deployment_puts,
        left,
    })
}

/// Poll the templates until `done(ready, left)` holds.
async fn wait(
    templates: &Api<DeploymentTemplate>,
    count: usize,
    what: &str,
    done: impl Fn(usize, usize) -> bool,
) -> Result<()> {
    let deadline = Instant::now() + BOUND;
    loop {
        let list = templates.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|t| t.status.as_ref().and_then(|s| s.phrase.as_deref()) == Some("Ready"))
            .count();
        if done(ready, list.items.len()) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "not all {count} templates {what} within {BOUND:?}: {ready} Ready, {} left",
                list.items.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn print(f: &Figures, count: usize) {
    println!("== {} ({count} templates)", f.which.name());
    println!(
        "to Ready {:.1} s, to gone {:.1} s",
        f.ready.as_secs_f64(),
        f.gone.as_secs_f64()
    );
    let cells = |cpu: &[(&'static str, f64)]| {
        cpu.iter()
            .map(|(name, s)| format!("{name} {s:.1} s"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("CPU to Ready: {}", cells(&f.cpu_ready));
    println!("CPU to gone: {}", cells(&f.cpu_gone));
    println!(
        "requests to UCP {}, deployment PUTs {}, duplicate deployments {}, Radius resources left {}",
        f.requests,
        f.deployment_puts,
        f.deployment_puts.saturating_sub(count),
        f.left
    );
}
