//! Radius's own control plane for tests: UCP (`ucpd`), the Applications
//! resource provider (`applications-rp`) and the dynamic resource provider
//! (`dynamic-rp`), built from Radius's source by `tests/radius/build.sh`,
//! with PostgreSQL from Debian for their stores, run as plain processes the
//! way Radius's contributors run them (its `build/configs/*.yaml`, with
//! `ucp.kind: direct`) against the real Kubernetes API server of
//! [`crate::realkube`].
//!
//! The one stand-in is the deployment engine, a C# service Radius publishes
//! only as an image: the Radius simulator runs in its deployment-engine mode
//! (`radwasm_sim_radius::EngineConfig`) at the address UCP's configuration
//! gives `Microsoft.Resources`, evaluates each template and PUTs its
//! resources back through UCP to the real providers.
//!
//! One deliberate fault: UCP routes `Applications.Messaging` to a port
//! where nothing listens, so scenarios can meet a resource provider that is
//! down without stopping the one the others use.
//!
//! `RADWASM_RADIUS_BIN_DIR` points at prebuilt binaries (and their `src/`)
//! instead of building them; `RADWASM_REAL_RADIUS_KEEP=1` keeps the temp dir
//! (configurations, logs, PostgreSQL's data) after the run. See
//! `docs/radius-real.md`.

mod config;
mod controller;
mod postgres;
mod recorder;
mod shared;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use crate::procs::{Procs, Spawn};
use crate::realkube::{self, ClusterHandle};

pub use controller::RadiusController;
pub use postgres::Postgres;
pub use recorder::{Recorded, Recorder};
pub use shared::shared;

use config::{Ports, install_encryption_key, provider_config, ucp_config, write_manifests};

/// A directory holding prebuilt `ucpd`, `applications-rp`, `dynamic-rp`,
/// `controller` and the source tree they came from (`src/`); when unset,
/// `tests/radius/build.sh` provides them.
pub const BIN_DIR_ENV: &str = "RADWASM_RADIUS_BIN_DIR";
/// Set to `1` to keep the temp dir after the run.
pub const KEEP_ENV: &str = "RADWASM_REAL_RADIUS_KEEP";
/// UCP's path base, as in Radius's configuration and its Kubernetes
/// APIService.
pub const PATH_BASE: &str = "/apis/api.ucp.dev/v1alpha3";
/// The api-version of UCP's own resources (resource groups).
pub const UCP_API_VERSION: &str = "2023-10-01-preview";

const BINARIES: [&str; 4] = ["ucpd", "applications-rp", "dynamic-rp", "controller"];
/// UCP registers the built-in resource providers after it serves; it logs
/// this once they are.
const UCP_REGISTERED: &str = "Successfully registered manifests";
/// Generous: two cores may be shared with a cargo build and other tests.
const UCP_READY: Duration = Duration::from_secs(180);
const PROVIDER_READY: Duration = Duration::from_secs(120);
/// The deployment engine's own time per deployment (see [`RealRadius`]).
pub const ENGINE_DEPLOY_TIME: Duration = Duration::from_secs(2);

