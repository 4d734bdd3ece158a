//! What an operator does and sees on the test node, shared by the node
//! scenarios: a Helm release of the chart in a namespace of its own (Pod
//! Security `restricted` enforced, the controller watching only that
//! namespace) with a Radius simulator of its own on the bridge address,
//! the release's pods and leader Lease, templates created and counted at
//! the simulator, and, when something goes wrong, the pods' logs, the
//! namespace's events and the simulator's counters.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, ResourceExt};
use radwasm::crd::DeploymentTemplate;
use radwasm_sim_radius::{RadiusSim, SimConfig};
use radwasm_test_support::node::{self, Node};

use crate::harness::own_app_template;
use crate::realkube::{client_for, kubectl, ok_stdout};

/// Scenarios that load the node (100 or 1,000 templates) hold this for
/// writing, the others for reading: the heavy ones run alone, so the
/// timings the others observe (lease takeovers) stay those of a node
/// that is not saturated by another scenario.
pub static HEAVY: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The Lease the chart's controller holds by default (`leaderElection.lease`
/// empty), in the release's namespace.
pub const LEASE: &str = "radwasm-controller";
/// The controller's default `--leader-election-lease-duration`.
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the holder renews and a standby looks: a third of the lease.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
/// The pods' `terminationGracePeriodSeconds` (the chart leaves Kubernetes'
/// default).
pub const GRACE_PERIOD: Duration = Duration::from_secs(30);

/// What the scenarios need of the node: where its API server is, helm,
/// the bridge address pods reach the host on, and the controller image's
/// two tags.
pub struct NodeAccess {
    pub node: Node,
    pub kubeconfig: PathBuf,
    pub helm: PathBuf,
    pub bridge: IpAddr,
    pub repository: String,
    pub tags: [String; 2],
}

/// One Helm release of the chart and what belongs to it.
pub struct Release {
    pub name: String,
    pub namespace: String,
    pub client: Client,
    pub radius: RadiusSim,
    pub node: NodeAccess,
    /// Templates this scenario created (each one generation, so each must
    /// reach Radius as exactly one deployment PUT).
    pub created: Vec<String>,
    uninstalled: bool,
}

/// A template phase is `phase` and describes the current generation.
pub fn in_phase(template: &DeploymentTemplate, phase: &str) -> bool {
    let status = template.status.as_ref();
    status.and_then(|s| s.phrase.as_deref()) == Some(phase)
        && template.metadata.generation == status.and_then(|s| s.observed_generation)
}

