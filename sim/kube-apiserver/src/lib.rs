//! An embedded Kubernetes API server: real HTTP on loopback that kubectl and
//! kube-rs (client, watcher, Controller) accept unchanged, so the product can
//! be run, tested and benchmarked with no cluster. Behaviour follows the real
//! server where it matters to clients; every known gap is listed in
//! docs/apiserver.md.
//!
//! * [`store`]: objects, resourceVersion, history, write rules, GC, CRDs.
//! * [`http`]: discovery and the verbs, routed like the real server.
//! * [`body`]: media types; request bodies in JSON, YAML or, through
//!   [`protobuf`], the Kubernetes protobuf encoding.
//! * [`paging`]: continue tokens, each bound to the list it continues.
//! * [`faults`]: fault injection at run time.

mod body;
mod error;
mod faults;
mod http;
mod kinds;
mod openapi;
mod paging;
mod patch;
mod protobuf;
mod schema;
mod selectors;
mod store;
mod table;

/// The parsers behind list and PATCH requests (selectors, patch bodies and
/// request bodies), public only for the fuzz targets in `fuzz/`; not a
/// stable interface.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::body::decode_body;
    pub use crate::error::ApiError;
    pub use crate::patch::{PatchType, apply, strategic_merge};
    pub use crate::selectors::{Filter, Selector, fields_of};
}

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::sync::{oneshot, watch};

pub use faults::FaultsHandle;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// Address to listen on; port 0 picks a free one.
    pub bind: SocketAddr,
    /// Watch events kept for resuming watches; older versions get 410 Gone.
    pub history_limit: usize,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            bind: ([127, 0, 0, 1], 0).into(),
            history_limit: 100_000,
        }
    }
}

/// A running server. Dropping it does not stop it; call [`ApiServer::shutdown`].
pub struct ApiServer {
    addr: SocketAddr,
    faults: FaultsHandle,
    closing: Arc<watch::Sender<bool>>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

/// Start serving on `config.bind`.
pub async fn start(config: ApiServerConfig) -> anyhow::Result<ApiServer> {
    let listener = tokio::net::TcpListener::bind(config.bind)
        .await
        .with_context(|| format!("binding {}", config.bind))?;
    let addr = listener.local_addr()?;
    let store = Arc::new(Mutex::new(store::Store::new(config.history_limit)));
    let (drop_watches, _) = watch::channel(0u64);
    let faults = FaultsHandle {
        settings: Arc::default(),
        drop_watches: Arc::new(drop_watches),
        store: store.clone(),
        status_hold: Arc::default(),
    };
    let (closing, _) = watch::channel(false);
    let closing = Arc::new(closing);
    let state = http::AppState {
        store,
        faults: faults.clone(),
        address: addr.to_string(),
        closing: closing.clone(),
    };
    let app = axum::Router::new().fallback(http::handle).with_state(state);
    let (stop, stopped) = oneshot::channel::<()>();
    let watches = faults.clone();
    let stopping = closing.clone();
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
                // Open watches would keep graceful shutdown waiting forever.
                stopping.send_replace(true);
                watches.drop_watches();
            })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "embedded API server stopped");
        }
    });
    Ok(ApiServer {
        addr,
        faults,
        closing,
        stop: Some(stop),
        task,
    })
}

impl ApiServer {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig for this server (any bearer token is accepted).
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: radwasm\n  cluster:\n    server: {}\ncontexts:\n- name: radwasm\n  context:\n    cluster: radwasm\n    user: radwasm\n    namespace: default\ncurrent-context: radwasm\nusers:\n- name: radwasm\n  user:\n    token: radwasm-dev\n",
            self.base_url()
        )
    }

    pub fn write_kubeconfig(&self, path: &Path) -> anyhow::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
            .with_context(|| format!("writing kubeconfig {}", path.display()))
    }

    pub fn faults(&self) -> FaultsHandle {
        self.faults.clone()
    }

    /// Stop serving: open watches end, in-flight requests finish (at most
    /// 10 s; then the server is stopped where it is).
    pub async fn shutdown(mut self) {
        self.closing.send_replace(true);
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            tracing::warn!(
                "embedded API server: requests still open 10 s into shutdown; stopping anyway"
            );
            self.task.abort();
        }
    }
}

/// `radwasm sim apiserver`.
#[derive(Debug, Clone, clap::Args)]
pub struct StandaloneArgs {
    /// Port to listen on.
    #[arg(long, default_value_t = 6443)]
    pub port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind_address: std::net::IpAddr,
    /// Where to write the kubeconfig once the server is ready.
    #[arg(long, default_value = "kubeconfig")]
    pub kubeconfig: PathBuf,
}

/// Serve until SIGINT or SIGTERM, writing the kubeconfig once ready.
pub async fn run_standalone(args: StandaloneArgs) -> anyhow::Result<()> {
    let server = start(ApiServerConfig {
        bind: (args.bind_address, args.port).into(),
        ..Default::default()
    })
    .await?;
    server.write_kubeconfig(&args.kubeconfig)?;
    println!("embedded Kubernetes API server at {}", server.base_url());
    println!(
        "kubeconfig written to {}; try: kubectl --kubeconfig {} get namespaces",
        args.kubeconfig.display(),
        args.kubeconfig.display()
    );
    wait_for_signal().await;
    println!("stopping");
    server.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client re-watching just as shutdown begins must not hold the
    /// shutdown open until its watch times out (it did, for 290 s, in CI).
    #[tokio::test]
    async fn a_watch_that_starts_while_stopping_ends_at_once() {
        let server = start(ApiServerConfig::default()).await.expect("start");
        let config = kube::Config::new(server.base_url().parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        server.closing.send_replace(true);
        let request = ::http::Request::get("/api/v1/namespaces?watch=true&timeoutSeconds=300")
            .body(Vec::new())
            .expect("request");
        let ended = tokio::time::timeout(Duration::from_secs(30), client.request_text(request))
            .await
            .expect("the watch ends instead of running to its timeout");
        assert!(ended.is_ok(), "{ended:?}");
        server.shutdown().await;
    }
}