/// Build or find the binaries; returns their directory.
pub async fn binaries() -> Result<PathBuf> {
    let how = format!(
        "Build them with `tests/radius/build.sh` (needs Go >= 1.26, Radius's source named by \
         RADIUS_SOURCE, and the first time the Go module proxy), or point {BIN_DIR_ENV} at a \
         directory with prebuilt ucpd, applications-rp, dynamic-rp, controller and their src/."
    );
    let dir = if let Some(dir) = std::env::var_os(BIN_DIR_ENV) {
        PathBuf::from(dir)
    } else {
        let script = realkube::repo_root().join("tests/radius/build.sh");
        let out = tokio::process::Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .output()
            .await
            .with_context(|| format!("cannot run {}. {how}", script.display()))?;
        if !out.status.success() {
            bail!(
                "{} failed ({}; its output is above): Radius's control plane is not \
                 available. {how}",
                script.display(),
                out.status
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(stdout.lines().last().unwrap_or_default().trim())
    };
    for bin in BINARIES {
        if !dir.join(bin).is_file() {
            bail!("{} is missing. {how}", dir.join(bin).display());
        }
    }
    Ok(dir)
}

/// A free port for each of Radius's listeners.
fn free_ports() -> Result<Ports> {
    let (p1, l1) = free_port()?;
    let (p2, l2) = free_port()?;
    let (p3, l3) = free_port()?;
    let (p4, l4) = free_port()?;
    let (p5, l5) = free_port()?;
    drop((l1, l2, l3, l4, l5));
    Ok(Ports {
        postgres: p1,
        down: p5,
        ucp: p2,
        applications_rp: p3,
        dynamic_rp: p4,
    })
}

/// Write in `d` the built-in providers' manifests and the configuration
/// files of ucpd and both resource providers (`engine_url`: the deployment
/// engine's).
fn write_configs(
    d: &Path,
    bins: &Path,
    ports: &Ports,
    db: &Postgres,
    engine_url: &str,
) -> Result<()> {
    let manifests = d.join("manifests");
    write_manifests(
        &bins.join("src/deploy/manifest/built-in-providers/dev"),
        &manifests,
        ports,
        engine_url,
    )?;
    let terraform = d.join("terraform");
    std::fs::create_dir_all(&terraform)?;
    let configs = [
        ("ucp.yaml", ucp_config(ports, db, engine_url, &manifests)),
        (
            "applications-rp.yaml",
            provider_config(
                "applications-rp",
                ports.applications_rp,
                ports.ucp,
                &db.url("applications_rp"),
                &terraform,
            ),
        ),
        (
            "dynamic-rp.yaml",
            provider_config(
                "dynamic-rp",
                ports.dynamic_rp,
                ports.ucp,
                &db.url("ucp"),
                &terraform,
            ),
        ),
    ];
    for (name, text) in &configs {
        std::fs::write(d.join(name), text)?;
    }
    Ok(())
}

fn free_port() -> Result<(u16, TcpListener)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("bind 127.0.0.1:0")?;
    Ok((listener.local_addr()?.port(), listener))
}

/// Radius's control plane, PostgreSQL and the deployment engine. Dropping
/// it stops them all and removes the temp dir.
pub struct RealRadius {
    // Field order is drop order: the processes go before their directory.
    procs: Procs,
    engine: radwasm_sim_radius::RadiusSim,
    ucp_url: String,
    /// How long `start` took once the binaries were there.
    pub startup: Duration,
    dir: tempfile::TempDir,
}

impl RealRadius {
    /// Build or find the binaries, then start PostgreSQL, the deployment
    /// engine, UCP and the two providers against `kube`, and wait until UCP
    /// has registered the providers and both answer.
    pub async fn start(kube: &ClusterHandle) -> Result<RealRadius> {
        let bins = binaries().await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_with(&bins, kube).await {
                Err(e) if attempt < 3 && format!("{e:#}").contains("address already in use") => {
                    eprintln!("realradius: a port was taken while starting, retrying: {e:#}");
                }
                other => return other,
            }
        }
    }

    async fn start_with(bins: &Path, kube: &ClusterHandle) -> Result<RealRadius> {
        let started = Instant::now();
        remove_stale_dirs();
        let mut dir = tempfile::Builder::new().prefix("realradius-").tempdir()?;
        if std::env::var(KEEP_ENV).is_ok_and(|v| v == "1") {
            dir.disable_cleanup(true);
            eprintln!("realradius: {KEEP_ENV}=1, keeping {}", dir.path().display());
        }
        let d = dir.path();
        std::fs::write(d.join("owner.pid"), std::process::id().to_string())?;
        // The providers read `$HOME/.kube/config`, not KUBECONFIG.
        let home = d.join("home");
        std::fs::create_dir_all(home.join(".kube"))?;
        std::fs::copy(&kube.kubeconfig, home.join(".kube/config"))
            .context("copy the cluster's kubeconfig for Radius")?;

        let ports = free_ports()?;
        let ucp_url = format!("http://127.0.0.1:{}{PATH_BASE}", ports.ucp);

        install_encryption_key(kube).await?;
        let mut procs = Procs::default();
        let fail = |procs: &Procs, e: anyhow::Error| -> anyhow::Error {
            anyhow!("Radius did not start: {e:#}{}", procs.log_tails(40))
        };
        let db = Postgres::start(&mut procs, d, ports.postgres)
            .await
            .map_err(|e| fail(&procs, e))?;
        let engine = radwasm_sim_radius::start(radwasm_sim_radius::SimConfig {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            engine: Some(radwasm_sim_radius::EngineConfig::new(&ucp_url)),
            // Each deployment spends this in the engine before its first
            // resource: long enough for a scenario to act mid-deployment.
            deploy_duration: ENGINE_DEPLOY_TIME,
            ..Default::default()
        })
        .await?;

        write_configs(d, bins, &ports, &db, &engine.base_url())?;
        let env = [
            ("HOME", home.display().to_string()),
            (
                "KUBECONFIG",
                home.join(".kube/config").display().to_string(),
            ),
        ];
        for (name, bin, config) in [
            ("ucpd", "ucpd", "ucp.yaml"),
            ("applications-rp", "applications-rp", "applications-rp.yaml"),
            ("dynamic-rp", "dynamic-rp", "dynamic-rp.yaml"),
        ] {
            let args = vec![format!("--config-file={}", d.join(config).display())];
            procs
                .spawn_with(Spawn {
                    env: &env,
                    ..Spawn::new(name, &bins.join(bin), &args, d)
                })
                .map_err(|e| fail(&procs, e))?;
            if name == "ucpd" {
                wait_for_ucp(&mut procs, d, &ucp_url)
                    .await
                    .map_err(|e| fail(&procs, e))?;
            }
        }
        for port in [ports.applications_rp, ports.dynamic_rp] {
            wait_for_port(&mut procs, port)
                .await
                .map_err(|e| fail(&procs, e))?;
        }
        Ok(RealRadius {
            procs,
            engine,
            ucp_url,
            startup: started.elapsed(),
            dir,
        })
    }

    /// What tests use: addresses and files, usable from any runtime.
    pub fn handle(&self) -> RadiusHandle {
        RadiusHandle {
            ucp_url: self.ucp_url.clone(),
            engine_url: self.engine.base_url(),
            dir: self.dir.path().to_path_buf(),
            pids: self.procs.pids(),
        }
    }

    /// The last lines of every log.
    pub fn log_tails(&self, lines: usize) -> String {
        self.procs.log_tails(lines)
    }
}