impl Release {
    /// Create namespace `name` (Pod Security `restricted` enforced), start
    /// a Radius simulator on the bridge address, and `helm install` release
    /// `name` there with image tag `tag` and `values` (`key=value`) on top
    /// of the scenario defaults; returns once the command returned (not
    /// once the pods are Ready: see [`Release::wait_rollout`]).
    pub async fn install(node: NodeAccess, name: &str, tag: &str, values: &[String]) -> Release {
        let client = client_for(&node.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("a client for the node: {e:#}"));
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let namespace: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            }}
        }))
        .expect("namespace object");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        let radius = node::start_radius(SimConfig {
            deploy_duration: Duration::from_millis(300),
            delete_duration: Duration::from_millis(100),
            retry_after_secs: 0,
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("the Radius simulator on {}: {e:#}", node.bridge));
        let release = Release {
            name: name.to_string(),
            namespace: name.to_string(),
            client,
            radius,
            node,
            created: Vec::new(),
            uninstalled: false,
        };
        let mut args = vec![
            "install".to_string(),
            name.to_string(),
            "deploy/chart".to_string(),
        ];
        args.extend(release.values(tag));
        for value in values {
            args.extend(["--set".to_string(), value.clone()]);
        }
        release.helm(&args).await;
        release
    }

    /// The values every scenario sets: its own name and namespace to watch,
    /// the image imported into the node (never pulled), and its simulator.
    pub fn values(&self, tag: &str) -> Vec<String> {
        let radius = format!("http://{}", self.radius.addr());
        [
            format!("name={}", self.name),
            format!("watchNamespace={}", self.namespace),
            format!("image.repository={}", self.node.repository),
            format!("image.tag={tag}"),
            "image.pullPolicy=Never".to_string(),
            format!("radius.url={radius}"),
        ]
        .into_iter()
        .flat_map(|value| ["--set".to_string(), value])
        .collect()
    }

    /// Run helm on the release's namespace (from the repository root);
    /// fails the scenario with its output and the diagnostics.
    pub async fn helm(&self, args: &[String]) -> String {
        let mut full = args.to_vec();
        full.extend([
            "--namespace".to_string(),
            self.namespace.clone(),
            "--kubeconfig".to_string(),
            self.node.kubeconfig.display().to_string(),
        ]);
        let output = tokio::process::Command::new(&self.node.helm)
            .args(&full)
            .current_dir(crate::realkube::repo_root())
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|e| panic!("run {}: {e}", self.node.helm.display()));
        if !output.status.success() {
            self.fail(&format!(
                "helm {full:?} failed ({}):\n{}",
                output.status,
                radwasm_test_support::output_text(&output)
            ))
            .await;
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// kubectl on the node (admin), in the release's namespace.
    pub async fn kubectl(&self, args: &[&str]) -> std::process::Output {
        let mut full = vec!["--namespace", &self.namespace];
        full.extend(args);
        kubectl(&self.node.kubeconfig, &full)
            .await
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e:#}"))
    }

    /// `kubectl rollout status` of the release's Deployment: every replica
    /// of the current template updated, available and Ready (within 4 min;
    /// asked again each minute, as kubectl runs at most one).
    pub async fn wait_rollout(&self) {
        let deployment = format!("deployment/{}", self.name);
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            let output = self
                .kubectl(&["rollout", "status", &deployment, "--timeout=50s"])
                .await;
            if output.status.success() {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "kubectl rollout status {deployment}:\n{}",
                    radwasm_test_support::output_text(&output)
                ))
                .await;
            }
        }
    }

    pub fn pods_api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The release's pods (not those already being deleted).
    pub async fn pods(&self) -> Vec<Pod> {
        let selector = format!("app.kubernetes.io/name={}", self.name);
        self.pods_api()
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("list the release's pods")
            .items
            .into_iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .collect()
    }

    pub async fn lease(&self) -> Option<Lease> {
        Api::<Lease>::namespaced(self.client.clone(), &self.namespace)
            .get_opt(LEASE)
            .await
            .expect("get the leader Lease")
    }

    /// The Lease's holder, if any.
    pub async fn holder(&self) -> Option<String> {
        self.lease()
            .await
            .and_then(|lease| lease.spec?.holder_identity)
            .filter(|holder| !holder.is_empty())
    }

    /// Wait (within `within`) until `check` holds for the Lease's holder;
    /// returns that holder.
    pub async fn wait_holder(
        &self,
        what: &str,
        within: Duration,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Some(holder) = self.holder().await
                && check(&holder)
            {
                return holder;
            }
            if Instant::now() > deadline {
                self.fail(&format!("no leader {what} within {within:?}"))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Create `count` templates named `{prefix}-{i}`, a few at a time.
    pub async fn create_templates(&mut self, prefix: &str, count: usize) -> Vec<String> {
        let names: Vec<String> = (0..count).map(|i| format!("{prefix}-{i}")).collect();
        create_all(&self.client, &self.namespace, &names).await;
        self.created.extend(names.iter().cloned());
        names
    }

    /// Wait until every template this scenario created is Ready (at most
    /// `within`); fails with how many are and the diagnostics otherwise.
    pub async fn wait_all_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let templates: Api<DeploymentTemplate> =
            Api::namespaced(self.client.clone(), &self.namespace);
        loop {
            let list = templates
                .list(&ListParams::default())
                .await
                .expect("list templates");
            let ready = list.items.iter().filter(|t| in_phase(t, "Ready")).count();
            let missing = self
                .created
                .iter()
                .filter(|name| !list.items.iter().any(|t| &t.name_any() == *name))
                .count();
            if ready == self.created.len() && missing == 0 {
                return;
            }
            if Instant::now() > deadline {
                let not_ready: Vec<String> = list
                    .items
                    .iter()
                    .filter(|t| !in_phase(t, "Ready"))
                    .take(5)
                    .map(|t| format!("{}: {:?}", t.name_any(), t.status))
                    .collect();
                self.fail(&format!(
                    "{ready} of {} templates Ready after {within:?} ({missing} missing); some not Ready: {not_ready:#?}",
                    self.created.len()
                ))
                .await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Radius saw exactly one deployment PUT per template created (each
    /// has one generation): none lost, none duplicated.
    pub async fn assert_one_deployment_each(&self) {
        let stats = self.radius.stats();
        let mut wrong = Vec::new();
        for name in &self.created {
            let puts = stats.deployment_puts_of_template(name);
            if puts != 1 {
                wrong.push(format!("{name}: {puts}"));
            }
        }
        if !wrong.is_empty() || stats.deployment_puts != self.created.len() as u64 {
            self.fail(&format!(
                "deployment PUTs per template should all be 1 ({} templates, {} PUTs); not so for: {wrong:?}",
                self.created.len(),
                stats.deployment_puts
            ))
            .await;
        }
    }

    /// Fail the scenario with `message`, the pods' logs (current and
    /// previous containers), the namespace's events and the simulator's
    /// counters.
    pub async fn fail(&self, message: &str) -> ! {
        panic!("{message}\n{}", self.diagnostics().await)
    }

    pub async fn diagnostics(&self) -> String {
        let mut out = String::new();
        let selector = format!("app.kubernetes.io/name={}", self.name);
        out.push_str(&format!(
            "--- leader Lease ---\n{:?}\n",
            self.lease().await.and_then(|l| l.spec)
        ));
        let pods = self
            .pods_api()
            .list(&ListParams::default().labels(&selector))
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        for pod in pods {
            let name = pod.name_any();
            let logs = self
                .kubectl(&[
                    "logs",
                    &name,
                    "--all-containers",
                    "--tail=100",
                    "--previous",
                ])
                .await;
            if logs.status.success() {
                out.push_str(&format!(
                    "--- logs of {name}'s previous container ---\n{}",
                    radwasm_test_support::output_text(&logs)
                ));
            }
        }
        out.push_str(&format!(
            "--- Radius simulator counters ---\n{:#?}\n",
            self.radius.stats()
        ));
        out.push_str(&self.node.node.diagnostics(&self.namespace).await);
        out
    }

    /// Delete the templates (the controller still running takes its
    /// finalizers off), uninstall the release and delete the namespace.
    /// One `deletecollection` request, not kubectl's one DELETE per object,
    /// which takes over a minute for a thousand templates on a busy node.
    pub async fn uninstall(mut self) {
        let templates: Api<DeploymentTemplate> =
            Api::namespaced(self.client.clone(), &self.namespace);
        if let Err(error) = templates
            .delete_collection(&kube::api::DeleteParams::default(), &ListParams::default())
            .await
        {
            self.fail(&format!("deleting the templates: {error}")).await;
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let left = templates
                .list(&ListParams::default())
                .await
                .expect("list templates")
                .items
                .len();
            if left == 0 {
                break;
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "{left} templates still there 600 s after their deletion"
                ))
                .await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let name = self.name.clone();
        self.helm(&[
            "uninstall".into(),
            name,
            "--wait".into(),
            "--timeout=120s".into(),
        ])
        .await;
        ok_stdout(
            &kubectl(
                &self.node.kubeconfig,
                &["delete", "namespace", &self.namespace, "--wait=false"],
            )
            .await
            .expect("kubectl delete namespace"),
            "kubectl delete namespace",
        );
        self.uninstalled = true;
    }
}

impl Drop for Release {
    /// A failed scenario still takes its controllers off the shared node
    /// (its namespace may stay Terminating on the templates' finalizers
    /// until the node goes; nothing runs there any more).
    fn drop(&mut self) {
        if self.uninstalled {
            return;
        }
        let kubeconfig = self.node.kubeconfig.display().to_string();
        let _ = std::process::Command::new(&self.node.helm)
            .args(["uninstall", &self.name, "--namespace", &self.namespace])
            .args(["--kubeconfig", &kubeconfig, "--wait=false"])
            .output();
        let _ = std::process::Command::new("kubectl")
            .arg(format!("--kubeconfig={kubeconfig}"))
            .args(["delete", "namespace", &self.namespace, "--wait=false"])
            .output();
    }
}

/// Create templates `names` (the three-resource app, each with resource
/// names of its own) in `namespace`, eight requests at a time.
pub async fn create_all(client: &Client, namespace: &str, names: &[String]) {
    let templates: Api<DeploymentTemplate> = Api::namespaced(client.clone(), namespace);
    let creations = names.iter().cloned().map(|name| {
        let templates = templates.clone();
        let mut template = own_app_template(&name);
        template.metadata.namespace = Some(namespace.to_string());
        async move {
            templates
                .create(&PostParams::default(), &template)
                .await
                .map(|_| ())
                .map_err(|e| format!("create template {name}: {e}"))
        }
    });
    let results: Vec<Result<(), String>> = futures::stream::iter(creations)
        .buffer_unordered(8)
        .collect()
        .await;
    for result in results {
        if let Err(error) = result {
            panic!("{error}");
        }
    }
}

/// The pod's `Ready` condition is true.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The id of the pod's `controller` container (`containerd://ID` → `ID`).
pub fn container_id(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == "controller")?
        .container_id
        .as_ref()
        .map(|id| id.rsplit("://").next().unwrap_or(id).to_string())
}

/// The host PID of the process running in container `id`: the `radwasm`
/// process whose cgroup path names the container (kubelet's cgroupfs
/// layout, `…/pod<uid>/<container id>`).
pub fn container_pid(id: &str) -> Option<u32> {
    let entries = std::fs::read_dir("/proc").ok()?;
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let proc = PathBuf::from(format!("/proc/{pid}"));
            let comm = std::fs::read_to_string(proc.join("comm")).unwrap_or_default();
            let cgroup = std::fs::read_to_string(proc.join("cgroup")).unwrap_or_default();
            comm.trim() == "radwasm" && cgroup.lines().any(|line| line.ends_with(&format!("/{id}")))
        })
}

/// The cgroup v1 memory directory of the process `pid`.
pub fn memory_cgroup(pid: u32) -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let path = cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _hierarchy = fields.next()?;
        let controllers = fields.next()?;
        let path = fields.next()?;
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| path.trim_start_matches('/').to_string())
    })?;
    Some(Path::new("/sys/fs/cgroup/memory").join(path))
}

