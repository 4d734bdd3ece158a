//! Starting the stand-ins and the controller process, and waiting on what
//! the controller does. Every server binds 127.0.0.1 and stops with the test.
//!
//! The Kubernetes API server is the embedded one (`sim/kube-apiserver`, one
//! per scenario) or the real control plane (`realkube`, one per test
//! process, each scenario in a namespace of its own, the controller running
//! as the ServiceAccount of `deploy/rbac.yaml`): `RADWASM_E2E_APISERVER`
//! chooses, see [`Backend`].

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, CustomResourceExt};
use radwasm::crd::{
    DeploymentResource, DeploymentTemplate, DeploymentTemplateSpec, ProviderConfig,
};

pub const SCOPE: &str = "/planes/radius/local/resourceGroups/default";
/// The namespace scenarios use on the embedded API server (on the real one,
/// each scenario has its own: [`System::namespace`]).
pub const NS: &str = "default";

/// Chooses the Kubernetes API server the scenarios run against.
pub const BACKEND_ENV: &str = "RADWASM_E2E_APISERVER";

/// Which Kubernetes API server a [`System`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sim/kube-apiserver`, started for each scenario (the default).
    Embedded,
    /// The real etcd, kube-apiserver and kube-controller-manager
    /// (`realkube`), one cluster per test process.
    Real,
}

impl Backend {
    /// From `RADWASM_E2E_APISERVER`: `embedded` (or unset) or `real`.
    pub fn from_env() -> Backend {
        match std::env::var(BACKEND_ENV).as_deref() {
            Err(_) | Ok("") | Ok("embedded") => Backend::Embedded,
            Ok("real") => Backend::Real,
            Ok(other) => panic!("{BACKEND_ENV}={other:?}: use `embedded` (the default) or `real`"),
        }
    }
}

/// For a scenario that needs something only the embedded API server has:
/// on the real one it says so on stderr and returns true (the scenario
/// then returns at once). `why` is the reason, as in the scenario × server
/// table of docs/apiserver.md.
pub fn embedded_only(why: &str) -> bool {
    let real = Backend::from_env() == Backend::Real;
    if real {
        eprintln!("SKIPPED on the real API server (embedded only): {why}");
    }
    real
}

/// A namespace name for one scenario on the shared real cluster: unique in
/// this process, and readable (the scenario's name) when looking at the
/// cluster.
fn scenario_namespace() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let test = std::thread::current()
        .name()
        .and_then(|name| name.rsplit("::").next().map(str::to_string))
        .unwrap_or_default();
    let slug: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let name = format!("e2e-{n}-{slug}");
    name.chars()
        .take(63)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

/// A whole system: API server, Radius, and (while running) the controller.
pub struct System {
    /// The embedded API server (`None` on the real one).
    pub apiserver: Option<radwasm_sim_apiserver::ApiServer>,
    pub radius: Option<radwasm_sim_radius::RadiusSim>,
    /// The test's client: admin on the real server.
    pub client: Client,
    pub dir: tempfile::TempDir,
    /// The controller's kubeconfig: on the real server, a token of the
    /// ServiceAccount `radwasm-system/radwasm` of `deploy/rbac.yaml`.
    pub kubeconfig: PathBuf,
    /// Where the scenario's objects go: [`NS`] on the embedded server, a
    /// namespace of its own on the real one.
    pub namespace: String,
    /// The shared real cluster (real backend only).
    pub cluster: Option<crate::realkube::ClusterHandle>,
    controller: Option<Child>,
    extra_args: Vec<String>,
    /// Set when the controller reaches Radius through the aggregated path.
    aggregator: Option<Aggregator>,
    /// Set on the third world: Radius's own control plane (`realradius`)
    /// instead of the simulator, on the real API server.
    pub real_radius: Option<crate::realradius::RadiusHandle>,
    /// Set by [`System::point_radius_at`].
    radius_override: Option<String>,
}

