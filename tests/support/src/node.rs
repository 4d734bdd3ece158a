//! A real Kubernetes node for the node tests (`tests/e2e/node/`): the real
//! control plane ([`crate::realkube`]) bound to the bridge `radwasm0`
//! (10.233.0.1), plus containerd, kubelet, kube-proxy and kube-scheduler
//! brought up and down by `tests/node/node.sh`, and the controller image
//! built by `deploy/image/build.sh` and imported into containerd under
//! [`IMAGE_TAGS`]. One node per test process, started on first use and
//! shared by every node scenario (each in namespaces and Helm releases of
//! its own). Test infrastructure only; see `docs/node-tests.md`.
//!
//! Teardown has three layers: an exit handler drains the node and runs
//! `node.sh down`; a watchdog (a `setsid` process waiting on the node lock,
//! which this process holds until it dies) runs `node.sh down` after a
//! killed test process; and `node.sh up` runs `down` first.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::Api;

use crate::realkube::{self, ClusterHandle, Listen, RealCluster};

/// The bridge's address: kube-apiserver, the Radius simulator and anything
/// else pods must reach listen here.
pub const BRIDGE_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 233, 0, 1);
/// The node cluster's Service range; the `kubernetes` Service is its first
/// address.
pub const SERVICE_CIDR: &str = "10.233.1.0/24";
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 233, 1, 1);
/// The Node object's name.
pub const NODE_NAME: &str = "radwasm-node";
/// The controller image's repository in containerd; `image.pullPolicy=Never`.
pub const IMAGE_REPOSITORY: &str = "localhost/radwasm";
/// Two tags of the same controller image, so a scenario can switch between
/// them (upgrade, rollback).
pub const IMAGE_TAGS: [&str; 2] = ["node-a", "node-b"];
/// Set to `1` to skip the node tests (explicitly, with a message).
pub const SKIP_ENV: &str = "RADWASM_SKIP_NODE";
/// Where the configs and daemon logs go (default `target/node-run/`).
pub const LOG_DIR_ENV: &str = "RADWASM_NODE_LOG_DIR";
/// Held by the process whose node is up; also serialises node tests of
/// several processes (the bridge and the host paths are one per machine).
const LOCK_PATH: &str = "/run/lock/radwasm-node.lock";
/// Generous: two shared cores.
const NODE_READY: Duration = Duration::from_secs(240);

/// The shared node, as any test can use it from any tokio runtime.
#[derive(Clone, Debug)]
pub struct Node {
    /// The control plane on [`BRIDGE_ADDRESS`] (admin kubeconfig, CA, logs).
    pub cluster: ClusterHandle,
    /// Configs and daemon logs (`containerd.log`, `kubelet.log`, ...).
    pub log_dir: PathBuf,
    /// From `node.sh up` to the Node `Ready` (control plane included; not
    /// the builds or the image import).
    pub up_time: Duration,
}

/// True (after saying so) when the node tests are to be skipped.
pub fn skip_requested() -> bool {
    let skip = std::env::var(SKIP_ENV).is_ok_and(|v| v == "1" || v == "true");
    if skip {
        eprintln!("{SKIP_ENV} is set: skipping a test that needs a Kubernetes node");
    }
    skip
}

fn node_script() -> PathBuf {
    realkube::repo_root().join("tests/node/node.sh")
}

fn log_dir() -> PathBuf {
    std::env::var_os(LOG_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| realkube::repo_root().join("target/node-run"))
}

/// Run `node.sh <args>`; an error with its output if it fails.
fn node_sh(args: &[&str]) -> Result<Output> {
    let out = Command::new("bash")
        .arg(node_script())
        .args(args)
        .env(LOG_DIR_ENV, log_dir())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("run tests/node/node.sh {args:?}"))?;
    if !out.status.success() {
        bail!(
            "tests/node/node.sh {args:?} failed ({}):\n{}",
            out.status,
            crate::output_text(&out)
        );
    }
    Ok(out)
}