/// A cgroup v1 memory file's number (bytes).
pub fn cgroup_number(dir: &Path, file: &str) -> u64 {
    let path = dir.join(file);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A cgroup's working set as kubelet computes it: usage less inactive
/// file pages.
pub fn working_set(dir: &Path) -> u64 {
    let usage = cgroup_number(dir, "memory.usage_in_bytes");
    let stat = std::fs::read_to_string(dir.join("memory.stat")).unwrap_or_default();
    let inactive = stat
        .lines()
        .find_map(|line| line.strip_prefix("total_inactive_file "))
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    usage.saturating_sub(inactive)
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Seconds since the Unix epoch, for comparing with a Lease's renew time
/// (written by a process on the same host).
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The Lease's renew time, in seconds since the Unix epoch.
pub fn renewed_at(lease: &Lease) -> Option<f64> {
    let renewed = lease.spec.as_ref()?.renew_time.as_ref()?;
    Some(renewed.0.as_millisecond() as f64 / 1000.0)
}

/// The shared node (brought up by the first scenario that asks), or None
/// when the node tests are skipped on purpose (`RADWASM_SKIP_NODE=1`).
pub async fn node_access() -> Option<NodeAccess> {
    if node::skip_requested() {
        return None;
    }
    let shared = node::shared(Path::new(env!("CARGO_BIN_EXE_radwasm")))
        .await
        .unwrap_or_else(|e| panic!("the test node: {e:#}"));
    let helm = node::helm_binary()
        .await
        .unwrap_or_else(|e| panic!("helm: {e:#}"));
    Some(NodeAccess {
        kubeconfig: shared.cluster.kubeconfig.clone(),
        helm,
        bridge: IpAddr::V4(node::BRIDGE_ADDRESS),
        repository: node::IMAGE_REPOSITORY.to_string(),
        tags: node::IMAGE_TAGS.map(str::to_string),
        node: shared,
    })
}