impl System {
    /// Start both stand-ins, install the CRDs, start the controller.
    pub async fn start(extra_args: &[&str]) -> System {
        Self::start_with(extra_args, Duration::from_millis(300)).await
    }

    pub async fn start_with(extra_args: &[&str], deploy_time: Duration) -> System {
        Self::start_on(Backend::from_env(), extra_args, deploy_time).await
    }

    /// [`System::start_with`] on a given API server, whatever
    /// `RADWASM_E2E_APISERVER` says.
    pub async fn start_on(backend: Backend, extra_args: &[&str], deploy_time: Duration) -> System {
        Self::start_as(
            backend,
            crate::realkube::CONTROLLER_SERVICE_ACCOUNT,
            extra_args,
            deploy_time,
        )
        .await
    }

    /// [`System::start_on`], the controller running (on the real server) as
    /// ServiceAccount `service_account` of namespace `radwasm-system`
    /// instead of `radwasm`, e.g. one bound to a narrower role.
    pub async fn start_as(
        backend: Backend,
        service_account: &str,
        extra_args: &[&str],
        deploy_time: Duration,
    ) -> System {
        Self::start_in(backend, None, service_account, extra_args, deploy_time).await
    }

    /// [`System::start_as`] on the real API server of `cluster` (prepared
    /// with `realkube::prepare_for_product`) rather than the shared one:
    /// for a scenario that changes what all scenarios on a cluster share,
    /// such as the CRDs.
    pub async fn start_on_cluster(
        cluster: crate::realkube::ClusterHandle,
        extra_args: &[&str],
    ) -> System {
        Self::start_in(
            Backend::Real,
            Some(cluster),
            crate::realkube::CONTROLLER_SERVICE_ACCOUNT,
            extra_args,
            Duration::from_millis(300),
        )
        .await
    }

    async fn start_in(
        backend: Backend,
        cluster: Option<crate::realkube::ClusterHandle>,
        service_account: &str,
        extra_args: &[&str],
        deploy_time: Duration,
    ) -> System {
        let radius = radwasm_sim_radius::start(radwasm_sim_radius::SimConfig {
            deploy_duration: deploy_time,
            delete_duration: Duration::from_millis(100),
            retry_after_secs: 0,
            ..Default::default()
        })
        .await
        .expect("start the Radius simulator");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let mut extra_args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        let (apiserver, client, namespace, cluster) = match backend {
            Backend::Embedded => {
                let (apiserver, client) = Self::embedded(&kubeconfig).await;
                (Some(apiserver), client, NS.to_string(), None)
            }
            Backend::Real => {
                let (cluster, client, namespace) =
                    Self::real(&kubeconfig, service_account, cluster).await;
                let given = extra_args.clone();
                let has = |flag: &str| given.iter().any(|a| a == flag);
                // Its own namespace, so scenarios sharing the cluster never
                // see each other's objects; its own Lease, in the namespace
                // where deploy/rbac.yaml lets the ServiceAccount hold one.
                if !has("--namespace") {
                    extra_args.extend(["--namespace".to_string(), namespace.clone()]);
                }
                // Policy ConfigMaps live in the controller's namespace, where
                // deploy/rbac.yaml lets it read them.
                if !has("--policy-namespace") {
                    extra_args.extend([
                        "--policy-namespace".to_string(),
                        crate::realkube::CONTROLLER_NAMESPACE.to_string(),
                    ]);
                }
                // ReconcilePolicies are cluster-scoped and every controller
                // that loads one writes its status: each scenario's
                // controller loads only the policies it labels
                // (policies::create_policy), so controllers with other
                // flags never overwrite that status.
                if !has("--policy-label-selector") {
                    extra_args.extend([
                        "--policy-label-selector".to_string(),
                        format!("{}={namespace}", crate::policies::SYSTEM_LABEL),
                    ]);
                }
                if has("--leader-elect") && !has("--leader-election-namespace") {
                    extra_args.extend([
                        "--leader-election-namespace".to_string(),
                        crate::realkube::CONTROLLER_NAMESPACE.to_string(),
                    ]);
                }
                if has("--leader-elect") && !has("--leader-election-lease") {
                    extra_args.extend([
                        "--leader-election-lease".to_string(),
                        format!("radwasm-{namespace}"),
                    ]);
                }
                (None, client, namespace, Some(cluster))
            }
        };
        let mut system = System {
            apiserver,
            radius: Some(radius),
            client,
            dir,
            kubeconfig,
            namespace,
            cluster,
            controller: None,
            extra_args,
            aggregator: None,
            real_radius: None,
            radius_override: None,
        };
        system.start_controller();
        system
    }