/// Wait until UCP answers and has registered the built-in providers.
async fn wait_for_ucp(procs: &mut Procs, dir: &Path, ucp_url: &str) -> Result<()> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let url = format!("{ucp_url}/planes/radius/local/resourceGroups?api-version={UCP_API_VERSION}");
    let deadline = Instant::now() + UCP_READY;
    loop {
        procs.check_running()?;
        let answers = http
            .get(&url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        let log = std::fs::read_to_string(dir.join("ucpd.log")).unwrap_or_default();
        if answers && log.contains(UCP_REGISTERED) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("UCP did not answer and register its providers within {UCP_READY:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn wait_for_port(procs: &mut Procs, port: u16) -> Result<()> {
    let deadline = Instant::now() + PROVIDER_READY;
    loop {
        procs.check_running()?;
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("nothing listens on 127.0.0.1:{port} after {PROVIDER_READY:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Temp dirs of runs killed before their exit handler ran (their owner
/// process is gone; the processes died with it by their parent-death
/// signal): PostgreSQL's data is large, so they are removed here.
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let named = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("realradius-"));
        let owner = std::fs::read_to_string(path.join("owner.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok());
        if named
            && let Some(owner) = owner
            && !Path::new(&format!("/proc/{owner}")).exists()
        {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// A running Radius as any test can use it, whatever tokio runtime it runs
/// on.
#[derive(Clone, Debug)]
pub struct RadiusHandle {
    /// UCP with its path base: `http://127.0.0.1:<port>/apis/api.ucp.dev/v1alpha3`.
    /// The controller's `--radius-url`.
    pub ucp_url: String,
    /// The deployment engine (the simulator): its `/_sim/stats` count the
    /// deployments that reached Radius.
    pub engine_url: String,
    /// The temp dir: configurations and the logs of every process.
    pub dir: PathBuf,
    /// PostgreSQL, ucpd, applications-rp and dynamic-rp (for measuring their
    /// CPU and memory).
    pub pids: Vec<u32>,
}

impl RadiusHandle {
    /// A UCP URL for `path` (`/planes/...`) with `api-version`.
    pub fn url(&self, path: &str, api_version: &str) -> String {
        format!("{}{path}?api-version={api_version}", self.ucp_url)
    }

    /// The deployment engine's counters (`/_sim/stats`).
    pub async fn engine_stats(&self) -> Result<serde_json::Value> {
        let http = reqwest::Client::builder().no_proxy().build()?;
        Ok(http
            .get(format!("{}/_sim/stats", self.engine_url))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?)
    }

    /// The last `lines` lines of one process's log (`ucpd`,
    /// `applications-rp`, `dynamic-rp`, `postgres`).
    pub fn log_tail(&self, name: &str, lines: usize) -> String {
        let text =
            std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}