static SHARED: OnceLock<std::result::Result<Node, String>> = OnceLock::new();
/// What the exit handler needs.
struct Cleanup {
    /// The node's admin kubeconfig (to drain it).
    kubeconfig: PathBuf,
    /// The control plane's processes.
    pids: Vec<u32>,
    /// The control plane's temp dir, and whether to keep it.
    dir: PathBuf,
    keep: bool,
}
static SHARED_CLEANUP: Mutex<Option<Cleanup>> = Mutex::new(None);

/// The node shared by this process's tests, brought up on the first call,
/// with the controller image built from `radwasm_binary` (the first caller's
/// binary) imported as [`IMAGE_REPOSITORY`]:[`IMAGE_TAGS`]. Needs root.
pub async fn shared(radwasm_binary: &Path) -> Result<Node> {
    let binary = radwasm_binary.to_path_buf();
    let shared =
        tokio::task::spawn_blocking(move || SHARED.get_or_init(|| start_shared(&binary)).clone())
            .await
            .context("starting the shared node")?;
    shared.map_err(|e| anyhow!("{e}"))
}

fn start_shared(binary: &Path) -> std::result::Result<Node, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(format!(
            "the node tests need root (they create a bridge, iptables rules, mounts and \
             cgroups); run them as root or skip them explicitly with {SKIP_ENV}=1"
        ));
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    let binary = binary.to_path_buf();
    let spawned = std::thread::Builder::new()
        .name("node-shared".to_string())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = sender.send(Err(format!("tokio runtime: {e}")));
                    return;
                }
            };
            match runtime.block_on(bring_up(&binary)) {
                Ok((node, cluster)) => {
                    let _ = sender.send(Ok(node));
                    // Own the control plane's children (their parent-death
                    // signal follows this thread) for the rest of the process.
                    let _cluster = cluster;
                    loop {
                        std::thread::park();
                    }
                }
                Err(e) => {
                    let _ = sender.send(Err(format!("{e:#}")));
                }
            }
        });
    if let Err(e) = spawned {
        return Err(format!("cannot start the thread owning the node: {e}"));
    }
    receiver
        .recv()
        .unwrap_or_else(|_| Err("the thread starting the node died".to_string()))
}

/// Lock, watchdog, `node.sh up`, control plane, `node.sh start`, image,
/// and wait for the Node to be Ready. On an error the host is restored.
async fn bring_up(binary: &Path) -> Result<(Node, RealCluster)> {
    let lock = take_lock()?;
    // Held (open) for the rest of the process: the watchdog waits on it.
    std::mem::forget(lock);
    spawn_watchdog()?;
    let built = Instant::now();
    // The binaries first (a first build takes minutes), so that up_time
    // measures the node only.
    build_binaries().await?;
    let image_dir = tempfile::Builder::new().prefix("node-image-").tempdir()?;
    let archive = {
        let (binary, dir) = (binary.to_path_buf(), image_dir.path().to_path_buf());
        run_blocking(move || build_image(&binary, &dir)).await?
    };
    eprintln!(
        "node: binaries and controller image ready in {:.1} s",
        built.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    let cluster = match start_node(&archive).await {
        Ok(cluster) => cluster,
        Err(e) => {
            let tails = daemon_log_tails(&log_dir(), None, 40);
            let _ = node_sh(&["down"]);
            return Err(e.context(format!("the node did not come up{tails}")));
        }
    };
    let up_time = started.elapsed();
    eprintln!(
        "node: {NODE_NAME} Ready {:.1} s after `node.sh up` (logs in {})",
        up_time.as_secs_f64(),
        log_dir().display()
    );
    Ok((
        Node {
            cluster: cluster.handle(),
            log_dir: log_dir(),
            up_time,
        },
        cluster,
    ))
}

/// Build the node's binaries (`tests/node/build.sh`), and check the
/// control plane's are there (`realkube::binaries`).
async fn build_binaries() -> Result<()> {
    run_blocking(|| {
        let out = Command::new("bash")
            .arg(realkube::repo_root().join("tests/node/build.sh"))
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .context("run tests/node/build.sh")?;
        if !out.status.success() {
            bail!(
                "tests/node/build.sh failed ({}); its output is above",
                out.status
            );
        }
        Ok(())
    })
    .await?;
    realkube::binaries().await?;
    Ok(())
}

/// `node.sh up`, the control plane (recorded for the cleanup at exit),
/// `node.sh start`, the controller image (`archive`) imported, and the
/// Node Ready.
async fn start_node(archive: &Path) -> Result<RealCluster> {
    run_blocking(|| node_sh(&["up"]).map(drop)).await?;
    let cluster = RealCluster::start_on(Listen {
        address: IpAddr::V4(BRIDGE_ADDRESS),
        service_cidr: SERVICE_CIDR.to_string(),
        service_ip: IpAddr::V4(KUBERNETES_SERVICE_IP),
    })
    .await?;
    let handle = cluster.handle();
    // For `node.sh down`, should this process be killed: the control
    // plane's dir (its processes die with this one).
    std::fs::write(
        "/run/radwasm-node/control-plane-dir",
        handle.dir.display().to_string(),
    )
    .context("record the control plane's dir in /run/radwasm-node")?;
    if let Ok(mut cleanup) = SHARED_CLEANUP.lock() {
        *cleanup = Some(Cleanup {
            kubeconfig: handle.kubeconfig.clone(),
            pids: cluster.pids(),
            dir: handle.dir.clone(),
            keep: std::env::var(realkube::KEEP_ENV).is_ok_and(|v| v == "1"),
        });
    }
    // SAFETY: registers a plain `extern "C" fn` with no arguments.
    unsafe {
        libc::atexit(stop_shared_node);
    }
    let kubeconfig = handle.kubeconfig.display().to_string();
    let ca = handle.dir.join("ca.crt").display().to_string();
    run_blocking(move || node_sh(&["start", &kubeconfig, &ca]).map(drop)).await?;
    let archive = archive.display().to_string();
    run_blocking(move || import_image(&archive)).await?;
    wait_ready(&cluster).await?;
    Ok(cluster)
}

async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .context("a blocking step of the node's start panicked")?
}

