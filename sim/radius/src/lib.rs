//! A Radius (UCP) simulator: a real HTTP server on loopback that answers the
//! resource group, deployment, resource and long-running operation endpoints
//! the way Radius does, evaluates Bicep-compiled ARM templates far enough to
//! know which resources a deployment creates, and injects faults on demand.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let sim = radwasm_sim_radius::start(Default::default()).await?;
//! let base = sim.base_url(); // http://127.0.0.1:PORT
//! sim.faults().fail_next_deployments(1, "Conflict", "boom");
//! # let _ = base;
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! See `docs/radius-simulator.md` for the endpoints, the ARM subset and the
//! fault knobs.

pub mod arm;
mod engine;
pub mod error;
pub mod faults;
pub mod ids;
mod server;
mod store;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use arm::{
    EvaluatedResource, Evaluation, EvaluationRequest, ModuleDeployment, evaluate, evaluate_template,
};
pub use engine::EngineConfig;
pub use error::ArmError;
pub use faults::{FaultCounts, Faults, FaultsHandle, InjectedError, Settings, SettingsPatch};
pub use server::AGGREGATED_PATH;
pub use store::Stats;

use server::App;
use store::{ResourceGroup, Store};

/// How a simulator starts.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Where to listen; port 0 picks a free port. Default `127.0.0.1:0`.
    pub bind: SocketAddr,
    /// How long a deployment operation runs. Default 200 ms.
    pub deploy_duration: Duration,
    /// How long a delete operation runs (zero: DELETE answers 200 at once).
    /// Default 100 ms.
    pub delete_duration: Duration,
    /// `Retry-After` seconds on accepted operations and while in progress.
    /// Default 1.
    pub retry_after_secs: u64,
    /// Faults in force from the start (and after a reset).
    pub faults: Faults,
    /// Deployment-engine mode: deployments PUT their resources through the
    /// real UCP at this address instead of keeping them here (see
    /// `engine.rs`). Default: off.
    pub engine: Option<EngineConfig>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
            deploy_duration: Duration::from_millis(200),
            delete_duration: Duration::from_millis(100),
            retry_after_secs: 1,
            faults: Faults::default(),
            engine: None,
        }
    }
}

/// Start a simulator listening on `config.bind`.
pub async fn start(config: SimConfig) -> anyhow::Result<RadiusSim> {
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("binding the Radius simulator to {}", config.bind))?;
    let addr = listener
        .local_addr()
        .context("reading the Radius simulator's bound address")?;
    let timings = faults::Timings {
        deploy: config.deploy_duration,
        delete: config.delete_duration,
        retry_after_secs: config.retry_after_secs,
    };
    let app = App {
        store: Arc::new(Mutex::new(Store::default())),
        faults: FaultsHandle::new(config.faults.clone(), timings),
        initial: Arc::new((config.faults, timings)),
        local_addr: addr,
        engine: match config.engine {
            Some(engine) => Some(Arc::new(
                engine::Backend::new(engine).context("the deployment engine's HTTP client")?,
            )),
            None => None,
        },
    };
    let shutdown = CancellationToken::new();
    let connections = TaskTracker::new();
    let server = tokio::spawn(server::serve(
        listener,
        server::router(app.clone()),
        shutdown.clone(),
        connections.clone(),
    ));
    tracing::debug!(%addr, "Radius simulator listening");
    Ok(RadiusSim {
        addr,
        app,
        shutdown,
        server: Some(server),
        connections,
    })
}

/// A running simulator. Dropping it stops accepting connections; call
/// [`RadiusSim::shutdown`] to also wait for open connections to finish.
pub struct RadiusSim {
    addr: SocketAddr,
    app: App,
    shutdown: CancellationToken,
    server: Option<JoinHandle<()>>,
    connections: TaskTracker,
}

impl RadiusSim {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (no trailing slash): the Radius base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Switch faults and timings at run time.
    pub fn faults(&self) -> FaultsHandle {
        self.app.faults.clone()
    }

    /// Request counters and sizes.
    pub fn stats(&self) -> Stats {
        let mut stats = self.app.lock().stats();
        stats.faults = self.app.faults.counts();
        stats
    }

    /// Ids of the resources stored now (original casing), sorted by key.
    pub fn resource_ids(&self) -> Vec<String> {
        self.app
            .lock()
            .resources
            .values()
            .filter_map(|r| r.body.get("id").and_then(Value::as_str).map(str::to_string))
            .collect()
    }

    /// The body a GET of `id` returns, if the resource exists.
    pub fn resource(&self, id: &str) -> Option<Value> {
        self.app
            .lock()
            .resources
            .get(&ids::key(id))
            .map(|r| r.body.clone())
    }

    /// The body a GET of the deployment `id` returns, if it exists.
    pub fn deployment(&self, id: &str) -> Option<Value> {
        self.app
            .lock()
            .deployments
            .get(&ids::key(id))
            .map(|d| d.body(false))
    }

    /// Create `/planes/radius/local/resourceGroups/{name}` unless it exists.
    pub fn ensure_resource_group(&self, name: &str) {
        let id = ids::resource_group_id("/planes/radius/local", name);
        self.app
            .lock()
            .groups
            .entry(ids::key(&id))
            .or_insert_with(|| ResourceGroup {
                id,
                name: name.to_string(),
                location: "global".into(),
                tags: None,
            });
    }

    /// Forget everything stored and counted; faults and timings go back to
    /// the configured ones.
    pub fn reset(&self) {
        server::reset(&self.app);
    }

    /// Stop accepting, let open connections finish their current request
    /// (at most 5 s), and return.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        self.connections.close();
        if tokio::time::timeout(Duration::from_secs(5), self.connections.wait())
            .await
            .is_err()
        {
            tracing::warn!("Radius simulator connections did not finish within 5 s");
        }
    }
}

impl Drop for RadiusSim {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Command-line options of the stand-alone simulator.
#[derive(Debug, Clone, clap::Args)]
pub struct StandaloneArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 7443)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: IpAddr,
    /// How long a deployment takes, in milliseconds.
    #[arg(long, default_value_t = 200)]
    pub deploy_ms: u64,
    /// How long a delete takes, in milliseconds (0: synchronous).
    #[arg(long, default_value_t = 100)]
    pub delete_ms: u64,
    /// `Retry-After` seconds advertised for running operations.
    #[arg(long, default_value_t = 1)]
    pub retry_after_secs: u64,
}

impl StandaloneArgs {
    /// The simulator configuration these options describe.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            bind: SocketAddr::new(self.bind_address, self.port),
            deploy_duration: Duration::from_millis(self.deploy_ms),
            delete_duration: Duration::from_millis(self.delete_ms),
            retry_after_secs: self.retry_after_secs,
            faults: Faults::default(),
            engine: None,
        }
    }
}

/// Run a simulator until SIGINT or SIGTERM, printing its base URL first.
pub async fn run_standalone(args: StandaloneArgs) -> anyhow::Result<()> {
    let sim = start(args.config()).await?;
    println!("Radius simulator listening on {}", sim.base_url());
    println!(
        "  admin: {0}/_sim/stats, {0}/_sim/faults, {0}/_sim/reset",
        sim.base_url()
    );
    wait_for_signal().await?;
    println!("Radius simulator stopping");
    sim.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .context("installing the SIGTERM handler")?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result.context("waiting for SIGINT")?,
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}