    /// The third world: the real API server (a namespace of the scenario's
    /// own, the controller as the ServiceAccount of `deploy/rbac.yaml`) and
    /// Radius's own control plane (UCP, applications-rp, dynamic-rp,
    /// PostgreSQL; the simulator only as the deployment engine), shared by
    /// the scenarios of this process. The controller talks to UCP directly
    /// (`--radius-url`).
    pub async fn start_real_radius(extra_args: &[&str]) -> System {
        let (cluster, radius) = crate::realradius::shared()
            .await
            .unwrap_or_else(|e| panic!("Radius's control plane: {e:#}"));
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        let (cluster, client, namespace) = Self::real(
            &kubeconfig,
            crate::realkube::CONTROLLER_SERVICE_ACCOUNT,
            Some(cluster),
        )
        .await;
        Self::with_real_radius(
            cluster, radius, client, namespace, dir, kubeconfig, extra_args,
        )
    }

    /// [`System::start_real_radius`] on another cluster and Radius (the
    /// node's), the controller running with the admin kubeconfig: that
    /// cluster is not prepared with `deploy/rbac.yaml`, whose objects the
    /// chart the node scenarios install would then conflict with. The
    /// product's CRDs must be installed.
    pub async fn start_real_radius_on(
        cluster: crate::realkube::ClusterHandle,
        radius: crate::realradius::RadiusHandle,
        extra_args: &[&str],
    ) -> System {
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::copy(&cluster.kubeconfig, &kubeconfig).expect("copy the admin kubeconfig");
        let client = cluster.client().await.expect("admin client");
        let namespace = scenario_namespace();
        let mut object = Namespace::default();
        object.metadata.name = Some(namespace.clone());
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &object)
            .await
            .expect("create the scenario's namespace");
        Self::with_real_radius(
            cluster, radius, client, namespace, dir, kubeconfig, extra_args,
        )
    }

    fn with_real_radius(
        cluster: crate::realkube::ClusterHandle,
        radius: crate::realradius::RadiusHandle,
        client: Client,
        namespace: String,
        dir: tempfile::TempDir,
        kubeconfig: PathBuf,
        extra_args: &[&str],
    ) -> System {
        let mut args: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        args.extend([
            "--namespace".to_string(),
            namespace.clone(),
            "--policy-namespace".to_string(),
            crate::realkube::CONTROLLER_NAMESPACE.to_string(),
            "--policy-label-selector".to_string(),
            format!("{}={namespace}", crate::policies::SYSTEM_LABEL),
        ]);
        let mut system = System {
            apiserver: None,
            radius: None,
            client,
            dir,
            kubeconfig,
            namespace,
            cluster: Some(cluster),
            controller: None,
            extra_args: args,
            aggregator: None,
            real_radius: Some(radius),
            radius_override: None,
        };
        system.start_controller();
        system
    }

    /// Send the controller's Radius requests to `url` from its next start
    /// (a recording proxy in front of Radius, say).
    pub fn point_radius_at(&mut self, url: String) {
        self.radius_override = Some(url);
    }

    /// Where the controller sends Radius requests: the simulator, or UCP on
    /// the third world.
    pub fn radius_url(&self) -> String {
        if let Some(url) = &self.radius_override {
            return url.clone();
        }
        match &self.real_radius {
            Some(radius) => radius.ucp_url.clone(),
            None => self.radius().base_url(),
        }
    }

    /// An embedded API server with the CRDs installed, its kubeconfig
    /// written to `kubeconfig`.
    async fn embedded(kubeconfig: &Path) -> (radwasm_sim_apiserver::ApiServer, Client) {
        let apiserver =
            radwasm_sim_apiserver::start(radwasm_sim_apiserver::ApiServerConfig::default())
                .await
                .expect("start the API server");
        apiserver.write_kubeconfig(kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::from_yaml(&apiserver.kubeconfig_yaml())
                .expect("kubeconfig yaml"),
            &Default::default(),
        )
        .await
        .expect("kube config");
        let client = Client::try_from(config).expect("client");
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in [
            DeploymentTemplate::crd(),
            DeploymentResource::crd(),
            radwasm::reconcile_policy::ReconcilePolicy::crd(),
        ] {
            crds.create(&PostParams::default(), &crd)
                .await
                .expect("install CRD");
        }
        (apiserver, client)
    }

    /// The shared real cluster (started by the first scenario that asks,
    /// with the CRDs and deploy/rbac.yaml), a namespace of this scenario's
    /// own on it, an admin client for the test, and the ServiceAccount's
    /// kubeconfig for the controller written to `kubeconfig`.
    async fn real(
        kubeconfig: &Path,
        service_account: &str,
        cluster: Option<crate::realkube::ClusterHandle>,
    ) -> (crate::realkube::ClusterHandle, Client, String) {
        let cluster = match cluster {
            Some(cluster) => cluster,
            None => crate::realkube::shared()
                .await
                .unwrap_or_else(|e| panic!("the real API server ({BACKEND_ENV}=real): {e:#}")),
        };
        let client = cluster.client().await.expect("admin client");
        let namespace = scenario_namespace();
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let mut object = Namespace::default();
        object.metadata.name = Some(namespace.clone());
        namespaces
            .create(&PostParams::default(), &object)
            .await
            .expect("create the scenario's namespace");
        cluster
            .kubeconfig_for_service_account(
                &client,
                crate::realkube::CONTROLLER_NAMESPACE,
                service_account,
                Some(kubeconfig),
            )
            .await
            .expect("a token for the controller's ServiceAccount");
        (cluster, client, namespace)
    }

    /// Like [`System::start`], but the controller runs as in a cluster: no
    /// `--radius-url`, so it reaches Radius through the API server's
    /// aggregated path `/apis/api.ucp.dev/v1alpha3`, served here by an
    /// aggregation proxy in front of the API server and the simulator.
    pub async fn start_aggregated() -> System {
        let mut system = Self::start_on(Backend::Embedded, &[], Duration::from_millis(300)).await;
        system.kill_controller();
        let apiserver = system.apiserver.as_ref().expect("apiserver").base_url();
        let aggregator = Aggregator::start(apiserver.clone(), system.radius().base_url()).await;
        let kubeconfig = system.dir.path().join("aggregated-kubeconfig");
        let yaml = system
            .apiserver
            .as_ref()
            .expect("apiserver")
            .kubeconfig_yaml()
            .replace(&apiserver, &aggregator.base_url());
        std::fs::write(&kubeconfig, yaml).expect("write kubeconfig");
        system.kubeconfig = kubeconfig;
        system.aggregator = Some(aggregator);
        system.start_controller();
        system
    }

    /// Authorization headers the aggregation proxy saw on Radius requests.
    pub fn radius_authorizations(&self) -> Vec<String> {
        self.aggregator
            .as_ref()
            .map(|a| a.radius_authorizations())
            .unwrap_or_default()
    }

    /// Where the controller reads `ReconcilePolicy` ConfigMaps: its own
    /// namespace on the real server, `default` on the embedded one.
    pub fn policy_namespace(&self) -> &'static str {
        if self.cluster.is_some() {
            crate::realkube::CONTROLLER_NAMESPACE
        } else {
            "default"
        }
    }

    pub fn radius(&self) -> &radwasm_sim_radius::RadiusSim {
        self.radius.as_ref().expect("radius running")
    }

    /// Start `radwasm run` against the stand-ins.
    pub fn start_controller(&mut self) {
        let child = self.spawn_controller();
        self.controller = Some(child);
    }

    /// Start one more `radwasm run` process (same arguments, its own log
    /// file); the caller owns it and must kill it.
    pub fn spawn_controller(&self) -> Child {
        self.spawn_controller_as(None, &[])
    }

    /// [`System::spawn_controller`] with more arguments, and `POD_NAME` set
    /// to `pod_name` (the `reportingInstance` of the Events it records).
    pub fn spawn_controller_as(&self, pod_name: Option<&str>, more_args: &[&str]) -> Child {
        let log = std::fs::File::create(self.dir.path().join(format!(
            "controller-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        )))
        .expect("log file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_radwasm"));
        command.arg("run").arg("--kubeconfig").arg(&self.kubeconfig);
        if self.aggregator.is_none() {
            command.arg("--radius-url").arg(self.radius_url());
        }
        command
            .arg("--metrics-address")
            .arg("127.0.0.1:0")
            .args(&self.extra_args)
            .args(more_args)
            .env("RUST_LOG", "radwasm=debug,info")
            // Every address is on loopback: never through a proxy.
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .stdout(Stdio::null())
            .stderr(log);
        // The controller dies with the test that started it, also when the
        // test panics before it stops a controller it holds itself (a
        // standby, say) or the test process is killed.
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(pod_name) = pod_name {
            command.env("POD_NAME", pod_name);
        }
        command.spawn().expect("start radwasm run")
    }

    /// Whether the controller process is still running.
    pub fn controller_running(&mut self) -> bool {
        self.controller
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// SIGKILL the controller (no graceful shutdown).
    pub fn kill_controller(&mut self) {
        if let Some(mut child) = self.controller.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stop the controller with SIGTERM and wait for a clean exit.
    pub fn stop_controller(&mut self) -> std::process::ExitStatus {
        let mut child = self.controller.take().expect("controller running");
        radwasm_test_support::terminate(&mut child, Duration::from_secs(20))
            .expect("controller did not stop within 20 s of SIGTERM")
    }

    /// Wait until a controller's log mentions `text` (bounded, 30 s).
    pub async fn wait_for_log(&self, text: &str) {
        self.wait_for_log_within(text, Duration::from_secs(30))
            .await;
    }

    /// Wait until a controller's log mentions `text`, for at most `bound`.
    pub async fn wait_for_log_within(&self, text: &str, bound: Duration) {
        let deadline = Instant::now() + bound;
        while !self.all_logs().contains(text) {
            assert!(
                Instant::now() < deadline,
                "the controller never logged {text:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The Prometheus text the (latest) controller serves on `/metrics`.
    pub async fn metrics(&self) -> String {
        self.scrape("/metrics").await
    }

    /// The metrics (and probe) address of every controller this scenario
    /// started, oldest first, once each has logged it.
    pub fn probe_addresses(&self) -> Vec<String> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        paths.sort();
        paths
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .filter_map(|path| {
                std::fs::read_to_string(path)
                    .unwrap_or_default()
                    .lines()
                    .filter(|line| line.contains("metrics and probes"))
                    .filter_map(|line| line.split("bound=").nth(1))
                    .filter_map(|rest| rest.split_whitespace().next())
                    .map(str::to_string)
                    .next()
            })
            .collect()
    }

    /// GET `path` from the controller's metrics server at `address`: the
    /// status code and the body.
    pub async fn probe(address: &str, path: &str) -> (u16, String) {
        let response = reqwest::get(format!("http://{address}{path}"))
            .await
            .unwrap_or_else(|e| panic!("GET {path} from {address}: {e}"));
        let code = response.status().as_u16();
        (code, response.text().await.expect("response body"))
    }

    /// GET `path` from the controller's metrics server.
    pub async fn scrape(&self, path: &str) -> String {
        let mut logs = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
            {
                logs.push_str(&std::fs::read_to_string(path).unwrap_or_default());
            }
        }
        let address = logs
            .lines()
            .filter(|line| line.contains("metrics and probes"))
            .filter_map(|line| line.split("bound=").nth(1))
            .filter_map(|rest| rest.split_whitespace().next())
            .next_back()
            .expect("the controller logged its metrics address")
            .to_string();
        reqwest::get(format!("http://{address}{path}"))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"))
            .text()
            .await
            .expect("response body")
    }

    /// The controller's log so far (for assertion messages).
    pub fn logs(&self) -> String {
        let text = self.all_logs();
        let keep = text.len().saturating_sub(6000);
        text[text
            .char_indices()
            .find(|(i, _)| *i >= keep)
            .map(|(i, _)| i)
            .unwrap_or(0)..]
            .to_string()
    }

    /// Everything every controller of this scenario logged (for searching;
    /// [`System::logs`] keeps the tail for messages).
    pub fn all_logs(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
            {
                text.push_str(&std::fs::read_to_string(path).unwrap_or_default());
            }
        }
        text
    }

    pub fn templates(&self) -> Api<DeploymentTemplate> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    pub fn templates_in(&self, namespace: &str) -> Api<DeploymentTemplate> {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// Create a namespace (the API server requires one before objects in it).
    pub async fn create_namespace(&self, name: &str) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(name.to_string());
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create namespace");
    }

    /// Record every phase the template named `name` goes through, as seen
    /// by a watch (so short-lived phases are not missed between polls).
    pub fn record_phases(&self, name: &str) -> PhaseRecorder {
        let phases = Arc::new(Mutex::new(Vec::<String>::new()));
        let task = {
            let phases = phases.clone();
            let name = name.to_string();
            let stream = watcher(
                self.templates(),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
            .default_backoff()
            .applied_objects();
            tokio::spawn(async move {
                let mut stream = std::pin::pin!(stream);
                while let Some(event) = stream.next().await {
                    let Ok(template) = event else { continue };
                    let Some(phase) = template.status.and_then(|s| s.phrase) else {
                        continue;
                    };
                    if let Ok(mut phases) = phases.lock()
                        && phases.last() != Some(&phase)
                    {
                        phases.push(phase);
                    }
                }
            })
        };
        PhaseRecorder { phases, task }
    }

    pub fn resources(&self) -> Api<DeploymentResource> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Create a template in the scenario's namespace (whatever namespace
    /// the object names).
    pub async fn create(&self, template: &DeploymentTemplate) {
        let mut template = template.clone();
        template.metadata.namespace = Some(self.namespace.clone());
        self.templates()
            .create(&PostParams::default(), &template)
            .await
            .expect("create template");
    }

    /// The leader-election Lease the controller holds with `--leader-elect`
    /// (on the real server the harness gives each scenario its own Lease in
    /// the controller's namespace, where deploy/rbac.yaml allows Leases).
    pub async fn leader_lease(&self) -> k8s_openapi::api::coordination::v1::Lease {
        let flag = |name: &str| {
            self.extra_args
                .iter()
                .position(|a| a == name)
                .and_then(|at| self.extra_args.get(at + 1))
                .cloned()
        };
        let namespace = flag("--leader-election-namespace").unwrap_or_else(|| NS.to_string());
        let name = flag("--leader-election-lease").unwrap_or_else(|| "radwasm-controller".into());
        Api::namespaced(self.client.clone(), &namespace)
            .get(&name)
            .await
            .unwrap_or_else(|e| panic!("Lease {namespace}/{name}: {e}"))
    }

    /// Wait until `check` holds for the template, or fail with the state and
    /// logs. The bound is generous (the whole suite shares two cores); it
    /// only decides how long a broken run takes to say so.
    pub async fn wait_template(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(Option<&DeploymentTemplate>) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let current = self.templates().get_opt(name).await.expect("get template");
            if check(current.as_ref()) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "template {name}: timed out waiting for {what}; last state: {}\n--- controller log ---\n{}",
                    serde_json::to_string_pretty(&current.map(|t| t.status)).unwrap_or_default(),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn wait_phase(&self, name: &str, phase: &str) -> DeploymentTemplate {
        self.wait_template(name, &format!("phase {phase}"), |t| {
            t.and_then(|t| t.status.as_ref())
                .and_then(|s| s.phrase.as_deref())
                == Some(phase)
                && t.is_some_and(|t| {
                    t.metadata.generation == t.status.as_ref().and_then(|s| s.observed_generation)
                })
        })
        .await;
        self.templates().get(name).await.expect("template")
    }

    /// Create template `app` from the three-resource fixture and wait until
    /// it is Ready.
    pub async fn ready_app(&self) {
        self.create(&app_template("app")).await;
        self.wait_phase("app", "Ready").await;
    }

    pub async fn wait_gone(&self, name: &str) {
        self.wait_template(name, "deletion", |t| t.is_none()).await;
    }

    /// DeploymentResources owned by the template named `owner`.
    pub async fn owned(&self, owner: &str) -> Vec<DeploymentResource> {
        let list = self
            .resources()
            .list(&ListParams::default())
            .await
            .expect("list resources");
        list.items
            .into_iter()
            .filter(|r| {
                r.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.name == owner && o.controller == Some(true))
            })
            .collect()
    }

    /// Events recorded about `name`.
    pub async fn events_for(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        let core: Api<Event> = Api::namespaced(self.client.clone(), &self.namespace);
        if let Ok(list) = core.list(&ListParams::default()).await {
            for event in list.items {
                if event.involved_object.name.as_deref() == Some(name) {
                    out.push(format!(
                        "{} {}",
                        event.reason.unwrap_or_default(),
                        event.message.unwrap_or_default()
                    ));
                }
            }
        }
        let modern: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.namespace);
        if let Ok(list) = modern.list(&ListParams::default()).await {
            for event in list.items {
                if event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name) {
                    out.push(format!(
                        "{} {}",
                        event.reason.unwrap_or_default(),
                        event.note.unwrap_or_default()
                    ));
                }
            }
        }
        out
    }

    /// Wait until an Event about `name` with `reason` is recorded; all
    /// events about it so far.
    pub async fn wait_event(&self, name: &str, reason: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = self.events_for(name).await;
            if events.iter().any(|e| e.starts_with(reason)) {
                return events;
            }
            if Instant::now() > deadline {
                panic!(
                    "{name}: no {reason} event; events: {events:?}\n--- controller log ---\n{}",
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn shutdown(mut self) {
        self.kill_controller();
        if let Some(radius) = self.radius.take() {
            radius.shutdown().await;
        }
        if let Some(apiserver) = self.apiserver.take() {
            apiserver.shutdown().await;
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        self.kill_controller();
    }
}

/// A stand-in for the Kubernetes aggregation layer: requests under
/// `/apis/api.ucp.dev/v1alpha3` go to the Radius simulator (which serves
/// that prefix, as Radius does behind an APIService), everything else to
/// the API server; bodies stream, so watches work through it.
pub struct Aggregator {
    addr: std::net::SocketAddr,
    authorizations: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct AggregatorState {
    apiserver: String,
    radius: String,
    client: reqwest::Client,
    authorizations: Arc<Mutex<Vec<String>>>,
}

impl Aggregator {
    async fn start(apiserver: String, radius: String) -> Aggregator {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the aggregation proxy");
        let addr = listener.local_addr().expect("address");
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let state = AggregatorState {
            apiserver,
            radius,
            client: reqwest::Client::new(),
            authorizations: authorizations.clone(),
        };
        let app = axum::Router::new().fallback(aggregate).with_state(state);
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Aggregator {
            addr,
            authorizations,
            task,
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn radius_authorizations(&self) -> Vec<String> {
        self.authorizations
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default()
    }
}

impl Drop for Aggregator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn aggregate(
    axum::extract::State(state): axum::extract::State<AggregatorState>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let target = request
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let to_radius = target.starts_with(radwasm_sim_radius::AGGREGATED_PATH);
    let upstream = if to_radius {
        &state.radius
    } else {
        &state.apiserver
    };
    let (parts, body) = request.into_parts();
    if to_radius && let Ok(mut seen) = state.authorizations.lock() {
        seen.push(
            parts
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string(),
        );
    }
    let body = axum::body::to_bytes(body, 64 << 20)
        .await
        .unwrap_or_default();
    let mut forwarded = state
        .client
        .request(parts.method, format!("{upstream}{target}"))
        .body(body);
    for (name, value) in &parts.headers {
        if name != "host" && name != "content-length" {
            forwarded = forwarded.header(name, value);
        }
    }
    let Ok(answer) = forwarded.send().await else {
        return axum::response::Response::builder()
            .status(502)
            .body(axum::body::Body::empty())
            .expect("response");
    };
    let mut response = axum::response::Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != "content-length" && name != "transfer-encoding" {
            response = response.header(name, value);
        }
    }
    let stream = futures::stream::unfold(answer, |mut answer| async move {
        match answer.chunk().await {
            Ok(Some(bytes)) => Some((Ok::<_, std::io::Error>(bytes), answer)),
            _ => None,
        }
    });
    response
        .body(axum::body::Body::from_stream(stream))
        .expect("response")
}

/// The phases a template went through, in order (repeats collapsed).
pub struct PhaseRecorder {
    phases: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PhaseRecorder {
    pub fn phases(&self) -> Vec<String> {
        self.phases.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

impl Drop for PhaseRecorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A fixture template's JSON text.
/// The samples of a `/metrics` scrape whose line starts with `prefix`,
/// summed (a family's series, or one series by its labels).
pub fn metric_sum(metrics: &str, prefix: &str) -> f64 {
    metrics
        .lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The lines of a `/metrics` scrape counting failed reconciles, of any
/// kind, that are not zero.
pub fn failed_reconciles(metrics: &str) -> Vec<&str> {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("radwasm_reconciles_total")
                && l.contains("outcome=\"error\"")
                && !l.ends_with(" 0")
        })
        .collect()
}

pub fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/arm-templates")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The three-resource app (environment, application, container) the
/// scenarios deploy, as template `name`.
pub fn app_template(name: &str) -> DeploymentTemplate {
    template(
        name,
        &fixture("deploymenttemplate-outputresources-1.json"),
        "",
    )
}

/// The same app with resource names of its own (`{name}-output-resources-…`),
/// for scenarios with several templates in one namespace: two templates
/// deploying the same Radius resource conflict (the second fails with
/// `ResourceConflict`).
pub fn own_app_template(name: &str) -> DeploymentTemplate {
    template(
        name,
        &fixture("deploymenttemplate-outputresources-1.json")
            .replace("output-resources-", &format!("{name}-output-resources-")),
        "",
    )
}

pub fn template(name: &str, template: &str, parameters: &str) -> DeploymentTemplate {
    template_in(NS, name, template, parameters)
}

pub fn template_in(
    namespace: &str,
    name: &str,
    template: &str,
    parameters: &str,
) -> DeploymentTemplate {
    let mut object = DeploymentTemplate::new(
        name,
        DeploymentTemplateSpec {
            template: template.to_string(),
            parameters: parameters.into(),
            provider_config: ProviderConfig::radius(SCOPE).into(),
            repository: None,
        },
    );
    object.metadata.namespace = Some(namespace.to_string());
    object
}

pub fn id(kind: &str, name: &str) -> String {
    format!("{SCOPE}/providers/Applications.Core/{kind}/{name}")
}