fn take_lock() -> Result<File> {
    let lock = File::options()
        .create(true)
        .append(true)
        .open(LOCK_PATH)
        .with_context(|| format!("open {LOCK_PATH}"))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        eprintln!("node: another process's node is up; waiting for {LOCK_PATH}");
        // SAFETY: as above.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).context(format!("flock {LOCK_PATH}"));
        }
    }
    Ok(lock)
}

/// A process in a session of its own that outlives this one: it waits for
/// the node lock (free once this process is gone, however it ended), then
/// runs `node.sh down`.
fn spawn_watchdog() -> Result<()> {
    let dir = log_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let log = File::create(dir.join("watchdog.log")).context("create watchdog.log")?;
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "exec 9>> \"$1\"; flock 9; echo \"watchdog: test process gone, running node.sh down\"; \
         exec bash \"$2\" down",
        "node-watchdog",
        LOCK_PATH,
    ])
    .arg(node_script())
    .env(LOG_DIR_ENV, &dir)
    .stdin(Stdio::null())
    .stdout(log.try_clone()?)
    .stderr(log);
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().context("start the node watchdog")?;
    Ok(())
}

/// At process exit: stop the pods through kubelet, `node.sh down`, then
/// the control plane.
extern "C" fn stop_shared_node() {
    let Some(Cleanup {
        kubeconfig,
        pids,
        dir,
        keep,
    }) = SHARED_CLEANUP.lock().ok().and_then(|mut c| c.take())
    else {
        return;
    };
    let stopping = Instant::now();
    let _ = node_sh(&["drain", &kubeconfig.display().to_string()]);
    match node_sh(&["down"]) {
        Ok(_) => eprintln!(
            "node: drained and down in {:.1} s",
            stopping.elapsed().as_secs_f64()
        ),
        Err(e) => eprintln!("node: {e:#}"),
    }
    for pid in pids.iter().rev() {
        let Ok(pid) = libc::pid_t::try_from(*pid) else {
            continue;
        };
        // SAFETY: plain syscalls on our own children.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    }
    if !keep {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// podman with its configuration and storage in `dir` (vfs, runc,
/// cgroupfs: no daemon, nothing left behind).
fn podman(dir: &Path) -> Command {
    let mut command = Command::new("podman");
    command
        .env("CONTAINERS_CONF", dir.join("containers.conf"))
        .env("CONTAINERS_STORAGE_CONF", dir.join("storage.conf"))
        .stdin(Stdio::null());
    command
}

fn checked(out: std::io::Result<Output>, what: &str) -> Result<Output> {
    let out = out.with_context(|| format!("cannot run {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}",
            out.status,
            crate::output_text(&out)
        );
    }
    Ok(out)
}

/// `deploy/image/build.sh --binary <binary>`, saved as an OCI archive in
/// `dir`; returns the archive's path.
fn build_image(binary: &Path, dir: &Path) -> Result<PathBuf> {
    std::fs::write(
        dir.join("containers.conf"),
        "[containers]\ndefault_ulimits = []\n[engine]\nruntime = \"runc\"\n\
         cgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n",
    )?;
    std::fs::write(
        dir.join("storage.conf"),
        format!(
            "[storage]\ndriver = \"vfs\"\nrunroot = \"{}\"\ngraphroot = \"{}\"\n",
            dir.join("run").display(),
            dir.join("graph").display()
        ),
    )?;
    let tag = format!("{IMAGE_REPOSITORY}:{}", IMAGE_TAGS[0]);
    checked(
        Command::new("bash")
            .arg(realkube::repo_root().join("deploy/image/build.sh"))
            .arg("--binary")
            .arg(binary)
            .args(["--tag", &tag])
            .arg("--context")
            .arg(dir.join("context"))
            .env("CONTAINERS_CONF", dir.join("containers.conf"))
            .env("CONTAINERS_STORAGE_CONF", dir.join("storage.conf"))
            .stdin(Stdio::null())
            .output(),
        "deploy/image/build.sh",
    )?;
    let archive = dir.join("radwasm.oci.tar");
    checked(
        podman(dir)
            .args(["save", "--format", "oci-archive", "--output"])
            .arg(&archive)
            .arg(&tag)
            .output(),
        "podman save",
    )?;
    // The image's layers stay in the archive; podman's copy can go.
    let _ = podman(dir).args(["rmi", "--force", &tag]).output();
    Ok(archive)
}

/// Import the archive and give it both tags.
fn import_image(archive: &str) -> Result<()> {
    node_sh(&["import", archive])?;
    let ctr = |args: &[&str]| {
        checked(
            Command::new("ctr")
                .args(["--address", "/run/radwasm-node/containerd/containerd.sock"])
                .args(["-n", "k8s.io"])
                .args(args)
                .stdin(Stdio::null())
                .output(),
            &format!("ctr {args:?}"),
        )
    };
    let first = format!("{IMAGE_REPOSITORY}:{}", IMAGE_TAGS[0]);
    let listed = String::from_utf8_lossy(&ctr(&["images", "ls", "-q"])?.stdout).into_owned();
    if !listed.lines().any(|l| l == first) {
        bail!("containerd has no {first} after importing the controller image: {listed}");
    }
    for tag in &IMAGE_TAGS[1..] {
        ctr(&[
            "images",
            "tag",
            "--force",
            &first,
            &format!("{IMAGE_REPOSITORY}:{tag}"),
        ])?;
    }
    Ok(())
}

/// The Node registered and Ready, and kube-proxy's rules for the
/// `kubernetes` Service in place (pods reach the API server through them).
async fn wait_ready(cluster: &RealCluster) -> Result<()> {
    let nodes: Api<KubeNode> = Api::all(cluster.client());
    let deadline = Instant::now() + NODE_READY;
    loop {
        let ready = nodes.get_opt(NODE_NAME).await?.is_some_and(|n| {
            n.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        });
        let rules = Command::new("iptables")
            .args(["-t", "nat", "-S", "KUBE-SERVICES"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).contains(&format!("{KUBERNETES_SERVICE_IP}/32"))
            })
            .unwrap_or(false);
        if ready && rules {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "node {NODE_NAME} not Ready (Ready: {ready}, kube-proxy rules for the kubernetes \
                 Service: {rules}) after {NODE_READY:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The last `lines` of each daemon's log: containerd, kubelet, kube-proxy,
/// kube-scheduler and, given the control plane's dir, kube-apiserver and
/// kube-controller-manager.
pub fn daemon_log_tails(log_dir: &Path, cluster_dir: Option<&Path>, lines: usize) -> String {
    let mut logs: Vec<PathBuf> = ["containerd", "kubelet", "kube-proxy", "kube-scheduler"]
        .iter()
        .map(|name| log_dir.join(format!("{name}.log")))
        .collect();
    if let Some(dir) = cluster_dir {
        logs.push(dir.join("kube-apiserver.log"));
        logs.push(dir.join("kube-controller-manager.log"));
    }
    let mut out = String::new();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let tail = &all[all.len().saturating_sub(lines)..];
        out.push_str(&format!(
            "\n--- last {} lines of {} ---\n{}\n",
            tail.len(),
            log.display(),
            tail.join("\n")
        ));
    }
    out
}

impl Node {
    /// A new admin client on the caller's runtime.
    pub async fn client(&self) -> Result<kube::Client> {
        self.cluster.client().await
    }

    /// kubectl as the admin, bounded to 60 s.
    pub async fn kubectl(&self, args: &[&str]) -> Result<Output> {
        self.cluster.kubectl(args).await
    }

    /// helm (tests/helm/build.sh) as the admin, bounded to `within`.
    pub async fn helm(&self, args: &[&str], within: Duration) -> Result<Output> {
        let helm = helm_binary().await?;
        let child = tokio::process::Command::new(helm)
            .arg(format!(
                "--kubeconfig={}",
                self.cluster.kubeconfig.display()
            ))
            .args(args)
            .current_dir(realkube::repo_root())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(within, child)
            .await
            .map_err(|_| anyhow!("helm {args:?} ran over {within:?}"))?
            .with_context(|| format!("cannot run helm {args:?}"))
    }

    /// The daemons' and control plane's log tails, for a failure message.
    pub fn log_tails(&self, lines: usize) -> String {
        daemon_log_tails(&self.log_dir, Some(&self.cluster.dir), lines)
    }

    /// Everything worth reading when a scenario in `namespace` fails: its
    /// pods, their descriptions and logs, its events, and the daemons'
    /// log tails.
    pub async fn diagnostics(&self, namespace: &str) -> String {
        let mut out = String::new();
        let mut run = async |title: String, args: Vec<&str>| {
            let text = match self.kubectl(&args).await {
                Ok(o) => crate::output_text(&o),
                Err(e) => format!("{e:#}"),
            };
            out.push_str(&format!("\n--- {title} ---\n{text}"));
        };
        run(
            format!("pods in {namespace}"),
            vec!["-n", namespace, "get", "pods", "-o", "wide"],
        )
        .await;
        run(
            format!("events in {namespace}"),
            vec!["-n", namespace, "get", "events", "--sort-by=.lastTimestamp"],
        )
        .await;
        run(
            format!("pods described in {namespace}"),
            vec!["-n", namespace, "describe", "pods"],
        )
        .await;
        let names = self
            .kubectl(&["-n", namespace, "get", "pods", "-o", "name"])
            .await
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        for pod in names.lines() {
            run(
                format!("logs of {pod}"),
                vec![
                    "-n",
                    namespace,
                    "logs",
                    pod,
                    "--all-containers",
                    "--tail=100",
                ],
            )
            .await;
        }
        out.push_str(&self.log_tails(30));
        out
    }
}

/// `helm`, built (or reused) by tests/helm/build.sh.
pub async fn helm_binary() -> Result<PathBuf> {
    let script = realkube::repo_root().join("tests/helm/build.sh");
    let out = tokio::process::Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .await
        .with_context(|| format!("run {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed:\n{}", script.display(), crate::output_text(&out));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    Ok(PathBuf::from(
        stdout.lines().last().unwrap_or_default().trim(),
    ))
}

/// A Radius simulator on the bridge address (port picked free), reachable
/// from pods; read its counters with [`radwasm_sim_radius::RadiusSim::stats`].
/// Call after [`shared`] (the bridge must exist). It belongs to the
/// caller's runtime and stops when dropped.
pub async fn start_radius(
    mut config: radwasm_sim_radius::SimConfig,
) -> Result<radwasm_sim_radius::RadiusSim> {
    config.bind = SocketAddr::new(IpAddr::V4(BRIDGE_ADDRESS), 0);
    radwasm_sim_radius::start(config).await
}
