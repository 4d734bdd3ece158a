//! The Radius shared by the tests of one process: started on the first
//! call, owned by a thread that never ends, stopped by an exit handler.

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result, anyhow};

use super::{KEEP_ENV, RadiusHandle, RealRadius};
use crate::realkube::{self, ClusterHandle};

/// The Radius shared by every test of this process that asks for one.
static SHARED: OnceLock<std::result::Result<(ClusterHandle, RadiusHandle), String>> =
    OnceLock::new();
/// What the exit handler stops and removes: each process with its stop
/// signal, the temp dir, and whether to keep it.
struct Cleanup {
    stops: Vec<(u32, libc::c_int)>,
    dir: PathBuf,
    keep: bool,
}
static SHARED_CLEANUP: Mutex<Option<Cleanup>> = Mutex::new(None);

/// Radius on the shared real cluster ([`realkube::shared`]), started on the
/// first call; each test uses resource groups and namespaces of its own.
/// It lives until the process exits: its children are owned by a thread
/// that never ends, and an exit handler stops them (before the cluster's:
/// exit handlers run newest first) and removes the temp dir.
pub async fn shared() -> Result<(ClusterHandle, RadiusHandle)> {
    let shared = tokio::task::spawn_blocking(|| SHARED.get_or_init(start_shared).clone())
        .await
        .context("starting the shared Radius")?;
    shared.map_err(|e| anyhow!("{e}"))
}

fn start_shared() -> std::result::Result<(ClusterHandle, RadiusHandle), String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("realradius-shared".to_string())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = sender.send(Err(format!("tokio runtime: {e}")));
                    return;
                }
            };
            let started = runtime.block_on(async {
                let kube = realkube::shared().await?;
                let radius = RealRadius::start(&kube).await?;
                Ok::<_, anyhow::Error>((kube, radius))
            });
            match started {
                Ok((kube, radius)) => {
                    let keep = std::env::var(KEEP_ENV).is_ok_and(|v| v == "1");
                    if let Ok(mut cleanup) = SHARED_CLEANUP.lock() {
                        *cleanup = Some(Cleanup {
                            stops: radius.procs.stops(),
                            dir: radius.dir.path().to_path_buf(),
                            keep,
                        });
                    }
                    // SAFETY: registers a plain `extern "C" fn` with no arguments.
                    unsafe {
                        libc::atexit(stop_shared_radius);
                    }
                    let _ = sender.send(Ok((kube, radius.handle())));
                    // Own the children, the engine and the runtime for the
                    // rest of the process.
                    runtime.block_on(std::future::pending::<()>());
                    drop(radius);
                }
                Err(e) => {
                    let _ = sender.send(Err(format!("{e:#}")));
                }
            }
        });
    if let Err(e) = spawned {
        return Err(format!(
            "cannot start the thread owning the shared Radius: {e}"
        ));
    }
    receiver
        .recv()
        .unwrap_or_else(|_| Err("the thread starting the shared Radius died".to_string()))
}

/// At process exit: stop Radius's processes (newest first; PostgreSQL by
/// SIGQUIT), reap them, and remove the temp dir unless asked to keep it.
extern "C" fn stop_shared_radius() {
    let Some(cleanup) = SHARED_CLEANUP.lock().ok().and_then(|mut c| c.take()) else {
        return;
    };
    crate::procs::stop_all(&cleanup.stops);
    if !cleanup.keep {
        let _ = std::fs::remove_dir_all(cleanup.dir);
    }
}
